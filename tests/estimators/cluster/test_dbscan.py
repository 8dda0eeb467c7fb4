"""DBSCAN against scikit-learn's: identical labels, border points included.

scikit-learn's DBSCAN is the reference (its neighbourhoods come from exact
float64 distances in trees or brute force; the data here keep pairs away
from ``eps`` by more than rounding, except the exact ties of integer grids
and duplicates, which every float64 arithmetic decides alike).
"""

from __future__ import annotations

import doctest

import numpy as np
import pytest
import scipy.sparse
from sklearn import cluster as skc
from sklearn.datasets import make_blobs, make_moons
from sklearn.utils.estimator_checks import parametrize_with_checks

from kerneltools.estimators import DBSCAN
from kerneltools.estimators.cluster import _cells, _dbscan, _hooking, _near


def _data(shape: str, seed: int, n: int = 300) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if shape == "blobs":
        return make_blobs(n, 3, centers=4, cluster_std=0.8, random_state=seed)[0]
    if shape == "moons":
        return make_moons(n, noise=0.08, random_state=seed)[0]
    if shape == "anisotropic":
        X = make_blobs(n, 2, centers=3, random_state=seed)[0]
        return X @ np.array([[0.6, -0.6], [-0.4, 0.8]])
    if shape == "noise":
        return rng.uniform(-1, 1, size=(n, 2))
    if shape == "duplicates":  # many exact copies, on an integer grid
        return rng.integers(0, 6, size=(n, 2)).astype(float)
    raise ValueError(shape)


EPS = {"blobs": 0.6, "moons": 0.12, "anisotropic": 0.4, "noise": 0.12,
       "duplicates": 1.0}


def _assert_same(ours, ref):
    np.testing.assert_array_equal(ours.labels_, ref.labels_)
    np.testing.assert_array_equal(ours.core_sample_indices_, ref.core_sample_indices_)
    np.testing.assert_array_equal(ours.components_, ref.components_)


@pytest.mark.parametrize("shape", sorted(EPS))
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("min_samples", [1, 4, 12])
def test_labels_match_sklearn(shape, seed, min_samples):
    X = _data(shape, seed)
    kw = dict(eps=EPS[shape], min_samples=min_samples)
    _assert_same(DBSCAN(**kw).fit(X), skc.DBSCAN(**kw).fit(X))


def test_border_points_join_the_first_cluster():
    # the point at 1.9 is a border point of both clusters; it joins the one
    # whose smallest-index core point comes first, wherever it is listed
    X = np.array([0.0, 0.3, 0.6, 0.9, 1.9, 2.9, 3.2, 3.5, 3.8])[:, None]
    rng = np.random.default_rng(0)
    for _ in range(6):
        order = rng.permutation(len(X))
        kw = dict(eps=1.05, min_samples=4)
        ours, ref = DBSCAN(**kw).fit(X[order]), skc.DBSCAN(**kw).fit(X[order])
        _assert_same(ours, ref)
        border = np.flatnonzero(order == 4)[0]
        assert border not in ref.core_sample_indices_ and ref.labels_.max() == 1


def test_backends_and_dtypes(backend, dtype):
    X = _data("blobs", 3).astype(dtype)
    kw = dict(eps=0.6, min_samples=6)
    ours = DBSCAN(backend=backend, **kw).fit(X)
    _assert_same(ours, skc.DBSCAN(**kw).fit(X))
    assert ours.components_.dtype == dtype


@pytest.mark.parametrize("seed", range(3))
def test_sample_weight_matches_sklearn(seed):
    X = _data("blobs", seed)
    w = np.random.default_rng(seed).choice([-1.0, 0.5, 1.0, 2.5, 6.0], len(X))
    kw = dict(eps=0.5, min_samples=5)
    _assert_same(DBSCAN(**kw).fit(X, sample_weight=w),
                 skc.DBSCAN(**kw).fit(X, sample_weight=w))


@pytest.mark.parametrize("metric, kw", [
    ("manhattan", {}), ("chebyshev", {}), ("minkowski", {"p": 3}),
    ("cosine", {}), ("canberra", {})])
def test_metrics_match_sklearn(metric, kw):
    X = np.abs(_data("blobs", 1)) + 0.1
    eps = {"cosine": 0.02, "canberra": 0.3}.get(metric, 0.7)
    args = dict(eps=eps, min_samples=5, metric=metric, **kw)
    _assert_same(DBSCAN(**args).fit(X), skc.DBSCAN(**args).fit(X))


