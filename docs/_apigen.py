"""Write the API reference's reStructuredText from the public modules' ``__all__``.

Run by ``conf.py`` before every build (the pages under ``docs/api/`` are
generated, not edited). One page per public module (every module of
``kerneltools`` without an underscored component, the engine
``kerneltools.backend`` excluded), listing every name of its ``__all__``
(for the root, also the names it loads on first use, as
``tests/test_public_api.py`` lists them). An object exported by several
modules (``SVC`` is ``kerneltools.SVC``, ``kerneltools.estimators.SVC`` and
``kerneltools.estimators.svm.SVC``) gets one page, under the public module
closest to where it is defined; the other modules link to it, so the search
finds one ``SVC``. ``tests/docs/test_api_pages.py`` checks the result.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import types
from dataclasses import dataclass
from pathlib import Path

#: Names a module gives on first use (``__getattr__``) besides its ``__all__``.
LAZY_NAMES: dict[str, list[str]] = {
    "kerneltools": ["ranges", "selection", "stats"],  # + the estimators' __all__
    "kerneltools.torch": ["SamplesLoss"],
}

#: Sections of the API index: (title, module prefixes), in order.
SECTIONS: list[tuple[str, tuple[str, ...]]] = [
    ("The package", ("kerneltools",)),
    ("Formulas and reductions", ("kerneltools.lazy", "kerneltools.kernels",
                                 "kerneltools.ranges", "kerneltools.selection")),
    ("Linear algebra, transport and statistics",
     ("kerneltools.linalg", "kerneltools.ot", "kerneltools.stats")),
    ("Estimators", ("kerneltools.estimators",)),
    ("scikit-learn acceleration", ("kerneltools.accel",)),
    ("Other array libraries",
     ("kerneltools.torch", "kerneltools.jax", "kerneltools.dask")),
    ("pykeops-compatible layer", ("kerneltools.keops",)),
    ("Configuration and errors", ("kerneltools.config", "kerneltools.exceptions")),
]


@dataclass
class Entry:
    """One name of one module's public list."""

    module: str
    name: str
    obj: object

    @property
    def path(self) -> str:
        return f"{self.module}.{self.name}"


def public_modules() -> list[str]:
    """Every public module: no underscored component, not the engine."""
    import kerneltools

    names = ["kerneltools"]
    for info in pkgutil.walk_packages(kerneltools.__path__, "kerneltools."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts) or parts[1] == "backend":
            continue
        names.append(info.name)
    return sorted(set(names))


def public_names(module: str) -> list[str]:
    """The names a user reads from ``module``: its ``__all__`` and lazy names."""
    mod = importlib.import_module(module)
    names = list(getattr(mod, "__all__", []))
    names += LAZY_NAMES.get(module, [])
    if module == "kerneltools":
        names += importlib.import_module("kerneltools.estimators").__all__
    return list(dict.fromkeys(names))


def entries() -> dict[str, list[Entry]]:
    """{module: [Entry]} for every public module that exports names."""
    out = {}
    for module in public_modules():
        mod = importlib.import_module(module)
        names = public_names(module)
        if names:
            out[module] = [Entry(module, n, getattr(mod, n)) for n in names]
    return out


def _shared(obj: object) -> bool:
    """Whether ``obj`` is one object under several names (not plain data)."""
    return isinstance(obj, (type, types.FunctionType, types.ModuleType)) or (
        callable(obj) and hasattr(obj, "__module__")
    )


def _home_score(entry: Entry) -> tuple[int, int]:
    """How close ``entry.module`` is to where its object is defined."""
    defined = getattr(entry.obj, "__module__", "") or ""
    if isinstance(entry.obj, types.ModuleType):
        defined = entry.obj.__name__
    a, b = entry.module.split("."), defined.split(".")
    common = 0
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1
    return common, -len(a)


def canonical(all_entries: dict[str, list[Entry]]) -> dict[int, Entry]:
    """{id(obj): the entry whose page documents it} for shared objects."""
    groups: dict[int, list[Entry]] = {}
    for items in all_entries.values():
        for e in items:
            if _shared(e.obj) and not isinstance(e.obj, types.ModuleType):
                groups.setdefault(id(e.obj), []).append(e)
    return {key: max(group, key=_home_score) for key, group in groups.items()}


