"""pykeops' ``Genred`` vs ``kerneltools.keops.numpy.Genred`` vs a kerneltools
LazyTensor (the anchor), one Gaussian matvec, NumPy arrays, in one run.

    a_i = sum_j exp(-g |x_i - y_j|^2) b_j,   D = 3

For each size: first call (compilation, or a cached kernel) and the median of
``--repeat`` warm calls; the small size shows the per-call overhead. The
anchor builds its LazyTensor formula anew each call (new variables: a new
plan each time); kerneltools' Genred builds its formula once per batch
layout and binds each call's arrays to it (its plan's memo hits), as
pykeops reuses its compiled formula.

    python asv_bench/genred_compare.py --sizes 200 10000 --dtype float32
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

FORMULA = "Exp(-g * SqDist(x, y)) * b"
ALIASES = ["x = Vi(3)", "y = Vj(3)", "b = Vj(1)", "g = Pm(1)"]


def _systems(backend):
    import kerneltools as kt
    from kerneltools.keops.numpy import Genred

    ours = Genred(FORMULA, ALIASES, axis=1)
    out = {
        "kerneltools LazyTensor": lambda x, y, b, g: (
            (-kt.Pm(g) * kt.Vi(x).sqdist(kt.Vj(y))).exp() * kt.Vj(b)).sum(
                axis=1, backend=backend),
        "kerneltools.keops Genred": lambda x, y, b, g: ours(x, y, b, g, backend=backend),
    }
    try:
        from pykeops.numpy import Genred as PkGenred

        theirs = PkGenred(FORMULA, ALIASES, axis=1)
        out["pykeops Genred"] = lambda x, y, b, g: theirs(x, y, b, g, backend="CPU")
    except ImportError:
        pass
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[200, 10000])
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--backend", default="cpu")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()}")
    systems = _systems(args.backend)
    for n in args.sizes:
        rng = np.random.default_rng(0)
        x, y = rng.random((n, 3)).astype(args.dtype), rng.random((n, 3)).astype(args.dtype)
        b, g = rng.random((n, 1)).astype(args.dtype), np.array([2.0], args.dtype)
        ref = None
        anchor = None
        for name, fn in systems.items():
            t0 = time.perf_counter()
            out = fn(x, y, b, g)
            first = time.perf_counter() - t0
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                fn(x, y, b, g)
                times.append(time.perf_counter() - t0)
            med = statistics.median(times)
            anchor = anchor or med
            ref = out if ref is None else ref
            err = float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))
            print(f"N=M={n:>7} {name:26s} first {first * 1e3:9.1f} ms  median "
                  f"{med * 1e3:9.3f} ms  ratio to anchor {med / anchor:6.2f}  "
                  f"max rel diff {err:.1e}")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
