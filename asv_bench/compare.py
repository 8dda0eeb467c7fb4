#!/usr/bin/env python
"""kerneltools against the hand loop, pykeops (CPU) and dense NumPy, in one run.

Prints a Markdown report: one row per case (task, D, dtype, N = M) with the
median seconds per system over ``--repeats`` timed calls, the ratios
simd-loop (``simd_loop.py``: the plain OpenMP ``#pragma omp simd`` loop built
with ``-ffast-math``), pykeops and numpy over kerneltools (> 1: kerneltools is faster),
and kerneltools' max relative error against a float64 NumPy computation of
``--check-rows`` rows; then a detail table per system (first call, min,
CPU use, peak memory, errors, notes).

The problems are defined once, in ``benchmarks/reductions.py`` (the asv
suite uses the same functions): Gaussian ``K b`` (``matvec``), LogSumExp
(``lse``, eps = 0.05^2), ``argkmin`` (K = 10) and, on request, the gradient
of ``e . (K b)`` with respect to x (``grad``).

Method (as in /work/shared/research/anchor_numbers.md):

- the "base" system is kerneltools from another source tree (``--base``),
  timed in a child process with its own kernel cache;
- one warm-up call per system and case, not timed (the first call of a
  formula compiles it); its time is reported as "first call". Above
  ``--no-warmup-above`` estimated seconds the same-size warm-up is skipped
  (the formula was compiled and warmed at a smaller size) and the row says so;
- then ``--repeats`` timed calls (they stop once they add up to
  ``--case-budget`` seconds, after at least one); median and min;
- a case whose time, extrapolated (x N^2) from the previous size of the same
  system/task/D/dtype, exceeds ``--max-seconds`` is skipped; dense NumPy is
  skipped when its N x M array(s) would pass ``--max-mem-gb``;
- peak memory: VmHWM reset through /proc/self/clear_refs before the timed
  calls, minus the RSS then (working memory, inputs excluded);
- "CPU use" = process CPU seconds / wall seconds of the timed calls (about 2
  for uncontended 2-thread code); the load average at the start of the run
  and of each case is recorded: other jobs on the same cores make every
  number pessimistic.

Examples (from the repository root or from asv_bench/)::

    python asv_bench/compare.py                                # the full table
    python asv_bench/compare.py --sizes 1e4,3e4 --repeats 5 --out table.md
    python asv_bench/compare.py --sizes 2e3,1e4 --dtypes float32 --tasks matvec,grad
    python asv_bench/compare.py --systems kerneltools,numpy --max-seconds 20
    python asv_bench/compare.py --fresh-cache   # first calls include compilation
    # against main, built in the same run (a worktree, its own empty cache):
    git worktree add /tmp/kt-main main
    python asv_bench/compare.py --systems kerneltools,base,simd-loop --base /tmp/kt-main
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchmarks import reductions as R  # noqa: E402 (needs the path above)
from simd_loop import simd_loop_callable  # noqa: E402

SYSTEMS = ("kerneltools", "simd-loop", "pykeops", "numpy", "kerneltools-numpy", "base")
DEFAULT_SYSTEMS = ("kerneltools", "simd-loop", "pykeops", "numpy")
TASK_ALIASES = {"gauss": "matvec", "gaussian": "matvec", "logsumexp": "lse",
                "knn": "argkmin", "kmin": "argkmin", "gradient": "grad"}
TASK_LABELS = {
    "matvec": "Gaussian K b",
    "lse": "LogSumExp",
    "argkmin": f"ArgKMin K={R.K_NN}",
    "grad": "grad_x e.(K b)",
}
DEFAULT_DIMS = {"matvec": (3, 64), "lse": (3,), "argkmin": (3,), "grad": (3,)}
#: Errors above these are flagged WRONG (a bug, not rounding).
WRONG_REL_ERR = {"float32": 1e-3, "float64": 1e-9}
WRONG_RECALL = 0.99


# -- small helpers ----------------------------------------------------------------


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _numbers(text: str, kind, low: int, what: str) -> list[int]:
    try:
        out = sorted({int(kind(t)) for t in _csv(text)})
    except ValueError:
        out = []
    if not out or out[0] < low:
        raise argparse.ArgumentTypeError(
            f"{what} must be comma-separated numbers >= {low}; got {text!r}"
        )
    return out


def _choices(text: str, allowed, what: str) -> list[str]:
    out = []
    for t in _csv(text):
        key = TASK_ALIASES.get(t.lower(), t.lower()) if what == "task" else t.lower()
        if key not in allowed:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {t!r}; choose from {', '.join(allowed)}"
            )
        if key not in out:
            out.append(key)
    if not out:
        raise argparse.ArgumentTypeError(f"no {what} given")
    return out


def fmt_s(t) -> str:
    if t is None:
        return "–"
    if t < 1e-3:
        return f"{t * 1e6:.3g} µs"
    return f"{t * 1e3:.3g} ms" if t < 1 else f"{t:.3g} s"


def fmt_n(n: int) -> str:
    """10000 -> 1e4, 30000 -> 3e4, 2500 -> 2.5e3, 1234 -> 1234."""
    e = len(str(n)) - 1
    mant = n / 10**e
    if n >= 1000 and abs(mant - round(mant, 1)) < 1e-9:
        return f"{mant:.1f}".rstrip("0").rstrip(".") + f"e{e}"
    return str(n)


def _status_kb(field: str):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    """Return freed heap to the OS, then reset VmHWM (Linux); False if impossible."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _cpu_seconds() -> float:
    try:
        import resource
    except ImportError:  # Windows
        t = os.times()
        return t.user + t.system
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _short(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {msg[0][:160] if msg else ''}"


# -- the environment ----------------------------------------------------------------


def environment_lines(load_start) -> list[str]:
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(ln for ln in f if ln.startswith("model name")).split(":", 1)[1]
    except (OSError, StopIteration):
        pass
    vers = [f"python {platform.python_version()}", f"numpy {np.__version__}"]
    try:
        import kerneltools as kt

        vers.append(f"kerneltools {kt.__version__}")
    except Exception as exc:  # noqa: BLE001 (reported, the run goes on)
        vers.append(f"kerneltools not importable ({_short(exc)})")
    names = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
             "KERNELTOOLS_CACHE_DIR", "KEOPS_CACHE_FOLDER")
    env = [f"{k}={os.environ[k]}" for k in names if os.environ.get(k)]
    lines = [
        f"- Machine: {platform.node()}, {cpu.strip()}, {os.cpu_count()} logical "
        f"CPUs, {platform.platform()}",
        "- Load average at start (1, 5, 15 min): "
        + ", ".join(f"{v:.2f}" for v in load_start),
        "- Versions: " + ", ".join(vers),
        "- Environment: " + (", ".join(env) or "no thread or cache variable set"),
    ]
    try:
        from threadpoolctl import threadpool_info

        pools = [
            f"{p.get('internal_api')} {p.get('version') or ''} "
            f"({p.get('num_threads')} threads)"
            for p in threadpool_info()
        ]
        lines.append("- Thread pools (threadpoolctl): " + "; ".join(pools))
    except ImportError:
        pass
    lines.append(f"- Command: `{' '.join(shlex.quote(a) for a in sys.argv)}`")
    return lines


