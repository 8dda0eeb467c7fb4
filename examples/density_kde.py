"""Kernel density estimation: a Gaussian KDE, checked against scikit-learn.
========================================================================

``kt.KernelDensity`` has scikit-learn's constructor and results; its
``score_samples`` is one LogSumExp reduction over the fitted points (exact,
no tree, linear memory), so scoring many points against many samples costs
no more memory than the data. The script fits a bimodal sample, scores a
grid, compares the log-densities with scikit-learn's (``rtol=0``, exact),
draws new points with ``sample`` and plots the estimate over the true
density.

Run with ``python examples/density_kde.py`` (``--quick``: 5,000 points
instead of 100,000); the figure goes to ``examples/figures/density_kde.png``
or ``--out``.
"""

import argparse
import time
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import sklearn.neighbors
from scipy.stats import norm

import kerneltools as kt

matplotlib.use("Agg")  # files only, no display


def true_density(x):
    return 0.3 * norm.pdf(x, -2, 0.5) + 0.7 * norm.pdf(x, 1, 1.0)


def main():
    title = (__doc__ or "").partition("\n")[0]  # the gallery strips __doc__
    parser = argparse.ArgumentParser(description=title)
    parser.add_argument("--quick", action="store_true", help="5,000 points")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for the figure (default: examples/figures/)",
    )
    args = parser.parse_args()
    if args.out is None:  # the gallery (docs/) runs it without __file__
        args.out = Path(__file__).parent / "figures"

    n = 5_000 if args.quick else 100_000
    rng = np.random.default_rng(0)
    first = rng.random(n) < 0.3
    X = np.where(first, rng.normal(-2, 0.5, n), rng.normal(1, 1.0, n))[:, None]
    grid = np.linspace(-5, 5, 500)[:, None]

    kde = kt.KernelDensity(kernel="gaussian", bandwidth=0.2).fit(X)
    t0 = time.process_time()
    log_dens = kde.score_samples(grid)
    t_ours = time.process_time() - t0
    reference = sklearn.neighbors.KernelDensity(kernel="gaussian", bandwidth=0.2)
    t0 = time.process_time()
    log_ref = reference.fit(X).score_samples(grid)
    t_theirs = time.process_time() - t0
    gap = np.max(np.abs(log_dens - log_ref))
    print(f"KernelDensity(gaussian, bandwidth=0.2) on {n:,} points, 500 queries")
    print(f"  score_samples: ours {t_ours:.3f} CPU s, scikit-learn {t_theirs:.3f} "
          f"CPU s; largest log-density difference {gap:.1e}")
    assert gap < 1e-8, gap
    drawn = kde.sample(2_000, random_state=0)

    fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    ax.hist(drawn[:, 0], bins=60, density=True, color="0.85",
            label="2,000 points from kde.sample")
    ax.plot(grid[:, 0], true_density(grid[:, 0]), "k--", lw=1, label="true density")
    ax.plot(grid[:, 0], np.exp(log_dens), color="tab:red", lw=2,
            label=f"kt.KernelDensity ({n:,} points)")
    ax.plot(grid[:, 0], np.exp(log_ref), ":", color="tab:blue", lw=2,
            label="scikit-learn's (the same curve)")
    ax.set(title="Gaussian kernel density estimate", xlabel="x", ylabel="density")
    ax.legend()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "density_kde.png"
    fig.savefig(path, dpi=100)
    print(f"  figure: {path}")


if __name__ == "__main__":
    main()
