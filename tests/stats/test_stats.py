"""kerneltools.stats against dense NumPy references at small n.

MMD^2 (biased and unbiased), the energy distance (and scipy's in 1-D), HSIC
and the linear-time MMD against dense matrices from scikit-learn's
``pairwise_kernels``; permutation p-values against a plain loop over the
same permutations; the type I error of the permutation test on null data.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats
from scipy.spatial.distance import cdist
from scipy.special import ndtr
from sklearn.metrics.pairwise import pairwise_kernels

from kerneltools import stats

#: Sums of n^2 kernel values: rounding of the reductions' dtype.
TOL = {np.dtype(np.float32): 2e-4, np.dtype(np.float64): 1e-10}


def samples(n=40, m=30, d=3, shift=0.3, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    Y = rng.normal(size=(m, d)) + shift
    return X.astype(dtype), Y.astype(dtype)


def dense_mmd2(K, n, unbiased):
    Kxx, Kyy, Kxy = K[:n, :n], K[n:, n:], K[:n, n:]
    m = len(K) - n
    if not unbiased:
        return Kxx.mean() + Kyy.mean() - 2 * Kxy.mean()
    return ((Kxx.sum() - np.trace(Kxx)) / (n * (n - 1))
            + (Kyy.sum() - np.trace(Kyy)) / (m * (m - 1)) - 2 * Kxy.mean())


def median_gamma(Z):
    d = cdist(Z, Z)
    return 1 / (2 * np.median(d[np.triu_indices(len(Z), 1)]) ** 2)


@pytest.mark.parametrize("unbiased", [True, False])
@pytest.mark.parametrize("kernel, params", [("rbf", {"gamma": 0.3}),
                                            ("laplacian", {"gamma": 0.5}),
                                            ("poly", {"gamma": 0.2, "degree": 2})])
def test_mmd2_equals_dense(backend, dtype, unbiased, kernel, params):
    params = dict(params)
    X, Y = samples(dtype=dtype)
    Z = np.concatenate([X, Y]).astype(np.float64)
    K = pairwise_kernels(Z, metric=kernel, **params)
    gamma = params.pop("gamma")
    got = stats.mmd2(X, Y, kernel=kernel, gamma=gamma, unbiased=unbiased,
                     kernel_params=params, backend=backend)
    ref = dense_mmd2(K, len(X), unbiased)
    assert abs(got - ref) <= TOL[dtype] * np.abs(K).mean()


def close_samples(n=500, d=3, shift=0.05):
    """Two close Gaussian samples in float32: with the wide kernel
    ``gamma = 0.01``, MMD^2 (4.5e-6) is about 2 10^5 times smaller than the
    kernel means it is a difference of (near 1)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d)).astype(np.float32)
    Y = (rng.normal(size=(n, d)) + shift).astype(np.float32)
    return X, Y


#: Relative accuracy of the statistics of float32 samples (computed in float64).
FLOAT32_SAMPLES_RTOL = 1e-7


@pytest.mark.parametrize("unbiased", [True, False])
def test_mmd2_of_close_float32_samples_is_accurate(backend, unbiased):
    """The statistic of float32 data equals the float64 statistic of the same
    values to 1e-7 relative: no cancellation of float32 kernel means (float32
    reductions were 2.8e-3 off here, unbiased)."""
    X, Y = close_samples()
    K = pairwise_kernels(np.concatenate([X, Y]).astype(np.float64), metric="rbf",
                         gamma=0.01)
    got = stats.mmd2(X, Y, gamma=0.01, unbiased=unbiased, backend=backend)
    ref = dense_mmd2(K, len(X), unbiased)
    assert got == pytest.approx(ref, rel=FLOAT32_SAMPLES_RTOL)