def check_pykeops(fresh_dir=None) -> tuple[bool, str]:
    """Is pykeops usable here? A Gaussian K b on 1000 points, backend CPU, vs NumPy."""
    try:
        R.pykeops_import()
        import pykeops
    except ImportError as exc:
        return False, str(exc)
    try:
        if fresh_dir:
            pykeops.set_build_folder(os.path.join(fresh_dir, "keops"))
        data = R.make_data("matvec", 1000, 1000, 3, np.float64, seed=1)
        fn = R.pykeops_callable(data)
        t0 = time.perf_counter()
        out = fn()
        t1 = time.perf_counter()
        rows = np.arange(1000)
        ref = R.reference_float64(data, rows)
        err = R.error_vs_reference("matvec", out, ref, rows)["rel_err"]
    except Exception as exc:  # noqa: BLE001 (pykeops fails in many ways)
        return False, f"pykeops is installed but fails: {_short(exc)}"
    version = pykeops.__version__
    if not err < 1e-10:
        return False, f"pykeops {version} gives wrong results (rel. error {err:.1e})"
    return True, (
        f"pykeops {version} works (Gaussian K b, 1000 points, float64, backend CPU: "
        f"rel. error {err:.1e}; first call {fmt_s(t1 - t0)}); "
        f"build folder {pykeops.get_build_folder()}"
    )


# -- measuring ------------------------------------------------------------------------


