"""Every estimator's input handling against scikit-learn's own estimator.

Each public method taking ``X`` (``fit`` and the ``fit_*`` methods, followed by
a probe of the fitted state; ``predict``, ``transform``, ``kneighbors``,
``radius_neighbors``, ``score_samples``, ...) is given unusual inputs: pandas
nullable ``Float64`` / ``Int64`` frames (with and without ``pd.NA``), string
and object arrays, lists, bool, complex, NaN / inf, 1-d, empty, one sample and
the wrong number of features. The outcome must be scikit-learn's: the same
exception type where it raises, a result where it returns one. Where both
return, our result on the unusual input equals our result on the same numbers
given as a float64 ndarray (the input handling changes nothing else), and its
shape is scikit-learn's.
"""

from __future__ import annotations

import importlib
import inspect
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import kerneltools.estimators as kte

pd = pytest.importorskip("pandas")

RNG = np.random.default_rng(0)
X_FIT = RNG.random((12, 3))
Y_REG = RNG.random(12)
Y_CLS = np.arange(12) % 2
Q = RNG.random((5, 3))
Z = RNG.random((5, 2))  # KernelPCA's projections, for inverse_transform

#: name -> (scikit-learn module, constructor arguments, target, fit probe, methods)
#: The fit probe is called on ``Q`` after a fit (an attribute name reads the
#: fitted attribute); methods are called on a fitted estimator (fit on X_FIT).
ESTIMATORS = {
    "KernelRidge": ("sklearn.kernel_ridge", {"kernel": "rbf"}, Y_REG, "predict",
                    ["predict", "score"]),
    "GaussianProcessRegressor": ("sklearn.gaussian_process", {"optimizer": None},
                                 Y_REG, "predict", ["predict", "sample_y", "score"]),
    "NearestNeighbors": ("sklearn.neighbors", {"n_neighbors": 3, "radius": 0.6},
                         None, "kneighbors",
                         ["kneighbors", "kneighbors_graph", "radius_neighbors",
                          "radius_neighbors_graph"]),
    "KNeighborsClassifier": ("sklearn.neighbors", {"n_neighbors": 3}, Y_CLS,
                             "predict_proba",
                             ["predict", "predict_proba", "kneighbors",
                              "kneighbors_graph", "score"]),
    "KNeighborsRegressor": ("sklearn.neighbors", {"n_neighbors": 3}, Y_REG,
                            "predict", ["predict", "kneighbors", "kneighbors_graph",
                                        "score"]),
    "RadiusNeighborsClassifier": ("sklearn.neighbors",
                                  {"radius": 2.0, "outlier_label": 0}, Y_CLS,
                                  "predict_proba",
                                  ["predict", "predict_proba", "radius_neighbors",
                                   "radius_neighbors_graph", "score"]),
    "RadiusNeighborsRegressor": ("sklearn.neighbors", {"radius": 2.0}, Y_REG,
                                 "predict", ["predict", "radius_neighbors",
                                             "radius_neighbors_graph", "score"]),
    "KNeighborsTransformer": ("sklearn.neighbors", {"n_neighbors": 3}, None,
                              "transform", ["transform", "fit_transform", "kneighbors",
                                            "kneighbors_graph"]),
    "RadiusNeighborsTransformer": ("sklearn.neighbors", {"radius": 0.6}, None,
                                   "transform", ["transform", "fit_transform",
                                                 "radius_neighbors",
                                                 "radius_neighbors_graph"]),
    "Nystroem": ("sklearn.kernel_approximation",
                 {"n_components": 5, "random_state": 0}, None, "transform",
                 ["transform", "fit_transform"]),
    "KernelPCA": ("sklearn.decomposition",
                  {"n_components": 2, "kernel": "rbf", "fit_inverse_transform": True},
                  None, "transform", ["transform", "fit_transform",
                                      "inverse_transform"]),
    "SpectralEmbedding": ("sklearn.manifold",
                          {"n_components": 2, "affinity": "rbf", "random_state": 0},
                          None, "embedding_", ["fit_transform"]),
    "SpectralClustering": ("sklearn.cluster", {"n_clusters": 2, "random_state": 0},
                           None, "labels_", ["fit_predict"]),
    "KernelDensity": ("sklearn.neighbors", {"bandwidth": 0.5}, None,
                      "score_samples", ["score_samples", "score"]),
    "LocalOutlierFactor": ("sklearn.neighbors", {"n_neighbors": 3}, None,
                           "negative_outlier_factor_",
                           ["fit_predict", "kneighbors", "kneighbors_graph",
                            # not available without novelty: AttributeError
                            "predict", "score_samples", "decision_function"]),
    "LocalOutlierFactor-novelty": ("sklearn.neighbors",
                                   {"n_neighbors": 3, "novelty": True}, None,
                                   "negative_outlier_factor_",
                                   ["predict", "score_samples", "decision_function",
                                    "kneighbors", "kneighbors_graph",
                                    # not available with novelty: AttributeError
                                    "fit_predict"]),
    "MeanShift": ("sklearn.cluster", {"bandwidth": 1.0}, None, "cluster_centers_",
                  ["predict", "fit_predict"]),
    "SVC": ("sklearn.svm", {}, Y_CLS, "decision_function",
            ["predict", "decision_function", "score"]),
    "NuSVC": ("sklearn.svm", {"nu": 0.3}, Y_CLS, "decision_function",
              ["predict", "decision_function", "score"]),
    "SVC-proba": ("sklearn.svm", {"probability": True, "random_state": 0}, Y_CLS,
                  "predict_proba", ["predict_proba", "predict_log_proba"]),
    "NuSVC-proba": ("sklearn.svm", {"probability": True, "random_state": 0, "nu": 0.3},
                    Y_CLS, "predict_proba", ["predict_proba", "predict_log_proba"]),
    "SVR": ("sklearn.svm", {}, Y_REG, "predict", ["predict", "score"]),
    "NuSVR": ("sklearn.svm", {}, Y_REG, "predict", ["predict", "score"]),
    "OneClassSVM": ("sklearn.svm", {}, None, "decision_function",
                    ["predict", "decision_function", "score_samples", "fit_predict"]),
    "DBSCAN": ("sklearn.cluster", {"eps": 0.5, "min_samples": 3}, None, "labels_",
               ["fit_predict"]),
    "HDBSCAN": ("sklearn.cluster", {"min_cluster_size": 3, "copy": True}, None,
                "labels_", ["fit_predict"]),
    "KNNImputer": ("sklearn.impute", {"n_neighbors": 3}, None, "transform",
                   ["transform", "fit_transform"]),
    "LabelSpreading": ("sklearn.semi_supervised", {"gamma": 2.0}, Y_CLS,
                       "predict_proba", ["predict", "predict_proba", "score"]),
    "LabelPropagation": ("sklearn.semi_supervised", {"gamma": 2.0}, Y_CLS,
                         "predict_proba", ["predict", "predict_proba", "score"]),
    "GaussianProcessClassifier": ("sklearn.gaussian_process", {"optimizer": None},
                                  Y_CLS, "predict_proba",
                                  ["predict", "predict_proba", "score",
                                   "latent_mean_and_variance"]),
}

