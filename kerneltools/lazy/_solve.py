"""``LazyTensor.solve``: conjugate gradients on a reduction (issue 21).

The system is ``sum_r F(u)_or + alpha u_o = b_o``, ``o`` the index of the
right-hand side ``b`` (i for an array, as in pykeops) and ``r`` the other
one, summed over. Two ways to say what ``F(u)`` is, as in pykeops:

* ``K.solve(b)``: K a scalar kernel formula, ``F(u) = K_or u_r`` (the
  product ``K @ u``);
* ``F.solve(b, var=v)``: ``v`` a symbolic variable of F (``Vj(0, E)``,
  ``LazyTensor((0, E, 1))``) of the summed index, F linear in it and of its
  dimension E; ``F(u)`` is F with ``v`` bound to ``u``. Linearity is not
  checked (pykeops does not either): a formula that is not linear in ``v``
  gives a meaningless answer.

Batch axes (K's, ``b``'s ``(B..., n, E)``, broadcast together) are solved
at once: every column of every problem runs its own conjugate-gradient
recurrence, all of them through one (block-diagonal) reduction per
iteration. :class:`LinearSystem` is the operator ``u -> F(u)``, shared by
the NumPy binding's :func:`solve` and the torch binding's implicit
differentiation (``kerneltools.torch._autograd.Solve``).
"""

from __future__ import annotations

import numpy as np

from ._args import check_finite_data, solve_alpha
from ._leaves import check_array
from ._symbolic import Binding, batch_of, bindings_of, from_parts, symbols_of
from ..backend._cg import conjugate_gradient
from ..backend._dask import is_dask_array
from ..backend._ir import topo_order

__all__ = ["LinearSystem", "cg_layout", "rhs_of", "solve", "unknown_of", "waits_for_data"]


def unknown_of(K, var):
    """The variable node of the unknown of ``K.solve(..., var=var)`` (None for
    ``var=None``), checked: a symbolic variable of K, of K's dimension."""
    if var is None:
        return None
    v = getattr(var, "_lt", var)  # the torch binding wraps a NumPy-level one
    node = getattr(v, "formula", None)
    b = bindings_of(v).get(node) if node is not None else None
    if node is None or node.op != "Var" or b is None or b.symbol is None:
        raise TypeError("solve: 'var' must be a symbolic variable (Vi(k, E), Vj(k, E) or "
                        f"LazyTensor((k, E, cat))) of the formula; got {var!r}")
    lt = getattr(K, "_lt", K)
    if node not in topo_order([lt.formula]):
        raise ValueError(f"solve: 'var' (the symbolic variable of index {b.symbol}) is not "
                         "a variable of the formula to solve")
    if node.dim != lt.formula.dim:
        raise ValueError(f"solve: the formula has dimension {lt.formula.dim} but the "
                         f"unknown 'var' has dimension {node.dim}; F(var) = b needs them "
                         "equal")
    return node


def rhs_of(b, cls, unknown):
    """``(data, out_cat)`` of the right-hand side ``b``: an array, or a
    concrete i-variable LazyTensor of ``cls``; the equations are indexed by
    i (j when the unknown ``var`` is an i-variable)."""
    if isinstance(b, cls):
        lt = getattr(b, "_lt", b)
        node = lt.formula
        if node.op != "Var" or node.cat != "i" or bindings_of(lt)[node].array is None:
            raise TypeError("solve: 'b' must be an array or an i-variable LazyTensor "
                            "with data")
        b = b._tensors[node] if hasattr(b, "_tensors") else bindings_of(lt)[node].array
    return b, ("j" if unknown is not None and unknown.cat == "i" else "i")


class LinearSystem:
    """``u -> sum_r F(u)_or`` for ``K.solve``: ``K`` the NumPy-level formula,
    ``unknown`` the node of ``var`` (None: ``F(u) = K u``), ``out_cat`` the
    index of the equations ("i" or "j")."""

    def __init__(self, K, unknown, out_cat: str):
        if unknown is None and K.formula.dim != 1:
            raise ValueError(f"solve needs a scalar formula K, got dimension "
                             f"{K.formula.dim} (or give var=, the unknown of a formula "
                             "linear in it)")
        self.K, self.unknown, self.out_cat = K, unknown, out_cat
        self.op = K if out_cat == "i" or unknown is not None else K.t()
        self.base = {n: b for n, b in bindings_of(K).items() if n != unknown}
        self.batch = batch_of(self.base.values())
        n_o, n_r = (K.ni, K.nj) if out_cat == "i" else (K.nj, K.ni)
        if n_o is not None and n_r is not None and n_o != n_r:
            raise ValueError(f"solve needs a square operator, got shape {K.shape}")
        self.n = n_o if n_o is not None else n_r

    def __call__(self, U, batch: tuple, backend=None, **options):
        """``sum_r F(U)`` for ``U`` (*batch, n, E): an array of the same shape."""
        if self.unknown is None:
            return self.op.matmul(U, backend=backend, **options)
        return self.bound(U, batch)._reduce("Sum", self.axis, backend=backend, **options)

    @property
    def axis(self) -> int:
        """The summed index, as ``_reduce`` numbers it (0: i, 1: j)."""
        return 1 if self.out_cat == "i" else 0

    def bound(self, U, batch: tuple):
        """F (``var=`` mode) with the unknown bound to ``U`` (*batch, n, E)."""
        n = U.shape[-2]
        bindings = dict(self.base)
        bindings[self.unknown] = Binding(U, batch=batch)
        return from_parts(type(self.K), self.K.formula, bindings, n, n)


