"""Layering, from the code's imports (module level and inside functions).

DESIGN.md's layers, as the code holds them (``LAYERS``, lowest first): no
module imports a package of its own layer or of a layer above; the engine
(``kerneltools.backend``) imports nothing above it; the estimators use the
public API only, which this test follows through every private module they
import (an estimator's private helper may not reach a private module outside
the estimators either); and no two modules import each other, directly or
through others.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "kerneltools"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


MODULES = _modules()


def _source(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The module an ``import from`` in ``module`` takes its names from."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    """The kerneltools modules an ``import from`` names (a package's names
    that are submodules count as those submodules)."""
    target = _source(module, is_package, node)
    out = []
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        out.append(sub if sub in MODULES else target)
    return [t for t in out if t in MODULES]


def imports_of(module: str) -> set[str]:
    """Every kerneltools module ``module`` imports, anywhere in its code."""
    path = MODULES[module]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            found.update(_resolve(module, path.name == "__init__.py", node))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in MODULES)
    found.discard(module)
    return found


GRAPH = {m: imports_of(m) for m in MODULES}


#: Packages below the estimators that they may use beyond the public API:
#: the utilities (Array API layer, parameter validation) and the transport
#: solvers.
BELOW_ESTIMATORS = ("kerneltools._utils", "kerneltools.ot")


def _is_private(module: str) -> bool:
    if module.startswith(BELOW_ESTIMATORS):
        return False
    parts = module.split(".")
    return any(p.startswith("_") for p in parts[1:]) or "backend" in parts


#: The layers, lowest first, read from the code's imports: each package or
#: root module (a unit) may import its own modules and those of the layers
#: below it, never a unit of its own layer or above. A module belongs to the
#: unit with the longest matching name. (DESIGN.md draws kerneltools.ot above
#: the torch front end; the code has SamplesLoss use the transport solvers, so
#: ot is below torch.)
LAYERS: list[tuple[str, ...]] = [
    ("kerneltools._version", "kerneltools._moved"),  # import nothing of ours
    ("kerneltools.backend",),  # the engine
    ("kerneltools.exceptions",),  # the engine's exceptions, public
    ("kerneltools.config",),  # the backend choice
    ("kerneltools.dask", "kerneltools.selection"),
    ("kerneltools._utils",),  # Array API layer, parameter validation
    ("kerneltools.lazy",),  # LazyTensor
    ("kerneltools.kernels", "kerneltools.ranges"),
    ("kerneltools.linalg", "kerneltools.stats"),
    ("kerneltools.ot",),  # transport solvers: the estimator and SamplesLoss
    ("kerneltools.torch", "kerneltools.jax"),  # the torch and JAX front ends
    ("kerneltools.estimators",),  # scikit-learn estimators, one package a family
    ("kerneltools.accel", "kerneltools.keops"),  # scikit-learn and pykeops drop-ins
    ("kerneltools._info", "kerneltools._check"),  # the command line's reports
    ("kerneltools.__main__", "kerneltools"),  # the command line, the public surface
]
LAYER_OF = {unit: level for level, units in enumerate(LAYERS) for unit in units}


def unit_of(module: str) -> str:
    """The unit of ``LAYERS`` that ``module`` belongs to."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in LAYER_OF:
            return ".".join(parts[:end])
    raise AssertionError(f"{module} is in no layer: add its package to LAYERS")


def test_every_module_has_a_layer():
    for module in MODULES:
        unit_of(module)
    assert len(LAYER_OF) == sum(map(len, LAYERS)), "a unit is listed twice"


#: Imports that run back up the layers today, each with its reason; the test
#: fails on any other and on any of these once it is gone (remove it here).
KNOWN_UPWARD: dict[str, str] = {
    # "kerneltools.a._b -> kerneltools.c": "why, and where the code belongs",
    # (issue 38 emptied it: the estimators' fallback reads scikit-learn's
    # classes from kerneltools._utils._originals, and the formula-string
    # parser moved below both front ends, to kerneltools.lazy._formula_strings)
}


def test_no_import_runs_back_up_the_layers():
    """Every import goes to the importer's own unit or to a lower layer. The
    root package is left out as a target (it loads the estimators lazily, by
    name); what imports it is checked in test_estimators_..."""
    upward = set()
    for module, targets in sorted(GRAPH.items()):
        unit = unit_of(module)
        for target in sorted(targets - {"kerneltools"}):
            other = unit_of(target)
            if other != unit and LAYER_OF[other] >= LAYER_OF[unit]:
                upward.add(f"{module} -> {target}")
    new, gone = sorted(upward - set(KNOWN_UPWARD)), sorted(set(KNOWN_UPWARD) - upward)
    assert not new, "imports that run back up the layers:\n" + "\n".join(new)
    assert not gone, ("no longer imported (remove from KNOWN_UPWARD):\n"
                      + "\n".join(gone))


def test_the_engine_imports_nothing_above_it():
    for module, targets in GRAPH.items():
        if module.startswith("kerneltools.backend"):
            above = {t for t in targets if not t.startswith("kerneltools.backend")
                     and t != "kerneltools.exceptions"}
            assert not above, f"{module} imports {sorted(above)}"


