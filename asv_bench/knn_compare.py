#!/usr/bin/env python
"""Exact k-NN (K = 10): kerneltools against scikit-learn, FAISS and pykeops.

Prints a Markdown report: one row per case (D, dtype, N queries, M points)
with the median seconds of fit + query per system, the ratios other /
kerneltools (> 1: kerneltools is faster), and each system's recall against
exact neighbours; then a detail table (first call, min, CPU use, peak
memory, notes).

Systems (each fits on the M points, then finds the K nearest of the N
queries; all on the 2 cores of the machine):

- ``kerneltools``      ``NearestNeighbors(n_neighbors=K).fit(Y).kneighbors(X)``
  (for D <= 3 and M >= 20,000, its pruned search: Z-order cells, one
  block-sparse K-min over the nearby cell pairs; for D >= 20, its expanded
  search: candidates from ``|y|^2 - 2 <x, y>``, exact re-ranking, a per-row
  certificate; the note gives how many query rows per call failed it and
  were searched again in the direct form)
- ``kerneltools-engine`` the same with every K-min on the engine's reductions
  (the route before the float32 BLAS tiles of ``_neighbors_gemm.py`` and the
  block-sparse K-min in C of ``_neighbors_cells.py``: a same-run "before")
- ``kerneltools-brute`` the same with ``algorithm="brute"`` (every pair)
- ``sklearn-auto``     scikit-learn ``NearestNeighbors(n_jobs=2)``, the algorithm
  it picks (kd-tree at D = 3, brute force above 15 features)
- ``sklearn-brute``    scikit-learn ``NearestNeighbors(algorithm="brute", n_jobs=2)``
- ``sklearn-kd_tree``  the same with ``algorithm="kd_tree"`` (not brute force)
- ``faiss``            ``faiss.IndexFlatL2``: ``add(Y)``, ``search(X, K)``
- ``pykeops``          ``((x_i - y_j) ** 2).sum(-1).argKmin(K, dim=1)``, CPU

Points follow ``/work/shared/research/anchor_numbers.md`` (section 3): D = 3
uniform in the unit cube, larger D standard Gaussian; queries and points
are independent draws. ``--data clustered``: 50 Gaussian blobs (centres
drawn as above, the same for queries and points; standard deviation 0.02
for D <= 3, 0.2 above).

Method (as ``compare.py``, whose helpers this script uses): per D, the first
case (``--warmup-case``, 1e4 x 1e4 by default) compiles kerneltools' and
pykeops' kernels and gives each system's time per pair; a later case whose
extrapolated time (x N M) passes ``--max-seconds`` is skipped (kerneltools
always runs), and above ``--no-warmup-above`` seconds the same-size warm-up
call is skipped.
Recall: on ``--check-rows`` random queries, the fraction of returned indices
among the exact K nearest (float64, direct differences for D <= 8, else
BLAS); float32 near-ties can cost an exact method a few 1e-5.

Examples (from the repository root)::

    python asv_bench/knn_compare.py                             # the issue's table
    python asv_bench/knn_compare.py --cases 2e4:2e4 --dims 3    # a quick look
    python asv_bench/knn_compare.py --systems kerneltools,faiss --repeats 3
    python asv_bench/knn_compare.py --small 100:3,1000:3,100:32,1000:32  # fixed costs
    python asv_bench/knn_compare.py --cases 1e5:1e5,1e6:1e6 --dims 3 \
        --data uniform,clustered --repeats 3 \
        --systems kerneltools,kerneltools-brute,sklearn-kd_tree,faiss  # issue 8
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare as C  # needs the path above
from benchmarks import neighbors as B

SYSTEMS = ("kerneltools", "kerneltools-engine", "kerneltools-brute", "sklearn-auto",
           "sklearn-brute", "sklearn-kd_tree", "faiss", "pykeops")
BRUTE = ("kerneltools-brute", "sklearn-brute", "faiss", "pykeops")
DATA = ("uniform", "clustered")


# -- systems --------------------------------------------------------------------------


def kerneltools_knn(X, Y, k, fallback_rows: list):
    """kerneltools' fit + query; appends the rows that fell back per call."""
    from kerneltools.estimators.neighbors.search import _formula as M

    run, original = B.kerneltools_knn(X, Y, k, backend="cpu"), M.ExpandedSearch.fallback

    def spy(self, queries, k_):
        fallback_rows[-1] += len(queries)
        return original(self, queries, k_)

    def call():
        fallback_rows.append(0)
        M.ExpandedSearch.fallback = spy
        try:
            return run()
        finally:
            M.ExpandedSearch.fallback = original

    return call


