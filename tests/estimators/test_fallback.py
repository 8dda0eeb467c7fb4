"""The hand-over to scikit-learn (``estimators/_fallback.py``), compared with
scikit-learn's own estimators directly: what the engine does not serve gives
scikit-learn's results, attributes, types and errors; what it serves stays on
the engine, also after a fit that was handed over."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse
from sklearn import gaussian_process as sk_gp
from sklearn import kernel_approximation as sk_ka
from sklearn import kernel_ridge as sk_kr
from sklearn.gaussian_process.kernels import RBF, Matern, PairwiseKernel, WhiteKernel

from kerneltools.estimators import GaussianProcessRegressor, KernelRidge, Nystroem


def _rows_kernel(x, y, scale=1.0):
    """scikit-learn's kind of callable: two 1-D arrays (rows) -> a number."""
    return np.exp(-scale * np.sum((x - y) ** 2))


def _formula_kernel(x_i, y_j, scale=1.0):
    """kerneltools' kind: two LazyTensors -> a scalar formula."""
    return (-scale * x_i.sqdist(y_j)).exp()


class ScaledRBF(RBF):
    """A user Kernel subclass: the translator knows RBF, not this class."""


@pytest.fixture
def data(dtype):
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 2, size=(30, 3)).astype(dtype)
    y = (np.sin(X[:, 0]) + X[:, 1] + 0.05 * rng.normal(size=30)).astype(dtype)
    return X, y, rng.uniform(0, 2, size=(7, 3)).astype(dtype)


def _sparse(X):
    X = X.copy()
    X[X < 0.8] = 0  # mostly zeros
    return scipy.sparse.csr_matrix(X)


def _assert_same(got, want):
    """Same type, dtype and values (the same code ran: to rounding only)."""
    assert type(got) is type(want)
    if scipy.sparse.issparse(want):
        got, want = got.toarray(), want.toarray()
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    else:
        assert got == want


# -- KernelRidge ---------------------------------------------------------------
ROWS_CALLABLE = {"kernel": _rows_kernel, "kernel_params": {"scale": 0.7}}
KR_CASES = {
    "sparse-rbf": ({"kernel": "rbf", "gamma": 0.5}, "sparse"),
    "sparse-poly": ({"kernel": "poly", "degree": 2, "alpha": 0.1}, "sparse"),
    "precomputed": ({"kernel": "precomputed", "alpha": 0.5}, "gram"),
    "rows-callable": (ROWS_CALLABLE, "dense"),
    "gp-kernel-without-formula": ({"kernel": Matern(0.8, nu=1.0)}, "dense"),
}


def _kr_inputs(kind, X, Xq):
    if kind == "sparse":
        return _sparse(X), _sparse(Xq)
    if kind == "gram":
        return X @ X.T, Xq @ X.T
    return X, Xq


@pytest.mark.parametrize("case", KR_CASES)
def test_kernel_ridge_hands_over_with_scikit_learns_results(case, data):
    params, kind = KR_CASES[case]
    X, y, Xq = data
    Xf, Xp = _kr_inputs(kind, X, Xq)
    sw = np.linspace(0.5, 2.0, len(y))
    ours = KernelRidge(**params).fit(Xf, y, sample_weight=sw)
    ref = sk_kr.KernelRidge(**params).fit(Xf, y, sample_weight=sw)
    assert type(ours.fallback_) is sk_kr.KernelRidge
    assert ours._engine_refuses(Xf, y) is not None
    for name in ("dual_coef_", "X_fit_", "n_features_in_"):
        _assert_same(getattr(ours, name), getattr(ref, name))
    _assert_same(ours.predict(Xp), ref.predict(Xp))
    target = ref.predict(Xp) + 1
    _assert_same(ours.score(Xp, target), ref.score(Xp, target))


def test_kernel_ridge_says_the_hand_over_at_verbose(data, capsys):
    X, y, _ = data
    KernelRidge(kernel="precomputed", verbose=1).fit(X @ X.T, y)
    err = capsys.readouterr().err
    assert "kernel='precomputed' is not served by the kerneltools engine" in err
    assert "sklearn.kernel_ridge.KernelRidge" in err


