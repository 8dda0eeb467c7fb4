#!/usr/bin/env python
"""Sinkhorn divergence: kerneltools vs GeomLoss vs POT, side by side in one run.

Prints a Markdown report: for each size N = M, one row per system with the
median seconds per call, the value it reports, its relative difference to
GeomLoss' value (``online``, else ``tensorized``) and the time ratio
system / kerneltools (> 1: kerneltools is faster).

The problem is defined once, in ``benchmarks/optimal_transport.py``: the
debiased Sinkhorn divergence between uniform clouds in the unit cube, the
second shifted by 0.3 along the first axis, cost ``|x - y|^2 / 2``,
``blur = 0.05``, ``scaling = 0.5`` (GeomLoss' defaults), D = 3, float32 by
default.

What each system computes:

- kerneltools and GeomLoss: the same algorithm (symmetric log-domain
  Sinkhorn, epsilon-scaling from the data's diameter down to ``blur``, one
  extrapolation step, debiasing); their values should agree to rounding.
- POT has no epsilon-scaling and no lazy debiased divergence that fits in the
  time here: ``ot.bregman.empirical_sinkhorn2(isLazy=True)`` solves one
  problem, OT(a, b), with plain log-domain Sinkhorn (``reg = 2 blur^2``, as
  its ``sqeuclidean`` metric has no 1/2) until the L1 marginal error is below
  ``--pot-stop`` (checked every 10 iterations), and returns the primal cost
  ``<pi, |x - y|^2>`` (halved here), in float64 (in float32 its marginal
  error stalls above 1e-6). That is neither debiased nor entropic: its
  value is expected to differ from S_eps. POT runs to convergence up to
  ``--pot-converged-max`` points; above, only ``--pot-iters`` iterations are
  timed, and the converged time is estimated from the time per iteration and
  the iteration count of the smallest converged run.

Method as in ``compare.py`` (whose helpers this script uses): one untimed
warm-up per system and size unless the estimated time passes
``--no-warmup-above`` (the formulas were compiled at a smaller size), then up to
``--repeats`` timed calls within ``--case-budget`` seconds; cases estimated
(x N^2 from the previous size) above ``--max-seconds``, or above
``--max-mem-gb`` for GeomLoss' tensorized backend, are skipped.

Examples (from the repository root or from asv_bench/)::

    python asv_bench/ot_compare.py --out ot.md            # 1e3, 1e4, 5e4
    python asv_bench/ot_compare.py --sizes 1e3,1e4 --systems kerneltools,geomloss-online
    python asv_bench/ot_compare.py --dtype float64 --repeats 5
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare as C
from benchmarks import optimal_transport as OT

SYSTEMS = ("kerneltools", "geomloss-online", "geomloss-tensorized", "pot")
#: Peak bytes per N x M pair of GeomLoss' tensorized backend (measured: 2.3 GB
#: at N = M = 1e4 in float32).
TENSORIZED_BYTES_PER_PAIR = 24


def available(system: str) -> tuple[bool, str]:
    """Can ``system`` run here? (ok, reason)."""
    try:
        if system.startswith("geomloss"):
            import geomloss
            import torch

            what = f"geomloss {geomloss.__version__}, torch {torch.__version__}"
            if system == "geomloss-online":
                import pykeops

                what += f", pykeops {pykeops.__version__} (CPU)"
            return True, what
        if system == "pot":
            import ot

            return True, f"POT {ot.__version__}"
        import kerneltools

        return True, f"kerneltools {kerneltools.__version__}"
    except Exception as exc:  # noqa: BLE001 (reported in the table)
        return False, C._short(exc)


def make_callable(args, system: str, data: dict, pot_iters: int):
    if system == "kerneltools":
        return OT.kerneltools_callable(data, "cpu")
    if system.startswith("geomloss"):
        return OT.geomloss_callable(data, system.split("-")[1])
    return OT.pot_callable(data, pot_iters, stop_thr=args.pot_stop)


def plan(args, system: str, n: int, last: dict) -> dict:
    """{"status": "run", "est_s", "pot_iters"} or a skip with its reason."""
    prev = last.get(system)
    est = prev["s"] * (n / prev["n"]) ** 2 if prev else None
    if system == "geomloss-tensorized":
        gb = TENSORIZED_BYTES_PER_PAIR * n * n / 1e9
        if gb > args.max_mem_gb:
            return {
                "status": "skip",
                "cell": f"skip: mem {gb:.3g} GB",
                "note": f"estimated {gb:.3g} GB > --max-mem-gb",
            }
    if system == "pot":
        return plan_pot(args, n, prev)
    if est is not None and est > args.max_seconds:
        return {
            "status": "skip",
            "cell": f"skip: est. {est:.3g} s",
            "note": f"estimated (x N^2 from N={C.fmt_n(prev['n'])}) > --max-seconds",
        }
    return {"status": "run", "est_s": est, "pot_iters": 0}


def plan_pot(args, n: int, prev) -> dict:
    """Converged up to --pot-converged-max points, else --pot-iters iterations."""
    if n <= args.pot_converged_max:
        est = None if prev is None else prev["s"] * (n / prev["n"]) ** 2
        return {"status": "run", "est_s": est, "pot_iters": args.pot_max_iter}
    per_iter = prev["s"] / prev["iters"] * (n / prev["n"]) ** 2 if prev else None
    if per_iter is not None and per_iter * args.pot_iters > args.max_seconds:
        return {
            "status": "skip",
            "cell": f"skip: est. {per_iter:.3g} s/iteration",
            "note": f"{args.pot_iters} iterations > --max-seconds",
        }
    its = prev.get("converged_iters") if prev else None
    return {
        "status": "run",
        "pot_iters": args.pot_iters,
        "est_s": per_iter * args.pot_iters if per_iter else None,
        "converged_iters": its,
    }


def run_one(args, system: str, data: dict, p: dict) -> dict:
    # POT compiles nothing: no warm-up (a converged call takes minutes).
    big = p["est_s"] is not None and p["est_s"] > args.no_warmup_above
    warm = system != "pot" and not big
    rec = {"status": "ok"}
    try:
        fn = make_callable(args, system, data, p["pot_iters"])
        out, m = C.measure(fn, args.repeats, warm, args.case_budget)
    except Exception as exc:  # noqa: BLE001 (reported in the table)
        return {
            "status": "error",
            "cell": f"error: {type(exc).__name__}",
            "note": C._short(exc),
        }
    rec.update(m)
    notes = [] if warm or system == "pot" else ["no same-size warm-up"]
    if system == "pot":
        rec["value"], rec["iters"] = out
        if p["pot_iters"] == args.pot_iters and rec["iters"] >= args.pot_iters:
            per_iter = rec["median_s"] / rec["iters"]
            note = f"{rec['iters']} iterations only, not converged: {C.fmt_s(per_iter)}"
            note += " per iteration"
            if p.get("converged_iters"):
                est = per_iter * p["converged_iters"]
                rec["est_converged_s"] = est
                note += (
                    f"; converged est. {C.fmt_s(est)} "
                    f"({p['converged_iters']} iterations, as at the smallest N)"
                )
            notes.append(note)
        else:
            notes.append(f"converged in {rec['iters']} iterations")
    else:
        rec["value"] = float(out)
    rec["note"] = "; ".join(notes)
    return rec


def run(args) -> tuple[list[dict], dict]:
    avail = {s: available(s) for s in args.systems}
    for s, (ok, why) in avail.items():
        print(
            f"[ot_compare] {s}: {'OK' if ok else 'UNAVAILABLE'} ({why})",
            file=sys.stderr,
        )
    last: dict = {}
    records = []
    for n in args.sizes:
        data = OT.make_data(n, n, args.dim, args.dtype, seed=args.seed)
        case = {
            "n": n,
            "d": args.dim,
            "dtype": args.dtype,
            "loadavg_1m_start": round(os.getloadavg()[0], 2),
            "systems": {},
        }
        for s in args.systems:
            p = (
                plan(args, s, n, last)
                if avail[s][0]
                else {"status": "skip", "cell": "unavailable", "note": avail[s][1]}
            )
            rec = run_one(args, s, data, p) if p["status"] == "run" else p
            if rec["status"] == "ok":
                converged = last.get(s, {}).get("converged_iters")
                if s == "pot" and "est_converged_s" not in rec and converged is None:
                    converged = rec["iters"]  # the smallest converged run
                last[s] = {
                    "n": n,
                    "s": rec["median_s"],
                    "iters": rec.get("iters", 1),
                    "converged_iters": converged,
                }
            case["systems"][s] = rec
            print(
                f"[ot_compare] N={C.fmt_n(n)} {s:<20} {C.fmt_s(rec.get('median_s'))}"
                f"  value {rec.get('value', '-')}  {rec.get('note', '')}",
                file=sys.stderr,
            )
        records.append(case)
    return records, avail


# -- the report -------------------------------------------------------------------


def reference_value(case: dict):
    for s in ("geomloss-online", "geomloss-tensorized"):
        r = case["systems"].get(s, {})
        if r.get("status") == "ok":
            return r["value"], s
    return None, None


def rows_of(case: dict) -> list[list[str]]:
    ref, ref_name = reference_value(case)
    kt = case["systems"].get("kerneltools", {})
    rows = []
    for s, r in case["systems"].items():
        ok = r.get("status") == "ok"
        value = f"{r['value']:.7g}" if ok else "–"
        diff = (
            f"{abs(r['value'] - ref) / abs(ref):.1e}"
            if ok and ref and s != ref_name
            else "–"
        )
        ratio = (
            f"{r['median_s'] / kt['median_s']:.2f}x"
            if ok and kt.get("status") == "ok" and s != "kerneltools"
            else "–"
        )
        peak = r.get("peak_mb")
        rows.append(
            [
                C.fmt_n(case["n"]),
                s,
                C.fmt_s(r["median_s"]) if ok else r["cell"],
                ratio,
                value,
                diff,
                C.fmt_s(r.get("first_call_s")),
                f"{peak:.0f} MB" if ok and peak is not None else "–",
                f"{case['loadavg_1m_start']:.2f}",
                (r.get("note") or "").replace("|", "/"),
            ]
        )
    return rows


def report(args, records, avail, load_start, wall) -> str:
    now = datetime.datetime.now().isoformat(timespec="seconds")
    L = ["# Sinkhorn divergence: kerneltools vs GeomLoss vs POT", ""]
    L += [f"{now}; {len(records)} sizes in {wall:.0f} s.", ""]
    L += C.environment_lines(load_start)
    L.append(
        "- Load average at end (1, 5, 15 min): "
        + ", ".join(f"{v:.2f}" for v in os.getloadavg())
    )
    L += [
        f"- {s}: {'OK' if ok else 'UNAVAILABLE'} ({why})"
        for s, (ok, why) in avail.items()
    ]
    L.append(
        f"- Problem: D = {args.dim}, {args.dtype}, x ~ U[0,1]^D, y ~ U[0,1]^D + "
        f"({OT.SHIFT}, 0, ...), blur = {OT.BLUR}, scaling = {OT.SCALING}, uniform "
        f"weights; up to {args.repeats} timed calls (median) after one untimed warm-up."
    )
    legend = (
        "Time ratio = system / kerneltools (> 1: kerneltools is faster). Rel. "
        "diff = |value - GeomLoss'| / |GeomLoss'| (online, else tensorized). POT "
        "computes another quantity (the primal cost of one non-debiased problem, "
        "without epsilon-scaling; see the script's docstring). POT has no warm-up "
        "call (nothing to compile)."
    )
    L += ["", legend, ""]
    head = [
        "N=M",
        "system",
        "median",
        "time / kt",
        "value",
        "rel. diff",
        "first call",
        "peak Δ",
        "load 1m",
        "note",
    ]
    L += C._table(head, [row for c in records for row in rows_of(c)])
    return "\n".join(L + [""])


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Systems: " + ", ".join(SYSTEMS) + ".",
    )
    add = p.add_argument
    add(
        "--sizes",
        type=lambda t: C._numbers(t, float, 10, "sizes"),
        default=[1_000, 10_000, 50_000],
        help="N = M values (default 1e3,1e4,5e4)",
    )
    add("--dim", type=int, default=3, help="D (default 3)")
    add("--dtype", choices=("float32", "float64"), default="float32")
    add(
        "--systems",
        type=lambda t: C._choices(t, SYSTEMS, "system"),
        default=list(SYSTEMS),
        help="from " + ",".join(SYSTEMS) + " (default all)",
    )
    add("--repeats", type=int, default=3, help="timed calls per case (default 3)")
    add(
        "--max-seconds",
        type=float,
        default=900.0,
        help="skip a case estimated (x N^2) above this many seconds (default 900)",
    )
    add(
        "--max-mem-gb",
        type=float,
        default=8.0,
        help="skip GeomLoss tensorized above this estimated memory (default 8)",
    )
    add(
        "--no-warmup-above",
        type=float,
        default=10.0,
        help="no same-size warm-up above this estimated time (default 10)",
    )
    add(
        "--case-budget",
        type=float,
        default=60.0,
        help="stop the timed calls of one case after this many seconds (default 60)",
    )
    add(
        "--pot-stop",
        type=float,
        default=1e-6,
        help="POT's stopThr, the L1 marginal error (default 1e-6)",
    )
    add(
        "--pot-max-iter",
        type=int,
        default=3000,
        help="POT's numIterMax for converged runs (default 3000)",
    )
    add(
        "--pot-iters",
        type=int,
        default=5,
        help="POT iterations timed above --pot-converged-max (default 5)",
    )
    add(
        "--pot-converged-max",
        type=int,
        default=1000,
        help="POT runs to convergence up to this N (default 1000)",
    )
    add("--seed", type=int, default=0)
    add("--out", help="also write the Markdown report to this file")
    add("--json", help="also write the raw records, one JSON object per line")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error("--repeats must be >= 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    load_start, t0 = os.getloadavg(), time.perf_counter()
    records, avail = run(args)
    text = report(args, records, avail, load_start, time.perf_counter() - t0)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    if args.json:
        with open(args.json, "w") as f:
            f.writelines(json.dumps(c, default=float) + "\n" for c in records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
