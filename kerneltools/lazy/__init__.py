"""LazyTensor: the user-facing symbolic array.

A LazyTensor stands for the virtual ``(N, M, D)`` array ``F(p, x_i, y_j)``;
nothing is computed until a reduction over ``i`` (``axis=0``) or ``j``
(``axis=1``) is asked for, and even then the ``N x M`` array is never stored.
The names and shapes follow pykeops, so code written for it mostly runs
unchanged::

    >>> import numpy as np, kerneltools as kt
    >>> x, y, b = np.random.rand(100, 3), np.random.rand(200, 3), np.random.rand(200, 1)
    >>> x_i, y_j = kt.LazyTensor(x[:, None, :]), kt.LazyTensor(y[None, :, :])
    >>> K_ij = (-((x_i - y_j) ** 2).sum(-1) / 2).exp()
    >>> a = K_ij @ b                      # (100, 1): sum_j K_ij b_j
    >>> a.shape
    (100, 1)

Errors in building a formula (mismatched sizes or dimensions, non-numeric
data) are raised when the expression is built, naming the operands' shapes.

Here: LazyTensor and its helpers; :mod:`._symbolic` is the contract shared with
:mod:`kerneltools.torch`. It may import the engine, config and dask, no more.
"""

from __future__ import annotations

import numbers

import numpy as np

from . import _complex, _docs, _reducing, _sections, _solve as _lazy_solve
from ._keops_options import finish, take_output_options
from ._leaves import batched as _batched, check_array as _check_array
from ._leaves import leaf as _leaf, symbolic as _symbolic
from ._keops import KeopsMethods
from ._math import MathMethods
from ._deferred import DeferredReduction, DeferredSolve
from ._methods import reduction_methods, unary_method
from ._symbolic import (MATMUL_BLOCK, Binding, apply, batch_of, check_ranges, compose,
                        bind_symbols, dtype_of, from_parts, lift, merge, merge_ranges,
                        new_var, ranges_of, symbols_of)
from ..backend import _ops
from ..backend._autodiff import grad as _grad
from ..backend.cpu._gemm import matmul_block
from ..backend._dispatch import resolve_backend
from ..backend._ir import Node, index, topo_order, var
from ..backend._ops import OPS, substitute
from ..backend._ranges import transpose_ranges
from ..backend.reductions import REDUCTIONS

__all__ = ["ComplexLazyTensor", "LazyTensor", "Pm", "Vi", "Vj", "maximum", "minimum"]