def test_kernel_ridge_sparse_query_after_dense_fit_matches_scikit_learn(data):
    X, y, Xq = data
    ours = KernelRidge(kernel="rbf", gamma=0.5).fit(X, y)
    ref = sk_kr.KernelRidge(kernel="rbf", gamma=0.5).fit(X, y)
    assert not hasattr(ours, "fallback_")
    got = ours.predict(_sparse(Xq))
    np.testing.assert_allclose(got, ref.predict(_sparse(Xq)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got, ours.predict(_sparse(Xq).toarray()), rtol=1e-6)


# -- Nystroem --------------------------------------------------------------------
NYS_CASES = {
    "sparse-rbf": ({"kernel": "rbf", "gamma": 0.5}, "sparse"),
    "sparse-cosine": ({"kernel": "cosine"}, "sparse"),
    # scikit-learn's precomputed Nystroem needs every row as a landmark
    "precomputed": ({"kernel": "precomputed", "n_components": 30}, "gram"),
    "rows-callable": (ROWS_CALLABLE, "dense"),
    "gp-kernel-without-formula": ({"kernel": PairwiseKernel(metric="laplacian")},
                                  "dense"),
}


@pytest.mark.parametrize("case", NYS_CASES)
def test_nystroem_hands_over_with_scikit_learns_features(case, data):
    params, kind = NYS_CASES[case]
    X, _, Xq = data
    Xf, Xp = _kr_inputs(kind, X, Xq)
    params = {"n_components": 12, "random_state": 0, **params}
    ours = Nystroem(**params).fit(Xf)
    ref = sk_ka.Nystroem(**params).fit(Xf)
    assert type(ours.fallback_) is sk_ka.Nystroem
    for name in ("components_", "component_indices_", "normalization_"):
        _assert_same(getattr(ours, name), getattr(ref, name))
    _assert_same(ours.transform(Xp), ref.transform(Xp))
    assert list(ours.get_feature_names_out()) == list(ref.get_feature_names_out())


def test_nystroem_sparse_query_after_dense_fit_matches_scikit_learn(data):
    X, _, Xq = data
    ours = Nystroem(gamma=0.5, n_components=12, random_state=0).fit(X)
    ref = sk_ka.Nystroem(gamma=0.5, n_components=12, random_state=0).fit(X)
    got = ours.transform(_sparse(Xq))
    np.testing.assert_allclose(got, ref.transform(_sparse(Xq)), rtol=1e-4, atol=1e-5)


def test_nystroem_other_landmarks_refuse_what_only_scikit_learn_serves(data):
    X, _, _ = data
    with pytest.raises(ValueError, match="landmarks='kmeans\\+\\+'.*sparse X"):
        Nystroem(landmarks="kmeans++", n_components=5).fit(_sparse(X))


def test_nystroem_array_api_input_stays_in_its_namespace():
    """array_api_dispatch needs SCIPY_ARRAY_API=1 before SciPy is imported."""
    pytest.importorskip("array_api_strict")
    script = textwrap.dedent("""
        import array_api_strict as xp, numpy as np, sklearn
        from sklearn.kernel_approximation import Nystroem as SK
        from kerneltools.estimators import Nystroem
        X = np.random.default_rng(0).uniform(size=(12, 4))
        with sklearn.config_context(array_api_dispatch=True):
            ours = Nystroem(n_components=6, random_state=0).fit(xp.asarray(X))
            ref = SK(n_components=6, random_state=0).fit(xp.asarray(X))
            F, R = ours.transform(xp.asarray(X)), ref.transform(xp.asarray(X))
        # served by the engine in its namespace since issue 24 (no hand-over)
        assert not hasattr(ours, "fallback_") and type(ours.components_) is type(R)
        np.testing.assert_allclose(np.asarray(F), np.asarray(R), rtol=1e-12)
        served = Nystroem(n_components=6, random_state=0).fit(X)  # NumPy: the engine
        assert not hasattr(served, "fallback_")
        print("ok")
    """)
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"


# -- GaussianProcessRegressor ---------------------------------------------------------
GP_KERNELS = {
    "user-subclass": ScaledRBF(0.7) + WhiteKernel(0.05),
    "matern-nu-1": Matern(0.8, nu=1.0),
    "pairwise": PairwiseKernel(gamma=0.5, metric="laplacian"),
}


@pytest.mark.parametrize("name", GP_KERNELS)
def test_gp_kernel_without_formula_hands_over_with_scikit_learns_results(name, data):
    X, y, Xq = data
    X, y, Xq = (a.astype(np.float64) for a in (X, y, Xq))
    kernel = GP_KERNELS[name]
    ours = GaussianProcessRegressor(kernel, alpha=1e-2, random_state=0).fit(X, y)
    ref = sk_gp.GaussianProcessRegressor(kernel, alpha=1e-2, random_state=0).fit(X, y)
    assert type(ours.fallback_) is sk_gp.GaussianProcessRegressor
    _assert_same(ours.kernel_.theta, ref.kernel_.theta)
    assert repr(ours.kernel_) == repr(ref.kernel_)
    for name in ("alpha_", "L_", "X_train_", "y_train_"):
        _assert_same(getattr(ours, name), getattr(ref, name))
    _assert_same(ours.log_marginal_likelihood_value_,
                 ref.log_marginal_likelihood_value_)
    assert type(ours.log_marginal_likelihood_value_) is np.float64
    theta = ref.kernel_.theta + 0.1
    for got, want in zip(ours.log_marginal_likelihood(theta, eval_gradient=True),
                         ref.log_marginal_likelihood(theta, eval_gradient=True)):
        _assert_same(got, want)
    for kw in ({"return_std": True}, {"return_cov": True}):
        for got, want in zip(ours.predict(Xq, **kw), ref.predict(Xq, **kw)):
            _assert_same(got, want)
    _assert_same(ours.sample_y(Xq, 3, random_state=1),
                 ref.sample_y(Xq, 3, random_state=1))


# -- served input stays on the engine -------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: KernelRidge(kernel="rbf"),
    lambda: KernelRidge(kernel=_formula_kernel, kernel_params={"scale": 0.7}),
    lambda: KernelRidge(kernel=RBF(0.5) + WhiteKernel(0.1)),
    lambda: Nystroem(kernel="laplacian"),
    lambda: Nystroem(kernel=_formula_kernel),
    lambda: GaussianProcessRegressor(),
    lambda: GaussianProcessRegressor(Matern(0.5, nu=1.5) + WhiteKernel()),
], ids=["kr-rbf", "kr-formula", "kr-gp-kernel", "nys-laplacian", "nys-formula",
        "gp-default", "gp-matern"])
