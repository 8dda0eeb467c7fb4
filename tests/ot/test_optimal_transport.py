"""Sinkhorn divergences, potentials and plans (kerneltools.ot), and the
multiscale solver (also through SinkhornTransport, whose own tests are in
tests/estimators/optimal_transport/).

Checked against an independent dense log-domain Sinkhorn (NumPy + SciPy,
iterated to convergence), against GeomLoss where it is installed (values,
gradients, potentials), and by mathematical invariants.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

import kerneltools as kt
from kerneltools.estimators.optimal_transport import SinkhornTransport
from kerneltools.ot import sinkhorn_divergence, sinkhorn_potentials, transport_plan

#: Values and gradients against GeomLoss: the same algorithm, so only
#: rounding differs.
GEOMLOSS_RTOL = {np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-9}


def clouds(n=80, m=60, d=2, seed=0, weighted=True):
    rng = np.random.default_rng(seed)
    x = rng.random((n, d))
    y = 0.8 * rng.random((m, d)) + 0.3
    if not weighted:
        return x, y, None, None
    a, b = rng.random(n) + 0.5, rng.random(m) + 0.5
    return x, y, a / a.sum(), b / b.sum()


def uniform(n):
    return np.full(n, 1.0 / n)


# -- an independent dense reference ------------------------------------------------


def dense_ot(x, y, a, b, eps, tol=1e-12, max_iter=20000):
    """OT_eps(a, b) for the cost |x - y|^2 / 2: alternating log-domain Sinkhorn."""
    C = 0.5 * ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    la, lb = np.log(a), np.log(b)
    f, g = np.zeros(len(x)), np.zeros(len(y))
    for _ in range(max_iter):
        f = -eps * logsumexp(lb[None, :] + (g[None, :] - C) / eps, axis=1)
        g = -eps * logsumexp(la[:, None] + (f[:, None] - C) / eps, axis=0)
        rows = np.exp(
            la + logsumexp(lb[None, :] + (f[:, None] + g[None, :] - C) / eps, axis=1)
        )
        if np.abs(rows - a).sum() < tol:
            break
    return a @ f + b @ g


def dense_divergence(x, y, a, b, eps):
    return (
        dense_ot(x, y, a, b, eps)
        - dense_ot(x, x, a, a, eps) / 2
        - dense_ot(y, y, b, b, eps) / 2
    )


@functools.cache
def _converged_case(d):
    """(clouds, S_eps, OT_eps) of the converged-Sinkhorn test in dimension d:
    the dense references (thousands of NumPy iterations each) are computed
    once per d, not once per backend and dtype."""
    x, y, a, b = clouds(n=70, m=50, d=d, seed=d)
    eps = 0.1**2
    return (x, y, a, b), dense_divergence(x, y, a, b, eps), dense_ot(x, y, a, b, eps)


@pytest.mark.parametrize("d", [2, 3])
def test_matches_a_converged_dense_sinkhorn(backend, dtype, d):
    (x, y, a, b), want, want_ot = _converged_case(d)
    blur = 0.1
    got = sinkhorn_divergence(
        x.astype(dtype),
        y.astype(dtype),
        a.astype(dtype),
        b.astype(dtype),
        blur=blur,
        scaling=0.99,
        backend=backend,
    )
    assert isinstance(got, float)
    np.testing.assert_allclose(got, want, rtol=1e-3)
    ot = sinkhorn_divergence(
        x, y, a, b, blur=blur, scaling=0.99, debias=False, backend=backend
    )
    np.testing.assert_allclose(ot, want_ot, rtol=1e-3)


# -- GeomLoss ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def geomloss():
    pytest.importorskip("torch")
    return pytest.importorskip("geomloss")


def geomloss_value_and_grads(geomloss, x, y, a, b, **kwargs):
    import torch

    X = torch.tensor(x, requires_grad=True)
    Y = torch.tensor(y, requires_grad=True)
    loss = geomloss.SamplesLoss("sinkhorn", backend="tensorized", **kwargs)
    value = loss(torch.tensor(a), X, torch.tensor(b), Y)
    gx, gy = torch.autograd.grad(value, [X, Y])
    return value.item(), gx.numpy(), gy.numpy()


def assert_close_rel(got, want, rtol):
    np.testing.assert_allclose(got, want, rtol=0, atol=rtol * np.abs(want).max())


@pytest.mark.parametrize("reach", [None, 0.5], ids=["balanced", "reach0.5"])
@pytest.mark.parametrize("debias", [True, False], ids=["debias", "biased"])
def test_matches_geomloss(geomloss, backend, dtype, reach, debias):
    x, y, a, b = (v.astype(dtype) for v in clouds(n=90, m=70, d=3, seed=1))
    params = {"p": 2, "blur": 0.05, "reach": reach, "scaling": 0.5, "debias": debias}
    want, wgx, wgy = geomloss_value_and_grads(geomloss, x, y, a, b, **params)
    value, gx, gy = sinkhorn_divergence(
        x, y, a, b, return_grad=True, backend=backend, **params
    )
    rtol = GEOMLOSS_RTOL[dtype]
    np.testing.assert_allclose(value, want, rtol=rtol)
    assert gx.dtype == dtype and gy.dtype == dtype
    assert_close_rel(gx, wgx, rtol)
    assert_close_rel(gy, wgy, rtol)


def test_matches_geomloss_p1(geomloss):
    # GeomLoss' tensorized p = 1 cost clamps distances at 1e-4 (the diagonal
    # of the debiasing terms), its online one does not: compare without them.
    x, y, a, b = clouds(n=60, m=50, d=2, seed=2)
    params = {"p": 1, "blur": 0.1, "scaling": 0.7, "debias": False}
    want, wgx, wgy = geomloss_value_and_grads(geomloss, x, y, a, b, **params)
    value, gx, gy = sinkhorn_divergence(x, y, a, b, return_grad=True, **params)
    np.testing.assert_allclose(value, want, rtol=1e-9)
    assert_close_rel(gx, wgx, 1e-9)
    assert_close_rel(gy, wgy, 1e-9)


@pytest.mark.parametrize("reach", [None, 0.5])
def test_potentials_match_geomloss(geomloss, reach):
    import torch

    x, y, a, b = clouds(n=50, m=40, d=2, seed=3)
    loss = geomloss.SamplesLoss(
        "sinkhorn",
        blur=0.05,
        reach=reach,
        debias=False,
        potentials=True,
        backend="tensorized",
    )
    F, G = loss(*(torch.tensor(v) for v in (a, x, b, y)))
    f, g = sinkhorn_potentials(x, y, a, b, blur=0.05, reach=reach)
    np.testing.assert_allclose(f, F.numpy().ravel(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(g, G.numpy().ravel(), rtol=1e-9, atol=1e-12)


# -- invariants ------------------------------------------------------------------------

problems = st.tuples(
    st.integers(0, 2**31), st.integers(2, 25), st.integers(2, 25), st.integers(1, 3)
)


def random_problem(seed, n, m, d):
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal((n, d)), rng.standard_normal((m, d)) + 0.5
    a, b = rng.random(n) + 0.1, rng.random(m) + 0.1
    return x, y, a / a.sum(), b / b.sum()


@settings(max_examples=8, deadline=None)
@given(problems, st.floats(0.05, 1.0))
def test_divergence_of_a_measure_with_itself_is_zero(problem, blur):
    x, _, a, _ = random_problem(*problem)
    assert abs(sinkhorn_divergence(x, x, a, a, blur=blur)) < 1e-12


@settings(max_examples=8, deadline=None)
@given(problems, st.sampled_from([None, 1.0]))
def test_divergence_is_symmetric_and_nonnegative(problem, reach):
    x, y, a, b = random_problem(*problem)
    s_ab = sinkhorn_divergence(x, y, a, b, reach=reach)
    s_ba = sinkhorn_divergence(y, x, b, a, reach=reach)
    np.testing.assert_allclose(s_ab, s_ba, rtol=1e-10)
    if reach is None:
        assert s_ab >= -1e-10


@settings(max_examples=8, deadline=None)
@given(problems, st.lists(st.floats(-2, 2), min_size=3, max_size=3))
def test_translation_adds_half_the_squared_shift(problem, shift):
    # C(x, y + t) = C(x, y) - <x - y, t> + |t|^2 / 2: the middle term is
    # separable, absorbed by the potentials, so S(a, a shifted by t) =
    # |t|^2 / 2 exactly (up to the annealing's convergence).
    x, _, a, _ = random_problem(*problem)
    t = np.array(shift[: x.shape[1]])
    got = sinkhorn_divergence(x, x + t, a, a, blur=0.05, scaling=0.9)
    np.testing.assert_allclose(got, t @ t / 2, rtol=1e-6, atol=1e-9)


def test_divergence_is_linear_in_the_mass():
    # OT(m a, m b) = m OT(a, b) - m eps log m; the entropic shifts cancel in S.
    x, y, a, b = clouds(seed=4)
    s = sinkhorn_divergence(x, y, a, b)
    np.testing.assert_allclose(
        sinkhorn_divergence(x, y, 3 * a, 3 * b), 3 * s, rtol=1e-10
    )


@pytest.mark.parametrize("multiscale", [False, True])
def test_verbose_reports_progress_and_changes_nothing(capsys, multiscale):
    x, y, a, b = clouds(seed=4)
    kw = {"multiscale": multiscale, "cluster_scale": 0.5 if multiscale else None}
    quiet = sinkhorn_divergence(x, y, a, b, return_grad=True, **kw)
    capsys.readouterr()
    loud = sinkhorn_divergence(x, y, a, b, return_grad=True, verbose=True, **kw)
    out = capsys.readouterr().out.splitlines()
    n_eps = int(out[0].split("epsilon-scaling over ")[1].split()[0])
    steps = [line for line in out if "marginal error=" in line]
    # multiscale: the coarse steps run on cells, the fine ones are reported
    assert 0 < len(steps) <= n_eps and (multiscale or len(steps) == n_eps), out
    assert out[-1].startswith(f"sinkhorn_divergence: {quiet[0]:.6g} in "), out
    assert ("blocks kept" in "\n".join(out)) == multiscale
    assert loud[0] == quiet[0]
    np.testing.assert_array_equal(loud[1], quiet[1])
    f, _ = sinkhorn_potentials(x, y, a, b, tol=1e-6, verbose=True)
    out = capsys.readouterr().out
    assert out.startswith("sinkhorn_potentials: epsilon-scaling over") and "s)" in out
    np.testing.assert_array_equal(f, sinkhorn_potentials(x, y, a, b, tol=1e-6)[0])
    with pytest.raises(ValueError, match="verbose"):
        sinkhorn_divergence(x, y, verbose="loud")


@settings(max_examples=6, deadline=None)
@given(problems, st.sampled_from([None, 1.0]))
@example(problem=(7633769, 4, 4, 1), reach=None)
def test_a_gradient_step_decreases_the_divergence(problem, reach):
    """The gradients are exact at convergence only (envelope theorem): the
    schedule runs at scaling=0.9, as at 0.5 a small problem can end far from
    it (the example: marginal error 0.98, and a step up the divergence)."""
    x, y, a, b = random_problem(*problem)
    kwargs = dict(reach=reach, scaling=0.9)
    value, gx, gy = sinkhorn_divergence(x, y, a, b, return_grad=True, **kwargs)
    step = 1e-3
    lower = sinkhorn_divergence(
        x - step * gx / a[:, None], y - step * gy / b[:, None], a, b, **kwargs
    )
    assert lower < value


def test_zero_weights_are_points_absent():
    x, y, a, b = clouds(seed=5)
    a0 = np.concatenate([a, [0.0, 0.0]])
    # Inside the data's bounding box: the epsilon schedule is the same.
    x0 = np.concatenate([x, [[0.5, 0.5], [0.2, 0.9]]])
    np.testing.assert_allclose(
        sinkhorn_divergence(x0, y, a0, b, scaling=0.9),
        sinkhorn_divergence(x, y, a, b, scaling=0.9),
        rtol=1e-12,
    )


def test_changing_blur_or_scaling_compiles_nothing(monkeypatch, tmp_path):
    """Temperatures are run-time parameters: one kernel serves every schedule."""
    from kerneltools.backend.cpu import _backend as _cpu_backend
    from kerneltools.backend._dispatch import BACKENDS

    if not BACKENDS["cpu"].available()[0]:
        pytest.skip("the C backend is unavailable")
    monkeypatch.setenv("KERNELTOOLS_CACHE_DIR", str(tmp_path))
    x, y, a, b = clouds(n=30, m=20, d=5, seed=11)
    sinkhorn_divergence(x, y, a, b, blur=0.1, return_grad=True, backend="cpu")
    before = _cpu_backend.compile_count()
    for blur, scaling in [(0.3, 0.7), (0.02, 0.5)]:
        sinkhorn_divergence(
            x, y, a, b, blur=blur, scaling=scaling, return_grad=True, backend="cpu"
        )
    assert _cpu_backend.compile_count() == before


def test_float32_reductions_float64_value():
    x, y, a, b = clouds(seed=6)
    v32, gx, gy = sinkhorn_divergence(
        *(v.astype(np.float32) for v in (x, y, a, b)), return_grad=True
    )
    assert isinstance(v32, float) and gx.dtype == gy.dtype == np.float32
    f, g = sinkhorn_potentials(x.astype(np.float32), y.astype(np.float32))
    assert f.dtype == g.dtype == np.float32
    np.testing.assert_allclose(v32, sinkhorn_divergence(x, y, a, b), rtol=1e-4)


# -- plans and potentials ----------------------------------------------------------------


def test_transport_plan_is_a_lazy_tensor_with_the_right_marginals(backend, dtype):
    x, y, a, b = (v.astype(dtype) for v in clouds(seed=7))
    P = transport_plan(x, y, a, b, blur=0.1, tol=1e-7, backend=backend)
    assert isinstance(P, kt.LazyTensor) and P.shape == (80, 60)
    rtol = 1e-6 if dtype == np.float64 else 1e-4
    rows = P.sum(axis=1, backend=backend)[:, 0]
    cols = P.sum(axis=0, backend=backend)[:, 0]
    assert np.abs(rows - a).sum() <= rtol and np.abs(cols - b).sum() <= rtol
    # The barycentric projection, and the same plan from given potentials.
    bary = (P @ y) / a[:, None]
    f, g = sinkhorn_potentials(x, y, a, b, blur=0.1, tol=1e-7, backend=backend)
    P2 = transport_plan(x, y, a, b, blur=0.1, potentials=(f, g), backend=backend)
    np.testing.assert_allclose((P2 @ y) / a[:, None], bary, rtol=rtol)


def test_refined_potentials_give_the_converged_value():
    x, y, a, b = clouds(seed=8)
    f, g = sinkhorn_potentials(x, y, a, b, blur=0.1, tol=1e-10)
    np.testing.assert_allclose(a @ f + b @ g, dense_ot(x, y, a, b, 0.1**2), rtol=1e-8)


def test_unconverged_potentials_warn():
    x, y, a, b = clouds(seed=9)
    with pytest.warns(kt.ConvergenceWarning, match="max_iter=2"):
        sinkhorn_potentials(x, y, a, b, blur=0.02, tol=1e-12, max_iter=2)


# -- where the functions live ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["sinkhorn_divergence", "sinkhorn_potentials",
                                  "transport_plan"])
def test_the_functions_are_kerneltools_ots_under_every_import_path(name):
    """Defined in kerneltools.ot; the estimators' paths give the same objects."""
    import kerneltools.estimators
    import kerneltools.estimators.optimal_transport
    import kerneltools.ot

    function = getattr(kerneltools.ot, name)
    assert function.__module__.startswith("kerneltools.ot.")
    assert name in kerneltools.ot.__all__
    for module in (kerneltools.estimators.optimal_transport, kerneltools.estimators, kt):
        assert getattr(module, name) is function, module.__name__


