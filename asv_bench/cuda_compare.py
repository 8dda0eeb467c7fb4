"""GPU benchmark: kerneltools' CUDA backend vs pykeops vs dense CuPy, in one run.

Gaussian mat-vec ``K @ b``, log-sum-exp and ``argKmin(10)`` on N = M points
in D = 3, float32, data resident on the GPU for every system (CuPy arrays for
kerneltools and dense CuPy, torch CUDA tensors for pykeops). Times are medians
of repeated calls after a warm-up call (which compiles), synchronised.

    python asv_bench/cuda_compare.py --sizes 10000 100000 1000000 --out results.json
    python asv_bench/cuda_compare.py --sweep          # launch-shape variants at N = 10^6
    python asv_bench/cuda_compare.py --ranges         # block-sparse: CUDA vs our CPU path

``--ranges``: the block-sparse reductions, at N = M = ``--ranges-n`` (10^6),
D = 3, float32, uniform in the unit cube, on the CUDA backend (its native
block-sparse kernel, one launch for every block) against our C backend (the
CPU path): the pruned exact k-NN (``NearestNeighbors(n_neighbors=10)``, fit
+ kneighbors, host arrays in and out) and the Gaussian kernel product
truncated at 5 sigma (asv_bench/truncated_compare.py's formula and
description, built once; host and device-resident inputs). The former CUDA
path (one dense reduction per output block from Python) runs once at
``--old-path-n`` points for the ratio. Each row says how many native and
dense CUDA launches a call made.

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

    from kerneltools.backend.cuda import _backend as cb

    rng = np.random.default_rng(0)
    x = cupy.asarray(rng.random((n, 3), dtype=np.float32))
    y = cupy.asarray(rng.random((n, 3), dtype=np.float32))
    b = cupy.asarray(rng.random((n, 1), dtype=np.float32))
    default = json.loads(json.dumps(cb.TUNING))
    rows = []
    # (block, rows per thread, unroll, rows whose exps are a polynomial on
    # the FMA pipes: the exp unit's share offloaded, TUNING["exp_poly_rows"])
    variants = [(256, 2, 4, 0), (256, 1, 4, 0), (128, 4, 4, 0), (256, 2, 8, 0), (256, 4, 8, 0),
                (256, 2, 4, 1), (256, 4, 4, 1), (128, 4, 4, 1), (256, 4, 8, 1), (256, 4, 4, 2),
                (256, 8, 4, 1), (256, 8, 4, 2)]
    first_out = {}
    for block, rows_per_thread, unroll, poly in variants:
        cb.TUNING.update(block={4: block, 8: block // 2}, rows=rows_per_thread,
                         unroll=unroll, by_reduction={}, exp_poly_rows=poly)
        cb._by_signature.clear()
        cases = _kt_cases(x, y, b)
        for case in ("gauss_matvec", "logsumexp", "argkmin"):
            if poly and case == "argkmin":  # no exp
                continue
            fn = cases[case]
            shape = dict(n=n, case=case, block=block, rows=rows_per_thread, unroll=unroll,
                         exp_poly_rows=poly)
            try:
                _, first, med = _timed(fn, repeat)
                row = dict(shape, median_s=med)
                out = cupy.asnumpy(cupy.asarray(fn())).astype(np.float64)
                ref = first_out.setdefault(case, out)
                row["max_rel_diff_vs_first_variant"] = float(
                    np.max(np.abs(out - ref) / (np.abs(ref) + 1e-30)))
            except Exception as exc:
                row = dict(shape, skipped=f"{type(exc).__name__}: {exc}")
            rows.append(row)
            print(json.dumps(row), flush=True)
    cb.TUNING.clear()
    cb.TUNING.update(default)
    cb._by_signature.clear()
    return rows


def _counting(backend):
    """Wrap ``backend``'s run / run_ranges to count calls: the counter dict."""
    calls = {"native": 0, "dense": 0}
    run, run_ranges = backend.run, backend.run_ranges

    def counted_run(*a, **k):
        calls["dense"] += 1
        return run(*a, **k)

    def counted_ranges(*a, **k):
        calls["native"] += 1
        return run_ranges(*a, **k)

    backend.run, backend.run_ranges = counted_run, counted_ranges
    return calls


