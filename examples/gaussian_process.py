"""Gaussian-process regression in 1-D, with hyperparameters fitted by L-BFGS.
==========================================================================

``kt.GaussianProcessRegressor`` takes scikit-learn's kernel objects (here
``ConstantKernel * RBF + WhiteKernel``), turns them into generated formulas
with symbolic ``theta``-gradients, and maximises the log marginal likelihood
as scikit-learn does. The data have a gap, where the predictive band widens.
The script prints the fitted kernel (``kernel_``), the fitted noise level
against the true one, and how many held-out points fall inside the
``mean +- 2 std`` band (about 95% if the model is right).

Run with ``python examples/gaussian_process.py`` (``--quick``: 300 points);
the figure goes to ``examples/figures/gaussian_process.png`` or ``--out``.
"""

import argparse
import time
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

import kerneltools as kt

matplotlib.use("Agg")  # files only, no display


def truth(x):
    return x * np.sin(x) / 3


def sample(rng, n, noise):
    """``n`` noisy points on [0, 10] minus the gap (4, 6)."""
    x = rng.uniform(0, 8, size=n)
    x[x > 4] += 2
    return x[:, None], truth(x) + noise * rng.standard_normal(n)


def main():
    title = (__doc__ or "").partition("\n")[0]  # the gallery strips __doc__
    parser = argparse.ArgumentParser(description=title)
    parser.add_argument("--quick", action="store_true", help="300 points")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for the figure (default: examples/figures/)",
    )
    args = parser.parse_args()
    if args.out is None:  # the gallery (docs/) runs it without __file__
        args.out = Path(__file__).parent / "figures"

    n, noise = (300 if args.quick else 1_000), 0.2
    rng = np.random.default_rng(0)
    X, y = sample(rng, n, noise)
    X_test, y_test = sample(rng, 1_000, noise)

    kernel = C(1.0) * RBF(length_scale=1.0) + WhiteKernel(noise_level=0.1)
    gp = kt.GaussianProcessRegressor(kernel, random_state=0)
    t0 = time.perf_counter()
    gp.fit(X, y)
    t_fit = time.perf_counter() - t0
    fitted_noise = np.sqrt(gp.kernel_.k2.noise_level)
    mean, std = gp.predict(X_test, return_std=True)
    coverage = np.mean(np.abs(y_test - mean) <= 2 * std)

    print(
        f"GaussianProcessRegressor on {n:,} points ({gp.solver_} solver), "
        f"fit in {t_fit:.2f} s"
    )
    print(f"  kernel_: {gp.kernel_}")
    print(f"  log marginal likelihood: {gp.log_marginal_likelihood_value_:.2f}")
    print(f"  fitted noise std = {fitted_noise:.4f} (true: {noise})")
    print(f"  held-out points inside mean +- 2 std: coverage = {coverage:.3f}")

    grid = np.linspace(-0.5, 10.5, 500)[:, None]
    mean, std = gp.predict(grid, return_std=True)
    fig, ax = plt.subplots(figsize=(8, 4.2), layout="constrained")
    ax.plot(X[:, 0], y, ".", ms=3, color="0.5", label=f"data ({n:,} points)")
    ax.plot(grid[:, 0], truth(grid[:, 0]), "k--", lw=1, label="truth")
    ax.plot(grid[:, 0], mean, color="tab:blue", lw=2, label="predictive mean")
    ax.fill_between(
        grid[:, 0],
        mean - 2 * std,
        mean + 2 * std,
        color="tab:blue",
        alpha=0.25,
        label=f"± 2 std (held-out coverage {coverage:.0%})",
    )
    ax.set_title(f"kernel_ = {gp.kernel_}", fontsize=9)
    ax.set(xlabel="x", ylabel="y")
    ax.legend(loc="upper left", fontsize=8)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "gaussian_process.png"
    fig.savefig(path, dpi=100)
    print(f"  figure: {path}")


if __name__ == "__main__":
    main()
