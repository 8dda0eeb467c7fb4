"""k-nearest-neighbour classification of scikit-learn's handwritten digits.
========================================================================

``kt.KNeighborsClassifier`` has scikit-learn's constructor and results; its
neighbour searches are generated ArgKMin reductions (no tree, no ``N x M``
distance matrix). The script picks ``n_neighbors`` by 5-fold cross-validation
on a training split (the estimator drops into ``GridSearchCV`` unchanged),
prints the test accuracy, and draws the test confusion matrix next to the
cross-validated accuracy against ``k``.

Run with ``python examples/knn_digits.py`` (``--quick``: k in {1, 3, 5}
instead of 1..15); the figure goes to ``examples/figures/knn_digits.png`` or
``--out``.
"""

import argparse
import time
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.metrics import ConfusionMatrixDisplay, confusion_matrix
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.neighbors import KNeighborsClassifier

import kerneltools as kt

matplotlib.use("Agg")  # files only, no display


def main():
    title = (__doc__ or "").partition("\n")[0]  # the gallery strips __doc__
    parser = argparse.ArgumentParser(description=title)
    parser.add_argument("--quick", action="store_true", help="k in {1, 3, 5} only")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for the figure (default: examples/figures/)",
    )
    args = parser.parse_args()
    if args.out is None:  # the gallery (docs/) runs it without __file__
        args.out = Path(__file__).parent / "figures"

    X, y = load_digits(return_X_y=True)  # 1,797 images of 8 x 8 pixels
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.3, stratify=y, random_state=0
    )
    ks = [1, 3, 5] if args.quick else list(range(1, 16))

    t0 = time.perf_counter()
    search = GridSearchCV(kt.KNeighborsClassifier(), {"n_neighbors": ks}, cv=5)
    search.fit(X_train, y_train)
    y_pred = search.predict(X_test)
    elapsed = time.perf_counter() - t0
    accuracy = np.mean(y_pred == y_test)

    print(
        f"KNeighborsClassifier on digits: {len(X_train)} training, "
        f"{len(X_test)} test images of {X.shape[1]} pixels"
    )
    print(
        f"  5-fold CV over n_neighbors = {ks}: best {search.best_params_} "
        f"(CV accuracy {search.best_score_:.4f}), {elapsed:.2f} s in all"
    )
    print(f"  test accuracy = {accuracy:.4f}")
    # A drop-in replacement: scikit-learn's classifier with the same k agrees
    # (up to ties between equidistant neighbours).
    reference = KNeighborsClassifier(**search.best_params_).fit(X_train, y_train)
    same = np.sum(reference.predict(X_test) == y_pred)
    print(
        f"  same prediction as sklearn.neighbors.KNeighborsClassifier: "
        f"{same}/{len(y_test)}"
    )

    fig, (left, right) = plt.subplots(
        1, 2, figsize=(10, 4.3), layout="constrained", width_ratios=[1.2, 1]
    )
    cm = confusion_matrix(y_test, y_pred)
    ConfusionMatrixDisplay(cm).plot(ax=left, colorbar=False, cmap="Blues")
    left.set_title(
        f"test confusion matrix, k = {search.best_params_['n_neighbors']}"
        f" (accuracy {accuracy:.3f})"
    )
    scores = search.cv_results_["mean_test_score"]
    right.errorbar(
        ks, scores, yerr=search.cv_results_["std_test_score"], marker="o", capsize=3
    )
    right.set(
        title="5-fold cross-validated accuracy",
        xlabel="n_neighbors",
        ylabel="accuracy",
        xticks=ks,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "knn_digits.png"
    fig.savefig(path, dpi=100)
    print(f"  figure: {path}")


if __name__ == "__main__":
    main()
