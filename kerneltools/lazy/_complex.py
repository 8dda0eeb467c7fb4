"""Complex numbers: :class:`ComplexLazyTensor`, a formula of complex values.

A complex formula of D features is, in the engine, a real formula of 2D
features in *planar* layout: the D real parts, then the D imaginary parts.
Complex data (complex64 / complex128) become real variables of that layout
(float32 / float64), every complex operation is a sub-formula of real
primitives on the two halves (:data:`COMPLEX_OPS`), and a reduction's
``(..., 2D)`` output is viewed back as ``(..., D)`` complex values. So every
backend (NumPy, C, CUDA) runs complex formulas unchanged, and the torch
binding differentiates them through torch's own view of complex tensors as
pairs of reals (hence with torch's Wirtinger conventions).

Supported, as in pykeops: ``+ - * /`` (complex with complex, real or
numbers), unary ``-``, integer powers, ``exp``, ``conj``, ``real``,
``imag``, ``angle``, ``abs``, ``sum(-1)`` (over the features), feature
indexing and ``concat``, and the reductions ``sum`` over i or j and ``@``.
Real formulas get ``real2complex``, ``imag2complex`` and ``exp1j``
(:func:`real_methods`). An operation without a complex meaning here (an
order: ``Min``, comparisons; ``log``, ``sin``, ...) is a TypeError naming it.

>>> import numpy as np, kerneltools as kt
>>> p, f = np.random.rand(50, 1), np.random.rand(40, 1)
>>> w = np.random.rand(50) + 1j * np.random.rand(50)
>>> nudft = (-2j * np.pi * kt.Vj(p) * kt.Vi(f)).exp() @ w  # sum_j e^(-2i pi p_j f_i) w_j
>>> np.allclose(nudft, np.exp(-2j * np.pi * f * p.T) @ w)
True
"""

from __future__ import annotations

import numbers

import numpy as np

from ._keops import FeatureDim
from ._symbolic import compose, from_parts, lift, ranges_of
from ..backend._ir import Node, intcst
from ..backend._ops import OPS, make

__all__ = ["COMPLEX_OPS", "ComplexMethods", "check_reduction", "check_weight",
           "is_complex_data", "planar", "real_methods", "to_complex"]


# ---------------------------------------------------------------------------
# Data: complex arrays <-> planar real arrays
# ---------------------------------------------------------------------------
def is_complex_data(x) -> bool:
    """Whether ``x`` is complex: a :class:`ComplexLazyTensor`, a Python or
    NumPy complex number, or an array (NumPy, CuPy, Dask, torch) of complex dtype."""
    if getattr(x, "is_complex", False) is True:  # a ComplexLazyTensor (either binding)
        return True
    if isinstance(x, numbers.Complex) and not isinstance(x, numbers.Real):
        return True
    dt = getattr(x, "dtype", None)
    if dt is None:
        return False
    return bool(getattr(dt, "is_complex", False)) or getattr(dt, "kind", "") == "c"


def planar(a):
    """A complex array ``(..., D)`` as the real array ``(..., 2D)`` of its real
    then imaginary parts (NumPy, CuPy or Dask; float32 for complex64)."""
    return np.concatenate([a.real, a.imag], axis=-1)


def to_complex(res):
    """A real ``(..., 2D)`` result in planar layout as the complex ``(..., D)``
    array (NumPy, CuPy or Dask, complex64 from float32)."""
    d = res.shape[-1] // 2
    return res[..., :d] + 1j * res[..., d:]


# ---------------------------------------------------------------------------
# Complex arithmetic on (real part, imaginary part) pairs of nodes. A part is
# None where it is exactly zero (real operands, pure imaginary constants), so
# that mixed real/complex formulas carry no useless zero terms.
# ---------------------------------------------------------------------------
def _is_zero(n: Node) -> bool:
    return n.op == "Int" and n.attrs[0] == 0


def split(z: Node) -> tuple:
    """(re, im) of a planar node, None for a part known to be zero."""
    d = z.dim // 2
    if z.op == "Concat" and z.children[0].dim == d:
        re, im = z.children
    else:
        re, im = make("Extract", z, attrs=(0, d)), make("Extract", z, attrs=(d, d))
    return (None if _is_zero(re) else re), (None if _is_zero(im) else im)