@pytest.mark.parametrize("unbiased", [True, False])
def test_mmd_test_statistic_of_close_float32_samples_is_accurate(unbiased):
    """Both paths of the permutation test report the float64 statistic of
    float32 samples: the dense blocks (float64 tiles; their float32 products
    were 1.6e-4 off here, unbiased) and the engine's reductions."""
    X, Y = close_samples()
    K = pairwise_kernels(np.concatenate([X, Y]).astype(np.float64), metric="rbf",
                         gamma=0.01)
    ref = dense_mmd2(K, len(X), unbiased)
    for method in ("blocks", "reductions"):
        res = stats.mmd_test(X, Y, gamma=0.01, unbiased=unbiased, n_permutations=3,
                             random_state=0, method=method, backend="numpy"
                             if method == "reductions" else None)
        assert res.statistic == pytest.approx(ref, rel=FLOAT32_SAMPLES_RTOL), method


def test_mmd2_median_heuristic_by_default(backend):
    X, Y = samples(seed=1)
    Z = np.concatenate([X, Y])
    K = pairwise_kernels(Z, metric="rbf", gamma=median_gamma(Z))
    assert stats.mmd2(X, Y, backend=backend) == pytest.approx(dense_mmd2(K, len(X), True),
                                                              rel=1e-9)


def test_energy_distance_equals_scipy_in_1d_and_dense_in_3d(backend, dtype):
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=50).astype(dtype), (rng.normal(size=40) + 0.5).astype(dtype)
    got = stats.energy_distance(x[:, None], y[:, None], backend=backend)
    ref = scipy.stats.energy_distance(x.astype(np.float64), y.astype(np.float64)) ** 2
    assert got == pytest.approx(ref, rel=10 * TOL[dtype])
    X, Y = samples(dtype=dtype)
    X64, Y64 = X.astype(np.float64), Y.astype(np.float64)
    ref = 2 * cdist(X64, Y64).mean() - cdist(X64, X64).mean() - cdist(Y64, Y64).mean()
    assert stats.energy_distance(X, Y, backend=backend) == pytest.approx(
        ref, rel=10 * TOL[dtype])


def test_linear_mmd_equals_the_formula(backend):
    X, Y = samples(n=41, m=36, seed=3)
    g = 0.4
    n2 = 18

    def k(a, b):
        return np.exp(-g * ((a - b) ** 2).sum(-1))

    x1, x2, y1, y2 = X[0:36:2], X[1:36:2], Y[0:36:2], Y[1:36:2]
    h = k(x1, x2) + k(y1, y2) - k(x1, y2) - k(x2, y1)
    res = stats.linear_mmd_test(X, Y, gamma=g, backend=backend)
    assert res.statistic == pytest.approx(h.mean(), rel=1e-10)
    z = h.mean() / (h.std(ddof=1) / np.sqrt(n2))
    assert res.pvalue == pytest.approx(1 - ndtr(z), rel=1e-9)


def loop_pvalue(X, Y, kernel, gamma, unbiased, n_perm, seed):
    """One dense statistic per permutation, the same permutations in order."""
    Z = np.concatenate([X, Y])
    n = len(X)
    K = pairwise_kernels(Z, metric=kernel, gamma=gamma)
    obs = dense_mmd2(K, n, unbiased)
    rng = np.random.default_rng(seed)
    null = []
    for _ in range(n_perm):
        p = rng.permutation(len(Z))
        null.append(dense_mmd2(K[np.ix_(p, p)], n, unbiased))
    null = np.array(null)
    return obs, null, (1 + np.sum(null >= obs - 1e-10 * abs(obs))) / (1 + n_perm)


@pytest.mark.parametrize("unbiased", [True, False])
def test_permutation_pvalue_equals_a_plain_loop(backend, unbiased):
    X, Y = samples(n=25, m=20, shift=0.4, seed=4)
    obs, null, p = loop_pvalue(X, Y, "rbf", 0.25, unbiased, 150, seed=7)
    # batch_size 64: three batches, the last one partial
    res = stats.mmd_test(X, Y, gamma=0.25, unbiased=unbiased, n_permutations=150,
                         batch_size=64, random_state=7, backend=backend,
                         method="reductions")
    assert res.statistic == pytest.approx(obs, rel=1e-10)
    np.testing.assert_allclose(res.null_distribution, null, rtol=1e-9, atol=1e-12)
    assert res.pvalue == p


