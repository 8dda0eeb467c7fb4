"""Nystroem features + logistic regression, tuned by GridSearchCV.
===============================================================

``kt.Nystroem`` is scikit-learn's kernel-approximation transformer (same
constructor, same features with ``landmarks="uniform"``) on generated
reductions, so it slots into a ``Pipeline`` and a ``GridSearchCV`` unchanged;
a grid over ``gamma`` compiles the kernel once. On two interleaved half-moons,
which no linear classifier separates, the script searches ``gamma`` and
``n_components``, prints the best parameters and the test accuracy, and draws
the cross-validated accuracy of every pair next to the best model's decision
boundary.

Run with ``python examples/nystroem_pipeline.py`` (``--quick``: 600 points and
a 3 x 3 grid); the figure goes to ``examples/figures/nystroem_pipeline.png`` or
``--out``.
"""

import argparse
import time
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_moons
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import Pipeline

import kerneltools as kt

matplotlib.use("Agg")  # files only, no display


def main():
    title = (__doc__ or "").partition("\n")[0]  # the gallery strips __doc__
    parser = argparse.ArgumentParser(description=title)
    parser.add_argument("--quick", action="store_true", help="600 points, a 3 x 3 grid")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for the figure (default: examples/figures/)",
    )
    args = parser.parse_args()
    if args.out is None:  # the gallery (docs/) runs it without __file__
        args.out = Path(__file__).parent / "figures"

    n = 600 if args.quick else 4_000
    X, y = make_moons(n_samples=n, noise=0.2, random_state=0)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.25, random_state=0
    )
    grid = {
        "nystroem__gamma": [0.1, 1.0, 10.0]
        if args.quick
        else [0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0],
        "nystroem__n_components": [4, 16, 64]
        if args.quick
        else [4, 8, 16, 32, 64, 128],
    }
    pipe = Pipeline(
        [
            ("nystroem", kt.Nystroem(kernel="rbf", random_state=0)),
            ("classifier", LogisticRegression(C=10.0, max_iter=1000)),
        ]
    )

    t0 = time.perf_counter()
    search = GridSearchCV(pipe, grid, cv=3).fit(X_train, y_train)
    elapsed = time.perf_counter() - t0
    accuracy = search.score(X_test, y_test)
    best = {k.split("__")[1]: v for k, v in search.best_params_.items()}

    n_fits = 3 * len(search.cv_results_["params"])
    print(
        f"Nystroem + LogisticRegression on {n:,} two-moons points: "
        f"GridSearchCV, {n_fits} fits in {elapsed:.2f} s"
    )
    print(f"  best params: {best} (CV accuracy {search.best_score_:.4f})")
    print(f"  test accuracy = {accuracy:.4f}")

    gammas, sizes = grid["nystroem__gamma"], grid["nystroem__n_components"]
    # cv_results_ lists the grid with the last key varying fastest (sorted keys).
    scores = search.cv_results_["mean_test_score"].reshape(len(gammas), len(sizes))
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.3), layout="constrained")
    image = left.imshow(scores, cmap="viridis", origin="lower", aspect="auto")
    for (i, j), s in np.ndenumerate(scores):
        left.text(
            j,
            i,
            f"{s:.2f}",
            ha="center",
            va="center",
            color="white" if s < scores.max() - 0.1 else "black",
            fontsize=8,
        )
    left.set(
        xticks=range(len(sizes)),
        xticklabels=sizes,
        xlabel="n_components",
        yticks=range(len(gammas)),
        yticklabels=gammas,
        ylabel="gamma",
        title="3-fold CV accuracy",
    )
    fig.colorbar(image, ax=left)

    u, v = np.meshgrid(np.linspace(-2, 3, 200), np.linspace(-1.5, 2, 160))
    proba = search.predict_proba(np.c_[u.ravel(), v.ravel()])[:, 1].reshape(u.shape)
    right.contourf(u, v, proba, levels=20, cmap="RdBu_r", alpha=0.35)
    right.contour(u, v, proba, levels=[0.5], colors="k")
    right.scatter(
        X_test[:, 0],
        X_test[:, 1],
        c=y_test,
        cmap="RdBu_r",
        s=8,
        edgecolors="k",
        linewidths=0.3,
    )
    right.set(
        title=f"best: gamma={best['gamma']}, n_components={best['n_components']}"
        f"\ntest points, accuracy {accuracy:.3f}",
        xlabel="x1",
        ylabel="x2",
    )
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "nystroem_pipeline.png"
    fig.savefig(path, dpi=100)
    print(f"  figure: {path}")


if __name__ == "__main__":
    main()