def _kind(obj: object) -> str:
    if isinstance(obj, type):
        return "class"
    if callable(obj):
        return "function"
    return "data"


def _title(text: str, char: str = "=") -> str:
    return f"{text}\n{char * len(text)}\n"


def module_page(module: str, items: list[Entry], homes: dict[int, Entry]) -> str:
    """The reStructuredText of one module's page."""
    own = {"class": [], "function": [], "data": []}
    aliases = []
    for e in items:
        if isinstance(e.obj, types.ModuleType):
            aliases.append(f":mod:`{e.name} <{e.obj.__name__}>`")
            continue
        home = homes.get(id(e.obj)) if _shared(e.obj) else None
        if home is None or home is e:
            own[_kind(e.obj)].append(e.name)
        else:
            role = "class" if isinstance(e.obj, type) else "func"
            aliases.append(f":{role}:`{e.name} <{home.path}>`")
    lines = [
        f".. _api-{module}:\n",
        _title(module),
        f".. automodule:: {module}\n   :no-members:\n   :no-index:\n",
        f".. currentmodule:: {module}\n",
    ]
    headings = {"class": "Classes", "function": "Functions", "data": "Constants"}
    for kind, names in own.items():
        if not names:
            continue
        lines += [_title(headings[kind], "-"), ".. autosummary::",
                  "   :toctree: generated/", f"   :template: {kind}.rst", ""]
        lines += [f"   {n}" for n in names] + [""]
    if aliases:
        lines += [_title("Also exported here", "-"),
                  "The same objects as documented elsewhere:\n"]
        lines += [f"- {a}" for a in aliases] + [""]
    return "\n".join(lines)


def index_page(modules: list[str]) -> str:
    lines = [
        ".. _api:\n", _title("API reference"),
        "Every public name, module by module: each module's ``__all__`` "
        "(generated from the docstrings by ``docs/_apigen.py``). An object that "
        "several modules export has one page, under the module that defines "
        "it; the others link to it.\n",
    ]
    placed = set()
    for title, prefixes in SECTIONS:
        mods = [m for m in modules if m not in placed and any(
            m == p or (p != "kerneltools" and m.startswith(p + ".")) for p in prefixes)]
        if not mods:
            continue
        placed.update(mods)
        lines += [_title(title, "-"), ".. toctree::", "   :maxdepth: 1", ""]
        lines += [f"   {m}" for m in mods] + [""]
    rest = [m for m in modules if m not in placed]
    if rest:
        lines += [_title("Other modules", "-"), ".. toctree::", "   :maxdepth: 1", ""]
        lines += [f"   {m}" for m in rest] + [""]
    return "\n".join(lines)


def write(folder: Path) -> dict[str, list[Entry]]:
    """Write ``index.rst`` and one page per module into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    all_entries = entries()
    homes = canonical(all_entries)
    pages = {"index.rst": index_page(sorted(all_entries))}
    for module, items in all_entries.items():
        pages[f"{module}.rst"] = module_page(module, items, homes)
    for name, text in pages.items():
        path = folder / name
        if not path.exists() or path.read_text() != text:  # keep Sphinx's cache
            path.write_text(text)
    for old in folder.glob("*.rst"):
        if old.name not in pages:
            old.unlink()
    return all_entries


def documented_paths(all_entries: dict[str, list[Entry]]) -> dict[str, str]:
    """{"module.name": the path of the page that documents it}."""
    homes = canonical(all_entries)
    out = {}
    for module, items in all_entries.items():
        for e in items:
            if isinstance(e.obj, types.ModuleType):
                out[e.path] = e.obj.__name__
            elif _shared(e.obj):
                out[e.path] = homes[id(e.obj)].path
            else:
                out[e.path] = e.path
    return out


if __name__ == "__main__":
    print(inspect.cleandoc(__doc__).splitlines()[0])
    write(Path(__file__).parent / "api")
