#!/usr/bin/env python
"""Every side-by-side comparison table in one Markdown document, one command.

Runs the comparison scripts of this folder one after the other, each in its
own process (``compare.py``, ``knn_compare.py``, ``krr_compare.py``,
``gp_compare.py``, ``nystroem_compare.py``, ``ot_compare.py``,
``torch_compare.py``, and ``cuda_compare.py`` when a GPU is usable), and
prints one Markdown document with all their tables (each under the command
that made it), to stdout and to ``--out``. The scripts' progress goes to
stderr.

    python asv_bench/tables.py --quick                 # small sizes, a few minutes
    python asv_bench/tables.py --out tables.md         # the README's sizes: hours
    python asv_bench/tables.py --only compare,knn_compare --quick
    python asv_bench/tables.py --set gp_compare="--cases sklearn:3000:cholesky"
    python asv_bench/tables.py --dry-run               # the commands, not run

Without ``--quick`` each script runs at the sizes the README and
``RESULTS.md`` quote (``compare.py`` twice: the products at D = 3, 64, 100,
then log-sum-exp, ArgKMin and the gradient); the other scripts at their own
defaults. ``--set NAME="ARGS"`` replaces a script's arguments (sizes,
systems, ...: see ``python asv_bench/NAME.py --help``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

#: name -> (section title, [arguments of each run at the README's sizes],
#:          [arguments of each run with --quick]); ``--out`` is added.
SCRIPTS = {
    "compare": (
        "Reductions: kerneltools vs pykeops (CPU) vs dense NumPy",
        [
            (
                "--sizes 1e4,3e4,1e5 --dims 3,64,100 --tasks matvec --repeats 3 "
                "--max-seconds 45 --case-budget 60"
            ),
            (
                "--sizes 1e4,3e4,1e5 --dims 3 --tasks lse,argkmin,grad --repeats 3 "
                "--max-seconds 45 --case-budget 60"
            ),
        ],
        [
            (
                "--sizes 2e3 --dtypes float32 --tasks matvec,lse,argkmin,grad "
                "--repeats 1 --check-rows 50"
            )
        ],
    ),
    "knn_compare": (
        "k nearest neighbours: kerneltools vs scikit-learn, FAISS, pykeops",
        [""],
        ["--cases 2e3:2e3 --warmup-case 1e3:1e3 --dims 3 --check-rows 50"],
    ),
    "krr_compare": (
        "Kernel ridge regression: kerneltools vs scikit-learn",
        [""],
        [
            (
                "--cases sklearn:2000:cholesky,kerneltools:2000:cholesky,"
                "kerneltools:2000:cg,kerneltools:2000:falkon --m 300"
            )
        ],
    ),
    "gp_compare": (
        "Gaussian-process regression: kerneltools vs scikit-learn",
        [""],
        [
            (
                "--cases sklearn:300:cholesky,kerneltools:300:cholesky,"
                "kerneltools:300:iterative"
            )
        ],
    ),
    "nystroem_compare": (
        "Nystroem: kerneltools vs scikit-learn",
        [""],
        ["--n 5000 --m 200 --repeats 1"],
    ),
    "ot_compare": (
        "Sinkhorn divergence: kerneltools vs GeomLoss vs POT",
        [""],
        ["--sizes 1e3 --repeats 1 --pot-converged-max 0"],
    ),
    "torch_compare": (
        "kerneltools.torch: forward + backward vs pykeops.torch and dense torch",
        [""],
        ["--sizes 2000 --repeat 1"],
    ),
    "cuda_compare": (
        "CUDA: kerneltools vs pykeops vs dense CuPy",
        [""],
        ["--sizes 10000 100000 --repeat 3"],
    ),
}


def gpu_usable() -> str | None:
    """None when kerneltools' CUDA backend can run here, else why not."""
    try:
        import numpy as np

        import kerneltools as kt

        x = np.zeros((1, 1), dtype=np.float32)
        kt.Vi(x).sqdist(kt.Vj(x)).sum(axis=1, backend="cuda")
    except Exception as exc:  # noqa: BLE001 (no CuPy, no driver, no GPU, ...)
        return f"{type(exc).__name__}: {exc}"
    return None


def demote(markdown: str, levels: int = 2) -> str:
    """The headings of a script's report, ``levels`` deeper (code blocks kept)."""
    out, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("#"):
            line = "#" * levels + line
        out.append(line)
    return "\n".join(out)


def _fmt_s(s: float) -> str:
    return f"{s * 1e3:.3g} ms" if s < 1 else f"{s:.3g} s"


