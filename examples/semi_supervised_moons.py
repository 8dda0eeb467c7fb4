"""Label spreading: two moons from ten labels, as scikit-learn spreads them.
=========================================================================

``kt.LabelSpreading`` and ``kt.LabelPropagation`` have scikit-learn's
constructors and results; each iteration multiplies the label distributions
by the normalised RBF affinity as one many-column reduction, so the ``n x
n`` graph is never stored (scikit-learn builds it dense). The script labels
five points of each moon, spreads the labels to the rest, checks the
transduction and the label distributions against scikit-learn's, and draws
the result.

Run with ``python examples/semi_supervised_moons.py`` (``--quick``: 1,000
points instead of 8,000); the figure goes to
``examples/figures/semi_supervised_moons.png`` or ``--out``.
"""

import argparse
import time
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import sklearn.semi_supervised
from sklearn.datasets import make_moons

import kerneltools as kt

matplotlib.use("Agg")  # files only, no display


def main():
    title = (__doc__ or "").partition("\n")[0]  # the gallery strips __doc__
    parser = argparse.ArgumentParser(description=title)
    parser.add_argument("--quick", action="store_true", help="1,000 points")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for the figure (default: examples/figures/)",
    )
    args = parser.parse_args()
    if args.out is None:  # the gallery (docs/) runs it without __file__
        args.out = Path(__file__).parent / "figures"

    n = 1_000 if args.quick else 8_000
    X, y = make_moons(n_samples=n, noise=0.08, random_state=0)
    rng = np.random.default_rng(0)
    y_partial = np.full(n, -1)  # -1: unlabelled
    for label in (0, 1):
        known = rng.choice(np.flatnonzero(y == label), 5, replace=False)
        y_partial[known] = label
    options = dict(kernel="rbf", gamma=20.0, alpha=0.2, max_iter=100)

    t0 = time.process_time()
    ours = kt.LabelSpreading(**options).fit(X, y_partial)
    t_ours = time.process_time() - t0
    t0 = time.process_time()
    ref = sklearn.semi_supervised.LabelSpreading(**options).fit(X, y_partial)
    t_theirs = time.process_time() - t0
    same = np.array_equal(ours.transduction_, ref.transduction_)
    gap = np.max(np.abs(ours.label_distributions_ - ref.label_distributions_))
    accuracy = np.mean(ours.transduction_ == y)
    print(f"LabelSpreading(rbf, gamma=20) on {n:,} points, 10 labelled: ours "
          f"{t_ours:.2f} CPU s, scikit-learn {t_theirs:.2f} CPU s")
    print(f"  the same labels: {same}; largest difference of the label "
          f"distributions {gap:.1e}; {accuracy:.1%} of the points labelled right")
    assert same and gap < 1e-6, gap

    fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    ax.scatter(*X.T, c=ours.transduction_, s=4, cmap="coolwarm", alpha=0.6)
    labelled = y_partial >= 0
    ax.scatter(*X[labelled].T, c=y_partial[labelled], s=120, marker="*",
               cmap="coolwarm", edgecolors="k", label="the 10 labels given")
    ax.set(title=f"kt.LabelSpreading: {accuracy:.1%} right (= scikit-learn's labels)",
           xticks=[], yticks=[])
    ax.legend(loc="lower left")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "semi_supervised_moons.png"
    fig.savefig(path, dpi=100)
    print(f"  figure: {path}")


if __name__ == "__main__":
    main()
