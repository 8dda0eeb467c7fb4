"""A Sinkhorn gradient flow: a 2-D point cloud slides onto another one.
====================================================================

``kt.sinkhorn_divergence(x, y, return_grad=True)`` returns the debiased
Sinkhorn divergence ``S(x, y)`` (GeomLoss's definition) and its gradients in
the points, from the dual potentials: every Sinkhorn step is a LogSumExp
reduction, so the ``N x M`` cost matrix is never stored. Following the
gradient, ``x <- x - lr * N * grad_x S`` (``N`` undoes the uniform ``1 / N``
weights), moves a Gaussian blob onto a ring, as in GeomLoss's
"gradient flows" tutorial. The script prints ``S`` at each frame and draws the
frames as a grid of subplots.

Run with ``python examples/sinkhorn_flow.py`` (``--quick``: 300 points and 12
steps instead of 2,000 and 50); the figure goes to
``examples/figures/sinkhorn_flow.png`` or ``--out``.
"""

import argparse
import time
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

import kerneltools as kt

matplotlib.use("Agg")  # files only, no display


def clouds(n, rng):
    """A Gaussian blob on the left and a ring on the right, ``n`` points each."""
    x = rng.normal([0.25, 0.5], 0.06, size=(n, 2))
    angle = rng.uniform(0, 2 * np.pi, n)
    radius = 0.18 + 0.02 * rng.standard_normal(n)
    y = np.c_[0.7 + radius * np.cos(angle), 0.5 + radius * np.sin(angle)]
    return x.astype(np.float32), y.astype(np.float32)


def main():
    title = (__doc__ or "").partition("\n")[0]  # the gallery strips __doc__
    parser = argparse.ArgumentParser(description=title)
    parser.add_argument("--quick", action="store_true", help="300 points, 12 steps")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for the figure (default: examples/figures/)",
    )
    args = parser.parse_args()
    if args.out is None:  # the gallery (docs/) runs it without __file__
        args.out = Path(__file__).parent / "figures"

    n, steps, lr = (300, 12, 0.3) if args.quick else (2_000, 50, 0.1)
    # The epsilon-scaling ratio: closer to 1 is more accurate, and slower.
    blur, scaling = 0.01, 0.5
    rng = np.random.default_rng(0)
    x, y = clouds(n, rng)
    frame_steps = sorted({round(f * steps) for f in (0, 0.05, 0.15, 0.3, 0.6, 1)})

    print(
        f"Sinkhorn gradient flow: {n:,} points onto {n:,}, blur={blur}, "
        f"{steps} steps of lr={lr}"
    )
    frames, values = [], []
    t0 = time.perf_counter()
    for step in range(steps + 1):
        value, grad_x, _ = kt.sinkhorn_divergence(
            x, y, blur=blur, scaling=scaling, return_grad=True
        )
        values.append(value)
        if step in frame_steps:
            frames.append((step, x.copy(), -grad_x * n, value))
            print(f"  step {step:3d}: S(x, y) = {value:.3e}")
        x = x - lr * n * grad_x
    elapsed = time.perf_counter() - t0
    ratio = values[-1] / values[0]
    print(f"  {steps + 1} divergences with gradients in {elapsed:.2f} s")
    print(f"  final / initial divergence = {ratio:.2e}")

    fig, axes = plt.subplots(
        2, 3, figsize=(10, 4.3), layout="constrained", sharex=True, sharey=True
    )
    for ax, (step, xs, velocity, value) in zip(axes.flat, frames):
        ax.scatter(y[:, 0], y[:, 1], s=2, color="tab:red", alpha=0.3, label="target")
        ax.scatter(xs[:, 0], xs[:, 1], s=2, color="tab:blue", label="source")
        if step < steps:
            shown = slice(None, None, max(1, n // 60))
            ax.quiver(
                xs[shown, 0],
                xs[shown, 1],
                velocity[shown, 0],
                velocity[shown, 1],
                angles="xy",
                scale_units="xy",
                scale=4,
                width=0.003,
                color="0.3",
            )
        ax.set_title(f"step {step}: S = {value:.2e}", fontsize=10)
        ax.set_aspect("equal")
    for ax in axes.flat[len(frames) :]:
        ax.axis("off")
    axes.flat[0].legend(loc="lower left", fontsize=8, markerscale=3)
    fig.suptitle(f"x ← x − {lr} N ∇ₓS(x, y): {n:,} points, blur = {blur}")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "sinkhorn_flow.png"
    fig.savefig(path, dpi=100)
    print(f"  figure: {path}")


if __name__ == "__main__":
    main()
