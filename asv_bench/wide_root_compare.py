#!/usr/bin/env python
"""Wide kernels under a root: exp(-|x - y|) and the Gaussian, before and after.

The Laplacian (Matern 1/2) kernel ``exp(-|x - y| / D) @ b`` reads its squared
distance through a square root, which the C backend computes exactly near
0 from ``WIDE_MIN_DIM`` features (the micro-kernel's store recomputes the
pairs within rounding of 0, issue 23); the Gaussian ``exp(-|x - y|^2 / D)
@ b`` keeps the plain expanded form. For each dtype, D and kernel this runs
kerneltools from this tree and from ``--base`` (a source tree, e.g.
``git archive ec9fa72 | tar -x -C DIR``) in turn, each in a child process
with its own kernel cache: one warm-up call (compilation), then
``--repeats`` timed calls; it prints the median wall and process CPU
seconds (all threads), the ratio after / before of the CPU medians and the
largest relative difference between the two results (against the sum of
the absolute terms). On a shared machine compare ratios, not seconds.

Example::

    python asv_bench/wide_root_compare.py --base /tmp/kt-base --n 2e4
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

_CHILD = r"""
import sys, time, statistics, numpy as np, kerneltools as kt
n, d, dtype, kind, repeats, out = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3],
                                   sys.argv[4], int(sys.argv[5]), sys.argv[6])
rng = np.random.default_rng(0)
x = rng.random((n, d)).astype(dtype); y = rng.random((n, d)).astype(dtype)
b = rng.standard_normal((n, 1)).astype(dtype)
xi, yj = kt.Vi(x), kt.Vj(y)
K = ((-(xi - yj).norm2() * (1.0 / d)).exp() if kind == "laplace"
     else (-xi.sqdist(yj) * (1.0 / d)).exp())
res = K @ b
walls, cpus = [], []
for _ in range(repeats):
    t0, c0 = time.perf_counter(), time.process_time()
    res = K @ b
    walls.append(time.perf_counter() - t0); cpus.append(time.process_time() - c0)
np.save(out, np.asarray(res, dtype=np.float64))
np.save(out + ".abs", np.asarray(K @ np.abs(b), dtype=np.float64))
print(statistics.median(walls), statistics.median(cpus))
"""


def timed(tree: str, n: int, d: int, dtype: str, kind: str, repeats: int, out: str):
    """(median wall s, median CPU s) of kerneltools from ``tree``; the
    result saved to ``out`` (.npy)."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, KERNELTOOLS_CACHE_DIR=cache, PYTHONPATH=tree)
        run = subprocess.run([sys.executable, "-c", _CHILD, str(n), str(d), dtype, kind,
                              str(repeats), out], env=env, capture_output=True, text=True,
                             check=True)
    wall, cpu = run.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", required=True, help="source tree of the 'before' kerneltools")
    p.add_argument("--n", type=float, default=2e4, help="N = M (default 2e4)")
    p.add_argument("--dims", default="32,64,784", help="default 32,64,784")
    p.add_argument("--dtypes", default="float32,float64")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    n = int(args.n)
    print(f"# exp(-|x - y| / D) @ b (laplace) and exp(-|x - y|^2 / D) @ b (gauss), "
          f"N = M = {n}, {args.repeats} timed calls; load at start "
          f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}; shared machine\n")
    print("| dtype | D | kernel | before: wall (cpu) s | after: wall (cpu) s "
          "| after / before (cpu) | max rel. diff | load 1m |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in args.dtypes.split(","):
            for d in (int(t) for t in args.dims.split(",")):
                for kind in ("laplace", "gauss"):
                    fb, fa = os.path.join(tmp, "b.npy"), os.path.join(tmp, "a.npy")
                    wb, cb = timed(args.base, n, d, dtype, kind, args.repeats, fb)
                    wa, ca = timed(here, n, d, dtype, kind, args.repeats, fa)
                    diff = np.max(np.abs(np.load(fa) - np.load(fb)) / np.load(fa + ".abs.npy"))
                    print(f"| {dtype} | {d} | {kind} | {wb:.3f} ({cb:.3f}) | {wa:.3f} "
                          f"({ca:.3f}) | {ca / cb:.3f} | {diff:.1e} | "
                          f"{os.getloadavg()[0]:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
