"""Small problems side by side: kerneltools vs scikit-learn on 30-300 points.

The rule (issue 37): an estimator fit on a few hundred points costs no more
than scikit-learn's. Each case times one call (fit, or fit then predict /
transform, as a grid search makes it) of kerneltools' estimator and of
scikit-learn's on the same data, interleaved, warm (one untimed call first:
compiled kernels are in the cache), and reports the medians of ``--repeat``
timings in milliseconds and the median of the repeats' ratios (ours /
scikit-learn's, the two calls back to back; < 1 is faster).
Medians of interleaved runs, because the machine is shared; the CPU time of
the process (``time.process_time``) is reported beside the wall time, as a
loaded machine inflates it less. One thread by default (``--threads``: OpenMP
and BLAS, set before NumPy loads), so that other users' load moves both
systems alike.

    python asv_bench/small_compare.py                     # every case, n = 30, 100, 300
    python asv_bench/small_compare.py --only krr --sizes 30 --repeat 51
    python asv_bench/small_compare.py --json small.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings

if __name__ == "__main__":  # before NumPy loads its BLAS
    _threads = "1"
    if "--threads" in sys.argv:
        _threads = sys.argv[sys.argv.index("--threads") + 1]
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = _threads

import numpy as np  # noqa: E402

#: The data's dimension; the periodic kernel's data are 1-D, as in scikit-learn's
#: gallery (in more dimensions ExpSineSquared is not positive definite).
D = 4


def _data(n, d=D, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, d))
    y = np.sin(2 * X[:, 0]) + X[:, :3].prod(1) + 0.1 * rng.normal(size=n)
    return X, y, rng.uniform(-2, 2, size=(n, d))


def _cases():
    """name -> (make ours, make theirs, call(est, X, y, Xq))."""
    import sklearn.decomposition as skd
    import sklearn.gaussian_process as skg
    import sklearn.kernel_approximation as ska
    import sklearn.kernel_ridge as skr
    import sklearn.neighbors as skn
    from sklearn.gaussian_process.kernels import RBF, ExpSineSquared, WhiteKernel

    import kerneltools.estimators as kt

    def fit_predict(est, X, y, Xq):
        return est.fit(X, y).predict(Xq)

    def fit_transform(est, X, y, Xq):
        return est.fit(X).transform(Xq)

    ess = ExpSineSquared(length_scale=1.0, periodicity=3.0)
    rbf_white = RBF() + WhiteKernel()
    return {
        "krr-rbf": (lambda: kt.KernelRidge(alpha=0.1, kernel="rbf", gamma=0.5),
                    lambda: skr.KernelRidge(alpha=0.1, kernel="rbf", gamma=0.5),
                    fit_predict),
        "krr-ExpSineSquared": (lambda: kt.KernelRidge(alpha=0.1, kernel=ess),
                               lambda: skr.KernelRidge(alpha=0.1, kernel=ess),
                               fit_predict),
        "krr-RBF+White": (lambda: kt.KernelRidge(alpha=0.1, kernel=rbf_white),
                          lambda: skr.KernelRidge(alpha=0.1, kernel=rbf_white),
                          fit_predict),
        "gp-fixed": (lambda: kt.GaussianProcessRegressor(alpha=1e-2, optimizer=None),
                     lambda: skg.GaussianProcessRegressor(alpha=1e-2, optimizer=None),
                     fit_predict),
        "gp-optimised": (lambda: kt.GaussianProcessRegressor(alpha=1e-2),
                         lambda: skg.GaussianProcessRegressor(alpha=1e-2),
                         fit_predict),
        "knn-classifier": (lambda: kt.KNeighborsClassifier(n_neighbors=5),
                           lambda: skn.KNeighborsClassifier(n_neighbors=5),
                           lambda est, X, y, Xq: est.fit(X, y > 0).predict(Xq)),
        "knn-regressor": (lambda: kt.KNeighborsRegressor(n_neighbors=5),
                          lambda: skn.KNeighborsRegressor(n_neighbors=5), fit_predict),
        "kernel-pca": (lambda: kt.KernelPCA(n_components=5, kernel="rbf", gamma=0.5),
                       lambda: skd.KernelPCA(n_components=5, kernel="rbf", gamma=0.5),
                       fit_transform),
        "nystroem": (lambda: kt.Nystroem(gamma=0.5, n_components=20, random_state=0),
                     lambda: ska.Nystroem(gamma=0.5, n_components=20, random_state=0),
                     fit_transform),
    }


def _time(make, call, X, y, Xq) -> tuple[float, float]:
    """(wall, process CPU) seconds of one call."""
    t0, c0 = time.perf_counter(), time.process_time()
    call(make(), X, y, Xq)
    return time.perf_counter() - t0, time.process_time() - c0


def run(only, sizes, repeat):
    rows = []
    for name, (ours, theirs, call) in _cases().items():
        if only and not any(o in name for o in only):
            continue
        for n in sizes:
            X, y, Xq = _data(n, d=1 if "ExpSine" in name else D)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for make in (ours, theirs):  # warm: compiled kernels cached
                    call(make(), X, y, Xq)
                t_ours, t_theirs = [], []
                for _ in range(repeat):
                    t_ours.append(_time(ours, call, X, y, Xq))
                    t_theirs.append(_time(theirs, call, X, y, Xq))
            row = {"case": name, "n": n}
            for i, kind in enumerate(("wall", "cpu")):
                a = statistics.median(t[i] for t in t_ours) * 1e3
                b = statistics.median(t[i] for t in t_theirs) * 1e3
                # the median of each repeat's ratio (the two calls ran back to
                # back, under the same load): steadier than a / b
                paired = statistics.median(
                    o[i] / max(s[i], 1e-9) for o, s in zip(t_ours, t_theirs))
                row.update({f"kerneltools_{kind}_ms": a, f"sklearn_{kind}_ms": b,
                            f"{kind}_ratio": paired})
            rows.append(row)
            print(f"| {name} | {n} | {row['kerneltools_wall_ms']:.2f} | "
                  f"{row['sklearn_wall_ms']:.2f} | {row['wall_ratio']:.2f} | "
                  f"{row['kerneltools_cpu_ms']:.2f} | {row['sklearn_cpu_ms']:.2f} | "
                  f"{row['cpu_ratio']:.2f} |", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=[], help="case name substrings")
    ap.add_argument("--sizes", type=int, nargs="*", default=[30, 100, 300])
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--threads", default="1", help="OpenMP and BLAS threads")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    print("| case | n | ours wall ms | sklearn wall ms | ratio | ours CPU ms | "
          "sklearn CPU ms | CPU ratio |")
    print("|---|---|---|---|---|---|---|---|")
    rows = run(args.only, args.sizes, args.repeat)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
