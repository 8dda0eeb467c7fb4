"""Every reduction of the registry against a dense NumPy/SciPy reference.

Also: NaN and inf propagation, independence from the tile sizes, gradients of
reductions (``LazyTensor.vjp``) against finite differences, ``@`` and
``solve``.
"""

from __future__ import annotations

import dataclasses
import warnings
import zlib

import numpy as np
import pytest
from _helpers import assert_close, fd_gradient, sides
from _reference import REDUCTION_ERROR_SCALE
from _reference import REDUCTION_METHOD as METHOD
from _reference import REDUCTION_REFERENCE as REFERENCE
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

import kerneltools as kt
from kerneltools.backend.reductions import REDUCTIONS, register
from kerneltools.exceptions import ConvergenceWarning


def _rng(*parts) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(parts).encode()))


def _quiet(fn):
    """Run a reference computation without NumPy/SciPy floating-point warnings."""

    def wrapped(*args):
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return fn(*args)

    return wrapped


def reduce(F, name, axis, *, W=None, K=3, backend=None, **options):
    """Call the public method of reduction ``name``."""
    red = REDUCTIONS[name]
    kwargs = dict(axis=axis, backend=backend, **options)
    if red.n_formulas == 2:
        kwargs["weight"] = W
    if red.uses_k:
        kwargs["K"] = K
    out = getattr(F, METHOD[name])(**kwargs)
    return out if isinstance(out, tuple) else (out,)


def check_outputs(name, got, V, W, K, rtol, err_msg=""):
    """Compare the outputs of ``name`` with the reference, tie-tolerantly.

    Index outputs are checked through the values they point at (any of tied
    candidates is accepted) and must be valid, distinct indices.
    """
    red = REDUCTIONS[name]
    refs = _quiet(REFERENCE[name])(V, W, K)
    assert len(got) == len(refs) == red.n_outputs
    squeeze = red.uses_k and V.shape[-1] == 1  # (nx, K) for a scalar formula
    Vs = V[..., 0] if squeeze else V
    ny = V.shape[1]
    # Error scale of values: 1 + the largest finite |F| reduced into the output.
    with np.errstate(invalid="ignore"):
        mag = 1 + np.nanmax(np.where(np.isfinite(V), np.abs(V), 0), axis=1)
    if W is not None:
        mag = mag + np.abs(W).max(axis=1)
    if red.uses_k:
        mag = mag[:, :1] if squeeze else mag[:, None, :]
    for g, r, is_int in zip(got, refs, red.int_outputs):
        r = r[..., 0] if squeeze else r
        g = np.asarray(g)
        assert g.shape == r.shape, f"{name}: shape {g.shape} != {r.shape}. {err_msg}"
        if not is_int:
            scale = REDUCTION_ERROR_SCALE[name](V) if name in REDUCTION_ERROR_SCALE else mag
            scale = np.broadcast_to(scale, r.shape)
            assert_close(g, r, rtol, scale=scale, err_msg=f"{name}. {err_msg}")
            continue
        assert g.dtype == np.int64, f"{name}: index dtype {g.dtype}"
        assert ((g >= 0) & (g < ny)).all(), f"{name}: indices out of range. {err_msg}"
        if red.uses_k:
            assert (np.diff(np.sort(g, axis=1), axis=1) > 0).all(), (
                f"{name}: repeated indices. {err_msg}"
            )
            at_g = np.take_along_axis(Vs, g, axis=1)
            at_r = np.take_along_axis(Vs, r, axis=1)
        else:
            at_g = np.take_along_axis(V, g[:, None, :], axis=1)[:, 0]
            at_r = np.take_along_axis(V, r[:, None, :], axis=1)[:, 0]
        scale = np.broadcast_to(mag, at_r.shape)
        assert_close(at_g, at_r, rtol, scale=scale, err_msg=f"{name} index. {err_msg}")


