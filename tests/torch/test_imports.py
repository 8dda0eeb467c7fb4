"""What ``import kerneltools.torch`` loads: no module of kerneltools.estimators.

The torch front end (LazyTensor on tensors, ``SamplesLoss``) stands below the
estimators: its Sinkhorn solvers are :mod:`kerneltools.ot`'s. Checked twice:
by importing in a fresh interpreter (``sys.modules`` afterwards), which needs
torch, and from the source's imports (those inside functions too, followed
from module to module), which does not.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import kerneltools

ROOT = Path(kerneltools.__file__).resolve().parent
ESTIMATORS = "kerneltools.estimators"


def _loaded_after(statement: str) -> list[str]:
    """The kerneltools modules in ``sys.modules`` after ``statement`` runs in
    a fresh interpreter."""
    code = (f"import sys; {statement}; "
            "print('\\n'.join(m for m in sys.modules if m.startswith('kerneltools')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


@pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                    reason="torch is not installed, so kerneltools.torch cannot be "
                    "imported; test_the_torch_sources_import_no_estimator checks the "
                    "same from the source")
def test_importing_kerneltools_torch_loads_no_estimator():
    loaded = _loaded_after("import kerneltools.torch; kerneltools.torch.SamplesLoss")
    assert "kerneltools.torch._samples_loss" in loaded  # the import did run
    assert "kerneltools.ot._sinkhorn" in loaded
    assert [m for m in loaded if m.startswith(ESTIMATORS)] == []


def test_importing_kerneltools_ot_loads_no_estimator():
    loaded = _loaded_after("import kerneltools.ot")
    assert "kerneltools.ot._sinkhorn" in loaded
    assert [m for m in loaded if m.startswith(ESTIMATORS)] == []


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}


def _imports_of(module: str) -> set[str]:
    """The kerneltools modules that ``module`` imports, anywhere in its code
    (``from package import name`` counts as the submodule ``name`` if it is
    one, else as the package)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in MODULES)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            source = (".".join(base + [node.module] if node.module else base)
                      if node.level else node.module or "")
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                found.add(sub if sub in MODULES else source)
    return {m for m in found if m in MODULES} - {module}


def _reached_from(module: str) -> dict[str, str]:
    """Every kerneltools module ``module`` reaches through imports, each with
    the module that imports it on the first path found."""
    via, stack = {module: ""}, [module]
    while stack:
        current = stack.pop()
        for target in _imports_of(current):
            if target not in via:
                via[target] = current
                stack.append(target)
    return via


def _path_to(via: dict[str, str], module: str) -> str:
    chain = [module]
    while via[chain[-1]]:
        chain.append(via[chain[-1]])
    return " -> ".join(reversed(chain))


def test_the_torch_sources_import_no_estimator():
    for start in ("kerneltools.torch", "kerneltools.ot"):
        via = _reached_from(start)
        # the walk sees real edges (a parser that found none would pass)
        assert "kerneltools.ot._sinkhorn" in via
        assert "kerneltools.lazy._symbolic" in via
        estimators = sorted(m for m in via if m.startswith(ESTIMATORS))
        assert not estimators, (f"{start} reaches the estimators: "
                                f"{_path_to(via, estimators[0])}")
