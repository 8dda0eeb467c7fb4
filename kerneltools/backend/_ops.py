"""The registry of operations: one block per operation.

Each :class:`OpDef` holds everything about one primitive operation: its
arity, its output-dimension rule, its NumPy evaluation, its C spelling (shared
by the CPU and CUDA renderers; ``cuda`` only where CUDA differs), its
derivative rule and the domain on which the tests sample it. Everything else
(LazyTensor methods, the NumPy evaluator, the renderers, autodiff, the tests)
loops over :data:`OPS` and never names an operation.

The element-wise primitives are registered here; the vector operations
(feature sums, slices, matrix products, one-hot) in :mod:`._vector_ops`,
which this module imports in their place. Composite operations (squared
distance, norms, dot products, ...; pykeops' feature-wise min/max, B-splines,
...) are plain functions written with primitives only, in :mod:`._composites`
and :mod:`._ops_keops`, re-exported at the end of this module: import every
operation from here.

What an operation is (:class:`OpDef`) and how nodes are built (:func:`make`,
which checks dimensions and simplifies; :func:`substitute`) live in
:mod:`._make`; this module fills its registry and re-exports them.

C spellings are format strings over *scalar operand names* ``{0}``, ``{1}``,
``{2}`` (each operand is a plain identifier, so it may be repeated freely) and
attributes ``{a0}``, ``{a1}``; the scalar type is spelled ``real_t`` and the
math functions are the type-generic ones (``<tgmath.h>`` in C, overloads in
CUDA). Structured operations (feature sums, slices, matrix products) give a
``c_vec`` function that maps the operands' component names to the output's
component expressions; the rare operation that needs temporaries of its own
(integer powers by repeated squaring) gives ``c_lines``, statements to put
before those expressions.
"""

from __future__ import annotations

import numpy as np

from ._ir import intcst, pi
from ._limits import MAX_DECIMALS, MAX_EXPONENT, check_int
from ._make import OPS, FormulaError, OpDef, broadcast_dim, make, substitute
from ._make import register as _register

__all__ = ["OpDef", "OPS", "make", "substitute", "FormulaError", "broadcast_dim"]


# Shorthands used by derivative rules (each goes through make(), so simplifies).
def _add(a, b):
    return make("Add", a, b)


def _sub(a, b):
    return make("Sub", a, b)


def _mul(a, b):
    return make("Mul", a, b)


def _div(a, b):
    return make("Div", a, b)


def _neg(a):
    return make("Neg", a)


def _one():
    return intcst(1)


def _step(a):
    return make("Step", a)


# ---------------------------------------------------------------------------
# Arithmetic
# ---------------------------------------------------------------------------
_register(
    name="Add", arity=2, c="({0} + {1})",
    numpy=lambda at, a, b: a + b,
    grad=lambda n, g: (g, g),
    domain=((-2, 2), (-2, 2)), doc="a + b",
)
_register(
    name="Sub", arity=2, c="({0} - {1})",
    numpy=lambda at, a, b: a - b,
    grad=lambda n, g: (g, _neg(g)),
    domain=((-2, 2), (-2, 2)), doc="a - b",
)
_register(
    name="Mul", arity=2, c="({0} * {1})",
    numpy=lambda at, a, b: a * b,
    grad=lambda n, g: (_mul(g, n.children[1]), _mul(g, n.children[0])),
    domain=((-2, 2), (-2, 2)), doc="a * b",
)
_register(
    name="Div", arity=2, c="({0} / {1})",
    numpy=lambda at, a, b: a / b,
    grad=lambda n, g: (
        _div(g, n.children[1]),
        _neg(_div(_mul(g, n), n.children[1])),
    ),
    domain=((-2, 2), (0.5, 2)), doc="a / b",
)
_register(
    name="Neg", arity=1, c="(-{0})",
    numpy=lambda at, a: -a,
    grad=lambda n, g: (_neg(g),),
    domain=((-2, 2),), doc="-a",
)
_register(
    name="Square", arity=1, method="square", c="({0} * {0})",
    numpy=lambda at, a: a * a,
    grad=lambda n, g: (_mul(intcst(2), _mul(g, n.children[0])),),
    domain=((-2, 2),), doc="a ** 2",
)
# Elementwise ops whose C spelling needs attributes.
#: Integer powers up to this |n| are products (a balanced tree, whose
#: repeated factors the compiler computes once: about 2 log2 |n| products,
#: vectorised like the rest of the formula); beyond, see _pow_lines. Either
#: way the code does not grow with n beyond a few lines.
POW_PRODUCT_MAX = 16


