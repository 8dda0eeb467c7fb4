"""Which search the k-NN estimators build, pinned for representative cases.

The search strategies (:mod:`kerneltools.estimators.neighbors.search`) are
chosen by one ordered list; these cases pin the choice (dimension, metric,
dtype, number of fitted points, ``algorithm``, backend, a GPU visible or not,
NumPy, Array API and simulated-device inputs), so that a change to the list
or to a strategy's rule shows here. Every strategy of the list is the choice
of at least one case.
"""

from __future__ import annotations

import numpy as np
import pytest
import sklearn

from kerneltools.estimators import KNeighborsClassifier, NearestNeighbors
from kerneltools.estimators.neighbors._metrics import make_metric
from kerneltools.estimators.neighbors.search import (
    STRATEGIES,
    ExpandedSearch,
    FormulaSearch,
    GemmSearch,
    SearchCase,
    _blas,
    choose,
)

from _array_api_helpers import as_way, way_context

#: (id, fitted points, features, estimator arguments, dtype, way, GPU visible,
#: the search built for the queries). way: "numpy", "strict" (array-api-strict
#: on the host), "device" (array-api-strict standing for a GPU), "numpy-cuda"
#: (NumPy inputs with backend="cuda" on that simulated device).
CASES = [
    ("3d-blobs-prune", 1000, 3, {}, np.float64, "numpy", False, "CellSearch"),
    ("3d-float32-prune", 1000, 3, {}, np.float32, "numpy", False, "CellSearch"),
    ("3d-few-points", 999, 3, {}, np.float64, "numpy", False, "FormulaSearch"),
    ("3d-brute", 1000, 3, {"algorithm": "brute"}, np.float64, "numpy", False,
     "FormulaSearch"),
    ("3d-kd_tree-prunes", 1000, 3, {"algorithm": "kd_tree"}, np.float64, "numpy",
     False, "CellSearch"),
    ("3d-manhattan", 1000, 3, {"metric": "manhattan"}, np.float64, "numpy", False,
     "FormulaSearch"),
    ("3d-weighted-minkowski", 1000, 3,
     {"metric_params": {"w": np.ones(3)}}, np.float64, "numpy", False,
     "FormulaSearch"),
    ("4d-no-prune", 1000, 4, {}, np.float64, "numpy", False, "FormulaSearch"),
    ("3d-prune-gpu", 1000, 3, {}, np.float64, "numpy", True, "CellSearch"),
    ("15d", 50, 15, {}, np.float64, "numpy", False, "FormulaSearch"),
    ("16d-gemm", 50, 16, {}, np.float64, "numpy", False, "GemmSearch"),
    ("32d-gemm-float32", 50, 32, {}, np.float32, "numpy", False, "GemmSearch"),
    ("32d-sqeuclidean-gemm", 50, 32, {"metric": "sqeuclidean"}, np.float64,
     "numpy", False, "GemmSearch"),
    ("32d-gemm-numpy-backend", 50, 32, {"backend": "numpy"}, np.float64, "numpy",
     False, "GemmSearch"),
    ("32d-gemm-cpu-backend", 50, 32, {"backend": "cpu"}, np.float64, "numpy",
     False, "GemmSearch"),
    ("32d-gpu-expanded", 50, 32, {}, np.float64, "numpy", True, "ExpandedSearch"),
    ("20d-gpu-expanded", 50, 20, {}, np.float64, "numpy", True, "ExpandedSearch"),
    ("19d-gpu-formula", 50, 19, {}, np.float64, "numpy", True, "FormulaSearch"),
    ("32d-gpu-cpu-backend-gemm", 50, 32, {"backend": "cpu"}, np.float64, "numpy",
     True, "GemmSearch"),
    ("32d-cosine", 50, 32, {"metric": "cosine"}, np.float64, "numpy", False,
     "FormulaSearch"),
    ("32d-manhattan", 50, 32, {"metric": "manhattan"}, np.float64, "numpy", False,
     "FormulaSearch"),
    ("32d-dtype-float32", 50, 32, {"dtype": "float32"}, np.float64, "numpy", False,
     "GemmSearch"),
    ("32d-strict-host", 50, 32, {}, np.float64, "strict", False, "GemmSearch"),
    ("3d-strict-host-prune", 1000, 3, {}, np.float32, "strict", False, "CellSearch"),
    ("4d-device", 50, 4, {"backend": "cuda"}, np.float64, "device", False,
     "DeviceSearch"),
    ("32d-device", 50, 32, {"backend": "cuda"}, np.float32, "device", False,
     "DeviceSearch"),
    ("3d-device-prune", 1000, 3, {"backend": "cuda"}, np.float64, "device", False,
     "HostSearch"),
    ("3d-device-brute", 1000, 3, {"backend": "cuda", "algorithm": "brute"},
     np.float64, "device", False, "DeviceSearch"),
    ("4d-device-cosine-host", 50, 4, {"backend": "cuda", "metric": "cosine"},
     np.float64, "device", False, "FormulaSearch"),
    ("4d-numpy-cuda", 50, 4, {"backend": "cuda"}, np.float64, "numpy-cuda", False,
     "DeviceSearch"),
    ("3d-numpy-cuda-prune", 1000, 3, {"backend": "cuda"}, np.float64, "numpy-cuda",
     False, "CellSearch"),
]


