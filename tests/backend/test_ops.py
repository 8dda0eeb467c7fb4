"""Every operation of the registry against an independent reference.

The tests loop over :data:`kerneltools.backend._ops.OPS`: adding an operation
without adding its reference to ``_reference.REFERENCE`` makes
``test_every_op_has_a_reference`` fail. Each operation is built with i-variables, j-variables and parameters
(dimension-1 operands broadcast against dimension-D ones, several variables of
one category, N or M equal to 1), reduced over i and over j, and compared with
the dense ``(N, M, D)`` reference. Derivative rules are checked against central
finite differences of the reference, operand by operand.
"""

from __future__ import annotations

import functools
import zlib

import numpy as np
import pytest
from _helpers import LEAF, assert_close, fd_gradient, grid_operand
from _reference import REFERENCE, matvec

import kerneltools as kt
from kerneltools.backend._ir import var
from kerneltools.backend._ops import OPS, make

#: Wider sampling domains for value tests of operations whose registry domain
#: avoids a kink only for the sake of derivatives (and for Clamp, whose
#: registry domain never clamps).
VALUE_DOMAIN = {
    "Abs": ((-2, 2),),
    "ReLU": ((-2, 2),),
    "Sinc": ((-2, 2),),
    "Clamp": ((-3, 3), (-1.5, -0.5), (0.5, 1.5)),
}

#: Points with a documented convention, injected into the first operand.
SPECIAL_POINTS = {
    "Rsqrt": [0.0],
    "XLogX": [0.0],
    "Sinc": [0.0, 1.0, -1.0],
    "Abs": [0.0],
    "ReLU": [0.0],
    "Sign": [0.0],
    "Step": [0.0],
    "Floor": [-1.0, 0.0, 1.0],
    "Round": [0.5, 1.5, -2.5, 0.25],
    "OneHot": [0.5, 1.5, 2.5],
}

#: Operations with no public spelling (produced by autodiff only).
INTERNAL_OPS = {"ExtractT"}

D = 3
SIZES = [(7, 5), (1, 4), (6, 1)]  # (N, M), with N = 1 and M = 1
CATS = ("i", "j", "p")


def _has_derivative(op) -> tuple[bool, ...]:
    """Per operand: does the registry's derivative rule give a formula?"""
    return _derivative_operands(op.name)


@functools.cache
def _derivative_operands(name: str) -> tuple[bool, ...]:
    op = OPS[name]
    case, attrs = value_cases(op)[0]
    leaves = [var(cat, f"t{k}", d) for k, (cat, d) in enumerate(case)]
    node = make(name, *leaves, attrs=attrs)
    contribs = op.grad(node, var("i", "g", node.dim))
    return tuple(c is not None for c in contribs)


def value_cases(op):
    """Operand lists ((category, dimension), ...) with attributes, for one op."""
    if op.examples:  # structured operations: the registry's samples
        out = []
        for dims, attrs in op.examples:
            for rot in range(3):
                cats = [CATS[(rot + k) % 3] for k in range(op.arity)]
                out.append((tuple(zip(cats, dims)), tuple(attrs)))
        return out
    rows = [
        [("i", D), ("j", D), ("p", D)],  # one of each category
        [("j", 1), ("p", D), ("i", D)],  # dimension 1 broadcast against D
        [("p", D), ("i", D), ("j", 1)],
        [("j", D), ("j", 1), ("j", D)],  # several variables of one category
        [("i", 1), ("j", 1), ("p", 1)],  # all scalars
    ]
    return [(tuple(r[: op.arity]), ()) for r in rows]


def sample_operands(op, case, N, M, rng, dtype, *, values=True):
    """Arrays for the operands of ``case``, uniform in the op's domain.

    For value tests (``values=True``) piecewise-constant operations are sampled
    on a grid of quarters, so that ties and jumps are hit exactly, and the
    points with a documented convention are included.
    """
    domains = VALUE_DOMAIN.get(op.name, op.domain)
    on_grid = values and not any(_has_derivative(op))
    arrays = []
    for k, (cat, d) in enumerate(case):
        lo, hi = domains[k]
        shape = {"i": (N, d), "j": (M, d), "p": (d,)}[cat]
        a = rng.uniform(lo, hi, size=shape)
        if on_grid:  # piecewise-constant ops: hit their ties and jumps exactly
            a = np.clip(np.round(a * 4) / 4, lo, hi)
        if values and k == 0 and op.name in SPECIAL_POINTS:
            flat = a.reshape(-1)
            pts = SPECIAL_POINTS[op.name][: flat.size]
            flat[: len(pts)] = pts
        arrays.append(a.astype(dtype))
    return arrays


