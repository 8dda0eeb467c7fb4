"""The part of pykeops' ``LazyTensor`` surface that both bindings share (issue 21).

:class:`KeopsMethods` is a mixin of ``kerneltools.LazyTensor`` (and of
``kerneltools.torch.LazyTensor``, through it): pykeops' names for shapes
(``ndim``, ``dim()``, ``nbatchdims``), indexing (``x[..., :, :, k]``), the
vector operations it has and the core lacked (``norm``, ``keops_tensordot``,
``keops_kron``, ``concatenate``, ``sinxdivx``), the differential operators
built on :meth:`grad` (``diff``, ``grad_matrix``, ``divergence``,
``laplacian``, ``trace_operator``) and the generic ``reduction``. Each is a
formula of the core's operations: nothing here renders code or
differentiates by itself.

Methods use ``self._apply``, ``self._compose``, ``self._lift``, ``self.grad``
and ``self._reduce``, which both bindings provide.
"""

from __future__ import annotations

import numbers

import numpy as np

from ._args import check_axis, int_arg
from ._sections import sections
from ._symbolic import symbols_of
from ..backend import _ops
from ..backend._ir import intcst, pi
from ..backend.reductions import resolve

__all__ = ["FeatureDim", "KeopsMethods"]


class FeatureDim(int):
    """The dimension D of a formula's values, as an int; called, ``K.dim()``
    is pykeops' (and torch's) number of axes of the formula's shape,
    ``len(batch) + 3`` (batch axes, i, j, features)."""

    def __new__(cls, d: int, n_axes: int = 3):
        out = super().__new__(cls, d)
        out.n_axes = n_axes
        return out

    def __reduce__(self):
        return (FeatureDim, (int(self), self.n_axes))

    def __call__(self) -> int:
        return self.n_axes


def _difference_matrix(a, b):
    """``a (x) 1 - 1 (x) b``: the row-major matrix ``a_k - b_l``."""
    ones_a, ones_b = intcst(1, a.dim), intcst(1, b.dim)
    return _ops.make("Sub", _ops.make("TensorProd", a, ones_b),
                     _ops.make("TensorProd", ones_a, b))


