"""kerneltools on Dask vs in memory, one run (issue 12's benchmark).

A ``dask.distributed`` LocalCluster of 2 single-threaded worker processes
(Dask's nanny sets OMP_NUM_THREADS=1 in each) against the in-memory CPU
backend with its 2 OpenMP threads, on the same data (float32, D = 3,
uniform in the unit cube):

* a Gaussian kernel product ``K @ b`` of N = M points;
* exact k-NN (K = 10) of N queries among M points, by
  ``NearestNeighbors.kneighbors`` (the estimator's automatic choice, and
  ``algorithm="brute"``).

The Dask inputs are persisted on the workers first (as they would be on a
cluster), and the first call of each (kernel compilation or loading in every
process) is left out; times are medians of ``--repeat`` runs.

Then a simulated scale-out: the same product with the queries cut into 2, 4
and 8 chunks (and the reduced points into 1 and 2), from the scheduler's
task stream: tasks, median seconds per partial-reduction task, and the bytes
of task outputs (the partial states that travel to the merges) next to the
inputs each task needs, to argue how the work spreads over more machines.

    python asv_bench/dask_compare.py               # N = M = 10^5
    python asv_bench/dask_compare.py --n 20000 --repeat 2 --out table.md
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from _runner import emit


def _median_time(fn, repeat):
    fn()  # warm: compilation, caches, workers' imports
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()

    import dask
    import dask.array as da
    from distributed import Client, LocalCluster, get_task_stream

    import kerneltools as kt
    from kerneltools.estimators import NearestNeighbors

    n, d, k = args.n, 3, 10
    rng = np.random.default_rng(0)
    x = rng.random((n, d), dtype=np.float32)
    y = rng.random((n, d), dtype=np.float32)
    b = rng.random((n, 1), dtype=np.float32)
    sigma = 0.1

    def gauss(x, y):
        return (-(0.5 / sigma**2) * kt.Vi(x).sqdist(kt.Vj(y))).exp() @ b

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    client = Client(cluster)
    rows = []
    try:
        dx = da.from_array(x, chunks=(n // 2, d)).persist()
        dy = da.from_array(y, chunks=(n, d)).persist()
        ref = gauss(x, y)
        got = gauss(dx, dy).compute()
        err = float(np.abs(got - ref).max() / np.abs(ref).max())
        t_mem = _median_time(lambda: gauss(x, y), args.repeat)
        t_dask = _median_time(lambda: gauss(dx, dy).compute(), args.repeat)
        rows.append(("Gaussian K @ b", t_mem, t_dask, f"max rel. diff {err:.1e}"))

        for algo in ("auto", "brute"):
            nn = NearestNeighbors(n_neighbors=k, algorithm=algo).fit(y)
            ind_ref = nn.kneighbors(x, return_distance=False)
            ind = nn.kneighbors(dx, return_distance=False).compute()
            same = float((ind == ind_ref).all(axis=1).mean())
            t_mem = _median_time(lambda: nn.kneighbors(x), args.repeat)
            t_dask = _median_time(lambda: dask.compute(*nn.kneighbors(dx)), args.repeat)
            rows.append((f"k-NN kneighbors, K = {k} ({algo}: {nn._fit_method})", t_mem, t_dask,
                         f"identical rows {same:.4f}"))

        scale = []
        for cx in (2, 4, 8):
            for cy in (1, 2):
                sx = da.from_array(x, chunks=(-(-n // cx), d)).persist()
                sy = da.from_array(y, chunks=(-(-n // cy), d)).persist()
                gauss(sx, sy).compute()  # warm
                with get_task_stream(client) as ts:
                    t0 = time.perf_counter()
                    gauss(sx, sy).compute()
                    wall = time.perf_counter() - t0
                part = [r for r in ts.data if "kt-partial" in str(r["key"])]
                secs = [sum(s["stop"] - s["start"] for s in r["startstops"]
                            if s["action"] == "compute") for r in part]
                out_bytes = sum(r.get("nbytes", 0) for r in part)
                in_bytes = x.nbytes // cx + y.nbytes // cy + b.nbytes // cy
                scale.append((cx, cy, len(part), statistics.median(secs), wall, out_bytes,
                              in_bytes))
    finally:
        client.close()
        cluster.close()

    lines = [f"N = M = {n:,}, D = {d}, float32; LocalCluster of 2 single-threaded workers "
             f"vs in memory with 2 threads; medians of {args.repeat}", "",
             "| case | in memory (s) | Dask (s) | Dask / in memory | check |",
             "|---|---:|---:|---:|---|"]
    for name, t_mem, t_dask, check in rows:
        lines.append(f"| {name} | {t_mem:.3f} | {t_dask:.3f} | {t_dask / t_mem:.2f}x | {check} |")
    lines += ["", "Scale-out of the Gaussian product (x chunks x y chunks):", "",
              "| x chunks | y chunks | partial tasks | median s / task | wall (s) | "
              "partial states out (MB) | inputs per task (MB) |",
              "|---:|---:|---:|---:|---:|---:|---:|"]
    for cx, cy, nt, med, wall, ob, ib in scale:
        lines.append(f"| {cx} | {cy} | {nt} | {med:.3f} | {wall:.3f} | {ob / 1e6:.2f} | "
                     f"{ib / 1e6:.2f} |")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