def build(op, case, attrs, arrays, N, M):
    """The LazyTensor ``op(operands)`` of shape (N, M, .), and its leaves."""
    leaves = [LEAF[cat](a) for (cat, _), a in zip(case, arrays)]
    node = make(op.name, *(leaf.formula for leaf in leaves), attrs=attrs)
    return _lazy(node, leaves, N, M), leaves


def _lazy(node, leaves, N, M):
    bindings = {}
    for leaf in leaves:
        bindings.update(leaf._bindings)
    return kt.LazyTensor._new(node, bindings, N, M)


def dense(op, case, attrs, arrays, N, M):
    """The reference values on the full (N, M, dim) grid, in float64."""
    vals = [grid_operand(cat, a) for (cat, _), a in zip(case, arrays)]
    out = np.asarray(REFERENCE[op.name](attrs, *vals), dtype=np.float64)
    return np.broadcast_to(out, (N, M, out.shape[-1]))


def _seed(*parts) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(parts).encode()))


def _all_cases(op, N, M, dtype, rng):
    """One formula: the concatenation of the op over all its cases.

    Concatenating keeps compiled backends at one kernel per op, dtype and
    reduction; the comparison is still made case by case.
    """
    formulas, refs, labels = [], [], []
    for case, attrs in value_cases(op):
        arrays = sample_operands(op, case, N, M, rng, dtype)
        F, _ = build(op, case, attrs, arrays, N, M)
        formulas.append(F)
        refs.append(dense(op, case, attrs, arrays, N, M))
        labels.append(f"{op.name}{attrs} on {case}")
    F = functools.reduce(lambda a, b: a.concat(b), formulas)
    return F, refs, labels


#: Absolute floor of the error scale: values that cancel to ~0 (sin(pi) in
#: Sinc, x - x) still carry the rounding error of their O(1) intermediates.
_FLOOR = 1e-2


def _check_cases(got, refs, labels, reduce, rtol, scale_fn):
    start = 0
    for ref, label in zip(refs, labels):
        e = ref.shape[-1]
        assert_close(
            got[:, start : start + e],
            reduce(ref),
            rtol,
            scale=scale_fn(ref),
            err_msg=label,
        )
        start += e
    assert got.shape[1] == start


# ---------------------------------------------------------------------------
# The registry and its references
# ---------------------------------------------------------------------------
def test_every_op_has_a_reference():
    assert set(REFERENCE) == set(OPS), (
        f"missing references: {sorted(set(OPS) - set(REFERENCE))}; "
        f"stale references: {sorted(set(REFERENCE) - set(OPS))}"
    )


@pytest.mark.parametrize("name", sorted(OPS))
def test_registry_entry_is_complete(name):
    op = OPS[name]
    assert len(op.domain) == op.arity, "one sampling domain per operand"
    assert all(lo < hi for lo, hi in op.domain)
    assert (op.c is None) != (op.c_vec is None), "exactly one C spelling"
    assert op.doc
    if op.method is not None:
        assert op.arity == 1 and op.elementwise
    # The output dimension of every case agrees with the reference.
    for case, attrs in value_cases(op):
        leaves = [var(cat, f"v{k}", d) for k, (cat, d) in enumerate(case)]
        node = make(name, *leaves, attrs=attrs)
        vals = [np.ones((1, 1, d)) for _, d in case]
        assert REFERENCE[name](attrs, *vals).shape[-1] == node.dim, case


