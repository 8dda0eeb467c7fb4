#!/usr/bin/env python
"""Multiclass SVC with sample weights: kerneltools against scikit-learn
(libsvm), one run (issue 40's case: 10 classes, 64 features).

Data: ``make_classification(1.25 n, 64 features, 32 informative, 10 classes,
flip_y=0.02)``, standardised, the first n points to fit, the rest to test;
sample weights uniform in [0.5, 2] (seeded); rbf, C = 1, gamma="scale". For
each system: wall and CPU seconds of ``fit``, its peak resident memory, the
test accuracy, the support-vector count, the load average while it ran; the
ratio is scikit-learn's CPU seconds over ours.

    PYTHONPATH=. /work/benchvenv/bin/python asv_bench/svm_multiclass_compare.py --n 1e4
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

    X, y = make_classification(int(n * 1.25), 64, n_informative=32, n_classes=10,
                               flip_y=0.02, random_state=seed)
    X = (X - X.mean(0)) / X.std(0)
    w = np.random.default_rng(seed).uniform(0.5, 2.0, n)
    return X[:n], y[:n], w, X[n:], y[n:]


def main(argv=None) -> None:
    from sklearn.svm import SVC as SkSVC

    from kerneltools.estimators import SVC as OurSVC

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", nargs="+", type=float, default=[1e4])
    args = ap.parse_args(argv)
    print(f"# load average at start: {os.getloadavg()}", flush=True)
    print("| n | system | wall s | CPU s | peak MB | test acc | SVs | load |")
    print("|---|---|---|---|---|---|---|---|")
    for n in map(int, args.n):
        X, y, w, Xt, yt = data(n)
        cpu = {}
        for name, cls in (("kerneltools", OurSVC), ("scikit-learn", SkSVC)):
            m = measure(lambda cls=cls, X=X, y=y, w=w:
                        cls().fit(X, y, sample_weight=w))
            acc = float(np.mean(m.out.predict(Xt) == yt))
            cpu[name] = m.cpu_s
            print(f"| {n:>7,} | {name:<12} | {m.wall_s:8.1f} | {m.cpu_s:8.1f} | "
                  f"{m.peak_mb:8.0f} | {acc:.4f} | {len(m.out.support_):>7,} | "
                  f"{m.load_text()} |", flush=True)
        print(f"# n={n:,}: scikit-learn CPU s / ours = "
              f"{cpu['scikit-learn'] / cpu['kerneltools']:.2f}", flush=True)


if __name__ == "__main__":
    main()