def make_callable(system: str, data: dict):
    if system == "kerneltools":
        return R.kerneltools_callable(data, "cpu")
    if system == "kerneltools-numpy":
        return R.kerneltools_callable(data, "numpy")
    if system == "pykeops":
        return R.pykeops_callable(data)
    if system == "numpy":
        return R.numpy_dense_callable(data)
    if system == "simd-loop":
        return simd_loop_callable(data, gamma=R.gamma, lse_eps=R.LSE_EPS, k_nn=R.K_NN)
    raise ValueError(system)


def measure(fn, repeats: int, warmup: bool, budget: float) -> tuple[object, dict]:
    """An optional untimed warm-up, then up to ``repeats`` timed calls."""
    rec: dict = {}
    out = None
    if warmup:
        t0 = time.perf_counter()
        out = fn()
        rec["first_call_s"] = time.perf_counter() - t0
    peak_ok = _reset_peak()
    rss0 = _status_kb("VmRSS")
    times, cpus = [], []
    for _ in range(repeats):
        del out
        c0, t0 = _cpu_seconds(), time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        cpus.append(_cpu_seconds() - c0)
        if sum(times) >= budget:
            break
    cpu = sum(cpus)
    hwm = _status_kb("VmHWM")
    rec.update(
        times=[round(t, 6) for t in times],
        median_s=statistics.median(times),
        min_s=min(times),
        cpu_median_s=statistics.median(cpus),
        cpu_util=cpu / sum(times) if sum(times) > 0 else None,
        peak_mb=(hwm - rss0) / 1024 if peak_ok and hwm and rss0 else None,
    )
    return out, rec


def plan_system(args, system, task, d, dtype, n, last, pk_ok) -> dict:
    """Whether ``system`` runs this case: {"status": run/skip/unavailable, ...}."""
    prev = last.get((system, task, d, dtype))
    est = prev[1] * (n / prev[0]) ** 2 if prev else None
    gb = R.numpy_dense_bytes(task, n, n, dtype) / 1e9
    if system == "pykeops" and not pk_ok:
        return {"status": "unavailable"}
    if system == "numpy" and gb > args.max_mem_gb:
        return {"status": "skip", "cell": f"skip: mem {gb:.3g} GB",
                "note": f"estimated memory {gb:.3g} GB > --max-mem-gb"}
    if est is not None and est > args.max_seconds:
        return {
            "status": "skip",
            "cell": f"skip: est. {est:.3g} s",
            "note": f"estimated {est:.3g} s per call (x N^2 from N={fmt_n(prev[0])})"
            f" > --max-seconds {args.max_seconds:g}",
        }
    return {"status": "run", "est_s": est}


def _measure_here(args, system, data, warm, rows, ref) -> dict:
    out, m = measure(make_callable(system, data), args.repeats, warm, args.case_budget)
    if ref is not None:
        m.update(R.error_vs_reference(data["task"], out, ref, rows))
    return m


