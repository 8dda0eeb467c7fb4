"""Side by side with scikit-learn: the same estimators, their times and results.
==============================================================================

Three estimators fitted and applied on the same data by kerneltools and by
scikit-learn, at growing sizes: ``KernelRidge`` (rbf: a dense Cholesky solve
up to 5,000 points in both, then conjugate gradients on reductions here),
``KNeighborsRegressor`` (10 neighbours: K-min reductions here, a k-d tree
there) and ``SVC`` (rbf: libsvm's SMO, here on kernel reductions). The script
prints each one's CPU seconds (fit + predict, ``time.process_time``, the
least of 3 runs), their
ratio, and how far the predictions differ, and plots the times against n.
Timings on a shared machine vary: compare within one run. The benchmark
scripts of ``asv_bench/`` measure at larger sizes (see the benchmarks page).

Run with ``python examples/sklearn_timing.py`` (``--quick``: 500 to 2,000
points instead of 1,000 to 8,000); the figure goes to
``examples/figures/sklearn_timing.png`` or ``--out``.
"""

import argparse
import time
from pathlib import Path

import numpy as np
import sklearn.kernel_ridge
import sklearn.neighbors
import sklearn.svm

import kerneltools as kt

try:  # the figure is optional: kerneltools itself needs no matplotlib
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
except ImportError:
    plt = None

#: name: (kerneltools' estimator, scikit-learn's, the task).
PAIRS = {
    "KernelRidge": (lambda: kt.KernelRidge(alpha=1.0, kernel="rbf", gamma=1.0),
                    lambda: sklearn.kernel_ridge.KernelRidge(
                        alpha=1.0, kernel="rbf", gamma=1.0), "regression"),
    "KNeighborsRegressor": (lambda: kt.KNeighborsRegressor(n_neighbors=10),
                            lambda: sklearn.neighbors.KNeighborsRegressor(
                                n_neighbors=10), "regression"),
    "SVC": (lambda: kt.SVC(kernel="rbf", C=1.0, gamma=1.0),
            lambda: sklearn.svm.SVC(kernel="rbf", C=1.0, gamma=1.0),
            "classification"),
}


def data(n, rng):
    """n training and n query points in 3-D, a smooth target with noise."""
    X = rng.random((2 * n, 3))
    y = np.sin(6 * X[:, 0]) * np.cos(4 * X[:, 1]) + 0.2 * rng.standard_normal(2 * n)
    return X[:n], y[:n], X[n:]


def timed(make, X, y, Xq, repeats=3):
    """(the least CPU seconds of fit + predict over ``repeats`` runs, the
    predictions): the least, as the runs are the same work and the rest is
    other processes' noise."""
    best = np.inf
    for _ in range(repeats):
        start = time.process_time()
        pred = make().fit(X, y).predict(Xq)
        best = min(best, time.process_time() - start)
    return best, pred


def main():
    title = (__doc__ or "").partition("\n")[0]  # the gallery strips __doc__
    parser = argparse.ArgumentParser(description=title)
    parser.add_argument("--quick", action="store_true", help="500 to 2,000 points")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for the figure (default: examples/figures/)")
    args = parser.parse_args()
    if args.out is None:  # the gallery (docs/) runs it without __file__
        args.out = Path(__file__).parent / "figures"
    sizes = [500, 1_000, 2_000] if args.quick else [1_000, 2_000, 4_000, 8_000]
    rng = np.random.default_rng(0)
    # A first call of each estimator compiles its kernels (cached on disk
    # for later runs): done once here, outside the timings.
    X, y, Xq = data(200, rng)
    for ours, _, task in PAIRS.values():
        ours().fit(X, y if task == "regression" else y > 0).predict(Xq)

    times = {name: {"kerneltools": [], "scikit-learn": []} for name in PAIRS}
    for n in sizes:
        X, y, Xq = data(n, rng)
        for name, (ours, theirs, task) in PAIRS.items():
            target = y if task == "regression" else (y > 0).astype(int)
            t_kt, p_kt = timed(ours, X, target, Xq)
            t_sk, p_sk = timed(theirs, X, target, Xq)
            times[name]["kerneltools"].append(t_kt)
            times[name]["scikit-learn"].append(t_sk)
            if task == "regression":
                agree = f"max |prediction difference| = {np.abs(p_kt - p_sk).max():.1e}"
            else:
                agree = f"same labels on {np.mean(p_kt == p_sk):.2%} of queries"
            ratio = t_sk / max(t_kt, 1e-9)
            print(f"{name:>20} n = {n:>6,}: kerneltools {t_kt:6.2f} CPU s, "
                  f"scikit-learn {t_sk:6.2f} CPU s (ratio {ratio:.2f}); {agree}")

    if plt is None:
        print("  figure: skipped (matplotlib is not installed: "
              'pip install -e ".[examples]")')
        return
    fig, axes = plt.subplots(1, len(PAIRS), figsize=(12, 3.8), sharey=False)
    for ax, (name, series) in zip(axes, times.items()):
        for system, style in (("kerneltools", "o-"), ("scikit-learn", "s--")):
            ax.loglog(sizes, series[system], style, label=system)
        ax.set_title(name)
        ax.set_xlabel("training points n (as many queries)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("CPU seconds, fit + predict")
    axes[0].legend()
    fig.suptitle("kerneltools and scikit-learn on the same data "
                 "(one run, this machine)")
    fig.tight_layout()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "sklearn_timing.png"
    fig.savefig(path, dpi=100)
    print(f"  figure: {path}")


if __name__ == "__main__":
    main()