def test_served_input_is_not_refused(make, data):
    X, y, _ = data
    assert make()._engine_refuses(X, y) is None
    assert make()._engine_refuses(X.tolist(), y) is None


def test_formula_callable_is_served_and_matches_scikit_learn(data):
    X, y, Xq = data
    ours = KernelRidge(kernel=_formula_kernel, kernel_params={"scale": 0.7}).fit(X, y)
    ref = sk_kr.KernelRidge(kernel="rbf", gamma=0.7).fit(X, y)
    assert not hasattr(ours, "fallback_")
    np.testing.assert_allclose(ours.predict(Xq), ref.predict(Xq), rtol=2e-3, atol=2e-3)


def test_probe_does_not_touch_state_passed_in_kernel_params(data):
    """scikit-learn's own test counts the kernel's calls through kernel_params."""
    X, _, _ = data
    X = X[:8].astype(np.float64)
    log = []

    def logged(x, y, log):
        log.append(1)
        return np.minimum(x, y).sum()

    Nystroem(kernel=logged, n_components=7, kernel_params={"log": log}).fit(X)
    # scikit-learn's count (a triangle with the diagonal), the probe not included
    assert len(log) == 7 * 8 / 2


def test_refit_on_served_input_uses_the_engine_again(data, backend):
    X, y, Xq = data
    kr = KernelRidge(kernel="rbf", gamma=0.5, alpha=0.1, solver="cg", tol=1e-10,
                     n_components=10, backend=backend)
    kr.fit(_sparse(X), y)
    assert hasattr(kr, "fallback_") and not hasattr(kr, "solver_")
    kr.fit(X, y)
    assert not hasattr(kr, "fallback_") and kr.solver_ == "cg" and kr.n_iter_ > 1
    ref = sk_kr.KernelRidge(kernel="rbf", gamma=0.5, alpha=0.1).fit(X, y)
    rtol = 1e-3 if X.dtype == np.float32 else 1e-6
    np.testing.assert_allclose(kr.predict(Xq), ref.predict(Xq), rtol=rtol, atol=rtol)

    nys = Nystroem(n_components=10, random_state=0, backend=backend).fit(_sparse(X))
    assert hasattr(nys, "fallback_")
    nys.fit(X)
    assert not hasattr(nys, "fallback_")
    ref = sk_ka.Nystroem(n_components=10, random_state=0).fit(X)
    np.testing.assert_allclose(nys.transform(Xq), ref.transform(Xq), rtol=rtol,
                               atol=rtol)

    X64, y64 = X.astype(np.float64), y.astype(np.float64)
    gp = GaussianProcessRegressor(ScaledRBF(), alpha=1e-2, backend=backend)
    gp.fit(X64, y64)
    assert hasattr(gp, "fallback_")
    gp.set_params(kernel=RBF()).fit(X64, y64)
    assert not hasattr(gp, "fallback_") and gp.solver_ == "cholesky"
    ref = sk_gp.GaussianProcessRegressor(RBF(), alpha=1e-2).fit(X64, y64)
    np.testing.assert_allclose(gp.kernel_.theta, ref.kernel_.theta, rtol=1e-5)