@pytest.mark.parametrize("unbiased", [True, False])
def test_blocked_permutation_test_equals_a_plain_loop(dtype, unbiased, monkeypatch):
    """Dense row blocks times all the columns (BLAS): blocks of 7 rows in
    tiles of 10 columns (the last ones partial) and passes of 64 columns, so
    that every part of the symmetric fold runs."""
    from kerneltools.stats import _blocks as _kernel_blocks

    monkeypatch.setattr(_kernel_blocks, "_rows_per_block", lambda N, itemsize: 7)
    monkeypatch.setattr(_kernel_blocks, "_columns_per_tile",
                        lambda rows, N, itemsize: min(N, max(rows, 10)))
    X, Y = samples(n=25, m=20, shift=0.4, seed=4)
    obs, null, p = loop_pvalue(X, Y, "rbf", 0.25, unbiased, 150, seed=7)
    res = stats.mmd_test(X.astype(dtype), Y.astype(dtype), gamma=0.25, unbiased=unbiased,
                         n_permutations=150, batch_size=64, random_state=7,
                         method="blocks")
    rtol = 1e-10 if dtype == np.float64 else 1e-5
    assert res.statistic == pytest.approx(obs, rel=rtol)
    np.testing.assert_allclose(res.null_distribution, null, rtol=rtol,
                               atol=rtol * np.abs(null).max())
    assert res.pvalue == p


def energy_loop(X, Y, n_perm, seed):
    Z = np.concatenate([X, Y]).astype(np.float64)
    D = -cdist(Z, Z)
    rng = np.random.default_rng(seed)
    null = []
    for _ in range(n_perm):
        q = rng.permutation(len(Z))
        null.append(dense_mmd2(D[np.ix_(q, q)], len(X), False))
    return dense_mmd2(D, len(X), False), np.array(null)


def test_blocked_energy_test_equals_a_plain_loop(capsys):
    X, Y = samples(n=15, m=18, shift=0.4, seed=12)
    obs, null = energy_loop(X, Y, 80, 2)
    res = stats.energy_test(X, Y, n_permutations=80, random_state=2, method="blocks",
                            verbose=True)
    assert "pass 1 (permutations up to 80 of 80): 33/33 rows of K" in capsys.readouterr().out
    assert res.statistic == pytest.approx(obs, rel=1e-10)
    np.testing.assert_allclose(res.null_distribution, null, rtol=1e-9)
    # far from the origin in float32 (|x|^2 ~ 3 10^4): the points are centred
    # before the expanded distances |x|^2 + |y|^2 - 2 <x, y>
    Xf, Yf = (X + 100).astype(np.float32), (Y + 100).astype(np.float32)
    obs, null = energy_loop(Xf, Yf, 80, 2)
    far = stats.energy_test(Xf, Yf, n_permutations=80, random_state=2, method="blocks")
    assert far.statistic == pytest.approx(obs, rel=1e-5)
    np.testing.assert_allclose(far.null_distribution, null, rtol=1e-5)


def test_batch_size_does_not_change_the_result():
    X, Y = samples(n=20, m=22, seed=5)
    for method in ("blocks", "reductions"):
        r1 = stats.mmd_test(X, Y, n_permutations=50, batch_size=1, random_state=3,
                            method=method)
        r2 = stats.mmd_test(X, Y, n_permutations=50, batch_size=50, random_state=3,
                            method=method)
        np.testing.assert_allclose(r1.null_distribution, r2.null_distribution,
                                   rtol=1e-12)
        assert r1.pvalue == r2.pvalue


