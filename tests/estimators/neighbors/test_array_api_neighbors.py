"""The k-NN estimators on Array API arrays (issue 24), without a GPU.

The three ways in of ``tests/estimators/test_array_api_estimators.py``, each against
the NumPy path on the same data:

* ``"strict"``: array-api-strict arrays on ``device1`` with
  ``array_api_dispatch`` (host memory: a zero-copy NumPy view, the NumPy
  path, outputs back on ``device1``);
* ``"torch"``: CPU torch tensors, the same way;
* ``"device"``: ``device1`` standing for a GPU
  (:func:`kerneltools._utils._array_api.simulated_device`): the brute-force
  K-min fed the device's arrays, votes and means in its namespace, where
  array-api-strict rejects NumPy arrays and arrays of another device (a host
  array leaking into the device path fails here).

scikit-learn 1.9's own k-NN estimators do not support ``array_api_dispatch``
(they fail on torch and array-api-strict inputs), so the reference is our
NumPy path, and the namespace rules are those of ``_array_api.py``.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import sklearn
from sklearn.utils.estimator_checks import (
    check_array_api_input,
    check_array_api_mixed_inputs,
    check_array_api_same_namespace,
)

from kerneltools.estimators import KNeighborsClassifier, KNeighborsRegressor, NearestNeighbors
from kerneltools.estimators.neighbors.search import _pruned as _neighbors_pruned
from kerneltools.estimators.neighbors.search import HostSearch
from kerneltools._utils._array_api import simulated_device

from _array_api_helpers import NamespaceAndDevice as _NS
from _array_api_helpers import as_way as _as
from _array_api_helpers import assert_where as _assert_where
from _array_api_helpers import gpu_available as cupy_gpu
from _array_api_helpers import to_numpy as _np
from _array_api_helpers import way_context as _way

xps = pytest.importorskip("array_api_strict")
torch = pytest.importorskip("torch")
from sklearn.externals import array_api_compat as compat  # noqa: E402

DEVICE1 = xps.Device("device1")
WAYS = ["strict", "torch", "device"]
#: K of the queries; the queries of the fitted points (X=None) ask K - 1, so
#: that both share the compiled kernel of K (as in tests/estimators/neighbors/test_neighbors.py,
#: whose data include 4 features: iris).
K = 5
DTYPES = [np.float32, np.float64]
#: Distances of the device path against the NumPy path's: the same reduction
#: on the same points (float32: the square root's rounding).
RTOL = {np.float32: 1e-6, np.float64: 1e-12}


@pytest.fixture(autouse=True)
def _dispatch(monkeypatch):
    monkeypatch.setenv("SCIPY_ARRAY_API", "1")  # scikit-learn asks; our path needs none
    with sklearn.config_context(array_api_dispatch=True):
        yield


@pytest.fixture(scope="module")
def data():
    """60 points in 4-D (two duplicates: ties and a self-match hidden by a
    duplicate), binary labels, two targets, and queries off the points."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    X[7] = X[3]
    labels = (X[:, 0] + 0.3 * rng.normal(size=60) > 0).astype(np.int64) + 3
    targets = np.stack([np.sin(X[:, 0]), X[:, 1] ** 2], axis=1)
    Q = np.concatenate([X[:10], rng.normal(size=(15, 4))])  # 10 exact matches
    return X, labels, targets, Q


def _backend(way, backend):
    """The estimator's backend: the fixture's on the host ways; "cuda" on the
    simulated device (standing for the host's default backend)."""
    return "cuda" if way == "device" else backend


