"""Nystroem side by side: kerneltools vs scikit-learn, one run.

n = 100,000 points in D = 8 (a mixture of Gaussian blobs of unequal sizes),
the Gaussian kernel (gamma = 0.1), m = 1,000 landmarks, float64. Each case
runs in its own subprocess, so its peak resident memory (``ru_maxrss``,
Python and NumPy included) is its own. For each case: the time to fit, to
transform the n training points, the peak memory, the time of the landmark
selection alone (timed apart, before the fit) and the relative error
``|K - F F^T|_F / |K|_F`` of the features F on 2,000 of the points.

    python asv_bench/nystroem_compare.py                 # 3 interleaved runs
    python asv_bench/nystroem_compare.py --n 20000 --repeats 1 \\
        --cases sklearn:uniform,kerneltools:kmeans++
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

DEFAULT_CASES = (
    "sklearn:uniform,kerneltools:uniform,kerneltools:kmeans++,kerneltools:rls,"
    "kerneltools:rpcholesky"
)
D = 8
GAMMA = 0.1
N_CHECK = 2_000


def make_data(n, seed=0):
    """n points from 200 Gaussian blobs (std 0.5) whose sizes vary 20-fold."""
    import numpy as np

    rng = np.random.default_rng(seed)
    weights = rng.uniform(1, 20, size=200)
    centers = rng.uniform(-4, 4, size=(200, D))
    labels = rng.choice(200, size=n, p=weights / weights.sum())
    return centers[labels] + 0.5 * rng.normal(size=(n, D))


def _select(strategy, X, m):
    """The landmark selection alone (kerneltools' public functions)."""
    from kerneltools.estimators import nystroem as ny
    from kerneltools.kernels import make_kernel
    from kerneltools.linalg import select_landmarks

    kernel = make_kernel("rbf", gamma=GAMMA)
    if strategy == "kmeans++":
        return ny.kmeans_plusplus(kernel, X, m, random_state=0)
    if strategy == "rls":
        return ny.ridge_leverage_sample(kernel, X, m, random_state=0)
    return select_landmarks(kernel, X, m, method=strategy, random_state=0)


def child(system, strategy, n, m):
    import resource

    import numpy as np

    X = make_data(n)
    select_s = None
    if system == "sklearn":
        from sklearn.kernel_approximation import Nystroem

        model = Nystroem("rbf", gamma=GAMMA, n_components=m, random_state=0)
    else:
        from kerneltools.estimators.nystroem import Nystroem

        model = Nystroem(
            "rbf", gamma=GAMMA, n_components=m, random_state=0, landmarks=strategy
        )
        if strategy != "uniform":
            t = time.perf_counter()
            _select(strategy, X, m)
            select_s = time.perf_counter() - t
    t0 = time.perf_counter()
    model.fit(X)
    t1 = time.perf_counter()
    F = model.transform(X)
    t2 = time.perf_counter()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = np.random.default_rng(1).choice(n, N_CHECK, replace=False)
    Xc, Fc = X[rows], F[rows]
    K = np.exp(-GAMMA * ((Xc[:, None] - Xc[None]) ** 2).sum(-1))
    err = np.linalg.norm(K - Fc @ Fc.T) / np.linalg.norm(K)
    print(
        json.dumps(
            {
                "system": system,
                "landmarks": strategy,
                "n": n,
                "m": m,
                "fit_s": t1 - t0,
                "transform_s": t2 - t1,
                "peak_mb": rss,
                "select_s": select_s,
                "rel_err": err,
            }
        )
    )


def _run_case(case, n, m):
    system, strategy = case.split(":")
    out = subprocess.run(
        [sys.executable, __file__, "--child", system, strategy, str(n), str(m)],
        check=False,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        print(f"{case}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
        return None
    row = json.loads(out.stdout.strip().splitlines()[-1])
    print(row, file=sys.stderr, flush=True)
    return row


def _median_rows(runs):
    """One row per case: the median of each measure over the case's runs."""
    import statistics

    rows = []
    for case_runs in runs.values():
        row = dict(case_runs[0], runs=len(case_runs))
        for key in ("fit_s", "transform_s", "peak_mb", "select_s", "rel_err"):
            if row[key] is not None:
                row[key] = statistics.median(r[key] for r in case_runs)
        rows.append(row)
    return rows


def _table(rows, header):
    lines = header + [
        "",
        (
            "| system | landmarks | fit (s) | transform (s) | fit + transform (s) | "
            "peak RSS (MB) | selection alone (s) | rel. error | runs |"
        ),
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        sel = f"{r['select_s']:.2f}" if r["select_s"] is not None else ""
        lines.append(
            f"| {r['system']} | {r['landmarks']} | {r['fit_s']:.2f} | "
            f"{r['transform_s']:.2f} | {r['fit_s'] + r['transform_s']:.2f} | "
            f"{r['peak_mb']:.0f} | {sel} | {r['rel_err']:.4f} | {r['runs']} |"
        )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--cases",
        default=DEFAULT_CASES,
        help="comma-separated system:landmarks (system: sklearn or kerneltools)",
    )
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--m", type=int, default=1_000)
    ap.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="runs of each case, interleaved (the table shows medians)",
    )
    ap.add_argument("--out", default=None, help="also write the table to this file")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        system, strategy, n, m = args.child
        child(system, strategy, int(n), int(m))
        return
    load0 = os.getloadavg()
    runs = {case: [] for case in args.cases.split(",")}
    for _ in range(args.repeats):
        for case, case_runs in runs.items():
            if (row := _run_case(case, args.n, args.m)) is not None:
                case_runs.append(row)
    load1 = os.getloadavg()
    header = [
        (
            f"Nystroem, n = {args.n:,} points in D = {D} (200 Gaussian blobs of "
            f"unequal sizes), rbf gamma = {GAMMA}, m = {args.m:,} landmarks, "
            "float64, fit then transform of the n points; rel. error = "
            f"|K - F F^T|_F / |K|_F on {N_CHECK:,} of them. Medians of "
            f"{args.repeats} interleaved runs, each in its own process."
        ),
        (
            f"Machine: {platform.node() or 'vm'}, {os.cpu_count()} logical CPUs; "
            f"load average (1 min) {load0[0]:.2f} at start, {load1[0]:.2f} at end."
        ),
    ]
    text = _table(_median_rows({k: r for k, r in runs.items() if r}), header)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