class KeopsMethods:
    """pykeops' LazyTensor methods that the core lacked; see the module docstring."""

    def __min__(self, **kwargs):
        """pykeops' spelling of :meth:`min` (``min(axis=..)``)."""
        return self.min(**kwargs)

    def __max__(self, **kwargs):
        """pykeops' spelling of :meth:`max`."""
        return self.max(**kwargs)

    # -- shapes ------------------------------------------------------------
    @property
    def dim(self) -> FeatureDim:
        """The dimension D of the formula's values (an int). ``K.dim()``, as in
        pykeops and torch, is the number of axes: ``len(batch) + 3``."""
        return FeatureDim(self.formula.dim, len(self._shape))

    @property
    def ndim(self) -> int:
        """pykeops' ``ndim``: the dimension D of the formula's values (not
        ``len(shape)``, which is ``len(K.shape)``)."""
        return self.formula.dim

    @property
    def _shape(self) -> tuple:
        """pykeops' internal shape: ``(B..., N, M, D)``, D kept when it is 1."""
        return self.batch + (self.ni or 1, self.nj or 1, self.formula.dim)

    @property
    def nbatchdims(self) -> int:
        """The number of batch axes."""
        return len(self.batch)

    @property
    def batchdims(self):
        """The batch axes, or None without any (pykeops' convention)."""
        return self.batch or None

    # -- indexing ----------------------------------------------------------
    def __getitem__(self, key):
        """``x[k]``, ``x[a:b]``, or the same as the last entry of a tuple
        ``x[..., :, :, k]`` / ``x[:, :, a:b]``: only the feature axis may be
        indexed (pykeops' rule)."""
        if isinstance(key, tuple):
            rest = key[:-1]
            if rest[:1] == (Ellipsis,):
                rest = rest[1:]
            full = len(self._shape) - 1
            if not key or any(r != slice(None) for r in rest) or (
                    len(rest) != full and key[:1] != (Ellipsis,)) or len(rest) > full:
                raise ValueError(
                    f"LazyTensor indexing: only the last (feature) axis may be indexed, "
                    f"as x[..., k] or x[{', '.join([':'] * full)}, k]; got {key!r}")
            key = key[-1]
        if isinstance(key, numbers.Integral) and not isinstance(key, bool):
            return self.elem(int(key))
        if isinstance(key, slice):
            start, stop, step = key.indices(self.formula.dim)
            if step != 1 or stop <= start:
                raise ValueError(f"only contiguous, non-empty slices are supported, got {key}")
            return self.extract(start, stop - start)
        raise TypeError(f"LazyTensor indices must be an int or a slice, got {key!r} (or a "
                        "tuple ending in one, as x[..., k])")

    # -- vector operations ---------------------------------------------------
    @sections(dim="int: The feature axis, -1 (or ``len(batch) + 2``).")
    def norm(self, dim):
        """Euclidean norm over the feature axis: ``dim`` must be -1 (or the
        index of the feature axis, ``len(batch) + 2``), as in pykeops."""
        if dim not in (-1, len(self._shape) - 1):
            raise ValueError(f"norm: only the feature axis can be normed (dim=-1 or "
                             f"{len(self._shape) - 1}); got dim={dim!r}")
        return self.norm2()

    @sections(other="LazyTensor: The second formula.")
    def difference_matrix(self, other):
        """The differences of every component of ``self`` with every one of
        ``other``, flattened row-major: ``out[k * other.dim + l] = self[k] -
        other[l]`` (dimension ``self.dim * other.dim``), laid out as
        :meth:`tensorprod`. pykeops 2.3 names this method but keopscore
        defines no ``DifferenceMatrix``, so there it fails to compile; this
        is the reading its output dimension implies."""
        return self._compose(_difference_matrix, other)

    @sections()
    def sinxdivx(self):
        """``sin(x) / x`` (1 at 0)."""
        return self._compose(lambda x: _ops.make("Sinc", _ops.make("Div", x, pi())))

    @sections(other="LazyTensor: The second factor.",
              dimfa="tuple of int: The shape of ``self``'s values.",
              dimfb="tuple of int: The shape of ``other``'s values.",
              contfa="tuple of int: The axes of ``self`` contracted.",
              contfb="tuple of int: The axes of ``other`` contracted.",
              **{"*args": "tuple of int: Optionally, the output axes' order."})
    def keops_tensordot(self, other, dimfa, dimfb, contfa, contfb, *args):
        """Tensor dot product of the values, seen as row-major tensors of shapes
        ``dimfa`` and ``dimfb``, contracted over the axes ``contfa`` of
        ``self`` with ``contfb`` of ``other``; ``args``: optionally, a
        permutation of the output axes. As pykeops' ``TensorDot``."""
        perm = args[0] if args else None
        return self._compose(
            lambda a, b: _ops.tensordot(a, b, dimfa, dimfb, contfa, contfb, perm), other)

    @sections(other="LazyTensor: The second factor.",
              dimfself="tuple of int: The shape of ``self``'s values.",
              dimfother="tuple of int: The shape of ``other``'s values.")
    def keops_kron(self, other, dimfself, dimfother):
        """Kronecker product of the values, seen as row-major tensors of shapes
        ``dimfself`` and ``dimfother`` (as many axes); as pykeops' ``Kron``."""
        return self._compose(lambda a, b: _ops.kron(a, b, dimfself, dimfother), other)

    @sections(x="LazyTensor or float: The scalar where the functions are evaluated.",
              k="int, default=0: The order of the B-splines.")
    def bspline(self, x, k: int = 0):
        """The B-spline basis functions of order ``k`` on the knots ``self`` (a
        vector of non-decreasing values), at the scalar ``x``: a vector of
        dimension ``self.dim - k - 1``, as pykeops' ``BSpline``."""
        k = int_arg(k, "k")
        return self._compose(lambda t, xx: _ops.bspline(t, xx, k), x)

    @sections(other="LazyTensor: The second sequence.",
              gamma="LazyTensor or float: The smoothing.")
    def softdtw_sqdist(self, other, gamma):
        """Soft-DTW between the components of ``self`` and ``other`` (two
        sequences), squared differences as the cost, smoothing ``gamma`` (a
        scalar: number, parameter or formula); as pykeops."""
        return self._compose(_ops.softdtw_sqdist, other, gamma)

    @sections(tuple_of_lt="sequence of LazyTensor: The formulas, in order.",
              axis="int, default=-1: The feature axis.")
    @staticmethod
    def concatenate(tuple_of_lt, axis=-1):
        """Concatenation of several formulas along the feature axis (``axis``
        -1, or the feature axis' index)."""
        parts = list(tuple_of_lt)
        if not parts:
            raise ValueError("concatenate: needs at least one LazyTensor")
        if axis not in (-1, len(parts[0]._shape) - 1):
            raise ValueError(f"concatenate: only along the feature axis (axis=-1); got {axis!r}")
        out = parts[0]
        for p in parts[1:]:
            out = out.concat(p)
        return out

    @sections(tuple_of_lt="sequence of LazyTensor: The formulas, in order.",
              dim="int: The feature axis.")
    @staticmethod
    def cat(tuple_of_lt, dim):
        """torch's spelling of :meth:`concatenate`."""
        return KeopsMethods.concatenate(tuple_of_lt, axis=dim)

    @sections(returns="LazyTensor: ``self``.",
              other="LazyTensor, optional: Ignored, as in pykeops' hint.")
    def factorize(self, other=None):
        """pykeops' code-generation hint; returns ``self``: formulas here are
        graphs whose shared parts are computed once anyway."""
        return self

    @sections(returns="LazyTensor: ``self``.")
    def auto_factorize(self):
        """pykeops' code-generation hint; returns ``self`` (see :meth:`factorize`)."""
        return self

    # -- differential operators (built on grad) --------------------------------
    def _basis(self, k: int, d: int):
        """The constant k-th unit vector of dimension d."""
        return self._lift(int(k)).one_hot(d)

    @sections(v="LazyTensor: The variable (a Vi, Vj or Pm leaf) differentiated.")
    def grad_matrix(self, v):
        """The Jacobian of ``self`` with respect to the variable ``v``,
        flattened row-major: row k (``v.dim`` values) is ``grad(v, e_k)``."""
        D = self.formula.dim
        rows = [self.grad(v, self._basis(k, D) if D > 1 else 1) for k in range(D)]
        return self.concatenate(rows)

    @sections(v="LazyTensor: The variable (a Vi, Vj or Pm leaf) differentiated.")
    def divergence(self, v):
        """``sum_k d self_k / d v_k`` (``self`` and ``v`` of equal dimension)."""
        if self.formula.dim != v.formula.dim:
            raise ValueError(f"divergence: the formula (dimension {self.formula.dim}) and "
                             f"the variable (dimension {v.formula.dim}) must have the "
                             "same dimension")
        D = self.formula.dim
        terms = [self.grad(v, self._basis(k, D) if D > 1 else 1)[k] for k in range(D)]
        out = terms[0]
        for t in terms[1:]:
            out = out + t
        return out

    @sections(v="LazyTensor: The variable (a Vi, Vj or Pm leaf) differentiated.")
    def laplacian(self, v):
        """``sum_k d^2 self / d v_k^2`` for a scalar formula."""
        if self.formula.dim != 1:
            raise ValueError(f"laplacian: needs a scalar formula, got dimension "
                             f"{self.formula.dim}")
        return self.grad(v, 1).divergence(v)

    @sections(v="LazyTensor: The variable (a Vi, Vj or Pm leaf) differentiated.")
    def trace_operator(self, v):
        """The trace of ``self`` as a linear function of the variable ``v``
        (equal dimensions): ``sum_k self(v = e_k)_k``. Not checked for
        linearity: a formula that is not linear in ``v`` gives a meaningless
        value, as in pykeops."""
        if self.formula.dim != v.formula.dim:
            raise ValueError(f"trace_operator: the formula (dimension {self.formula.dim}) "
                             f"and the variable (dimension {v.formula.dim}) must have "
                             "the same dimension")
        D = self.formula.dim
        terms = [self._substitute(v, self._basis(k, D) if D > 1 else 1)[k]
                 for k in range(D)]
        out = terms[0]
        for t in terms[1:]:
            out = out + t
        return out

    def _substitute(self, v, value):
        """``self`` with the variable ``v`` replaced by the formula ``value``."""
        return self._compose(lambda f, var, val: _ops.substitute([f], {var: val})[0],
                             v, value)

    @sections(v="LazyTensor: The variable (a Vi, Vj or Pm leaf) differentiated.",
              diffin="LazyTensor: The direction, of ``v``'s dimension.")
    def diff(self, v, diffin):
        """The differential of ``self`` with respect to the variable ``v``,
        applied to ``diffin`` (forward mode): ``d self . diffin``, of
        ``self``'s dimension. Computed as the gradient, with respect to a
        placeholder ``u``, of ``<grad(self, v, u), diffin>`` (linear in u)."""
        u = self._lift(np.zeros(self.formula.dim))
        return (self.grad(v, u) | diffin).grad(u, 1)

    # -- reductions ----------------------------------------------------------
    @sections(returns="ndarray or Tensor: The result (a callable if ``call=False``).",
              reduction_op="str: The reduction's name.",
              other="LazyTensor, optional: The weight of a two-formula reduction.",
              opt_arg="int, optional: The K of a K-reduction.",
              axis="int, optional: The axis reduced, 0 (i) or 1 (j).",
              dim="int, optional: The pykeops name of ``axis``.",
              call="bool, default=True: Run the reduction (else a callable).",
              **{"**kwargs": "dict: The pykeops keywords (``out=``, ``ranges=``)."})
    def reduction(self, reduction_op, other=None, opt_arg=None, axis=None, dim=None,
                  call=True, **kwargs):
        """pykeops' generic reduction: ``reduction_op`` a pykeops name
        (``"Sum"``, ``"LogSumExp"``, ``"Min_ArgMin"``, ``"ArgKMin"``, ...) or one
        of ours, ``other`` its weight, ``opt_arg`` its K; ``call=False``
        returns a callable instead of running it."""
        red = resolve(str(reduction_op), other is not None)
        if other is not None and red.n_formulas != 2:
            raise ValueError(f"the {red.name} reduction takes no weight ('other')")
        axis = axis if dim is None or axis is not None else dim
        if axis is None:
            raise ValueError("reduction: give 'axis' (or 'dim')")
        K = int_arg(opt_arg, "opt_arg") if red.uses_k else 1
        return self._reduce(red.name, check_axis(axis, len(self.batch)), weight=other,
                            K=K, call=call, **kwargs)

    # -- symbolic variables ------------------------------------------------------
    @property
    def symbolic_variables(self) -> tuple:
        """pykeops' ``(ind, dim, cat)`` of each symbolic variable, by index."""
        return tuple((k, n.dim, "ijp".index(n.cat)) for k, n in
                     sorted(symbols_of(self).items()))