class LazyTensor(MathMethods, KeopsMethods):
    """A symbolic ``(N, M, D)`` array ``F(p, x_i, y_j)``, reduced without storage.

    Parameters
    ----------
    x : array-like or number
        ``(N, 1, D)``: a variable indexed by i; ``(1, M, D)``: indexed by j;
        ``(D,)``, ``(1, 1, D)`` or a float: a parameter; an int: an exact
        constant; a 2-D ``(N, D)`` array with ``axis=0`` (i) or ``axis=1`` (j).
    axis : {0, 1}, optional
        Only for 2-D arrays.

    Notes
    -----
    Batches: leading axes (``(B, N, 1, D)``, ``(B, 1, M, D)``, ``(B, 1, 1, D)``, or
    ``Vi``/``Vj`` of ``(B, N, D)``) are B independent problems reduced in one call;
    axes of size 1, or none, broadcast. Reductions return ``(B, N, E)``; as in pykeops,
    ``axis`` counts after the batch axes: with one, ``axis=1`` reduces over i, 2 over j.
    """

    __array_ufunc__ = None  # NumPy arrays on the left defer to our operators
    is_complex = False  # ComplexLazyTensor (kerneltools.lazy._complex): True

    def __new__(cls, x=None, axis=None):
        if not issubclass(cls, ComplexLazyTensor) and _complex.is_complex_data(x):
            obj = object.__new__(ComplexLazyTensor)  # complex data
            if not issubclass(ComplexLazyTensor, cls):  # a subclass's call skips __init__
                obj.__init__(x, axis)
            return obj
        return object.__new__(cls)

    def __init__(self, x, axis: int | None = None):
        if isinstance(x, LazyTensor):
            formula, bindings, ni, nj = x.formula, x._bindings, x.ni, x.nj
            if ranges_of(x) is not None:
                self._ranges = ranges_of(x)
        else:
            formula, bindings, ni, nj = _leaf(x, axis)
        self.formula: Node = formula
        self._bindings: dict = bindings
        self.ni: int | None = ni
        self.nj: int | None = nj

    @classmethod
    def _new(cls, formula, bindings, ni, nj) -> LazyTensor:
        return from_parts(cls, formula, bindings, ni, nj)

    # -- description (dim, ndim, nbatchdims: kerneltools.lazy._keops) ----------
    @property
    def batch(self) -> tuple:
        """The batch axes (broadcast over the variables'); () without any."""
        return batch_of(self._bindings.values())

    @property
    def shape(self) -> tuple:
        """``(N, M, D)``, with 1 for an index that the formula does not use;
        ``(B..., N, M, D)`` with batch axes. As in pykeops, a scalar formula
        (D = 1) has shape ``(N, M)``: a matrix, which with :meth:`matvec`
        makes ``scipy.sparse.linalg.aslinearoperator(K)`` work."""
        s = self.batch + (self.ni or 1, self.nj or 1)
        return s if self.formula.dim == 1 else s + (self.formula.dim,)

    @property
    def dtype(self) -> np.dtype:
        """The dtype that reductions compute in (NumPy promotion of the inputs)."""
        return dtype_of(self._bindings)

    @property
    def ranges(self):
        """The block-sparsity that reductions use when not given ``ranges=``
        (None: dense); pykeops' attribute. Set it (``K.ranges = r``) or use
        :meth:`with_ranges`; formulas built from ``K`` keep it."""
        return ranges_of(self)

    @ranges.setter
    def ranges(self, value):
        value = check_ranges(value)
        if value is None:
            self.__dict__.pop("_ranges", None)
        else:
            self._ranges = value

    @property
    def backend(self):
        """The backend that reductions use when not given ``backend=`` (None:
        the configured one); pykeops' attribute, set with ``K.backend = "CPU"``.
        Formulas built from ``K`` keep it."""
        return self.__dict__.get("_backend")

    @backend.setter
    def backend(self, value):
        if value is None:
            self.__dict__.pop("_backend", None)
        else:
            _reducing.check_backend(value)
            self._backend = value

    def __repr__(self) -> str:
        return f"LazyTensor(shape={self.shape}, formula={self.formula})"

    def __bool__(self):
        raise TypeError(
            "the truth value of a LazyTensor is undefined; comparisons build 0/1 formulas"
        )

    # -- building (see kerneltools.lazy._symbolic) ---------------------------------
    @classmethod
    def _lift(cls, x) -> LazyTensor:
        return lift(cls, x)

    _merge = staticmethod(merge)  # (bindings, ni, nj) of operands; tests use it

    def _apply(self, name: str, *others, attrs=()) -> LazyTensor:
        if any(map(_complex.is_complex_data, others)):  # real with complex: complex
            return ComplexLazyTensor(self)._apply(name, *others, attrs=attrs)
        return apply(self, name, *others, attrs=attrs)

    def _compose(self, fn, *others) -> LazyTensor:
        """Apply a composite (a function of formula nodes) with error context."""
        if any(map(_complex.is_complex_data, others)):
            return ComplexLazyTensor(self)._compose(fn, *others)  # TypeError
        return compose(self, fn, *others)

    # arithmetic
    def __add__(self, o):
        return self._apply("Add", o)

    def __radd__(self, o):
        return self._lift(o)._apply("Add", self)

    def __sub__(self, o):
        return self._apply("Sub", o)

    def __rsub__(self, o):
        return self._lift(o)._apply("Sub", self)

    def __mul__(self, o):
        return self._apply("Mul", o)

    def __rmul__(self, o):
        return self._lift(o)._apply("Mul", self)

    def __truediv__(self, o):
        return self._apply("Div", o)

    def __rtruediv__(self, o):
        return self._lift(o)._apply("Div", self)

    def __neg__(self):
        return self._apply("Neg")

    def __pos__(self):
        return self

    def __abs__(self):
        return self._apply("Abs")

    def __pow__(self, p):
        if isinstance(p, numbers.Integral) and not isinstance(p, bool):
            return self._apply("Pow", attrs=(int(p),))
        if isinstance(p, float) and p == 0.5:
            return self._apply("Sqrt")
        if isinstance(p, float) and p == -0.5:
            return self._apply("Rsqrt")
        if isinstance(p, float) and p.is_integer():
            return self._apply("Pow", attrs=(int(p),))
        return self._compose(_ops.powf, p)

    def __rpow__(self, base):
        return self._lift(base)._compose(_ops.powf, self)

    def __lt__(self, o):
        return self._apply("Less", o)

    def __le__(self, o):
        return self._apply("LessEqual", o)

    def __gt__(self, o):
        return self._apply("Greater", o)

    def __ge__(self, o):
        return self._apply("GreaterEqual", o)

    def __eq__(self, o):
        """``self == o``: the 0/1 formula of equality, as pykeops (not a bool)."""
        if not _operand(o):
            return NotImplemented  # None, strings, ...: Python's identity test
        return self._apply("Equal", o)

    def __ne__(self, o):
        """``self != o``: the 0/1 formula of inequality."""
        if not _operand(o):
            return NotImplemented
        return self._apply("NotEqual", o)

    # ``==`` builds a formula, so hashing stays by identity (as before).
    __hash__ = object.__hash__

    def eq(self, o) -> LazyTensor:
        """1 where ``self == o``, else 0 (the same as ``self == o``)."""
        return self._apply("Equal", o)

    def ne(self, o) -> LazyTensor:
        """1 where ``self != o``, else 0 (the same as ``self != o``)."""
        return self._apply("NotEqual", o)

    def __or__(self, o):
        """``(a | b)``: dot product over the feature axis."""
        return self._compose(_ops.dot, o)

    def __ror__(self, o):
        return self._lift(o)._compose(_ops.dot, self)

    def t(self) -> LazyTensor:
        """Swap the roles of i and j."""
        swap = {"i": "j", "j": "i"}
        mapping, bindings = {}, {}
        for node in topo_order([self.formula]):
            if node.op == "Var":
                new = var(swap.get(node.cat, node.cat), node.attrs[1], node.dim)
                mapping[node] = new
                bindings[new] = self._bindings[node]
            elif node.op == "Index":
                mapping[node] = index(swap[node.cat])
        (f,) = substitute([self.formula], mapping)
        return from_parts(type(self), f, bindings, self.nj, self.ni,
                          ranges=transpose_ranges(ranges_of(self)))

    @property
    def T(self) -> LazyTensor:
        return self.t()

    # -- gradients ---------------------------------------------------------
    def grad(self, v: LazyTensor, gradin) -> LazyTensor:
        """Symbolic adjoint of the differential of ``self`` with respect to ``v``.

        ``v`` must be a variable (a LazyTensor made directly from an array or a
        float); ``gradin`` has the dimension of ``self``. The result is a
        formula of ``v``'s dimension, to be reduced like any other.
        """
        if not isinstance(v, LazyTensor) or v.formula.op != "Var":
            raise TypeError(
                "grad: 'v' must be a variable LazyTensor (made from an array), "
                f"got {v!r}"
            )
        if v.is_complex:  # gradients of complex formulas: through kerneltools.torch
            return ComplexLazyTensor(self).grad(v, gradin)  # NotImplementedError
        g = self._lift(gradin)
        if g.dim != self.dim:
            raise ValueError(
                f"grad: 'gradin' has dimension {g.dim}; it must match the formula's "
                f"dimension {self.dim}"
            )
        bindings, ni, nj = merge([self, v, g])
        return from_parts(type(self), _grad(self.formula, v.formula, g.formula), bindings,
                          ni, nj, ranges=merge_ranges([self, v, g]))

    # -- reductions --------------------------------------------------------
    def _plan(self, reduction: str, axis, weight=None, K=1, backend=None):
        return _reducing.plan(self, reduction, axis, weight, K, backend)

    def to_dense(self, *, max_elements: int = 1 << 28) -> np.ndarray:
        """The formula's values on every pair, as a dense (N, M, D) NumPy array.

        This is the ``N x M`` matrix that reductions never form: meant for small
        problems, exact dense solvers and debugging. Evaluated with the NumPy
        reference evaluator, block of rows by block of rows. Raises
        ``MemoryError`` above ``max_elements`` values rather than swapping.
        """
        return _reducing.to_dense(self, max_elements)

    def with_ranges(self, ranges) -> LazyTensor:
        """This formula, whose reductions visit only the blocks of ``ranges``.

        ``ranges``: a :class:`kerneltools.ranges.BlockSparsity` (points in any
        order; results in the caller's order) or KeOps' 6-tuple
        ``(ranges_i, slices_i, redranges_j, ranges_j, slices_j, redranges_i)``
        for data sorted by cluster; see :mod:`kerneltools.ranges`. Reductions
        also take ``ranges=`` directly, and ``K.ranges = r`` sets it in place.
        Formulas built from the result keep it (two different ranges in one
        formula are a ValueError); ``t()`` transposes it.
        """
        return from_parts(type(self), self.formula, self._bindings, self.ni, self.nj,
                          ranges=check_ranges(ranges))

    def _reduce(self, reduction, axis, *, weight=None, K=1, backend=None, **options):
        """The reduction ``reduction`` over ``axis`` (0: i, 1: j), with pykeops'
        keywords: ``call=False`` (or symbolic variables) gives a callable
        :class:`~kerneltools.lazy._deferred.DeferredReduction`; ``out=`` an array
        to write the result into; ``keepdim=True`` keeps the reduced axis."""
        _complex.check_weight(reduction, weight)
        call = options.pop("call", True)
        if backend is None:
            backend = self.backend
        if not call or symbols_of(self, weight):
            return DeferredReduction(self, reduction, axis, weight, K, backend, options)
        options, out, keepdim = take_output_options(options)
        res = _reducing.reduce(self, reduction, axis, weight=weight, K=K, backend=backend,
                               **options)
        if out is None and not keepdim:
            return res
        return finish(res, REDUCTIONS[reduction].uses_k, axis, len(self.batch), out,
                      keepdim, lambda o, r: o.__setitem__(Ellipsis, r))

    def _bind_symbols(self, arrays: dict) -> LazyTensor:
        """This formula with its symbolic variables bound to ``arrays``
        ({pykeops index: array})."""
        return bind_symbols(self, arrays, _check_array)

    # sum, logsumexp, min, Kmin, ...: one method per name of the reductions'
    # registry (``Reduction.methods``), installed below the class.

    def matvec(self, v):
        """``K @ v`` (pykeops' alias, for ``scipy.sparse.linalg``)."""
        return self @ v

    def rmatvec(self, v):
        """``K.T @ v`` (pykeops' alias, for ``scipy.sparse.linalg``)."""
        return self.T @ v

    def __matmul__(self, b, **options):
        """``K @ b = sum_j K_ij b_j`` for a scalar formula ``K``; b of shape (M,) or (M, E).

        On the configured backend (:func:`kerneltools.config_context`); use
        :meth:`matmul` to name one. ``K.__matmul__(b, **options)`` takes the
        reductions' keywords, as in pykeops."""
        return self.matmul(b, **options)

    def matmul(self, b, *, backend=None, **options):
        """``K @ b = sum_j K_ij b_j``, on ``backend`` (None: the configured one).

        ``K`` a scalar formula; ``b`` of shape (M,), (M, E) or batched
        (B..., M, E), as ``K @ b``, which is ``K.matmul(b)``.
        """
        if _complex.is_complex_data(b):  # complex b: a complex product
            return ComplexLazyTensor(self).matmul(b, backend=backend, **options)
        if self.dim != 1:
            raise ValueError(f"K @ b needs a scalar formula K, got dimension {self.dim}")
        b_arr = _check_array(b, "the right operand of @")
        if b_arr.ndim >= 3 or self.batch:  # batched: (B..., M, E) or (M, E)
            rows = b_arr.shape[-2] if b_arr.ndim >= 2 else b_arr.shape[0]
            if self.nj is not None and rows != self.nj:
                raise ValueError(
                    f"K @ b: K has shape {self.shape}, so the right operand b must have "
                    f"{self.nj} rows, shape ({self.nj},), ({self.nj}, E) or batched "
                    f"(B..., {self.nj}, E); got {b_arr.shape}"
                )
            bj = Vj(b_arr if b_arr.ndim >= 2 else b_arr[:, None])
            out = (self * bj)._reduce("Sum", 1, backend=backend, **options)
            return out[..., 0] if b_arr.ndim == 1 else out
        if b_arr.ndim not in (1, 2):
            raise ValueError(f"the right operand of @ must be 1-D or 2-D, got shape {b_arr.shape}")
        if self.nj is not None and b_arr.shape[0] != self.nj:
            raise ValueError(
                f"K @ b: K has shape {self.shape}, so the right operand b must have "
                f"{self.nj} rows, shape ({self.nj},) or ({self.nj}, E); got {b_arr.shape}"
            )
        b2 = b_arr.reshape(b_arr.shape[0], -1)
        # the C backend's many-column Sum (dense or block-sparse) takes wider
        # blocks (_cpu_gemm)
        width = matmul_block(self.formula.dim, b2.shape[1], resolve_backend(backend).name,
                             MATMUL_BLOCK, max(4, b2.dtype.itemsize))
        if b2.shape[1] > width or (width > MATMUL_BLOCK and b2.shape[1] != width):
            return self._matmul_blocks(b2, backend, options, width).reshape(
                (-1,) + b_arr.shape[1:])
        # One j-variable per K and column count, reused by every call: the
        # formula K_ij b_j is then the same node each time, and a repeated
        # product (conjugate gradients, say) skips planning on warm calls.
        cache = self.__dict__.setdefault("_matmul_vars", {})
        hit = cache.get(b2.shape[1])
        if hit is None:
            bvar = new_var("j", b2.shape[1])
            hit = cache[b2.shape[1]] = (bvar, _ops.make("Mul", self.formula, bvar))
        bvar, formula = hit
        bindings = dict(self._bindings)
        bindings[bvar] = Binding(b2)
        product = from_parts(type(self), formula, bindings, self.ni, b2.shape[0],
                             ranges=ranges_of(self))
        out = product._reduce("Sum", 1, backend=backend, **options)
        return out[:, 0] if b_arr.ndim == 1 else out

    def _matmul_blocks(self, b2, backend=None, options=None, width=MATMUL_BLOCK):
        """``K @ b`` for many columns, ``width`` at a time: the column
        count is code in a generated kernel, so one kernel (the last block
        zero-padded) serves every width instead of one huge kernel per width."""
        n_cols = b2.shape[1]
        outs = []
        for c0 in range(0, n_cols, width):
            block = b2[:, c0 : c0 + width]
            pad = min(width, -(-block.shape[1] // MATMUL_BLOCK) * MATMUL_BLOCK)
            if block.shape[1] < pad:
                block = np.pad(block, ((0, 0), (0, pad - block.shape[1])))
            outs.append(self.matmul(block, backend=backend, **(options or {})))
        return np.concatenate(outs, axis=1)[:, :n_cols]

    def solve(self, b, alpha: float = 1e-10, *, tol: float = 1e-6, max_iter=None,
              backend=None, callback=None, var=None, call=True, **options):
        """Solve ``(K + alpha I) a = b`` by conjugate gradients (K symmetric, >= 0).

        ``self`` is the scalar kernel formula ``K_ij`` with as many i-points as
        j-points; ``b`` is (N,), (N, E), batched (B..., N, E) or an i-variable
        (a j-variable: the system over j, ``K^T``). Several columns, and batch
        axes of K and b (broadcast), are solved at once. ``var=``, as in
        pykeops: ``self`` is a formula linear in the symbolic variable ``var``
        (``Vj(k, E)``) and the system is ``sum_j F(a)_ij + alpha a_i = b_i``
        (see :mod:`kerneltools.lazy._solve`). Warns with
        ``ConvergenceWarning`` when ``max_iter`` iterations do not reach
        ``|r| <= tol |b|``. Raises ``ValueError`` on NaN or infinity in ``b``
        or in K's points and parameters, and
        :class:`~kerneltools.exceptions.NotPositiveDefiniteError` when
        ``K + alpha I`` is not positive definite (raise ``alpha``). When K's
        points are Dask arrays, each product ``K x`` runs on the cluster and
        the iterates (one value per point) stay in this process: the result
        is NumPy.

        pykeops' keywords: ``call=False`` (or symbolic variables in K or b)
        returns a :class:`~kerneltools.lazy._deferred.DeferredSolve`, called with
        one array per symbolic index; ``options`` (``dtype_acc``,
        ``sum_scheme``, ``ranges``, ...) go to each product ``K x``.
        """
        kwargs = dict(tol=tol, max_iter=max_iter, backend=backend, callback=callback,
                      **options)
        unknown = _lazy_solve.unknown_of(self, var)
        if not call or _lazy_solve.waits_for_data(self, b, unknown):
            return DeferredSolve(self, b, var, alpha, kwargs)
        x, self.n_iter_ = _lazy_solve.solve(self, b, alpha, tol=tol, max_iter=max_iter,
                                            backend=backend, callback=callback, var=var,
                                            options=options)
        return x

    def vjp(self, wrt: LazyTensor, gradout, reduction: str = "Sum", axis: int = 1, *,
            weight=None, K: int = 1, backend=None, ranges=None):
        """Gradient of ``sum(gradout * reduction(self))`` with respect to ``wrt``.

        The vector-Jacobian product of a reduction, computed from symbolic
        gradients: for ``Sum``, ``LogSumExp``, ``SumSoftMaxWeight`` (``weight``
        given), ``Min``, ``Max``, ``KMin`` (through their arg-index). Returns an
        array shaped like ``wrt``'s data: (N, D), (M, D) or (D,). The gradient
        with respect to a variable of the reduced index is a reduction over the
        other index.
        """
        if getattr(wrt, "is_complex", False):  # through kerneltools.torch
            return ComplexLazyTensor(self).grad(wrt, gradout)  # NotImplementedError
        return _reducing.vjp(self, wrt, gradout, reduction, axis, weight=weight, K=K,
                             backend=backend, ranges=ranges)

def _operand(o) -> bool:
    """Whether ``o`` can be an operand of a formula (for ``==`` / ``!=``)."""
    return isinstance(o, (LazyTensor, numbers.Number, np.ndarray, np.generic)) or (
        hasattr(o, "__array__") or hasattr(o, "__cuda_array_interface__"))


def _install_reduction_methods():
    """One method per method name of the reductions' registry (aliases too)."""
    for name, method in reduction_methods().items():
        setattr(LazyTensor, name, method)


def _install_unary_methods():
    """One method per unary element-wise operation of the registry."""
    for op in OPS.values():
        if op.method is None or hasattr(LazyTensor, op.method):
            continue
        setattr(LazyTensor, op.method, unary_method(op))


_install_reduction_methods()
_install_unary_methods()


class ComplexLazyTensor(_complex.ComplexMethods, LazyTensor):
    __doc__ = _complex.ComplexMethods.__doc__


# Complex numbers (issue 21): each class knows the other; real formulas get
# real2complex, imag2complex and exp1j.
LazyTensor._complex_class, ComplexLazyTensor._real = ComplexLazyTensor, LazyTensor
for _name, _fn in _complex.real_methods().items():
    setattr(LazyTensor, _name, _fn)
_sections.document(LazyTensor, _sections.METHODS)
_sections.document(_complex.ComplexMethods, _sections.COMPLEX_METHODS)


def Vi(x, dim: int | None = None) -> LazyTensor:
    if dim is not None:
        return LazyTensor._new(*_symbolic(x, dim, 0, "Vi(ind, dim)"))
    return _indexed("i", x, "Vi: 'x'", "N")


def Vj(x, dim: int | None = None) -> LazyTensor:
    if dim is not None:
        return LazyTensor._new(*_symbolic(x, dim, 1, "Vj(ind, dim)"))
    return _indexed("j", x, "Vj: 'x'", "M")


def _indexed(cat: str, x, what: str, n: str) -> LazyTensor:
    if _complex.is_complex_data(x):  # complex data: planar real data
        a = x if hasattr(x, "real") and hasattr(x, "ndim") else np.asarray(x)
        a = a.reshape(-1, 1) if a.ndim == 1 else a
        return ComplexLazyTensor.from_planar(
            _indexed(cat, _complex.planar(a), what, n))
    a = _check_array(x, what)
    if a.ndim >= 3:
        return LazyTensor._new(*_batched(cat, a, a.shape[:-2], what))
    if a.ndim not in (1, 2):
        raise ValueError(f"{what} must be 1-D ({n},), 2-D ({n}, D) or batched (B, {n}, D), "
                         f"got shape {a.shape}")
    return LazyTensor(a.reshape(a.shape[0], -1), axis=0 if cat == "i" else 1)


def Pm(p, dim: int | None = None) -> LazyTensor:
    if dim is not None:
        return LazyTensor._new(*_symbolic(p, dim, 2, "Pm(ind, dim)"))
    if isinstance(p, numbers.Real) and not isinstance(p, (np.ndarray, np.generic)):
        # A Python number is weakly typed, as in NumPy: it does not turn
        # float32 data into float64.
        return LazyTensor(float(p))
    if _complex.is_complex_data(p):
        return ComplexLazyTensor(p if isinstance(p, numbers.Number) else
                                          np.asarray(p).reshape(-1))
    a = _check_array(p, "Pm: 'p'")
    if a.ndim > 1:
        raise ValueError(f"Pm: 'p' must be a scalar or 1-D, got shape {a.shape}")
    return LazyTensor(a.reshape(-1))


def minimum(a, b) -> LazyTensor:
    return LazyTensor._lift(a)._apply("Minimum", b)


def maximum(a, b) -> LazyTensor:
    return LazyTensor._lift(a)._apply("Maximum", b)


for _f, _doc in ((Vi, _docs.VI), (Vj, _docs.VJ), (Pm, _docs.PM),
                 (minimum, _docs.MINIMUM), (maximum, _docs.MAXIMUM)):
    _f.__doc__ = _doc  # numpydoc text kept in _docs.py (line limit)
LazyTensor.__doc__ = LazyTensor.__doc__.rstrip() + "\n" + _docs.LAZY_TENSOR_EXAMPLES