def test_estimators_reach_private_modules_only_through_public_ones():
    """From every estimator module, follow imports of private modules: none
    may lie outside kerneltools.estimators (public modules are the boundary:
    what they import is their own business)."""
    start = [m for m in MODULES if m.startswith("kerneltools.estimators")]
    seen, stack = set(start), list(start)
    while stack:
        module = stack.pop()
        for target in GRAPH[module]:
            if target.startswith("kerneltools.estimators"):
                if target not in seen:
                    seen.add(target)
                    stack.append(target)
                continue
            assert not _is_private(target), (
                f"{module} imports the private module {target}; estimators use "
                "the public API (kerneltools, kerneltools.lazy, .kernels, .linalg, "
                ".ranges, .dask, .exceptions)"
            )
            assert target != "kerneltools", (
                f"{module} imports the package root: import from the public module "
                "that defines the name (the root imports the estimators lazily)"
            )


def test_no_import_circles():
    """Depth-first search for a cycle; the package root is left out (it loads
    the estimators lazily, by name, for ``kerneltools.KernelRidge``)."""
    graph = {m: {t for t in ts if t != "kerneltools"} for m, ts in GRAPH.items()
             if m != "kerneltools"}
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m):
        state[m] = 1
        path.append(m)
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                cycle = path[path.index(t):] + [t]
                raise AssertionError("import circle: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_the_import_graph_is_read():
    """The checks above see real edges (a parser that found none would pass)."""
    assert "kerneltools.backend._ir" in GRAPH["kerneltools.backend._ops"]
    assert "kerneltools.lazy" in GRAPH["kerneltools.kernels"]
    assert any(t.startswith("kerneltools.estimators")
               for t in GRAPH["kerneltools.estimators"])


SPECIFIC_BACKENDS = {"kerneltools.backend.cpu._backend",
                     "kerneltools.backend.cuda._backend",
                     "kerneltools.backend._numpy_backend"}
BINDINGS = ("kerneltools.lazy", "kerneltools.torch")


def _reached_above_the_engine(module: str) -> set[str]:
    """``module`` and the kerneltools modules outside the engine that it
    imports, directly or through others outside the engine (the engine's own
    imports are its business)."""
    seen, stack = {module}, [module]
    while stack:
        for target in GRAPH[stack.pop()]:
            if not target.startswith("kerneltools.backend") and target not in seen:
                seen.add(target)
                stack.append(target)
    return seen


def test_the_bindings_import_no_specific_backend():
    """kerneltools.lazy and kerneltools.torch (and their helper modules) use
    the formula IR, ops, reductions, autodiff and dispatch; the backends are
    reached through dispatch only."""
    for binding in BINDINGS:
        for module in _reached_above_the_engine(binding):
            backends = GRAPH[module] & SPECIFIC_BACKENDS
            assert not backends, (
                f"{module} (reached from {binding}) imports {sorted(backends)}; go "
                "through kerneltools.backend._dispatch"
            )


def _public_names(module: str) -> set[str]:
    """The ``__all__`` of a module, read from its source."""
    for node in ast.parse(MODULES[module].read_text()).body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def _private(attr: str) -> bool:
    return attr.startswith("_") and not (attr.startswith("__") and attr.endswith("__"))


def test_torch_uses_only_public_names_of_lazy():
    """kerneltools.torch takes from kerneltools.lazy only names of its
    ``__all__``, and no underscored attribute of them (``_lazy._keys``,
    ``LazyTensor._new``): what the bindings share is kerneltools.lazy._symbolic."""
    lazy, public = "kerneltools.lazy", _public_names("kerneltools.lazy")
    tree = ast.parse(MODULES["kerneltools.torch"].read_text())
    module_aliases, name_aliases = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _source("kerneltools.torch", True, node)
            for alias in node.names:
                local = alias.asname or alias.name
                if f"{source}.{alias.name}" == lazy:  # from . import lazy
                    module_aliases.add(local)
                elif source == lazy:  # from .lazy import name
                    assert alias.name in public, (
                        f"kerneltools.torch imports {alias.name!r} from "
                        "kerneltools.lazy, "
                        f"which is not in its __all__ {sorted(public)}"
                    )
                    name_aliases.add(local)
        elif isinstance(node, ast.Import):
            module_aliases.update(a.asname for a in node.names
                                  if a.name == lazy and a.asname)
    assert module_aliases or name_aliases, "kerneltools.torch no longer imports lazy?"
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain, base = [node.attr], node.value
        while isinstance(base, ast.Attribute):
            chain.append(base.attr)
            base = base.value
        if not isinstance(base, ast.Name):
            continue
        chain.reverse()  # base.a.b.c -> [a, b, c]
        used = ".".join([base.id] + chain)
        if base.id in module_aliases:
            assert chain[0] in public, (
                f"kerneltools.torch uses {used}: {chain[0]!r} is not in "
                "kerneltools.lazy's "
                f"__all__ {sorted(public)}"
            )
            chain = chain[1:]
        elif base.id not in name_aliases:
            continue
        assert not any(_private(a) for a in chain), (
            f"kerneltools.torch uses {used}, a private name of "
            "kerneltools.lazy; the bindings share kerneltools.lazy._symbolic instead"
        )
