"""numpydoc Parameters and Returns sections for ``LazyTensor``'s methods.

Most methods of the class build a formula and return it (a LazyTensor: nothing
is computed until a reduction). :func:`sections` writes their sections from one
template: each parameter as ``name="type: Description."``, and the Returns
entry, the formula unless told otherwise. The hand-written methods get theirs
from two tables, :data:`METHODS` and :data:`COMPLEX_METHODS`, which
:func:`document` appends once the classes are built.
"""

from __future__ import annotations

import inspect

__all__ = ["COMPLEX_METHODS", "FORMULA", "METHODS", "document", "sections"]

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


# -- the hand-written methods -------------------------------------------------
# Their docstrings say what they do; the tables add the sections, as
# ``name: (returns, {parameter: spec})``.

_BACKEND = ("str, optional: The backend (``None``: the formula's, else the "
            "configured one).")
_OPTIONS = ("dict: The reductions' keywords (``ranges=``, ``dtype_acc=``, "
            "``sum_scheme=``, ...).")
_RANGES = ("BlockSparsity, tuple or None: The blocks to visit: a "
           ":class:`~kerneltools.ranges.BlockSparsity` or KeOps' 6-tuple "
           "(``None``: every block).")
_OTHER = {"o": "LazyTensor, array_like or float: The other operand."}
_COMPLEX = "ComplexLazyTensor: The complex formula (symbolic: nothing is computed)."
_MAX_ELEMENTS = {"max_elements": "int, default=2**28: The most values allowed "
                 "(N M D); more raise ``MemoryError``."}

#: The sections of :class:`kerneltools.LazyTensor`'s hand-written methods.
METHODS = {
    "eq": ("LazyTensor: The formula, 1 where ``self == o`` and 0 elsewhere.", _OTHER),
    "ne": ("LazyTensor: The formula, 1 where ``self != o`` and 0 elsewhere.", _OTHER),
    "t": ("LazyTensor: The formula with i and j swapped (and its ranges "
          "transposed).", {}),
    "grad": ("LazyTensor: The gradient formula, of ``v``'s dimension (symbolic).", {
        "v": "LazyTensor: The variable, a LazyTensor made from an array or a float.",
        "gradin": "LazyTensor, array_like or float: The vector the adjoint is "
                  "applied to, of the formula's dimension."}),
    "to_dense": ("ndarray of shape (N, M, D): The formula's values on every pair.",
                 _MAX_ELEMENTS),
    "with_ranges": ("LazyTensor: The same formula, carrying ``ranges``.",
                    {"ranges": _RANGES}),
    "matvec": ("ndarray: ``K @ v``, of shape (N,) (or (N, E)).", {
        "v": "array_like of shape (M,) or (M, E): The vector."}),
    "rmatvec": ("ndarray: ``K.T @ v``, of shape (M,) (or (M, E)).", {
        "v": "array_like of shape (N,) or (N, E): The vector."}),
    "matmul": ("ndarray: ``K @ b``, of shape (N,), (N, E) or (B..., N, E).", {
        "b": "array_like: The right operand, of shape (M,), (M, E) or batched "
             "(B..., M, E); a complex one gives a complex product.",
        "backend": _BACKEND, "**options": _OPTIONS}),
    "solve": ("ndarray: The solution ``a``, shaped like ``b`` (a "
              "``DeferredSolve`` when deferred).", {
        "b": "array_like or LazyTensor: The right-hand side, (N,), (N, E), "
             "batched (B..., N, E), or an i- or j-variable.",
        "alpha": "float, default=1e-10: The ridge ``alpha`` added to the diagonal.",
        "tol": "float, default=1e-6: The relative residual ``|r| / |b|`` that "
               "stops the iterations.",
        "max_iter": "int, optional: The most iterations (``None``: 10 n + 100, n "
                    "the rows of the system).",
        "backend": _BACKEND,
        "callback": "callable, optional: Called with the iterate after each "
                    "iteration.",
        "var": "LazyTensor, optional: The symbolic variable the formula is "
               "linear in (``None``: the system ``K + alpha I``).",
        "call": "bool, default=True: Whether to solve now (``False``: a "
                "``DeferredSolve``).",
        "**options": "dict: The keywords of each product ``K x`` (``dtype_acc=``, "
                     "``sum_scheme=``, ``ranges=``, ...)."}),
    "vjp": ("ndarray: The gradient, shaped like ``wrt``'s data: (N, D), (M, D) "
            "or (D,).", {
        "wrt": "LazyTensor: The variable (a LazyTensor made from an array).",
        "gradout": "array_like: The weights of the reduction's output, of its shape.",
        "reduction": "str, default='Sum': The reduction's name (``'Sum'``, "
                     "``'LogSumExp'``, ``'SumSoftMaxWeight'``, ``'Min'``, "
                     "``'Max'``, ``'KMin'``, ...).",
        "axis": "int, default=1: The index reduced (0: i, 1: j).",
        "weight": "LazyTensor or array_like, optional: The weights of "
                  "``SumSoftMaxWeight``.",
        "K": "int, default=1: The number of smallest values of ``KMin``.",
        "backend": _BACKEND,
        "ranges": "BlockSparsity or tuple, optional: The blocks to visit "
                  "(``None``: the formula's own ranges)."}),
    "real2complex": (_COMPLEX, {}),
    "imag2complex": (_COMPLEX, {}),
    "exp1j": (_COMPLEX, {}),
}

#: The sections of :class:`kerneltools.lazy.ComplexLazyTensor`'s own methods.
COMPLEX_METHODS = {
    "from_planar": (_COMPLEX, {
        "t": "LazyTensor: The real formula, of even dimension (the real parts, "
             "then the imaginary parts)."}),
    "planar": ("LazyTensor: The real formula, of dimension 2D (the real parts, "
               "then the imaginary parts).", {}),
    "angle": ("LazyTensor: The real formula of the arguments, of dimension D.", {}),
    "conj": (_COMPLEX, {}),
    "t": ("ComplexLazyTensor: The formula with i and j swapped (and its ranges "
          "transposed).", {}),
    "with_ranges": ("ComplexLazyTensor: The same formula, carrying ``ranges``.",
                    {"ranges": _RANGES}),
    "to_dense": ("ndarray of shape (N, M, D): The formula's complex values on every "
                 "pair.", _MAX_ELEMENTS),
    "matmul": ("ndarray: The complex ``K @ b``, of shape (N,) or (N, E).", {
        "b": "array_like: The right operand, real or complex, of shape (M,) or "
             "(M, E).",
        "backend": _BACKEND, "**options": _OPTIONS}),
}


def document(cls: type, table: dict) -> None:
    """Append the sections of ``table`` to the docstrings of the methods that
    ``cls`` defines (the parameters in the order of the signature; one the
    table lacks stays undocumented, which the docstring report counts)."""
    for name, (returns, params) in table.items():
        fn = getattr(vars(cls)[name], "__func__", vars(cls)[name])
        if "\nReturns\n" in (fn.__doc__ or ""):
            continue
        sections(returns, **{n: params[n] for n in _names(fn) if n in params})(fn)


def _names(fn) -> list[str]:
    """The parameters of ``fn`` as numpydoc names them (``*args``, ``**kw``)."""
    star = {inspect.Parameter.VAR_POSITIONAL: "*", inspect.Parameter.VAR_KEYWORD: "**"}
    return [star.get(p.kind, "") + p.name for p in
            inspect.signature(fn).parameters.values() if p.name not in ("self", "cls")]
