"""Local outlier factor and mean shift: scores and modes as scikit-learn's.
========================================================================

``kt.LocalOutlierFactor`` scores each point by the density of its K nearest
neighbours against theirs (K-min reductions, exact), and ``kt.MeanShift``
moves seeds to the modes of a flat-kernel density (each step a radius-sum
reduction over the points). Both have scikit-learn's constructors and
results. The script scores three blobs with scattered outliers, checks the
outlier factors and the modes against scikit-learn's, and draws them.

Run with ``python examples/outliers_lof_meanshift.py`` (``--quick``: 1,500
points instead of 10,000); the figure goes to
``examples/figures/outliers_lof_meanshift.png`` or ``--out``.
"""

import argparse
import time
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import sklearn.cluster
import sklearn.neighbors
from sklearn.datasets import make_blobs

import kerneltools as kt

matplotlib.use("Agg")  # files only, no display


def main():
    title = (__doc__ or "").partition("\n")[0]  # the gallery strips __doc__
    parser = argparse.ArgumentParser(description=title)
    parser.add_argument("--quick", action="store_true", help="1,500 points")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for the figure (default: examples/figures/)",
    )
    args = parser.parse_args()
    if args.out is None:  # the gallery (docs/) runs it without __file__
        args.out = Path(__file__).parent / "figures"

    n = 1_500 if args.quick else 10_000
    X, _ = make_blobs(n_samples=int(0.97 * n), centers=[[-3, 0], [2, 2], [2, -3]],
                      cluster_std=0.8, random_state=0)
    rng = np.random.default_rng(0)
    X = np.vstack([X, rng.uniform(-7, 7, size=(n - len(X), 2))])

    t0 = time.process_time()
    lof = kt.LocalOutlierFactor(n_neighbors=20).fit(X)
    t_ours = time.process_time() - t0
    t0 = time.process_time()
    ref = sklearn.neighbors.LocalOutlierFactor(n_neighbors=20).fit(X)
    t_theirs = time.process_time() - t0
    scores, scores_ref = lof.negative_outlier_factor_, ref.negative_outlier_factor_
    gap = np.max(np.abs(scores - scores_ref) / np.abs(scores_ref))
    print(f"LocalOutlierFactor(n_neighbors=20) on {n:,} points: ours {t_ours:.2f} "
          f"CPU s, scikit-learn {t_theirs:.2f} CPU s; largest relative "
          f"difference of the factors {gap:.1e}")
    assert gap < 1e-10, gap

    bandwidth = kt.estimate_bandwidth(X, quantile=0.2)
    t0 = time.process_time()
    ms = kt.MeanShift(bandwidth=bandwidth, bin_seeding=True, min_bin_freq=10)
    ms.fit(X)
    t_ours = time.process_time() - t0
    t0 = time.process_time()
    ms_ref = sklearn.cluster.MeanShift(
        bandwidth=bandwidth, bin_seeding=True, min_bin_freq=10
    ).fit(X)
    t_theirs = time.process_time() - t0
    centres, centres_ref = ms.cluster_centers_, ms_ref.cluster_centers_
    same = centres.shape == centres_ref.shape and np.allclose(centres, centres_ref)
    print(f"MeanShift(bandwidth={bandwidth:.2f}, min_bin_freq=10): "
          f"{len(centres)} modes; ours {t_ours:.2f} CPU s, scikit-learn "
          f"{t_theirs:.2f} CPU s; the same modes: {same}")
    assert same

    fig, axes = plt.subplots(1, 2, figsize=(9, 4.2), layout="constrained")
    top = np.argsort(scores)[: n // 30]  # the lowest factors: the outliers
    axes[0].scatter(*X.T, s=3, color="0.6")
    axes[0].scatter(*X[top].T, s=40, facecolors="none", edgecolors="tab:red",
                    label=f"{len(top)} lowest negative_outlier_factor_")
    axes[0].set(title="kt.LocalOutlierFactor", xticks=[], yticks=[])
    axes[0].legend(loc="lower left", fontsize=8)
    axes[1].scatter(*X.T, s=3, c=ms.labels_, cmap="tab10", vmin=0, vmax=9)
    axes[1].scatter(*centres.T, marker="x", s=120, color="k", label="modes")
    axes[1].set(title=f"kt.MeanShift: {len(centres)} modes (= scikit-learn's)",
                xticks=[], yticks=[])
    axes[1].legend(loc="lower left", fontsize=8)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "outliers_lof_meanshift.png"
    fig.savefig(path, dpi=100)
    print(f"  figure: {path}")


if __name__ == "__main__":
    main()