@pytest.mark.parametrize("way", WAYS)
def test_kneighbors_as_numpy_in_the_inputs_namespace(data, way, backend):
    X, _, _, Q = data
    for dtype in DTYPES:
        Xd, Qd = X.astype(dtype), Q.astype(dtype)
        ref = NearestNeighbors(n_neighbors=K, backend=backend).fit(Xd)
        with _way(way):
            est = NearestNeighbors(n_neighbors=K, backend=_backend(way, backend))
            est.fit(_as(way, Xd))
            outs = {"queries": est.kneighbors(_as(way, Qd)),
                    # each point without itself
                    "train": est.kneighbors(n_neighbors=K - 1)}
            ind_only = est.kneighbors(_as(way, Qd), return_distance=False)
        refs = {"queries": ref.kneighbors(Qd), "train": ref.kneighbors(n_neighbors=K - 1)}
        like = _as(way, Xd)
        for name, (dist, ind) in outs.items():
            _assert_where(dist, like, dtype)
            _assert_where(ind, like, refs[name][1].dtype)
            np.testing.assert_array_equal(_np(ind), refs[name][1], err_msg=name)
            np.testing.assert_allclose(_np(dist), refs[name][0], rtol=RTOL[dtype],
                                       atol=RTOL[dtype], err_msg=name)
        np.testing.assert_array_equal(_np(ind_only), refs["queries"][1])
        assert est.n_samples_fit_ == 60 and est.n_features_in_ == 4
        _assert_where(est._fit_X, like, dtype)  # kept where X is (scikit-learn's rule)


@pytest.mark.parametrize("way", WAYS)
def test_predict_as_numpy_in_the_inputs_namespace(data, way):
    X, labels, targets, Q = data
    for dtype in DTYPES:
        Xd, Qd = X.astype(dtype), Q.astype(dtype)
        like = _as(way, Xd)
        for weights in ("uniform", "distance"):
            clf_ref = KNeighborsClassifier(K, weights=weights).fit(Xd, labels)
            reg_ref = KNeighborsRegressor(K, weights=weights).fit(Xd, targets[:, 0])
            reg2_ref = KNeighborsRegressor(K, weights=weights).fit(Xd, targets)
            with _way(way):
                kw = {"weights": weights, "backend": _backend(way, None)}
                clf = KNeighborsClassifier(K, **kw).fit(like, _as(way, labels))
                reg = KNeighborsRegressor(K, **kw).fit(like, _as(way, targets[:, 0]))
                reg2 = KNeighborsRegressor(K, **kw).fit(like, _as(way, targets))
                scores = (clf.score(_as(way, Qd), _as(way, labels[:25])),
                          reg.score(_as(way, Qd), _as(way, targets[:25, 0])))
                got = {"predict": clf.predict(_as(way, Qd)),
                       "proba": clf.predict_proba(_as(way, Qd)),
                       "reg": reg.predict(_as(way, Qd)),
                       "reg2": reg2.predict(_as(way, Qd)),
                       "train": clf.set_params(n_neighbors=K - 1).predict(None)}
            ref_scores = (clf_ref.score(Qd, labels[:25]), reg_ref.score(Qd, targets[:25, 0]))
            want = {"predict": clf_ref.predict(Qd), "proba": clf_ref.predict_proba(Qd),
                    "reg": reg_ref.predict(Qd), "reg2": reg2_ref.predict(Qd),
                    "train": clf_ref.set_params(n_neighbors=K - 1).predict(None)}
            for name, out in got.items():
                _assert_where(out, like, want[name].dtype)
                np.testing.assert_allclose(_np(out), want[name], rtol=1e-12,
                                           err_msg=f"{name} {weights} {dtype}")
            _assert_where(clf.classes_, like, np.int64)
            np.testing.assert_array_equal(_np(clf.classes_), [3, 4])
            assert scores[0] == pytest.approx(ref_scores[0], abs=1e-6)
            assert scores[1] == pytest.approx(ref_scores[1], rel=1e-5)


def test_callable_weights_get_the_devices_arrays(data):
    """A callable ``weights`` is called on the distances where they are."""
    X, labels, targets, Q = data
    seen = []

    def inverse_square(dist):
        seen.append(compat.device(dist))
        return 1.0 / (dist * dist + 1e-3)

    ref = KNeighborsRegressor(K, weights=inverse_square).fit(X, targets).predict(Q)
    with simulated_device(xps, DEVICE1):
        reg = KNeighborsRegressor(K, weights=inverse_square, backend="cuda")
        pred = reg.fit(_as("device", X), _as("device", targets)).predict(_as("device", Q))
    assert seen[-1] == DEVICE1
    _assert_where(pred, _as("device", X), np.float64)
    np.testing.assert_allclose(_np(pred), ref, rtol=1e-12)


