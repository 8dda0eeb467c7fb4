#!/usr/bin/env python
"""SVC.predict with many support vectors: kerneltools against scikit-learn
(libsvm), one run (issue 40: 10^5 queries, 3*10^4 support vectors).

Prediction does not depend on how the model was found, so both estimators
are fitted on a small problem (rbf, gamma = 1/28) and then given the same
binary model: 3*10^4 support vectors (standard normal, 28 features), dual
coefficients uniform in [-1, 1], intercept 0.1. For each system: wall and
CPU seconds of ``predict`` on the queries, its peak resident memory, the
load average; the ratio is scikit-learn's CPU seconds over ours; the
predictions are compared (equal away from the boundary).

    PYTHONPATH=. /work/benchvenv/bin/python asv_bench/svm_predict_compare.py
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _measure import measure  # noqa: E402


def with_model(est, sv, coef):
    """``est`` (fitted, binary) carrying the given support vectors and
    libsvm-signed coefficients."""
    half = len(sv) // 2
    est.support_ = np.arange(len(sv), dtype=np.int32)
    est.support_vectors_ = sv
    est._n_support = np.array([half, len(sv) - half], dtype=np.int32)
    est._dual_coef_ = coef[None, :]
    est._intercept_ = np.array([0.1])
    if hasattr(est, "_public_state"):
        est._public_state()
    else:
        est.dual_coef_, est.intercept_ = -est._dual_coef_, -est._intercept_
    return est


def main(argv=None) -> None:
    from sklearn.svm import SVC as SkSVC

    from kerneltools.estimators import SVC as OurSVC

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=float, default=1e5)
    ap.add_argument("--sv", type=float, default=3e4)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    sv = rng.standard_normal((int(args.sv), 28))
    coef = rng.uniform(-1, 1, int(args.sv))
    Q = rng.standard_normal((int(args.queries), 28))
    X0 = rng.standard_normal((40, 28))
    y0 = np.arange(40) % 2
    print(f"# load average at start: {os.getloadavg()}", flush=True)
    print("| queries | SVs | system | wall s | CPU s | peak MB | load |")
    print("|---|---|---|---|---|---|---|")
    out, cpu = {}, {}
    for name, cls in (("kerneltools", OurSVC), ("scikit-learn", SkSVC)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = with_model(cls(gamma=1 / 28).fit(X0, y0), sv, coef)
        m = measure(lambda est=est: est.predict(Q))
        out[name], cpu[name] = m.out, m.cpu_s
        print(f"| {len(Q):,} | {len(sv):,} | {name} | {m.wall_s:.1f} | {m.cpu_s:.1f} | "
              f"{m.peak_mb:.0f} | {m.load_text()} |", flush=True)
    agree = float(np.mean(out["kerneltools"] == out["scikit-learn"]))
    print(f"# predictions equal on {agree:.6f} of the queries; scikit-learn CPU s "
          f"/ ours = {cpu['scikit-learn'] / cpu['kerneltools']:.2f}", flush=True)


if __name__ == "__main__":
    main()
