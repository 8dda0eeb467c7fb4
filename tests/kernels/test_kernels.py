"""kernels.py: named kernels against sklearn.metrics.pairwise, GP kernel objects
against sklearn.gaussian_process.kernels (values and theta-gradients)."""

import functools

import numpy as np
import pytest
from sklearn.gaussian_process import kernels as gk
from sklearn.metrics.pairwise import KERNEL_PARAMS, pairwise_kernels

import kerneltools as kt
from kerneltools.kernels import PAIRWISE_KERNELS, Kernel, make_kernel

RNG = np.random.default_rng(0)
X = RNG.random((40, 5))
Y = RNG.random((30, 5))
X[3] = 0.0  # a zero row: cosine and chi2 must treat it as scikit-learn does


PARAMS = {"gamma": 0.7, "degree": 2, "coef0": 0.5}
B = RNG.normal(size=30)


@functools.cache
def _summed(backend, dtype_name):
    """{name: sum_j k(x_i, y_j) b_j} of every named kernel, computed by one
    compiled kernel (the concatenation of their formulas) per backend and
    dtype instead of one per kernel; None where that kernel fails (each
    test then sums its own, so that the failure names the kernel)."""
    Xd, Yd, b = (a.astype(dtype_name) for a in (X, Y, B))
    names = sorted(PAIRWISE_KERNELS)
    F = [make_kernel(n, **PARAMS).lazy(Xd, Yd) * kt.Vj(b) for n in names]
    try:
        out = functools.reduce(lambda u, v: u.concat(v), F).sum(axis=1, backend=backend)
    except Exception:  # noqa: BLE001 - each test then runs its own kernel
        return None
    assert out.shape == (len(X), len(names))
    return {n: out[:, k] for k, n in enumerate(names)}


@pytest.mark.parametrize("name", sorted(PAIRWISE_KERNELS))
def test_named_kernel_matches_sklearn(name, backend, dtype, rtol):
    params = PARAMS
    ref = pairwise_kernels(X, Y, metric=name,
                           **{k: v for k, v in params.items() if k in KERNEL_PARAMS[name]})
    k = make_kernel(name, **params)
    Xd, Yd = X.astype(dtype), Y.astype(dtype)
    dense = k(Xd, Yd)
    assert dense.dtype == dtype
    np.testing.assert_allclose(dense, ref, rtol=10 * rtol, atol=10 * rtol)
    formula = k.lazy(Xd, Yd).to_dense()[..., 0]  # the formula itself, not sklearn's code
    np.testing.assert_allclose(formula, ref, rtol=10 * rtol, atol=10 * rtol)
    b = B.astype(dtype)
    summed = _summed(backend, dtype.name)
    out = (summed[name] if summed is not None else
           (k.lazy(Xd, Yd) * kt.Vj(b)).sum(axis=1, backend=backend)[:, 0])
    assert out.dtype == dtype
    np.testing.assert_allclose(out, ref @ b, rtol=50 * rtol, atol=50 * rtol * np.abs(ref).sum(1).max())


def test_gamma_none_is_one_over_n_features():
    ref = pairwise_kernels(X, Y, metric="rbf")
    np.testing.assert_allclose(make_kernel("rbf")(X, Y), ref, rtol=1e-12)
    np.testing.assert_allclose(make_kernel("chi2")(X, Y), pairwise_kernels(X, Y, metric="chi2", gamma=1.0))


def test_chi2_rejects_negative_input():
    with pytest.raises(ValueError, match="negative"):
        make_kernel("chi2")(X - 1)


def test_unknown_kernel_name_lists_valid_ones():
    with pytest.raises(ValueError, match="rbf") as err:
        make_kernel("gaussian")
    assert "laplacian" in str(err.value)
    with pytest.raises(TypeError, match="kernel must be"):
        make_kernel(3.0)


def test_custom_callable_kernel():
    def cauchy(x_i, y_j, scale=1.0):
        return 1.0 / (1.0 + x_i.sqdist(y_j) / scale)

    k = make_kernel(cauchy, kernel_params={"scale": 2.0})
    d2 = ((X[:, None] - Y[None]) ** 2).sum(-1)
    np.testing.assert_allclose(k(X, Y), 1 / (1 + d2 / 2), rtol=1e-12)
    with pytest.raises(TypeError, match="scalar LazyTensor"):
        make_kernel(lambda x, y: x - y)(X, Y)


GP_KERNELS = [
    gk.RBF(1.3),
    gk.RBF([0.5, 1.2, 2.0]),
    gk.Matern(0.7, nu=0.5),
    gk.Matern([0.7, 1.0, 2.0], nu=1.5),
    gk.Matern(0.7, nu=2.5),
    gk.Matern(0.9, nu=np.inf),
    gk.RationalQuadratic(0.8, 1.7),
    gk.ExpSineSquared(1.1, 2.3),
    gk.DotProduct(0.6),
    gk.ConstantKernel(3.0),
    gk.ConstantKernel(2.0) * gk.RBF(0.9) + gk.WhiteKernel(0.3),
    gk.ConstantKernel(1.5) * gk.WhiteKernel(0.2) + gk.RBF(1.0),
    (gk.DotProduct(0.3) + gk.ConstantKernel(0.5)) ** 2,
    gk.RBF(1.0) ** 1.5,
    gk.ConstantKernel(2.0, constant_value_bounds="fixed") * gk.RBF(1.0, length_scale_bounds="fixed"),
    gk.ConstantKernel(2.0, constant_value_bounds="fixed") * gk.Matern([1.0, 2.0, 0.5]),
]