def test_multi_output_and_string_labels(data):
    """Two label columns on the device; string labels (no array namespace
    holds them) with X on the host ways: classes_ and predict are NumPy."""
    X, labels, _, Q = data
    Y = np.stack([labels, (X[:, 1] > 0).astype(np.int64)], axis=1)
    ref = KNeighborsClassifier(K).fit(X, Y)
    with _way("device"):
        clf = KNeighborsClassifier(K, backend="cuda").fit(_as("device", X), _as("device", Y))
        pred, proba = clf.predict(_as("device", Q)), clf.predict_proba(_as("device", Q))
    _assert_where(pred, _as("device", X), np.int64)
    np.testing.assert_array_equal(_np(pred), ref.predict(Q))
    for p, r in zip(proba, ref.predict_proba(Q)):
        np.testing.assert_allclose(_np(p), r, rtol=1e-12)
    names = np.array(["a", "b"])[labels - 3]
    clf = KNeighborsClassifier(K).fit(torch.asarray(X), names)
    assert type(clf.classes_) is np.ndarray
    np.testing.assert_array_equal(clf.predict(torch.asarray(Q)),
                                  KNeighborsClassifier(K).fit(X, names).predict(Q))


@pytest.mark.parametrize("way", ["strict", "device"])
def test_pruned_route_in_the_inputs_namespace(data, way, monkeypatch):
    """algorithm='auto' in 3-D prunes (here from a few points): on the device
    through host copies (one per call), results back on the device."""
    monkeypatch.setattr(_neighbors_pruned, "PRUNE_MIN_FIT", 10)
    monkeypatch.setattr(_neighbors_pruned, "PRUNE_MIN_PAIRS", 1)
    X, Q = data[0][:, :3], data[3][:, :3]
    ref = NearestNeighbors(n_neighbors=K).fit(X)
    assert ref._fit_method == "block_sparse"
    with _way(way):
        est = NearestNeighbors(n_neighbors=K, backend=_backend(way, None)).fit(_as(way, X))
        dist, ind = est.kneighbors(_as(way, Q))
    assert est._fit_method == "block_sparse"
    _assert_where(ind, _as(way, X), np.int64)
    rd, ri = ref.kneighbors(Q)
    np.testing.assert_array_equal(_np(ind), ri)
    np.testing.assert_allclose(_np(dist), rd, rtol=1e-12)
    if way == "device":  # NumPy with backend="cuda": pruned on the host, NumPy out
        with _way(way):
            est = NearestNeighbors(n_neighbors=K, backend="cuda").fit(X)
            dist, ind = est.kneighbors(Q)
        assert type(ind) is np.ndarray and type(next(iter(est._searches.values()))) \
            is not HostSearch
        np.testing.assert_array_equal(ind, ri)


@pytest.mark.parametrize("way", WAYS)
def test_radius_neighbors_rows_in_the_inputs_namespace(data, way):
    """A NumPy object array (as scikit-learn's) of per-query rows in the
    input's namespace and device; the graphs are SciPy matrices."""
    X, _, _, Q = data
    ref = NearestNeighbors(radius=1.0).fit(X)
    with _way(way):
        est = NearestNeighbors(radius=1.0, backend=_backend(way, None)).fit(_as(way, X))
        dist, ind = est.radius_neighbors(_as(way, Q), sort_results=True)
        graph = est.kneighbors_graph(_as(way, Q), K, mode="distance")
        rgraph = est.radius_neighbors_graph(_as(way, Q))
    rd, ri = ref.radius_neighbors(Q, sort_results=True)
    assert dist.dtype == object and len(dist) == len(Q)
    for a, b, ra, rb in zip(dist, ind, rd, ri):
        _assert_where(b, _as(way, X), rb.dtype)
        np.testing.assert_array_equal(_np(b), rb)
        np.testing.assert_allclose(_np(a), ra, rtol=1e-12)
    np.testing.assert_allclose(graph.toarray(), ref.kneighbors_graph(Q, K, "distance").toarray(),
                               rtol=1e-12)
    np.testing.assert_array_equal(rgraph.toarray(), ref.radius_neighbors_graph(Q).toarray())


