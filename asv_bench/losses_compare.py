#!/usr/bin/env python
"""Issue 27, side by side in one run: SamplesLoss vs GeomLoss, multiscale
Sinkhorn vs GeomLoss multiscale, the MMD permutation test vs dense NumPy.

The problems are those of ``benchmarks/losses.py``. Each case: one untimed
warm-up (compilation), then ``--repeats`` timed calls; the report gives the
median seconds, the value each system computes, and the ratio
other / kerneltools (> 1: kerneltools is faster), with the load average
(the machine may be shared: the ratios, measured in the same run, are the
comparable numbers).

- ``samples_loss``: forward + backward of ``SamplesLoss(loss)(x, y)`` in x,
  kerneltools against ``geomloss.SamplesLoss(..., backend="online")`` (KeOps
  on the CPU) and ``"tensorized"`` (dense torch) where it fits.
- ``multiscale``: the Sinkhorn divergence, blur 0.05, D = 3, kerneltools
  ``multiscale=True`` and dense against GeomLoss ``backend="multiscale"``.
- ``mmd``: ``stats.mmd_test`` (1,000 permutations, all of them as the
  columns of products of dense row blocks of K, float32) against a dense
  NumPy test (the float64 kernel matrix in memory, all permutations as one
  BLAS product ``K @ U``), D = 79, time and peak memory.
- ``hsic``: ``stats.hsic_test`` (200 permutations, 16 per reduction)
  against a dense NumPy test (centred K and L in memory).
- ``mmd_statistic``: the observed MMD^2 alone by float64 NumPy row blocks
  (and ``stats.mmd2``, the engine's reductions, with ``--mmd-engine``): a
  check of ``mmd``'s statistic where the dense K does not fit.
- ``multiscale_big``: multiscale Sinkhorn only, blur 0.05 and 0.01, at
  ``--big-n`` points, against GeomLoss's multiscale backend.

Example::

    python asv_bench/losses_compare.py --n 10000 --mmd-n 2000 --out losses.md
    python asv_bench/losses_compare.py --cases mmd --mmd-n 2000,10000
    python asv_bench/losses_compare.py --cases multiscale_big --big-n 100000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from functools import partial

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _measure import measure  # noqa: E402
from benchmarks import losses as B  # noqa: E402


#: False (``--no-warmup``): no untimed call first; for a second run whose
#: kernels (ours and pykeops') are already in their on-disk caches.
WARMUP = True


def timed(fn, repeats):
    if WARMUP:
        fn()  # warm-up: compilation, caches
    times, cpus, out = [], [], None
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        times.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    LAST_CPU[0] = statistics.median(cpus)
    return statistics.median(times), out


#: The process CPU seconds (all threads) of the last ``timed`` call: on a
#: shared machine the fairer measure of two systems timed one after the other.
LAST_CPU = [float("nan")]


def geomloss_loss(name, **kw):
    import geomloss

    return geomloss.SamplesLoss(name, **kw)


def case_samples_loss(args, rows):
    from kerneltools.torch import SamplesLoss

    x, y = B.clouds(args.n)
    for loss, blur in (("sinkhorn", 0.05), ("gaussian", 0.1)):
        systems = [("kerneltools", SamplesLoss(loss, blur=blur)),
                   ("geomloss online", geomloss_loss(loss, blur=blur, backend="online"))]
        if args.n <= 5000:
            systems.append(("geomloss tensorized",
                            geomloss_loss(loss, blur=blur, backend="tensorized")))
        base = None
        for name, L in systems:
            t, (v, _) = timed(lambda: B.samples_loss_step(L, x, y), args.repeats)
            base = t if base is None else base
            rows.append([f"SamplesLoss {loss} fwd+bwd", args.n,
                         f"{name} (CPU {LAST_CPU[0]:.3g} s)", t, v, t / base])


def case_multiscale(args, rows):
    """The Sinkhorn divergence at ``--n`` points, blur 0.05 and 0.01: our
    multiscale against GeomLoss's multiscale, our dense (online) solver
    against GeomLoss's online backend; each row gives the relative difference
    of its value from its counterpart's (ours). GeomLoss's multiscale warm-up
    runs with ``verbose=True``: its clusters and kept blocks are printed, to
    show what it ran."""
    import torch

    from kerneltools.estimators.optimal_transport import sinkhorn_divergence

    x, y = B.clouds(args.n)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    for blur in (float(b) for b in args.blurs.split(",")):
        def gl(backend, blur=blur, verbose=False):
            L = geomloss_loss("sinkhorn", blur=blur, backend=backend, verbose=verbose)
            return float(L(xt, yt))

        pairs = [
            ("multiscale",
             lambda blur=blur: sinkhorn_divergence(x, y, blur=blur, multiscale=True),
             lambda: gl("multiscale"), lambda: gl("multiscale", verbose=True)),
            ("online", lambda blur=blur: sinkhorn_divergence(x, y, blur=blur),
             lambda: gl("online"), None),
        ]
        base = None
        for mode, ours, theirs, warm in pairs:
            t, v = timed(ours, args.repeats)
            base = t if base is None else base
            rows.append([f"Sinkhorn 3-D blur {blur}", args.n,
                         f"kerneltools {mode} (CPU {LAST_CPU[0]:.3g} s)", t, v, t / base])
            print(rows[-1], file=sys.stderr, flush=True)
            if warm is not None and WARMUP:
                warm()
            t, w = timed(theirs, args.repeats)
            rows.append([f"Sinkhorn 3-D blur {blur} (rel. diff {abs(w - v) / abs(v):.1e})",
                         args.n, f"geomloss {mode} (CPU {LAST_CPU[0]:.3g} s)", t, w,
                         t / base])
            print(rows[-1], file=sys.stderr, flush=True)


def case_multiscale_big(args, rows):
    """Kerneltools against GeomLoss's multiscale backend at ``--big-n``
    points, one blur of ``--big-blurs`` after the other, one system of
    ``--big-systems`` after the other: ``kerneltools`` (our multiscale),
    ``kerneltools-online`` (our dense solver, quadratic) and ``geomloss``
    (``backend="multiscale"``, ``verbose=True``: its clusters and kept blocks
    are printed). The warm-up (compilation) runs at 1,000 points; then one
    timed call each, with its process CPU seconds, its own peak resident
    memory, the load average during it, and its value's relative difference
    from our multiscale value (the first system of the blur)."""
    import torch

    from kerneltools.estimators.optimal_transport import sinkhorn_divergence

    x, y = B.clouds(args.big_n)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    xs, ys = B.clouds(1000)
    systems = args.big_systems.split(",")
    unknown = set(systems) - {"kerneltools", "kerneltools-online", "geomloss"}
    if unknown:
        raise SystemExit(f"--big-systems: unknown {sorted(unknown)}; expected some "
                         "of kerneltools, kerneltools-online, geomloss")
    def log(line):
        print(line, file=sys.stderr, flush=True)

    for blur in (float(b) for b in args.big_blurs.split(",")):
        def ours(u, v, blur=blur):
            return sinkhorn_divergence(u, v, blur=blur, multiscale=True)

        def ours_online(u, v, blur=blur):
            return sinkhorn_divergence(u, v, blur=blur)

        def theirs(u, v, blur=blur, verbose=False):
            return float(geomloss_loss("sinkhorn", blur=blur, backend="multiscale",
                                       verbose=verbose)(u, v))

        base = ref = None
        tiny = (torch.from_numpy(xs), torch.from_numpy(ys))
        for name, fn, small, big in (
                ("kerneltools", ours, (xs, ys), (x, y)),
                ("kerneltools-online", ours_online, (xs, ys), (x, y)),
                ("geomloss", partial(theirs, verbose=True), tiny, (xt, yt))):
            if name not in systems:
                continue
            log(f"[{time.strftime('%H:%M:%S', time.gmtime())}] {name}, blur {blur}, "
                f"n {args.big_n}: warm-up at 1,000 points")
            fn(*small)  # compilation
            m = measure(lambda fn=fn, big=big: fn(*big), sample_s=60, log=log)
            v = float(m.out)
            base = m.cpu_s if base is None else base
            ref = v if ref is None else ref
            rel = "" if ref is v else f" (rel. diff {abs(v - ref) / abs(ref):.1e})"
            label = {"kerneltools": "kerneltools multiscale",
                     "kerneltools-online": "kerneltools online",
                     "geomloss": "geomloss multiscale"}[name]
            rows.append([f"Sinkhorn 3-D blur {blur}{rel}", args.big_n,
                         f"{label} (wall {m.wall_s:.4g} s, peak {m.peak_mb:.0f} MB, "
                         f"load {m.load_text()}, {m.when()})",
                         m.cpu_s, v, m.cpu_s / base])
            log(str(rows[-1]))


def dense_mmd_test(X, Y, n_perm, seed=0):
    """The same test densely: K in memory (float64, built in place), the
    permutations' indicators as the columns of one matrix product (the same
    permutations and statistic)."""
    from kerneltools.stats import median_bandwidth

    Z = np.concatenate([X, Y]).astype(np.float64)
    n, N = len(X), len(Z)
    gamma = 1 / (2 * median_bandwidth(Z) ** 2)
    sq = (Z**2).sum(1)
    K = Z @ Z.T
    K *= -2
    K += sq[:, None]
    K += sq[None, :]
    np.maximum(K, 0, out=K)
    K *= -gamma
    np.exp(K, out=K)
    d, r1, tot = np.diag(K).copy(), K.sum(1), K.sum()
    rng = np.random.default_rng(seed)
    U = np.zeros((N, n_perm + 1))
    U[:n, 0] = 1
    for k in range(n_perm):
        U[rng.permutation(N)[:n], k + 1] = 1
    KU = K @ U
    del K
    s_xx = (U * KU).sum(0)
    s_x1 = U.T @ r1
    s_yy, s_xy = tot - 2 * s_x1 + s_xx, s_x1 - s_xx
    d_x = U.T @ d
    m = N - n
    stat = ((s_xx - d_x) / (n * (n - 1)) + (s_yy - (d.sum() - d_x)) / (m * (m - 1))
            - 2 * s_xy / (n * m))
    return stat[0], (1 + np.sum(stat[1:] >= stat[0])) / (1 + n_perm)


#: The largest pooled sample whose dense float64 kernel matrix this script
#: builds (3.2 GB at 2 x 10^4): beyond it, "does not fit" is the result.
DENSE_MAX_N = 20_000


def _peak(fn):
    """``(seconds, result, peak MB of NumPy allocations)`` of one call."""
    import tracemalloc

    tracemalloc.start()
    t = time.perf_counter()
    out = fn()
    t = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return t, out, peak


def case_mmd(args, rows):
    """mmd_test (dense row blocks, float32) against the dense NumPy test, at
    each ``--mmd-n`` (points per sample), ``--mmd-perms`` permutations. One
    timed call (a warm-up first below 10^4 points), with its process CPU
    seconds (all threads; the time column), wall seconds, its own peak
    resident memory and the load average during it."""
    from kerneltools import stats

    def log(line):
        print(line, file=sys.stderr, flush=True)

    for n in (int(v) for v in args.mmd_n.split(",")):
        X, Y = B.two_samples(n)
        P = args.mmd_perms
        systems = [("kerneltools", lambda: stats.mmd_test(
            X, Y, n_permutations=P, random_state=0, verbose=args.verbose))]
        if 2 * n <= DENSE_MAX_N:
            systems.append(("dense NumPy", lambda: dense_mmd_test(X, Y, P)))
        base = None
        for name, fn in systems:
            if n < 10_000:
                fn()
            log(f"[{time.strftime('%H:%M:%S', time.gmtime())}] MMD {name} {n}+{n}")
            m = measure(fn, sample_s=60, log=log)
            out = m.out
            base = m.cpu_s if base is None else base
            v = out.statistic if hasattr(out, "statistic") else out[0]
            p = out.pvalue if hasattr(out, "pvalue") else out[1]
            rows.append([f"MMD test {P} perms D=79 (p={p:.4g})", f"{n}+{n}",
                         f"{name} (wall {m.wall_s:.4g} s, peak {m.peak_mb:.0f} MB, "
                         f"load {m.load_text()}, {m.when()})",
                         m.cpu_s, float(v), m.cpu_s / base])
            log(str(rows[-1]))
        if 2 * n > DENSE_MAX_N:
            rows.append([f"MMD test {P} perms D=79", f"{n}+{n}", "dense NumPy",
                         float("nan"), f"K needs {(2 * n) ** 2 * 8 / 2**30:.0f} GB", ""])


def blocked_mmd2(X, Y, rows=512):
    """The unbiased MMD^2 of the rbf kernel with the median bandwidth, as
    ``stats.mmd2``, by float64 NumPy row blocks of K_xx, K_yy (upper
    triangles, K symmetric) and K_xy: linear memory (one block of ``rows`` x N
    float64 at a time, 400 MB at 512 x 10^5; 2,048 rows, as first run, and
    the temporaries of an out-of-place sum peaked at 5 GB), a reference where
    the dense K does not fit (independent of the library but for the
    bandwidth)."""
    from kerneltools.stats import median_bandwidth

    Z = np.concatenate([X, Y]).astype(np.float64)
    gamma = 1 / (2 * median_bandwidth(Z) ** 2)
    Z -= Z.mean(axis=0)
    A, Bm = Z[: len(X)], Z[len(X):]

    def block_sum(P, Q, symmetric):
        sq_q, total = (Q**2).sum(1), 0.0
        for r0 in range(0, len(P), rows):
            Pb = P[r0 : r0 + rows]
            Qb = Q[r0:] if symmetric else Q
            d2 = Pb @ Qb.T  # one block of rows x len(Q) float64, then in place
            d2 *= -2
            d2 += (Pb**2).sum(1)[:, None]
            d2 += sq_q[r0 if symmetric else 0 :][None, :]
            np.maximum(d2, 0, out=d2)
            d2 *= -gamma
            Kb = np.exp(d2, out=d2)
            if symmetric:  # the block's diagonal square: its upper part only
                sq = np.triu(Kb[:, : len(Pb)], 1).sum()
                total += 2 * (sq + Kb[:, len(Pb):].sum())
            else:
                total += Kb.sum()
        return total

    n, m = len(A), len(Bm)
    return (block_sum(A, A, True) / (n * (n - 1)) + block_sum(Bm, Bm, True) / (m * (m - 1))
            - 2 * block_sum(A, Bm, False) / (n * m))


def case_mmd_statistic(args, rows):
    """The observed unbiased MMD^2 alone at each ``--mmd-n``, by the float64
    row-block reference :func:`blocked_mmd2` and, with ``--mmd-engine``, by
    ``stats.mmd2`` (the engine's Sum reductions, float32): a check of
    ``mmd``'s statistic where no dense reference fits. CPU seconds, wall,
    peak and load as ``mmd``."""
    from kerneltools import stats

    def log(line):
        print(line, file=sys.stderr, flush=True)

    for n in (int(v) for v in args.mmd_n.split(",")):
        X, Y = B.two_samples(n)
        systems = [("NumPy float64 row blocks", lambda: blocked_mmd2(X, Y))]
        if args.mmd_engine:
            stats.mmd2(X[:500], Y[:500])  # compilation
            systems.append(("kerneltools stats.mmd2 (reductions)",
                            lambda: stats.mmd2(X, Y)))
        for name, fn in systems:
            m = measure(fn, sample_s=60, log=log)
            rows.append(["MMD^2 statistic D=79", f"{n}+{n}",
                         f"{name} (wall {m.wall_s:.4g} s, peak {m.peak_mb:.0f} MB, "
                         f"load {m.load_text()}, {m.when()})", m.cpu_s,
                         float(m.out), ""])
            log(str(rows[-1]))


class _Enough(Exception):
    """Raised by the progress callback to stop a pass after some row blocks."""


def case_mmd_extrapolate(args, rows):
    """The MMD permutation test's pass at ``--mmd-n`` points per sample, cut
    after ``--mmd-blocks`` row blocks: the same ``quadratic_forms`` as
    ``stats.mmd_test`` (rbf, median bandwidth, float32, ``--mmd-perms`` + 1
    zero-sum label columns in one pass), timed in process CPU seconds (all
    threads) and wall seconds, per pair of points and column, against this
    process's own float32 GEMM rate measured just before; then extrapolated
    to the whole pass (the N^2 / 2 pairs of the symmetric K). For sizes no
    full run fits on a shared machine in a session."""
    from kerneltools.stats import _blocks as kb
    from kerneltools.stats import median_bandwidth

    n = int(args.mmd_n.split(",")[0])
    X, Y = B.two_samples(n)
    Z = np.concatenate([X, Y])
    N, P = len(Z), args.mmd_perms + 1
    rng = np.random.default_rng(0)
    S = np.full((N, P), -float(n), dtype=np.float32)
    for c in range(P):
        S[np.arange(n) if c == 0 else rng.permutation(N)[:n], c] = n
    gamma = 1 / (2 * median_bandwidth(Z) ** 2)
    block, diag = kb.block_kernel(_rbf_kernel(gamma), Z.shape[1])
    rb = kb._rows_per_block(N, 4)
    ct = kb._columns_per_tile(rb, N, 4)
    # the GEMM rate of the pass's product shape, in this process, now
    A = rng.standard_normal((rb, ct), dtype=np.float32)
    c0, w0 = time.process_time(), time.perf_counter()
    A @ S[:ct]
    gemm_cpu, gemm_wall = time.process_time() - c0, time.perf_counter() - w0
    rate_cpu, rate_wall = 2 * rb * ct * P / gemm_cpu, 2 * rb * ct * P / gemm_wall
    del A
    done = {}

    def progress(k, r1, rows):
        done["rows"] = r1
        print(f"  {r1} rows: {time.process_time() - c0:.1f} CPU s, "
              f"{time.perf_counter() - w0:.1f} s", file=sys.stderr, flush=True)
        if r1 >= args.mmd_blocks * rb:
            raise _Enough

    c0, w0 = time.process_time(), time.perf_counter()
    try:
        kb.quadratic_forms(Z, block, diag, lambda: iter([S]), progress)
    except _Enough:
        pass
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    r1 = done["rows"]
    pairs = r1 * N - r1 * (r1 - 1) / 2  # the rows' part of the upper triangle
    total = N * (N + 1) / 2
    floor = 2 * total * P / rate_cpu  # the products alone at the GEMM rate
    label = (f"MMD pass {P - 1} perms D=79, first {r1} of {N} rows "
             f"({pairs / total:.1%} of the pairs)")
    rows.append([label, f"{n}+{n}", "kerneltools (CPU s)", cpu, float("nan"), ""])
    rows.append([label, f"{n}+{n}", "kerneltools (wall s)", wall, float("nan"), ""])
    rows.append([f"  per pair and column: {cpu / pairs / P * 1e9:.3f} CPU ns; "
                 f"GEMM {rate_cpu / 1e9:.1f} GFLOP per CPU s "
                 f"({rate_wall / 1e9:.1f} per wall s) = "
                 f"{2 / rate_cpu * 1e9:.3f} CPU ns", f"{n}+{n}", "", float("nan"),
                 float("nan"), ""])
    rows.append([f"  whole pass extrapolated (products floor {floor:.3g} CPU s)",
                 f"{n}+{n}", "kerneltools (CPU s)", cpu * total / pairs, float("nan"),
                 f"{cpu * total / pairs / floor:.2f} x floor"])


def _rbf_kernel(gamma):
    from kerneltools.kernels import make_kernel

    return make_kernel("rbf", gamma=gamma)


def dense_hsic_test(X, Y, n_perm, seed=0):
    """HSIC's permutation test densely: the centred K and L in memory, one
    ``sum(Kc * L[pi][:, pi])`` per permutation (the same permutations)."""
    from kerneltools.stats import median_bandwidth

    def gram(A):
        sq = (A**2).sum(1)
        d2 = np.maximum(sq[:, None] + sq[None, :] - 2 * A @ A.T, 0)
        return np.exp(-d2 / (2 * median_bandwidth(A) ** 2))

    X, Y = X.astype(np.float64), Y.astype(np.float64)
    n = len(X)
    K, L = gram(X), gram(Y)
    Kc = K - K.mean(0)[None, :] - K.mean(1)[:, None] + K.mean()
    obs = (Kc * L).sum() / n**2
    rng = np.random.default_rng(seed)
    null = np.array([(Kc * L[np.ix_(q, q)]).sum() / n**2
                     for q in (rng.permutation(n) for _ in range(n_perm))])
    return obs, (1 + np.sum(null >= obs - 1e-10 * obs)) / (1 + n_perm)


def case_hsic(args, rows):
    """hsic_test (16 permutations per reduction) against the dense test, on a
    dependent pair in 2-D + 1-D, ``--hsic-n`` points, 200 permutations."""
    from kerneltools import stats

    rng = np.random.default_rng(0)
    n = args.hsic_n
    X = rng.standard_normal((n, 2)).astype(np.float32)
    Y = (X[:, :1] + rng.standard_normal((n, 1))).astype(np.float32)
    base = None
    for name, fn in (("kerneltools", lambda: stats.hsic_test(X, Y, n_permutations=200,
                                                               random_state=0)),
                     ("dense NumPy", lambda: dense_hsic_test(X, Y, 200))):
        fn()
        t, out, peak = _peak(fn)
        base = t if base is None else base
        v, p = (out.statistic, out.pvalue) if hasattr(out, "pvalue") else out
        rows.append([f"HSIC test 200 perms (p={p:.3g}, peak {peak:.0f} MB)", n, name, t,
                     float(v), t / base])


def report(rows, load_start, load_end):
    lines = [f"load average at start {load_start}, at end {load_end} (shared machine)", "",
             "seconds: the median wall time; CPU seconds (all threads) where the "
             "system column gives the wall time", "",
             "| case | n | system | s | value | time / kerneltools |",
             "|---|---|---|---|---|---|"]
    for case, n, name, t, v, r in rows:
        v = f"{v:.6g}" if isinstance(v, float) else v
        r = f"{r:.2f}" if isinstance(r, float) else r
        lines.append(f"| {case} | {n} | {name} | {t:.3g} | {v} | {r} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--mmd-n", default="2000", help="points per sample, comma-separated")
    ap.add_argument("--mmd-perms", type=int, default=1000)
    ap.add_argument("--mmd-blocks", type=int, default=2,
                    help="mmd_extrapolate: row blocks to time")
    ap.add_argument("--mmd-engine", action="store_true",
                    help="mmd_statistic: stats.mmd2 too")
    ap.add_argument("--hsic-n", type=int, default=2000)
    ap.add_argument("--big-n", type=int, default=100_000)
    ap.add_argument("--blurs", default="0.05,0.01", help="multiscale's blurs")
    ap.add_argument("--no-warmup", action="store_true",
                    help="no untimed first call (kernels already in the disk caches)")
    ap.add_argument("--big-blurs", default="0.05,0.01", help="multiscale_big's blurs")
    ap.add_argument("--big-systems", default="kerneltools,geomloss",
                    help="multiscale_big's systems, in this order: kerneltools "
                         "(multiscale), kerneltools-online, geomloss (multiscale)")
    ap.add_argument("--verbose", action="store_true", help="mmd: progress of the passes")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--cases", default="samples_loss,multiscale,mmd")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    global WARMUP
    WARMUP = not args.no_warmup
    warnings.simplefilter("ignore")
    load_start = os.getloadavg()[0]
    rows = []
    for case in args.cases.split(","):
        {"samples_loss": case_samples_loss, "multiscale": case_multiscale,
         "multiscale_big": case_multiscale_big, "mmd": case_mmd,
         "hsic": case_hsic, "mmd_extrapolate": case_mmd_extrapolate,
         "mmd_statistic": case_mmd_statistic}[case](args, rows)
        print(report(rows, load_start, os.getloadavg()[0]), file=sys.stderr, flush=True)
    text = report(rows, load_start, os.getloadavg()[0])
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
