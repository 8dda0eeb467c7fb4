"""pykeops' dtype rule for the drop-in modules (issue 21).

pykeops computes a formula in one dtype: combining LazyTensors of two dtypes
raises (``Incompatible values for attribute _dtype``), and ``Genred`` on
arrays of two dtypes reads them as the first one's (wrong numbers, no
error). ``kerneltools.LazyTensor`` promotes as NumPy instead (DESIGN.md).
The LazyTensors of ``kerneltools.keops.numpy`` / ``.torch`` follow pykeops:
a formula whose arrays have two dtypes is a ValueError, when it is built and
when it is reduced; ``Genred`` and ``KernelSolve`` refuse arguments of two
dtypes (:func:`check_arguments`). As in pykeops, Python floats, NumPy float
scalars and lists of numbers have no dtype of their own: they take the
formula's.
"""

from __future__ import annotations

import numbers

import numpy as np

from .. import lazy as _lazy
from ..lazy._symbolic import Binding, bindings_of, from_parts, lift, new_var

__all__ = ["LazyTensor", "OneDtype", "Pm", "Vi", "Vj", "check_arguments", "check_formula",
           "leaf_functions", "weak"]

_FIX = ("cast the arrays to one dtype (x.astype(np.float32), t.float(), ...), or use "
        "kerneltools.LazyTensor, which promotes as NumPy")


def _strong_dtypes(*parts) -> dict:
    """{dtype name: True} of the typed data of the LazyTensors ``parts``."""
    out = {}
    for p in parts:
        p = getattr(p, "_lt", p)
        if not hasattr(p, "_bindings"):
            continue
        for b in bindings_of(p).values():
            if not b.weak and b.array is not None:
                out[str(b.array.dtype)] = True
    return out


def check_formula(*parts) -> None:
    """ValueError if the data of the LazyTensors ``parts`` have several dtypes."""
    dtypes = _strong_dtypes(*parts)
    if len(dtypes) > 1:
        raise ValueError(f"this formula combines data of dtypes {', '.join(sorted(dtypes))}: "
                         "pykeops' LazyTensor computes in one dtype and does not promote; "
                         + _FIX)


def check_arguments(who: str, arrays, names) -> None:
    """ValueError naming two arguments of ``who`` (Genred, KernelSolve) that
    have different dtypes; ``names[k]`` names argument k."""
    if not arrays:
        return
    first = arrays[0].dtype
    for k, a in enumerate(arrays):
        if a.dtype != first:  # dtype objects compare; their names only for the message
            raise ValueError(
                f"{who}: argument 0 ({names[0]}) is {first} but argument {k} "
                f"({names[k]}) is {a.dtype}: pykeops reads every argument in one dtype "
                f"(given two, it computes wrong numbers); {_FIX}")


def weak(x):
    """``x`` as pykeops reads an untyped value: a NumPy float scalar as a
    Python float, a list of numbers as a parameter that takes the formula's
    dtype; other values unchanged."""
    if isinstance(x, np.floating) and np.ndim(x) == 0:
        return float(x)
    if isinstance(x, list) and x and all(isinstance(v, numbers.Real) for v in x):
        node = new_var("p", len(x))
        return from_parts(LazyTensor, node, {node: Binding(np.asarray(x, float), True)},
                          None, None)
    return x


class OneDtype:
    """The checks of pykeops' dtype rule, for a LazyTensor class of either
    binding (a mixin, before the class): formulas composed, reduced or
    solved over data of two dtypes are a ValueError."""

    def _compose(self, fn, *others):
        out = super()._compose(fn, *map(weak, others))
        check_formula(out)
        return out

    def _reduce(self, reduction, axis, *, weight=None, **options):
        check_formula(self, weight)
        return super()._reduce(reduction, axis, weight=weight, **options)

    def solve(self, b, *args, **kwargs):
        check_formula(self, b)
        mine = _strong_dtypes(self)
        dtype = str(getattr(b, "dtype", "")).replace("torch.", "")
        if dtype and mine and dtype not in mine:
            raise ValueError(f"solve: 'b' is {dtype} but the formula's data are "
                             f"{', '.join(mine)}: pykeops solves in one dtype; {_FIX}")
        return super().solve(b, *args, **kwargs)


class LazyTensor(OneDtype, _lazy.LazyTensor):
    """``kerneltools.LazyTensor`` with pykeops' dtype rule (see the module
    docstring): everything else is the same class's."""

    def __init__(self, x, axis: int | None = None):
        super().__init__(weak(x), axis)

    @classmethod
    def _lift(cls, x):
        return lift(cls, weak(x))

    def _apply(self, name, *others, attrs=()):
        out = super()._apply(name, *map(weak, others), attrs=attrs)
        check_formula(out)
        return out


def leaf_functions(cls, binding) -> tuple:
    """``(Vi, Vj, Pm)`` making LazyTensors of ``cls`` (pykeops' dtype rule)
    from those of the module ``binding`` (``kerneltools`` or
    ``kerneltools.torch``)."""
    def make(name):
        fn = getattr(binding, name)

        def leaf(x, dim: int | None = None):
            return cls(fn(x, dim))

        leaf.__name__ = name
        summary, _, rest = (fn.__doc__ or "").partition("\n\n")
        leaf.__doc__ = (f"{summary}\n\nWith pykeops' dtype rule (kerneltools.keops). "
                        f"{rest}")
        return leaf

    return make("Vi"), make("Vj"), make("Pm")


Vi, Vj, Pm = leaf_functions(LazyTensor, _lazy)
