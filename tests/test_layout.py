"""Where things live: the rules of the layout (issue 38, STYLE.md).

A module that outgrows about 600 lines becomes a package, never a set of
prefixed siblings (``_neighbors_base.py``, ``_neighbors_search.py``, ...);
the package root keeps the public surface, config, exceptions and the
command line. Read from the checkout's files.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "kerneltools"

#: Most lines a library file may have.
MAX_LINES = 600
#: Most modules sharing the first word of their name in one folder.
MAX_SHARING_A_PREFIX = 2
#: Most modules in the package root (``__init__`` and ``__main__`` count).
MAX_ROOT_MODULES = 12


def _library_files() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts)


def prefix(name: str) -> str:
    """The first word of a module's name: ``_neighbors_base`` -> ``neighbors``."""
    return name.lstrip("_").split("_")[0]


def _modules_of(folder: Path) -> list[str]:
    """The modules of a folder: its .py files and its packages, but the
    package's own ``__init__`` and ``__main__``."""
    files = [p.stem for p in folder.glob("*.py")
             if p.stem not in ("__init__", "__main__")]
    packages = [p.name for p in folder.iterdir() if (p / "__init__.py").is_file()]
    return files + packages


def test_no_library_file_over_600_lines():
    long = {p.relative_to(ROOT.parent).as_posix(): n for p in _library_files()
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"over {MAX_LINES} lines (make the module a package): {long}"


def test_no_folder_has_three_modules_sharing_a_prefix():
    folders = sorted({p.parent for p in _library_files()})
    assert len(folders) > 10  # the walk sees the subpackages
    crowded = {}
    for folder in folders:
        counts = Counter(prefix(m) for m in _modules_of(folder))
        for word, n in counts.items():
            if n > MAX_SHARING_A_PREFIX:
                names = sorted(m for m in _modules_of(folder) if prefix(m) == word)
                where = folder.relative_to(ROOT.parent).as_posix()
                crowded[f"{where}/{word}_*"] = names
    assert not crowded, f"prefixed siblings (make them a package): {crowded}"


def test_the_prefix_rule_reads_names_as_meant():
    assert prefix("_neighbors_base") == prefix("neighbors") == "neighbors"
    assert prefix("_cpu_backend") == "cpu" and prefix("__init__") == "init"


def test_the_package_root_holds_at_most_12_modules():
    modules = sorted(p.name for p in ROOT.glob("*.py"))
    assert "__init__.py" in modules
    assert len(modules) <= MAX_ROOT_MODULES, modules


def test_every_folder_of_modules_is_a_package_with_a_docstring():
    """Each package's ``__init__.py`` opens with a paragraph: what lives
    there and what it may import (not a one-line placeholder)."""
    thin = []
    for folder in sorted({p.parent for p in _library_files()}):
        init = folder / "__init__.py"
        assert init.is_file(), f"{folder} holds modules but is no package"
        doc = ast.get_docstring(ast.parse(init.read_text()))
        if not doc or len(doc.split()) < 15 or "import" not in doc:
            thin.append(folder.relative_to(ROOT.parent).as_posix())
    assert not thin, ("packages whose docstring does not say what lives there and "
                      f"what it may import: {thin}")
