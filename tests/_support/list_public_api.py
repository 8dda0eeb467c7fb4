"""Print the public import paths of a kerneltools tree, as Python data.

Run once with the tree before the moves of issue 38 (commit d23a8ae) on
``PYTHONPATH``; its output is the data of ``tests/test_public_api.py``::

    git worktree add /tmp/oldmain d23a8ae
    PYTHONPATH=/tmp/oldmain python tests/_support/list_public_api.py

A public module is one whose dotted name has no component starting with an
underscore (the engine, ``kerneltools.backend``, is private: its docstring
says so). Its public names are its ``__all__``, plus the names a module gives
beyond it on purpose (``EXTRA``). Names that were one object in several places
(``kerneltools.KernelRidge`` and ``kerneltools.estimators.kernel_ridge.
KernelRidge``) are listed as groups, which must stay one object.
"""

import importlib
import pkgutil
import textwrap
import types

import kerneltools

#: Public names outside ``__all__``: the estimators and three modules loaded
#: on first use from the root, and GeomLoss's ``SamplesLoss`` in the torch
#: binding.
EXTRA = {
    "kerneltools": ["ranges", "stats", "selection"],
    "kerneltools.torch": ["SamplesLoss"],
}


def public_modules(name, path):
    for info in pkgutil.iter_modules([path]):
        if info.name.startswith("_") or f"{name}.{info.name}" == "kerneltools.backend":
            continue
        yield f"{name}.{info.name}"
        if info.ispkg:
            yield from public_modules(f"{name}.{info.name}", f"{path}/{info.name}")


def main():
    modules = ["kerneltools", *public_modules("kerneltools", kerneltools.__path__[0])]
    names = {}
    for module in modules:
        mod = importlib.import_module(module)
        names[module] = sorted(set(mod.__all__) | set(EXTRA.get(module, ())))
    names["kerneltools"] = sorted(
        set(names["kerneltools"]) | set(names["kerneltools.estimators"]))
    holders = {}
    for module, public in names.items():
        mod = importlib.import_module(module)
        for name in public:
            obj = getattr(mod, name)
            if isinstance(obj, (type, types.FunctionType, types.ModuleType)):
                holders.setdefault(id(obj), []).append(f"{module}:{name}")
    groups = sorted(sorted(g) for g in holders.values() if len(g) > 1)
    print("PUBLIC: dict[str, list[str]] = {")
    for module, public in names.items():
        print(f'    "{module}": [')
        print(_strings(public, 8))
        print("    ],")
    print("}")
    print("SAME_OBJECT: list[list[str]] = [")
    for group in groups:
        one = "    [" + ", ".join(f'"{x}"' for x in group) + "],"
        print(one if len(one) <= 88 else "\n".join(
            ["    [", *(f'        "{x}",' for x in group), "    ],"]))
    print("]")


def _strings(items, indent):
    """Quoted names, filled to 88 columns."""
    text = ", ".join(f'"{x}"' for x in items) + ","
    return textwrap.fill(text, 88 - indent, initial_indent=" " * indent,
                         subsequent_indent=" " * indent, break_long_words=False,
                         break_on_hyphens=False)


if __name__ == "__main__":
    main()