def _product(x: str, n: int) -> str:
    """x ** n (n >= 1) as a balanced product: n factors of text at most."""
    if n == 1:
        return x
    half = _product(x, n // 2)
    return f"({half} * {half} * {x})" if n & 1 else f"({half} * {half})"


def _pow_c(at, dims, ops):
    n = at[0]
    if n == 0:
        return ["(real_t)1" for _ in ops[0]]
    if abs(n) <= 3:  # x * x * x, as always
        powers = ["(" + " * ".join([x] * abs(n)) + ")" for x in ops[0]]
    else:
        powers = [_product(x, abs(n)) for x in ops[0]]
    return powers if n > 0 else [f"((real_t)1 / {p})" for p in powers]


def _pow_lines(at, dims, ops, name):
    """|n| > POW_PRODUCT_MAX: in float64, pow(x, n) (C's pow, within an ulp,
    as NumPy's reference); in float32, x ** |n| by repeated squaring in
    double, vectorised (at most 2 log2 |n| products; their rounding, |n| 2^-53
    relative at most, 2e-9 at MAX_EXPONENT, stays far below float32's), then
    1 / that for n < 0. The real type is known to the C compiler only: the
    branch not taken is a constant condition, compiled away."""
    n = at[0]
    if abs(n) <= POW_PRODUCT_MAX:
        return None
    lines, exprs = [], []
    for c, x in enumerate(ops[0]):
        base, k, bits, factors = f"{name}_{c}_p", abs(n), 0, []
        lines.append(f"const double {base}0 = (double){x};")
        while True:
            if k & 1:
                factors.append(f"{base}{bits}")
            k >>= 1
            if not k:
                break
            lines.append(f"const double {base}{bits + 1} = {base}{bits} * {base}{bits};")
            bits += 1
        power = " * ".join(factors)
        squared = f"(real_t)({power})" if n > 0 else f"(real_t)(1.0 / ({power}))"
        exprs.append(f"(sizeof(real_t) == 4 ? {squared} : pow({x}, (real_t){n}))")
    return lines, exprs


def _pow_dim(at, dims):
    why = check_int(at[0], -MAX_EXPONENT, MAX_EXPONENT, "exponent")
    if why is not None:
        raise FormulaError(f"Pow: {why} (an integer power; larger ones are 0, 1 or "
                           "infinite in floating point)")
    return dims[0]


def _round_dim(at, dims):
    why = check_int(at[0], -MAX_DECIMALS, MAX_DECIMALS, "number of decimals")
    if why is not None:
        raise FormulaError(f"round: {why} (10 ** decimals must be a finite float)")
    return dims[0]


def _round_c(at, dims, ops):
    scale = f"(real_t)1e{at[0]}"
    return [f"(rint({x} * {scale}) / {scale})" for x in ops[0]]


_register(
    name="Pow", arity=1, c_vec=_pow_c, c_lines=_pow_lines, dim=_pow_dim,
    examples=(((3,), (3,)), ((2,), (-2,))),
    numpy=lambda at, a: a ** at[0],
    grad=lambda n, g: (
        _mul(intcst(n.attrs[0]), _mul(g, make("Pow", n.children[0], attrs=(n.attrs[0] - 1,)))),
    ),
    domain=((0.5, 2),),
    doc="a ** n for an integer n (attribute, |n| <= MAX_EXPONENT); rendered "
        "as products for small n, squaring or pow() beyond: the code does not grow "
        "with n",
)
_register(
    name="Inv", arity=1, method="inv", c="((real_t)1 / {0})",
    numpy=lambda at, a: 1 / a,
    grad=lambda n, g: (_neg(_mul(g, make("Square", n))),),
    domain=((0.5, 2),), doc="1 / a",
)

# ---------------------------------------------------------------------------
# Transcendental functions
# ---------------------------------------------------------------------------
_register(
    name="Exp", arity=1, method="exp",
    # KT_EXP is defined by each template: in C an inline, vectorisable exp
    # (templates/kt_exp.h) that flushes results below the smallest normal
    # number to 0, since library vector exps take a slow path on underflow.
    c="KT_EXP({0})", numpy=lambda at, a: np.exp(a),
    grad=lambda n, g: (_mul(g, n),), domain=((-2, 2),), doc="exp(a)",
)
_register(
    name="Exp2", arity=1, method="exp2",
    # 2 ** a. The CUDA renderer rewrites float32
    # exp(c x) as exp2((c log2 e) x), one hardware instruction (see
    # _cuda_backend); KT_EXP2 is defined by each template.
    c="KT_EXP2({0})", numpy=lambda at, a: np.exp2(a),
    grad=lambda n, g: (_mul(g, _mul(n, make("Log", intcst(2)))),),
    domain=((-2, 2),), doc="2 ** a",
)
_register(
    name="Log", arity=1, method="log", c="log({0})", numpy=lambda at, a: np.log(a),
    grad=lambda n, g: (_div(g, n.children[0]),), domain=((0.2, 3),), doc="log(a)",
)
_register(
    name="Sin", arity=1, method="sin", c="sin({0})", numpy=lambda at, a: np.sin(a),
    grad=lambda n, g: (_mul(g, make("Cos", n.children[0])),),
    domain=((-3, 3),), doc="sin(a)",
)
_register(
    name="Cos", arity=1, method="cos", c="cos({0})", numpy=lambda at, a: np.cos(a),
    grad=lambda n, g: (_neg(_mul(g, make("Sin", n.children[0]))),),
    domain=((-3, 3),), doc="cos(a)",
)
_register(
    name="Tan", arity=1, method="tan", c="tan({0})", numpy=lambda at, a: np.tan(a),
    grad=lambda n, g: (_mul(g, _add(_one(), make("Square", n))),),
    domain=((-1.2, 1.2),), doc="tan(a)",
)
_register(
    name="Asin", arity=1, method="asin", c="asin({0})", numpy=lambda at, a: np.arcsin(a),
    grad=lambda n, g: (
        _mul(g, make("Rsqrt", _sub(_one(), make("Square", n.children[0])))),
    ),
    domain=((-0.9, 0.9),), doc="arcsin(a)",
)
_register(
    name="Acos", arity=1, method="acos", c="acos({0})", numpy=lambda at, a: np.arccos(a),
    grad=lambda n, g: (
        _neg(_mul(g, make("Rsqrt", _sub(_one(), make("Square", n.children[0]))))),
    ),
    domain=((-0.9, 0.9),), doc="arccos(a)",
)
_register(
    name="Atan", arity=1, method="atan", c="atan({0})", numpy=lambda at, a: np.arctan(a),
    grad=lambda n, g: (
        _div(g, _add(_one(), make("Square", n.children[0]))),
    ),
    domain=((-3, 3),), doc="arctan(a)",
)

_register(
    name="Tanh", arity=1, method="tanh", c="tanh({0})", numpy=lambda at, a: np.tanh(a),
    grad=lambda n, g: (_mul(g, _sub(_one(), make("Square", n))),),
    domain=((-3, 3),), doc="tanh(a)",
)


def _atan2_grad(n, g):
    y, x = n.children
    r2 = _add(make("Square", x), make("Square", y))
    return (_div(_mul(g, x), r2), _neg(_div(_mul(g, y), r2)))


_register(
    name="Atan2", arity=2, c="atan2({0}, {1})",
    numpy=lambda at, y, x: np.arctan2(y, x), grad=_atan2_grad,
    domain=((0.3, 2), (0.3, 2)), doc="atan2(y, x), the angle of the point (x, y)",
)
_register(
    name="Sqrt", arity=1, method="sqrt", c="sqrt({0})", numpy=lambda at, a: np.sqrt(a),
    grad=lambda n, g: (_div(g, _mul(intcst(2), n)),),
    domain=((0.2, 3),), doc="sqrt(a)",
)
_register(
    name="Rsqrt", arity=1, method="rsqrt",
    # KeOps convention: rsqrt(0) = 0, so that normalize(0) = 0 rather than NaN.
    c="({0} == 0 ? (real_t)0 : (real_t)1 / sqrt({0}))",
    cuda="({0} == 0 ? (real_t)0 : rsqrt({0}))",
    numpy=lambda at, a: _rsqrt_np(a),
    grad=lambda n, g: (
        _neg(_div(_mul(g, n), _mul(intcst(2), n.children[0]))),
    ),
    domain=((0.2, 3),), doc="1 / sqrt(a), with rsqrt(0) = 0",
)


def _rsqrt_np(a):
    with np.errstate(divide="ignore"):
        out = 1 / np.sqrt(a)
    return np.where(a == 0, 0, out).astype(out.dtype, copy=False)


def _sinc_np(a):
    return np.sinc(a)


_register(
    name="Sinc", arity=1, method="sinc",
    c="({0} == 0 ? (real_t)1 : sin(PI_R * {0}) / (PI_R * {0}))",
    numpy=lambda at, a: _sinc_np(a),
    # d/da sin(pi a)/(pi a) = (cos(pi a) - sinc(a)) / a  (a != 0)
    grad=lambda n, g: (
        _div(_mul(g, _sub(make("Cos", _mul(pi(), n.children[0])), n)), n.children[0]),
    ),
    domain=((0.2, 2),), doc="sin(pi a) / (pi a), 1 at 0 (NumPy's normalised sinc)",
)
_register(
    name="XLogX", arity=1, method="xlogx", c="({0} == 0 ? (real_t)0 : {0} * log({0}))",
    numpy=lambda at, a: np.where(a == 0, 0, a * np.log(np.where(a == 0, 1, a))),
    grad=lambda n, g: (_mul(g, _add(make("Log", n.children[0]), _one())),),
    domain=((0.2, 3),), doc="a log(a), 0 at 0",
)

# ---------------------------------------------------------------------------
# Piecewise functions (their derivative is taken where they are smooth)
# ---------------------------------------------------------------------------
_register(
    name="Abs", arity=1, method="abs", c="fabs({0})", numpy=lambda at, a: np.abs(a),
    grad=lambda n, g: (_mul(g, make("Sign", n.children[0])),),
    domain=((0.2, 2),), doc="absolute value, abs(a)",
)
_register(
    name="Sign", arity=1, method="sign", c="(real_t)(({0} > 0) - ({0} < 0))",
    numpy=lambda at, a: np.sign(a), grad=lambda n, g: (None,),
    domain=((-2, 2),), doc="sign of a: -1, 0 or 1",
)
_register(
    name="Step", arity=1, method="step", c="(real_t)({0} >= 0)",
    numpy=lambda at, a: (a >= 0).astype(a.dtype), grad=lambda n, g: (None,),
    domain=((-2, 2),), doc="0 for a < 0, else 1",
)
_register(
    name="ReLU", arity=1, method="relu", c="({0} < 0 ? (real_t)0 : {0})",
    numpy=lambda at, a: np.where(a < 0, 0, a).astype(a.dtype, copy=False),
    grad=lambda n, g: (_mul(g, _step(n.children[0])),),
    domain=((0.2, 2),), doc="max(a, 0)",
)
_register(
    name="Floor", arity=1, method="floor", c="floor({0})", numpy=lambda at, a: np.floor(a),
    grad=lambda n, g: (None,), domain=((-2, 2),), doc="floor(a)",
)
_register(
    name="Round", arity=1, c_vec=_round_c, dim=_round_dim,
    examples=(((3,), (1,)), ((2,), (0,))),
    numpy=lambda at, a: np.round(a, at[0]),
    grad=lambda n, g: (None,), domain=((-2, 2),),
    doc="a rounded to ``d`` decimals (attribute), half to even as NumPy",
)
_register(
    name="Clamp", arity=3,
    c="({0} < {1} ? {1} : ({0} > {2} ? {2} : {0}))",
    numpy=lambda at, a, lo, hi: np.where(a < lo, lo, np.where(a > hi, hi, a)),
    grad=lambda n, g: (
        _mul(g, _mul(_step(_sub(n.children[0], n.children[1])),
                     _step(_sub(n.children[2], n.children[0])))),
        _mul(g, _sub(_one(), _step(_sub(n.children[0], n.children[1])))),
        _mul(g, _sub(_one(), _step(_sub(n.children[2], n.children[0])))),
    ),
    domain=((-2, 2), (-3, -2.5), (2.5, 3)), doc="a clamped to [lo, hi]",
)
_register(
    name="IfElse", arity=3, c="({0} >= 0 ? {1} : {2})",
    numpy=lambda at, c, a, b: np.where(c >= 0, a, b),
    grad=lambda n, g: (
        None,
        make("IfElse", n.children[0], g, intcst(0)),
        make("IfElse", n.children[0], intcst(0), g),
    ),
    domain=((-2, 2), (-2, 2), (-2, 2)), doc="a where c >= 0, else b",
)
_register(
    name="Minimum", arity=2, c="(({0} < {1} || {0} != {0}) ? {0} : {1})",
    numpy=lambda at, a, b: np.minimum(a, b),
    grad=lambda n, g: (
        _mul(g, make("LessEqual", n.children[0], n.children[1])),
        _mul(g, make("Greater", n.children[0], n.children[1])),
    ),
    domain=((-2, 2), (-2, 2)), doc="element-wise minimum (NaN propagates)",
)
_register(
    name="Maximum", arity=2, c="(({0} > {1} || {0} != {0}) ? {0} : {1})",
    numpy=lambda at, a, b: np.maximum(a, b),
    grad=lambda n, g: (
        _mul(g, make("GreaterEqual", n.children[0], n.children[1])),
        _mul(g, make("Less", n.children[0], n.children[1])),
    ),
    domain=((-2, 2), (-2, 2)), doc="element-wise maximum (NaN propagates)",
)

# Comparisons give 0 or 1 and have no derivative.
for _name, _sym, _fn in (
    ("Less", "<", np.less),
    ("LessEqual", "<=", np.less_equal),
    ("Greater", ">", np.greater),
    ("GreaterEqual", ">=", np.greater_equal),
    ("Equal", "==", np.equal),
    ("NotEqual", "!=", np.not_equal),
):
    _register(
        name=_name, arity=2, c=f"(real_t)({{0}} {_sym} {{1}})",
        numpy=(lambda fn: lambda at, a, b: fn(a, b).astype(np.result_type(a, b)))(_fn),
        grad=lambda n, g: (None, None),
        domain=((-2, 2), (-2, 2)), doc=f"1 where a {_sym} b, else 0",
    )


# ---------------------------------------------------------------------------
# Vector operations (structured: they act across the feature components):
# their own module, registered here, so that OPS keeps its order
# ---------------------------------------------------------------------------
from . import _vector_ops  # noqa: E402,F401


# ---------------------------------------------------------------------------
# Composite operations: formulas over primitives, no rendering or derivative;
# their own modules, for size (re-exported here)
# ---------------------------------------------------------------------------
from ._composites import (dot, mod, norm2, normalize, powf, sqdist,  # noqa: E402,F401
                          sqnorm2, weightedsqdist, weightedsqnorm)

# Composites of pykeops' LazyTensor surface (feature-wise min/max, tensor
# dot, Kronecker product, B-splines): their own module, for size.
from ._ops_keops import (argmax_feat, argmin_feat, bspline, gather,  # noqa: E402,F401
                         kron, max_feat, min_feat, softdtw_sqdist, tensordot)