def test_every_reduction_has_a_reference():
    assert set(REFERENCE) == set(REDUCTIONS) == set(METHOD)
    for name, red in REDUCTIONS.items():  # the method comes from the registry
        assert red.methods[0] == METHOD[name]
        assert getattr(kt.LazyTensor, METHOD[name]).__name__ == METHOD[name]


def test_every_reduction_is_complete():
    """Each definition holds every form: NumPy monoid, C, CUDA, gradient rule
    (or None: zero), smoothness, partial state and method names."""
    for name, red in REDUCTIONS.items():
        for f in dataclasses.fields(red):
            if f.default is dataclasses.MISSING and f.name != "surrogate":
                assert getattr(red, f.name) is not None, (name, f.name)
        assert red.c == {"fused": True} or {"state", "init", "tile", "final"} <= set(red.c)
        assert {"state", "init", "update", "final"} <= set(red.cuda), name
        assert all(b in REDUCTIONS for b, _ in red.block), name
        assert red.grad_forward is None or red.grad_forward in REDUCTIONS
        assert isinstance(red.smooth, bool), name


def _fields_of(base, **changes):
    red = REDUCTIONS[base]
    fields = {f.name: getattr(red, f.name) for f in dataclasses.fields(red)}
    return {**fields, "name": "TestOnly", "methods": (), **changes}


@pytest.mark.parametrize("drop", ["cuda", "state_of_block", "smooth", "surrogate", "methods"])
def test_an_incomplete_reduction_fails_at_registration(drop):
    fields = _fields_of("LogSumExp")
    del fields[drop]
    with pytest.raises(ValueError, match=f"'TestOnly' is incomplete.*'{drop}'"):
        register(**fields)
    assert "TestOnly" not in REDUCTIONS


def test_a_reduction_with_incomplete_forms_fails_at_registration():
    cuda = {k: v for k, v in REDUCTIONS["Min"].cuda.items() if k != "update"}
    with pytest.raises(ValueError, match=r"'TestOnly': its 'cuda' form lacks \['update'\]"):
        register(**_fields_of("Min", cuda=cuda))
    with pytest.raises(ValueError, match="unknown keys"):
        register(**_fields_of("Min", c=dict(REDUCTIONS["Min"].c, tiel="")))
    with pytest.raises(ValueError, match="already registered"):
        register(**_fields_of("Min", name="Min"))  # a second definition
    assert "TestOnly" not in REDUCTIONS


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_partial_states_merge_to_the_one_pass_result(name):
    """What the Dask layer does, in memory: chunks of the reduced axis give
    partial states (``block`` and ``state_of_block``), folded by ``merge``."""
    from kerneltools.backend import _dask

    red = REDUCTIONS[name]
    rng = _rng("partial", name)
    x, y = rng.normal(size=(7, 2)), rng.integers(0, 3, (11, 2)) * 1.0  # ties
    F, W = -kt.Vi(x).sqdist(kt.Vj(y)), kt.Vj(rng.uniform(0.5, 1.5, (11, 2)))
    parts = [F] + ([W] if red.n_formulas == 2 else [])
    bindings = kt.LazyTensor._merge(parts)[0]
    nodes = tuple(bindings)
    spec = dict(formulas=tuple(p.formula for p in parts), nodes=nodes, reduction=name,
                axis=1, K=4, dtype=np.dtype(np.float64), backend="numpy", options={},
                squeeze=red.uses_k)
    states = []
    for j0, j1 in ((0, 3), (3, 4), (4, 11)):  # chunks of fewer than K points too
        arrays = [bindings[n].array[j0:j1] if n.cat == "j" else bindings[n].array
                  for n in nodes]
        states.append(_dask._partial(spec, j0, *arrays))
    got = _dask._finalize(spec, _dask._merge(spec, *states))
    ref = reduce(F, name, 1, W=W, K=4, backend="numpy")
    for g, r in zip(got, ref, strict=True):
        assert g.dtype == r.dtype and g.shape == r.shape
        assert_close(g, r, 1e-12, scale=1 + np.abs(r))


