#!/usr/bin/env python
"""Binary SVC: kerneltools against scikit-learn (libsvm) and
scikit-learn-intelex (oneDAL), one run.

Data (issue 40): ``make_classification(n, 28 features, 14 informative,
flip_y=0.05, class_sep=0.8)``, standardised, 80/20 train/test split; rbf,
C = 1, gamma="scale". For each system: wall and CPU seconds of ``fit``, the
peak resident memory of the fit, the test accuracy, the support-vector count,
the load average while it ran; the ratios are CPU seconds of the other system
over ours. scikit-learn-intelex is run where it imports (``/work/benchvenv``).

    PYTHONPATH=. /work/benchvenv/bin/python asv_bench/svm_compare.py --n 1e4
    PYTHONPATH=. /work/benchvenv/bin/python asv_bench/svm_compare.py --n 1e4 4e4
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _measure import measure  # noqa: E402


def data(n: int, seed: int = 0):
    from sklearn.datasets import make_classification

    X, y = make_classification(int(n * 1.25), 28, n_informative=14, flip_y=0.05,
                               class_sep=0.8, random_state=seed)
    X = (X - X.mean(0)) / X.std(0)
    return X[:n], y[:n], X[n:], y[n:]


def systems():
    from sklearn.svm import SVC as SkSVC

    from kerneltools.estimators import SVC as OurSVC

    out = {"kerneltools": OurSVC, "scikit-learn": SkSVC}
    try:
        from sklearnex.svm import SVC as ExSVC  # noqa: PLC0415
    except ImportError:
        print("# scikit-learn-intelex not importable here: skipped", flush=True)
    else:
        out["sklearnex"] = ExSVC
    return out


def run_case(n: int, chosen) -> None:
    X, y, Xt, yt = data(n)
    rows = {}
    for name, cls in systems().items():
        if chosen and name not in chosen:
            continue
        m = measure(lambda cls=cls: cls(C=1.0, kernel="rbf", gamma="scale").fit(X, y))
        est = m.out
        acc = float(np.mean(est.predict(Xt) == yt))
        rows[name] = (m, acc, int(len(est.support_)))
        print(f"| {n:>7,} | {name:<12} | {m.wall_s:8.1f} | {m.cpu_s:8.1f} | "
              f"{m.peak_mb:8.0f} | {acc:.4f} | {rows[name][2]:>7,} | "
              f"{m.load_text()} |", flush=True)
    ours = rows.get("kerneltools")
    if ours:
        for name, (m, _, _) in rows.items():
            if name != "kerneltools":
                print(f"# n={n:,}: {name} CPU s / ours = {m.cpu_s / ours[0].cpu_s:.2f}",
                      flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", nargs="+", type=float, default=[1e4])
    ap.add_argument("--systems", nargs="*", default=None,
                    help="kerneltools, scikit-learn, sklearnex (default: all)")
    args = ap.parse_args(argv)
    print(f"# load average at start: {os.getloadavg()}", flush=True)
    print("| n | system | wall s | CPU s | peak MB | test acc | SVs | load |")
    print("|---|---|---|---|---|---|---|---|")
    for n in args.n:
        run_case(int(n), args.systems)


if __name__ == "__main__":
    main()
