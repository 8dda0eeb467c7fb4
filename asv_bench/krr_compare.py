"""Kernel ridge regression side by side: kerneltools vs scikit-learn, one run.

Synthetic regression in D = 8 (a smooth function plus noise), the Gaussian
kernel, float64 or float32 (--dtype). Each (system, n, solver) runs in its own subprocess, so the
peak resident memory (``ru_maxrss``, Python and NumPy included) is its own.
Prints a Markdown table: fit and predict time (wall and CPU: the CPU seconds
of all threads, which a shared machine inflates less), peak memory, test R^2,
and the load average around each case.

Solvers of ours: ``auto`` is the estimator's defaults (``tol=1e-6``,
``n_components=1000``; CG above 5,000 points), ``cg`` the same at ``tol=1e-4``,
``exact`` CG at ``tol=1e-10`` (the reference R^2 where Cholesky is out of
reach), ``cholesky`` and ``falkon``; ``warm`` the defaults refitted, as a grid
search over alpha does, on a clone at ``alpha`` after a fit at ``3 alpha``:
the times are the refit's (the landmarks, the preconditioner's Gram matrix
and the first solution reused).

    python asv_bench/krr_compare.py                      # the issue's sizes
    python asv_bench/krr_compare.py --cases sklearn:10000:cholesky,kerneltools:100000:auto
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import time

from _runner import emit, run_child

DEFAULT_CASES = (
    "sklearn:10000:cholesky,kerneltools:10000:cholesky,kerneltools:10000:auto,"
    "kerneltools:10000:cg,kerneltools:100000:auto,kerneltools:100000:cg,"
    "kerneltools:100000:exact,kerneltools:1000000:falkon"
)
D = 8
GAMMA = 0.1
N_TEST = 10_000


def make_data(n, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n + N_TEST, D))
    f = np.sin(2 * X[:, 0]) + np.cos(X[:, 1]) * X[:, 2] + 0.5 * X[:, 3] * X[:, 4] + np.tanh(X[:, 5:].sum(1))
    y = f + 0.3 * rng.normal(size=len(X))
    return X[:n], y[:n], X[n:], f[n:]


def alpha_for(n):
    # A fixed lambda = alpha / n (the penalty of the (1/n)-averaged loss) keeps
    # the same bias/variance trade-off as n grows.
    return 1e-4 * n


def child(system, n, solver, m, dtype):
    import os
    import resource

    import numpy as np

    X, y, Xt, ft = make_data(n)
    X, Xt = X.astype(dtype), Xt.astype(dtype)
    if system == "sklearn":
        from sklearn.kernel_ridge import KernelRidge

        model = KernelRidge(alpha=alpha_for(n), kernel="rbf", gamma=GAMMA)
    else:
        from kerneltools.estimators import KernelRidge

        kw = {"auto": {}, "warm": {}, "cg": {"solver": "cg", "tol": 1e-4},
              "exact": {"solver": "cg", "tol": 1e-10, "max_iter": 200}}.get(
                  solver, {"solver": solver, "tol": 1e-4})
        model = KernelRidge(alpha=alpha_for(n), kernel="rbf", gamma=GAMMA, n_components=m,
                            random_state=0, **kw)
    if solver == "warm":  # the earlier fit of a grid search, not timed
        from sklearn.base import clone

        clone(model).set_params(alpha=3 * alpha_for(n)).fit(X, y)
    if system == "kerneltools":
        model.set_params(verbose=1)  # its progress lines, with times: the profile
    load0 = os.getloadavg()[0]
    log = io.StringIO()
    c0, t0 = time.process_time(), time.perf_counter()
    with contextlib.redirect_stdout(log):
        model.fit(X, y)
    c1, t1 = time.process_time(), time.perf_counter()
    pred = model.predict(Xt)
    t2 = time.perf_counter()
    r2 = 1 - np.mean((pred - ft) ** 2) / np.var(ft)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"system": system, "n": n, "solver": solver, "m": m, "fit_s": t1 - t0,
                      "fit_cpu_s": c1 - c0, "predict_s": t2 - t1, "peak_mb": rss, "r2": r2,
                      "n_iter": getattr(model, "n_iter_", None),
                      "load": f"{load0:.1f}-{os.getloadavg()[0]:.1f}",
                      "log": [ln for ln in log.getvalue().splitlines()
                              if "[KernelRidge]" in ln or "sweep" in ln]}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=DEFAULT_CASES,
                    help="comma-separated system:n:solver (system: sklearn or kerneltools)")
    ap.add_argument("--m", type=int, default=0,
                    help="landmarks (default: 1000 for cg, 5000 for falkon)")
    ap.add_argument("--dtype", default="float64", choices=["float32", "float64"])
    ap.add_argument("--out", default=None, help="also write the table to this file")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        system, n, solver, m, dtype = args.child
        child(system, int(n), solver, int(m), dtype)
        return
    rows = []
    for case in args.cases.split(","):
        system, n, solver = case.split(":")
        m = args.m or (5000 if solver == "falkon" else 1000)
        row = run_child(__file__, case, [system, n, solver, str(m), args.dtype])
        if row is not None:
            rows.append(row)
    lines = [
        f"Kernel ridge, synthetic D = {D}, rbf gamma = {GAMMA}, alpha = 1e-4 n, {args.dtype}, "
        f"test R^2 against the noiseless function on {N_TEST} points.",
        "",
        "| system | n | solver | m | fit (s) | fit CPU (s) | predict (s) | peak RSS (MB) "
        "| test R^2 | CG iters | load avg |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        m = r["m"] if r["system"] == "kerneltools" and r["solver"] != "cholesky" else ""
        lines.append(
            f"| {r['system']} | {r['n']:,} | {r['solver']} | {m} | {r['fit_s']:.1f} | "
            f"{r['fit_cpu_s']:.1f} | {r['predict_s']:.2f} | {r['peak_mb']:.0f} | "
            f"{r['r2']:.5f} | {r['n_iter'] or ''} | {r['load']} |"
        )
    for r in rows:  # the solver's own progress lines: where the time went
        if r.get("log"):
            lines += ["", f"{r['system']} n={r['n']:,} {r['solver']}:"]
            lines += [f"    {ln}" for ln in r["log"]]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