@pytest.mark.parametrize("way", ["strict", "device"])
def test_wrong_namespace_device_and_mixed_inputs(data, way):
    """Queries in another namespace or on another device than the fit's:
    ValueError naming the method; y in another namespace follows X."""
    X, labels, targets, Q = data
    with _way(way):
        Xa = _as(way, X)
        nn = NearestNeighbors(n_neighbors=K, backend=_backend(way, None)).fit(Xa)
        clf = KNeighborsClassifier(K, backend=_backend(way, None)).fit(
            Xa, torch.asarray(labels))  # y in torch: moved where X is
        reg = KNeighborsRegressor(K, backend=_backend(way, None)).fit(Xa, targets.tolist())
        _assert_where(clf.predict(_as(way, Q)), Xa, np.int64)
        _assert_where(reg.predict(_as(way, Q)), Xa, np.float64)
        for model, method in ((nn, "kneighbors"), (clf, "predict"), (clf, "predict_proba"),
                              (reg, "predict"), (nn, "radius_neighbors")):
            name = type(model).__name__
            with pytest.raises(ValueError, match=rf"{name}\.{method}\(\) must use the same "
                               r"namespace.*fit \(array_api_strict\) and "
                               rf"{method} \(numpy\) differ.*'X'"):
                getattr(model, method)(Q)
            with pytest.raises(ValueError, match=r"Devices used during fit .*device1.* "
                               "differ"):
                getattr(model, method)(xps.asarray(Q))
        with pytest.raises(ValueError, match="X has 2 features, but .* is expecting 4"):
            nn.kneighbors(Xa[:, :2])
        with pytest.raises(ValueError, match="Expected n_neighbors <= n_samples_fit"):
            nn.kneighbors(_as(way, Q), n_neighbors=61)
    # a NumPy fit, a torch query: the namespaces differ too
    with pytest.raises(ValueError, match=r"fit \(numpy\) and kneighbors \(.*torch\) differ"):
        NearestNeighbors(n_neighbors=K).fit(X).kneighbors(torch.asarray(Q))


def test_bad_input_on_the_device(data):
    X, labels, _, _ = data
    with simulated_device(xps, DEVICE1):
        bad = X.copy()
        bad[3, 1] = np.nan
        with pytest.raises(ValueError, match="Input X contains NaN"):
            NearestNeighbors(backend="cuda").fit(_as("device", bad))
        with pytest.raises(ValueError, match="Unknown label type: continuous"):
            KNeighborsClassifier(backend="cuda").fit(_as("device", X), _as("device", X[:, 0]))
        with pytest.raises(ValueError, match=r"inconsistent numbers of samples: \[60, 59\]"):
            KNeighborsClassifier(backend="cuda").fit(_as("device", X),
                                                     _as("device", labels[:59]))
        with pytest.raises(ValueError, match="Expected 2D array for 'X'"):
            NearestNeighbors(backend="cuda").fit(_as("device", X[:, 0]))


def test_host_data_with_backend_cuda_and_pickling(data):
    """NumPy data with backend="cuda" (simulated device): computed there,
    outputs and attributes NumPy, device copies kept and not pickled."""
    X, labels, _, Q = data
    ref = KNeighborsClassifier(K, weights="distance").fit(X, labels)
    with simulated_device(xps, DEVICE1):
        clf = KNeighborsClassifier(K, weights="distance", backend="cuda").fit(X, labels)
        pred = clf.predict(Q)
        copies = clf._device_copies
        assert all(compat.device(a) == DEVICE1 for a in copies.values())
        clf.predict(Q)
        assert clf._device_copies is copies
        (search,) = clf._searches.values()
        assert compat.device(search.Y) == DEVICE1  # the fitted points, copied once
    assert type(pred) is np.ndarray and type(clf._fit_X) is np.ndarray
    np.testing.assert_array_equal(pred, ref.predict(Q))
    again = pickle.loads(pickle.dumps(clf))
    assert "_device_copies" not in vars(again) and not again._searches
    with simulated_device(xps, DEVICE1):
        np.testing.assert_array_equal(again.predict(Q), ref.predict(Q))
        # a device fit, pickled with its arrays
        dev = KNeighborsClassifier(K, backend="cuda").fit(_as("device", X),
                                                          _as("device", labels))
        back = pickle.loads(pickle.dumps(dev))
        np.testing.assert_array_equal(_np(back.predict(_as("device", Q))),
                                      KNeighborsClassifier(K).fit(X, labels).predict(Q))


