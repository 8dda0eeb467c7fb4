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
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from .backend._dask import check_dask_array, is_dask_array
from ._lazy_args import check_axis as _check_axis
from ._lazy_args import check_finite_data, is_int, solve_alpha
from ._lazy_args import int_arg as _int_arg
from ._reduction_methods import reduction_methods
from .backend import _ops
from .backend._autodiff import grad as _grad
from .backend._cg import conjugate_gradient as _cg
from .backend._cuda_backend import is_cupy_array
from .backend._dispatch import check_backend_name, configured_backend, run_plan
from .backend._ir import VAR_KEYS, Node, index, intcst, topo_order, var
from .backend._numpy_backend import evaluate_formula_tile
from .backend._ops import OPS, FormulaError, make, substitute
from .backend._plan import make_plan
from .backend.reductions import REDUCTIONS, check_formulas, resolve

__all__ = ["LazyTensor", "Pm", "Vi", "Vj", "maximum", "minimum"]

#: Keys of new variables, unique across processes (see backend._ir.VarKey).
_keys = VAR_KEYS


@dataclass(frozen=True)
class _Binding:
    array: np.ndarray  # (*batch, n, d) for i- and j-variables, (*batch, d) for parameters
    weak: bool = False  # Python floats: they do not take part in dtype promotion
    batch: tuple = ()  # leading batch axes, reduced independently


class _DaskPlan:
    """A reduction over Dask arrays, validated; run lazily by :mod:`.backend._dask`."""

    def __init__(self, formulas, bindings, ni, nj, reduction, axis, K, dtype):
        self.args = (formulas, bindings, ni, nj, reduction, axis, K, dtype)

    def reduce(self, backend, options):
        from .backend._dask import reduce_lazy

        formulas, bindings, ni, nj, reduction, axis, K, dtype = self.args
        return reduce_lazy(formulas, bindings, ni, nj, reduction, axis, K, dtype,
                           backend, options)


def _check_array(x, what: str) -> np.ndarray:
    if is_dask_array(x):
        a = check_dask_array(x, what)  # Dask arrays stay lazy: Dask in, Dask out
    elif is_cupy_array(x):
        a = x  # CuPy arrays stay on the GPU: CuPy in, CuPy out
    elif hasattr(x, "__cuda_array_interface__"):
        raise TypeError(
            f"{what} is a GPU array of type {type(x).__module__}.{type(x).__name__}; "
            "kerneltools takes CuPy arrays on the GPU (convert with cupy.asarray)"
        )
    else:
        try:
            a = np.asarray(x)
        except Exception as exc:  # ragged lists and the like
            raise TypeError(f"{what} must be a numeric array; {exc}") from None
    if a.dtype.kind == "c":
        raise TypeError(f"{what} has complex dtype {a.dtype}; only real numbers are supported")
    if a.dtype.kind not in "biuf":
        raise TypeError(
            f"{what} must be a numeric array (float32, float64, int or bool); "
            f"got dtype {a.dtype}"
        )
    if a.size == 0:
        raise ValueError(f"{what} is empty (shape {a.shape}); it needs at least one entry")
    return a


def _variable(cat: str, a: np.ndarray) -> tuple[Node, dict]:
    a = a if cat == "p" else a.reshape(a.shape[0], -1)
    dim = a.shape[-1] if a.ndim else 1
    node = var(cat, next(_keys), dim)
    return node, {node: _Binding(a if a.ndim else a.reshape(1))}


