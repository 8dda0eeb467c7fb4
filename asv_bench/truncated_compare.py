#!/usr/bin/env python
"""Gaussian kernel product truncated at 5 sigma: block-sparse vs dense reduction.

Prints a Markdown report: the seconds of ``a_i = sum_j k(x_i, y_j) b_j``
with ``k(x, y) = exp(-|x - y|^2 / (2 sigma^2))`` where ``|x - y| <= 5 sigma``
and 0 beyond, for points uniform in the unit cube (D = 3, float32 by
default), computed by kerneltools

- ``dense``: one reduction over every pair (what the formula costs without a
  block-sparsity description);
- ``block-sparse``: the same formula with ``ranges=``, the description built
  with the public helpers of :mod:`kerneltools.ranges`: grid cells of side
  ``--cell``, centroids and radii, ``distance_mask`` at 5 sigma (exact: no
  pair within 5 sigma is skipped), ``block_sparsity``; the C backend reduces
  it in one call.

The dense reduction of 10^6 x 10^6 pairs takes minutes: by default it runs
on the first ``--dense-rows`` output rows only and its time is scaled by
N / rows (the reduction's time is linear in the rows; said in the report).
The block-sparse result is checked against the dense one on those rows.

Examples (from the repository root)::

    python asv_bench/truncated_compare.py                      # N = M = 1e6
    python asv_bench/truncated_compare.py --n 1e5 --dense-rows 1e5
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare as C  # needs the path above

import kerneltools as kt
from kerneltools import ranges as kr


def truncated_gaussian(x, y, sigma: float):
    """The kernel matrix as a formula: exp(-d^2 / 2 sigma^2) for d <= 5 sigma."""
    D = kt.Vi(x).sqdist(kt.Vj(y))
    return (25 * sigma**2 - D).ifelse((-D / (2 * sigma**2)).exp(), 0)


def description(x, y, sigma: float, cell: float):
    """The block-sparsity description of the pairs within 5 sigma."""
    lab_x, lab_y = kr.grid_cluster(x, cell), kr.grid_cluster(y, cell)
    cx, cy = kr.cluster_centroids(x, lab_x), kr.cluster_centroids(y, lab_y)
    rx, ry = kr.cluster_radii(x, lab_x, cx), kr.cluster_radii(y, lab_y, cy)
    keep = kr.distance_mask(cx, rx, cy, ry, 5 * sigma, pairs=True)
    return kr.block_sparsity(lab_x, lab_y, keep)


def timed(fn, repeats: int, warmup=None):
    """(last output, [seconds per call]) after one untimed warm-up call
    (``warmup``, else ``fn``)."""
    out = (warmup or fn)()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, times


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=float, default=1e6, help="N = M points (default 1e6)")
    p.add_argument("--d", type=int, default=3, help="dimension (default 3)")
    p.add_argument("--sigma", type=float, default=0.01, help="bandwidth (default 0.01)")
    p.add_argument("--cell", type=float, default=0.04,
                   help="grid cell side for the clusters (default 0.04)")
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    p.add_argument("--dense-rows", type=float, default=1e5,
                   help="output rows of the timed dense reduction (default 1e5)")
    p.add_argument("--repeats", type=int, default=3, help="timed calls (default 3)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", help="also write the report to this file")
    args = p.parse_args(argv)
    n, rows = int(args.n), min(int(args.n), int(args.dense_rows))
    load_start, t_start = os.getloadavg(), time.perf_counter()
    rng = np.random.default_rng(args.seed)
    x = rng.random((n, args.d)).astype(args.dtype)
    y = rng.random((n, args.d)).astype(args.dtype)
    b = rng.random((n, 1)).astype(args.dtype)

    t0 = time.perf_counter()
    bs = description(x, y, args.sigma, args.cell)
    t_desc = time.perf_counter() - t0
    print(f"[truncated] description {t_desc:.2f} s: {bs!r}", file=sys.stderr)
    a_bs, t_sparse = timed(
        lambda: (truncated_gaussian(x, y, args.sigma) * kt.Vj(b)).sum(
            axis=1, ranges=bs, backend="cpu"), args.repeats)
    print(f"[truncated] block-sparse {statistics.median(t_sparse):.3f} s", file=sys.stderr)
    def dense(r):
        return (truncated_gaussian(x[:r], y, args.sigma) * kt.Vj(b)).sum(axis=1, backend="cpu")

    # (the warm-up compiles on a few rows: the same kernel)
    a_dense, t_dense = timed(lambda: dense(rows), max(1, min(args.repeats, 2)),
                             warmup=lambda: dense(min(rows, 64)))
    dense_s = statistics.median(t_dense) * n / rows
    print(f"[truncated] dense {statistics.median(t_dense):.3f} s on {rows} rows", file=sys.stderr)
    err = np.abs(a_bs[:rows] - a_dense).max() / max(np.abs(a_dense).max(), 1e-300)
    sparse_s = statistics.median(t_sparse)
    scaled = "" if rows == n else f" (measured on {C.fmt_n(rows)} rows, x {n / rows:g})"
    now = datetime.datetime.now().isoformat(timespec="seconds")
    L = [
        "# Gaussian kernel product truncated at 5 sigma: block-sparse vs dense",
        "",
        f"{now}; {time.perf_counter() - t_start:.0f} s in all.",
        "",
    ]
    L += C.environment_lines(load_start)
    L += [
        "- Load average at end (1, 5, 15 min): "
        + ", ".join(f"{v:.2f}" for v in os.getloadavg()),
        (f"- N = M = {C.fmt_n(n)}, D = {args.d}, {args.dtype}, uniform in the unit "
         f"cube; sigma = {args.sigma:g} (5 sigma = {5 * args.sigma:g}); grid cells of "
         f"side {args.cell:g}; {bs!r}; the C backend."),
        (f"- Median of {args.repeats} calls after a warm-up (dense: of "
         f"{len(t_dense)}{scaled}). Description: the helpers' time (grid "
         "clustering, centroids, radii, distance mask, block_sparsity), once."),
        "",
        ("| description (clusters + mask) | block-sparse reduction | dense reduction | "
         "speed-up (reduction) | speed-up (incl. description) | max rel. difference |"),
        "|---|---|---|---|---|---|",
        (f"| {C.fmt_s(t_desc)} | {C.fmt_s(sparse_s)} | {C.fmt_s(dense_s)}"
         f"{'*' if scaled else ''} | {dense_s / sparse_s:.0f}x | "
         f"{dense_s / (sparse_s + t_desc):.0f}x | {err:.1e} |"),
        "",
    ]
    if scaled:
        L.append(f"\\* dense time measured on the first {C.fmt_n(rows)} output rows, "
                 f"scaled by {n / rows:g}.")
    text = "\n".join(L + [""])
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