@pytest.mark.parametrize("shape", ["blobs", "duplicates", "noise"])
def test_float32_bracket_of_the_counts(shape, monkeypatch):
    # the counts on the float32 bracket (from 4,096 points by default), with
    # points at exactly eps (integer grids) and near it
    monkeypatch.setattr(_near, "BRACKET_MIN_POINTS", 0)
    calls = []
    real = _near.Near.bracket

    def spy(self, *args):
        out = real(self, *args)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(_near.Near, "bracket", spy)
    for seed in range(3):
        X = _data(shape, seed, n=500)
        for min_samples in (3, 12, 40):
            kw = dict(eps=EPS[shape], min_samples=min_samples)
            _assert_same(DBSCAN(**kw).fit(X), skc.DBSCAN(**kw).fit(X))
    assert any(calls)


def _use_cells(monkeypatch, per_cell=16):
    """Cells from any size, ``per_cell`` points each; a list of the kept
    fractions of the fits that made them."""
    monkeypatch.setattr(_cells, "MIN_POINTS", 0)
    monkeypatch.setattr(_cells, "CELL_POINTS", per_cell)
    made = []
    real = _cells.Cells.__init__

    def spy(self, *args):
        real(self, *args)
        made.append(self.kept)

    monkeypatch.setattr(_cells.Cells, "__init__", spy)
    return made


@pytest.mark.parametrize("shape", sorted(EPS))
@pytest.mark.parametrize("bracket", [False, True])
@pytest.mark.parametrize("hook", [2, 10**9])
def test_cells_keep_every_pair_within_eps(shape, bracket, hook, monkeypatch):
    # the passes over the kept cell pairs only: the same labels, at eps and
    # near it (integer grids, duplicates), with and without the float32
    # bracket, in float32 and float64; with the first rounds over a sample
    # of the columns (hook=2) or not
    made = _use_cells(monkeypatch)
    monkeypatch.setattr(_dbscan, "HOOK_NEIGHBOURS", hook)
    if bracket:
        monkeypatch.setattr(_near, "BRACKET_MIN_POINTS", 0)
    for seed in range(2):
        for dtype in (np.float64, np.float32):
            X = _data(shape, seed, n=600).astype(dtype)
            for min_samples in (1, 4, 12):
                kw = dict(eps=EPS[shape], min_samples=min_samples)
                _assert_same(DBSCAN(**kw).fit(X), skc.DBSCAN(**kw).fit(X))
    assert made and min(made) < 0.9  # pruned, not all pairs


def test_cells_with_weights_dtype_and_chain(monkeypatch):
    made = _use_cells(monkeypatch, per_cell=8)
    X = _data("blobs", 2, n=600)
    w = np.random.default_rng(2).choice([-1.0, 0.5, 1.0, 2.5, 6.0], len(X))
    kw = dict(eps=0.5, min_samples=5)
    _assert_same(DBSCAN(**kw).fit(X, sample_weight=w),
                 skc.DBSCAN(**kw).fit(X, sample_weight=w))
    _assert_same(DBSCAN(dtype="float32", **kw).fit(X), skc.DBSCAN(**kw).fit(X))
    x = np.arange(400.0)  # labels travel along a chain through many cells
    X = x[np.random.default_rng(0).permutation(400)][:, None]
    kw = dict(eps=1.0, min_samples=2)
    _assert_same(DBSCAN(**kw).fit(X), skc.DBSCAN(**kw).fit(X))
    assert len(made) == 3 and max(made) < 0.5


@pytest.mark.parametrize("metric", ["manhattan", "euclidean"])
def test_sampled_rounds_without_cells(metric, monkeypatch):
    # the first rounds over every 2nd to 10th core point, over all pairs
    monkeypatch.setattr(_dbscan, "HOOK_NEIGHBOURS", 2)
    strides = []
    real = _hooking.components

    def spy(*args):
        strides.append(args[-1])
        return real(*args)

    monkeypatch.setattr(_dbscan, "components", spy)
    for seed in range(3):
        for shape in ("blobs", "moons", "duplicates"):
            X = _data(shape, seed, n=500)
            args = dict(eps=EPS[shape], min_samples=4, metric=metric)
            _assert_same(DBSCAN(**args).fit(X), skc.DBSCAN(**args).fit(X))
    assert max(strides) > 1


