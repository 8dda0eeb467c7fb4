"""LabelSpreading / LabelPropagation (rbf) and GaussianProcessClassifier
against scikit-learn: CPU seconds, peak memory and the ratio, in one run.

Each (workload, n, implementation) runs in its own subprocess
(``--child``), so that its peak resident memory (``ru_maxrss``, the
interpreter and imports included) and its CPU seconds (``RUSAGE_SELF``, all
threads) are its own; the parent prints a Markdown table with the load
average before and after.

- ``spreading`` / ``propagation``: 15 features, 10 clustered classes
  (``make_blobs``, ``cluster_std=0.5``), 10% labelled, ``gamma=0.5``;
  LabelSpreading's default ``max_iter=30``, LabelPropagation's capped at 100
  (its default 1,000 takes scikit-learn several minutes at n = 8,000 here).
  scikit-learn stores the n x n affinity (and a normalised copy): 9.2 GB at
  n = 2*10^4, so it runs only up to ``--sklearn-max`` (default 8,000, about
  1.5 GB); ours runs at every size. The label distributions of both are
  compared where both ran (max |difference|).
- ``gpc``: binary GaussianProcessClassifier, ``C * RBF`` with one length
  scale per feature (8 features), the L-BFGS-B fit; the fitted log marginal
  likelihoods of both are compared. Ours runs BLAS on one thread; with
  ``--sklearn-one-thread`` scikit-learn runs once more that way too.

    python asv_bench/semisup_compare.py                      # the defaults below
    python asv_bench/semisup_compare.py --only gpc --sizes 1000
    python asv_bench/semisup_compare.py --only spreading --sizes 8000,20000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_SIZES = {"spreading": [8000, 20000, 100000], "propagation": [8000, 20000],
                 "gpc": [1000]}
ITERATIONS = {"spreading": 30, "propagation": 100}


def label_data(n, seed=0):
    import numpy as np
    from sklearn.datasets import make_blobs

    X, y = make_blobs(n_samples=n, n_features=15, centers=10, cluster_std=0.5,
                      center_box=(-4, 4), random_state=seed)
    rng = np.random.default_rng(seed)
    y[rng.random(n) >= 0.1] = -1
    return X, y


def gpc_data(n, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 8))
    f = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] - 0.5 * X[:, 3]
    y = (f + 0.3 * rng.normal(size=n) > 0).astype(int)
    return X, y


def child(workload, n, impl, out):
    import numpy as np

    if workload == "gpc":
        from sklearn.gaussian_process.kernels import RBF
        from sklearn.gaussian_process.kernels import ConstantKernel as C

        if impl == "ours":
            from kerneltools.estimators import GaussianProcessClassifier as Est
        else:
            from sklearn.gaussian_process import GaussianProcessClassifier as Est
        X, y = gpc_data(n)
        model = Est(C(1.0) * RBF(np.ones(8)), random_state=0)
    else:
        if impl == "ours":
            from kerneltools.estimators import LabelPropagation, LabelSpreading
        else:
            from sklearn.semi_supervised import LabelPropagation, LabelSpreading
        Est = LabelSpreading if workload == "spreading" else LabelPropagation
        X, y = label_data(n)
        model = Est(gamma=0.5, max_iter=ITERATIONS[workload])
    if impl == "ours":  # compile the kernels outside the timing (a warm cache)
        model.fit(X[:200], y[:200]) if workload != "gpc" else None
    import warnings

    warnings.simplefilter("ignore")
    from threadpoolctl import threadpool_limits

    cpu0, t0 = time.process_time(), time.perf_counter()
    with threadpool_limits(1 if impl == "sklearn1" else None, user_api="blas"):
        model.fit(X, y)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = {"cpu": cpu, "wall": wall, "peak_mb": peak}
    if workload == "gpc":
        result["lml"] = float(model.log_marginal_likelihood_value_)
        result["theta"] = model.kernel_.theta.tolist()
    else:
        result["n_iter"] = int(model.n_iter_)
        np.save(out + ".npy", model.label_distributions_)
    Path(out).write_text(json.dumps(result))


def run_one(workload, n, impl, tmp):
    out = os.path.join(tmp, f"{workload}-{n}-{impl}.json")
    cmd = [sys.executable, __file__, "--child", workload, str(n), impl, out]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        return {"error": "over 900 s wall"}
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1:]}
    return json.loads(Path(out).read_text()) | {"out": out}


def main():
    import tempfile

    import numpy as np

    parser = argparse.ArgumentParser()
    parser.add_argument("--child", nargs=4)
    parser.add_argument("--only", default="spreading,propagation,gpc")
    parser.add_argument("--sizes", default=None)
    parser.add_argument("--sklearn-max", type=int, default=8000)
    parser.add_argument("--sklearn-one-thread", action="store_true",
                        help="gpc: also scikit-learn with BLAS on one thread (ours "
                             "runs its BLAS on one thread)")
    args = parser.parse_args()
    if args.child:
        workload, n, impl, out = args.child
        return child(workload, int(n), impl, out)
    print(f"load average before: {os.getloadavg()}")
    rows = ["| workload | n | ours CPU s | sklearn CPU s | ratio | ours MB | "
            "sklearn MB | iterations | agreement |", "|" + "---|" * 9]
    with tempfile.TemporaryDirectory() as tmp:
        for workload in args.only.split(","):
            sizes = ([int(s) for s in args.sizes.split(",")] if args.sizes
                     else DEFAULT_SIZES[workload])
            for n in sizes:
                ours = run_one(workload, n, "ours", tmp)
                ref = (run_one(workload, n, "sklearn", tmp)
                       if n <= args.sklearn_max else {})
                rows.append(_row(workload, n, ours, ref, np))
                print(rows[-1], flush=True)
                if workload == "gpc" and args.sklearn_one_thread:
                    ref1 = run_one(workload, n, "sklearn1", tmp)
                    rows.append(_row(workload, n, ours, ref1, np,
                                     label="gpc (sklearn 1 BLAS thread)"))
                    print(rows[-1], flush=True)
    print(f"load average after: {os.getloadavg()}")
    print("\n".join(rows))


def _row(workload, n, ours, ref, np, label=None):
    if "error" in ours or "error" in ref:
        return f"| {workload} | {n} | error: {ours.get('error') or ref.get('error')} |"
    name = label or workload
    ratio = f"{ref['cpu'] / ours['cpu']:.1f}x" if ref else "-"
    agree = "-"
    if ref and workload == "gpc":
        agree = f"lml {ours['lml']:.6f} vs {ref['lml']:.6f}"
    elif ref:
        a, b = np.load(ours["out"] + ".npy"), np.load(ref["out"] + ".npy")
        agree = f"max diff {np.abs(a - b).max():.1e}"
    iters = f"{ours.get('n_iter', '-')}" + (f" / {ref.get('n_iter')}" if ref else "")
    return (f"| {name} | {n} | {ours['cpu']:.1f} | "
            f"{ref['cpu']:.1f} | {ratio} | {ours['peak_mb']:.0f} | "
            f"{ref['peak_mb']:.0f} | {iters} | {agree} |" if ref else
            f"| {workload} | {n} | {ours['cpu']:.1f} | - | - | {ours['peak_mb']:.0f} | "
            f"- | {iters} | - |")


if __name__ == "__main__":
    main()