def _measure_base(args, data, warm) -> dict:
    """The "base" system: kerneltools of the tree ``--base`` (e.g. a worktree
    of main), timed by this script in a child process that imports it (its
    own kernel cache, ``--base-cache``); the child rebuilds the same data
    from the seed and checks the same rows."""
    job = {"task": data["task"], "d": data["d"], "dtype": str(data["x"].dtype),
           "n": len(data["x"]), "seed": args.seed, "repeats": args.repeats,
           "warm": warm, "budget": args.case_budget, "check_rows": args.check_rows}
    env = dict(os.environ, PYTHONPATH=os.path.abspath(args.base),
               KERNELTOOLS_CACHE_DIR=args.base_cache)
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker",
                           json.dumps(job)], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the base worker failed: {done.stderr[-500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _worker(job_text: str) -> int:
    """Child side of ``_measure_base``: one measurement, as a JSON line."""
    job = json.loads(job_text)
    data = R.make_data(job["task"], job["n"], job["n"], job["d"], job["dtype"],
                       seed=job["seed"])
    rows = ref = None
    if job["check_rows"] > 0:
        rng = np.random.default_rng(job["seed"] + 1)
        rows = np.sort(rng.choice(job["n"], min(job["check_rows"], job["n"]),
                                  replace=False))
        ref = R.reference_float64(data, rows)
    args = argparse.Namespace(repeats=job["repeats"], case_budget=job["budget"])
    m = _measure_here(args, "kerneltools", data, job["warm"], rows, ref)
    import kerneltools
    m["note"] = f"kerneltools from {os.path.dirname(os.path.dirname(kerneltools.__file__))}"
    print(json.dumps(m, default=float))
    return 0


def run_system(args, system, data, est, rows, ref) -> dict:
    """Time one system on one case; errors become a record, never an exception."""
    warm = not (est is not None and est > args.no_warmup_above)
    rec: dict = {"status": "ok", "est_s": est}
    notes = [] if warm else [f"no same-size warm-up (est. {est:.3g} s)"]
    try:
        if system == "base":
            m = _measure_base(args, data, warm)
        else:
            m = _measure_here(args, system, data, warm, rows, ref)
        rec.update(m)
        if len(m["times"]) < args.repeats:
            notes.append(f"{len(m['times'])} timed call(s): --case-budget")
    except MemoryError as exc:
        rec.update(status="error", cell="error: out of memory", note=_short(exc))
    except Exception as exc:  # noqa: BLE001 (reported in the table)
        name = type(exc).__name__
        rec.update(status="error", cell=f"error: {name}", note=_short(exc))
    if notes:
        rec["note"] = "; ".join(filter(None, [rec.get("note")] + notes))
    return rec


def run_case(args, task, d, dtype, n, last, pk_ok) -> dict:
    load = round(os.getloadavg()[0], 2)
    case = {"task": task, "d": d, "dtype": dtype, "n": n, "m": n,
            "loadavg_1m_start": load, "systems": {}}
    plans = {
        s: plan_system(args, s, task, d, dtype, n, last, pk_ok) for s in args.systems
    }
    todo = [s for s, p in plans.items() if p["status"] == "run"]
    print(f"[compare] {task} D={d} {dtype} N=M={fmt_n(n)}: "
          f"{', '.join(todo) or 'nothing to run'} (load {load})", file=sys.stderr)
    data = rows = ref = None
    if todo:
        data = R.make_data(task, n, n, d, dtype, seed=args.seed)
        if args.check_rows > 0:
            rng = np.random.default_rng(args.seed + 1)
            rows = np.sort(rng.choice(n, min(args.check_rows, n), replace=False))
            ref = R.reference_float64(data, rows)
    for system, p in plans.items():
        if p["status"] != "run":
            case["systems"][system] = p
            continue
        rec = run_system(args, system, data, p["est_s"], rows, ref)
        if rec["status"] == "ok":
            last[(system, task, d, dtype)] = (n, rec["median_s"])
        case["systems"][system] = rec
        print(f"[compare]   {system:<17} {fmt_s(rec.get('median_s')):>9}  "
              f"first {fmt_s(rec.get('first_call_s'))}  err {rec.get('rel_err', '-')}  "
              f"{rec.get('note', '')}", file=sys.stderr)
    return case


def run(args) -> tuple[list[dict], dict]:
    pk_ok, pk_msg = False, "not selected"
    if "pykeops" in args.systems:
        pk_ok, pk_msg = check_pykeops(args.fresh_dir)
        print(f"[compare] {pk_msg}", file=sys.stderr)
    last: dict = {}  # (system, task, d, dtype) -> (n, median seconds)
    records = [
        run_case(args, task, d, dtype, n, last, pk_ok)
        for task in args.tasks
        for d in args.dims or DEFAULT_DIMS[task]
        for dtype in args.dtypes
        for n in args.sizes
    ]
    return records, {"pykeops_ok": pk_ok, "pykeops_msg": pk_msg}


# -- the report -------------------------------------------------------------------


def is_wrong(rec: dict, task: str, dtype: str) -> bool:
    if rec.get("status") != "ok" or "rel_err" not in rec:
        return False
    if not rec["rel_err"] <= WRONG_REL_ERR[dtype]:  # NaN counts as wrong
        return True
    return task == "argkmin" and rec.get("recall", 1.0) < WRONG_RECALL


def fmt_err(rec: dict, task: str, dtype: str) -> str:
    if rec.get("status") != "ok" or "rel_err" not in rec:
        return "–"
    s = f"{rec['rel_err']:.1e}"
    if task == "argkmin" and "recall" in rec:
        s += f" (recall {rec['recall']:.4f})"
    return s + (" **WRONG**" if is_wrong(rec, task, dtype) else "")


def cell(rec: dict) -> str:
    if rec.get("status") == "ok":
        return fmt_s(rec["median_s"]) + ("" if "first_call_s" in rec else "²")
    if rec.get("status") == "unavailable":
        return "unavailable"
    return rec.get("cell", rec.get("status", "–"))


def ratio(case: dict, system: str, key: str = "median_s") -> str:
    a = case["systems"].get(system, {})
    b = case["systems"].get("kerneltools", {})
    if a.get("status") == "ok" and b.get("status") == "ok" and b.get(key, 0) > 0 \
            and key in a:
        return f"{a[key] / b[key]:.2f}x"
    return "–"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return out + ["| " + " | ".join(r) + " |" for r in rows]


def _case_cols(c: dict) -> list[str]:
    return [TASK_LABELS[c["task"]], str(c["d"]), c["dtype"], fmt_n(c["n"])]


def header_lines(args, records, meta, load_start, load_end, wall) -> list[str]:
    now = datetime.datetime.now().isoformat(timespec="seconds")
    L = ["# kerneltools vs pykeops (CPU) vs dense NumPy", ""]
    L += [f"{now}; {len(records)} cases in {wall:.0f} s.", ""]
    L += environment_lines(load_start)
    L.append("- Load average at end (1, 5, 15 min): "
             + ", ".join(f"{v:.2f}" for v in load_end))
    if "pykeops" in args.systems:
        ok = "OK" if meta["pykeops_ok"] else "NOT USABLE"
        L.append(f"- pykeops: {ok}: {meta['pykeops_msg']}")
    L.append(
        f"- Timed calls per case: {args.repeats} (median shown) after one untimed "
        f"warm-up; skipped when the estimate is > {args.max_seconds:g} s per call or "
        f"dense memory > {args.max_mem_gb:g} GB; errors on {args.check_rows} rows "
        "against float64 NumPy."
    )
    wrong = [f"{s} {c['task']} D={c['d']} {c['dtype']} N={fmt_n(c['n'])}"
             for c in records for s in args.systems
             if is_wrong(c["systems"][s], c["task"], c["dtype"])]
    if wrong:
        lim32, lim64 = WRONG_REL_ERR["float32"], WRONG_REL_ERR["float64"]
        L.append(f"- **{len(wrong)} result(s) are WRONG** (error > {lim32:g} in "
                 f"float32, > {lim64:g} in float64, or recall < {WRONG_RECALL:g}): "
                 + "; ".join(wrong))
    return L


def report(args, records, meta, load_start, load_end, wall) -> str:
    systems = args.systems
    others = [s for s in systems if s != "kerneltools"]
    with_kt = "kerneltools" in systems
    L = header_lines(args, records, meta, load_start, load_end, wall)
    L += ["", "## Median seconds per call", ""]
    L.append(
        "Ratios are other / kerneltools (> 1: kerneltools is faster). kt rel. err = "
        "max |a - ref| / max |ref| over the checked rows; for ArgKMin, the largest "
        "relative gap between the exact distances of the found and the true k-th "
        "neighbours (0 when only ties differ). ² = no same-size warm-up. **WRONG** = "
        "an error far above rounding: the time of a wrong result means nothing."
    )
    L.append("")
    head = ["task", "D", "dtype", "N=M"] + systems
    if with_kt:
        head += [f"{s} / kt" for s in others] + ["kt rel. err"]
    rows = []
    for c in records:
        row = _case_cols(c) + [cell(c["systems"][s]) for s in systems]
        if with_kt:
            row += [ratio(c, s) for s in others]
            row.append(fmt_err(c["systems"]["kerneltools"], c["task"], c["dtype"]))
        rows.append(row)
    L += _table(head, rows)
    if with_kt:
        L += ["", "## Median CPU seconds per call", ""]
        L.append("Process CPU seconds (every thread) per timed call: less sensitive "
                 "than wall seconds to other jobs on a shared machine, but it counts "
                 "OpenMP threads' spin-waiting. Ratios other / kerneltools.")
        L.append("")
        rows = [_case_cols(c) + [fmt_s(c["systems"][s].get("cpu_median_s"))
                                 for s in systems]
                + [ratio(c, s, "cpu_median_s") for s in others] for c in records]
        L += _table(["task", "D", "dtype", "N=M"] + systems
                    + [f"{s} / kt" for s in others], rows)
    L += ["", "## Details", ""]
    L.append(
        "first call = the untimed warm-up (includes compilation the first time a "
        "formula and dtype are seen, unless cached on disk); CPU use = CPU s / wall s "
        "of the timed calls (noisy below ~50 ms; about 2 = both cores busy); peak Δ = "
        "peak RSS during the timed calls minus the RSS before them (memory that the "
        "allocator kept from earlier cases can hide small peaks)."
    )
    L.append("")
    head = ["task", "D", "dtype", "N=M", "system", "first call", "median", "min",
            "calls", "CPU use", "peak Δ", "rel. err", "load 1m", "note"]
    L += _table(head, [_detail_row(c, s) for c in records for s in systems])
    return "\n".join(L + [""])


def _detail_row(c: dict, system: str) -> list[str]:
    r = c["systems"][system]
    ok = r.get("status") == "ok"
    cpu, peak = r.get("cpu_util"), r.get("peak_mb")
    return _case_cols(c) + [
        system,
        fmt_s(r.get("first_call_s")),
        fmt_s(r.get("median_s")) if ok else cell(r),
        fmt_s(r.get("min_s")),
        str(len(r["times"])) if ok else "–",
        f"{cpu:.2f}" if ok and cpu is not None else "–",
        f"{peak:.0f} MB" if ok and peak is not None else "–",
        fmt_err(r, c["task"], c["dtype"]),
        f"{c['loadavg_1m_start']:.2f}",
        (r.get("note") or "").replace("|", "/"),
    ]


# -- command line -----------------------------------------------------------------


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Tasks: matvec (Gaussian K b), lse (LogSumExp), argkmin (K=10), grad "
        "(gradient of e.(K b) w.r.t. x). Systems: " + ", ".join(SYSTEMS) + ".",
    )
    add = p.add_argument
    add("--sizes", type=lambda t: _numbers(t, float, R.K_NN, "sizes"),
        default=[10_000, 30_000, 100_000], help="N = M values (default 1e4,3e4,1e5)")
    add("--dims", type=lambda t: _numbers(t, int, 1, "dims"), default=None,
        help="D for every task (default: 3,64 for matvec, 3 for the others)")
    add("--dtypes", type=lambda t: _choices(t, ("float32", "float64"), "dtype"),
        default=["float32", "float64"], help="default float32,float64")
    add("--tasks", type=lambda t: _choices(t, tuple(DEFAULT_DIMS), "task"),
        default=["matvec", "lse", "argkmin"],
        help="from matvec,lse,argkmin,grad (default matvec,lse,argkmin)")
    add("--systems", type=lambda t: _choices(t, SYSTEMS, "system"),
        default=list(DEFAULT_SYSTEMS),
        help="from " + ",".join(SYSTEMS) + " (default kerneltools,pykeops,numpy)")
    add("--repeats", type=int, default=3, help="timed calls per case (default 3)")
    add("--max-seconds", type=float, default=60.0,
        help="skip a case whose time per call, extrapolated (x N^2) from the "
        "previous size, exceeds this (default 60)")
    add("--max-mem-gb", type=float, default=8.0,
        help="skip dense NumPy above this estimated memory (default 8)")
    add("--no-warmup-above", type=float, default=10.0,
        help="no same-size warm-up above this estimated time per call (default 10)")
    add("--case-budget", type=float, default=90.0,
        help="stop the timed calls of one system in one case once they add up to "
        "this many seconds (at least one call; default 90)")
    add("--check-rows", type=int, default=300,
        help="rows checked against float64 NumPy (default 300; 0: no check)")
    add("--seed", type=int, default=0)
    add("--fresh-cache", action="store_true",
        help="empty temporary kernel caches for kerneltools and pykeops, so that "
        "first calls include compilation")
    add("--base", help="a source tree of kerneltools (e.g. a git worktree of main) for "
        "the 'base' system, run in a child process beside this one")
    add("--base-cache", help="the base system's kernel cache folder (default: a new "
        "temporary one, removed at the end)")
    add("--out", help="also write the Markdown report to this file")
    add("--json", help="also write the raw records, one JSON object per line")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error("--repeats must be >= 1")
    if ("base" in args.systems) != bool(args.base):
        p.error("the 'base' system and --base go together")
    return args


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return _worker(argv[1])
    args = parse_args(argv)
    load_start = os.getloadavg()
    t_start = time.perf_counter()
    args.fresh_dir = None
    if args.fresh_cache:
        args.fresh_dir = tempfile.mkdtemp(prefix="kt-compare-")
        os.environ["KERNELTOOLS_CACHE_DIR"] = os.path.join(args.fresh_dir, "kt")
    base_tmp = None
    if args.base and not args.base_cache:
        base_tmp = args.base_cache = tempfile.mkdtemp(prefix="kt-compare-base-")
    try:
        records, meta = run(args)
    finally:
        for tmp in (args.fresh_dir, base_tmp):
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)
    wall = time.perf_counter() - t_start
    text = report(args, records, meta, load_start, os.getloadavg(), wall)
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
