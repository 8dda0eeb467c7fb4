"""The generated exps: the facts that let an exp skip its overflow branch
(proven, or tested at run time on a parameter), their accuracy over their
range, and sums of a product split into factors that depend on j and ones
that do not (``_factor.py``), against NumPy."""

import numpy as np
import pytest

import kerneltools as kt
from kerneltools.backend.cpu._compiler import find_compiler

pytestmark = pytest.mark.skipif(
    not find_compiler().ok, reason=f"no C compiler: {find_compiler().reason}"
)


@pytest.mark.parametrize("g", [0.7, 0.0, -0.3, np.nan])
def test_exp_range_facts_hold_for_any_parameter(g, backend, dtype, shared_cache):
    """exp(-g |x - y|^2) runs the exp without overflow branch (2^(d * -g log2 e))
    only when g >= 0 is tested true at run time: a negative g (arguments > 0)
    or a NaN g still gives NumPy's results; inf and NaN inputs propagate as in
    NumPy, into their rows only (exp(-inf) = 0, inf * 0 = NaN)."""
    rng = np.random.default_rng(3)
    x, y = rng.random((37, 3)).astype(dtype), rng.random((41, 3)).astype(dtype)
    x[3, 1], x[7, 2] = np.inf, np.nan
    b = rng.standard_normal((41, 2)).astype(dtype)
    K = (-kt.Vi(x).sqdist(kt.Vj(y)) * g).exp()
    d2 = ((x[:, None].astype(np.float64) - y[None]) ** 2).sum(-1)
    with np.errstate(invalid="ignore", over="ignore"):
        ref = np.exp(-d2 * g) @ b
    got = (K * kt.Vj(b)).sum(axis=1, backend=backend)
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    assert np.isfinite(ref).sum() >= (70 if np.isfinite(g) else 0)
    scale = np.abs(ref[np.isfinite(ref)]).max() if np.isfinite(ref).any() else 1.0
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol * scale)


@pytest.mark.parametrize("g", [3.0, -0.3])
def test_sums_of_outer_times_inner_factors(g, backend, dtype, shared_cache):
    """Sums of a product whose factors split into ones that depend on j and
    ones that do not (the dense C kernel sums the former and multiplies by
    the latter, ``_cpu_factor``): the gradient of e . (K b) (outer -2 g e_i),
    K_ij w_i (an outer vector, a scalar inner factor) and 2 K_ij b_j (a
    constant outer factor), against NumPy pair by pair, with NaN, 0 and
    infinite outer factors. For g > 0 a far point makes K exactly 0 in every
    row, so that an infinite outer factor gives NaN (inf * 0 in that pair)
    as NumPy does, not inf; g < 0 takes the exp with its overflow branch."""
    rng = np.random.default_rng(4)
    x, y = rng.random((37, 3)), rng.random((41, 3))
    if g > 0:
        y[40] = 20.0
    e, w = rng.standard_normal((37, 1)), rng.standard_normal((37, 3))
    b = rng.standard_normal((41, 1))
    e[2], e[5], e[8], w[3, 1], w[6, 0], b[4] = np.inf, np.nan, 0, -np.inf, np.nan, 0
    x, y, e, w, b = (a.astype(dtype) for a in (x, y, e, w, b))
    X, Y, E, W, B = (a.astype(np.float64) for a in (x, y, e, w, b))
    x_i, gp = kt.Vi(x), kt.Pm(np.array([g], dtype))
    K = (-x_i.sqdist(kt.Vj(y)) * gp).exp()
    with np.errstate(invalid="ignore", over="ignore"):
        k = np.exp(-np.float64(dtype.type(g)) * ((X[:, None] - Y[None]) ** 2).sum(-1))
        refs = [(2 * -(E * B.T * k * g))[:, :, None] * (X[:, None] - Y[None]),  # grad
                k[:, :, None] * W[:, None, :], 2 * k[:, :, None] * B[None]]
    gots = [(K * kt.Vj(b)).grad(x_i, kt.Vi(e)), K * kt.Vi(w), 2 * K * kt.Vj(b)]
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for G, pairs in zip(gots, refs):
        got, ref = G.sum(axis=1, backend=backend), pairs.sum(axis=1)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
        np.testing.assert_array_equal(got[np.isinf(ref)], ref[np.isinf(ref)])
        ok = np.isfinite(ref)
        assert ok.sum() >= ref.size // 2
        with np.errstate(invalid="ignore"):
            scale = np.nanmax(np.abs(pairs).sum(axis=1)[ok])
        np.testing.assert_allclose(got[ok], ref[ok], rtol=rtol, atol=rtol * scale)