# -- bad input -------------------------------------------------------------------------------

X, Y = np.random.default_rng(0).random((10, 2)), np.random.default_rng(1).random((8, 2))
NAN = X.copy()
NAN[3, 1] = np.nan


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"x": X[:, 0]}, ValueError, "'x' must be a 2-D array"),
        (
            {"y": np.random.rand(8, 3)},
            ValueError,
            "'x' and 'y' must have the same number of features",
        ),
        ({"y": np.zeros((0, 2))}, ValueError, "'y' is empty"),
        ({"x": NAN}, ValueError, "'x' contains NaN or infinity"),
        ({"x": X.astype(complex)}, TypeError, "'x' must be a real numeric array"),
        ({"a": -uniform(10)}, ValueError, "'a' must be >= 0"),
        ({"a": uniform(9)}, ValueError, r"'a' must have shape \(10,\)"),
        ({"b": np.full(8, np.inf)}, ValueError, "'b' contains NaN or infinity"),
        ({"b": np.zeros(8)}, ValueError, "'b' sums to 0"),
        ({"a": 2 * uniform(10)}, ValueError, "same total mass"),
        ({"blur": 0.0}, ValueError, r"'blur' parameter of sinkhorn_divergence must be a "
         r"float in the range \(0.0, inf\)"),
        ({"blur": -1}, ValueError, r"'blur' parameter .* range \(0.0, inf\)"),
        ({"blur": np.nan}, ValueError, "'blur' parameter"),
        (
            {"scaling": 1.0},
            ValueError,
            r"'scaling' parameter .* must be a float in the range \(0.0, 1.0\)",
        ),
        ({"reach": -2.0}, ValueError, "'reach' parameter"),
        ({"p": 3}, ValueError, r"'p' parameter .* must be a float among \{1, 2\}"),
        ({"debias": "yes"}, TypeError, "'debias' parameter .* must be an instance of 'bool'"),
        ({"backend": "gpu"}, ValueError, "'backend'"),
    ],
)
def test_bad_input_names_the_argument(kwargs, exc, match):
    args = {"x": X, "y": Y, "a": None, "b": None} | kwargs
    x, y, a, b = (args.pop(k) for k in ("x", "y", "a", "b"))
    with pytest.raises(exc, match=match):
        sinkhorn_divergence(x, y, a, b, **args)