def _formula_only(k: Kernel) -> Kernel:
    """``k`` evaluated from its formula (by the engine), without the dense
    evaluation of the scikit-learn object it translates."""
    return Kernel(k.build, params=k.params, white=k.white, prepare=k.prepare,
                  name=k.name, free=k.free)


@pytest.mark.parametrize("kernel", GP_KERNELS, ids=lambda k: repr(k)[:40])
def test_gp_kernel_and_gradient_match_sklearn(kernel):
    """The translation: the formula and its symbolic gradient give
    scikit-learn's values."""
    rng = np.random.default_rng(1)
    Xg = rng.normal(size=(50, 3))
    # a random theta inside the bounds' neighbourhood
    kernel = kernel.clone_with_theta(kernel.theta + rng.uniform(-0.5, 0.5, kernel.theta.shape))
    K, G = kernel(Xg, eval_gradient=True)
    ours = _formula_only(make_kernel(kernel))
    K2, G2 = ours(Xg, eval_gradient=True)
    np.testing.assert_allclose(K2, K, rtol=1e-10, atol=1e-10)
    assert G2.shape == G.shape
    np.testing.assert_allclose(G2, G, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ours.theta, kernel.theta, rtol=1e-12)
    np.testing.assert_allclose(ours(Xg, Xg[:7]), kernel(Xg, Xg[:7]), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ours.diag(Xg), kernel.diag(Xg), rtol=1e-10, atol=1e-10)
    theta = kernel.theta + 0.3
    np.testing.assert_allclose(ours.with_theta(theta)(Xg), kernel.clone_with_theta(theta)(Xg),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kernel", GP_KERNELS, ids=lambda k: repr(k)[:40])
def test_gp_kernel_dense_is_sklearns_and_follows_theta(kernel):
    """The dense evaluation of a translated kernel is the scikit-learn object's
    own (cheap on small problems), with_theta included; the formula gives the
    same values to 1e-10."""
    rng = np.random.default_rng(5)
    Xg, Yg = rng.normal(size=(40, 3)), rng.normal(size=(9, 3))
    ours = make_kernel(kernel)
    theta = kernel.theta + rng.uniform(-0.5, 0.5, kernel.theta.shape)
    moved = (ours.with_theta(theta), kernel.clone_with_theta(theta))
    for k, ref in [(ours, kernel), moved]:
        formula = _formula_only(k)
        K, G = k(Xg, eval_gradient=True)
        K_ref, G_ref = ref(Xg, eval_gradient=True)
        np.testing.assert_array_equal(K, K_ref)
        np.testing.assert_array_equal(G, G_ref)
        np.testing.assert_array_equal(k(Xg, Yg), ref(Xg, Yg))
        np.testing.assert_array_equal(k.diag(Xg), ref.diag(Xg))
        np.testing.assert_allclose(k(Xg, Yg), formula(Xg, Yg), rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(k.diag(Xg), formula.diag(Xg), rtol=1e-10, atol=1e-10)
    assert ours(Xg.astype(np.float32)).dtype == np.float32  # as the formula's


def test_gp_kernel_gradient_against_finite_differences():
    kernel = gk.ConstantKernel(1.5) * gk.Matern([0.8, 1.3], nu=2.5) + gk.WhiteKernel(0.1)
    ours = _formula_only(make_kernel(kernel))
    Xg = np.random.default_rng(2).normal(size=(20, 2))
    _, G = ours(Xg, eval_gradient=True)
    h = 1e-6
    for t in range(len(ours.theta)):
        e = np.zeros_like(ours.theta)
        e[t] = h
        fd = (ours.with_theta(ours.theta + e)(Xg) - ours.with_theta(ours.theta - e)(Xg)) / (2 * h)
        np.testing.assert_allclose(G[..., t], fd, rtol=1e-6, atol=1e-8)


def test_gp_kernel_lazy_product_matches_dense(backend):
    kernel = gk.ConstantKernel(2.0) * gk.RBF([0.5, 1.0, 2.0]) + gk.WhiteKernel(0.3)
    ours = make_kernel(kernel)
    Xg = np.random.default_rng(3).normal(size=(60, 3))
    b = np.random.default_rng(4).normal(size=60)
    from kerneltools.linalg import KernelOperator

    A = KernelOperator(ours, Xg, backend=backend)
    np.testing.assert_allclose(A @ b, kernel(Xg) @ b, rtol=1e-10)


@pytest.mark.parametrize("kernel, match", [
    (gk.Matern(1.0, nu=1.0), "nu"),
    (gk.PairwiseKernel(), "cannot translate"),
    (gk.RBF() * gk.WhiteKernel(), "WhiteKernel"),
    (gk.WhiteKernel() ** 2, "WhiteKernel"),
])
def test_unsupported_gp_kernels_are_named(kernel, match):
    with pytest.raises((TypeError, ValueError), match=match):
        make_kernel(kernel)


def test_kernel_object_roundtrip():
    k = make_kernel("rbf", gamma=0.2)
    assert make_kernel(k) is k
    assert isinstance(k, Kernel) and "rbf" in repr(k)


def test_grid_over_gamma_compiles_once(tmp_path, monkeypatch):
    from kerneltools.backend.cpu import _backend as _cpu_backend

    if not _cpu_backend.CpuBackend().available()[0]:
        pytest.skip("no C compiler here")
    monkeypatch.setenv("KERNELTOOLS_CACHE_DIR", str(tmp_path))
    X7 = RNG.random((40, 7))  # a shape no other test compiles
    before = _cpu_backend.compile_count()
    for g in (0.1, 0.5, 2.0, 7.0):
        k = make_kernel("laplacian", gamma=g)
        out = k.lazy(X7) @ np.ones(40)
        np.testing.assert_allclose(out, k(X7).sum(1), rtol=1e-12)
    assert _cpu_backend.compile_count() == before + 1


# ---------------------------------------------------------------------------
# make_kernel validates the named kernels' parameters and the GP kernels'
# hyperparameters with scikit-learn's wording (a negative gamma used to give
# a growing "Gaussian" without a word).
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kernel,kwargs,param,expected,got",
    [
        ("rbf", {"gamma": -1}, "gamma", "a float >= 0", "-1"),
        ("laplacian", {"gamma": -0.5}, "gamma", "a float >= 0", "-0.5"),
        ("chi2", {"gamma": float("nan")}, "gamma", "a float >= 0", "nan"),
        ("poly", {"gamma": -2.0}, "gamma", "a float >= 0", "-2.0"),
        ("polynomial", {"degree": -1}, "degree", "a float >= 0", "-1"),
        ("poly", {"degree": float("inf")}, "degree", "a float >= 0", "inf"),
        ("poly", {"coef0": float("nan")}, "coef0", "a finite float", "nan"),
        ("sigmoid", {"gamma": -1.0}, "gamma", "a float >= 0", "-1.0"),
        ("sigmoid", {"coef0": float("inf")}, "coef0", "a finite float", "inf"),
        ("rbf", {"gamma": "big"}, "gamma", "a float >= 0", "'big'"),
        ("rbf", {"gamma": True}, "gamma", "a float >= 0", "True"),
    ],
)
def test_make_kernel_validates_named_kernel_parameters(kernel, kwargs, param, expected,
                                                       got):
    msg = (f"The '{param}' parameter of make_kernel('{kernel}') must be {expected}. "
           f"Got {got} instead.")
    with pytest.raises(ValueError, match="^" + _escape(msg) + "$"):
        make_kernel(kernel, **kwargs)


def _escape(s):
    import re

    return re.escape(s)


def test_make_kernel_accepts_valid_parameters():
    X = RNG.random((6, 3))
    from sklearn.metrics.pairwise import pairwise_kernels

    # gamma = 0 is scikit-learn's constant kernel (KernelRidge's gamma is >= 0)
    cases = [("rbf", {"gamma": 0.3}), ("rbf", {"gamma": 0.0}),
             ("laplacian", {"gamma": 0}), ("poly", {"degree": 0, "coef0": -1.0}),
             ("sigmoid", {"gamma": 0.1, "coef0": -2.0}), ("chi2", {"gamma": 2.0})]
    for name, kw in cases:
        k = make_kernel(name, **kw)
        np.testing.assert_allclose(k.lazy(X).to_dense()[..., 0],
                                   pairwise_kernels(X, metric=name, **kw), rtol=1e-12)


@pytest.mark.parametrize(
    "make,param",
    [
        (lambda gk: gk.RBF(length_scale=-1.0), "length_scale"),
        (lambda gk: gk.RBF(length_scale=[1.0, 0.0]), "length_scale"),
        (lambda gk: gk.Matern(length_scale=-2.0, nu=1.5), "length_scale"),
        (lambda gk: gk.ConstantKernel(-1.0) * gk.RBF(), "constant_value"),
        (lambda gk: gk.RBF() + gk.WhiteKernel(noise_level=-1e-3), "noise_level"),
        (lambda gk: gk.RationalQuadratic(alpha=-1.0), "alpha"),
        (lambda gk: gk.ExpSineSquared(periodicity=0.0), "periodicity"),
        (lambda gk: gk.DotProduct(sigma_0=float("nan")), "sigma_0"),
    ],
)
def test_make_kernel_validates_gaussian_process_hyperparameters(make, param):
    from sklearn.gaussian_process import kernels as gk

    with pytest.raises(ValueError, match=rf"The '{param}' parameter of .* must be"):
        make_kernel(make(gk))