def pack(re, im, d: int) -> Node:
    """The planar node of dimension 2d of the parts ``re`` and ``im`` (None:
    zero); a part of dimension 1 is broadcast to d."""
    parts = []
    for p in (re, im):
        if p is None:
            p = intcst(0, d)
        elif p.dim != d:
            p = make("Mul", p, intcst(1, d))
        parts.append(p)
    return make("Concat", *parts)


def _add(a, b):
    return b if a is None else a if b is None else make("Add", a, b)


def _sub(a, b):
    return _neg(b) if a is None else a if b is None else make("Sub", a, b)


def _mul(a, b):
    return None if a is None or b is None else make("Mul", a, b)


def _neg(a):
    return None if a is None else make("Neg", a)


def c_add(a, b):
    return _add(a[0], b[0]), _add(a[1], b[1])


def c_sub(a, b):
    return _sub(a[0], b[0]), _sub(a[1], b[1])


def c_mul(a, b):
    """(ar + i ai)(br + i bi) = (ar br - ai bi) + i (ar bi + ai br)."""
    return (_sub(_mul(a[0], b[0]), _mul(a[1], b[1])),
            _add(_mul(a[0], b[1]), _mul(a[1], b[0])))


def c_div(a, b):
    """a / b = a conj(b) / |b|^2 (a division by the real part alone if b is real)."""
    br, bi = b
    if br is None and bi is None:
        raise ZeroDivisionError("complex division by the constant 0")
    if bi is None:
        return _div(a[0], br), _div(a[1], br)
    den = _add(_mul(br, br), make("Square", bi))
    num = c_mul(a, (br, _neg(bi)))
    return _div(num[0], den), _div(num[1], den)


def _div(a, b):
    return None if a is None else make("Div", a, b)


def c_exp(a):
    """exp(ar + i ai) = exp(ar) (cos ai + i sin ai)."""
    ar, ai = a
    if ai is None:
        return (make("Exp", ar) if ar is not None else intcst(1)), None
    cos, sin = make("Cos", ai), make("Sin", ai)
    if ar is None:
        return cos, sin
    e = make("Exp", ar)
    return make("Mul", e, cos), make("Mul", e, sin)


def c_abs(a):
    """|a| = sqrt(ar^2 + ai^2) (|ar| for a real a)."""
    ar, ai = a
    if ai is None:
        return make("Abs", ar) if ar is not None else intcst(0)
    if ar is None:
        return make("Abs", ai)
    return make("Sqrt", make("Add", make("Square", ar), make("Square", ai)))


def c_pow(a, n: int):
    """a ** n for an integer n, by repeated squaring (n < 0: 1 / a ** -n)."""
    out, base, k = (intcst(1), None), a, abs(n)
    while k:
        if k & 1:
            out = c_mul(out, base)
        base, k = c_mul(base, base), k >> 1
    return c_div((intcst(1), None), out) if n < 0 else out


def _zero_if_none(p, d):
    return intcst(0, d) if p is None else p


#: {registry operation name: (complex result?, fn(attrs, *planar nodes) -> node)}:
#: what each operation of a LazyTensor means on complex operands.
COMPLEX_OPS = {}


def _complex_op(name, complex_out=True):
    def register(fn):
        COMPLEX_OPS[name] = (complex_out, fn)
        return fn
    return register


def _dim(*nodes) -> int:
    return max(n.dim for n in nodes) // 2


for _name, _fn in (("Add", c_add), ("Sub", c_sub), ("Mul", c_mul), ("Div", c_div)):
    COMPLEX_OPS[_name] = (True, (lambda fn: lambda at, a, b: pack(
        *fn(split(a), split(b)), _dim(a, b)))(_fn))