def test_unbalanced_transport_accepts_unequal_masses():
    value = sinkhorn_divergence(X, Y, uniform(10), 2 * uniform(8), reach=1.0)
    assert np.isfinite(value)


# -- multiscale Sinkhorn ------------------------------------------------------------------

MS = {"blur": 0.05, "scaling": 0.8, "cluster_scale": 0.3}


def cube_clouds(n=120, m=100, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return (rng.random((n, 3)).astype(dtype),
            (0.8 * rng.random((m, 3)) + 0.25).astype(dtype))


def test_multiscale_truncation_is_within_its_tolerance(backend, dtype):
    """truncate=5 against truncate=None (the same warm start, every block):
    what the skipped blocks carry is below exp(-5) a_i b_j per pair, far
    below the float32 rounding of the value."""
    x, y = cube_clouds(dtype=dtype)
    full = sinkhorn_divergence(x, y, multiscale=True, truncate=None, return_grad=True,
                               backend=backend, **MS)
    cut = sinkhorn_divergence(x, y, multiscale=True, truncate=5.0, return_grad=True,
                              backend=backend, **MS)
    rtol = 1e-6 if dtype == np.float64 else 1e-4
    assert cut[0] == pytest.approx(full[0], rel=rtol)
    for g, g_full in zip(cut[1:], full[1:]):
        np.testing.assert_allclose(g, g_full, rtol=0, atol=10 * rtol * np.abs(g_full).max())


def test_multiscale_matches_the_dense_divergence(backend, dtype):
    """Against the dense loop on the same schedule: they differ by the coarse
    warm start only, 1e-3 relative on the value."""
    x, y = cube_clouds(seed=1, dtype=dtype)
    dense = sinkhorn_divergence(x, y, blur=MS["blur"], scaling=MS["scaling"],
                                backend=backend)
    ms = sinkhorn_divergence(x, y, multiscale=True, backend=backend, **MS)
    assert ms == pytest.approx(dense, rel=1e-3)


def test_multiscale_prunes_blocks(capsys):
    rng = np.random.default_rng(2)
    x, y = rng.random((300, 2)), rng.random((300, 2))
    with warnings.catch_warnings():  # not converged in 5 iterations: not the point
        warnings.simplefilter("ignore", kt.ConvergenceWarning)
        SinkhornTransport(blur=0.02, multiscale=True, cluster_scale=0.1, max_iter=5,
                          verbose=True).fit(x, Xt=y)
    out = capsys.readouterr().out
    kept = float(out.split("% of the x-y blocks kept")[0].split()[-1])
    assert 0 < kept < 60, out


def test_multiscale_transport_converges_to_the_dense_plan(backend):
    """Refined to tol at the final temperature, the potentials are the dense
    ones up to the truncation."""
    x, y = cube_clouds(seed=3)
    kw = {"blur": 0.1, "tol": 1e-9, "max_iter": 2000, "backend": backend}
    dense = SinkhornTransport(**kw).fit(x, Xt=y)
    ms = SinkhornTransport(multiscale=True, cluster_scale=0.3, **kw).fit(x, Xt=y)
    assert ms.converged_ and dense.converged_
    np.testing.assert_allclose(ms.transform(x), dense.transform(x), atol=1e-6)
    shift = ms.potential_s_.mean() - dense.potential_s_.mean()  # f + c, g - c
    np.testing.assert_allclose(ms.potential_s_ - shift, dense.potential_s_, atol=1e-6)


def test_multiscale_block_bounds_are_upper_bounds():
    """The kept blocks' test is a bound: where a block is skipped, every pair
    of it has ``(f_i + g_j - C_ij) / eps <= -truncate`` (brute force over the
    pairs, p = 2, for potentials with slopes: a displacement, as transport
    potentials have, plus noise), and the least-squares slopes skip more
    blocks than the first bound alone would."""
    from kerneltools.ot import _multiscale as ms

    rng = np.random.default_rng(5)
    x, y = rng.random((400, 2)), rng.random((300, 2)) + 0.3
    f = x @ np.array([-0.3, -0.3]) + 0.01 * rng.normal(size=400)
    g = y @ np.array([0.3, 0.3]) - 0.09 + 0.01 * rng.normal(size=300)
    cx = ms._Clusters(x, np.full(400, 1 / 400), 0.1)
    cy = ms._Clusters(y, np.full(300, 1 / 300), 0.1)
    eps, t = 0.01, 5.0
    keep = ms._keep(cx, cy, x, y, f, g, eps, 2, t)
    logp = (f[:, None] + g[None, :] - ((x[:, None] - y[None]) ** 2).sum(-1) / 2) / eps
    skipped = ~keep[cx.labels][:, cy.labels]
    assert skipped.any() and (logp[skipped] <= -t).all()
    ball = (cx.max_per_cell(f)[:, None] + cy.max_per_cell(g)[None, :]
            - np.maximum(np.sqrt(((cx.c[:, None] - cy.c[None]) ** 2).sum(-1))
                         - cx.r[:, None] - cy.r[None, :], 0) ** 2 / 2) / eps > -t
    assert keep.sum() < ball.sum()


def test_multiscale_block_choice_by_row_chunks(monkeypatch):
    """The mask is built chunk by chunk of cell rows (never the cells x cells
    scores): the same mask for any chunk size, every row and every column
    with a kept block (its best one, ties to the first row)."""
    from kerneltools.ot import _multiscale as ms

    rng = np.random.default_rng(6)
    x, y = rng.random((500, 2)), rng.random((400, 2)) * 0.8 + 0.5
    f, g = 0.01 * rng.normal(size=500), 0.01 * rng.normal(size=400)
    cx = ms._Clusters(x, np.full(500, 1 / 500), 0.05)
    cy = ms._Clusters(y, np.full(400, 1 / 400), 0.05)
    masks = []
    for rows in (10_000, 7, 1):
        monkeypatch.setattr(ms, "_KEEP_ROWS", rows)
        masks.append([ms._keep(cx, cy, x, y, f, g, 0.002, p, 5.0) for p in (1, 2)])
    for p in (0, 1):
        np.testing.assert_array_equal(masks[0][p], masks[1][p])
        np.testing.assert_array_equal(masks[0][p], masks[2][p])
        assert masks[0][p].any(axis=0).all() and masks[0][p].any(axis=1).all()
        assert not masks[0][p].all()


def test_multiscale_default_cells_grow_with_the_points():
    """GeomLoss's ~2,000 cells up to 1.2e5 points, then one per 60 points,
    at most 20,000 (the block masks are cells x cells)."""
    from kerneltools.ot import _multiscale as ms

    def cells(n):
        return ms.default_cluster_scale(np.sqrt(3), 3, n) ** -3.0  # unit cube

    np.testing.assert_allclose([cells(0), cells(10**5), cells(10**6), cells(10**8)],
                               [2000, 2000, 10**6 / 60, 20000], rtol=1e-9)
