"""Missing values: KNNImputer on handwritten digits, as scikit-learn imputes.
==========================================================================

``kt.KNNImputer`` has scikit-learn's constructor and results: the
``nan_euclidean`` distances between rows with missing entries are one K-min
reduction (the formula skips the missing coordinates and rescales, as
scikit-learn's), so no distance matrix is stored. The script hides a fifth
of the pixels of scikit-learn's digits, fills them in, checks the result
against scikit-learn's (equal, except where the 5th and 6th nearest donors
are at the same distance: pixels are integers, and scikit-learn breaks such
ties in ``argpartition``'s order, which no other implementation can
promise), compares the error with mean imputation, and shows a few digits
before and after.

Run with ``python examples/impute_knn.py`` (``--quick``: 600 digits instead
of the 1,797); the figure goes to ``examples/figures/impute_knn.png`` or
``--out``.
"""

import argparse
import time
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import sklearn.impute
from sklearn.datasets import load_digits
from sklearn.metrics.pairwise import nan_euclidean_distances

import kerneltools as kt

matplotlib.use("Agg")  # files only, no display


def tied(X_missing, entries, k=5):
    """Whether the k-th and (k+1)-th nearest donors of each entry (row, column)
    are at the same nan_euclidean distance."""
    D = nan_euclidean_distances(X_missing)
    out = []
    for r, c in entries:
        donors = np.flatnonzero(~np.isnan(X_missing[:, c]))
        d = np.sort(D[r, donors])
        out.append(np.isclose(d[k - 1], d[k]))
    return np.array(out, dtype=bool)


def main():
    title = (__doc__ or "").partition("\n")[0]  # the gallery strips __doc__
    parser = argparse.ArgumentParser(description=title)
    parser.add_argument("--quick", action="store_true", help="600 digits")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for the figure (default: examples/figures/)",
    )
    args = parser.parse_args()
    if args.out is None:  # the gallery (docs/) runs it without __file__
        args.out = Path(__file__).parent / "figures"

    X = load_digits().data[: 600 if args.quick else None]
    rng = np.random.default_rng(0)
    hidden = rng.random(X.shape) < 0.2
    X_missing = np.where(hidden, np.nan, X)

    t0 = time.process_time()
    filled = kt.KNNImputer(n_neighbors=5).fit_transform(X_missing)
    t_ours = time.process_time() - t0
    t0 = time.process_time()
    reference = sklearn.impute.KNNImputer(n_neighbors=5).fit_transform(X_missing)
    t_theirs = time.process_time() - t0
    differ = np.argwhere(np.abs(filled - reference) > 1e-9)
    mean_filled = sklearn.impute.SimpleImputer().fit_transform(X_missing)
    rmse = np.sqrt(np.mean((filled - X)[hidden] ** 2))
    rmse_mean = np.sqrt(np.mean((mean_filled - X)[hidden] ** 2))
    print(f"KNNImputer(n_neighbors=5) on {len(X):,} digits, {hidden.mean():.0%} "
          f"of the pixels hidden: ours {t_ours:.2f} CPU s, scikit-learn "
          f"{t_theirs:.2f} CPU s")
    print(f"  {len(differ)} of {hidden.sum():,} filled pixels differ from "
          f"scikit-learn's, all where donors tie: {tied(X_missing, differ).all()}")
    print(f"  error on the hidden pixels (0-16 scale): {rmse:.2f}, "
          f"mean imputation {rmse_mean:.2f}")
    assert tied(X_missing, differ).all() and len(differ) < 0.01 * hidden.sum()

    fig, axes = plt.subplots(3, 6, figsize=(7, 3.8), layout="constrained")
    cmap = plt.get_cmap("gray_r").copy()
    cmap.set_bad("tab:red")  # the hidden pixels
    rows = [("original", X), ("20% hidden", np.ma.masked_array(X, hidden)),
            ("kt.KNNImputer", filled)]
    for r, (label, images) in enumerate(rows):
        for c in range(6):
            ax = axes[r, c]
            ax.imshow(images[c].reshape(8, 8), cmap=cmap, vmin=0, vmax=16)
            ax.set(xticks=[], yticks=[])
        axes[r, 0].set_ylabel(label, fontsize=8)
    fig.suptitle(f"Hidden pixels filled in (RMSE {rmse:.2f}; the mean: "
                 f"{rmse_mean:.2f})")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "impute_knn.png"
    fig.savefig(path, dpi=100)
    print(f"  figure: {path}")


if __name__ == "__main__":
    main()