# ---------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------
def _problem(N, M, E, dtype, rng, axis=1):
    """A formula of dimension E (and, for the weighted reductions, a weight),
    to be reduced over ``axis``, over the M points of y (see ``_formula``).

    Returns (F, W, dense F (N, M, E), dense W (N, M, 2)).
    """
    x, y = rng.uniform(-1, 1, (N, 3)), rng.uniform(-1, 1, (M, 3))
    a, b = rng.uniform(-1, 1, (N, 1)), rng.uniform(-1, 1, (M, E))
    v, c = rng.uniform(0.1, 1, (N, 2)), rng.uniform(0.1, 1, (M, 2))
    return _formula(*(t.astype(dtype) for t in (x, y, a, b, v, c)), axis=axis)


def _formula(x, y, a, b, v, c, gamma=1.7, axis=1):
    """F = -gamma |x - y|^2 + a b and W = v + c, and their dense float64
    values (N, M, E) and (N, M, 2) over (points of x, points of y).

    The reduction over ``axis`` runs over the points of y: for axis=1, x, a, v
    are i-variables and y, b, c j-variables; for axis=0 the other way round.
    A reduction over i is computed as the same reduction over j of the formula
    with i and j exchanged (``canonicalize``), so both axes run the same
    compiled kernel, and each is checked against the same dense values. The
    value tests and the NaN/inf tests share this formula, so that they share
    its compiled kernels too."""
    kept, reduced = sides(axis)
    F = -gamma * kept(x).sqdist(reduced(y)) + kept(a) * reduced(b)
    W = kept(v) + reduced(c)
    X, Y = x.astype(float)[:, None], y.astype(float)[None]
    with np.errstate(invalid="ignore"):
        Vd = -np.float64(gamma) * ((X - Y) ** 2).sum(-1, keepdims=True) + (
            a.astype(float)[:, None] * b.astype(float)[None]
        )
    Wd = v.astype(float)[:, None] + c.astype(float)[None]
    return F, W, Vd, Wd


# Formula dimensions E: 1 and 2, except for the weighted reductions, whose
# formula is scalar (their weight has dimension 2). E = 1 in both dtypes, E = 2
# in float64: a compiled kernel per reduction, E and dtype, and the loop over
# the components does not depend on the dtype (float32's kernels of every
# reduction are E = 1's; 12 C compiles fewer, about 6 CPU s, from an empty
# cache).
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_NAME_E = [
    (name, E, dt)
    for name in sorted(REDUCTIONS)
    for E in ((1,) if REDUCTIONS[name].n_formulas == 2 else (1, 2))
    for dt in ((_F32, _F64) if E == 1 else (_F64,))
]


@pytest.mark.parametrize("axis", [1, 0])
@pytest.mark.parametrize("name,E,dtype", _NAME_E,
                         ids=[f"{n}-E{e}-{dt.name}" for n, e, dt in _NAME_E])
def test_reduction_values(name, E, axis, backend, dtype, rtol):
    red = REDUCTIONS[name]
    rng = _rng("values", name, axis, E, dtype.name)
    # One output row, one reduced point (K = 1), on each axis.
    for N, M in [(23, 17), (1, 9), (8, 1)]:
        F, W, V, Wr = _problem(N, M, E, dtype, rng, axis)
        assert F.shape[axis] == M  # reduced over the points of y
        K = min(3, M)
        got = reduce(F, name, axis, W=W, K=K, backend=backend)
        for g in got:
            if not np.issubdtype(np.asarray(g).dtype, np.integer):
                assert np.asarray(g).dtype == dtype
        # float32: exp() in LogSumExp and soft-max amplifies the rounding of F.
        amplified = dtype == np.float32 and ("Soft" in name or "Log" in name)
        tol = 10 * rtol if amplified else rtol
        check_outputs(
            name,
            got,
            V,
            Wr if red.n_formulas == 2 else None,
            K,
            tol,
            err_msg=f"axis={axis}, N={N}, M={M}",
        )


