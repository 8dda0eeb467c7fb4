"""The same plain scikit-learn code, plain and under ``python -m kerneltools.accel``.

Three workloads written against scikit-learn only (``WORKLOADS``): kernel
ridge (rbf), Gaussian-process regression (``C * RBF + White``, fixed
hyperparameters: scikit-learn's optimizer at n = 10^4 takes tens of minutes
here; the mean at every test point, the std at the first ``N_STD``) and a
``Nystroem + Ridge`` pipeline, on synthetic D = 8 data. Each
(workload, n, mode) runs in its own subprocess, ``python accel_compare.py
--child ...`` (mode "sklearn") or ``python -m kerneltools.accel
accel_compare.py --child ...`` (mode "accel"), so that its peak resident
memory (``ru_maxrss``, interpreter and imports included) is its own. Prints a
Markdown table: fit and predict time, peak memory, test R^2, and, where both
modes ran, how far the accelerated predictions are from scikit-learn's
(max |difference| / max |scikit-learn's|) and the time ratio.

With fixed hyperparameters our GP's ``solver="auto"`` is exact up to 10^4
points (one Cholesky for ``alpha_`` and the log marginal likelihood, where
scikit-learn factors twice; K built by row blocks and factored in place), and
iterative above. One run on the shared 2-core machine (load 4.7): n = 10^4,
scikit-learn 42.6 s fit + 0.9 s predict, 2437 MB; accel 22.2 s + 2.2 s,
1563 MB, the same predictions and std (max rel. diff 0): 1.8x.

    python asv_bench/accel_compare.py                         # n = 10^4 both, 10^5 ours
    python asv_bench/accel_compare.py --sizes 2000 --only krr,nystroem
    python asv_bench/accel_compare.py --sklearn-max 10000     # bigger n: accel only
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

D = 8
N_TEST = 2_000
N_STD = 100


def make_data(n, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n + N_TEST, D))
    f = np.sin(2 * X[:, 0]) + np.cos(X[:, 1]) * X[:, 2] + np.tanh(X[:, 3:].sum(1))
    y = f + 0.3 * rng.normal(size=len(X))
    return X[:n], y[:n], X[n:], f[n:]


# -- the workloads: scikit-learn code, nothing of kerneltools ------------------------
def krr(n):
    from sklearn.kernel_ridge import KernelRidge

    return KernelRidge(alpha=1e-4 * n, kernel="rbf", gamma=0.1), _mean


def gp(n):
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    kernel = C(1.0) * RBF(2.0) + WhiteKernel(0.09)
    return GaussianProcessRegressor(kernel, optimizer=None), _mean_and_std


def nystroem(n):
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline

    return make_pipeline(Nystroem(gamma=0.1, n_components=500, random_state=0),
                         Ridge(alpha=1e-3)), _mean


def _mean(model, Xt):
    pred = model.predict(Xt)
    return pred, pred


def _mean_and_std(model, Xt):
    import numpy as np

    mean = model.predict(Xt)
    _, std = model.predict(Xt[:N_STD], return_std=True)
    return mean, np.concatenate([mean, std])


WORKLOADS = {"krr": krr, "gp": gp, "nystroem": nystroem}


def child(workload, n, save):
    import resource

    import numpy as np

    X, y, Xt, ft = make_data(n)
    model, predict = WORKLOADS[workload](n)
    t0 = time.perf_counter()
    model.fit(X, y)
    t1 = time.perf_counter()
    pred, outputs = predict(model, Xt)
    t2 = time.perf_counter()
    np.save(save, outputs)
    r2 = 1 - np.mean((pred - ft) ** 2) / np.var(ft)
    est = model.steps[0][1] if hasattr(model, "steps") else model
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"workload": workload, "n": n, "fit_s": t1 - t0,
                      "predict_s": t2 - t1, "peak_mb": peak_mb, "r2": r2,
                      "class": type(est).__module__}))


def run_case(workload, n, mode, save, timeout):
    cmd = [sys.executable, __file__, "--child", workload, str(n), save]
    if mode == "accel":
        cmd[1:1] = ["-m", "kerneltools.accel"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"{workload} n={n} {mode}: over {timeout} s, stopped", file=sys.stderr)
        return {"workload": workload, "n": n, "mode": mode, "timeout": timeout}
    if proc.returncode != 0:
        print(f"{workload} n={n} {mode}: failed\n{proc.stderr[-2000:]}",
              file=sys.stderr)
        return None
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    row["mode"] = mode
    expected = "kerneltools" if mode == "accel" else "sklearn"
    if not row["class"].startswith(expected):
        raise RuntimeError(
            f"{workload} {mode}: ran {row['class']}, expected {expected}")
    print(row, file=sys.stderr, flush=True)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000", help="comma-separated n")
    ap.add_argument("--sklearn-max", type=int, default=10_000,
                    help="largest n run plain (scikit-learn's dense solvers: "
                    "n^2 memory)")
    ap.add_argument("--only", default=",".join(WORKLOADS),
                    help="comma-separated workloads")
    ap.add_argument("--case-timeout", type=float, default=900,
                    help="seconds after which a case is stopped (shown as such)")
    ap.add_argument("--out", default=None, help="also write the table to this file")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.child[2])
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for workload in args.only.split(","):
            for n in map(int, args.sizes.split(",")):
                saved = {}
                for mode in ("sklearn", "accel"):
                    if mode == "sklearn" and n > args.sklearn_max:
                        continue
                    saved[mode] = os.path.join(tmp, f"{workload}-{n}-{mode}.npy")
                    row = run_case(workload, n, mode, saved[mode], args.case_timeout)
                    if row is not None:
                        rows.append(row)
                _compare(rows, saved)
    load = os.getloadavg()
    lines = [
        "Plain scikit-learn code, plain and under `python -m kerneltools.accel`; "
        f"synthetic D = {D}, {N_TEST} test points; load average "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1 / 5 / 15 min) at the end, "
        "on a shared machine.",
        "",
        "| workload | n | mode | fit (s) | predict (s) | peak RSS (MB) | test R^2 | "
        "max rel. diff vs sklearn | sklearn / accel time |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        if "timeout" in r:
            lines.append(f"| {r['workload']} | {r['n']:,} | {r['mode']} | "
                         f"> {r['timeout']:.0f} (stopped) | | | | | |")
            continue
        lines.append(
            f"| {r['workload']} | {r['n']:,} | {r['mode']} | {r['fit_s']:.2f} | "
            f"{r['predict_s']:.2f} | {r['peak_mb']:.0f} | {r['r2']:.4f} | "
            f"{r.get('diff', '')} | {r.get('speedup', '')} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


def _compare(rows, saved):
    """The accel row's distance to scikit-learn's predictions and its speed-up."""
    import numpy as np

    if not all(Path(p).exists() for p in saved.values()) or len(saved) < 2:
        return  # one mode only, failed or stopped
    ref, got = np.load(saved["sklearn"]), np.load(saved["accel"])
    plain, accel = rows[-2], rows[-1]
    accel["diff"] = f"{np.abs(got - ref).max() / np.abs(ref).max():.1e}"
    ratio = ((plain["fit_s"] + plain["predict_s"])
             / (accel["fit_s"] + accel["predict_s"]))
    accel["speedup"] = f"{ratio:.1f}x"


if __name__ == "__main__":
    main()