def test_sign_facts_of_formulas():
    """The rules that let an exp skip its overflow branch: proven always,
    under a condition on a parameter, or not at all."""
    from kerneltools.backend._codegen import sign_conditions

    x, y = kt.Vi(np.ones((2, 3))), kt.Vj(np.ones((2, 3)))
    d2 = x.sqdist(y)
    p = kt.Pm(np.array([0.5]))

    def arg(F):
        node = F._plan("Sum", 1)[0].formulas[0]
        return node.children[0] if node.op == "Exp" else node

    names = lambda F: {n: [f"P{k}"] for k, n in enumerate(_param_nodes(arg(F)))}
    assert sign_conditions(arg((-d2).exp()), -1, {}) == []
    assert sign_conditions(arg((-d2 / 2).exp()), -1, names((-d2 / 2).exp())) == []
    F = (-d2 * p).exp()
    assert sign_conditions(arg(F), -1, names(F)) == ["P0 >= (real_t)0"]
    assert sign_conditions(arg((d2 - 1).exp()), -1, {}) is None
    assert sign_conditions(arg((x * y).sum(-1).exp()), -1, {}) is None


def _param_nodes(node):
    from kerneltools.backend._ir import topo_order

    return [n for n in topo_order([node]) if n.op == "Var" and n.cat == "p"]


@pytest.mark.parametrize("which", ["general", "nonpos", "exp2"])
def test_generated_exps_are_accurate_over_their_range(which, dtype, shared_cache):
    """The kernels' inline exps (templates/kt_exp.h) against NumPy's, element
    by element (one reduced point), over every argument range that gives a
    normal result: within 4 ulp (float32) and 1.25 eps (2.8e-16, float64) of
    the longdouble exp of the argument the kernel computes (in ``dtype``).
    Their fast variants: exp(-x^2) (argument <= 0) and exp(-g x^2) as
    2^(x^2 * k), k = -g log2(e) rounded to ``dtype``."""
    lo = -87.0 if dtype == np.float32 else -707.0
    hi = 88.0 if dtype == np.float32 else 709.0
    a = np.concatenate([np.linspace(lo, hi, 20001), np.linspace(-1, 1, 4001)])
    x = (a if which == "general" else np.sqrt(np.abs(a))).astype(dtype)[:, None]
    one = kt.Vj(np.ones((1, 1), dtype))
    sq = (x * x).astype(np.longdouble)  # x^2 as the kernel rounds it
    if which == "general":
        F, ref = (kt.Vi(x) * one).exp(), np.exp(x.astype(np.longdouble))
    elif which == "nonpos":
        F, ref = (-(kt.Vi(x) * one) ** 2).exp(), np.exp(-sq)
    else:
        g = np.array([0.7], dtype)
        F = (-((kt.Vi(x) * one) ** 2) * kt.Pm(g)).exp()
        k = np.array(-1.4426950408889634074 * np.float64(g[0]), dtype)
        ref = np.exp2(((x * x) * k).astype(np.longdouble))
    got = F.sum(axis=1, backend="cpu").astype(np.longdouble)
    keep = ref > np.finfo(dtype).tiny * 4
    rel = np.abs(got[keep] - ref[keep]) / ref[keep]
    tol = 4 * np.finfo(np.float32).eps if dtype == np.float32 else 1.25 * np.finfo(float).eps
    assert rel.max() <= tol, (which, float(rel.max()))