#: Where our outcome differs from scikit-learn's on purpose:
#: (estimator, method, variants) -> (our outcome: None for a result, else the
#: exception type; why). A result is then checked as any other.
DIFFERENCES = {
    ("KernelPCA", "fit_transform", ("pd-Float64", "pd-Int64", "object-str", "pd-str",
                                    "object-num")): (
        None, "scikit-learn 1.9's fit_transform (fit_inverse_transform=True) "
        "passes the unvalidated X, here an object array, to scipy.linalg.solve, "
        "which refuses it; its fit() then transform() accept the same X"),
    ("KernelPCA", "inverse_transform", ("pd-Float64-NA",)): (
        ValueError, "scikit-learn's pairwise kernel converts pd.NA with float() "
        "(TypeError); we say 'Input contains NaN' as every other method does"),
}

#: The exported classes that take part (the functions and SinkhornTransport,
#: whose peer is POT's and not scikit-learn's, are not here).
NOT_SKLEARN = {"SinkhornTransport"}


def _frame(A, dtype):
    return pd.DataFrame(np.asarray(A), columns=[f"f{i}" for i in range(A.shape[1])]
                        ).astype(dtype)


def _with(A, value):
    A = np.array(A, dtype=np.float64)
    A[0, 0] = value
    return A


def _na_frame(A):
    F = _frame(A, "Float64")
    F.iloc[0, 0] = pd.NA
    return F