def test_type_one_error_is_near_the_level():
    """60 null data sets (same distribution): rejections at 10% are a
    Binomial(60, 0.1) draw (mean 6, sd 2.3): accept 1 to 13."""
    rng = np.random.default_rng(11)
    rejected = 0
    for _ in range(60):
        X, Y = rng.normal(size=(20, 2)), rng.normal(size=(20, 2))
        res = stats.mmd_test(X, Y, n_permutations=99, batch_size=99,
                             random_state=rng.integers(2**31))
        rejected += res.pvalue <= 0.1
    assert 1 <= rejected <= 13, rejected


def test_power_on_shifted_data():
    X, Y = samples(n=60, m=60, shift=1.0, seed=6)
    assert stats.mmd_test(X, Y, n_permutations=200, random_state=0).pvalue < 0.01
    assert stats.energy_test(X, Y, n_permutations=200, random_state=0).pvalue < 0.01
    assert stats.linear_mmd_test(X, Y).pvalue < 0.05


# -- HSIC ------------------------------------------------------------------------------


def dense_hsic(X, Y, gx, gy):
    n = len(X)
    K = pairwise_kernels(X, metric="rbf", gamma=gx)
    L = pairwise_kernels(Y, metric="rbf", gamma=gy)
    H = np.eye(n) - 1 / n
    return np.trace(K @ H @ L @ H) / n**2


def test_hsic_equals_dense(backend, dtype):
    rng = np.random.default_rng(8)
    X = rng.normal(size=(30, 2))
    Y = np.concatenate([X[:, :1] ** 2, rng.normal(size=(30, 2))], axis=1)
    ref = dense_hsic(X, Y, 0.5, 0.3)
    got = stats.hsic(X.astype(dtype), Y.astype(dtype), gamma_x=0.5, gamma_y=0.3,
                     backend=backend)
    assert got == pytest.approx(ref, rel=50 * TOL[dtype])


def test_hsic_of_close_float32_samples_is_accurate(backend):
    """HSIC of weakly dependent float32 samples (1.7e-6, against kernel
    means near 1) equals the float64 value of the same data to 1e-7 relative
    (float32 reductions were 1.4e-3 off here); the reference centres K
    densely, an independent form of the expanded sums."""
    X, _ = close_samples()
    rng = np.random.default_rng(1)
    Y = (0.05 * X[:, :1] + rng.normal(size=(len(X), 1))).astype(np.float32)
    K = pairwise_kernels(X.astype(np.float64), metric="rbf", gamma=0.01)
    L = pairwise_kernels(Y.astype(np.float64), metric="rbf", gamma=0.01)
    Kc = K - K.mean(0) - K.mean(1)[:, None] + K.mean()
    ref = (Kc * L).sum() / len(X) ** 2
    got = stats.hsic(X, Y, gamma_x=0.01, gamma_y=0.01, backend=backend)
    assert got == pytest.approx(ref, rel=FLOAT32_SAMPLES_RTOL)


def test_hsic_permutation_test_equals_a_plain_loop(backend, monkeypatch):
    """58 permutations in batches (one reduction each), the last one partial
    (padded). The batch's kernel is one formula of ``HSIC_BATCH`` copies of
    L: the compiled backends run batches of 4, the same code at a quarter of
    the compile (the default's 16-copy kernel took most of this test's ~30 s
    on an empty kernel cache); the NumPy backend (nothing to compile) runs
    the default 16."""
    if backend != "numpy":
        monkeypatch.setattr(stats, "HSIC_BATCH", 4)
    rng = np.random.default_rng(9)
    X = rng.normal(size=(25, 2))
    Y = X[:, :1] + 0.5 * rng.normal(size=(25, 1))
    res = stats.hsic_test(X, Y, gamma_x=0.5, gamma_y=0.5, n_permutations=58,
                          random_state=4, backend=backend)
    r = np.random.default_rng(4)
    null = np.array([dense_hsic(X, Y[r.permutation(25)], 0.5, 0.5) for _ in range(58)])
    obs = dense_hsic(X, Y, 0.5, 0.5)
    assert res.statistic == pytest.approx(obs, rel=1e-10)
    np.testing.assert_allclose(res.null_distribution, null, rtol=1e-9)
    assert res.pvalue == (1 + np.sum(null >= obs - 1e-10 * obs)) / 59
    assert res.pvalue < 0.05


