"""The reduction methods of ``LazyTensor`` (NumPy and torch), made from the registry.

Each method name of :data:`kerneltools.backend.reductions.REDUCTIONS`
(``Reduction.methods``) becomes one method. Its signature follows from the
reductions that share the name:

* a K-reduction: ``m(K, axis=None, dim=None, backend=None, **options)``;
* only a 2-formula one: ``m(weight, axis=None, ...)`` (the weight is needed);
* a 1- and a 2-formula one: ``m(axis=None, dim=None, weight=None, ...)``,
  ``weight=`` choosing the second;
* with a ``feature_op``: ``m(axis=-1, ...)``, where ``axis=-1`` applies that
  operation over the features instead (``sum(-1)``);
* otherwise ``m(axis=None, dim=None, backend=None, **options)``.

Each method ``m`` (the first name of a reduction) also gets pykeops' alias
``m_reduction`` (``sum_reduction``, ``Kmin_argKmin_reduction``, ...): the same
method, always a reduction (``sum_reduction`` has no feature-axis form).

The methods take pykeops' numbering of the axes: after the batch axes
(``len(self.batch)`` (over i) or ``len(self.batch) + 1`` (over j); the
feature axis comes next). They call ``self._reduce(name, axis, weight=, K=,
backend=, **options)`` with ``axis`` 0 (over i) or 1 (over j), and
``self._apply(op)``, which both LazyTensor classes provide.
"""

from __future__ import annotations

from typing import Callable

from ._args import alias, check_axis, is_int
from ..backend import _ops
from ..backend.reductions import Reduction, method_variants

#: pykeops' feature-axis forms (``x.min(-1)``, the default axis) of the
#: reductions without a ``feature_op``: composites of the core's operations.
FEATURE_COMPOSITES = {"min": _ops.min_feat, "max": _ops.max_feat,
                      "argmin": _ops.argmin_feat, "argmax": _ops.argmax_feat}

__all__ = ["reduction_methods", "unary_method"]


def reduction_methods() -> dict[str, Callable]:
    """{method name: function} for every method name of the registry, and
    pykeops' ``<method>_reduction`` alias of each reduction's first name."""
    out = {}
    for m, variants in method_variants().items():
        out[m] = _method(m, variants)
        if any(red.methods[0] == m for red in variants.values()):
            out[f"{m}_reduction"] = _method(f"{m}_reduction", variants, feature=False)
    return out


def unary_method(op) -> Callable:
    """The method ``op.method`` of the unary element-wise operation ``op`` (an
    ``OPS`` entry of the operations' registry), with its docstring."""
    def method(self):
        return self._apply(op.name)

    method.__name__ = op.method
    method.__doc__ = (f"Element-wise {op.doc}.\n\nReturns\n-------\nLazyTensor\n"
                      f"    The formula ``{op.method}(self)``, of the same "
                      "dimension.\n")
    return method


def _method(method: str, variants: dict[int, Reduction], feature: bool = True) -> Callable:
    one, two = variants.get(1), variants.get(2)
    red = one or two
    if red.uses_k:
        def fn(self, K, axis=None, dim=None, backend=None, **options):
            return self._reduce(red.name, _axis(self, axis, dim), K=K, backend=backend,
                                **options)
    elif one is None:
        def fn(self, weight, axis=None, dim=None, backend=None, **options):
            return self._reduce(two.name, _axis(self, axis, dim), weight=weight,
                                backend=backend, **options)
    elif two is not None:
        def fn(self, axis=None, dim=None, weight=None, backend=None, other=None,
               **options):
            if other is not None:  # pykeops' name of the weight
                if weight is not None:
                    raise TypeError("give 'weight' or 'other' (its alias), not both")
                weight = other
            name = one.name if weight is None else two.name
            return self._reduce(name, _axis(self, axis, dim), weight=weight,
                                backend=backend, **options)
    elif (one.feature_op is not None or method in FEATURE_COMPOSITES) and feature:
        def fn(self, axis=-1, dim=None, backend=None, **options):
            axis, nbatch = alias(axis, dim), len(self.batch)
            if is_int(axis) and int(axis) in (-1, nbatch + 2):
                if one.feature_op is None:
                    return self._compose(FEATURE_COMPOSITES[method])
                return self._apply(one.feature_op)
            return self._reduce(one.name, check_axis(axis, nbatch), backend=backend,
                                **options)
    else:
        def fn(self, axis=None, dim=None, backend=None, **options):
            return self._reduce(one.name, _axis(self, axis, dim), backend=backend,
                                **options)
    fn.__name__ = method
    fn.__doc__ = _doc(one, two) + _sections(fn, feature and one is not None and (
        one.feature_op is not None or method in FEATURE_COMPOSITES))
    return fn


#: The Parameters entries of the generated methods, by argument name.
PARAMETERS = {
    "K": ("K : int", "The number of values kept per row (the K of Kmin, argKmin)."),
    "weight": ("weight : LazyTensor or None", "The second formula: the weighted "
               "form of the reduction."),
    "axis": ("axis : int, optional", "The axis reduced: 0 (over i) or 1 (over "
             "j), numbered after the batch axes."),
    "dim": ("dim : int, optional", "The pykeops name of ``axis``."),
    "backend": ("backend : str, optional", "The backend that computes the "
                "reduction (``None``: the formula's own)."),
    "other": ("other : LazyTensor, optional", "The pykeops name of ``weight``."),
    "options": ("**options", "The pykeops keywords: ``call=False`` for a callable "
                "deferred reduction, ``out=`` an array to write into, "
                "``keepdim=True``, ``ranges=`` (block-sparse)."),
}


def _sections(fn: Callable, feature: bool) -> str:
    """The Parameters and Returns sections of a generated method ``fn``."""
    import inspect

    lines = ["", "", "Parameters", "----------"]
    for name in list(inspect.signature(fn).parameters)[1:]:
        head, text = PARAMETERS[name]
        if name == "axis" and feature:
            text += " ``axis=-1`` (the default) reduces over the features instead."
        lines += [head, f"    {text}"]
    lines += ["", "Returns", "-------", "ndarray or Tensor or LazyTensor",
              "    The reduced values, an array of the inputs' library, (N, E) "
              "over j or (M, E) over i; a LazyTensor over the features "
              "(``axis=-1``) or a deferred reduction with ``call=False``.", ""]
    return "\n".join(lines)


def _axis(t, axis, dim) -> int:
    """0 (over i) or 1 (over j) from the user's ``axis`` / ``dim``, numbered
    after ``t``'s batch axes."""
    return check_axis(alias(axis, dim), len(t.batch))


def _doc(one: Reduction | None, two: Reduction | None) -> str:
    red = one or two
    lines = [f"``{red.doc}``, reduced over i (``axis=0``) or j (``axis=1``); with B "
             "batch axes, ``axis=B`` or ``B + 1``."]
    if one is not None and (one.feature_op is not None
                            or one.methods[0] in FEATURE_COMPOSITES):
        lines[0] = (f"``{one.doc}`` over j (``axis=1``) or i (``axis=0``); "
                    f"``axis=-1``: over the features, symbolically.")
    if one is not None and two is not None:
        lines.append(f"With ``weight``: ``{two.doc}``.")
    if red.uses_k:
        lines.append("Outputs (N, K, E), or (N, K) for a scalar formula.")
    if any(red.int_outputs):
        lines.append("Indices are int64; the first one on ties.")
    lines.append(f"The {' / '.join(r.name for r in (one, two) if r)} reduction of "
                 "``kerneltools.backend.reductions``.")
    return "\n\n".join(lines)