def kerneltools_engine_knn(X, Y, k):
    """kerneltools' fit + query with the tiled and C-selection routes off."""
    from kerneltools.estimators.neighbors.search import _cells as _neighbors_cells, _gemm as _neighbors_gemm

    run = B.kerneltools_knn(X, Y, k, backend="cpu")

    def call():
        saved = _neighbors_gemm.MIN_PAIRS, _neighbors_cells.CellSearch._on_host
        _neighbors_gemm.MIN_PAIRS = 1 << 62
        _neighbors_cells.CellSearch._on_host = lambda self: False
        try:
            return run()
        finally:
            _neighbors_gemm.MIN_PAIRS, _neighbors_cells.CellSearch._on_host = saved

    return call


def kerneltools_brute_knn(X, Y, k):
    from kerneltools.estimators.neighbors import NearestNeighbors

    nn = NearestNeighbors(n_neighbors=k, algorithm="brute", backend="cpu")
    return lambda: nn.fit(Y).kneighbors(X)


def faiss_knn(X, Y, k):
    import faiss

    def run():
        index = faiss.IndexFlatL2(Y.shape[1])
        index.add(Y)
        return index.search(X, k)

    return run


def pykeops_knn(X, Y, k):
    PK = C.R.pykeops_import()
    x_i, y_j = PK(X[:, None, :]), PK(Y[None, :, :])

    def run():
        return None, ((x_i - y_j) ** 2).sum(-1).argKmin(k, dim=1, backend="CPU")

    return run


def make_callable(system: str, X, Y, k: int, fallback_rows: list):
    """A function doing fit + query, returning (distances or None, indices)."""
    if system == "kerneltools":
        return kerneltools_knn(X, Y, k, fallback_rows)
    if system == "kerneltools-engine":
        return kerneltools_engine_knn(X, Y, k)
    if system == "kerneltools-brute":
        return kerneltools_brute_knn(X, Y, k)
    if system.startswith("sklearn-"):
        return B.sklearn_knn(X, Y, k, algorithm=system.split("-", 1)[1])
    if system == "faiss":
        return faiss_knn(X, Y, k)
    if system == "pykeops":
        return pykeops_knn(X, Y, k)
    raise ValueError(system)


def availability(system: str) -> str | None:
    """None if the system can run here, else why not."""
    try:
        if system == "faiss":
            import faiss  # noqa: F401
        elif system == "pykeops":
            C.R.pykeops_import()
    except ImportError as exc:
        return f"{system} not importable: {exc}"
    return None


# -- exact neighbours ---------------------------------------------------------------