def _ranges_cases(n, sigma, cell):
    """name -> {backend or variant: callable}: the block-sparse workloads."""
    import cupy

    import kerneltools as kt
    from kerneltools.estimators import NearestNeighbors

    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    import truncated_compare as T  # asv_bench/: the formula and its description

    rng = np.random.default_rng(0)
    x = rng.random((n, 3), dtype=np.float32)
    y = rng.random((n, 3), dtype=np.float32)
    b = rng.random((n, 1), dtype=np.float32)
    t0 = time.perf_counter()
    bs = T.description(x, y, sigma, cell)
    built = time.perf_counter() - t0
    K = T.truncated_gaussian(x, y, sigma) * kt.Vj(b)
    xc, yc, bc = cupy.asarray(x), cupy.asarray(y), cupy.asarray(b)
    Kc = T.truncated_gaussian(xc, yc, sigma) * kt.Vj(bc)

    def knn(backend):
        return lambda: NearestNeighbors(n_neighbors=KNN, backend=backend).fit(y).kneighbors(x)

    meta = {"description_s": built, "density": bs.density}
    return meta, {
        "pruned_knn_d3": {"cuda": knn("cuda"), "cpu": knn("cpu")},
        "truncated_gauss": {"cuda": lambda: K.sum(axis=1, ranges=bs, backend="cuda"),
                            "cuda device-resident": lambda: Kc.sum(axis=1, ranges=bs),
                            "cpu": lambda: K.sum(axis=1, ranges=bs, backend="cpu")},
    }


def ranges_run(n, repeat, old_n, sigma=0.01, cell=0.04):
    """The block-sparse benchmark (see the module docstring)."""
    from kerneltools.backend import _dispatch

    cuda = _dispatch.BACKENDS["cuda"]
    calls = _counting(cuda)
    rows = []
    for size, old in ((n, False), (old_n, True)):
        if not size:
            continue
        meta, cases = _ranges_cases(size, sigma, cell)
        print(json.dumps({"n": size, **meta}), flush=True)
        for case, systems in cases.items():
            outs = {}
            for system, fn in systems.items():
                if old and not system.startswith("cuda"):
                    continue
                label = f"{system} per-block (former path)" if old else system
                row = {"n": size, "case": case, "system": label, **meta}
                calls.update(native=0, dense=0)
                if old:  # the dispatcher's fallback: one dense reduction per block
                    cuda.ranges_unsupported = lambda plan: "the former path, measured"
                try:
                    out, first, med = _timed(fn, 1 if old else repeat)
                    row.update(first_s=first, median_s=med,
                               launches_per_call={k: v // (1 + (0 if old else repeat))
                                                  for k, v in calls.items()})
                    outs[system] = out
                except Exception as exc:
                    row["skipped"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                    traceback.print_exc()
                finally:
                    cuda.__dict__.pop("ranges_unsupported", None)
                rows.append(row)
                print(json.dumps(row), flush=True)
            ref = outs.get("cpu")
            for row in rows:
                got = outs.get(row["system"].split(" per-block")[0])
                if ref is None or got is None or row["n"] != size or row["case"] != case:
                    continue
                if case == "pruned_knn_d3":  # tie-tolerant: the distances
                    row["vs_cpu"] = _compare("gauss_matvec", got[0], ref[0])
                    row["same_indices"] = float(np.mean(_as_numpy(got[1]) == ref[1]))
                else:
                    row["vs_cpu"] = _compare(case, got, ref)
        cpu_rows = {r["case"]: r for r in rows if r["n"] == size and r["system"] == "cpu"}
        for row in rows:
            base = cpu_rows.get(row["case"])
            if row["n"] == size and base and "median_s" in row and "median_s" in base:
                row["speedup_vs_cpu"] = base["median_s"] / row["median_s"]
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10**4, 10**5, 10**6])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--systems", nargs="+", default=["kerneltools", "pykeops", "dense cupy"])
    parser.add_argument("--sweep", action="store_true", help="launch-shape variants only")
    parser.add_argument("--sweep-n", type=int, default=10**6)
    parser.add_argument("--ranges", action="store_true",
                        help="block-sparse reductions only: CUDA vs the CPU path")
    parser.add_argument("--ranges-n", type=int, default=10**6)
    parser.add_argument("--old-path-n", type=int, default=10**5,
                        help="size of the one run of the former per-block path (0: none)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    meta = {"device": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
            "cupy": cupy.__version__}
    print(json.dumps(meta), flush=True)
    if args.ranges:
        rows = ranges_run(args.ranges_n, args.repeat, args.old_path_n)
    elif args.sweep:
        rows = sweep(args.sweep_n, args.repeat)
    else:
        rows = run(args.sizes, args.repeat, args.systems)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"meta": meta, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