@pytest.mark.parametrize("name", ["KMin_ArgKMin", "ArgKMin", "Min_ArgMin", "ArgMax"])
def test_ties(name, backend, dtype):
    """Integer-valued data has many exact ties; any tied candidate is accepted,
    but documented tie rules (first index for argmin/argmax) hold.

    The formula is the value tests' (``_formula``, E = 1) with a = b = 0 and
    gamma = -2: F = 2 |x_i - y_j|^2, integers, exact in both dtypes. Its
    kernels are theirs (K = 1 is their M = 1 case); only K = M is new."""
    rng = _rng("ties", name)
    x = rng.integers(0, 3, (12, 3)).astype(dtype)
    y = rng.integers(0, 3, (10, 3)).astype(dtype)
    zero_a, zero_b = np.zeros((12, 1), dtype), np.zeros((10, 1), dtype)
    ones_v, ones_c = np.ones((12, 2), dtype), np.ones((10, 2), dtype)
    F, _, V, _ = _formula(x, y, zero_a, zero_b, ones_v, ones_c, gamma=-2.0)
    assert (V == np.round(V)).all() and len(np.unique(V)) < V.size / 4  # many ties
    for K in (1, 10):  # 10 = M: every point
        got = reduce(F, name, 1, K=K, backend=backend)
        check_outputs(name, got, V, None, K, 0.0, err_msg=f"K={K}")
        if name in ("Min_ArgMin", "ArgMax"):  # documented: first index on ties
            assert_close(got[-1], REFERENCE[name](V, None, K)[-1], 0.0)


# ---------------------------------------------------------------------------
# NaN and inf: they reach the outputs they touch, and nothing else
# ---------------------------------------------------------------------------
def _nonfinite_cases():
    """(a, b) of ``_formula``: non-finite values in a (the side kept in the
    output: "in a_i" for axis=1) or in b (the reduced side)."""
    a = np.array([0.3, np.nan, -0.2, np.inf, -np.inf, 0.7])[:, None]
    b = np.array([0.1, -0.4, 0.5, 0.9, -0.8])[:, None]
    b2 = b.copy()
    b2[2], b2[4] = -np.inf, np.nan
    return {
        "in a_i": (a, b),
        "in b_j": (np.nan_to_num(a, nan=0.1, posinf=0.2, neginf=0.3), b2),
    }


@pytest.mark.parametrize("where", ["in a_i", "in b_j"])
@pytest.mark.parametrize("axis", [1, 0])
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_nan_and_inf_propagate_like_numpy(name, axis, where, backend):
    a, b = _nonfinite_cases()[where]
    rng = _rng("nonfinite")
    x, y = rng.uniform(-1, 1, (6, 3)), rng.uniform(-1, 1, (5, 3))
    v, c = rng.uniform(0.1, 1, (6, 2)), rng.uniform(0.1, 1, (5, 2))
    F, W, Vr, Wr = _formula(x, y, a, b, v, c, axis=axis)
    K = 3
    with np.errstate(invalid="ignore"):
        got = reduce(F, name, axis, W=W, K=K, backend=backend)
    assert np.isnan(Vr).any() and np.isposinf(Vr).any() and np.isneginf(Vr).any()
    check_outputs(
        name,
        got,
        Vr,
        Wr if REDUCTIONS[name].n_formulas == 2 else None,
        K,
        1e-12,
        err_msg=f"non-finite values {where}, axis={axis}",
    )


def test_nan_stays_in_its_row(backend):
    """The rows that do not touch a NaN are exactly the NaN-free results."""
    rng = _rng("nan rows")
    x, y = rng.normal(size=(9, 3)), rng.normal(size=(7, 3))
    a, b = rng.normal(size=(9, 1)), rng.normal(size=(7, 1))
    v, c = rng.uniform(0.1, 1, (9, 2)), rng.uniform(0.1, 1, (7, 2))
    x_nan = x.copy()
    x_nan[4, 1] = np.nan
    for name in ("Sum", "LogSumExp", "Min", "KMin"):
        clean = reduce(_formula(x, y, a, b, v, c)[0], name, 1, K=3, backend=backend)[0]
        dirty = reduce(_formula(x_nan, y, a, b, v, c)[0], name, 1, K=3, backend=backend)[0]
        assert np.isnan(dirty[4]).all(), name
        keep = np.arange(9) != 4
        assert_close(dirty[keep], clean[keep], 0.0, err_msg=name)


