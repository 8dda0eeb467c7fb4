#!/usr/bin/env python
"""Wide formulas: kerneltools' Gaussian K b at D = 784 and 2,000 against BLAS.

For each D: the first call of kerneltools in an empty kernel cache (compile
time included), then ``--repeats`` timed calls of kerneltools and of the
blocked BLAS computation that a NumPy user would write, in turn (so that
both see the same load): ``exp(-g cdist(x_blk, y)^2) @ b`` by blocks of
``--block`` rows, the squared distances from one GEMM per block
(``|x|^2 + |y|^2 - 2 x y^T``). Medians, the ratio BLAS / kerneltools (> 1:
kerneltools is faster), the peak memory of both and the load average are
printed; the largest relative difference between the two results is
checked. ``--base DIR`` adds kerneltools from another source tree (e.g.
``git archive 9f6e504 | tar -x -C DIR``), first call and timed calls in a
child process with its own cache ("before"). Wall and process CPU seconds
(all threads) are printed. On a shared machine every number is pessimistic:
compare ratios.

Examples::

    python asv_bench/wide_compare.py                      # N = M = 2e4, D = 784, 2000
    python asv_bench/wide_compare.py --n 5000 --dims 784 --dtype float64
    python asv_bench/wide_compare.py --base /tmp/kt-base --repeats 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


def blas_blocked(x, y, b, g, block):
    """sum_j exp(-g |x_i - y_j|^2) b_j by blocks of rows, with one GEMM per block."""
    yn = np.einsum("ij,ij->i", y, y)
    out = np.empty((len(x), b.shape[1]), dtype=x.dtype)
    for s in range(0, len(x), block):
        xb = x[s:s + block]
        K = xb @ y.T
        K *= -2
        K += np.einsum("ij,ij->i", xb, xb)[:, None]
        K += yn[None, :]
        np.maximum(K, 0, out=K)
        K *= -g
        np.exp(K, out=K)
        out[s:s + block] = K @ b
    return out


_FIRST_CALL = r"""
import sys, time, numpy as np, kerneltools as kt
n, d, dtype = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(0)
x = rng.random((n, d)).astype(dtype); y = rng.random((n, d)).astype(dtype)
b = rng.standard_normal((n, 1)).astype(dtype)
t0 = time.perf_counter()
(-kt.Vi(x).sqdist(kt.Vj(y)) * (1.0 / d)).exp().__matmul__(b)
print(time.perf_counter() - t0)
"""


_TIMED = r"""
import sys, time, statistics, numpy as np, kerneltools as kt
sys.path.insert(0, sys.argv[5])
from wide_compare import peak_mb
n, d, dtype, repeats = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
rng = np.random.default_rng(0)
x = rng.random((n, d)).astype(dtype); y = rng.random((n, d)).astype(dtype)
b = rng.standard_normal((n, 1)).astype(dtype)
K = (-kt.Vi(x).sqdist(kt.Vj(y)) * (1.0 / d)).exp()
K @ b
walls, cpus = [], []
for _ in range(repeats):
    t0, c0 = time.perf_counter(), time.process_time()
    K @ b
    walls.append(time.perf_counter() - t0); cpus.append(time.process_time() - c0)
print(statistics.median(walls), statistics.median(cpus), peak_mb(lambda: K @ b))
"""


def before(n: int, d: int, dtype: str, repeats: int, base: str):
    """(first call s, median wall s, median CPU s, peak MB) of the tree ``base``."""
    fc = first_call(d, dtype, base)
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, KERNELTOOLS_CACHE_DIR=cache, PYTHONPATH=base)
        out = subprocess.run([sys.executable, "-c", _TIMED, str(n), str(d), dtype,
                              str(repeats), os.path.dirname(os.path.abspath(__file__))],
                             env=env, capture_output=True, text=True, check=True)
    wall, cpu, peak = out.stdout.strip().splitlines()[-1].split()
    return fc, float(wall), float(cpu), float(peak)


def first_call(d: int, dtype: str, base: str | None = None) -> float:
    """Seconds of a first call (compilation included) in a fresh process and
    cache (``base``: of kerneltools from that source tree)."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, KERNELTOOLS_CACHE_DIR=cache)
        if base:
            env["PYTHONPATH"] = base
        out = subprocess.run([sys.executable, "-c", _FIRST_CALL, "64", str(d), dtype],
                             env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def peak_mb(fn) -> float | None:
    """Peak RSS growth during ``fn()`` (Linux VmHWM, reset first)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None

    def status(field):
        with open("/proc/self/status") as f:
            return next(int(ln.split()[1]) for ln in f if ln.startswith(field + ":"))

    rss = status("VmRSS")
    fn()
    return (status("VmHWM") - rss) / 1024


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=float, default=2e4, help="N = M (default 2e4)")
    p.add_argument("--dims", default="784,2000", help="default 784,2000")
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--block", type=int, default=2048, help="BLAS rows per block")
    p.add_argument("--base", help="source tree of the 'before' kerneltools")
    args = p.parse_args(argv)
    import kerneltools as kt

    n = int(args.n)
    print(f"# Wide Gaussian K b, N = M = {n}, {args.dtype}; load at start "
          f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}; shared machine\n")
    print("| D | kt first call (fresh cache) | kt median (cpu) | BLAS blocked median (cpu) "
          "| BLAS / kt | kt peak | BLAS peak | before: first call, median (cpu), peak "
          "| before / kt | max rel. diff | load 1m |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for d in (int(t) for t in args.dims.split(",")):
        fc = first_call(d, args.dtype)
        rng = np.random.default_rng(0)
        x = rng.random((n, d)).astype(args.dtype)
        y = rng.random((n, d)).astype(args.dtype)
        b = rng.standard_normal((n, 1)).astype(args.dtype)
        g = 1.0 / d
        K = (-kt.Vi(x).sqdist(kt.Vj(y)) * g).exp()
        fns = {"kt": lambda: K @ b, "blas": lambda: blas_blocked(x, y, b, g, args.block)}
        outs = {k: f() for k, f in fns.items()}  # warm-up (and the check)
        times = {k: [] for k in fns}
        cpus = {k: [] for k in fns}
        for _ in range(args.repeats):
            for k, f in fns.items():
                t0, c0 = time.perf_counter(), time.process_time()
                f()
                times[k].append(time.perf_counter() - t0)
                cpus[k].append(time.process_time() - c0)
        med = {k: statistics.median(v) for k, v in times.items()}
        cpu = {k: statistics.median(v) for k, v in cpus.items()}
        peaks = {k: peak_mb(f) for k, f in fns.items()}
        diff = np.abs(outs["kt"] - outs["blas"]).max() / np.abs(outs["blas"]).max()
        old, ratio = "-", "-"
        if args.base:
            del K, outs
            bf, bw, bc, bp = before(n, d, args.dtype, args.repeats, args.base)
            old, ratio = f"{bf:.2f} s, {bw:.2f} s ({bc:.1f}), {bp:.0f} MB", f"{bw / med['kt']:.2f}x"
        print(f"| {d} | {fc:.2f} s | {med['kt']:.2f} s ({cpu['kt']:.1f}) | "
              f"{med['blas']:.2f} s ({cpu['blas']:.1f}) | "
              f"{med['blas'] / med['kt']:.2f}x | {peaks['kt']:.0f} MB | "
              f"{peaks['blas']:.0f} MB | {old} | {ratio} | {diff:.1e} | "
              f"{os.getloadavg()[0]:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