#: name -> (make the unusual input from a float64 array, the same numbers as an
#: ndarray or None where no float64 ndarray holds them)
VARIANTS = {
    "pd-Float64": (lambda A: _frame(A, "Float64"), lambda A: A),
    "pd-Int64": (lambda A: _frame(np.round(A * 10), "Int64"),
                 lambda A: np.round(A * 10)),
    "pd-Float64-NA": (_na_frame, None),
    "pd-float64": (lambda A: _frame(A, "float64"), lambda A: A),
    "str": (lambda A: A.astype(str), None),
    "object-str": (lambda A: A.astype(str).astype(object), None),
    "pd-str": (lambda A: _frame(A.astype(str), object), None),
    "object-num": (lambda A: A.astype(object), lambda A: A),
    "list": (lambda A: A.tolist(), lambda A: A),
    "bool": (lambda A: A > 0.5, lambda A: (A > 0.5).astype(np.float64)),
    "int": (lambda A: np.round(A * 10).astype(np.int64), lambda A: np.round(A * 10)),
    "float32": (lambda A: A.astype(np.float32), None),
    "complex": (lambda A: A + 1j, None),
    "nan": (lambda A: _with(A, np.nan), None),
    "inf": (lambda A: _with(A, np.inf), None),
    "1-d": (lambda A: A[:, 0], None),
    "empty": (lambda A: A[:0], lambda A: A[:0]),
    "one-sample": (lambda A: A[:1], lambda A: A[:1]),
    "3-d": (lambda A: A[None], None),
    "wrong-features": (lambda A: A[:, :-1], lambda A: A[:, :-1]),
}


def _classes(name):
    module, kwargs, y, probe, methods = ESTIMATORS[name]
    cls_name = name.split("-")[0]
    ours = getattr(kte, cls_name)
    theirs = getattr(importlib.import_module(module), cls_name)
    return ours, theirs, kwargs, y, probe, methods


def _base(name, method):
    """The float64 array a method's unusual input is made from, and its target."""
    _, _, kwargs, y, _, _ = _classes(name)
    if method == "inverse_transform":
        return Z[:, : kwargs["n_components"]], None
    if method.startswith("fit") or method == "score" and y is None:
        return X_FIT, y
    return Q, (None if y is None else y[: len(Q)])


def _call(est, name, method, X, y):
    """Fit and call ``method`` (a fit, then the probe, for the fit methods)."""
    _, _, _, y_fit, probe, _ = _classes(name)
    n = len(X) if hasattr(X, "__len__") else 0
    if np.ndim(np.asarray(X, dtype=object)) >= 1 and y is not None:
        y = y[:n]
    if method == "fit" or method.startswith("fit_"):
        out = getattr(est, method)(X, y) if y is not None else getattr(est, method)(X)
        if method != "fit":
            return out
        return getattr(est, probe) if probe.endswith("_") else getattr(est, probe)(Q)
    est.fit(X_FIT, y_fit)
    if method == "score" and y is not None:
        return est.score(X, y)
    return getattr(est, method)(X)