# ---------------------------------------------------------------------------
# Tile sizes do not change results (the NumPy backend takes tiles=(ti, tj))
# ---------------------------------------------------------------------------
_TILE_RNG = _rng("tiles")
_TILE_DATA = {
    "random": (_TILE_RNG.normal(size=(13, 2)), _TILE_RNG.normal(size=(11, 2))),
    # Integer points: many exact ties, also across tile boundaries.
    "ties": (
        _TILE_RNG.integers(0, 3, (13, 2)) * 1.0,
        _TILE_RNG.integers(0, 3, (11, 2)) * 1.0,
    ),
}
_WJ = _TILE_RNG.uniform(0.5, 1.5, size=(11, 2))
_WI = _TILE_RNG.uniform(0.5, 1.5, size=(13, 2))


@pytest.mark.parametrize("data", ["random", "ties"])
@pytest.mark.parametrize("axis", [1, 0])
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@settings(max_examples=10, deadline=None)
@given(ti=st.integers(1, 16), tj=st.integers(1, 16))
@example(ti=1, tj=1)
@example(ti=5, tj=3)
def test_results_do_not_depend_on_tile_sizes(name, axis, data, ti, tj):
    x, y = _TILE_DATA[data]
    F = -kt.Vi(x).sqdist(kt.Vj(y))
    W = kt.Vj(_WJ) if axis == 1 else kt.Vi(_WI)  # varies along the reduced axis
    ref = reduce(F, name, axis, W=W, K=4, backend="numpy")  # one tile here
    got = reduce(F, name, axis, W=W, K=4, backend="numpy", tiles=(ti, tj))
    for g, r in zip(got, ref):
        assert g.dtype == r.dtype
        if np.issubdtype(r.dtype, np.integer):  # first index on ties, as numpy
            np.testing.assert_array_equal(g, r)
        else:
            assert_close(g, r, 1e-12, scale=1 + np.abs(r))


# ---------------------------------------------------------------------------
# Gradients of reductions (vjp) against finite differences
# ---------------------------------------------------------------------------
VJP_CASES = [
    ("Sum", False),
    ("SumSquares", False),
    ("LogSumExp", False),
    ("LogSumExp", True),
    ("SumSoftMaxWeight", True),
    ("Min", False),
    ("Max", False),
    ("KMin", False),
]


@pytest.mark.parametrize("wrt", ["x_i", "y_j", "p"])
@pytest.mark.parametrize("axis", [1, 0])
@pytest.mark.parametrize(
    "reduction,weighted",
    VJP_CASES,
    ids=[f"{r}{'+w' if w else ''}" for r, w in VJP_CASES],
)
def test_vjp_vs_finite_differences(reduction, weighted, axis, wrt, backend):
    """``x_i`` is the variable of the side kept in the output and ``y_j`` that
    of the reduced side, on both axes (for axis=0, x is a j-variable and y an
    i-variable): as in the value tests, the two axes then run the same
    compiled kernels, each checked against its own finite differences."""
    rng = _rng("vjp", reduction, weighted, axis, wrt)
    N, M, Dd, K = 6, 5, 3, 2
    arrs = {
        "x_i": rng.uniform(-1, 1, (N, Dd)),
        "y_j": rng.uniform(-1, 1, (M, Dd)),
        "p": rng.uniform(0.5, 1.5, (Dd,)),
    }
    kept, reduced = sides(axis)

    def lazy(a):
        x_i, y_j, p = kept(a["x_i"]), reduced(a["y_j"]), kt.Pm(a["p"])
        F = -(x_i - y_j).weightedsqnorm(p)
        W = (x_i + y_j).cos() + 2 if weighted else None  # depends on x and y too
        return F, W, {"x_i": x_i, "y_j": y_j, "p": p}

    def dense_out(a):  # (points of x, points of y): reduced over y
        diff = a["x_i"][:, None] - a["y_j"][None]
        V = -(diff**2 * a["p"]).sum(-1, keepdims=True)
        Wd = np.cos(a["x_i"][:, None] + a["y_j"][None]) + 2
        name = "LogSumExpWeight" if reduction == "LogSumExp" and weighted else reduction
        out = REFERENCE[name](V, Wd, K)[0]
        return out[..., 0] if reduction == "KMin" else out

    F, W, leaves = lazy(arrs)
    out0 = dense_out(arrs)
    gradout = rng.uniform(-1, 1, out0.shape)
    got = F.vjp(leaves[wrt], gradout, reduction, axis, weight=W, K=K, backend=backend)

    def phi_diff(plus, minus):
        a_p, a_m = dict(arrs, **{wrt: plus}), dict(arrs, **{wrt: minus})
        return float((gradout * (dense_out(a_p) - dense_out(a_m))).sum())

    fd = fd_gradient(phi_diff, arrs[wrt])
    assert got.shape == arrs[wrt].shape
    assert_close(got, fd, 1e-5, scale=np.abs(fd) + 1e-3 * max(1.0, np.abs(fd).max()))


