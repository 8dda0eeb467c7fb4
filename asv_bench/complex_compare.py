"""Non-uniform DFT: kerneltools' ComplexLazyTensor (the anchor) vs pykeops'
ComplexLazyTensor vs the same sum as two real kerneltools formulas (what a
user wrote before complex support) vs dense NumPy, in one run.

    a_i = sum_j exp(-2i pi f_i p_j) w_j,   f, p in [0, 1), w complex, D = 1

For each size: first call (compilation, or a cached kernel) and the median of
``--repeat`` warm calls, the ratio to the anchor and the largest difference
relative to the anchor's largest entry. NumPy dense runs while its N x M
complex matrix fits in ``--dense-max`` entries.

    python asv_bench/complex_compare.py --sizes 2000 20000 --dtype float32
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from _runner import warm_median


def _systems(backend: str, dense_max: int) -> dict:
    import kerneltools as kt

    def ours(p, f, w):
        return (-2j * np.pi * kt.Vj(p) * kt.Vi(f)).exp().matmul(w, backend=backend)

    def two_real(p, f, w):
        phase = 2 * np.pi * kt.Vj(p) * kt.Vi(f)
        wr, wi = kt.Vj(np.ascontiguousarray(w.real)), kt.Vj(np.ascontiguousarray(w.imag))
        c, s = phase.cos(), phase.sin()
        re = (c * wr + s * wi).sum(axis=1, backend=backend)
        im = (c * wi - s * wr).sum(axis=1, backend=backend)
        return re + 1j * im

    def dense(p, f, w):
        if len(p) * len(f) > dense_max:
            return None
        return np.exp(-2j * np.pi * f * p.T) @ w

    out = {"kerneltools ComplexLazyTensor": ours, "kerneltools two real formulas": two_real,
           "NumPy dense": dense}
    try:
        from pykeops.numpy import LazyTensor as PkLazyTensor

        def pykeops(p, f, w):
            P, F = PkLazyTensor(p[None, :, :]), PkLazyTensor(f[:, None, :])
            W = PkLazyTensor(w[None, :, :])
            return ((-2j * np.pi * P * F).exp() * W).sum(axis=1, backend="CPU")

        out["pykeops ComplexLazyTensor"] = pykeops
    except ImportError:
        pass
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 20000])
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--dense-max", type=int, default=2 * 10**7)
    args = ap.parse_args()
    cdtype = np.complex64 if args.dtype == "float32" else np.complex128
    print(f"load average at start: {os.getloadavg()}")
    systems = _systems(args.backend, args.dense_max)
    for n in args.sizes:
        rng = np.random.default_rng(0)
        p, f = rng.random((n, 1)).astype(args.dtype), rng.random((n, 1)).astype(args.dtype)
        w = (rng.standard_normal((n, 1)) + 1j * rng.standard_normal((n, 1))).astype(cdtype)
        ref = anchor = None
        for name, fn in systems.items():
            t0 = time.perf_counter()
            try:
                out = fn(p, f, w)
            except Exception as exc:  # a peer that cannot run this case
                print(f"N=M={n:>7} {name:30s} failed: {type(exc).__name__}: {exc}"[:300])
                continue
            first = time.perf_counter() - t0
            if out is None:
                print(f"N=M={n:>7} {name:30s} skipped (N x M over --dense-max)")
                continue
            med = warm_median(fn, (p, f, w), args.repeat)
            anchor = anchor or med
            out = np.asarray(out).reshape(-1)
            ref = out if ref is None else ref
            err = float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))
            print(f"N=M={n:>7} {name:30s} first {first * 1e3:9.1f} ms  median "
                  f"{med * 1e3:9.3f} ms  ratio to anchor {med / anchor:6.2f}  "
                  f"max rel diff {err:.1e}")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
