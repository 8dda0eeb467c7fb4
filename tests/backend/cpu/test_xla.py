"""The XLA custom call of the CPU backend (``_xla``), through kerneltools.jax:
the kernels' layouts (the specialised ones packed by jax.numpy, run as
custom calls), and kernels built without OpenMP, whose rows the handler
splits over threads of its own (results equal to the reference)."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the XLA custom call needs JAX (optional extra)")

import jax.numpy as jnp

import kerneltools as kt
from kerneltools.backend._plan import make_plan
from kerneltools.backend.cpu import _backend, _library, _xla
from kerneltools.backend.cpu._compiler import find_compiler
from kerneltools.jax import Vi, Vj


def _plan(formula, d):
    x = np.zeros((10, d), np.float32)
    F = formula(kt.Vi(x), kt.Vj(x))
    return make_plan([F.formula], "Sum", 1, 1, lambda n: x, np.float32, 10, 10)[0]


def test_layouts():
    """Narrow formulas read their arguments only; the dot-product
    micro-kernel (D >= 16) reads chunks and norms too, the many-column Sum
    its B row-major: the layout says so, for the caller to build."""
    assert _xla.plain_layout(_plan(lambda x, y: (-x.sqdist(y)).exp(), 3))
    wide = _plan(lambda x, y: (-x.sqdist(y)).exp(), 32)
    assert not _xla.plain_layout(wide)
    assert _xla.layout(wide).dots == (1,) and _xla.layout(wide).centring
    entry = _xla.kernel_entry(_plan(lambda x, y: (-x.sqdist(y)).exp(), 3))
    assert entry.address and entry.tj >= 32 and entry.state_size > 0
    assert entry.layout == _xla.Layout(vl=16)


CASES = {
    "dots": lambda m, x, y, b: (-m.Vi(x).sqdist(m.Vj(y)) / 64).exp() @ b,
    "many_columns": lambda m, x, y, b: (-m.Vi(x[:, :3]).sqdist(m.Vj(y[:, :3]))).exp() @ b,
    "dot_min": lambda m, x, y, b: (m.Vi(x) | m.Vj(y)).min(axis=1),
    "kmin": lambda m, x, y, b: m.Vi(x).sqdist(m.Vj(y)).argKmin(3, axis=1),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("offset", [0.0, 100.0], ids=["near", "far"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_specialised_layouts_run_as_custom_calls(case, offset, dtype):
    """The specialised kernels (their arrays packed by jax.numpy, far-off
    points centred) run in the custom call and agree with the reference."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((300, 32)) + offset).astype(dtype)
    y = (rng.standard_normal((200, 32)) + offset).astype(dtype)
    b = rng.standard_normal((200, 16)).astype(dtype)
    f = CASES[case]
    ref = f(kt, x.astype(float), y.astype(float), b.astype(float))
    with jax.enable_x64(True):
        got = f(kt.jax, jnp.asarray(x), jnp.asarray(y), jnp.asarray(b))
        lowered = jax.jit(lambda *a: f(kt.jax, *a)).lower(x, y, b).as_text()
    assert "kerneltools_reduce" in lowered and "callback" not in lowered
    if case == "kmin":
        np.testing.assert_array_equal(np.asarray(got), ref)
    else:
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(np.asarray(got, float), ref, rtol=tol,
                                   atol=tol * np.abs(ref).max())


def test_without_openmp_the_handler_splits_rows(tmp_path, monkeypatch):
    comp = find_compiler()
    if not comp.openmp:
        pytest.skip("the compiler has no OpenMP: the kernels are built without it anyway")
    plain = comp.without_openmp("a test")
    monkeypatch.setenv("KERNELTOOLS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    for module in (_backend, _library, _xla):
        monkeypatch.setattr(module, "find_compiler", lambda: plain)
    for module, name in ((_library, "_loaded"), (_backend, "_functions"),
                         (_backend, "_by_signature")):
        monkeypatch.setattr(module, name, {})
    entry = _xla.kernel_entry(_plan(lambda x, y: (-x.sqdist(y)).exp(), 3))
    assert entry.threads == 3
    rng = np.random.default_rng(1)
    x, y = rng.random((2_003, 3)), rng.random((1_001, 3))  # > 2^20 pairs, odd rows
    b = rng.standard_normal((1_001, 2))
    with jax.enable_x64(True):
        got = (-Vi(jnp.asarray(x)).sqdist(Vj(jnp.asarray(y)))).exp() @ jnp.asarray(b)
    ref = np.exp(-((x[:, None] - y[None]) ** 2).sum(-1)) @ b
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-10)


def test_rows_by_chunks_equal_one_call():
    """Past 2^27 pairs the handler runs its rows by chunks (Ctrl-C is seen
    between them): the rows are independent, so the result is the CPU
    backend's, bit for bit (3,001 rows x 60,000: two chunks and a tail)."""
    rng = np.random.default_rng(2)
    x = rng.random((3_001, 3), dtype=np.float32)
    y = rng.random((60_000, 3), dtype=np.float32)
    b = rng.random((60_000, 1), dtype=np.float32)
    got = (-Vi(jnp.asarray(x)).sqdist(Vj(jnp.asarray(y)))).exp() @ jnp.asarray(b)
    ref = (-kt.Vi(x).sqdist(kt.Vj(y))).exp().matmul(b, backend="cpu")
    np.testing.assert_array_equal(np.asarray(got), ref)


# The child installs Python's SIGINT handler itself (as tests/test_processes.py
# does): a run started in the background by a non-interactive shell ignores
# SIGINT, its children inherit that, and then neither Python nor the handler's
# hook (kt_watch_sigint: nothing to chain to) sees the signal.
_INTERRUPTED = r"""
import os, signal, sys, threading, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import numpy as np, jax.numpy as jnp
from kerneltools.jax import Vi, Vj

def k(n):
    x = jnp.asarray(np.random.default_rng(0).random((n, 3), dtype=np.float32))
    return (-Vi(x).sqdist(Vj(x))).exp().sum(axis=1)

k(64).block_until_ready()  # compiled and registered: the call below only runs
threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
t0 = time.perf_counter()
try:
    try:
        k(int(sys.argv[1])).block_until_ready()
        what = "finished"
    except KeyboardInterrupt:
        what = "KeyboardInterrupt"
    except Exception as exc:  # the call's error; Python's KeyboardInterrupt follows
        what = f"{type(exc).__name__}: {exc}"
        time.sleep(0.2)
except KeyboardInterrupt:
    what += " + KeyboardInterrupt"
print(f"{time.perf_counter() - t0:.2f}|{what}")
"""


def test_ctrl_c_stops_a_long_custom_call():
    """SIGINT half a second into a 9*10^10-pair call (minutes uninterrupted)
    stops it within a few seconds, and Python raises KeyboardInterrupt."""
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _INTERRUPTED, "300000"], check=False,
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    seconds, what = proc.stdout.strip().splitlines()[-1].split("|", 1)
    assert "KeyboardInterrupt" in what, what
    assert "finished" not in what
    assert float(seconds) < 10, (seconds, what)