def _outcome(cls, kwargs, name, method, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return _flat(_call(cls(**kwargs), name, method, X, y)), None
        except Exception as exc:  # the type is compared
            return None, exc


def _flat(out):
    """A method's result as a list of float arrays (graphs densified, the
    ragged arrays of radius_neighbors concatenated)."""
    parts = out if isinstance(out, tuple) else (out,)
    flat = []
    for p in parts:
        if sp.issparse(p):
            p = p.toarray()
        p = np.asarray(p)
        if p.dtype == object:
            p = np.concatenate([np.sort(np.asarray(r, dtype=np.float64)) for r in p]
                               ) if len(p) else np.zeros(0)
        flat.append(np.asarray(p, dtype=np.float64))
    return flat


def _cases():
    for name, (_, _, _, _, methods) in ESTIMATORS.items():
        for method in ["fit", *methods]:
            for variant in VARIANTS:
                yield pytest.param(name, method, variant,
                                   id=f"{name}-{method}-{variant}")


#: Public methods taking X that scikit-learn's estimators lack.
OURS_ONLY = {("KernelDensity", "log_density_gradient")}


def _methods_taking_X(cls) -> set:
    out = set()
    for name in dir(cls):
        f = getattr(cls, name, None)
        if name.startswith("_") or not callable(f) or isinstance(f, type):
            continue
        try:
            params = list(inspect.signature(f).parameters)
        except (TypeError, ValueError):
            continue
        if params[:2] == ["self", "X"]:
            out.add(name)
    return out


def test_every_exported_estimator_and_method_is_covered():
    exported = {n for n in kte.__all__ if isinstance(getattr(kte, n), type)}
    covered = {n.split("-")[0] for n in ESTIMATORS}
    assert exported - NOT_SKLEARN == covered
    for cls_name in covered:
        listed = {"fit"}.union(*(m for n, (*_, m) in ESTIMATORS.items()
                                 if n.split("-")[0] == cls_name))
        missing = {m for m in _methods_taking_X(getattr(kte, cls_name)) - listed
                   if (cls_name, m) not in OURS_ONLY}
        assert not missing, f"{cls_name}: methods taking X not tested: {missing}"


def _difference(name, method, variant):
    """(our outcome, why) where it differs from scikit-learn's on purpose."""
    for (n, m, variants), outcome in DIFFERENCES.items():
        if name == n and method == m and variant in variants:
            return outcome
    return None


@pytest.mark.parametrize(("name", "method", "variant"), list(_cases()))
def test_input_handled_as_scikit_learn(name, method, variant):
    ours, theirs, kwargs, _, _, _ = _classes(name)
    A, y = _base(name, method)
    make, same = VARIANTS[variant]
    X = make(A)
    want, want_exc = _outcome(theirs, kwargs, name, method, X, y)
    got, got_exc = _outcome(ours, kwargs, name, method, X, y)
    if (diff := _difference(name, method, variant)) is not None:
        want = None  # scikit-learn's outcome is not ours: shapes not compared
        want_exc = None if diff[0] is None else diff[0]("")
    if want_exc is not None:
        assert got_exc is not None, (
            f"scikit-learn raises {type(want_exc).__name__}: {want_exc}; we return")
        assert isinstance(got_exc, type(want_exc)), (
            f"scikit-learn raises {type(want_exc).__name__}: {want_exc}; "
            f"we raise {type(got_exc).__name__}: {got_exc}")
        return
    assert got_exc is None, f"scikit-learn returns; we raise {got_exc!r}"
    if want is not None:
        assert [g.shape for g in got] == [w.shape for w in want]
    if same is not None:
        ref, ref_exc = _outcome(ours, kwargs, name, method, same(A), y)
        assert ref_exc is None
        # the same numbers in another layout (a DataFrame's is Fortran's):
        # BLAS may round its products apart, at ~1e-16 relative
        for g, r in zip(got, ref):
            np.testing.assert_allclose(g, r, rtol=1e-9, atol=1e-9)
