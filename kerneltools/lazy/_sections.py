"""numpydoc Parameters and Returns sections for ``LazyTensor``'s formula methods.

Most methods of the class build a formula and return it (a LazyTensor: nothing
is computed until a reduction). :func:`sections` writes their sections from one
template: each parameter as ``name="type: Description."``, and the Returns
entry, the formula unless told otherwise.
"""

from __future__ import annotations

import inspect

__all__ = ["FORMULA", "sections"]

#: The Returns entry of a method that builds a formula.
FORMULA = "LazyTensor: The formula (symbolic: nothing is computed until reduced)."


def _entry(name: str, spec: str) -> list[str]:
    kind, text = spec.split(": ", 1)
    return [f"{name} : {kind}" if name else kind, f"    {text}"]


def sections(returns: str = FORMULA, **params: str):
    """Decorator: append the Parameters (``params``, in order) and the Returns
    (``returns``) sections to the method's docstring."""

    def deco(method):
        fn = getattr(method, "__func__", method)  # a staticmethod's function
        lines = [inspect.cleandoc(fn.__doc__ or ""), ""]
        if params:
            lines += ["Parameters", "----------"]
            for name, spec in params.items():
                lines += _entry(name, spec)
            lines.append("")
        lines += ["Returns", "-------", *_entry("", returns), ""]
        fn.__doc__ = "\n".join(lines)
        return method

    return deco
