"""pytest plugin of the pykeops conformance run: pykeops' own tests on kerneltools.

Loaded with ``-p pykeops_plugin`` (``pykeops_run.py`` does it) before the test
files are imported. It puts kerneltools' compatibility modules in
``sys.modules`` under pykeops' names, so that the test files' unchanged
``from pykeops.numpy import Genred`` / ``from pykeops.torch import LazyTensor``
get ours:

* ``pykeops.numpy``, ``pykeops.torch`` (and their ``cluster`` and
  ``operations``): ``kerneltools.keops.numpy`` / ``.torch``;
* ``pykeops.config``: ``gpu_available`` is whether kerneltools' CUDA backend
  runs here;
* ``pykeops.numpy.utils``, ``pykeops.torch.utils``: pykeops' own files (the
  NumPy / torch reference helpers that its tests compare against), loaded
  from the installed pykeops, whose imports then resolve to ours too.

``--pykeops-before`` maps ``pykeops.numpy`` / ``.torch`` to the plain
``kerneltools`` / ``kerneltools.torch`` instead (what a user had before the
compatibility modules): the "before" count. Outcomes go to
``--pykeops-report`` as JSON; ``PYKEOPS_EXCLUDED.md`` lists deselected tests.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import re
import sys
import types
from pathlib import Path

import pytest

EXCLUDED_FILE = Path(__file__).with_name("PYKEOPS_EXCLUDED.md")
_records: dict[str, dict] = {}
_root: list[Path] = []


def pykeops_dir() -> Path | None:
    """The installed pykeops package (its test files and reference helpers), or None."""
    spec = importlib.util.find_spec("pykeops")
    return Path(spec.origin).parent if spec is not None and spec.origin else None


def _gpu_available() -> bool:
    from kerneltools.backend._dispatch import BACKENDS

    entry = BACKENDS.get("cuda")
    return bool(entry is not None and entry.available()[0])


def _load_file(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def install(before: bool = False, bindings=("numpy", "torch")) -> None:
    """Make pykeops' import names resolve to kerneltools (see the module docstring),
    for the ``bindings`` among numpy and torch."""
    real = pykeops_dir()
    root = types.ModuleType("pykeops")
    root.__path__ = []  # a package: its submodules are the entries below
    root.__version__ = "2.3 (kerneltools.keops)"
    config = types.ModuleType("pykeops.config")
    config.gpu_available = _gpu_available()
    root.config = config
    sys.modules["pykeops"], sys.modules["pykeops.config"] = root, config
    for binding in bindings:
        try:
            if before:
                mod = importlib.import_module("kerneltools" if binding == "numpy"
                                              else "kerneltools.torch")
                subs = {}
            else:
                mod = importlib.import_module(f"kerneltools.keops.{binding}")
                subs = {s: importlib.import_module(f"kerneltools.keops.{binding}.{s}")
                        for s in ("cluster", "operations")}
        except ImportError:  # torch is optional
            continue
        sys.modules[f"pykeops.{binding}"] = mod
        setattr(root, binding, mod)
        for s, m in subs.items():
            sys.modules[f"pykeops.{binding}.{s}"] = m
        if real is not None and not before:
            _load_file(f"pykeops.{binding}.utils", real / binding / "utils.py")


def excluded() -> dict[str, str]:
    out = {}
    if EXCLUDED_FILE.exists():
        for line in EXCLUDED_FILE.read_text().splitlines():
            m = re.match(r"^- `([^`]+)`\s*[:—-]+\s*(.+)$", line.strip())
            if m:
                out[m.group(1)] = m.group(2)
    return out


def pytest_addoption(parser):
    parser.addoption("--pykeops-report", default=None,
                     help="write each test's outcome and message as JSON here")
    parser.addoption("--pykeops-before", action="store_true",
                     help="map pykeops.numpy/.torch to plain kerneltools (the 'before' count)")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    install(before="--pykeops-before" in args)


def pytest_collection_modifyitems(session, config, items):
    table = excluded()
    keep, drop = [], []
    for item in items:
        (drop if item.nodeid in table or item.nodeid.split("[")[0] in table
         else keep).append(item)
    for item in drop:
        _records[item.nodeid] = {"outcome": "excluded", "message": table.get(
            item.nodeid, table.get(item.nodeid.split("[")[0], ""))}
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_configure(config):
    _root.append(Path(str(config.rootpath)))


def count_tests(path: Path) -> int:
    """The test functions of a file (at module level or in classes)."""
    tree = ast.parse(path.read_text())
    return sum(isinstance(n, ast.FunctionDef) and n.name.startswith("test")
               for n in ast.walk(tree)) or 1


def pytest_collectreport(report):
    if report.failed:  # a test file that does not import: each of its tests fails
        crash = getattr(report.longrepr, "reprcrash", None)
        path = _root[-1] / report.nodeid if _root else None
        _records[report.nodeid] = {
            "outcome": "collection error",
            "tests": count_tests(path) if path is not None and path.is_file() else 1,
            "message": crash.message if crash is not None else str(report.longrepr)[-600:]}


def pytest_runtest_logreport(report):
    rec = _records.setdefault(report.nodeid, {"outcome": "passed", "message": ""})
    if report.failed and rec["outcome"] != "failed":
        rec["outcome"] = "failed"
        crash = getattr(report.longrepr, "reprcrash", None)
        rec["message"] = crash.message if crash is not None else str(report.longrepr)[-600:]
    elif report.skipped and rec["outcome"] == "passed":
        rec["outcome"] = "skipped"
        rec["message"] = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) \
            else ""


def pytest_sessionfinish(session, exitstatus):
    path = session.config.getoption("--pykeops-report")
    if path:
        Path(path).write_text(json.dumps(_records, indent=1, sort_keys=True))
