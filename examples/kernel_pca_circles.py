"""Kernel PCA: two nested circles pulled apart, as scikit-learn projects them.
===========================================================================

``kt.KernelPCA`` has scikit-learn's constructor and results; its kernel
matrix products are reductions (the eigenvectors come from a Lanczos
solver on the centred kernel operator, or from the dense matrix when it is
small), so the fit needs memory linear in the points for the iterative
solvers. The script projects two concentric circles on the first two
principal components of an RBF kernel, where the circles fall apart,
checks the projection against scikit-learn's (up to each component's
sign) and plots both spaces.

Run with ``python examples/kernel_pca_circles.py`` (``--quick``: 1,000
points instead of 4,000); the figure goes to
``examples/figures/kernel_pca_circles.png`` or ``--out``.
"""

import argparse
import time
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import sklearn.decomposition
from sklearn.datasets import make_circles

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

    n = 1_000 if args.quick else 4_000
    X, y = make_circles(n_samples=n, factor=0.3, noise=0.05, random_state=0)
    options = dict(n_components=2, kernel="rbf", gamma=10.0)

    t0 = time.process_time()
    Z = kt.KernelPCA(**options).fit_transform(X)
    t_ours = time.process_time() - t0
    t0 = time.process_time()
    Z_ref = sklearn.decomposition.KernelPCA(**options).fit_transform(X)
    t_theirs = time.process_time() - t0
    signs = np.sign(np.sum(Z * Z_ref, axis=0))  # eigenvectors have no sign
    gap = np.max(np.abs(Z * signs - Z_ref)) / np.max(np.abs(Z_ref))
    print(f"KernelPCA(rbf, gamma=10, 2 components) on {n:,} points: ours "
          f"{t_ours:.2f} CPU s, scikit-learn {t_theirs:.2f} CPU s; largest "
          f"difference (up to sign) {gap:.1e} of the largest coordinate")
    assert gap < 1e-6, gap

    fig, axes = plt.subplots(1, 2, figsize=(9, 4.2), layout="constrained")
    axes[0].scatter(*X.T, c=y, s=4, cmap="coolwarm")
    axes[0].set(title="the data", aspect="equal", xticks=[], yticks=[])
    axes[1].scatter(*Z.T, c=y, s=4, cmap="coolwarm")
    axes[1].set(title="kt.KernelPCA's first two components",
                xlabel="component 1", ylabel="component 2")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "kernel_pca_circles.png"
    fig.savefig(path, dpi=100)
    print(f"  figure: {path}")


if __name__ == "__main__":
    main()
