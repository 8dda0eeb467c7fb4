#!/usr/bin/env python
"""DBSCAN, KNNImputer and HDBSCAN: kerneltools against scikit-learn (and, for
HDBSCAN, ``fast_hdbscan`` and the ``hdbscan`` package), one run (issue 41).

Each (case, system) runs in its own subprocess (``--child``), so that its
peak resident memory (``ru_maxrss``, interpreter and imports included; the
figure before the call is given too) is its own; CPU seconds are the
child's process time (all threads) for the call alone, and the 1-minute load
average is read before and after. Labels / imputed values are written to a
temporary folder and compared in the parent:

- DBSCAN: 3*10^4 x 9, 10 Gaussian blobs (std 1, centres in [-10, 10]^9),
  ``eps`` giving about 1,000 neighbours per point (measured on 500 points
  and printed), ``min_samples=10``; labels must be identical.
- KNNImputer: 20,640 x 8 (California housing's shape; correlated Gaussian
  features, the data set is not downloaded) at 10, 30 and 60% missing,
  ``n_neighbors=5``; the table gives the largest difference.
- HDBSCAN: 10^5 x 2, 20 blobs with standard deviations uniform in [0.2, 2]
  (centres in [-50, 50]^2), ``min_cluster_size=25``; fast_hdbscan's numba
  compilation is excluded (one fit on 2,000 points first, in the same
  child). The table gives the number of clusters, the adjusted Rand index
  against scikit-learn's labels and whether they are identical (HDBSCAN's
  labels depend on the MST chosen among equal-weight ones: mutual
  reachability ties at core distances).

    PYTHONPATH=. /work/benchvenv/bin/python asv_bench/density_compare.py
    ... --only hdbscan --systems kerneltools,sklearn
    ... --only dbscan,dbscan100k,dbscan180k   # the last two: ours alone
    ... --only dbscan100k --systems kerneltools,sklearn
    ... --only hdbscan228   # 4*10^4 x 228 (hdbscan#504's shape), ours alone

- HDBSCAN 4*10^4 x 228: ``make_blobs``, 20 centres in [-10, 10]^228,
  standard deviations uniform in [1, 4], ``min_cluster_size=25``; ours
  alone unless ``--systems`` names others (scikit-learn did not finish in
  420 s wall, hdbscan#504 quotes 11 minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CASES = ("dbscan", "knn10", "knn30", "knn60", "hdbscan")
#: Larger DBSCAN cases, ours alone unless ``--systems`` names scikit-learn
#: (it stores 10^8 and more neighbour indices): (points, eps giving ~1,000 neighbours
#: per point, measured with scikit-learn on 500 points: 1e5 x 9 eps 2.9
#: between 821 and 1,229; 1.8e5 x 9 eps 2.6: 963).
DBSCAN_LARGE = {"dbscan100k": (100_000, 2.9), "dbscan180k": (180_000, 2.6)}
#: Cases run for kerneltools alone unless ``--systems`` names the others.
OURS_ALONE = {*DBSCAN_LARGE, "hdbscan228"}
SYSTEMS = {"dbscan": ("kerneltools", "sklearn"),
           "dbscan100k": ("kerneltools", "sklearn"),
           "dbscan180k": ("kerneltools", "sklearn"),
           "hdbscan": ("kerneltools", "sklearn", "fast_hdbscan", "hdbscan"),
           "hdbscan228": ("kerneltools", "sklearn", "fast_hdbscan", "hdbscan")}
for _c in ("knn10", "knn30", "knn60"):
    SYSTEMS[_c] = ("kerneltools", "sklearn")
DBSCAN_EPS = 3.8


def dbscan_data(n=30_000):
    from sklearn.datasets import make_blobs

    return make_blobs(n, 9, centers=10, cluster_std=1.0,
                      center_box=(-10, 10), random_state=0)[0]


def knn_data(frac):
    rng = np.random.default_rng(0)
    A = rng.normal(size=(8, 8))
    X = rng.normal(size=(20_640, 8)) @ A
    X[rng.random(X.shape) < frac] = np.nan
    return X


def hdbscan_data(case="hdbscan"):
    from sklearn.datasets import make_blobs

    if case == "hdbscan228":
        std = np.random.default_rng(0).uniform(1.0, 4.0, 20)
        return make_blobs(40_000, 228, centers=20, cluster_std=std,
                          center_box=(-10, 10), random_state=0)[0]

    std = np.random.default_rng(0).uniform(0.2, 2.0, 20)
    return make_blobs(100_000, 2, centers=20, cluster_std=std,
                      center_box=(-50, 50), random_state=0)[0]


def _estimator(case, system):
    if case.startswith("dbscan"):
        if system == "kerneltools":
            from kerneltools.estimators import DBSCAN
        else:
            from sklearn.cluster import DBSCAN
        n, eps = DBSCAN_LARGE.get(case, (30_000, DBSCAN_EPS))
        return dbscan_data(n), lambda X: DBSCAN(eps=eps, min_samples=10
                                                ).fit(X).labels_
    if case.startswith("knn"):
        if system == "kerneltools":
            from kerneltools.estimators import KNNImputer
        else:
            from sklearn.impute import KNNImputer
        return knn_data(int(case[3:]) / 100), lambda X: KNNImputer().fit_transform(X)
    return hdbscan_data(case), _hdbscan_fit(system)


def _hdbscan_fit(system):
    if system == "fast_hdbscan":
        import fast_hdbscan

        fast_hdbscan.HDBSCAN(min_cluster_size=25).fit(hdbscan_data()[:2000])
        return lambda X: fast_hdbscan.HDBSCAN(min_cluster_size=25).fit(X).labels_
    if system == "hdbscan":
        import hdbscan

        return lambda X: hdbscan.HDBSCAN(min_cluster_size=25).fit(X).labels_
    if system == "kerneltools":
        from kerneltools.estimators import HDBSCAN
    else:
        from sklearn.cluster import HDBSCAN
    return lambda X: HDBSCAN(min_cluster_size=25, copy=True).fit(X).labels_


def child(case, system, out):
    X, fit = _estimator(case, system)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    load0 = os.getloadavg()[0]
    c0, t0 = time.process_time(), time.perf_counter()
    result = fit(X)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    np.save(out, np.asarray(result))
    print(json.dumps(dict(cpu_s=cpu, wall_s=wall, base_mb=base,
                          peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                          / 1024, load=[load0, os.getloadavg()[0]])))


def _run(case, system, tmp):
    out = Path(tmp) / f"{case}-{system}.npy"
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, __file__, "--child", case, system, str(out)],
                          capture_output=True, text=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        return {"error": proc.stderr.strip().splitlines()[-1][:100]}, None
    m = json.loads(proc.stdout.strip().splitlines()[-1])
    # the whole process tree's CPU (the hdbscan package's joblib workers are
    # not in the child's process_time), data and imports included
    m["tree_cpu_s"] = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    return m, np.load(out)


def _agreement(case, result, ref):
    if ref is None or result is None:
        return "-"
    if case.startswith("knn"):
        return f"max diff {np.nanmax(np.abs(result - ref)):.1e}"
    from sklearn.metrics import adjusted_rand_score

    same = np.array_equal(result, ref)
    return (f"{result.max() + 1} clusters, ARI {adjusted_rand_score(ref, result):.4f}"
            f"{', identical' if same else ''}")


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument("--systems", default=None)
    args = ap.parse_args(argv)
    if case_eps := [c for c in args.only.split(",") if c == "dbscan"]:
        from sklearn.neighbors import NearestNeighbors

        X = dbscan_data()
        g = NearestNeighbors(radius=DBSCAN_EPS).fit(X).radius_neighbors_graph(X[:500])
        print(f"DBSCAN eps={DBSCAN_EPS}: {g.nnz / 500:.0f} neighbours per point "
              f"({case_eps[0]})")
    print("| case | system | CPU s | wall s | process-tree CPU s (setup incl.) | "
          "peak MB (before) | load | vs kerneltools (CPU) | agreement with "
          "scikit-learn |\n|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.only.split(","):
            systems = [s for s in SYSTEMS[case]
                       if not args.systems or s in args.systems.split(",")]
            if case in OURS_ALONE and not args.systems:
                systems = ["kerneltools"]  # scikit-learn only when named
            runs = {s: _run(case, s, tmp) for s in systems}
            ref = runs.get("sklearn", (None, None))[1]
            ours = runs.get("kerneltools", ({}, None))[0].get("cpu_s")
            for s, (m, result) in runs.items():
                if "error" in m:
                    print(f"| {case} | {s} | error: {m['error']} |")
                    continue
                ratio = f"{m['cpu_s'] / ours:.1f}x" if ours else "-"
                print(f"| {case} | {s} | {m['cpu_s']:.2f} | {m['wall_s']:.2f} | "
                      f"{m['tree_cpu_s']:.2f} | "
                      f"{m['peak_mb']:.0f} ({m['base_mb']:.0f}) | "
                      f"{m['load'][0]:.1f}-{m['load'][1]:.1f} | {ratio} | "
                      f"{_agreement(case, result, ref)} |", flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:5])
    else:
        main(sys.argv[1:])
