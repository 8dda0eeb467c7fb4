"""GPU benchmark: kerneltools' CUDA backend vs pykeops vs dense CuPy, in one run.

Gaussian mat-vec ``K @ b``, log-sum-exp and ``argKmin(10)`` on N = M points
in D = 3, float32, data resident on the GPU for every system (CuPy arrays for
kerneltools and dense CuPy, torch CUDA tensors for pykeops). Times are medians
of repeated calls after a warm-up call (which compiles), synchronised.

    python asv_bench/cuda_compare.py --sizes 10000 100000 1000000 --out results.json
    python asv_bench/cuda_compare.py --sweep          # launch-shape variants at N = 10^6

Dense CuPy runs where the N x M matrix fits in the GPU's memory (in place);
elsewhere its row says why not.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback

import numpy as np

GAMMA = 10.0  # exp(-GAMMA |x - y|^2) on points uniform in the unit cube
KNN = 10


def _sync():
    import cupy

    cupy.cuda.Device().synchronize()


def _timed(fn, repeat):
    t0 = time.perf_counter()
    out = fn()
    _sync()
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        _sync()
        times.append(time.perf_counter() - t0)
    return out, first, statistics.median(times)


def _kt_cases(x, y, b):
    import kerneltools as kt

    def d2():
        return kt.Vi(x).sqdist(kt.Vj(y))

    return {
        "gauss_matvec": lambda: (-d2() * GAMMA).exp() @ b,
        "logsumexp": lambda: (-d2() * GAMMA).logsumexp(axis=1),
        "argkmin": lambda: d2().argKmin(KNN, axis=1),
    }


def _keops_cases(x, y, b):
    import torch
    from pykeops.torch import LazyTensor as PL

    xt = torch.as_tensor(x, device="cuda")
    yt = torch.as_tensor(y, device="cuda")
    bt = torch.as_tensor(b, device="cuda")

    def d2():
        return ((PL(xt[:, None, :]) - PL(yt[None, :, :])) ** 2).sum(-1)

    return {
        "gauss_matvec": lambda: (-d2() * GAMMA).exp() @ bt,
        "logsumexp": lambda: (-d2() * GAMMA).logsumexp(dim=1),
        "argkmin": lambda: d2().argKmin(KNN, dim=1),
    }


def _dense_cases(x, y, b):
    import cupy

    free = cupy.cuda.Device().mem_info[0]
    n, m = len(x), len(y)
    need = n * m * x.dtype.itemsize * 1.2

    def matrix():
        D = x @ y.T
        D *= -2
        D += (x * x).sum(1)[:, None]
        D += (y * y).sum(1)[None, :]
        return D

    def gauss():
        D = matrix()
        D *= -GAMMA
        cupy.exp(D, out=D)
        return D @ b

    def lse():
        D = matrix()
        D *= -GAMMA
        mx = D.max(1, keepdims=True)
        D -= mx
        cupy.exp(D, out=D)
        return cupy.log(D.sum(1, keepdims=True)) + mx

    def argk():
        D = matrix()
        idx = cupy.argpartition(D, KNN, axis=1)[:, :KNN]
        vals = cupy.take_along_axis(D, idx, 1)
        return cupy.take_along_axis(idx, cupy.argsort(vals, 1), 1)

    cases = {"gauss_matvec": gauss, "logsumexp": lse, "argkmin": argk}
    if need > free * 0.8:
        why = f"needs {need / 1e9:.0f} GB for the {n} x {m} matrix, {free / 1e9:.0f} GB free"
        return {k: why for k in cases}
    if n * m * 8 * 1.2 > free * 0.8:  # argpartition's int64 indices
        cases["argkmin"] = f"argpartition needs {n * m * 8 / 1e9:.0f} GB of int64 indices"
    return cases


def _as_numpy(a):
    import cupy

    if hasattr(a, "detach"):
        return a.detach().cpu().numpy()
    if isinstance(a, cupy.ndarray):
        return cupy.asnumpy(a)
    return np.asarray(a)


def _compare(case, got, ref):
    g, r = _as_numpy(got).astype(np.float64), _as_numpy(ref).astype(np.float64)
    if case == "argkmin":
        return float(np.mean(np.sort(g, 1) == np.sort(r, 1)))  # agreement of the sets
    return float(np.max(np.abs(g - r)) / max(np.max(np.abs(r)), 1e-300))


def run(sizes, repeat, systems):
    import cupy

    rows = []
    for n in sizes:
        rng = np.random.default_rng(0)
        xh = rng.random((n, 3), dtype=np.float32)
        yh = rng.random((n, 3), dtype=np.float32)
        bh = rng.random((n, 1), dtype=np.float32)
        x, y, b = cupy.asarray(xh), cupy.asarray(yh), cupy.asarray(bh)
        builders = {"kerneltools": lambda: _kt_cases(x, y, b),
                    "pykeops": lambda: _keops_cases(xh, yh, bh),
                    "dense cupy": lambda: _dense_cases(x, y, b)}
        outs = {}
        for system in systems:
            try:
                cases = builders[system]()
            except Exception as exc:
                cases = {k: f"{type(exc).__name__}: {exc}" for k in
                         ("gauss_matvec", "logsumexp", "argkmin")}
                traceback.print_exc()
            for case, fn in cases.items():
                row = {"n": n, "case": case, "system": system}
                if isinstance(fn, str):
                    row["skipped"] = fn
                else:
                    cupy.get_default_memory_pool().free_all_blocks()
                    try:
                        out, first, med = _timed(fn, repeat if n < 10**6 else max(2, repeat // 2))
                        row.update(first_s=first, median_s=med,
                                   pool_bytes=cupy.get_default_memory_pool().total_bytes())
                        outs[(case, system)] = out
                    except Exception as exc:
                        row["skipped"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                        traceback.print_exc()
                rows.append(row)
                print(json.dumps(row), flush=True)
        for case in ("gauss_matvec", "logsumexp", "argkmin"):
            ref = outs.get((case, "dense cupy"), outs.get((case, "pykeops")))
            if ref is not None and (case, "kerneltools") in outs:
                for row in rows:
                    if row["n"] == n and row["case"] == case and row["system"] == "kerneltools":
                        row["vs_reference"] = _compare(case, outs[(case, "kerneltools")], ref)
        del outs
    return rows


def sweep(n, repeat):
    """Launch-shape variants of the generated kernels, at N = M = n."""
    import cupy

    from kerneltools.backend import _cuda_backend as cb

    rng = np.random.default_rng(0)
    x = cupy.asarray(rng.random((n, 3), dtype=np.float32))
    y = cupy.asarray(rng.random((n, 3), dtype=np.float32))
    b = cupy.asarray(rng.random((n, 1), dtype=np.float32))
    default = json.loads(json.dumps(cb.TUNING))
    rows = []
    variants = [(256, 2, 4), (256, 1, 4), (128, 4, 4), (256, 2, 8), (256, 4, 8)]
    for block, rows_per_thread, unroll in variants:
        cb.TUNING.update(block={4: block, 8: block // 2}, rows=rows_per_thread,
                         unroll=unroll, by_reduction={})
        cb._by_signature.clear()
        cases = _kt_cases(x, y, b)
        for case in ("gauss_matvec", "logsumexp", "argkmin"):
            fn = cases[case]
            try:
                _, first, med = _timed(fn, repeat)
                row = dict(n=n, case=case, block=block, rows=rows_per_thread,
                           unroll=unroll, median_s=med)
            except Exception as exc:
                row = dict(n=n, case=case, block=block, rows=rows_per_thread,
                           unroll=unroll, skipped=f"{type(exc).__name__}: {exc}")
            rows.append(row)
            print(json.dumps(row), flush=True)
    cb.TUNING.clear()
    cb.TUNING.update(default)
    cb._by_signature.clear()
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10**4, 10**5, 10**6])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--systems", nargs="+", default=["kerneltools", "pykeops", "dense cupy"])
    parser.add_argument("--sweep", action="store_true", help="launch-shape variants only")
    parser.add_argument("--sweep-n", type=int, default=10**6)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    meta = {"device": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
            "cupy": cupy.__version__}
    print(json.dumps(meta), flush=True)
    rows = sweep(args.sweep_n, args.repeat) if args.sweep else run(args.sizes, args.repeat,
                                                                   args.systems)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"meta": meta, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
