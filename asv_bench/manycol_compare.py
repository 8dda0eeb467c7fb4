#!/usr/bin/env python
"""The C engine's many-column Sum ``K @ B`` against row-block NumPy BLAS.

Gaussian ``exp(-g |x_i - y_j|^2) @ B`` with B of E columns, N = M points of
dimension D, for each (D, dtype, E): the median seconds (wall and process
CPU) of ``--repeats`` warm calls and the first call (compilation included,
on this script's own empty kernel cache) of

- ``after``: this tree (the GEMM form of :mod:`kerneltools.backend.cpu._gemm`);
- ``before``: with ``--base DIR``, kerneltools from another source tree
  (e.g. ``git archive 906a0cb | tar -x -C DIR``), run in a child process with
  its own cache; without it, this tree with the switch
  ``_cpu_gemm.MANY_COLUMNS = False`` (its generated source is the base's:
  the golden files of the other plans are unchanged);
- ``numpy``: rows by blocks of 512, ``|x|^2 + |y|^2 - 2 x y^T`` by BLAS,
  ``exp``, then ``@ B`` (BLAS).

Prints a Markdown table with the ratios ``before / after`` and
``numpy / after`` (> 1: the GEMM form is faster), the peak memory of one
call (RSS growth) and the load average (other jobs on the same cores make
every number pessimistic).

    python asv_bench/manycol_compare.py --n 4000 --columns 8,32,128
    python asv_bench/manycol_compare.py --base /tmp/kt-base
    python asv_bench/manycol_compare.py --dims 79 --columns 1,32,128 --base /tmp/kt-base
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wide_compare import peak_mb  # noqa: E402


def _data(n, d, e, dtype):
    rng = np.random.default_rng(0)
    x = rng.random((n, d)).astype(dtype)
    y = rng.random((n, d)).astype(dtype)
    b = rng.standard_normal((n, e)).astype(dtype)
    return x, y, b, 3.0 / d


def _numpy(x, y, b, g, block=512):
    yy = (y.astype(x.dtype) ** 2).sum(1)
    out = np.empty((len(x), b.shape[1]), dtype=x.dtype)
    for i in range(0, len(x), block):
        xb = x[i:i + block]
        d2 = (xb ** 2).sum(1)[:, None] + yy[None] - 2 * xb @ y.T
        out[i:i + block] = np.exp(-g * np.maximum(d2, 0)) @ b
    return out


def _ours(x, y, b, g):
    import kerneltools as kt

    return (kt.Vi(x).sqdist(kt.Vj(y)) * -g).exp() @ b


def _time(fn, repeats, budget):
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    first = time.perf_counter() - t0
    walls, cpus = [], []
    while len(walls) < repeats and (not walls or sum(walls) < budget):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return out, first, statistics.median(walls), statistics.median(cpus)


def run_cases(system, cases, repeats, budget):
    """[(first, wall, cpu, out checksum)] of ``system`` on each case."""
    if system == "before":
        from kerneltools.backend.cpu import _gemm as _cpu_gemm
        _cpu_gemm.MANY_COLUMNS = False
    res = []
    for d, dtype, e, n in cases:
        x, y, b, g = _data(n, d, e, np.dtype(dtype))
        fn = (lambda: _numpy(x, y, b, g)) if system == "numpy" else (lambda: _ours(x, y, b, g))
        out, first, wall, cpu = _time(fn, repeats, budget)
        res.append((first, wall, cpu, out[:64].astype(float).tolist(), peak_mb(fn)))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--columns", default="8,32,128")
    ap.add_argument("--dims", default="3,79")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--case-budget", type=float, default=6.0)
    ap.add_argument("--base", help="source tree of the 'before' kerneltools")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    cases = [(d, t, e, a.n) for d in map(int, a.dims.split(",")) for t in a.dtypes.split(",")
             for e in map(int, a.columns.split(","))]
    if a.child:
        print(json.dumps(run_cases(a.child, cases, a.repeats, a.case_budget)))
        return
    load0 = os.getloadavg()
    results = {}
    for system in ("after", "before", "numpy"):
        env = dict(os.environ, KERNELTOOLS_CACHE_DIR=tempfile.mkdtemp(prefix="kt-mc-"))
        if system == "before" and a.base:
            env["PYTHONPATH"] = a.base
            cmd_system = "after"  # the base tree has no switch: its own code
        else:
            cmd_system = system
        argv = [sys.executable, __file__, "--n", str(a.n), "--columns", a.columns,
                "--dims", a.dims, "--dtypes", a.dtypes, "--repeats", str(a.repeats),
                "--case-budget", str(a.case_budget), "--child", cmd_system]
        out = subprocess.run(argv, env=env, check=True, capture_output=True, text=True)
        results[system] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"N = M = {a.n}, load average at start {load0[0]:.2f}, at end "
          f"{os.getloadavg()[0]:.2f} (shared machine); before = "
          f"{'tree ' + a.base if a.base else 'switch off'}\n")
    print("| D | dtype | E | after s (cpu) | before s (cpu) | numpy s (cpu) | "
          "before/after | numpy/after | first call after / before s | "
          "peak MB after / before / numpy | max rel. diff |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for k, (d, t, e, _) in enumerate(cases):
        af, be, nu = (results[s][k] for s in ("after", "before", "numpy"))
        ref = np.array(nu[3])
        diff = max(np.abs(np.array(r[3]) - ref).max() for r in (af, be)) / np.abs(ref).max()
        print(f"| {d} | {t} | {e} | {af[1]:.3f} ({af[2]:.2f}) | {be[1]:.3f} ({be[2]:.2f}) | "
              f"{nu[1]:.3f} ({nu[2]:.2f}) | {be[1] / af[1]:.2f} | {nu[1] / af[1]:.2f} | "
              f"{af[0]:.2f} / {be[0]:.2f} | {af[4]:.0f} / {be[4]:.0f} / {nu[4]:.0f} | "
              f"{diff:.1e} |")


if __name__ == "__main__":
    main()
