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
    python tools/docstring_report.py --methods --codes PR01,RT01  # methods

``--methods`` validates instead the public methods of the documented
classes, as their pages list them (autodoc's ``:inherited-members:``: every
callable member with a docstring, inherited ones included, ``__call__`` too),
one count per class page, grouped by where the method comes from
(:func:`origin`).

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


def _resolve(path: str):
    import importlib

    module, name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


#: Bases whose members the class pages do not list (``docs/_templates/class.rst``'s
#: ``:inherited-members:``): ``object``'s, and torch's ``Module`` (SamplesLoss).
EXCLUDED_BASES = ("object", "Module")


def methods(paths: list[str]) -> list[str]:
    """Import paths ``module.Class.method`` of the documented classes' methods."""
    out = []
    for path in paths:
        cls = _resolve(path)
        if not isinstance(cls, type):
            continue
        for name in dir(cls):
            if name.startswith("_") and name != "__call__":
                continue
            owner = next((k for k in cls.__mro__ if name in k.__dict__), None)
            if owner is None or any(k.__name__ in EXCLUDED_BASES for k in
                                    cls.__mro__[:cls.__mro__.index(owner) + 1]):
                continue
            raw = owner.__dict__[name]
            if isinstance(raw, property) or not callable(getattr(cls, name)):
                continue
            if getattr(getattr(cls, name), "__doc__", None):
                out.append(f"{path}.{name}")
    return out


#: Groups of methods by the file that defines them: (group, path prefix).
ORIGINS = [
    ("estimators", "kerneltools/estimators/"),
    ("lazy: registry-generated", "kerneltools/lazy/_methods.py"),
    ("lazy: keops methods", "kerneltools/lazy/_keops.py"),
    ("lazy: hand-written", "kerneltools/lazy/"),
    ("torch front end", "kerneltools/torch/"),
    ("jax front end", "kerneltools/jax/"),
    ("keops layer", "kerneltools/keops/"),
    ("other kerneltools", "kerneltools/"),
]


def origin(path: str) -> str:
    """The group of the method ``path`` (``ORIGINS``, or the library it is
    inherited from: ``scikit-learn``, ``scipy``, ...)."""
    import inspect

    cls_path, name = path.rsplit(".", 1)
    fn = inspect.unwrap(getattr(_resolve(cls_path), name))
    try:
        src = Path(inspect.getsourcefile(fn) or "").resolve().as_posix()
    except TypeError:
        return "builtin"
    if "site-packages/" in src:
        return src.split("site-packages/")[1].split("/")[0]
    rel = src.split(ROOT.as_posix() + "/")[-1]
    return next((g for g, prefix in ORIGINS if rel.startswith(prefix)), rel)


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
    ap.add_argument("--methods", action="store_true",
                    help="validate the documented classes' methods instead")
    args = ap.parse_args(argv)
    paths = documented()
    if args.methods:
        return _method_report(methods(paths), args)
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


def _method_report(paths: list[str], args) -> int:
    found = failures(paths)
    total = counts(found)
    wanted = [c for c in args.codes.split(",") if c] or ["PR01", "RT01"]
    if args.json:
        out = {c: total.get(c, 0) for c in wanted}
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    print(f"{len(paths)} methods of documented classes")
    groups: dict[str, Counter] = {}
    for p, codes in found.items():
        g = groups.setdefault(origin(p), Counter())
        g["methods"] += 1
        g.update(c for c in codes if c in wanted)
    print(f"  {'from':28s} methods " + " ".join(f"{c:>5s}" for c in wanted))
    for g, c in sorted(groups.items(), key=lambda kv: -kv[1]["methods"]):
        print(f"  {g:28s} {c['methods']:7d} " + " ".join(f"{c[w]:5d}" for w in wanted))
    print(f"  {'total':28s} {len(paths):7d} "
          + " ".join(f"{total.get(w, 0):5d}" for w in wanted))
    if args.details:
        for code in wanted:
            bad = [f"{p}  ({origin(p)})" for p, c in found.items() if code in c]
            print(f"\n{code}:\n  " + "\n  ".join(bad))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
