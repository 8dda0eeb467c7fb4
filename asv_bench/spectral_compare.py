"""SpectralClustering side by side: kerneltools vs scikit-learn, one run.

``affinity="rbf"`` (gamma = 0.5), 10 clusters, n points in D = 8 drawn from 10
planted Gaussian blobs (std 1, centres 10 apart on average), float64. Each
case runs in its own subprocess, so its peak resident memory (``ru_maxrss``)
is its own. For each case: the fit time (wall and the process's CPU seconds), the peak memory and the adjusted
Rand index of the labels against the planted clusters.

    python asv_bench/spectral_compare.py                  # n = 10^4, both
    python asv_bench/spectral_compare.py --n 100000 --cases kerneltools
    python asv_bench/spectral_compare.py --cases kerneltools,kerneltools:lobpcg

A case is ``system[:eigen_solver]``; kerneltools also reports its kernel
products (reductions) and their columns.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _runner import emit, run_child  # noqa: E402

D = 8
N_CLUSTERS = 10
GAMMA = 0.5


def make_data(n, seed=0):
    """n points from N_CLUSTERS planted blobs; returns (X, labels)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    centers = rng.uniform(-10, 10, size=(N_CLUSTERS, D))
    y = rng.integers(0, N_CLUSTERS, n)
    return centers[y] + rng.normal(size=(n, D)), y


def child(case, n):
    import resource

    from sklearn.metrics import adjusted_rand_score

    X, y = make_data(n)
    system, _, solver = case.partition(":")
    tally = None
    if system == "sklearn":
        from sklearn.cluster import SpectralClustering
    else:
        from kpca_compare import count_products

        from kerneltools.estimators import SpectralClustering
        tally = count_products()
    model = SpectralClustering(N_CLUSTERS, gamma=GAMMA, random_state=0,
                               eigen_solver=solver or None)
    t0, c0 = time.perf_counter(), time.process_time()
    labels = model.fit_predict(X)
    fit_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"system": system, "solver": solver or "default", "n": n,
                      "fit_s": fit_s, "cpu_s": cpu_s, "peak_mb": rss,
                      "products": None if tally is None else dict(tally),
                      "ari": adjusted_rand_score(y, labels)}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="sklearn,kerneltools")
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--out", default=None, help="also write the table to this file")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    load0 = os.getloadavg()
    rows = [r for case in args.cases.split(",")
            if (r := run_child(__file__, case, [case, str(args.n)])) is not None]
    load1 = os.getloadavg()
    anchor = next((r["fit_s"] for r in rows if r["system"] == "sklearn"), None)
    lines = [
        f"SpectralClustering, affinity='rbf' (gamma = {GAMMA}), {N_CLUSTERS} clusters, "
        f"n = {args.n:,}, D = {D}, float64; one run per case, each in its own process.",
        f"Machine: {platform.node() or 'vm'}, {os.cpu_count()} logical CPUs (shared); "
        f"load average (1 min) {load0[0]:.2f} at start, {load1[0]:.2f} at end.",
        "",
        "| system | eigen_solver | fit (s) | vs scikit-learn | CPU (s) | "
        "peak RSS (MB) | "
        "ARI vs planted | kernel products (columns) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        ratio = f"{anchor / r['fit_s']:.2f}x" if anchor else ""
        prod = "" if r["products"] is None else (f"{r['products']['products']} "
                                                 f"({r['products']['columns']})")
        lines.append(f"| {r['system']} | {r['solver']} | {r['fit_s']:.2f} | {ratio} | "
                     f"{r['cpu_s']:.1f} | {r['peak_mb']:.0f} | {r['ari']:.4f} | "
                     f"{prod} |")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
