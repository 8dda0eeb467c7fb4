"""Shared by the estimator comparison scripts: one subprocess per case (so each
case's peak RSS is its own), and the table's output."""

from __future__ import annotations

import json
import subprocess
import sys


def run_child(script: str, case: str, child_args: list[str]) -> dict | None:
    """Run ``script --child *child_args``; its last stdout line is a JSON row."""
    out = subprocess.run([sys.executable, script, "--child", *child_args],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        print(f"{case}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
        return None
    row = json.loads(out.stdout.strip().splitlines()[-1])
    print(row, file=sys.stderr, flush=True)
    return row


def emit(lines: list[str], out: str | None) -> None:
    """Print the table, and write it to ``out`` if given."""
    text = "\n".join(lines)
    print(text)
    if out:
        with open(out, "w") as fh:
            fh.write(text + "\n")


def warm_median(fn, args: tuple, repeat: int) -> float:
    """The median wall time, in seconds, of ``repeat`` calls ``fn(*args)``
    (warm calls: run it once first)."""
    import statistics
    import time

    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
