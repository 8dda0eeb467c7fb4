#!/usr/bin/env python
"""The C backend without a system compiler against the gcc + OpenMP build, in one run.

Two "roads" of the same kerneltools tree, each in a worker process of its
own with its own empty kernel cache:

- ``gcc``: the system compiler with OpenMP (``KERNELTOOLS_COMPILER=system``);
- ``zig``: ``zig cc`` of the ``ziglang`` package, threads from Python
  (``KERNELTOOLS_COMPILER=zig``: the compiler that a machine without
  ``cc``, ``gcc`` or ``clang`` gets, as ``.ci/nocc`` checks).

The problems are ``compare.py``'s (``benchmarks/reductions.py``): Gaussian
``K b`` (D = 3 and 64), LogSumExp, ArgKMin (K = 10) and the gradient of
``e . (K b)``, float32 and float64, N = M = ``--n``. Reported per case:

- the median wall time of ``--rounds`` warm calls per road, the calls of
  the two roads alternating (gcc, zig, gcc, zig, ...: a shared machine's
  load falls on both alike), their ratio zig / gcc, and CPU seconds per
  call (process CPU time over the timed calls: about 2x the wall time for
  2 busy threads);
- the first call of the formula (its compile and load; zig's own library
  cache warm, see below), and its ratio;
- the first call of the formula in a *new* process whose kernel cache holds
  it (import and data not counted): the load of a cached kernel.

The load average is printed at the start and the end: other jobs on the
same cores make every number pessimistic, and the ratios are the figures to
read. zig builds its C library stubs once into its own cache (about 5 s,
``ZIG_GLOBAL_CACHE_DIR``); ``--cold-zig`` gives it an empty one so that the
first case's first call includes that.

Example::

    python asv_bench/nocc_compare.py --n 3e4 --rounds 7 --out nocc.md
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ROADS = ("gcc", "zig")
CASES = [
    (task, d, dtype)
    for task, dims in (
        ("matvec", (3, 64)),
        ("lse", (3,)),
        ("argkmin", (3,)),
        ("grad", (3,)),
    )
    for d in dims
    for dtype in ("float32", "float64")
]


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


# -- the worker: one road, commands on stdin, one JSON line per answer ---------------


def worker(n: int) -> None:
    sys.path.insert(0, HERE)
    from benchmarks import reductions as R

    import kerneltools as kt  # noqa: F401 (imported before any timing)
    from kerneltools.backend.cpu._compiler import find_compiler

    calls = {}
    for line in sys.stdin:
        cmd, *rest = line.split()
        if cmd == "info":
            comp = find_compiler()
            answer = {
                "compiler": comp.description,
                "threads": comp.threads,
                "load": os.getloadavg(),
            }
        else:  # "first i" or "time i": one call of case i
            task, d, dtype = CASES[int(rest[0])]
            if int(rest[0]) not in calls:
                data = R.make_data(task, n, n, d, dtype)
                calls[int(rest[0])] = R.kerneltools_callable(data, "cpu")
            fn = calls[int(rest[0])]
            c0, t0 = _cpu(), time.perf_counter()
            fn()
            answer = {"wall": time.perf_counter() - t0, "cpu": _cpu() - c0}
        print(json.dumps(answer), flush=True)


_LOAD_CODE = """
import sys, time, json
sys.path.insert(0, {here!r})
from benchmarks import reductions as R
import kerneltools
task, d, dtype = {case!r}
data = R.make_data(task, 2000, 2000, d, dtype)
fn = R.kerneltools_callable(data, "cpu")
t0 = time.perf_counter(); fn(); print(json.dumps(time.perf_counter() - t0))
"""


# -- the driver -----------------------------------------------------------------


def _env(road: str, cache: str, args, tmp: str) -> dict:
    env = dict(
        os.environ,
        KERNELTOOLS_CACHE_DIR=cache,
        PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
        KERNELTOOLS_COMPILER="system" if road == "gcc" else "zig",
    )
    env.pop("KERNELTOOLS_BACKEND", None)
    if road == "zig":
        env.pop("CC", None)
        if args.cold_zig:
            env["ZIG_GLOBAL_CACHE_DIR"] = os.path.join(tmp, "zig-global")
    return env


class Worker:
    def __init__(self, road: str, env: dict, n: int):
        self.road = road
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", "--n", str(n)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def ask(self, line: str) -> dict:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        out = self.proc.stdout.readline()
        if not out:
            raise RuntimeError(f"the {self.road} worker died (asked: {line})")
        return json.loads(out)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _fmt(t: float) -> str:
    return f"{t * 1e3:.3g} ms" if t < 1 else f"{t:.3g} s"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--n", type=float, default=3e4, help="N = M (default 3e4)")
    p.add_argument(
        "--rounds", type=int, default=5, help="timed calls per road and case"
    )
    p.add_argument(
        "--loads",
        type=int,
        default=5,
        help="new processes per road timing a cached kernel's first call",
    )
    p.add_argument(
        "--cold-zig",
        action="store_true",
        help="the zig road starts with an empty zig library cache",
    )
    p.add_argument("--cases", default="", help="indices of CASES to run (default all)")
    p.add_argument("--out", help="also write the report to this file")
    args = p.parse_args()
    n = int(args.n)
    if args.worker:
        return worker(n)
    picked = [int(i) for i in args.cases.split(",") if i] or list(range(len(CASES)))
    tmp = tempfile.mkdtemp(prefix="kt-nocc-")
    envs = {r: _env(r, os.path.join(tmp, f"cache-{r}"), args, tmp) for r in ROADS}
    load0 = os.getloadavg()
    workers = {r: Worker(r, envs[r], n) for r in ROADS}
    try:
        info = {r: workers[r].ask("info") for r in ROADS}
        first, times, cpus = {}, {}, {}
        for k, i in enumerate(picked):
            order = ROADS if k % 2 == 0 else ROADS[::-1]
            for r in order:  # the first call: compile and load
                first[r, i] = workers[r].ask(f"time {i}")["wall"]
            for _ in range(args.rounds):
                for r in order:
                    a = workers[r].ask(f"time {i}")
                    times.setdefault((r, i), []).append(a["wall"])
                    cpus.setdefault((r, i), []).append(a["cpu"])
    finally:
        for w in workers.values():
            w.close()
    loads = {}
    for _ in range(args.loads):  # a cached kernel's first call in a new process
        for r in ROADS:
            code = _LOAD_CODE.format(here=HERE, case=list(CASES[picked[0]]))
            out = subprocess.run(
                [sys.executable, "-c", code],
                env=envs[r],
                text=True,
                capture_output=True,
                check=True,
            )
            loads.setdefault(r, []).append(
                json.loads(out.stdout.strip().splitlines()[-1])
            )
    load1 = os.getloadavg()
    lines = [
        f"# zig cc (no system compiler) against gcc + OpenMP, N = M = {n:.0e}",
        "",
        f"- gcc road: {info['gcc']['compiler']}; threads: {info['gcc']['threads']}",
        f"- zig road: {info['zig']['compiler']}; threads: {info['zig']['threads']}",
        f"- {os.cpu_count()} CPUs; load average at start "
        f"{' '.join(f'{v:.2f}' for v in load0)}, at the end "
        f"{' '.join(f'{v:.2f}' for v in load1)} (1, 5, 15 min)",
        f"- {args.rounds} warm calls per road and case, alternating roads",
        "",
        "| case | gcc median | zig median | zig / gcc | CPU s per call gcc, zig "
        "| first call gcc | first call zig | zig / gcc |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i in picked:
        task, d, dtype = CASES[i]
        g, z = (statistics.median(times[r, i]) for r in ROADS)
        cg, cz = (statistics.median(cpus[r, i]) for r in ROADS)
        fg, fz = first["gcc", i], first["zig", i]
        lines.append(
            f"| {task} D={d} {dtype} | {_fmt(g)} | {_fmt(z)} | {z / g:.2f} | "
            f"{cg:.3g}, {cz:.3g} | {_fmt(fg)} | {_fmt(fz)} | {fz / fg:.2f} |"
        )
    lg, lz = (_fmt(statistics.median(loads[r])) for r in ROADS)
    lines += [
        "",
        f"A cached kernel's first call in a new process ({CASES[picked[0]]}, "
        f"N = 2000, median of {args.loads}): gcc {lg}, zig {lz}",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