def cuda_table(path: str) -> str:
    """cuda_compare.py's JSON (``--out``) as a Markdown table."""
    with open(path) as fh:
        result = json.load(fh)
    systems, meta = ["kerneltools", "pykeops", "dense cupy"], result["meta"]
    lines = [
        (
            f"Device: {meta.get('device')}, CuPy {meta.get('cupy')}; "
            "float32, D = 3, data on the GPU, medians after a warm-up call."
        ),
        "",
        "| N = M | task | " + " | ".join(systems) + " | kt vs dense (or pykeops) |",
        "|---|---|" + "---|" * len(systems) + "---|",
    ]
    cells: dict = {}
    for row in result["rows"]:
        key = (row["n"], row["case"])
        cell = (
            _fmt_s(row["median_s"])
            if "median_s" in row
            else f"skip: {row.get('skipped', '?')[:60]}"
        )
        cells.setdefault(key, {})[row["system"]] = cell
        if "vs_reference" in row:  # argkmin: the fraction of equal neighbour sets
            v = row["vs_reference"]
            ok = f"{v:.4f} agree" if row["case"] == "argkmin" else f"{v:.1e}"
            cells[key]["ref"] = ok
    for (n, case), by in cells.items():
        row = [f"{n:,}", case] + [by.get(s, "") for s in systems] + [by.get("ref", "")]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def plan(args) -> list[tuple[str, str, list[list[str]]]]:
    """(name, title, [argv of each run]) of the scripts to run."""
    names = list(SCRIPTS)
    if args.only:
        names = [n for n in names if n in args.only]
    names = [n for n in names if n not in args.skip]
    runs = []
    for name in names:
        title, full, quick = SCRIPTS[name]
        argsets = (
            [args.set[name]] if name in args.set else (quick if args.quick else full)
        )
        runs.append((name, title, [shlex.split(a) for a in argsets]))
    return runs


def run_script(name: str, argv: list[str], workdir: str) -> tuple[str | None, str]:
    """Run one script; (its Markdown or None, a note on how it went)."""
    ext = "json" if name == "cuda_compare" else "md"
    out = os.path.join(workdir, f"{name}-{len(os.listdir(workdir))}.{ext}")
    cmd = [sys.executable, os.path.join(HERE, f"{name}.py"), *argv, "--out", out]
    t0 = time.perf_counter()
    # The scripts' own output (progress, and the table once more) goes to stderr.
    proc = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0 or not os.path.exists(out):
        return None, f"**failed** (exit code {proc.returncode} after {wall:.0f} s)"
    if ext == "json":
        return cuda_table(out), f"{wall:.0f} s"
    with open(out) as fh:
        return fh.read().strip(), f"{wall:.0f} s"


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Scripts: " + ", ".join(SCRIPTS),
    )
    ap.add_argument("--quick", action="store_true", help="small sizes: a few minutes")
    ap.add_argument(
        "--only",
        type=lambda s: s.split(","),
        default=[],
        help="comma-separated scripts to run (default: all)",
    )
    ap.add_argument(
        "--skip",
        type=lambda s: s.split(","),
        default=[],
        help="comma-separated scripts not to run",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar='NAME="ARGS"',
        help="run NAME with these arguments instead (repeatable)",
    )
    ap.add_argument("--no-gpu", action="store_true", help="never run cuda_compare")
    ap.add_argument("--dry-run", action="store_true", help="print the commands only")
    ap.add_argument("--out", default=None, help="also write the document here")
    args = ap.parse_args(argv)
    unknown = [n for n in args.only + args.skip if n not in SCRIPTS]
    sets = {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep:
            ap.error(f'--set expects NAME="ARGS"; got {item!r}')
        sets[name.strip()] = value
    unknown += [n for n in sets if n not in SCRIPTS]
    if unknown:
        ap.error(f"unknown script(s) {unknown}; known: {', '.join(SCRIPTS)}")
    args.set = sets
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    why_no_gpu = "--no-gpu" if args.no_gpu else gpu_usable()
    if why_no_gpu and "cuda_compare" not in args.skip:
        args.skip.append("cuda_compare")
    runs = plan(args)
    if args.dry_run:
        for name, _, argsets in runs:
            for argv_ in argsets:
                print(shlex.join(["python", f"asv_bench/{name}.py", *argv_]))
        if why_no_gpu:
            print(f"# cuda_compare skipped: {why_no_gpu}")
        return 0
    import numpy as np

    import kerneltools

    load0, t0 = os.getloadavg(), time.perf_counter()
    started = datetime.datetime.now().isoformat(timespec="seconds")
    doc = [
        "# kerneltools: comparison tables",
        "",
        (
            f"Made by `{shlex.join(['python', 'asv_bench/tables.py', *sys.argv[1:]])}` "
            f"on {started}: {platform.node() or 'vm'}, {platform.machine()}, "
            f"{os.cpu_count()} logical CPUs; python {platform.python_version()}, "
            f"numpy {np.__version__}, kerneltools {kerneltools.__version__}."
        ),
    ]
    failed = []
    with tempfile.TemporaryDirectory(prefix="kt-tables-") as workdir:
        for name, title, argsets in runs:
            doc += ["", f"## {title}"]
            for argv_ in argsets:
                command = shlex.join(["python", f"asv_bench/{name}.py", *argv_])
                print(f"[tables] {command}", file=sys.stderr, flush=True)
                text, note = run_script(name, argv_, workdir)
                doc += ["", f"`{command}` ({note})"]
                if text is None:
                    failed.append(command)
                else:
                    doc += ["", demote(text)]
    load1 = os.getloadavg()
    doc += [
        "",
        f"---\n{len(runs)} scripts in {time.perf_counter() - t0:.0f} s; load average "
        f"(1 min) {load0[0]:.2f} at the start, {load1[0]:.2f} at the end"
        + (f"; cuda_compare not run: {why_no_gpu}" if why_no_gpu else "")
        + (f"; FAILED: {', '.join(failed)}" if failed else "")
        + ".",
    ]
    text = "\n".join(doc) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