def solve(K, b, alpha, *, tol, max_iter, backend, callback, var, options):
    """:meth:`kerneltools.LazyTensor.solve` (its data concrete; see the module
    docstring). Returns the solution shaped like ``b``."""
    unknown = unknown_of(K, var)
    b, out_cat = rhs_of(b, type(K), unknown)
    system = LinearSystem(K, unknown, out_cat)
    b_arr = check_array(b, "solve: 'b'")
    n = system.n if system.n is not None else b_arr.shape[-2 if b_arr.ndim > 1 else 0]
    batch_b = tuple(b_arr.shape[:-2])
    if b_arr.ndim == 0 or b_arr.shape[-2 if b_arr.ndim > 1 else 0] != n or (
            b_arr.ndim > 2 and not batch_b) or (b_arr.ndim == 1 and unknown is not None):
        E = K.formula.dim if unknown is not None else "E"
        raise ValueError(f"solve: 'b' must have shape {'' if unknown else f'({n},) or '}"
                         f"({n}, {E}), got {b_arr.shape} (or batched: (B..., {n}, {E}))")
    if unknown is not None and b_arr.shape[-1] != unknown.dim:
        raise ValueError(f"solve: 'b' must have {unknown.dim} column(s), the dimension of "
                         f"'var'; got shape {b_arr.shape}")
    alpha = solve_alpha(alpha)
    check_finite_data(K.formula, system.base, "solve")
    if is_dask_array(b_arr):  # one value per point, like the solution
        b_arr = b_arr.compute()
    try:
        batch = tuple(np.broadcast_shapes(system.batch, batch_b))
    except ValueError:
        raise ValueError(f"solve: the batch axes of K {system.batch} and of 'b' {batch_b} "
                         "do not broadcast") from None
    dtype = np.result_type(K.dtype, b_arr.dtype if b_arr.dtype.kind == "f" else np.float64)
    B = b_arr.reshape(b_arr.shape[:-1] + (-1,)) if b_arr.ndim > 1 else b_arr[:, None]
    B = np.broadcast_to(B, batch + B.shape[-2:]).astype(dtype)
    # CG's layout: one column per problem and column of b for K @ u (columns
    # are independent); one column per problem for var= (F may mix them)
    fold, unfold = cg_layout(batch, B.shape[-2:], per_column=unknown is None)
    flat = unknown is None and not system.batch  # b's batch axes: columns of one K

    def matvec(X):
        U = X if flat else unfold(X)
        out = system(U, () if flat else batch, backend=backend, **options)
        if is_dask_array(out):  # K on Dask arrays: each product is distributed
            out = out.compute()
        return (out if flat else fold(out)) + alpha * X

    x, n_iter = conjugate_gradient(
        matvec, fold(B), tol=tol, max_iter=max_iter, callback=callback,
        eps=np.finfo(dtype).eps, who="solve", b_name="b",
        shift_name=f"'alpha' (now {alpha:g})")
    x = unfold(x)
    return (x[..., 0] if b_arr.ndim == 1 else x), n_iter


def cg_layout(batch: tuple, shape: tuple, per_column: bool):
    """``(fold, unfold)`` between the solution's shape ``batch + shape``
    (``shape = (n, E)``) and conjugate gradients' ``(rows, columns)``:
    ``(n, prod(batch) E)`` with ``per_column`` (each column of each problem
    its own recurrence), else ``(n E, prod(batch))`` (one per problem)."""
    n, E = shape
    if per_column:
        def fold(U):
            return np.moveaxis(U, -2, 0).reshape(n, -1)

        def unfold(X):
            return np.ascontiguousarray(
                np.moveaxis(X.reshape((n,) + batch + (E,)), 0, -2))
    else:
        def fold(U):
            return U.reshape(-1, n * E).T

        def unfold(X):
            return np.ascontiguousarray(X.T.reshape(batch + (n, E)))
    return fold, unfold


def waits_for_data(K, b, unknown) -> bool:
    """Whether a solve must be deferred: K has symbolic variables other than
    the unknown, or ``b`` is one."""
    b_lt = getattr(b, "_lt", b)
    b_symbolic = hasattr(b_lt, "_bindings") and bool(symbols_of(b_lt))
    return b_symbolic or any(n is not unknown for n in symbols_of(K).values())