def exact_knn(X, Y, k: int) -> np.ndarray:
    """Indices of the k nearest Y of each X row, float64 (chunks of rows)."""
    X, Y = X.astype(np.float64), Y.astype(np.float64)
    y2 = np.einsum("ij,ij->i", Y, Y)
    chunk = max(1, int(2e7 // Y.shape[0]))
    out = []
    for s in range(0, len(X), chunk):
        xc = X[s : s + chunk]
        if X.shape[1] <= 8:
            D2 = np.zeros((len(xc), len(Y)))
            for f in range(X.shape[1]):
                D2 += (xc[:, f, None] - Y[None, :, f]) ** 2
        else:
            D2 = y2[None, :] - 2 * (xc @ Y.T)  # + |x|^2: the same order per row
        part = np.argpartition(D2, k - 1, axis=1)[:, :k]
        order = np.argsort(np.take_along_axis(D2, part, axis=1), axis=1)
        out.append(np.take_along_axis(part, order, axis=1))
    return np.concatenate(out)


def recall(found, true) -> float:
    found = np.asarray(found).astype(np.int64)
    hits = sum(len(set(a) & set(b)) for a, b in zip(found.tolist(), true.tolist()))
    return hits / true.size


# -- running ---------------------------------------------------------------------------


def make_data(kind: str, n: int, d: int, seed: int) -> np.ndarray:
    """n points of the kind (see the module docstring), float32."""
    if kind == "uniform":
        return B.make_points(n, d, np.float32, seed=seed)
    centres = B.make_points(50, d, np.float64, seed=12345)
    rng = np.random.default_rng(seed)
    spread = 0.02 if d <= 3 else 0.2
    pts = centres[rng.integers(0, 50, n)] + spread * rng.standard_normal((n, d))
    return pts.astype(np.float32)


def plan(args, system, d, n, m, last, data="uniform") -> dict:
    why = availability(system)
    if why:
        return {"status": "unavailable", "note": why}
    prev = last.get((system, d, data))
    est = prev[1] * (n * m) / prev[0] if prev else None
    # kerneltools, the subject, always runs; the estimate skips the others
    if est is not None and est > args.max_seconds and system != "kerneltools":
        return {
            "status": "skip",
            "cell": f"skip: est. {est:.3g} s",
            "note": f"estimated {est:.3g} s (x N M from the previous case) > "
            f"--max-seconds {args.max_seconds:g}",
        }
    return {"status": "run", "est_s": est}


def run_system(args, system, X, Y, est, rows, true) -> dict:
    warm = not (est is not None and est > args.no_warmup_above)
    rec: dict = {"status": "ok", "est_s": est}
    fallback_rows: list = []
    try:
        fn = make_callable(system, X, Y, args.k, fallback_rows)
        out, m = C.measure(fn, args.repeats, warm, args.case_budget)
        rec.update(m)
        rec["recall"] = recall(np.asarray(out[1])[rows], true)
        notes = [] if warm else [f"no same-size warm-up (est. {est:.3g} s)"]
        if fallback_rows:
            notes.append(f"direct-form fallback: {max(fallback_rows)} of {len(X)} rows")
        if notes:
            rec["note"] = "; ".join(notes)
    except MemoryError as exc:
        rec.update(status="error", cell="error: out of memory", note=C._short(exc))
    except Exception as exc:  # noqa: BLE001 (reported in the table)
        rec.update(
            status="error", cell=f"error: {type(exc).__name__}", note=C._short(exc)
        )
    return rec


def run_case(args, d, n, m, last, data="uniform") -> dict:
    load = round(os.getloadavg()[0], 2)
    case = {
        "d": d,
        "data": data,
        "dtype": "float32",
        "n": n,
        "m": m,
        "loadavg_1m_start": load,
        "systems": {},
    }
    X = make_data(data, n, d, seed=args.seed + 1)
    Y = make_data(data, m, d, seed=args.seed + 2)
    rng = np.random.default_rng(args.seed)
    rows = np.sort(rng.choice(n, min(args.check_rows, n), replace=False))
    true = exact_knn(X[rows], Y, args.k)
    print(f"[knn] D={d} {data} N={C.fmt_n(n)} M={C.fmt_n(m)} (load {load})",
          file=sys.stderr)
    for system in args.systems:
        p = plan(args, system, d, n, m, last, data)
        rec = (
            run_system(args, system, X, Y, p["est_s"], rows, true)
            if p["status"] == "run"
            else p
        )
        if rec["status"] == "ok":
            last[(system, d, data)] = (n * m, rec["median_s"])
        case["systems"][system] = rec
        print(
            f"[knn]   {system:<16} {C.fmt_s(rec.get('median_s')):>9}  "
            f"recall {rec.get('recall', '-')}  {rec.get('note', '')}",
            file=sys.stderr,
        )
    return case


# -- the report ---------------------------------------------------------------------


def _ratio(case, system) -> str:
    a, b = case["systems"].get(system, {}), case["systems"].get("kerneltools", {})
    if a.get("status") == "ok" and b.get("status") == "ok" and b["median_s"] > 0:
        return f"{a['median_s'] / b['median_s']:.2f}x"
    return "–"


def _cell(rec) -> str:
    if rec.get("status") != "ok":
        return rec.get("cell", rec.get("status", "–"))
    cell = C.fmt_s(rec["median_s"]) + ("" if "first_call_s" in rec else "²")
    return cell + ("" if rec["recall"] == 1 else f" [{rec['recall']:.5f}]")


def _fastest_brute(case) -> str:
    ok = [
        (case["systems"][s]["median_s"], s)
        for s in BRUTE
        if case["systems"].get(s, {}).get("status") == "ok"
    ]
    kt = case["systems"].get("kerneltools", {})
    if not ok or kt.get("status") != "ok":
        return "–"
    t, s = min(ok)
    return f"{s} ({t / kt['median_s']:.2f}x)"


def report(args, records, load_start, wall) -> str:
    now = datetime.datetime.now().isoformat(timespec="seconds")
    L = [
        f"# Exact k-NN, K = {args.k}: kerneltools vs scikit-learn, FAISS, pykeops",
        "",
        f"{now}; {len(records)} cases in {wall:.0f} s.",
        "",
    ]
    L += C.environment_lines(load_start)
    L.append(
        "- Load average at end (1, 5, 15 min): "
        + ", ".join(f"{v:.2f}" for v in os.getloadavg())
    )
    L.append(
        f"- Timed: fit + query, median of up to {args.repeats} call(s) after "
        f"one untimed warm-up; recall on {args.check_rows} queries against "
        "exact float64 neighbours."
    )
    L += [
        "",
        (
            "Cells: median seconds, [recall] when < 1; ² = no same-size warm-up. "
            "Ratios: other / kerneltools (> 1: kerneltools is faster)."
        ),
        "",
    ]
    others = [s for s in args.systems if s != "kerneltools"]
    head = ["D", "data", "dtype", "N", "M"] + list(args.systems)
    head += [f"{s} / kt" for s in others] + ["fastest brute / kt"]
    rows = []
    for c in records:
        row = [str(c["d"]), c.get("data", "uniform"), c["dtype"], C.fmt_n(c["n"]),
               C.fmt_n(c["m"])]
        row += [_cell(c["systems"][s]) for s in args.systems]
        row += [_ratio(c, s) for s in others] + [_fastest_brute(c)]
        rows.append(row)
    L += C._table(head, rows)
    L += [
        "",
        (
            "Details: first call = the untimed warm-up (includes compilation the "
            "first time); CPU use = CPU s / wall s; peak Δ = peak RSS minus the RSS "
            "before the timed calls."
        ),
        "",
    ]
    head = [
        "D",
        "data",
        "N",
        "M",
        "system",
        "first call",
        "median",
        "min",
        "calls",
        "CPU use",
        "peak Δ",
        "recall",
        "load 1m",
        "note",
    ]
    detail = []
    for c in records:
        for s in args.systems:
            r = c["systems"][s]
            ok = r.get("status") == "ok"
            detail.append(
                [
                    str(c["d"]),
                    c.get("data", "uniform"),
                    C.fmt_n(c["n"]),
                    C.fmt_n(c["m"]),
                    s,
                    C.fmt_s(r.get("first_call_s")),
                    C.fmt_s(r.get("median_s")) if ok else _cell(r),
                    C.fmt_s(r.get("min_s")),
                    str(len(r["times"])) if ok else "–",
                    f"{r['cpu_util']:.2f}" if ok and r.get("cpu_util") else "–",
                    f"{r['peak_mb']:.0f} MB"
                    if ok and r.get("peak_mb") is not None
                    else "–",
                    f"{r['recall']:.6f}" if ok else "–",
                    f"{c['loadavg_1m_start']:.2f}",
                    (r.get("note") or "").replace("|", "/"),
                ]
            )
    L += C._table(head, detail)
    return "\n".join(L + [""])


# -- command line ---------------------------------------------------------------------


def _cases(text: str) -> list[tuple[int, int]]:
    out = []
    for t in C._csv(text):
        try:
            n, m = (int(float(v)) for v in t.split(":"))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"cases are N:M pairs like 1e5:1e5,1e4:1e6; got {t!r}"
            ) from None
        if n < 1 or m < 10:
            raise argparse.ArgumentTypeError(f"case {t!r}: need N >= 1 and M >= 10")
        out.append((n, m))
    return out


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = p.add_argument
    add(
        "--cases",
        type=_cases,
        default=[(100_000, 100_000), (10_000, 1_000_000)],
        help="N:M pairs, queries:points (default 1e5:1e5,1e4:1e6)",
    )
    add(
        "--warmup-case",
        type=_cases,
        default=[(10_000, 10_000)],
        help="the first case of each D, which compiles and calibrates (default "
        "1e4:1e4; it is reported too)",
    )
    add(
        "--dims",
        type=lambda t: C._numbers(t, int, 1, "dims"),
        default=[3, 64],
        help="D values (default 3,64)",
    )
    add(
        "--systems",
        type=lambda t: C._choices(t, SYSTEMS, "system"),
        default=list(SYSTEMS),
        help="from " + ",".join(SYSTEMS) + " (default: all)",
    )
    add(
        "--data",
        type=lambda t: C._choices(t, DATA, "data"),
        default=["uniform"],
        help="point distributions, from " + ",".join(DATA) + " (default uniform)",
    )
    add("--k", type=int, default=B.K_NN, help="neighbours per query (default 10)")
    add("--repeats", type=int, default=1, help="timed calls per case (default 1)")
    add(
        "--max-seconds",
        type=float,
        default=200.0,
        help="skip a case whose estimated time per call exceeds this (default 200)",
    )
    add(
        "--no-warmup-above",
        type=float,
        default=5.0,
        help="no same-size warm-up above this estimated time (default 5)",
    )
    add(
        "--case-budget",
        type=float,
        default=90.0,
        help="stop the timed calls of a case after this many seconds (default 90)",
    )
    add("--check-rows", type=int, default=200, help="queries checked (default 200)")
    add("--seed", type=int, default=0)
    add("--out", help="also write the Markdown report to this file")
    add("--json", help="also write the raw records, one JSON object per line")
    args = p.parse_args(argv)
    if args.repeats < 1 or args.k < 1 or args.check_rows < 1:
        p.error("--repeats, --k and --check-rows must be >= 1")
    return args


def small_sizes(cases: str, repeats: int) -> str:
    """``--small``: fit + kneighbors() (X=None, K = 5: scikit-learn's default)
    on a few points, where the fixed cost per call counts; medians of
    ``repeats`` calls, wall and CPU milliseconds, ours against scikit-learn's
    (its algorithm='auto')."""
    import statistics

    from sklearn.neighbors import NearestNeighbors as SkNN

    from kerneltools.estimators import NearestNeighbors

    def median_ms(fn):
        fn()  # warm (our kernels compile at the first call)
        wall, cpu = [], []
        for _ in range(repeats):
            w0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall.append(time.perf_counter() - w0)
            cpu.append(time.process_time() - c0)
        return 1e3 * statistics.median(wall), 1e3 * statistics.median(cpu)

    load = " ".join(f"{v:.1f}" for v in os.getloadavg())
    lines = [f"load average {load} (shared machine); ms per fit + kneighbors(), "
             f"median of {repeats}; ratio = scikit-learn / kerneltools", "",
             "| N | D | kerneltools ms (CPU) | scikit-learn ms (CPU) | ratio (CPU) |",
             "|---|---|---|---|---|"]
    for case in cases.split(","):
        n, d = (int(float(v)) for v in case.split(":"))
        X = np.random.default_rng(0).standard_normal((n, d))
        ours = median_ms(lambda: NearestNeighbors().fit(X).kneighbors())  # noqa: B023
        ref = median_ms(lambda: SkNN().fit(X).kneighbors())  # noqa: B023
        lines.append(f"| {n} | {d} | {ours[0]:.2f} ({ours[1]:.2f}) | {ref[0]:.2f} "
                     f"({ref[1]:.2f}) | {ref[0] / ours[0]:.2f} "
                     f"({ref[1] / ours[1]:.2f}) |")
    return "\n".join(lines)


def main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if "--small" in argv:  # python asv_bench/knn_compare.py --small 100:3,1000:32
        at = argv.index("--small")
        print(small_sizes(argv[at + 1], repeats=31))
        return 0
    args = parse_args(argv)
    load_start, t0 = os.getloadavg(), time.perf_counter()
    last: dict = {}  # (system, d) -> (pairs, median seconds)
    records = [
        run_case(args, d, n, m, last, data)
        for d in args.dims
        for data in args.data
        for n, m in args.warmup_case + args.cases
    ]
    text = report(args, records, load_start, time.perf_counter() - t0)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    if args.json:
        with open(args.json, "w") as f:
            f.writelines(json.dumps(c) + "\n" for c in records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