def test_gp_sparse_query_raises_scikit_learns_error(data):
    X, y, Xq = data
    X, y = X.astype(np.float64), y.astype(np.float64)
    ours = GaussianProcessRegressor(alpha=1e-2).fit(X, y)
    ref = sk_gp.GaussianProcessRegressor(alpha=1e-2).fit(X, y)
    with pytest.raises(TypeError) as want:
        ref.predict(_sparse(Xq))
    with pytest.raises(TypeError) as got:
        ours.predict(_sparse(Xq))
    assert str(got.value) == str(want.value)


# -- pickling a hand-over ------------------------------------------------------------
_PICKLE_UNDER_ACCEL = textwrap.dedent("""
    import pickle, numpy as np, scipy.sparse
    import kerneltools.accel
    kerneltools.accel.install()
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.kernel_approximation import Nystroem
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import Matern
    from sklearn.neighbors import KernelDensity, NearestNeighbors
    from sklearn.decomposition import KernelPCA
    rng = np.random.default_rng(0)
    X, y = rng.random((20, 3)), rng.random(20)
    G = X @ X.T
    fits = [
        (KernelRidge(kernel="precomputed").fit(G, y), lambda m: m.predict(G)),
        (Nystroem(n_components=5, random_state=0).fit(scipy.sparse.csr_matrix(X)),
         lambda m: m.transform(X)),
        (GaussianProcessRegressor(Matern(nu=1.0), optimizer=None).fit(X, y),
         lambda m: m.predict(X)),
        (NearestNeighbors(n_neighbors=3, metric="precomputed").fit(G),
         lambda m: m.kneighbors(G)[1]),
        (KernelDensity(metric="jaccard").fit(X > 0.5), lambda m: m.score_samples(X > 0.5)),
        (KernelPCA(2, kernel="precomputed").fit(G), lambda m: m.transform(G)),
    ]
    for model, use in fits:
        assert model._delegating(), type(model)
        again = pickle.loads(pickle.dumps(model))
        assert type(again) is type(model) and type(again.fallback_) is type(model.fallback_)
        np.testing.assert_array_equal(use(again), use(model))
    print("ok")
""")


def test_a_hand_over_pickles_under_accel():
    """While accel is installed, scikit-learn's import paths name our classes,
    so pickle cannot find the fallback_'s class by name: FallbackMixin stores
    it by its public path (a subprocess: accel stays out of this one)."""
    out = subprocess.run([sys.executable, "-c", _PICKLE_UNDER_ACCEL], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "ok"