def test_vjp_of_an_index_reduction_is_zero(backend):
    x = np.random.default_rng(0).normal(size=(4, 2))
    x_i, y_j = kt.Vi(x), kt.Vj(x)
    g = x_i.sqdist(y_j).vjp(x_i, np.ones((4, 1)), "ArgMin", 1, backend=backend)
    assert_close(g, np.zeros((4, 2)), 0.0)


# ---------------------------------------------------------------------------
# K @ b and solve
# ---------------------------------------------------------------------------
def _gaussian(x, sigma=0.5):
    x_i, x_j = kt.Vi(x), kt.Vj(x)
    K = (-x_i.sqdist(x_j) / (2 * sigma**2)).exp()
    Kd = np.exp(-((x[:, None] - x[None]) ** 2).sum(-1) / (2 * sigma**2))
    return K, Kd


def test_matmul(backend, monkeypatch):
    monkeypatch.setenv("KERNELTOOLS_BACKEND", backend)  # @ takes no backend=
    rng = _rng("matmul")
    x = rng.normal(size=(30, 2))
    K, Kd = _gaussian(x)
    b1, b2 = rng.normal(size=30), rng.normal(size=(30, 3))
    assert (K @ b1).shape == (30,)
    assert_close(K @ b1, Kd @ b1, 1e-10, scale=np.abs(Kd) @ np.abs(b1))
    assert_close(K @ b2, Kd @ b2, 1e-10, scale=np.abs(Kd) @ np.abs(b2))


@pytest.mark.parametrize("shape", [(40,), (40, 1), (40, 3)])
def test_solve_matches_dense_solve(shape, backend):
    rng = _rng("solve", shape)
    x = rng.normal(size=(40, 2))
    K, Kd = _gaussian(x)
    b = rng.normal(size=shape)
    alpha = 0.1
    a = K.solve(b, alpha=alpha, tol=1e-12, backend=backend)
    ref = np.linalg.solve(Kd + alpha * np.eye(40), b)
    assert a.shape == b.shape
    assert_close(a, ref, 1e-7, scale=1 + np.abs(ref))
    assert K.n_iter_ >= 1


def test_solve_with_an_i_variable(backend):
    rng = _rng("solve var")
    x = rng.normal(size=(25, 2))
    K, Kd = _gaussian(x)
    b = rng.normal(size=(25, 2))
    a = K.solve(kt.Vi(b), alpha=0.5, tol=1e-12, backend=backend)
    assert_close(a, np.linalg.solve(Kd + 0.5 * np.eye(25), b), 1e-7, scale=1.0)


