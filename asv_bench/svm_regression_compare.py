#!/usr/bin/env python
"""SVR, NuSVR and OneClassSVM: kerneltools against scikit-learn (libsvm) and
scikit-learn-intelex (oneDAL: SVR and NuSVR only), one run (issue 40).

Data: regression, ``make_friedman1(1.25 n, 10 features, noise=1)``, X and y
standardised, the first n points to fit, the rest to test (R^2); one-class,
the shape of scikit-learn#6617 (``n x 19``): a standardised mixture of
``make_blobs`` (8 centres) and 2% uniform outliers, tested on held-out
points (the fraction predicted inliers). rbf, gamma="scale"; SVR ``C=1,
epsilon=0.1``; NuSVR ``C=1, nu=0.5``; OneClassSVM ``nu`` from ``--nu``.
For each system: wall and CPU seconds of ``fit``, its peak resident memory,
the test score, the support-vector count, the load average while it ran;
ratios are CPU seconds of the other system over ours.

    PYTHONPATH=. /work/benchvenv/bin/python asv_bench/svm_regression_compare.py \\
        --model svr nusvr --n 1e4
    PYTHONPATH=. /work/benchvenv/bin/python asv_bench/svm_regression_compare.py \\
        --model oneclass --n 278217 --nu 0.05 --systems kerneltools
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _measure import measure  # noqa: E402


def regression(n: int, seed: int = 0):
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(int(n * 1.25), n_features=10, noise=1.0, random_state=seed)
    X = (X - X.mean(0)) / X.std(0)
    y = (y - y.mean()) / y.std()
    return X[:n], y[:n], X[n:], y[n:]


def one_class(n: int, seed: int = 0, d: int = 19):
    from sklearn.datasets import make_blobs

    m = int(n * 1.25)
    k = int(0.02 * m)
    X, _ = make_blobs(m - k, d, centers=8, cluster_std=2.0, random_state=seed)
    rng = np.random.default_rng(seed)
    X = np.vstack([X, rng.uniform(X.min(0), X.max(0), (k, d))])
    X = X[rng.permutation(m)]
    X = (X - X.mean(0)) / X.std(0)
    return X[:n], None, X[n:], None


def systems(model: str, nu: float):
    from sklearn import svm as sk

    from kerneltools import estimators as ours

    name = {"svr": "SVR", "nusvr": "NuSVR", "oneclass": "OneClassSVM"}[model]
    kw = {"svr": {"C": 1.0, "epsilon": 0.1}, "nusvr": {"C": 1.0, "nu": 0.5},
          "oneclass": {"nu": nu}}[model]
    out = {"kerneltools": getattr(ours, name), "scikit-learn": getattr(sk, name)}
    try:
        import sklearnex.svm as ex  # noqa: PLC0415
    except ImportError:
        pass
    else:
        if hasattr(ex, name):
            out["sklearnex"] = getattr(ex, name)
    return out, kw


def score(est, Xt, yt):
    if yt is None:  # the fraction of held-out points predicted inliers
        return float(np.mean(est.predict(Xt) == 1))
    return float(est.score(Xt, yt))


def run_case(model: str, n: int, chosen, nu: float) -> None:
    X, y, Xt, yt = (one_class if model == "oneclass" else regression)(n)
    found, kw = systems(model, nu)
    cpu = {}
    for name, cls in found.items():
        if chosen and name not in chosen:
            continue
        m = measure(lambda cls=cls: cls(kernel="rbf", gamma="scale", **kw).fit(X, y))
        s = score(m.out, Xt, yt)
        cpu[name] = m.cpu_s
        print(f"| {model} | {n:>7,} | {name:<12} | {m.wall_s:8.1f} | {m.cpu_s:8.1f} | "
              f"{m.peak_mb:8.0f} | {s:.4f} | {len(m.out.support_):>7,} | "
              f"{m.load_text()} |", flush=True)
    if "kerneltools" in cpu:
        for name, c in cpu.items():
            if name != "kerneltools":
                print(f"# {model} n={n:,}: {name} CPU s / ours = "
                      f"{c / cpu['kerneltools']:.2f}", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", nargs="+", default=["svr"],
                    choices=["svr", "nusvr", "oneclass"])
    ap.add_argument("--n", nargs="+", type=float, default=[1e4])
    ap.add_argument("--nu", type=float, default=0.5, help="OneClassSVM's nu")
    ap.add_argument("--systems", nargs="*", default=None,
                    help="kerneltools, scikit-learn, sklearnex (default: all)")
    args = ap.parse_args(argv)
    print(f"# load average at start: {os.getloadavg()}", flush=True)
    print("| model | n | system | wall s | CPU s | peak MB | test score | SVs | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model in args.model:
        for n in args.n:
            run_case(model, int(n), args.systems, args.nu)


if __name__ == "__main__":
    main()