def _leaf(x, axis, what="the array given to LazyTensor"):
    """(formula, bindings, ni, nj) of a new leaf."""
    if isinstance(x, (bool, np.bool_)):
        x = int(x)
    if isinstance(x, numbers.Integral) and not isinstance(x, np.ndarray):
        return intcst(int(x)), {}, None, None
    if isinstance(x, float):
        node = var("p", next(_keys), 1)
        return node, {node: _Binding(np.array([x]), weak=True)}, None, None
    if isinstance(x, numbers.Complex) and not isinstance(x, numbers.Real):
        raise TypeError(f"{what} is complex ({x!r}); only real numbers are supported")
    a = _check_array(x, what)
    if a.ndim <= 1:
        if axis is not None:
            raise ValueError(f"{what}: axis is only meaningful for 2-D arrays, got shape {a.shape}")
        node, b = _variable("p", a.reshape(-1))
        return node, b, None, None
    if a.ndim == 2:
        if not is_int(axis) or int(axis) not in (0, 1):
            raise ValueError(
                f"{what} has shape {a.shape}: a 2-D array needs axis=0 (indexed by i) "
                "or axis=1 (indexed by j); or use kt.Vi / kt.Vj"
            )
        cat = "i" if axis == 0 else "j"
        node, b = _variable(cat, a)
        n = a.shape[0]
        return node, b, (n if cat == "i" else None), (n if cat == "j" else None)
    if a.ndim == 3:
        if axis is not None:
            raise ValueError(f"{what}: axis is only meaningful for 2-D arrays, got shape {a.shape}")
        if a.shape[1] == 1 and a.shape[0] != 1:
            node, b = _variable("i", a[:, 0, :])
            return node, b, a.shape[0], None
        if a.shape[0] == 1 and a.shape[1] != 1:
            node, b = _variable("j", a[0, :, :])
            return node, b, None, a.shape[1]
        if a.shape[:2] == (1, 1):
            node, b = _variable("p", a.reshape(-1))
            return node, b, None, None
        raise ValueError(
            f"{what} has shape {a.shape}; expected (N, 1, D) for an i-variable, "
            "(1, M, D) for a j-variable or (1, 1, D) for a parameter"
        )
    if axis is not None:
        raise ValueError(f"{what}: axis is only meaningful for 2-D arrays, got shape {a.shape}")
    batch, (n, m, _) = tuple(a.shape[:-3]), a.shape[-3:]
    if m == 1 and n != 1:
        return _batched("i", a[..., :, 0, :], batch, what)
    if n == 1 and m != 1:
        return _batched("j", a[..., 0, :, :], batch, what)
    if (n, m) == (1, 1):
        return _batched("p", a[..., 0, 0, :], batch, what)
    raise ValueError(
        f"{what} has shape {a.shape}; with batch axes, expected (..., N, 1, D) for "
        "an i-variable, (..., 1, M, D) for a j-variable or (..., 1, 1, D) for a parameter"
    )


def _batched(cat: str, a, batch: tuple, what: str):
    """(formula, bindings, ni, nj) of a variable with leading batch axes:
    ``a`` is (*batch, n, d) for i and j, (*batch, d) for a parameter."""
    if is_dask_array(a):
        raise NotImplementedError(f"{what}: batch axes are not supported on Dask arrays")
    node = var(cat, next(_keys), a.shape[-1])
    n = a.shape[-2] if cat != "p" else None
    return (node, {node: _Binding(a, batch=tuple(int(b) for b in batch))},
            n if cat == "i" else None, n if cat == "j" else None)