def test_solve_warns_when_it_does_not_converge(backend):
    rng = _rng("solve warn")
    x = rng.normal(size=(40, 2))
    K, _ = _gaussian(x)
    with pytest.warns(ConvergenceWarning, match="max_iter"):
        K.solve(rng.normal(size=40), alpha=1e-3, max_iter=1, backend=backend)
    assert K.n_iter_ == 1


# ---------------------------------------------------------------------------
# dtypes: NumPy promotion, Python numbers weak, integers to float64
# ---------------------------------------------------------------------------
_f32 = np.arange(6, dtype=np.float32).reshape(3, 2) / 4
_f64 = np.arange(8, dtype=np.float64).reshape(4, 2) / 3
_int = np.arange(8, dtype=np.int64).reshape(4, 2)


@pytest.mark.parametrize(
    "build,expected",
    [
        (lambda: kt.Vi(_f32) - kt.Vj(_f32), np.float32),
        (lambda: kt.Vi(_f32) - kt.Vj(_f64), np.float64),
        (lambda: kt.Vi(_f32) * 0.5 - kt.Vj(_f32) / 3.0, np.float32),
        (lambda: kt.Vi(_f32) * kt.Pm(0.5) - kt.Vj(_f32), np.float32),
        (lambda: kt.Vi(_f32) * kt.Pm(np.float64(0.5)) - kt.Vj(_f32), np.float64),
        (lambda: kt.Vi(_f32) * kt.Pm(np.float32(0.5)) - kt.Vj(_f32), np.float32),
        (lambda: kt.Vi(_int) - kt.Vj(_int), np.float64),
        (lambda: kt.Vi(_int) - kt.Vj(_int.astype(bool)), np.float64),
        (lambda: kt.Vi(_int) - kt.Vj(_f32), np.float64),  # as numpy: int64 + float32
        (lambda: kt.Vi(_f32.astype(np.float16)) - kt.Vj(_f32), np.float32),
    ],
    ids=[
        "f32-f32",
        "f32-f64",
        "f32-python floats",
        "f32-Pm(float)",
        "f32-Pm(np.float64)",
        "f32-Pm(np.float32)",
        "int-int",
        "int-bool",
        "int-f32",
        "f16-f32",
    ],
)
def test_dtype_promotion(build, expected, backend):
    F = build()
    assert F.dtype == expected
    for out in (F.sum(axis=1, backend=backend), F.max(axis=0, backend=backend)):
        assert isinstance(out, np.ndarray) and out.dtype == expected
    idx = F.argmin(axis=1, backend=backend)
    assert idx.dtype == np.int64


def test_integer_inputs_are_exact(backend):
    x, y = _int, _int[::-1] * 3
    got = kt.Vi(x).sqdist(kt.Vj(y)).sum(axis=1, backend=backend)
    ref = ((x[:, None] - y[None]) ** 2).sum(-1).sum(1, keepdims=True)
    np.testing.assert_array_equal(got, ref.astype(np.float64))


# ---------------------------------------------------------------------------
# Aliases: dim= for axis=, lse for logsumexp, .T swaps i and j
# ---------------------------------------------------------------------------
def test_aliases_and_transpose(backend):
    rng = _rng("aliases")
    x, y, b = rng.normal(size=(6, 2)), rng.normal(size=(4, 2)), rng.normal(size=(4, 3))
    F = -kt.Vi(x).sqdist(kt.Vj(y)) * kt.Vj(b)
    dense = -((x[:, None] - y[None]) ** 2).sum(-1, keepdims=True) * b[None]
    assert_close(F.sum(dim=1, backend=backend), dense.sum(1), 1e-12, scale=1.0)
    assert_close(F.lse(dim=0, backend=backend), logsumexp(dense, axis=0), 1e-12)
    assert F.T.shape == (4, 6, 3) and F.t().formula is F.T.formula
    assert_close(F.T.sum(axis=1, backend=backend), dense.sum(0), 1e-12, scale=1.0)
    assert_close(F.T.min(axis=0, backend=backend), dense.min(1), 1e-12)
    assert F.T.T.formula is F.formula