# -- bad input ---------------------------------------------------------------------------


def test_bad_input():
    X, Y = samples()
    with pytest.raises(ValueError, match="'X' and 'Y' must have the same number of features"):
        stats.mmd2(X, Y[:, :2])
    with pytest.raises(ValueError, match="'X' contains NaN"):
        stats.mmd2(np.full_like(X, np.nan), Y)
    with pytest.raises(ValueError, match="at least 2 samples"):
        stats.mmd2(X[:1], Y)
    with pytest.raises(ValueError, match="'n_permutations'"):
        stats.mmd_test(X, Y, n_permutations=0)
    with pytest.raises(ValueError, match="'gamma'"):
        stats.mmd2(X, Y, gamma=-1.0)
    with pytest.raises(ValueError, match="'kernel'"):
        stats.mmd2(X, Y, kernel="nope")
    with pytest.raises(ValueError, match="'method'"):
        stats.mmd_test(X, Y, method="dense")
    with pytest.raises(ValueError, match="method='blocks' serves"):
        stats.mmd_test(X, Y, kernel="laplacian", method="blocks")
    with pytest.raises(ValueError, match="'batch_size'"):
        stats.mmd_test(X, Y, batch_size=0)
    with pytest.raises(ValueError, match="paired samples"):
        stats.hsic(X, Y)
    with pytest.raises(TypeError, match="'Y' must be a real numeric array"):
        stats.mmd2(X, np.array([["a"] * 3] * 4))


# -- the V-statistics at n = 1, and messages that name the function called --------------


def dense_energy(X, Y):
    return 2 * cdist(X, Y).mean() - cdist(X, X).mean() - cdist(Y, Y).mean()


@pytest.mark.parametrize("n, m", [(1, 1), (1, 5), (4, 1)])
def test_biased_statistics_are_defined_for_one_sample(n, m):
    """The V-statistics need no pair of distinct points: against the dense
    definitions (one sample: its kernel matrix is 1 x 1)."""
    X, Y = samples(n=n, m=m)
    Z = np.concatenate([X, Y])
    gamma = 0.7
    K = pairwise_kernels(Z, metric="rbf", gamma=gamma)
    got = stats.mmd2(X, Y, gamma=gamma, unbiased=False)
    assert abs(got - dense_mmd2(K, n, unbiased=False)) <= 1e-12
    assert abs(stats.energy_distance(X, Y) - dense_energy(X, Y)) <= 1e-12
    res = stats.energy_test(X, Y, n_permutations=20, random_state=0)
    assert abs(res.statistic - dense_energy(X, Y)) <= 1e-12
    assert 0 < res.pvalue <= 1
    res = stats.mmd_test(X, Y, gamma=gamma, unbiased=False, n_permutations=20,
                         random_state=0)
    assert abs(res.statistic - dense_mmd2(K, n, unbiased=False)) <= 1e-12


def test_unbiased_statistic_needs_two_samples_and_says_why():
    X, Y = samples(n=1, m=5)
    with pytest.raises(ValueError, match="mmd2: 'X' .* at least 2 samples.*unbiased=False"):
        stats.mmd2(X, Y)
    with pytest.raises(ValueError, match="mmd_test: 'X' .* at least 2 samples"):
        stats.mmd_test(X, Y)