def _points(n, d, dtype, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d)).astype(dtype)


def _built(est):
    """The class name of the one search the estimator holds."""
    (search,) = est._searches.values()
    return type(search).__name__


@pytest.mark.parametrize(
    ("n", "d", "kw", "dtype", "way", "gpu", "expected"),
    [pytest.param(*c[1:], id=c[0]) for c in CASES],
)
def test_search_chosen(monkeypatch, n, d, kw, dtype, way, gpu, expected):
    """The search built for the first query of each case."""
    if way != "numpy":  # "numpy-cuda" stands a GPU in with array-api-strict too
        pytest.importorskip("array_api_strict", reason="the Array API cases need "
                            "array-api-strict (.ci/run's extras step installs it)")
    monkeypatch.setattr(_blas, "_gpu_visible", lambda: gpu)
    monkeypatch.setenv("SCIPY_ARRAY_API", "1")  # scikit-learn asks; ours needs none
    X, Q = _points(n, d, dtype), _points(3, d, dtype, seed=1)
    host_way = "device" if way == "numpy-cuda" else way
    with sklearn.config_context(array_api_dispatch=way != "numpy"), \
            way_context(host_way):
        cast = (lambda a: a) if way.startswith("numpy") else (
            lambda a: as_way(way, a))
        est = NearestNeighbors(n_neighbors=2, **kw).fit(cast(X))
        if way in ("numpy", "strict") and not gpu:
            est.kneighbors(cast(Q))  # the query builds it, and runs
        elif way == "numpy":
            est._search(Q)  # a GPU pretended: built only
        else:
            est.kneighbors(cast(Q))
    assert _built(est) == expected


def test_classifier_chooses_as_nearest_neighbors():
    """The supervised estimators share the choice (their base's)."""
    X = _points(60, 32, np.float64)
    y = (X[:, 0] > 0).astype(int)
    clf = KNeighborsClassifier(n_neighbors=3).fit(X, y)
    clf.predict(X[:4])
    assert _built(clf) == "GemmSearch"


def test_every_strategy_is_chosen_by_a_case():
    """Each strategy of the list is the choice of some case above (none is
    shadowed by the ones before it)."""
    assert {s.__name__ for s in STRATEGIES} <= {c[-1] for c in CASES}


def test_choose_takes_the_first_usable_strategy():
    """Euclidean in 32 features on the CPU: the GEMM tiles, the expanded
    form and the formula all apply; the first of the list wins, and the
    formula search serves what no other does."""
    metric = make_metric("euclidean", {})
    Y = _points(10, 32, np.float64)
    case = SearchCase(metric=metric, points=Y, dtype=Y.dtype, backend="cpu")
    usable = [s for s in STRATEGIES if s.is_usable_for(case)]
    assert usable == [GemmSearch, ExpandedSearch, FormulaSearch]
    assert choose(case) is GemmSearch
    other = SearchCase(metric=make_metric("manhattan", {}), points=Y,
                       dtype=Y.dtype, backend="cpu")
    assert [s for s in STRATEGIES if s.is_usable_for(other)] == [FormulaSearch]
    assert STRATEGIES[-1] is FormulaSearch
