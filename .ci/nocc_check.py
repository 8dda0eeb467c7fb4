"""Part of .ci/nocc: with no system C compiler on PATH, reductions run on the
compiled C backend built by zig cc (not on NumPy), on more than one thread."""

import threading
import warnings

import numpy as np

import kerneltools as kt
from kerneltools.backend.cpu import _backend, _library, _threads
from kerneltools.backend.cpu._compiler import find_compiler
from kerneltools.exceptions import BackendFallbackWarning

comp = find_compiler()
assert comp.ok and comp.command[1:] == ("cc",) and "zig" in comp.command[0], comp
threads, real = set(), _threads.run_pieces


def spy(call, pieces):
    def traced(*piece):
        threads.add(threading.get_ident())
        call(*piece)

    real(traced, pieces)


_backend.run_pieces = spy
warnings.simplefilter("error", BackendFallbackWarning)  # NumPy would warn
x = np.random.default_rng(0).random((20_000, 3))
K = (-kt.Vi(x).sqdist(kt.Vj(x)) * 2.0).exp()
a = K.sum(axis=1)  # backend "auto"
ref = np.exp(-2.0 * ((x[:100, None] - x[None]) ** 2).sum(-1)).sum(1)
assert np.allclose(a[:100, 0], ref, rtol=1e-12)
assert _library.compile_count() + len(_library._loaded) > 0, "no kernel was loaded"
assert len(threads) >= min(2, _threads.cores()), f"threads used: {len(threads)}"
print(f"ok: {comp.description}; {comp.threads} ({len(threads)} threads)")
