"""Nystroem against scikit-learn's: same landmarks and features with
landmarks='uniform', better ones with 'kmeans++' and 'rls', the estimator
contract, grid search, GP and formula kernels, and bad input."""

import functools
import itertools
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.gaussian_process.kernels import RBF, Matern, WhiteKernel
from sklearn.kernel_approximation import Nystroem as SKNystroem
from sklearn.linear_model import RidgeClassifier
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from kerneltools.estimators.nystroem import _landmarks as _blocks
from kerneltools.estimators import nystroem as ny
from kerneltools.estimators.nystroem import LANDMARK_METHODS, Nystroem
from kerneltools.kernels import PAIRWISE_KERNELS, make_kernel


def _data(name):
    if name == "digits":
        return load_digits().data[:900]  # integers 0..16: chi2 kernels need X >= 0
    return StandardScaler().fit_transform(load_breast_cancer().data)


def _close(ours, ref, rtol=1e-8):
    np.testing.assert_allclose(ours, ref, rtol=rtol, atol=rtol * np.abs(ref).max())


def _blobs(seed=0, k=50, sd=0.5, d=5):
    """About 1,000 points in k tight clusters of 5 to 35 points."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(5, 36, size=k)
    centers = rng.uniform(-15, 15, size=(k, d))
    return np.concatenate(
        [c + sd * rng.normal(size=(s, d)) for c, s in zip(centers, sizes)]
    )


_CASES = [("digits", k) for k in sorted(PAIRWISE_KERNELS)] + [
    ("breast_cancer", k) for k in sorted(PAIRWISE_KERNELS) if "chi2" not in k
]


@pytest.mark.parametrize(
    "params",
    [{}, {"gamma": 0.02, "coef0": 0.5, "degree": 2}],
    ids=["defaults", "given"],
)
@pytest.mark.parametrize(("data", "kernel"), _CASES)
def test_uniform_matches_sklearn(data, kernel, params):
    X = _data(data)
    ref = SKNystroem(kernel, n_components=100, random_state=0, **params).fit(X)
    ours = Nystroem(kernel, n_components=100, random_state=0, **params).fit(X)
    np.testing.assert_array_equal(ours.component_indices_, ref.component_indices_)
    np.testing.assert_array_equal(ours.components_, ref.components_)
    _close(ours.normalization_, ref.normalization_)
    _close(ours.transform(X), ref.transform(X))
    Xt = X[::7] + 0.25  # new points (still >= 0 for the chi2 kernels)
    _close(ours.transform(Xt), ref.transform(Xt))
    assert ours.get_feature_names_out()[-1] == "nystroem99"


def test_kernel_params_of_a_named_kernel_as_sklearn():
    X = _data("breast_cancer")
    kw = {
        "kernel_params": {"gamma": 0.3, "degree": 2},
        "n_components": 50,
        "random_state": 3,
    }
    for kernel, extra in [("rbf", {}), ("poly", {"gamma": 0.01})]:
        ref = SKNystroem(kernel, **kw, **extra).fit_transform(X)
        _close(Nystroem(kernel, **kw, **extra).fit_transform(X), ref)


@pytest.mark.parametrize(("block", "piece"), [(7, 7), (50, 7), (100, 100)])
def test_transform_does_not_depend_on_the_block_size(monkeypatch, block, piece):
    X = _data("breast_cancer")
    nys = Nystroem(n_components=60, random_state=0).fit(X)
    whole = nys.transform(X)
    monkeypatch.setattr(_blocks, "_BLOCK_ENTRIES", block * 60)  # rows per block
    monkeypatch.setattr(_blocks, "_PIECE_ENTRIES", piece * 60)  # rows per kernel call
    np.testing.assert_allclose(nys.transform(X), whole, rtol=1e-12, atol=1e-12)


def test_float32_stays_float32():
    X = _data("breast_cancer")
    f64 = Nystroem(gamma=0.02, n_components=50, random_state=0).fit(X)
    f32 = Nystroem(gamma=0.02, n_components=50, random_state=0).fit(
        X.astype(np.float32)
    )
    assert f32.components_.dtype == f32.normalization_.dtype == np.float32
    F32 = f32.transform(X.astype(np.float32))
    assert F32.dtype == np.float32
    F64 = f64.transform(X)
    np.testing.assert_allclose(F32 @ F32.T, F64 @ F64.T, atol=1e-4)
    # float32 data through a float64 fit computes in float64, as scikit-learn.
    assert f64.transform(X.astype(np.float32)).dtype == np.float64


# -- landmark strategies -------------------------------------------------------
@functools.cache
def _blobs_kernel():
    X = _blobs()
    return X, np.exp(-0.1 * ((X[:, None] - X[None]) ** 2).sum(-1))


@functools.cache
def _mean_error(landmarks, m=100, seeds=5):
    """Mean |K - F F^T|_F over seeds on the blobs (rbf, gamma = 0.1)."""
    X, K = _blobs_kernel()
    errors = []
    for seed in range(seeds):
        F = Nystroem(
            gamma=0.1, n_components=m, landmarks=landmarks, random_state=seed
        ).fit_transform(X)
        errors.append(np.linalg.norm(K - F @ F.T))
    return np.mean(errors)


@pytest.mark.parametrize("landmarks", ["kmeans++", "rls"])
def test_adaptive_landmarks_beat_uniform_on_clustered_data(landmarks):
    # About 940 points in 50 tight clusters of 5 to 35, m = 100 (mean errors
    # over 5 seeds: uniform 35, rls 22, kmeans++ 19).
    assert _mean_error(landmarks) < 0.8 * _mean_error("uniform")


@pytest.mark.parametrize("landmarks", LANDMARK_METHODS)
def test_every_strategy_gives_distinct_rows_deterministically(landmarks):
    X = _blobs(k=20)
    first = Nystroem(
        gamma=0.1, n_components=40, landmarks=landmarks, random_state=7
    ).fit(X)
    again = Nystroem(
        gamma=0.1, n_components=40, landmarks=landmarks, random_state=7
    ).fit(X)
    idx = first.component_indices_
    assert len(np.unique(idx)) == 40 and idx.min() >= 0 and idx.max() < len(X)
    np.testing.assert_array_equal(idx, again.component_indices_)
    np.testing.assert_array_equal(first.components_, X[idx])


@pytest.mark.parametrize("landmarks", ["kmeans++", "rls"])
def test_all_points_as_landmarks_reproduce_the_kernel(landmarks):
    X = _blobs(k=6)
    nys = Nystroem(
        gamma=0.1, n_components=len(X), landmarks=landmarks, random_state=0
    ).fit(X)
    assert sorted(nys.component_indices_) == list(range(len(X)))
    F = nys.transform(X)
    K = np.exp(-0.1 * ((X[:, None] - X[None]) ** 2).sum(-1))
    np.testing.assert_allclose(F @ F.T, K, atol=1e-6)


def test_kmeans_plusplus_with_fewer_distinct_points_than_landmarks():
    X = np.repeat(np.eye(3), 5, axis=0)  # 3 distinct points, 15 rows
    idx = ny.kmeans_plusplus(make_kernel("rbf", gamma=1.0), X, 6, random_state=0)
    assert len(np.unique(idx)) == 6
    assert len({tuple(r) for r in X[idx[:3]]}) == 3  # the 3 points come first


def test_kmeans_plusplus_draws_exactly_by_squared_distance():
    # 4 points of a line, linear kernel: D^2 is the squared Euclidean distance.
    # The empirical law of the first three landmarks (the third one drawn by
    # rejection against a stale bound) against k-means++'s.
    x = np.array([0.0, 1.0, 1.5, 4.0])
    kernel = make_kernel(lambda x_i, y_j: (x_i * y_j).sum(-1))
    n_draws = 1500
    counts = {}
    rnd = np.random.RandomState(0)
    for _ in range(n_draws):
        t = tuple(
            ny.kmeans_plusplus(kernel, x[:, None], 3, random_state=rnd, backend="numpy")
        )
        counts[t] = counts.get(t, 0) + 1
    for t in itertools.permutations(range(4), 3):
        a, b, c = t
        d1 = (x - x[a]) ** 2
        d2 = np.minimum(d1, (x - x[b]) ** 2)
        p = 0.25 * d1[b] / d1.sum() * d2[c] / d2.sum()
        freq = counts.pop(t, 0) / n_draws
        assert abs(freq - p) < 4 * np.sqrt(p * (1 - p) / n_draws) + 1e-3, (t, freq, p)
    assert not counts  # no repeated landmark


def test_user_landmarks():
    X = _data("breast_cancer")
    ref = SKNystroem(n_components=40, random_state=0).fit(X)
    ours = Nystroem(landmarks=X[ref.component_indices_]).fit(X)
    assert ours.component_indices_ is None
    _close(ours.transform(X), ref.transform(X))
    assert ours._n_features_out == 40
    Z = np.random.default_rng(0).normal(size=(25, X.shape[1]))  # not rows of X
    F = Nystroem(landmarks=Z, n_components=3).fit_transform(X)
    assert F.shape == (len(X), 25)


# -- kernels given as objects ------------------------------------------------
def test_gp_kernel_and_formula_give_the_dense_features():
    X = _data("breast_cancer")
    ls = 4.0
    dense = Nystroem("rbf", gamma=1 / (2 * ls**2), n_components=50, random_state=0)
    F = dense.fit_transform(X)

    def gauss(x_i, y_j, gamma):
        return (-gamma * x_i.sqdist(y_j)).exp()

    for kernel, params in [
        (RBF(ls), None),
        (RBF(ls) + WhiteKernel(0.3), None),
        (gauss, {"gamma": 1 / (2 * ls**2)}),
    ]:
        ours = Nystroem(kernel, kernel_params=params, n_components=50, random_state=0)
        _close(ours.fit_transform(X), F, rtol=1e-7)
    # scikit-learn takes GP kernels too: the same features.
    matern = Matern(length_scale=3.0, nu=1.5)
    ref = SKNystroem(matern, n_components=50, random_state=1).fit_transform(X)
    _close(
        Nystroem(matern, n_components=50, random_state=1).fit_transform(X),
        ref,
        rtol=1e-7,
    )


# -- the estimator contract --------------------------------------------------
@parametrize_with_checks(
    [
        Nystroem(),
        Nystroem(landmarks="kmeans++", n_components=10),
        Nystroem(landmarks="rls", n_components=10),
        Nystroem(landmarks="rpcholesky", n_components=10),
    ]
)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="n_components > n_samples")
        check(estimator)


def test_grid_search_in_a_pipeline_picks_sklearns_best():
    data = load_breast_cancer()
    X, y = data.data, data.target
    grid = {"nystroem__gamma": [0.005, 0.1], "nystroem__n_components": [10, 60]}
    searches = []
    for nys in (Nystroem(random_state=0), SKNystroem(random_state=0)):
        pipe = make_pipeline(StandardScaler(), nys, RidgeClassifier(alpha=1.0))
        searches.append(GridSearchCV(pipe, grid, cv=3).fit(X, y))
    ours, ref = searches
    assert ours.best_params_ == ref.best_params_
    np.testing.assert_allclose(
        ours.cv_results_["mean_test_score"], ref.cv_results_["mean_test_score"]
    )


def test_set_output_pandas():
    pd = pytest.importorskip("pandas")
    data = load_breast_cancer(as_frame=True)
    X = data.data
    nys = Nystroem(n_components=5, random_state=0).set_output(transform="pandas")
    out = nys.fit_transform(X)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == [f"nystroem{i}" for i in range(5)]
    np.testing.assert_array_equal(nys.feature_names_in_, X.columns)


# -- bad input ----------------------------------------------------------------
def test_more_components_than_samples_warns_and_clips_as_sklearn():
    X = _data("breast_cancer")[:30]
    with pytest.warns(UserWarning, match="n_components > n_samples"):
        ref = SKNystroem(n_components=50, random_state=0).fit(X)
    for landmarks in LANDMARK_METHODS:
        with pytest.warns(UserWarning, match="n_components > n_samples"):
            ours = Nystroem(n_components=50, random_state=0, landmarks=landmarks).fit(X)
        assert sorted(ours.component_indices_) == list(range(30))
        assert ours.transform(X).shape == (30, 30)
        if landmarks == "uniform":  # scikit-learn's order and features
            np.testing.assert_array_equal(
                ours.component_indices_, ref.component_indices_
            )
            _close(ours.transform(X), ref.transform(X))


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"landmarks": "kmeans"}, r"'landmarks'.*'uniform', 'kmeans\+\+', 'rls', 'rpc"),
        ({"gamma": -1.0}, r"'gamma' parameter of Nystroem must be a float in the range \[0.0"),
        ({"kernel": "gaussian"}, "'kernel' parameter"),
        ({"n_components": 0}, "'n_components'"),
        ({"degree": 0.5}, "'degree'"),
        ({"backend": "gpu"}, "'backend'"),
        ({"kernel": RBF(), "gamma": 0.1}, "Don't pass gamma"),
        ({"landmarks": np.ones((3, 2))}, "'landmarks' has 2 features but X has 4"),
        ({"landmarks": np.array([[np.nan] * 4])}, "NaN"),
    ],
)
def test_bad_parameters(params, match):
    X = np.random.default_rng(0).normal(size=(20, 4))
    with pytest.raises(ValueError, match=match):
        Nystroem(**{"n_components": 5, **params}).fit(X)


def test_nan_is_rejected_at_fit_and_transform():
    X = np.random.default_rng(0).normal(size=(20, 4))
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        Nystroem(n_components=5).fit(bad)
    nys = Nystroem(n_components=5).fit(X)
    with pytest.raises(ValueError, match="NaN"):
        nys.transform(bad)
    with pytest.raises(ValueError, match="4 features"):
        nys.transform(X[:, :3])
    with pytest.raises(ValueError, match="X >= 0"):
        Nystroem("chi2", n_components=5).fit(X)