def test_without_dispatch_torch_tensors_become_numpy(data):
    X, labels, _, Q = data
    with sklearn.config_context(array_api_dispatch=False):
        clf = KNeighborsClassifier(K).fit(torch.asarray(X), torch.asarray(labels))
        pred = clf.predict(torch.asarray(Q))
        dist, ind = NearestNeighbors(n_neighbors=K).fit(torch.asarray(X)).kneighbors(
            torch.asarray(Q))
    assert type(pred) is np.ndarray and type(ind) is np.ndarray
    np.testing.assert_array_equal(pred, KNeighborsClassifier(K).fit(X, labels).predict(Q))


@pytest.mark.parametrize("way", ["strict", "device"])
@pytest.mark.parametrize("est", [NearestNeighbors(), KNeighborsClassifier(),
                                 KNeighborsRegressor(weights="distance")],
                         ids=["nn", "classifier", "regressor"])
def test_scikit_learns_array_api_checks(est, way):
    name = type(est).__name__
    if way == "device":
        est = est.set_params(backend="cuda")
    with _way(way):
        check_array_api_input(name, est, "array_api_strict", "device1", "float32",
                              check_values=True)
        check_array_api_mixed_inputs(
            name, est, X_ns_and_device=_NS("array_api_strict", "device1"),
            other_ns_and_device=_NS("torch", "cpu"))
        check_array_api_same_namespace(name, est, "array_api_strict")


@pytest.mark.gpu
@pytest.mark.skipif(not cupy_gpu(), reason="needs a CUDA GPU and cupy")
def test_cupy_arrays_stay_on_the_gpu(data):
    import cupy

    X, labels, targets, Q = data
    Xc, Qc = cupy.asarray(X), cupy.asarray(Q)
    with sklearn.config_context(array_api_dispatch=False):  # CuPy is always served
        dist, ind = NearestNeighbors(n_neighbors=K).fit(Xc).kneighbors(Qc)
        rd, ri = NearestNeighbors(n_neighbors=K).fit(X).kneighbors(Q)
        assert isinstance(dist, cupy.ndarray) and isinstance(ind, cupy.ndarray)
        np.testing.assert_array_equal(ind.get(), ri)
        np.testing.assert_allclose(dist.get(), rd, rtol=1e-12)
        for weights in ("uniform", "distance"):
            clf = KNeighborsClassifier(K, weights=weights).fit(Xc, cupy.asarray(labels))
            pred = clf.predict(Qc)
            assert isinstance(pred, cupy.ndarray)
            ref = KNeighborsClassifier(K, weights=weights).fit(X, labels)
            np.testing.assert_array_equal(pred.get(), ref.predict(Q))
            assert clf.score(Qc, cupy.asarray(labels[:25])) == pytest.approx(
                ref.score(Q, labels[:25]))
            reg = KNeighborsRegressor(K, weights=weights).fit(Xc, cupy.asarray(targets))
            np.testing.assert_allclose(
                reg.predict(Qc).get(),
                KNeighborsRegressor(K, weights=weights).fit(X, targets).predict(Q),
                rtol=1e-12)
    Xt = torch.asarray(X, device="cuda")  # torch CUDA tensors, through DLPack
    out = KNeighborsClassifier(K).fit(Xt, torch.asarray(labels, device="cuda")).predict(
        torch.asarray(Q, device="cuda"))
    assert isinstance(out, torch.Tensor) and out.device.type == "cuda"
