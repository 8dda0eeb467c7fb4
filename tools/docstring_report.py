"""Run numpydoc's docstring validator over every name the API reference documents.

The names are those ``docs/_apigen.py`` writes pages for (each public
module's ``__all__`` and first-use names, one page per object; modules and
plain constants are not validated). For each object, numpydoc's
``numpydoc.validate.validate`` lists the checks its docstring fails (PR01: a
parameter without an entry, RT01: no Returns section, EX01: no Examples,
...). Prints the count of failures per check code, and per module for the
codes asked for::

    python tools/docstring_report.py                    # every code
    python tools/docstring_report.py --codes PR01,RT01,EX01 --details
    python tools/docstring_report.py --json counts.json  # {code: count}

``tests/docs/test_docstrings.py`` compares the counts with
``tests/docs/docstring_baseline.json``: a count may go down, never up.
"""

from __future__ import annotations

import argparse
import json
import sys
import types
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def documented() -> list[str]:
    """Import paths of the documented objects (classes and functions), sorted."""
    sys.path.insert(0, str(ROOT / "docs"))
    import _apigen

    all_entries = _apigen.entries()
    homes = _apigen.canonical(all_entries)
    paths = set()
    for items in all_entries.values():
        for e in items:
            if isinstance(e.obj, types.ModuleType) or not callable(e.obj):
                continue
            home = homes.get(id(e.obj)) if _apigen._shared(e.obj) else None
            paths.add((home or e).path)
    return sorted(paths)


def failures(paths: list[str]) -> dict[str, list[str]]:
    """{path: [check codes its docstring fails]}."""
    from numpydoc.validate import validate

    return {p: sorted({code for code, _ in validate(p)["errors"]}) for p in paths}


def counts(found: dict[str, list[str]]) -> dict[str, int]:
    """{code: number of objects failing it}, every code seen, sorted."""
    c = Counter(code for codes in found.values() for code in codes)
    return dict(sorted(c.items()))


def _module(path: str) -> str:
    return path.rsplit(".", 1)[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--codes", default="", help="comma-separated codes (all)")
    ap.add_argument("--details", action="store_true", help="list the objects")
    ap.add_argument("--json", help="write {code: count} to this file")
    args = ap.parse_args(argv)
    paths = documented()
    found = failures(paths)
    total = counts(found)
    if args.json:
        Path(args.json).write_text(json.dumps(total, indent=1) + "\n")
    wanted = [c for c in args.codes.split(",") if c] or list(total)
    print(f"{len(paths)} documented objects")
    from numpydoc.validate import ERROR_MSGS

    for code in wanted:
        print(f"{code} {total.get(code, 0):4d}  {ERROR_MSGS.get(code, '')[:60]}")
    if not args.codes:
        wanted = ["PR01", "RT01", "EX01"]
    print("\nper module (" + ", ".join(wanted) + "):")
    modules = sorted({_module(p) for p in paths})
    for m in modules:
        row = [sum(code in c for p, c in found.items() if _module(p) == m)
               for code in wanted]
        if any(row):
            print(f"  {m:40s} " + " ".join(f"{n:4d}" for n in row))
    if args.details:
        for code in wanted:
            bad = [p for p, c in found.items() if code in c]
            print(f"\n{code}:\n  " + "\n  ".join(bad))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
