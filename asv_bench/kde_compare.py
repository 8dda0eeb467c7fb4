#!/usr/bin/env python
"""Gaussian kernel density: kerneltools against scikit-learn (and pykeops), one run.

``KernelDensity(bandwidth=h).fit(X).score_samples(Y)``, N training and N
query points, standard Gaussian in D dimensions, ``h`` Scott's rule
(``N^(-1/(D+4))``); ``--queries`` sets another number of queries. Prints a Markdown table: median seconds per system, the
ratio system / kerneltools (> 1: kerneltools is faster) and each system's
error against a dense float64 reference (SciPy ``logsumexp`` over every
training point) on ``--check-rows`` query rows: the largest absolute error
of the log density and the largest relative error of the density.

Systems:

- ``kerneltools``         ours, exact (every pair, weighted log-sum-exp on the
  C backend), float64
- ``kerneltools-float32`` the same with ``dtype="float32"``
- ``kerneltools-rtol1e-4`` ours with ``rtol=1e-4``: the Gaussian tail beyond
  a certified cutoff skipped in D <= 3 (exact, every pair, above)
- ``sklearn-rtol0``       scikit-learn's KD-tree with ``atol = rtol = 0``, its
  default (exact up to its log-space rounding)
- ``sklearn-rtol1e-4``    the same with ``rtol=1e-4`` (faster, approximate)
- ``pykeops``             ``(-D_ij / 2h^2).logsumexp(dim=1)`` on the CPU

Method: per D, every system first runs a warm-up case (``--warmup`` points,
which also compiles kerneltools' and pykeops' kernels); a system whose time
extrapolated to the case (x (N / warmup)^2, a brute-force bound) exceeds
``--max-seconds`` is timed on a subset of the queries (fitted on all N
points; queries are independent) and its time scaled by N / subset, said in
the note (kerneltools always runs the whole case, unless ``--subset-ours``:
then it too is timed on a subset where it would pass ``--max-seconds``, as
for 1e6 x 1e6 on a shared CPU); ``--subset-queries K`` times those systems
on K queries whatever the guess. Each timed call reports wall and process CPU
seconds (all threads), its own peak resident memory and the load average
during it; ratios are CPU seconds over ``--anchor``'s.
Quote the load average (printed) with the numbers: the machine may be shared.

    python asv_bench/kde_compare.py                          # D = 2, 16; N = 1e5
    python asv_bench/kde_compare.py --n 2e4 --dims 2 --repeats 3
    python asv_bench/kde_compare.py --n 1e6 --dims 2 --subset-ours \
        --systems kerneltools,kerneltools-float32 --max-seconds 60
    python asv_bench/kde_compare.py --n 1e6 --dims 2 --anchor kerneltools-float32 \
        --systems kerneltools-float32,sklearn-rtol0 --subset-queries 1e3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _measure import measure  # noqa: E402
from _runner import emit  # noqa: E402

SYSTEMS = ("kerneltools", "kerneltools-float32", "kerneltools-rtol1e-4", "sklearn-rtol0",
           "sklearn-rtol1e-4", "pykeops")


def make_data(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)), rng.normal(size=(n, d))


def make_call(system: str, X, h: float):
    """A function of the queries returning their log densities."""
    if system.startswith("kerneltools"):
        from kerneltools.estimators import KernelDensity

        dtype = "float32" if system.endswith("float32") else None
        rtol = 1e-4 if system.endswith("rtol1e-4") else 0.0
        kde = KernelDensity(bandwidth=h, backend="cpu", dtype=dtype, rtol=rtol).fit(X)
        return kde.score_samples
    if system.startswith("sklearn"):
        from sklearn.neighbors import KernelDensity

        rtol = 0.0 if system.endswith("rtol0") else 1e-4
        kde = KernelDensity(bandwidth=h, rtol=rtol).fit(X)
        return kde.score_samples
    if system == "pykeops":
        from pykeops.numpy import LazyTensor

        n, d = X.shape
        log_norm = -0.5 * d * np.log(2 * np.pi) - d * np.log(h) - np.log(n)
        y_j = LazyTensor(X[None, :, :])

        def call(Y):
            x_i = LazyTensor(Y[:, None, :])
            lse = (-((x_i - y_j) ** 2).sum(-1) / (2 * h * h)).logsumexp(dim=1)
            return lse.ravel() + log_norm

        return call
    raise ValueError(system)


def reference(X, Y, h: float) -> np.ndarray:
    """Dense float64 log densities of the rows of Y (SciPy's logsumexp)."""
    from scipy.special import logsumexp

    n, d = X.shape
    out = np.empty(len(Y))
    step = max(1, 2**22 // (n * d))  # blocks of ~32 MB
    for s in range(0, len(Y), step):
        d2 = ((Y[s:s + step, None, :] - X[None, :, :]) ** 2).sum(-1)
        out[s:s + step] = logsumexp(-d2 / (2 * h * h), axis=1)
    return out - 0.5 * d * np.log(2 * np.pi) - d * np.log(h) - np.log(n)


def timed(call, Y, repeats: int):
    """``(median wall s, median CPU s, largest peak MB, load text, result)`` of
    ``repeats`` calls ``call(Y)``: process CPU seconds (all threads), each
    call's own peak resident memory, the load average during the calls."""
    runs = [measure(lambda: call(Y), sample_s=60,
                    log=lambda line: print(line, file=sys.stderr, flush=True))
            for _ in range(repeats)]
    load = [v for m in runs for v in m.load]
    text = f"{min(load):.1f}-{max(load):.1f}"
    return (statistics.median(m.wall_s for m in runs),
            statistics.median(m.cpu_s for m in runs), max(m.peak_mb for m in runs),
            f"{text} ({runs[0].started}-{runs[-1].ended} UTC)", runs[-1].out)


def run_case(d: int, n: int, args, systems) -> list[dict]:
    h = n ** (-1 / (d + 4))
    X, Y = make_data(n, d)
    nq = int(args.queries or n)
    Y = Y[:nq] if nq <= n else make_data(nq, d, seed=3)[1]
    rows = np.random.default_rng(1).choice(nq, size=min(args.check_rows, nq),
                                           replace=False)
    ref = reference(X, Y[rows], h)
    Xw, Yw = make_data(args.warmup, d, seed=2)
    hw = args.warmup ** (-1 / (d + 4))
    results = []
    for system in systems:
        call_w = make_call(system, Xw, hw)
        t_first = time.perf_counter()
        call_w(Yw)  # compiles
        t_first = time.perf_counter() - t_first
        t0 = time.perf_counter()
        call_w(Yw)
        t_warm = time.perf_counter() - t0
        guess = t_warm * (n / args.warmup) * (nq / args.warmup)
        row = {"system": system, "D": d, "N": n, "Q": nq, "h": h, "warmup_s": t_warm,
               "first_call_s": t_first}
        call = make_call(system, X, h)
        subset_ok = args.subset_ours or not system.startswith("kerneltools")
        print(f"[{time.strftime('%H:%M:%S', time.gmtime())}] {system}: D {d}, "
              f"N {n}, Q {nq}", file=sys.stderr, flush=True)
        if subset_ok and n != args.warmup and (args.subset_queries
                                               or guess > args.max_seconds):
            # queries are independent: time a subset, scale by Q / subset
            k = int(args.subset_queries or nq * args.max_seconds / guess)
            k = max(len(rows), min(k, nq))
            sub = np.union1d(rows, np.arange(k - len(rows)))
            t_sub, c_sub, peak, load, out_sub = timed(call, Y[sub], args.repeats)
            row["seconds"] = t_sub * nq / len(sub)
            row["cpu_seconds"] = c_sub * nq / len(sub)
            row["note"] = (f"timed on {len(sub)} queries ({t_sub:.4g} s wall, "
                           f"{c_sub:.4g} CPU s), x Q / {len(sub)}: an extrapolation")
            got = out_sub[np.searchsorted(sub, rows)]
        else:
            row["seconds"], row["cpu_seconds"], peak, load, out = timed(
                call, Y, args.repeats)
            got = out[rows]
        row["peak_mb"], row["load"] = peak, load
        row["log_abs_err"] = float(np.max(np.abs(got - ref)))
        row["dens_rel_err"] = float(np.max(np.abs(np.expm1(got - ref))))
        print(row, file=sys.stderr, flush=True)
        results.append(row)
    return results


def table(results: list[dict], load: str, anchor_system: str) -> list[str]:
    lines = [f"Gaussian KDE score_samples, N train, Q queries; load average {load} "
             "(shared machine); median seconds (wall and process CPU, all threads), "
             f"ratio = system / {anchor_system} in CPU seconds; each call's peak "
             "resident memory and the 1-minute load average during it; errors vs "
             "dense float64 on the checked rows", "",
             "| D | N | Q | h | system | wall s | CPU s | ratio (CPU) | peak MB | load | "
             "max abs err (log p) | max rel err (p) | note |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    anchor = {(r["D"], r["N"]): r["cpu_seconds"] for r in results
              if r["system"] == anchor_system}
    for r in results:
        a, c = anchor.get((r["D"], r["N"])), r["cpu_seconds"]
        ratio = f"{c / a:.1f}" if c and a else "-"
        lines.append(
            f"| {r['D']} | {r['N']:.0e} | {r['Q']:.0e} | {r['h']:.3f} | {r['system']} | "
            f"{r['seconds']:.4g} | {c:.4g} | {ratio} | {r['peak_mb']:.0f} | {r['load']} | "
            f"{r['log_abs_err']:.1e} | {r['dens_rel_err']:.1e} | {r.get('note', '')} |")
    return lines


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=float, default=1e5, help="training = query points")
    p.add_argument("--queries", type=float, default=None, help="queries (default N)")
    p.add_argument("--subset-ours", action="store_true",
                   help="time kerneltools on a subset too past --max-seconds")
    p.add_argument("--dims", default="2,16")
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--warmup", type=int, default=10_000)
    p.add_argument("--max-seconds", type=float, default=600.0)
    p.add_argument("--subset-queries", type=float, default=None,
                   help="time the subset systems on this many queries (instead of "
                        "the number --max-seconds gives)")
    p.add_argument("--anchor", default="kerneltools",
                   help="the system the ratios divide by")
    p.add_argument("--check-rows", type=int, default=200)
    p.add_argument("--out", default=None, help="also write the table here")
    args = p.parse_args(argv)
    systems = [s for s in args.systems.split(",") if s]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        p.error(f"unknown systems {sorted(unknown)}; expected some of {SYSTEMS}")
    load = " ".join(f"{v:.1f}" for v in os.getloadavg())
    results = []
    for d in (int(v) for v in args.dims.split(",")):
        results += run_case(d, int(args.n), args, systems)
    emit(table(results, load, args.anchor), args.out)


if __name__ == "__main__":
    main()