_complex_op("Neg")(lambda at, a: pack(*c_sub((None, None), split(a)), a.dim // 2))
_complex_op("Square")(lambda at, a: pack(*c_mul(split(a), split(a)), a.dim // 2))
_complex_op("Inv")(lambda at, a: pack(*c_div((intcst(1), None), split(a)), a.dim // 2))


@_complex_op("Pow")
def _complex_pow(at, a):
    OPS["Pow"].dim(at, (a.dim,))  # the exponent's limit, as for real powers
    return pack(*c_pow(split(a), at[0]), a.dim // 2)


_complex_op("Exp")(lambda at, a: pack(*c_exp(split(a)), a.dim // 2))
_complex_op("Conj")(lambda at, a: pack(split(a)[0], _neg(split(a)[1]), a.dim // 2))
_complex_op("SumFeat")(lambda at, a: pack(
    *(None if p is None else make("SumFeat", p) for p in split(a)), 1))
_complex_op("Extract")(lambda at, a: pack(
    *(None if p is None else make("Extract", p, attrs=at) for p in split(a)), at[1]))
_complex_op("Concat")(lambda at, a, b: pack(
    *(make("Concat", _zero_if_none(p, a.dim // 2), _zero_if_none(q, b.dim // 2))
      for p, q in zip(split(a), split(b))), (a.dim + b.dim) // 2))
_complex_op("Abs", False)(lambda at, a: c_abs(split(a)))
_complex_op("Real", False)(lambda at, a: _zero_if_none(split(a)[0], a.dim // 2))
_complex_op("Imag", False)(lambda at, a: _zero_if_none(split(a)[1], a.dim // 2))
_complex_op("Angle", False)(lambda at, a: make(
    "Atan2", *(_zero_if_none(p, a.dim // 2) for p in split(a)[::-1])))


# ---------------------------------------------------------------------------
# The LazyTensor of complex values
# ---------------------------------------------------------------------------
def _no_complex(what: str) -> TypeError:
    return TypeError(
        f"{what} has no meaning for complex values in kerneltools (a ComplexLazyTensor "
        "supports + - * /, integer powers, exp, conj, real, imag, angle, abs, sum and "
        "@); apply it to z.real, z.imag, abs(z) or z.angle() instead")


class ComplexMethods:
    """A symbolic ``(N, M, D)`` array of complex values; see the module docstring.

    ``kerneltools.ComplexLazyTensor`` (the class is ``kerneltools.lazy``'s:
    this mixin and ``LazyTensor``, whose methods this one overrides where
    complex values change them; ``_real`` is the real class).
    ``kerneltools.LazyTensor(x)`` of complex data makes one too; so do
    real formulas mixed with complex operands (``1j * x``).

    Parameters
    ----------
    x : array-like, number or LazyTensor
        Complex data (complex64 / complex128) shaped as for
        :class:`~kerneltools.LazyTensor`, a Python complex number (a
        parameter, weakly typed as Python floats are), or real data or a real
        LazyTensor (then its imaginary part is zero).
    axis : {0, 1}, optional
        Only for 2-D arrays.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.lazy import Vi, Vj
    >>> t = np.array([[0.0], [1.0]])
    >>> f = (1j * np.pi * Vi(t) * Vj(t)).exp()
    >>> type(f).__name__, np.round(abs(f.sum(axis=1).ravel()), 3)
    ('ComplexLazyTensor', array([2., 0.]))
    """

    is_complex = True
    _real: type  # the real LazyTensor class

    def __new__(cls, x=None, axis=None):
        return object.__new__(cls)

    def __init__(self, x, axis: int | None = None):
        LazyTensor = self._real
        if isinstance(x, ComplexMethods):
            formula, bindings, ni, nj = x.formula, x._bindings, x.ni, x.nj
        elif isinstance(x, numbers.Complex) and not isinstance(x, np.ndarray):
            formula, bindings, ni, nj = _constant(complex(x), LazyTensor)
        else:
            real = x if isinstance(x, LazyTensor) else LazyTensor(
                planar(_as_complex_array(x)) if is_complex_data(x) else x, axis)
            formula = real.formula
            if not is_complex_data(x):  # real data: imaginary part zero
                formula = pack(formula, None, formula.dim)
            bindings, ni, nj = real._bindings, real.ni, real.nj
            x = real
        self.formula, self._bindings, self.ni, self.nj = formula, bindings, ni, nj
        if isinstance(x, LazyTensor) and ranges_of(x) is not None:
            self._ranges = ranges_of(x)
        if isinstance(x, LazyTensor) and "_backend" in x.__dict__:
            self._backend = x._backend

    @classmethod
    def _new(cls, formula, bindings, ni, nj):
        return from_parts(cls, formula, bindings, ni, nj)

    @classmethod
    def from_planar(cls, t):
        """The complex formula whose planar layout is the real formula ``t``
        (of even dimension: real parts, then imaginary parts)."""
        if t.formula.dim % 2:
            raise ValueError(f"a planar complex formula has an even dimension, got "
                             f"{t.formula.dim}")
        return _with_attrs(from_parts(cls, t.formula, t._bindings, t.ni, t.nj,
                                      ranges=ranges_of(t)), t)

    def planar(self):
        """The real formula of this one's planar layout (dimension 2D)."""
        return _with_attrs(from_parts(self._real, self.formula, self._bindings, self.ni,
                                      self.nj, ranges=ranges_of(self)), self)

    # -- description -------------------------------------------------------
    @property
    def dim(self) -> FeatureDim:
        """The number D of complex features (``dim()``: the number of axes)."""
        return FeatureDim(self.formula.dim // 2, len(self._shape))

    @property
    def ndim(self) -> int:
        return self.formula.dim // 2

    @property
    def _shape(self) -> tuple:
        return self.batch + (self.ni or 1, self.nj or 1, self.formula.dim // 2)

    @property
    def shape(self) -> tuple:
        """``(N, M, D)`` as for real formulas (``(N, M)`` when D = 1)."""
        s = self._shape
        return s[:-1] if s[-1] == 1 else s

    @property
    def dtype(self) -> np.dtype:
        """complex64 for float32 data, complex128 for float64."""
        return np.result_type(super().dtype, np.complex64)

    def __repr__(self) -> str:
        return f"ComplexLazyTensor(shape={self.shape}, planar formula={self.formula})"

    # -- building ------------------------------------------------------------
    @classmethod
    def _lift(cls, x):
        return lift(cls, x)

    def _apply(self, name: str, *others, attrs=()):
        entry = COMPLEX_OPS.get(name)
        if entry is None:
            raise _no_complex(f"the operation {name}")
        complex_out, fn = entry
        out = compose(self, lambda *nodes: fn(attrs, *nodes), *others)
        return out if complex_out else _with_attrs(
            from_parts(self._real, out.formula, out._bindings, out.ni, out.nj,
                       ranges=ranges_of(out)), out)

    def _compose(self, fn, *others):
        raise _no_complex(f"the operation {getattr(fn, '__name__', fn)}")

    @property
    def real(self):
        """The real parts, a real formula."""
        return self._apply("Real")

    @property
    def imag(self):
        """The imaginary parts, a real formula."""
        return self._apply("Imag")

    def angle(self):
        """The arguments, in ``[-pi, pi]`` (``atan2(imag, real)``), a real formula."""
        return self._apply("Angle")

    def conj(self):
        """The complex conjugates."""
        return self._apply("Conj")

    def real2complex(self):
        raise ValueError("real2complex: the formula is complex already")

    def imag2complex(self):
        raise ValueError("imag2complex: the formula is complex already")

    def exp1j(self):
        raise ValueError("exp1j: the formula is complex; use (1j * z).exp()")

    def t(self):
        """Swap the roles of i and j."""
        return self.from_planar(self.planar().t())

    def with_ranges(self, ranges):
        """This formula, reduced on the blocks of ``ranges`` (see LazyTensor's)."""
        return self.from_planar(self.planar().with_ranges(ranges))

    def grad(self, v, gradin):
        raise NotImplementedError(
            "grad of a complex formula: differentiate through kerneltools.torch "
            "(torch's Wirtinger conventions), or differentiate z.real and z.imag")

    def vjp(self, *args, **kwargs):
        raise NotImplementedError("vjp of a complex formula: use kerneltools.torch")

    def solve(self, *args, **kwargs):
        raise _no_complex("solve (conjugate gradients on a symmetric operator)")

    # -- reductions ------------------------------------------------------------
    def _reduce(self, reduction, axis, *, weight=None, K=1, backend=None, **options):
        """Complex ``Sum`` over ``axis``: the real one of the planar formula,
        viewed as complex; other reductions (an order, a log) raise TypeError."""
        check_reduction(reduction, weight)
        out = options.pop("out", None)
        res = self.planar()._reduce(reduction, axis, K=K, backend=backend, **options)
        if callable(res):
            return _deferred_complex(res)
        res = to_complex(res)
        if out is not None:
            out[...] = res
            return out
        return res

    def to_dense(self, *, max_elements: int = 1 << 28) -> np.ndarray:
        """The values on every pair, a dense complex (N, M, D) NumPy array."""
        return to_complex(self.planar().to_dense(max_elements=2 * max_elements))

    def matmul(self, b, *, backend=None, **options):
        """``K @ b = sum_j K_ij b_j``: ``K`` a scalar complex formula, ``b``
        real or complex, of shape (M,) or (M, E)."""
        if self.dim != 1:
            raise ValueError(f"K @ b needs a scalar formula K, got dimension "
                             f"{self.dim}")
        b_arr = b if hasattr(b, "shape") else np.asarray(b)
        if b_arr.ndim not in (1, 2):
            raise ValueError(f"the right operand of @ must be 1-D or 2-D, got shape "
                             f"{b_arr.shape}")
        if self.nj is not None and b_arr.shape[0] != self.nj:
            raise ValueError(f"K @ b: K has shape {self.shape}, so the right operand b "
                             f"must have {self.nj} rows; got {b_arr.shape}")
        bj = b_arr[:, None] if b_arr.ndim == 1 else b_arr
        out = (self * type(self)(bj, axis=1))._reduce("Sum", 1, backend=backend,
                                                      **options)
        return out[:, 0] if b_arr.ndim == 1 else out


def check_reduction(reduction: str, weight=None) -> None:
    """TypeError unless ``reduction`` is one that complex formulas have (Sum)."""
    if reduction != "Sum" or weight is not None:
        raise _no_complex(f"the {reduction} reduction")


def check_weight(reduction: str, weight) -> None:
    """TypeError if the ``weight`` of a real formula's reduction is complex
    (it would be reduced as its planar real layout)."""
    if weight is not None and is_complex_data(weight):
        raise TypeError(
            f"the {reduction} reduction takes real weights here, got a complex one; "
            "reduce with its real and imaginary parts (w.real, w.imag) separately")


def _deferred_complex(call):
    """A deferred reduction (pykeops' ``call=False``) whose result is complex."""
    def run(*args, **kwargs):
        return to_complex(call(*args, **kwargs))
    run.__doc__ = getattr(call, "__doc__", None)
    return run


def _with_attrs(out, src):
    if "_backend" in src.__dict__:
        out._backend = src._backend
    return out


def _as_complex_array(x):
    return x if hasattr(x, "real") and hasattr(x, "shape") else np.asarray(x)


def _constant(c: complex, LazyTensor):
    """(formula, bindings, ni, nj) of a complex number: its non-zero parts are
    weakly typed parameters (as Python floats), its zero parts exact zeros."""
    parts, bindings = [], {}
    for v in (c.real, c.imag):
        if v == 0:
            parts.append(None)
        else:
            p = LazyTensor(float(v))
            parts.append(p.formula)
            bindings.update(p._bindings)
    return pack(*parts, 1), bindings, None, None


# -- the complex methods of real formulas --------------------------------------
def real2complex(self):
    """This real formula as a complex one (imaginary part 0)."""
    return self._complex_class(self)


def imag2complex(self):
    """``1j * self``: this real formula as the imaginary part of a complex one."""
    return self._complex_class.from_planar(
        self._compose(lambda x: pack(None, x, x.dim)))


def exp1j(self):
    """``exp(1j * self) = cos(self) + 1j sin(self)``."""
    return self._complex_class.from_planar(
        self._compose(lambda x: pack(make("Cos", x), make("Sin", x), x.dim)))


def real_methods() -> dict:
    """The methods that real LazyTensors get for complex numbers (they read
    the complex class from their attribute ``_complex_class``)."""
    return {"real2complex": real2complex, "imag2complex": imag2complex, "exp1j": exp1j}