def _malformed_samples():
    X, Y = samples()
    ragged = [[1.0, 2.0], [3.0]]
    return [
        ("features differ", (X, Y[:, :2]), ValueError, "'X' and 'Y' must have the same"),
        ("3-d X", (X[None], Y), ValueError, "'X' must be a 2-D array"),
        ("0-d Y", (X, np.float64(3.0)), ValueError, "'Y' must be a 2-D array"),
        ("empty X", (X[:0], Y), ValueError, "'X' must be a 2-D array"),
        ("no features", (X[:, :0], Y[:, :0]), ValueError, "'X' must be a 2-D array"),
        ("nan", (X, np.full_like(Y, np.nan)), ValueError, "'Y' contains NaN"),
        ("inf", (np.full_like(X, np.inf), Y), ValueError, "'X' contains NaN or infinity"),
        ("strings", (X, np.array([["a"] * 3] * 4)), TypeError, "'Y' must be a real"),
        ("complex", (X + 1j, Y), TypeError, "'X' must be a real"),
        ("ragged", (ragged, Y), ValueError, "'X' must be"),
        ("None", (None, Y), TypeError, "'X' must be a real"),
    ]


@pytest.mark.parametrize("function", ["mmd2", "energy_distance", "mmd_test",
                                      "energy_test", "linear_mmd_test"])
def test_malformed_samples_raise_errors_naming_the_function_called(function):
    call = getattr(stats, function)
    for what, args, error, match in _malformed_samples():
        with pytest.raises(error, match=f"^{function}: .*{match}"):
            call(*args)


def test_bad_parameters_name_the_function_called():
    X, Y = samples()
    with pytest.raises(ValueError, match="^energy_test: 'n_permutations'"):
        stats.energy_test(X, Y, n_permutations=0)
    with pytest.raises(ValueError, match="^energy_test: 'batch_size'"):
        stats.energy_test(X, Y, batch_size=-1)
    with pytest.raises(ValueError, match="^energy_test: 'method'"):
        stats.energy_test(X, Y, method="dense")
    for gamma in (-1.0, np.nan, "1"):
        with pytest.raises(ValueError, match="^mmd2: 'gamma'"):
            stats.mmd2(X, Y, gamma=gamma)
    with pytest.raises(ValueError, match="^hsic: 'X' and 'Y' must be paired"):
        stats.hsic(X, Y)


@pytest.mark.parametrize("function", ["mmd2", "energy_distance", "mmd_test", "energy_test",
                                      "linear_mmd_test", "hsic", "hsic_test"])
def test_an_unknown_backend_is_named_with_the_function_called(function):
    X, Y = samples(n=10, m=10)
    with pytest.raises(ValueError, match=f"^{function}: .*'backend'.*'tpu'"):
        getattr(stats, function)(X, Y, backend="tpu")


def test_hsic_errors_name_each_samples_kernel_and_gamma():
    X, Y = samples(n=10, m=10)
    with pytest.raises(ValueError, match="^hsic: 'gamma_y' must be a float > 0"):
        stats.hsic(X, Y, gamma_y=-1.0)
    with pytest.raises(ValueError, match="^hsic_test: 'kernel_x': unknown kernel"):
        stats.hsic_test(X, Y, kernel_x="nope")
    with pytest.raises(ValueError, match="^hsic: 'X' .* at least 2 samples and 1 feature;"):
        stats.hsic(X[:1], Y[:1])
    for what, args, error, match in _malformed_samples():
        if what != "features differ":  # HSIC pairs samples of any dimensions
            with pytest.raises(error, match=f"^hsic: .*{match}"):
                stats.hsic(*args)


@pytest.mark.parametrize("function", ["mmd_test", "energy_test", "hsic_test"])
@pytest.mark.parametrize("seed", ["x", -1, 1.5])
def test_bad_random_state_is_named_with_the_function_called(function, seed):
    X, Y = samples(n=10, m=10)
    with pytest.raises((TypeError, ValueError), match=f"^{function}: 'random_state'"):
        getattr(stats, function)(X, Y, random_state=seed, n_permutations=5)


@pytest.mark.parametrize("function", ["mmd2", "mmd_test", "linear_mmd_test"])
def test_kernel_params_must_be_a_mapping(function):
    X, Y = samples(n=10, m=10)
    with pytest.raises(TypeError, match=f"^{function}: 'kernel_params' must be a dict"):
        getattr(stats, function)(X, Y, kernel_params=3)
