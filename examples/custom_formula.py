"""A custom kernel written as a formula, its reduction and its exact gradient.
===========================================================================

Any formula of ``kt.Vi`` (indexed by i), ``kt.Vj`` (indexed by j) and
``kt.Pm`` (parameters) becomes a generated kernel. Here the Cauchy kernel::

    K(x, y) = 1 / (1 + |x - y|^2 / s^2),    V(x_i) = sum_j K(x_i, y_j) b_j,

with signed weights ``b_j`` on two clusters of points (a "dipole"). Its
gradient in ``x`` is derived symbolically, twice: ``F.grad(x_i, e)`` gives a new
formula to reduce, and ``F.vjp(x_i, g)`` the vector-Jacobian product of the
reduction in one call. The script checks both against central finite
differences of ``V`` (float64), prints the largest errors, and draws ``V``
with its gradient field.

Run with ``python examples/custom_formula.py`` (``--quick``: 500 source points
and a coarser grid); the figure goes to ``examples/figures/custom_formula.png``
or ``--out``.
"""

import argparse
import time
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

import kerneltools as kt

matplotlib.use("Agg")  # files only, no display


def cauchy(x_i, y_j, s):
    """The Cauchy kernel as a symbolic (N, M) formula; ``s`` a Pm parameter."""
    return 1 / (1 + x_i.sqdist(y_j) / s**2)


def grid(lo, hi, n):
    u, v = np.meshgrid(np.linspace(lo, hi, n), np.linspace(lo, hi, n))
    return u, v, np.c_[u.ravel(), v.ravel()]


def main():
    title = (__doc__ or "").partition("\n")[0]  # the gallery strips __doc__
    parser = argparse.ArgumentParser(description=title)
    parser.add_argument(
        "--quick", action="store_true", help="500 source points, a coarser grid"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for the figure (default: examples/figures/)",
    )
    args = parser.parse_args()
    if args.out is None:  # the gallery (docs/) runs it without __file__
        args.out = Path(__file__).parent / "figures"

    m, n_grid = (500, 100) if args.quick else (20_000, 300)
    rng = np.random.default_rng(0)
    # Positive charges around (-1, 0), negative ones around (1, 0).
    y = np.r_[
        rng.normal([-1, 0], 0.3, (m // 2, 2)), rng.normal([1, 0], 0.3, (m // 2, 2))
    ]
    b = np.r_[np.ones(m // 2), -np.ones(m // 2)][:, None] / m
    s = kt.Pm(0.5)

    def potential(x):
        """V(x) = sum_j K(x, y_j) b_j, one Sum reduction: (N, 1)."""
        return cauchy(kt.Vi(x), kt.Vj(y), s) @ b

    # The gradient at the points of a coarse grid, for arrows and for the check.
    _, _, x = grid(-2.4, 2.4, 21)
    x_i = kt.Vi(x)
    F = cauchy(x_i, kt.Vj(y), s) * kt.Vj(b)  # V(x_i) = sum_j F_ij
    t0 = time.perf_counter()
    grad_formula = F.grad(x_i, kt.Vi(np.ones((len(x), 1)))).sum(axis=1)  # (N, 2)
    grad_vjp = F.vjp(x_i, np.ones((len(x), 1)), "Sum", axis=1)  # the same
    t_grad = time.perf_counter() - t0

    # Central finite differences of V in each coordinate.
    h = 1e-5
    fd = np.empty_like(x)
    for k in range(x.shape[1]):
        e = np.zeros(x.shape[1])
        e[k] = h
        fd[:, k] = (potential(x + e) - potential(x - e))[:, 0] / (2 * h)
    scale = np.abs(fd).max()
    err_formula = np.abs(grad_formula - fd).max() / scale
    err_vjp = np.abs(grad_vjp - fd).max() / scale

    print(f"Cauchy kernel formula: {len(x)} points x {m:,} sources, float64")
    print(f"  gradient by F.grad(...).sum(axis=1) and by F.vjp(...): {t_grad:.2f} s")
    print(
        f"  max relative error vs finite differences (h={h}): "
        f"grad {err_formula:.1e}, vjp {err_vjp:.1e}"
    )
    print(f"  max finite-difference error = {max(err_formula, err_vjp):.1e}")

    u, v, fine = grid(-2.5, 2.5, n_grid)
    t0 = time.perf_counter()
    V = potential(fine)[:, 0].reshape(u.shape)
    print(f"  V on a {n_grid} x {n_grid} grid: {time.perf_counter() - t0:.2f} s")

    fig, ax = plt.subplots(figsize=(7, 6), layout="constrained")
    lim = np.abs(V).max()
    image = ax.contourf(u, v, V, levels=30, cmap="RdBu_r", vmin=-lim, vmax=lim)
    fig.colorbar(image, ax=ax, label="V(x)")
    ax.quiver(
        x[:, 0],
        x[:, 1],
        grad_formula[:, 0],
        grad_formula[:, 1],
        color="0.15",
        pivot="mid",
        width=0.0025,
    )
    shown = rng.choice(m, min(m, 400), replace=False)
    colors = np.where(b[shown, 0] > 0, "darkred", "navy")
    ax.scatter(
        y[shown, 0],
        y[shown, 1],
        s=4,
        c=colors,
        alpha=0.6,
        label="sources y_j (b_j > 0 red, < 0 blue)",
    )
    ax.legend(loc="lower left", fontsize=8)
    ax.set(
        title=f"V = Σ_j b_j / (1 + |x − y_j|² / s²) and ∇V\n"
        f"(gradient vs finite differences: max rel. error "
        f"{max(err_formula, err_vjp):.0e})",
        xlabel="x1",
        ylabel="x2",
        aspect="equal",
    )
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "custom_formula.png"
    fig.savefig(path, dpi=100)
    print(f"  figure: {path}")


if __name__ == "__main__":
    main()