@pytest.mark.parametrize("cells", [False, True])
def test_counts_over_a_sample_first(cells, monkeypatch):
    # many neighbours per point: the counts first over every stride-th point
    # (or cell), a lower bound; then the undecided points over all of them
    monkeypatch.setattr(_near, "BRACKET_MIN_POINTS", 0)
    if cells:
        _use_cells(monkeypatch)
    strides = []
    real = _dbscan.DBSCAN._sample_columns

    def spy(self, n, stride):
        strides.append(stride)
        return real(self, n, stride)

    monkeypatch.setattr(_dbscan.DBSCAN, "_sample_columns", spy)
    for seed in range(3):
        for shape, eps in (("blobs", 1.5), ("duplicates", 2.0), ("noise", 0.4)):
            X = _data(shape, seed, n=800)
            for min_samples in (3, 12, 40, 120):
                kw = dict(eps=eps, min_samples=min_samples)
                _assert_same(DBSCAN(**kw).fit(X), skc.DBSCAN(**kw).fit(X))
    assert strides and max(strides) > 2


def test_no_cells_off_the_cpu(monkeypatch):
    # on a GPU (one reduction per block there) every pass is over all pairs
    assert _cells.on_cpu("cpu") and _cells.on_cpu("numpy")
    made = _use_cells(monkeypatch)
    monkeypatch.setattr(_cells, "on_cpu", lambda backend: False)
    X = _data("blobs", 1)
    kw = dict(eps=0.6, min_samples=5)
    _assert_same(DBSCAN(**kw).fit(X), skc.DBSCAN(**kw).fit(X))
    assert not made


def test_no_cells_for_other_metrics(monkeypatch):
    made = _use_cells(monkeypatch)
    X = np.abs(_data("blobs", 1)) + 0.1
    args = dict(eps=0.7, min_samples=5, metric="manhattan")
    _assert_same(DBSCAN(**args).fit(X), skc.DBSCAN(**args).fit(X))
    assert not made


@pytest.mark.parametrize("metric, params", [
    ("seuclidean", lambda X: {"V": X.var(0)}),
    ("mahalanobis", lambda X: {"VI": np.linalg.inv(np.cov(X.T))}),
    ("minkowski", lambda X: {"p": 1.5}),
    ("braycurtis", lambda X: {})])
def test_metric_params_match_sklearn(metric, params):
    X = np.abs(np.random.default_rng(1).normal(size=(300, 5)))
    eps = 0.2 if metric == "braycurtis" else 1.0
    args = dict(eps=eps, min_samples=4, metric=metric, metric_params=params(X))
    _assert_same(DBSCAN(**args).fit(X), skc.DBSCAN(**args).fit(X))


def test_hooking_rounds_on_a_long_chain():
    # a chain of 400 points whose smallest index sits in the middle: the
    # labels must travel both ways along it
    x = np.arange(400.0)
    order = np.random.default_rng(0).permutation(400)
    X = x[order][:, None]
    kw = dict(eps=1.0, min_samples=2)
    _assert_same(DBSCAN(**kw).fit(X), skc.DBSCAN(**kw).fit(X))


def test_memory_holds_no_pairs(monkeypatch):
    # every reduction is over pairs of points; none returns more than a vector
    seen = []
    real = _hooking.min_label

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        seen.append(out.shape)
        return out

    monkeypatch.setattr(_hooking, "min_label", spy)
    monkeypatch.setattr(_dbscan, "min_label", spy)
    X = _data("moons", 0, n=500)
    DBSCAN(eps=0.12, min_samples=4).fit(X)
    assert seen and all(len(s) == 1 for s in seen)


@pytest.mark.parametrize("make", [
    lambda X: dict(X=scipy.sparse.csr_matrix(X)),
    lambda X: dict(X=np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1)),
                   metric="precomputed"),
    lambda X: dict(X=X, metric=lambda a, b: np.abs(a - b).sum()),
])
def test_fallback_to_sklearn(make, capsys):
    X = _data("blobs", 2, n=120)
    args = make(X)
    Xa = args.pop("X")
    ours = DBSCAN(eps=0.6, min_samples=4, verbose=1, **args).fit(Xa)
    ref = skc.DBSCAN(eps=0.6, min_samples=4, **args).fit(Xa)
    np.testing.assert_array_equal(ours.labels_, ref.labels_)
    assert hasattr(ours, "fallback_")
    assert "scikit-learn" in capsys.readouterr().err


def test_errors():
    X = _data("blobs", 0, n=20)
    with pytest.raises(ValueError, match="eps"):
        DBSCAN(eps=-1).fit(X)
    with pytest.raises(ValueError, match="sample_weight"):
        DBSCAN().fit(X, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match="metric"):
        DBSCAN(metric="nope").fit(X)
    X[0, 0] = np.nan  # as scikit-learn, whatever the metric
    with pytest.raises(ValueError, match="NaN"):
        DBSCAN(metric="nan_euclidean").fit(X)


@parametrize_with_checks([DBSCAN(), DBSCAN(eps=0.2, min_samples=2)])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_doctests():
    assert doctest.testmod(_dbscan, raise_on_error=True).attempted > 0