class LazyTensor:
    """A symbolic ``(N, M, D)`` array ``F(p, x_i, y_j)``, reduced without storage.

    Parameters
    ----------
    x : array-like or number
        ``(N, 1, D)``: a variable indexed by i; ``(1, M, D)``: indexed by j;
        ``(D,)``, ``(1, 1, D)`` or a float: a parameter; an int: an exact
        constant; a 2-D ``(N, D)`` array with ``axis=0`` (i) or ``axis=1`` (j).
    axis : {0, 1}, optional
        Only for 2-D arrays.

    Batches: leading axes before those, ``(B, N, 1, D)``, ``(B, 1, M, D)``,
    ``(B, 1, 1, D)`` (or ``Vi``/``Vj`` of a ``(B, N, D)`` array), stand for B
    independent problems reduced in one call (block-diagonal); batch axes of
    size 1, or none, broadcast. Reductions then return ``(B, N, E)``.
    """

    __array_ufunc__ = None  # NumPy arrays on the left defer to our operators

    def __init__(self, x, axis: int | None = None):
        if isinstance(x, LazyTensor):
            formula, bindings, ni, nj = x.formula, x._bindings, x.ni, x.nj
        else:
            formula, bindings, ni, nj = _leaf(x, axis)
        self.formula: Node = formula
        self._bindings: dict = bindings
        self.ni: int | None = ni
        self.nj: int | None = nj

    @classmethod
    def _new(cls, formula, bindings, ni, nj) -> LazyTensor:
        out = object.__new__(cls)
        out.formula, out._bindings, out.ni, out.nj = formula, bindings, ni, nj
        return out

    # -- description -------------------------------------------------------
    @property
    def dim(self) -> int:
        """Dimension of the formula's values (the last axis)."""
        return self.formula.dim

    @property
    def batch(self) -> tuple:
        """The batch axes (broadcast over the variables'); () without any."""
        return _batch_of(self._bindings.values())

    @property
    def shape(self) -> tuple:
        """``(N, M, D)``, with 1 for an index that the formula does not use;
        ``(B..., N, M, D)`` with batch axes."""
        return self.batch + (self.ni or 1, self.nj or 1, self.formula.dim)

    @property
    def ndim(self) -> int:
        """``len(shape)``: 3, plus the number of batch axes."""
        return len(self.shape)

    @property
    def dtype(self) -> np.dtype:
        """The dtype that reductions compute in (NumPy promotion of the inputs)."""
        strong = [b.array.dtype for b in self._bindings.values() if not b.weak]
        if not strong:
            return np.dtype(np.float64)
        dt = np.result_type(*strong)
        if dt.kind in "biu":
            return np.dtype(np.float64)
        if dt == np.float16:
            return np.dtype(np.float32)
        return dt

    def __repr__(self) -> str:
        return f"LazyTensor(shape={self.shape}, formula={self.formula})"

    def __bool__(self):
        raise TypeError(
            "the truth value of a LazyTensor is undefined; comparisons build 0/1 formulas"
        )

    # -- building ----------------------------------------------------------
    @staticmethod
    def _lift(x) -> LazyTensor:
        return x if isinstance(x, LazyTensor) else LazyTensor(x)

    @staticmethod
    def _merge(parts) -> tuple[dict, int | None, int | None]:
        bindings: dict = {}
        ni = nj = None
        for p in parts:
            bindings.update(p._bindings)
            for attr, cur in (("ni", ni), ("nj", nj)):
                n = getattr(p, attr)
                if n is not None and cur is not None and n != cur:
                    idx = attr[1]
                    raise ValueError(
                        f"the operands index {cur} and {n} points by {idx}: every "
                        f"{idx}-variable of a formula must have the same number of rows "
                        f"(operand shapes: {', '.join(str(q.shape) for q in parts)})"
                    )
            ni = ni if p.ni is None else p.ni
            nj = nj if p.nj is None else p.nj
        if any(b.batch for b in bindings.values()):
            try:
                _batch_of(bindings.values())
            except ValueError:
                raise ValueError(
                    "the operands' batch axes do not broadcast (operand shapes: "
                    f"{', '.join(str(q.shape) for q in parts)})"
                ) from None
        return bindings, ni, nj

    def _apply(self, name: str, *others, attrs=()) -> LazyTensor:
        parts = [self] + [self._lift(o) for o in others]
        bindings, ni, nj = self._merge(parts)
        try:
            node = make(name, *(p.formula for p in parts), attrs=attrs)
        except FormulaError as exc:
            shapes = ", ".join(str(p.shape) for p in parts)
            raise ValueError(f"{exc} (operand shapes {shapes})") from None
        return LazyTensor._new(node, bindings, ni, nj)

    def _compose(self, fn, *others) -> LazyTensor:
        """Apply a composite (a function of formula nodes) with error context."""
        parts = [self] + [self._lift(o) for o in others]
        bindings, ni, nj = self._merge(parts)
        try:
            node = fn(*(p.formula for p in parts))
        except FormulaError as exc:
            shapes = ", ".join(str(p.shape) for p in parts)
            raise ValueError(f"{exc} (operand shapes {shapes})") from None
        return LazyTensor._new(node, bindings, ni, nj)

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

    def eq(self, o) -> LazyTensor:
        """1 where ``self == o``, else 0 (``==`` keeps Python's meaning)."""
        return self._apply("Equal", o)

    def ne(self, o) -> LazyTensor:
        """1 where ``self != o``, else 0."""
        return self._apply("NotEqual", o)

    def __or__(self, o):
        """``(a | b)``: dot product over the feature axis."""
        return self._compose(_ops.dot, o)

    def __ror__(self, o):
        return self._lift(o)._compose(_ops.dot, self)

    def __getitem__(self, k):
        if isinstance(k, numbers.Integral):
            return self.elem(int(k))
        if isinstance(k, slice):
            start, stop, step = k.indices(self.dim)
            if step != 1 or stop <= start:
                raise ValueError(f"only contiguous, non-empty slices are supported, got {k}")
            return self.extract(start, stop - start)
        raise TypeError(f"LazyTensor indices must be an int or a slice, got {k!r}")

    # element-wise functions with arguments
    def atan2(self, x) -> LazyTensor:
        """``atan2(self, x)``: the angle of the point (x, self)."""
        return self._apply("Atan2", x)

    def clamp(self, lo, hi) -> LazyTensor:
        """``self`` clamped to ``[lo, hi]``."""
        return self._apply("Clamp", lo, hi)

    def ifelse(self, a, b) -> LazyTensor:
        """``a`` where ``self >= 0``, else ``b``."""
        return self._apply("IfElse", a, b)

    def mod(self, modulus, offset=0) -> LazyTensor:
        """``self`` wrapped into ``[offset, offset + modulus)``."""
        return self._compose(_ops.mod, modulus, offset)

    def round(self, decimals: int = 0) -> LazyTensor:
        """Rounded to ``decimals`` decimals (half to even, as NumPy)."""
        return self._apply("Round", attrs=(_int_arg(decimals, "decimals"),))

    def power(self, p) -> LazyTensor:
        """``self ** p``."""
        return self ** p

    # vector operations
    def sqnorm2(self) -> LazyTensor:
        """Squared Euclidean norm over the feature axis."""
        return self._compose(_ops.sqnorm2)

    def norm2(self) -> LazyTensor:
        """Euclidean norm over the feature axis."""
        return self._compose(_ops.norm2)

    def normalize(self) -> LazyTensor:
        """``self / |self|`` (0 where ``self`` is 0)."""
        return self._compose(_ops.normalize)

    def sqdist(self, other) -> LazyTensor:
        """``|self - other|^2``."""
        return self._compose(_ops.sqdist, other)

    def weightedsqnorm(self, s) -> LazyTensor:
        """``self^T S self``, S scalar, diagonal (D) or full (D*D, row-major)."""
        return self._lift(s)._compose(_ops.weightedsqnorm, self)

    def weightedsqdist(self, other, s) -> LazyTensor:
        """``(self - other)^T S (self - other)``."""
        return self._lift(s)._compose(_ops.weightedsqdist, self, other)

    def elem(self, k: int) -> LazyTensor:
        """Component ``k`` (dimension 1)."""
        k = _int_arg(k, "k")
        return self._apply("Extract", attrs=(k + self.dim if k < 0 else k, 1))

    def extract(self, start: int, d: int) -> LazyTensor:
        """Components ``start`` to ``start + d - 1``."""
        return self._apply("Extract", attrs=(_int_arg(start, "start"), _int_arg(d, "d")))

    def concat(self, other) -> LazyTensor:
        """Concatenation along the feature axis."""
        return self._apply("Concat", other)

    def matvecmult(self, v) -> LazyTensor:
        """``A v``: ``self`` is a row-major matrix of ``n * m`` entries, ``v`` of dim m."""
        return self._apply("MatVecMult", v)

    def vecmatmult(self, A) -> LazyTensor:
        """``v^T A``: ``self`` is a vector of dim n, ``A`` a row-major n x m matrix."""
        return self._apply("VecMatMult", A)

    def tensorprod(self, other) -> LazyTensor:
        """Outer product, flattened row-major."""
        return self._apply("TensorProd", other)

    def one_hot(self, D: int) -> LazyTensor:
        """One-hot encoding of ``round(self)`` in dimension ``D``."""
        return self._apply("OneHot", attrs=(_int_arg(D, "D"),))

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
        return LazyTensor._new(f, bindings, self.nj, self.ni)

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
        g = self._lift(gradin)
        if g.dim != self.dim:
            raise ValueError(
                f"grad: 'gradin' has dimension {g.dim}; it must match the formula's "
                f"dimension {self.dim}"
            )
        bindings, ni, nj = self._merge([self, v, g])
        return LazyTensor._new(_grad(self.formula, v.formula, g.formula), bindings, ni, nj)

    # -- reductions --------------------------------------------------------
    def _plan(self, reduction: str, axis, weight=None, K=1, backend=None):
        axis = _check_axis(axis)
        check_backend_name(backend)
        parts = [self] + ([self._lift(weight)] if weight is not None else [])
        if weight is None:  # the common case: nothing to merge
            bindings, ni, nj = self._bindings, self.ni, self.nj
        else:
            bindings, ni, nj = self._merge(parts)
        formulas = [p.formula for p in parts]
        red = REDUCTIONS[reduction]
        try:
            check_formulas(red, formulas)
        except ValueError as exc:
            raise ValueError(f"{exc} (shapes {', '.join(str(p.shape) for p in parts)})") from None
        nx, ny = ni or 1, nj or 1
        if red.uses_k:
            K = _int_arg(K, "K")
            reduced = ny if axis == 1 else nx
            if not 1 <= K <= reduced:
                raise ValueError(
                    f"K={K} but the reduced axis has {reduced} points; K must be "
                    f"between 1 and {reduced}"
                )
        if any(b.batch for b in bindings.values()):
            raise NotImplementedError(
                "this operation does not support batch axes yet (reductions do); "
                "loop over the batch"
            )
        dtype = LazyTensor._new(formulas[0], bindings, ni, nj).dtype
        if any(is_dask_array(b.array) for b in bindings.values()):
            return _DaskPlan(formulas, bindings, ni, nj, reduction, axis, K, dtype), None

        def array_of(node):
            a = bindings[node].array
            if is_cupy_array(a):
                return a.astype(dtype, order="C", copy=False)
            return np.ascontiguousarray(a, dtype=dtype)

        return make_plan(formulas, reduction, axis, K, array_of, dtype, nx, ny)

    def to_dense(self, *, max_elements: int = 1 << 28) -> np.ndarray:
        """The formula's values on every pair, as a dense (N, M, D) NumPy array.

        This is the ``N x M`` matrix that reductions never form: meant for small
        problems, exact dense solvers and debugging. Evaluated with the NumPy
        reference evaluator, block of rows by block of rows. Raises
        ``MemoryError`` above ``max_elements`` values rather than swapping.
        """
        if self.batch:
            raise NotImplementedError(
                "to_dense does not support batch axes yet; loop over the batch"
            )
        N, M, D = self.shape
        if N * M * D > max_elements:
            raise MemoryError(
                f"to_dense: a ({N}, {M}, {D}) array has {N * M * D:,} values, more "
                f"than max_elements={max_elements:,}; reduce the formula instead, or "
                "raise max_elements"
            )
        if any(is_dask_array(b.array) for b in self._bindings.values()):
            bindings = {k: _Binding(np.asarray(b.array), b.weak) for k, b in self._bindings.items()}
            return LazyTensor._new(self.formula, bindings, self.ni, self.nj).to_dense(
                max_elements=max_elements)
        plan, args = self._plan("Sum", 1)
        order = topo_order(list(plan.formulas))
        out = np.empty((N, M, D), dtype=plan.dtype)
        rows = max(1, (1 << 20) // max(1, M * sum(n.dim for n in order)))
        with np.errstate(all="ignore"):
            for i0 in range(0, N, rows):
                i1 = min(N, i0 + rows)
                (out[i0:i1],) = evaluate_formula_tile(
                    order, plan.formulas, args, i0, i1, 0, M, plan.dtype
                )
        return out

    def with_ranges(self, ranges) -> LazyTensor:
        """This formula, whose reductions visit only the blocks of ``ranges``.

        ``ranges``: a :class:`kerneltools.ranges.BlockSparsity` (points in any
        order; results in the caller's order) or KeOps' 6-tuple
        ``(ranges_i, slices_i, redranges_j, ranges_j, slices_j, redranges_i)``
        for data sorted by cluster; see :mod:`kerneltools.ranges`. Reductions
        also take ``ranges=`` directly. Formulas built from the result do not
        inherit it.
        """
        out = LazyTensor._new(self.formula, self._bindings, self.ni, self.nj)
        out._ranges = ranges
        return out

    def _reduce(self, reduction, axis, *, weight=None, K=1, backend=None, **options):
        if any(b.batch for b in self._bindings.values()) or (
                isinstance(weight, LazyTensor)
                and any(b.batch for b in weight._bindings.values())):
            return _reduce_batched(self, reduction, axis, weight, K, backend, options)
        ranges = self.__dict__.get("_ranges")
        if ranges is not None:
            options.setdefault("ranges", ranges)
        plan, args = self._plan(reduction, axis, weight, K, backend)
        if isinstance(plan, _DaskPlan):  # Dask arrays in, Dask arrays out
            # the workers (other threads or processes) do not see this thread's
            # configuration: the graph carries the backend it stands for
            return plan.reduce(backend if backend is not None else configured_backend(),
                               options)
        outs = run_plan(plan, args, backend, **options)
        if plan.red.uses_k and plan.red.out_dim([f.dim for f in plan.formulas]) == 1:
            outs = tuple(o[..., 0] for o in outs)
        return outs if len(outs) > 1 else outs[0]

    # sum, logsumexp, min, Kmin, ...: one method per name of the reductions'
    # registry (``Reduction.methods``), installed below the class.

    def __matmul__(self, b):
        """``K @ b = sum_j K_ij b_j`` for a scalar formula ``K``; b of shape (M,) or (M, E).

        On the configured backend (:func:`kerneltools.config_context`); use
        :meth:`matmul` to name one."""
        return self.matmul(b)

    def matmul(self, b, *, backend=None):
        """``K @ b = sum_j K_ij b_j``, on ``backend`` (None: the configured one).

        ``K`` a scalar formula; ``b`` of shape (M,), (M, E) or batched
        (B..., M, E), as ``K @ b``, which is ``K.matmul(b)``.
        """
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
            out = (self * bj).sum(axis=1, backend=backend)
            return out[..., 0] if b_arr.ndim == 1 else out
        if b_arr.ndim not in (1, 2):
            raise ValueError(f"the right operand of @ must be 1-D or 2-D, got shape {b_arr.shape}")
        if self.nj is not None and b_arr.shape[0] != self.nj:
            raise ValueError(
                f"K @ b: K has shape {self.shape}, so the right operand b must have "
                f"{self.nj} rows, shape ({self.nj},) or ({self.nj}, E); got {b_arr.shape}"
            )
        b2 = b_arr.reshape(b_arr.shape[0], -1)
        if b2.shape[1] > _MATMUL_BLOCK:
            return self._matmul_blocks(b2, backend).reshape((-1,) + b_arr.shape[1:])
        # One j-variable per K and column count, reused by every call: the
        # formula K_ij b_j is then the same node each time, and a repeated
        # product (conjugate gradients, say) skips planning on warm calls.
        cache = self.__dict__.setdefault("_matmul_vars", {})
        hit = cache.get(b2.shape[1])
        if hit is None:
            bvar = var("j", next(_keys), b2.shape[1])
            hit = cache[b2.shape[1]] = (bvar, make("Mul", self.formula, bvar))
        bvar, formula = hit
        bindings = dict(self._bindings)
        bindings[bvar] = _Binding(b2)
        product = LazyTensor._new(formula, bindings, self.ni, b2.shape[0])
        out = product.sum(axis=1, backend=backend)
        return out[:, 0] if b_arr.ndim == 1 else out

    def _matmul_blocks(self, b2, backend=None):
        """``K @ b`` for many columns, ``_MATMUL_BLOCK`` at a time: the column
        count is code in a generated kernel, so one kernel (the last block
        zero-padded) serves every width instead of one huge kernel per width."""
        n_cols = b2.shape[1]
        outs = []
        for c0 in range(0, n_cols, _MATMUL_BLOCK):
            block = b2[:, c0 : c0 + _MATMUL_BLOCK]
            if block.shape[1] < _MATMUL_BLOCK:
                block = np.pad(block, ((0, 0), (0, _MATMUL_BLOCK - block.shape[1])))
            outs.append(self.matmul(block, backend=backend))
        return np.concatenate(outs, axis=1)[:, :n_cols]

    def solve(self, b, alpha: float = 1e-10, *, tol: float = 1e-6, max_iter=None,
              backend=None, callback=None):
        """Solve ``(K + alpha I) a = b`` by conjugate gradients (K symmetric, >= 0).

        ``self`` is the scalar kernel formula ``K_ij`` with as many i-points as
        j-points; ``b`` is (N,), (N, E) or an i-variable. Several columns are
        solved at once. Warns with ``ConvergenceWarning`` when ``max_iter``
        iterations do not reach ``|r| <= tol |b|``. Raises ``ValueError`` on
        NaN or infinity in ``b`` or in K's points and parameters, and
        :class:`~kerneltools.exceptions.NotPositiveDefiniteError` when
        ``K + alpha I`` is not positive definite (raise ``alpha``). When K's
        points are Dask arrays, each product ``K x`` runs on the cluster and
        the iterates (one value per point) stay in this process: the result
        is NumPy.
        """
        if self.dim != 1:
            raise ValueError(f"solve needs a scalar formula K, got dimension {self.dim}")
        if self.ni != self.nj:
            raise ValueError(f"solve needs a square operator, got shape {self.shape}")
        if isinstance(b, LazyTensor):
            if b.formula.op != "Var" or b.formula.cat != "i":
                raise TypeError("solve: 'b' must be an array or an i-variable LazyTensor")
            b = b._bindings[b.formula].array
        b_arr = _check_array(b, "solve: 'b'")
        if b_arr.shape[0] != (self.ni or 1) or b_arr.ndim > 2:
            raise ValueError(f"solve: 'b' must have shape ({self.ni},) or ({self.ni}, E), got {b_arr.shape}")
        alpha = solve_alpha(alpha)
        check_finite_data(self.formula, self._bindings, "solve")
        if is_dask_array(b_arr):  # one value per point, like the solution
            b_arr = b_arr.compute()
        dtype = np.result_type(self.dtype, b_arr.dtype if b_arr.dtype.kind == "f" else np.float64)
        B = b_arr.reshape(b_arr.shape[0], -1).astype(dtype)

        def matvec(X):
            out = (self * Vj(X)).sum(axis=1, backend=backend)
            if is_dask_array(out):  # K on Dask arrays: each product is distributed
                out = out.compute()
            return out + alpha * X

        x, self.n_iter_ = _cg(matvec, B, tol=tol, max_iter=max_iter, callback=callback,
                              eps=np.finfo(self.dtype).eps, who="solve", b_name="b",
                              shift_name=f"'alpha' (now {alpha:g})")
        return x[:, 0] if b_arr.ndim == 1 else x

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
        red = resolve(reduction, weight is not None)
        name = red.name
        if self.batch or (isinstance(weight, LazyTensor) and weight.batch):
            raise NotImplementedError(
                "vjp does not support batch axes yet; loop over the batch"
            )
        if not isinstance(wrt, LazyTensor) or wrt.formula.op != "Var":
            raise TypeError("vjp: 'wrt' must be a variable LazyTensor")
        axis = _check_axis(axis)
        out_cat = "i" if axis == 1 else "j"
        W = self._lift(weight) if weight is not None else None
        if red.surrogate is None:  # argument-valued reductions: zero gradient
            return np.zeros_like(wrt._bindings[wrt.formula].array, dtype=self.dtype)
        forward = red.grad_forward or name
        ranges = ranges if ranges is not None else self.__dict__.get("_ranges")
        opts = {} if ranges is None else {"ranges": ranges}
        outs = self._reduce(forward, axis, weight=W, K=K, backend=backend, **opts)
        outs = list(outs) if isinstance(outs, tuple) else [outs]
        g = _check_array(gradout, "vjp: 'gradout'")
        if g.shape[0] != len(outs[0]) or g.size != outs[0].size:
            raise ValueError(
                f"vjp: 'gradout' must have the shape of the {name} reduction's output, "
                f"{outs[0].shape}; got {g.shape}"
            )
        if red.needs_lse:
            outs.append(self.logsumexp(axis=axis, backend=backend, **opts))
        nodes, bindings = [], {}
        for o in outs:
            o = o.astype(self.dtype, copy=False).reshape(len(o), -1)
            node = var(out_cat, next(_keys), o.shape[1])
            bindings[node] = _Binding(o)
            nodes.append(node)
        g = g.astype(self.dtype).reshape(g.shape[0], -1)
        gnode = var(out_cat, next(_keys), g.shape[1])
        bindings[gnode] = _Binding(g)
        G = vjp_formula(name, self.formula, W.formula if W is not None else None,
                        wrt.formula, nodes, gnode, axis)
        parts = [self, wrt] + ([W] if W is not None else [])
        b0, ni, nj = self._merge(parts)
        bindings.update(b0)
        return reduce_gradient(LazyTensor._new(G, bindings, ni, nj), wrt.formula.cat, axis,
                               backend, **opts)



def vjp_formula(name: str, F, W, wrt, out_nodes, gnode, axis: int):
    """The formula whose reduction is the gradient of ``<gin, Red(F)>`` at ``wrt``.

    ``out_nodes``: variables (of the output index) holding the forward outputs
    of the reduction's ``grad_forward`` (then the log-sum-exp where it
    ``needs_lse``); ``gnode``: the incoming gradient. Reduce the result with
    :func:`reduce_gradient`.
    """
    from .backend._autodiff import grad

    S = REDUCTIONS[name].surrogate(F, W, out_nodes, gnode)
    if axis == 0:  # surrogates name the reduced index j
        (S,) = substitute([S], {index("j"): index("i")})
    return grad(S, wrt, intcst(1))


def reduce_gradient(G, cat: str, axis: int, backend=None, **options):
    """Reduce a :func:`vjp_formula` LazyTensor to the gradient of a variable of
    category ``cat``: over the reduced index, the output index, or both
    (``options``: ``ranges``, whose transposed half serves the other axis)."""
    out_cat = "i" if axis == 1 else "j"
    if cat == out_cat:
        return G.sum(axis=axis, backend=backend, **options)
    if cat != "p":
        return G.sum(axis=1 - axis, backend=backend, **options)
    return G.sum(axis=1, backend=backend, **options).sum(axis=0)


def _install_reduction_methods():
    """One method per method name of the reductions' registry (aliases too)."""
    for name, method in reduction_methods().items():
        setattr(LazyTensor, name, method)


def _install_unary_methods():
    """One method per unary element-wise operation of the registry."""
    for op in OPS.values():
        if op.method is None or hasattr(LazyTensor, op.method):
            continue

        def method(self, _name=op.name):
            return self._apply(_name)

        method.__name__ = op.method
        method.__doc__ = f"Element-wise {op.doc}."
        setattr(LazyTensor, op.method, method)


_install_reduction_methods()
_install_unary_methods()


#: Widest right operand that ``K @ b`` reduces in one generated kernel.
_MATMUL_BLOCK = 32


def Vi(x) -> LazyTensor:
    """A variable indexed by i from an (N, D) or (N,) array; (B..., N, D):
    with leading batch axes, each batch reduced on its own."""
    a = _check_array(x, "Vi: 'x'")
    if a.ndim >= 3:
        return LazyTensor._new(*_batched("i", a, a.shape[:-2], "Vi: 'x'"))
    if a.ndim not in (1, 2):
        raise ValueError(f"Vi: 'x' must be 1-D (N,), 2-D (N, D) or batched (B, N, D), "
                         f"got shape {a.shape}")
    return LazyTensor(a.reshape(a.shape[0], -1), axis=0)


def Vj(x) -> LazyTensor:
    """A variable indexed by j from an (M, D) or (M,) array; (B..., M, D):
    with leading batch axes, each batch reduced on its own."""
    a = _check_array(x, "Vj: 'x'")
    if a.ndim >= 3:
        return LazyTensor._new(*_batched("j", a, a.shape[:-2], "Vj: 'x'"))
    if a.ndim not in (1, 2):
        raise ValueError(f"Vj: 'x' must be 1-D (M,), 2-D (M, D) or batched (B, M, D), "
                         f"got shape {a.shape}")
    return LazyTensor(a.reshape(a.shape[0], -1), axis=1)


def Pm(p) -> LazyTensor:
    """A parameter (shared by all i and j) from a scalar or a (D,) array."""
    if isinstance(p, numbers.Real) and not isinstance(p, (np.ndarray, np.generic)):
        # A Python number is weakly typed, as in NumPy: it does not turn
        # float32 data into float64.
        return LazyTensor(float(p))
    a = _check_array(p, "Pm: 'p'")
    if a.ndim > 1:
        raise ValueError(f"Pm: 'p' must be a scalar or 1-D, got shape {a.shape}")
    return LazyTensor(a.reshape(-1))


def minimum(a, b) -> LazyTensor:
    """Element-wise minimum of two formulas (NaN propagates)."""
    return LazyTensor._lift(a)._apply("Minimum", b)


def maximum(a, b) -> LazyTensor:
    """Element-wise maximum of two formulas (NaN propagates)."""
    return LazyTensor._lift(a)._apply("Maximum", b)


def _batch_of(bindings) -> tuple:
    """The broadcast batch shape of bindings (ValueError if they do not)."""
    shapes = [b.batch for b in bindings if b.batch]
    return tuple(np.broadcast_shapes(*shapes)) if shapes else ()


def _reduce_batched(lt, reduction, axis, weight, K, backend, options):
    """A reduction with batch axes: the B problems become one block-diagonal
    problem on stacked rows (batched parameters become variables of the
    output index), reduced with block-sparsity ranges in one call; outputs
    come back as (B..., n, E), with indices local to each problem."""
    if options.get("ranges") is not None or lt.__dict__.get("_ranges") is not None:
        raise ValueError("ranges= cannot be combined with batch axes (they are "
                         "block-diagonal ranges already)")
    parts = [lt] + ([LazyTensor._lift(weight)] if weight is not None else [])
    bindings, ni, nj = LazyTensor._merge(parts)
    batch = _batch_of(bindings.values())
    B = int(np.prod(batch))
    n, m = ni or 1, nj or 1
    out_cat = "i" if _check_axis(axis) == 1 else "j"
    n_out, n_red = (n, m) if out_cat == "i" else (m, n)
    if REDUCTIONS[reduction].uses_k:
        K = _int_arg(K, "K")
        if not 1 <= K <= n_red:
            raise ValueError(f"K={K} but each problem of the batch reduces {n_red} points; "
                             f"K must be between 1 and {n_red}")
    flat, swap = {}, {}
    for node, b in bindings.items():
        a = b.array
        xp = _array_module(a)
        if node.cat == "p":
            if not b.batch:
                flat[node] = b
                continue
            # one value per problem: a variable of the output index, repeated
            p = xp.broadcast_to(a, batch + a.shape[-1:]).reshape(B, -1)
            new = var(out_cat, next(_keys), node.dim)
            swap[node] = new
            flat[new] = _Binding(xp.repeat(p, n_out, axis=0), b.weak)
            continue
        rows = a.shape[-2]
        full = xp.broadcast_to(a.reshape(b.batch + a.shape[-2:]) if b.batch else a,
                               batch + (rows, a.shape[-1]))
        flat[node] = _Binding(xp.ascontiguousarray(full.reshape(B * rows, -1)), b.weak)
    formulas = [p.formula for p in parts]
    if swap:
        formulas = substitute(formulas, swap)
    nb, mb = B * n, B * m
    F = LazyTensor._new(formulas[0], flat, nb, mb)
    W = LazyTensor._new(formulas[1], flat, nb, mb) if weight is not None else None
    starts_i, starts_j = np.arange(B) * n, np.arange(B) * m
    r_i = np.stack([starts_i, starts_i + n], 1)
    r_j = np.stack([starts_j, starts_j + m], 1)
    slices = np.arange(1, B + 1)
    ranges = (r_i, slices, r_j, r_j, slices, r_i)
    outs = F._reduce(reduction, axis, weight=W, K=K, backend=backend, ranges=ranges,
                     **options)
    outs = outs if isinstance(outs, tuple) else (outs,)
    red = REDUCTIONS[reduction]
    result = []
    for o, is_int in zip(outs, red.int_outputs):
        o = o.reshape(batch + (n_out,) + o.shape[1:])
        if is_int:  # global row of the stacked problem -> index within its problem
            xp = _array_module(o)
            offset = (xp.arange(B) * n_red).reshape(batch + (1,) * (o.ndim - len(batch)))
            o = xp.where(o >= 0, o - offset, o)
        result.append(o)
    return tuple(result) if len(result) > 1 else result[0]


def _array_module(a):
    if is_cupy_array(a):
        import cupy

        return cupy
    return np
