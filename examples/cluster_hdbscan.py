"""Density clustering: HDBSCAN and DBSCAN, the same labels as scikit-learn.
=========================================================================

``kt.HDBSCAN`` and ``kt.DBSCAN`` have scikit-learn's constructors and
results: their neighbour searches (core distances, the eps-neighbourhoods)
are K-min and radius reductions, and HDBSCAN's minimum spanning tree of
mutual reachability is built from them (Boruvka on the K nearest
neighbours, exact). The script clusters blobs of different densities with
uniform noise, checks that the labels equal scikit-learn's, and draws both
estimators' clusters.

Run with ``python examples/cluster_hdbscan.py`` (``--quick``: 2,000 points
instead of 20,000); the figure goes to
``examples/figures/cluster_hdbscan.png`` or ``--out``.
"""

import argparse
import time
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import sklearn.cluster
from sklearn.datasets import make_blobs

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
    X, _ = make_blobs(
        n_samples=int(0.9 * n),
        centers=[[-4, -4], [0, 3], [4, -2]],
        cluster_std=[0.4, 1.0, 0.7],
        random_state=0,
    )
    rng = np.random.default_rng(0)
    X = np.vstack([X, rng.uniform(-8, 8, size=(n - len(X), 2))])

    fitted = {}
    for name, ours, theirs in [
        ("HDBSCAN", kt.HDBSCAN(min_cluster_size=25, copy=True),
         sklearn.cluster.HDBSCAN(min_cluster_size=25, copy=True)),
        ("DBSCAN", kt.DBSCAN(eps=0.3, min_samples=10),
         sklearn.cluster.DBSCAN(eps=0.3, min_samples=10)),
    ]:
        t0 = time.process_time()
        labels = ours.fit_predict(X)
        t_ours = time.process_time() - t0
        t0 = time.process_time()
        reference = theirs.fit_predict(X)
        t_theirs = time.process_time() - t0
        same = np.array_equal(labels, reference)
        n_clusters = labels.max() + 1
        print(f"{name} on {n:,} points: {n_clusters} clusters, "
              f"{np.mean(labels == -1):.1%} noise; ours {t_ours:.2f} CPU s, "
              f"scikit-learn {t_theirs:.2f} CPU s; same labels: {same}")
        assert same, f"{name}: the labels differ from scikit-learn's"
        fitted[name] = labels

    fig, axes = plt.subplots(1, 2, figsize=(9, 4.2), layout="constrained")
    for ax, (name, labels) in zip(axes, fitted.items()):
        noise = labels == -1
        ax.scatter(*X[noise].T, s=2, color="0.75", label="noise")
        ax.scatter(*X[~noise].T, s=3, c=labels[~noise], cmap="tab10", vmin=0, vmax=9)
        ax.set(title=f"kt.{name}: {labels.max() + 1} clusters (= scikit-learn's)",
               xticks=[], yticks=[])
        ax.legend(loc="lower right", markerscale=4)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "cluster_hdbscan.png"
    fig.savefig(path, dpi=100)
    print(f"  figure: {path}")


if __name__ == "__main__":
    main()
