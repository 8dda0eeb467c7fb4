"""Quickstart: a Gaussian kernel product of 100,000 points, in linear memory.
==========================================================================

The product computed::

    a_i = sum_j exp(-|x_i - y_j|^2 / (2 sigma^2)) b_j

The 100,000 x 100,000 kernel matrix would take 40 GB in float32; kerneltools
never builds it. Run with ``python examples/quickstart.py`` (``--quick`` for
10,000 points); where matplotlib is installed (``pip install -e ".[examples]"``),
the figure (the output's histogram, and the 100 rows checked against dense
NumPy) goes to ``examples/figures/quickstart.png`` or ``--out``.
"""

import argparse
import time
from pathlib import Path

import numpy as np

import kerneltools as kt

try:  # the figure is optional: kerneltools itself needs no matplotlib
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
except ImportError:
    plt = None

title = (__doc__ or "").partition("\n")[0]  # the gallery strips __doc__
parser = argparse.ArgumentParser(description=title)
parser.add_argument("--quick", action="store_true", help="10,000 points")
parser.add_argument(
    "--out",
    type=Path,
    default=None,
    help="folder for the figure (default: examples/figures/)",
)
args = parser.parse_args()
if args.out is None:  # the gallery (docs/) runs it without __file__
    args.out = Path(__file__).parent / "figures"

n, d, sigma = (10_000 if args.quick else 100_000), 3, 0.1
rng = np.random.default_rng(0)
x = rng.random((n, d), dtype=np.float32)
b = rng.standard_normal((n, 1), dtype=np.float32)

x_i = kt.Vi(x)  # (N, 1, D) symbolic: indexed by i
x_j = kt.Vj(x)  # (1, N, D) symbolic: indexed by j
K_ij = (-x_i.sqdist(x_j) / (2 * sigma**2)).exp()  # (N, N) symbolic, nothing computed yet

t0 = time.perf_counter()
a = K_ij @ b  # the first call compiles the kernel (about a second), then runs it
t1 = time.perf_counter()
a = K_ij @ b
t2 = time.perf_counter()

# Check 100 rows against a dense NumPy computation of the same rows.
rows = rng.choice(n, 100, replace=False)
dense = np.exp(-((x[rows, None, :] - x[None, :, :]) ** 2).sum(-1) / (2 * sigma**2)) @ b
err = np.abs(a[rows] - dense).max() / np.abs(dense).max()

print(f"kerneltools {kt.__version__}: a = K @ b, Gaussian kernel, sigma = {sigma}")
print(f"  {n:,} x {n:,} points in dimension {d}, float32; output shape {a.shape}")
print(f"  first call (compile + run): {t1 - t0:.2f} s")
print(
    f"  second call:                {t2 - t1:.2f} s"
    f" ({n * n / (t2 - t1) / 1e9:.2f} billion kernel evaluations per second)"
)
print(f"  relative error on 100 rows vs dense NumPy: {err:.1e}")
print(f"  a[:3] = {a[:3, 0]}")

if plt is None:
    print('  figure: skipped (matplotlib is not installed: pip install -e ".[examples]")')
    raise SystemExit(0)
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6), layout="constrained")
left.hist(a[:, 0], bins=80, color="tab:blue")
left.set(title=f"a = K @ b over {n:,} points", xlabel="a_i", ylabel="count")
right.plot(dense[:, 0], a[rows, 0], ".", color="tab:orange")
lim = [dense.min(), dense.max()]
right.plot(lim, lim, "k-", lw=0.5)
right.set(
    title=f"100 rows vs dense NumPy (rel. err. {err:.0e})",
    xlabel="dense NumPy",
    ylabel="kerneltools",
)
args.out.mkdir(parents=True, exist_ok=True)
path = args.out / "quickstart.png"
fig.savefig(path, dpi=100)
print(f"  figure: {path}")
