"""Support vector classification: an RBF SVC's boundary, as scikit-learn's.
=========================================================================

``kt.SVC`` has scikit-learn's constructor and results: libsvm's SMO solver
(working-set selection, shrinking) with the kernel columns it needs
computed as reductions, and ``decision_function`` a sum over the support
vectors. The script fits two noisy moons, compares the support vectors, the
decision values and the predictions with scikit-learn's, and draws the
decision function with its margins.

Run with ``python examples/svm_decision.py`` (``--quick``: 2,000 points
instead of 20,000); the figure goes to ``examples/figures/svm_decision.png``
or ``--out``.
"""

import argparse
import time
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import sklearn.svm
from sklearn.datasets import make_moons

import kerneltools as kt

matplotlib.use("Agg")  # files only, no display


def main():
    title = (__doc__ or "").partition("\n")[0]  # the gallery strips __doc__
    parser = argparse.ArgumentParser(description=title)
    parser.add_argument("--quick", action="store_true", help="2,000 points")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for the figure (default: examples/figures/)",
    )
    args = parser.parse_args()
    if args.out is None:  # the gallery (docs/) runs it without __file__
        args.out = Path(__file__).parent / "figures"

    n = 2_000 if args.quick else 20_000
    X, y = make_moons(n_samples=n, noise=0.25, random_state=0)
    X_test, y_test = make_moons(n_samples=2_000, noise=0.25, random_state=1)
    options = dict(kernel="rbf", C=1.0, gamma=2.0)

    t0 = time.process_time()
    svc = kt.SVC(**options).fit(X, y)
    t_ours = time.process_time() - t0
    t0 = time.process_time()
    ref = sklearn.svm.SVC(**options).fit(X, y)
    t_theirs = time.process_time() - t0
    # Both stop at libsvm's tolerance (tol=1e-3 on the KKT conditions): the
    # decision values agree to about that, the predictions almost everywhere.
    gap = np.max(np.abs(svc.decision_function(X_test) - ref.decision_function(X_test)))
    agree = np.mean(svc.predict(X_test) == ref.predict(X_test))
    print(f"SVC(rbf, C=1, gamma=2) on {n:,} points: ours {t_ours:.2f} CPU s, "
          f"scikit-learn {t_theirs:.2f} CPU s")
    print(f"  support vectors: {svc.n_support_.sum()} (scikit-learn "
          f"{ref.n_support_.sum()}); test accuracy {svc.score(X_test, y_test):.3f} "
          f"(scikit-learn {ref.score(X_test, y_test):.3f})")
    print(f"  largest decision-value difference {gap:.1e}; the same prediction "
          f"for {agree:.2%} of 2,000 test points")
    assert gap < 1e-2 and agree > 0.995, (gap, agree)

    xx, yy = np.meshgrid(np.linspace(-2, 3, 200), np.linspace(-1.5, 2, 150))
    grid = np.c_[xx.ravel(), yy.ravel()]
    values = svc.decision_function(grid).reshape(xx.shape)
    fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
    ax.contourf(xx, yy, values, levels=20, cmap="coolwarm", alpha=0.5)
    ax.contour(xx, yy, values, levels=[-1, 0, 1], colors="k",
               linestyles=["--", "-", "--"], linewidths=1)
    shown = np.random.default_rng(0).choice(n, min(n, 1_000), replace=False)
    ax.scatter(*X[shown].T, c=y[shown], s=6, cmap="coolwarm", edgecolors="none")
    ax.set(title=f"kt.SVC: {svc.n_support_.sum()} support vectors, decision "
                 f"function and margins", xticks=[], yticks=[])
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "svm_decision.png"
    fig.savefig(path, dpi=100)
    print(f"  figure: {path}")


if __name__ == "__main__":
    main()