# Public spellings of the operations that have no registry method.
PUBLIC = {
    "Add": lambda at, a, b: a + b,
    "Sub": lambda at, a, b: a - b,
    "Mul": lambda at, a, b: a * b,
    "Div": lambda at, a, b: a / b,
    "Neg": lambda at, a: -a,
    "Pow": lambda at, a: a ** at[0],
    "Abs": lambda at, a: abs(a),
    "Atan2": lambda at, a, b: a.atan2(b),
    "Round": lambda at, a: a.round(at[0]),
    "Clamp": lambda at, a, lo, hi: a.clamp(lo, hi),
    "IfElse": lambda at, c, a, b: c.ifelse(a, b),
    "Minimum": lambda at, a, b: kt.minimum(a, b),
    "Maximum": lambda at, a, b: kt.maximum(a, b),
    "Less": lambda at, a, b: a < b,
    "LessEqual": lambda at, a, b: a <= b,
    "Greater": lambda at, a, b: a > b,
    "GreaterEqual": lambda at, a, b: a >= b,
    "Equal": lambda at, a, b: a.eq(b),
    "NotEqual": lambda at, a, b: a.ne(b),
    "SumFeat": lambda at, a: a.sum(-1),
    "Extract": lambda at, a: a.extract(*at),
    "Concat": lambda at, a, b: a.concat(b),
    "MatVecMult": lambda at, a, b: a.matvecmult(b),
    "VecMatMult": lambda at, a, b: a.vecmatmult(b),
    "TensorProd": lambda at, a, b: a.tensorprod(b),
    "OneHot": lambda at, a: a.one_hot(at[0]),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_public_spelling_builds_the_registry_node(name):
    """LazyTensor methods and operators build exactly the registry's node."""
    op = OPS[name]
    if name in INTERNAL_OPS:
        assert op.method is None and name not in PUBLIC
        return
    assert op.method is not None or name in PUBLIC, f"{name} has no public spelling"
    rng = _seed("public", name)
    for case, attrs in value_cases(op):
        arrays = sample_operands(op, case, 4, 3, rng, np.float64)
        F, leaves = build(op, case, attrs, arrays, 4, 3)
        if op.method is not None:
            G = getattr(leaves[0], op.method)()
        else:
            G = PUBLIC[name](attrs, *leaves)
        assert G.formula is F.formula, (case, G.formula, F.formula)


# ---------------------------------------------------------------------------
# Values: reductions over j and over i against the dense reference
# ---------------------------------------------------------------------------
#: Operations whose value tests share kernels, this many at a time: a
#: compiled backend builds one kernel per group, dtype, reduction and axis for
#: the concatenation of the group's formulas (each op keeps its own variables
#: and data, and is checked on its own output columns). Four ops per kernel
#: halve the C backend's compile time (0.17 s per kernel, about half of it
#: the same for every kernel); larger groups make gcc slower again (8 to a
#: kernel: 7.3 s of gcc for all value groups, against 6.4 s for 4).
GROUP = 4


def _groups(names) -> dict[str, tuple[str, ...]]:
    names = sorted(names)
    groups = [tuple(names[k : k + GROUP]) for k in range(0, len(names), GROUP)]
    return {name: g for g in groups for name in g}


@functools.cache
def _op_data(name: str, dtype_name: str, tag: str):
    """[(N, M, F, refs, labels)] over SIZES: the data of one op's value test,
    drawn from the op's own seed in the same order whether or not it is
    evaluated with its group."""
    op, dtype = OPS[name], np.dtype(dtype_name)
    rng = _seed(tag, name, dtype_name)
    return [(N, M, *_all_cases(op, N, M, dtype, rng)) for N, M in SIZES]


@functools.cache
def _group_reduced(group, tag, dtype_name, size, method, axis, backend):
    """{op name: its output columns} of one reduction of the group's kernel,
    or None if the group's kernel fails (each op then runs alone, so that the
    failure names the op that causes it)."""
    formulas = [_op_data(name, dtype_name, tag)[size][2] for name in group]
    return _concat_reduced(group, formulas, method, axis, backend)


def _concat_reduced(keys, formulas, method, axis, backend):
    """{key: its output columns} of ``method`` over the concatenation of
    ``formulas`` (one kernel), or None if that kernel fails."""
    F = functools.reduce(lambda a, b: a.concat(b), formulas)
    try:
        got = getattr(F, method)(axis=axis, backend=backend)
    except Exception:
        return None
    out, start = {}, 0
    for key, G in zip(keys, formulas, strict=True):
        out[key] = got[:, start : start + G.dim]
        start += G.dim
    assert start == got.shape[1]
    return out


def _reduced(name, groups, tag, dtype, size, method, axis, backend):
    """``F.<method>(axis)`` of op ``name``'s formula for SIZES[size]."""
    cols = _group_reduced(groups[name], tag, dtype.name, size, method, axis, backend)
    if cols is None:
        F = _op_data(name, dtype.name, tag)[size][2]
        return getattr(F, method)(axis=axis, backend=backend)
    return cols[name]


_VALUE_GROUPS = _groups(OPS)


def _sum_axes(backend, dtype) -> tuple[int, ...]:
    """The axes an op's values are summed over: both, except on the C backend
    in float32, which sums over j only. Each axis is a kernel of its own per
    group (the operands' categories rotate), and which axis is reduced does
    not depend on the dtype: float32's C code of every op is the axis=1
    kernel, the axis=0 kernels are float64's (12 compiles fewer, about 7 CPU
    s from an empty cache); the NumPy backend sums both in both dtypes."""
    return (1,) if backend == "cpu" and dtype == np.float32 else (1, 0)


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_values_sum(name, backend, dtype, rtol):
    for size, (N, M, F, refs, labels) in enumerate(_op_data(name, dtype.name, "values")):
        for axis in _sum_axes(backend, dtype):
            got = _reduced(name, _VALUE_GROUPS, "values", dtype, size, "sum", axis, backend)
            assert got.dtype == dtype
            _check_cases(
                got,
                refs,
                [f"{lab}, Sum axis={axis}, N={N}, M={M}" for lab in labels],
                lambda r, ax=axis: r.sum(axis=ax),
                rtol,
                lambda r, ax=axis: _FLOOR + np.abs(r).sum(axis=ax),
            )


MINMAX_OPS = ["Sub", "Exp", "Abs", "Clamp", "IfElse", "Minimum", "OneHot", "MatVecMult"]
_MINMAX_GROUPS = _groups(MINMAX_OPS)


@pytest.mark.parametrize("name", MINMAX_OPS)
def test_op_values_min_max(name, backend, dtype, rtol):
    for size, (N, M, F, refs, labels) in enumerate(_op_data(name, dtype.name, "minmax")):
        for method, axis, fn in (("min", 1, np.min), ("max", 0, np.max)):
            got = _reduced(name, _MINMAX_GROUPS, "minmax", dtype, size, method, axis, backend)
            _check_cases(
                got,
                refs,
                [f"{lab}, {method} axis={axis}, N={N}, M={M}" for lab in labels],
                lambda r, ax=axis, f=fn: f(r, axis=ax),
                rtol,
                lambda r, ax=axis: _FLOOR + np.abs(r).max(axis=ax),
            )


# Composites: formulas over primitives, with their own references.
# Each entry: (LazyTensors x_i, y_j, u_i > 0, s (1,), w (D,), W (D*D,)) -> formula.
COMPOSITES = {
    "sqnorm2": (
        lambda x, y, u, s, w, W: x.sqnorm2(),
        lambda x, y, u, s, w, W: (x * x).sum(-1, keepdims=True),
    ),
    "norm2": (
        lambda x, y, u, s, w, W: (x - y).norm2(),
        lambda x, y, u, s, w, W: np.linalg.norm(x - y, axis=-1, keepdims=True),
    ),
    "normalize": (
        lambda x, y, u, s, w, W: (x - y).normalize(),
        lambda x, y, u, s, w, W: (
            (x - y) / np.linalg.norm(x - y, axis=-1, keepdims=True)
        ),
    ),
    "sqdist": (
        lambda x, y, u, s, w, W: x.sqdist(y),
        lambda x, y, u, s, w, W: ((x - y) ** 2).sum(-1, keepdims=True),
    ),
    "dot": (
        lambda x, y, u, s, w, W: x | y,
        lambda x, y, u, s, w, W: (x * y).sum(-1, keepdims=True),
    ),
    "sum(-1)": (
        lambda x, y, u, s, w, W: (x * y).sum(-1),
        lambda x, y, u, s, w, W: (x * y).sum(-1, keepdims=True),
    ),
    "weightedsqnorm scalar": (
        lambda x, y, u, s, w, W: x.weightedsqnorm(s),
        lambda x, y, u, s, w, W: s * (x * x).sum(-1, keepdims=True),
    ),
    "weightedsqnorm diagonal": (
        lambda x, y, u, s, w, W: y.weightedsqnorm(w),
        lambda x, y, u, s, w, W: (w * y * y).sum(-1, keepdims=True),
    ),
    "weightedsqdist full": (
        lambda x, y, u, s, w, W: x.weightedsqdist(y, W),
        lambda x, y, u, s, w, W: np.einsum(
            "...a,...ab,...b->...", x - y, W.reshape(W.shape[:-1] + (D, D)), x - y
        )[..., None],
    ),
    "real power": (lambda x, y, u, s, w, W: u**1.5, lambda x, y, u, s, w, W: u**1.5),
    "real power of a formula": (
        lambda x, y, u, s, w, W: u**s,
        lambda x, y, u, s, w, W: u**s,
    ),
    "number ** formula": (
        lambda x, y, u, s, w, W: 2.0**x,
        lambda x, y, u, s, w, W: 2.0**x,
    ),
    "** 0.5": (lambda x, y, u, s, w, W: u**0.5, lambda x, y, u, s, w, W: np.sqrt(u)),
    "** -0.5": (
        lambda x, y, u, s, w, W: u**-0.5,
        lambda x, y, u, s, w, W: 1 / np.sqrt(u),
    ),
    "** 2.0": (lambda x, y, u, s, w, W: x**2.0, lambda x, y, u, s, w, W: x * x),
    "mod": (
        lambda x, y, u, s, w, W: (x - y).mod(1.5, 0.25),
        lambda x, y, u, s, w, W: 0.25 + np.mod(x - y - 0.25, 1.5),
    ),
    "elem": (
        lambda x, y, u, s, w, W: x[1] * y[-1],
        lambda x, y, u, s, w, W: x[..., 1:2] * y[..., 2:3],
    ),
    "slice": (
        lambda x, y, u, s, w, W: x[1:3] - y[:2],
        lambda x, y, u, s, w, W: x[..., 1:3] - y[..., :2],
    ),
    "numbers and arrays": (
        lambda x, y, u, s, w, W: 2 * x - 1 / (u + 1.0) + 3 - x / 4 + (0.5 - y) * w,
        lambda x, y, u, s, w, W: 2 * x - 1 / (u + 1.0) + 3 - x / 4 + (0.5 - y) * w,
    ),
    "matrix parameter": (
        lambda x, y, u, s, w, W: W.matvecmult(y),
        lambda x, y, u, s, w, W: matvec(W, y),
    ),
}


def test_composites(backend, dtype, rtol):
    """All composites at once (one kernel per dtype), compared one by one."""
    rng = _seed("composite")
    N, M = 6, 5
    data = {
        "x": ("i", rng.uniform(-2, 2, (N, D))),
        "y": ("j", rng.uniform(-2, 2, (M, D))),
        "u": ("i", rng.uniform(0.2, 2, (N, 1))),
        "s": ("p", rng.uniform(0.5, 2, (1,))),
        "w": ("p", rng.uniform(0.5, 2, (D,))),
        "W": ("p", rng.uniform(-1, 1, (D * D,))),
    }
    data = {k: (c, a.astype(dtype)) for k, (c, a) in data.items()}
    leaves = [LEAF[c](a) for c, a in data.values()]
    grids = [grid_operand(c, a) for c, a in data.values()]
    formulas, refs = [], []
    for name, (build_fn, ref_fn) in COMPOSITES.items():
        F = build_fn(*leaves)
        ref = ref_fn(*grids)
        # The shape says which indices the formula uses (1 for the others);
        # as in pykeops, a scalar formula's shape is (N, M).
        assert ref.shape[:2] + (F.dim,) == np.shape(ref), name
        assert F.shape == ref.shape[:2] + ((F.dim,) if F.dim > 1 else ()), name
        formulas.append(F)
        refs.append(np.broadcast_to(ref, (N, M, F.dim)))
    F = functools.reduce(lambda a, b: a.concat(b), formulas)
    for axis in (1, 0):
        got = F.sum(axis=axis, backend=backend)
        start = 0
        for name, ref in zip(COMPOSITES, refs):
            e = ref.shape[-1]
            tol = rtol * 10 if name == "mod" else rtol  # x - m floor(x / m) cancels
            assert_close(
                got[:, start : start + e],
                ref.sum(axis=axis),
                tol,
                scale=_FLOOR + np.abs(ref).sum(axis=axis),
                err_msg=f"{name}, axis={axis}",
            )
            start += e


def test_normalize_of_zero_is_zero(backend):
    x = np.zeros((3, 2))
    x[1] = [3.0, 4.0]
    out = (kt.Vi(x).normalize() * kt.Vj(np.ones((2, 1)))).sum(axis=1, backend=backend)
    assert_close(out, [[0, 0], [1.2, 1.6], [0, 0]], 1e-12)


# ---------------------------------------------------------------------------
# Derivatives: the registry's rules against central finite differences
# ---------------------------------------------------------------------------
def _grad_params():
    params = []
    for name, op in OPS.items():
        for c in range(2):
            for k in range(op.arity):
                params.append(pytest.param(name, c, k, id=f"{name}-case{c}-arg{k}"))
    return params


#: Sizes of the derivative tests.
GRAD_N, GRAD_M = 4, 3
#: Derivative cases summed by one kernel. Their formulas are smaller than the
#: value tests' (one case each, not all of an op's cases): on the C backend 8
#: to a kernel take 4.4 s of gcc for all of them, against 8.2 s for 4 to a
#: kernel and 4.5 s for 16 (children's CPU time, cold cache, shared machine).
GRAD_GROUP = 8


def _grad_axis(name, case_index, k) -> int:
    """The axis a gradient formula is summed over: all but its variable's own."""
    return 0 if value_cases(OPS[name])[case_index][0][k][0] == "j" else 1


def _grad_groups() -> dict[tuple, tuple]:
    """The derivative cases with a rule, GRAD_GROUP to a kernel, per summed axis.

    As for the value tests, the gradient formulas of a group are concatenated
    and summed by one kernel (one compile instead of GRAD_GROUP); each case is still
    checked on its own columns, and alone if the group's kernel fails.
    """
    by_axis: dict[int, list] = {0: [], 1: []}
    for p in _grad_params():
        name, c, k = p.values
        if _has_derivative(OPS[name])[k]:
            by_axis[_grad_axis(name, c, k)].append((name, c, k))
    out = {}
    for members in by_axis.values():
        for start in range(0, len(members), GRAD_GROUP):
            group = tuple(members[start : start + GRAD_GROUP])
            out.update({m: group for m in group})
    return out


@functools.cache
def _grad_case(name, case_index, k):
    """(arrays, dense weights g_ij, gradient formula G) of one derivative case,
    drawn from its own seed whether or not it is evaluated with its group."""
    op = OPS[name]
    case, attrs = value_cases(op)[case_index]
    N, M = GRAD_N, GRAD_M
    rng = _seed("grad", name, case_index, k)
    arrays = sample_operands(op, case, N, M, rng, np.float64, values=False)
    F, leaves = build(op, case, attrs, arrays, N, M)
    E = F.dim
    e, f = rng.uniform(-1, 1, (N, E)), rng.uniform(-1, 1, (M, E))
    g = kt.Vi(e) * kt.Vj(f)
    weights = e[:, None, :] * f[None, :, :]
    return arrays, weights, F.grad(leaves[k], g)


@functools.cache
def _grad_group_summed(group, backend):
    """{case: its columns of the group's summed gradients}, or None if the
    group's kernel fails."""
    Gs = [_grad_case(*m)[2] for m in group]
    return _concat_reduced(group, Gs, "sum", _grad_axis(*group[0]), backend)


_GRAD_GROUPS = _grad_groups()


def _summed_gradient(name, case_index, k, backend):
    """Sum of case (name, case_index, k)'s gradient formula over everything
    but its variable's own index."""
    m = (name, case_index, k)
    cols = _grad_group_summed(_GRAD_GROUPS[m], backend)
    G = _grad_case(*m)[2]
    got = G.sum(axis=_grad_axis(*m), backend=backend) if cols is None else cols[m]
    cat = value_cases(OPS[name])[case_index][0][k][0]
    return got.sum(axis=0) if cat == "p" else got


@pytest.mark.parametrize("name,case_index,k", _grad_params())
def test_op_derivative_vs_finite_differences(name, case_index, k, backend):
    """d/dv sum_ij <F_ij, g_ij> from grad() against central differences."""
    op = OPS[name]
    case, attrs = value_cases(op)[case_index]
    N, M = GRAD_N, GRAD_M
    arrays, weights, G = _grad_case(name, case_index, k)

    def phi_diff(plus, minus):
        args_p = [plus if m == k else a for m, a in enumerate(arrays)]
        args_m = [minus if m == k else a for m, a in enumerate(arrays)]
        diff = dense(op, case, attrs, args_p, N, M) - dense(
            op, case, attrs, args_m, N, M
        )
        return float((diff * weights).sum())

    fd = fd_gradient(phi_diff, arrays[k])
    assert G.dim == case[k][1]
    if not _has_derivative(op)[k]:
        # No derivative rule: zero (the op is piecewise constant in this operand).
        assert G.formula.is_const(0), G.formula
        assert_close(fd, np.zeros_like(fd), 0, err_msg="piecewise constant")
        return
    got = _summed_gradient(name, case_index, k, backend)
    assert_close(
        got,
        fd,
        1e-5,
        scale=np.abs(fd) + 1e-3 * max(1.0, np.abs(fd).max()),
        err_msg=f"d{name}/d(operand {k}) on {case}",
    )


# ---------------------------------------------------------------------------
# Gradients of gradients
# ---------------------------------------------------------------------------
def test_second_derivative_of_gaussian_kernel(backend):
    """grad of grad of sum_j exp(-gamma |x_i - y_j|^2) e_i, w.r.t. x twice."""
    rng = _seed("hessian")
    N, M = 5, 4
    x, y = rng.uniform(-1, 1, (N, D)), rng.uniform(-1, 1, (M, D))
    e, f = rng.uniform(-1, 1, (N, 1)), rng.uniform(-1, 1, (N, D))
    gamma = 0.7
    x_i, y_j = kt.Vi(x), kt.Vj(y)
    K = (-kt.Pm(gamma) * x_i.sqdist(y_j)).exp()
    G1 = K.grad(x_i, kt.Vi(e))  # dim D: e_i dK/dx_i
    G2 = G1.grad(x_i, kt.Vi(f))  # dim D: (d/dx_i <G1, f_i>)

    def first(xx):  # dense first derivative, by hand: -2 gamma (x - y) K e
        diff = xx[:, None, :] - y[None, :, :]
        Kd = np.exp(-gamma * (diff**2).sum(-1, keepdims=True))
        return (-2 * gamma * diff * Kd * e[:, None, :]).sum(axis=1)

    assert_close(
        G1.sum(axis=1, backend=backend), first(x), 1e-10, scale=1 + np.abs(first(x))
    )
    fd = fd_gradient(lambda p, m: float(((first(p) - first(m)) * f).sum()), x)
    got = G2.sum(axis=1, backend=backend)
    assert_close(got, fd, 1e-5, scale=np.abs(fd) + 1e-3 * np.abs(fd).max())
    # Shared subexpressions keep the second derivative small (31 nodes today).
    assert G2.formula.size() < 40, G2.formula.size()


# ---------------------------------------------------------------------------
# OneHot's dimension is checked where the node is made.
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("D", [0, -3])
def test_one_hot_needs_a_positive_dimension(D):
    match = rf"one_hot: 'D' must be an integer between 1 and \d+, got {D}\b"
    with pytest.raises(ValueError, match=match):
        kt.Vi(np.arange(4.0)[:, None]).one_hot(D)
