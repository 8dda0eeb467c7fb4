"""Parameter validation of the estimators (estimators/_param_validation.py).

Every constrained parameter of every estimator rejects a bad value at ``fit``
with scikit-learn's exception type and message, and the parameters that an
estimator shares with its scikit-learn counterpart are constrained as there:
what scikit-learn rejects, ours rejects with the same message.
"""

from __future__ import annotations

import re
import warnings
from numbers import Integral, Real

import numpy as np
import pytest
import sklearn.gaussian_process
import sklearn.kernel_approximation
import sklearn.kernel_ridge
import sklearn.neighbors
from sklearn.gaussian_process.kernels import RBF

from kerneltools.estimators import (
    GaussianProcessRegressor,
    KernelRidge,
    KNeighborsClassifier,
    KNeighborsRegressor,
    NearestNeighbors,
    Nystroem,
    SinkhornTransport,
    sinkhorn_divergence,
    sinkhorn_potentials,
    transport_plan,
)
from kerneltools._utils._param_validation import (
    BACKEND_NAMES,
    Interval,
    InvalidParameterError,
    Options,
    StrOptions,
    validate_arguments,
    validate_params,
)
from kerneltools.kernels import PAIRWISE_KERNELS

RNG = np.random.default_rng(0)
X = RNG.random((20, 3))
Y_REG = RNG.random(20)
Y_CLS = np.arange(20) % 2

NP_BOOL = f"'{np.bool_.__module__}.{np.bool_.__qualname__}'"  # 'numpy.bool'
BOOL = f"an instance of 'bool' or an instance of {NP_BOOL}"
VERBOSE = (
    f"an int in the range [0, inf), an instance of 'bool' or an instance of {NP_BOOL}"
)
BACKEND = "a str among {'auto', 'cpu', 'cuda', 'numpy'} or None"
RANDOM_STATE = (
    "an int in the range [0, 4294967295], an instance of "
    "'numpy.random.mtrand.RandomState' or None"
)
INT_1 = "an int in the range [1, inf)"
KERNELS = (  # the kernels we compute, and "precomputed" (handed to scikit-learn)
    "a str among {" + ", ".join(map(repr, sorted({*PAIRWISE_KERNELS, "precomputed"})))
    + "} or a callable"
)
METRICS = (
    "a str among {'braycurtis', 'canberra', 'chebyshev', 'cityblock', 'correlation', "
    "'cosine', 'dice', 'euclidean', 'hamming', 'haversine', 'infinity', 'jaccard', "
    "'l1', 'l2', 'mahalanobis', 'manhattan', 'minkowski', 'nan_euclidean', "
    "'rogerstanimoto', 'russellrao', 'seuclidean', 'sokalsneath', 'sqeuclidean', "
    "'yule'} or a callable"
)

#: parameter -> (a bad value, what the message says it must be), per estimator
BAD = {
    KernelRidge: {
        "alpha": (-1, "a float in the range [0.0, inf) or an array-like"),
        "kernel": ("gaussian", KERNELS),
        "gamma": (-2.0, "a float in the range [0.0, inf) or None"),
        "degree": (-1, "a float in the range [0.0, inf)"),
        "coef0": (np.inf, "a float in the range (-inf, inf)"),
        "kernel_params": ([], "an instance of 'dict' or None"),
        "solver": ("lu", "a str among {'auto', 'cholesky', 'cg', 'falkon'}"),
        "n_components": (0, INT_1),
        "tol": (0.0, "a float in the range (0.0, inf)"),
        "max_iter": (0, f"{INT_1} or None"),
        "landmarks": ("kmeans++", "a str among {'uniform', 'rpcholesky'}"),
        "random_state": (
            -1,
            "an int in the range [0, inf), an instance of "
            "'numpy.random._generator.Generator' or None",
        ),
        "backend": ("gpu", BACKEND),
        "verbose": (-1, VERBOSE),
    },
    GaussianProcessRegressor: {
        "kernel": (
            "rbf",
            "None or an instance of 'sklearn.gaussian_process.kernels.Kernel'",
        ),
        "alpha": (
            [1e-3],
            "a float in the range [0.0, inf) or an instance of 'numpy.ndarray'",
        ),
        "optimizer": ("adam", "a str among {'fmin_l_bfgs_b'}, a callable or None"),
        "n_restarts_optimizer": (-1, "an int in the range [0, inf)"),
        "normalize_y": (1, BOOL),
        "copy_X_train": ("yes", BOOL),
        "n_targets": (0, f"{INT_1} or None"),
        "random_state": ("seed", RANDOM_STATE),
        "solver": ("lanczos", "a str among {'auto', 'cholesky', 'iterative'}"),
        "n_probes": (0, INT_1),
        "n_components": (2.0, INT_1),
        "tol": (-1.0, "a float in the range (0.0, inf)"),
        "max_iter": (1.5, INT_1),
        "n_pretrain": (0, f"{INT_1}, a str among {{'auto'}} or None"),
        "backend": ("CUDA", BACKEND),
        "verbose": (0.5, VERBOSE),
    },
    NearestNeighbors: {
        "n_neighbors": (0, f"{INT_1} or None"),
        "radius": (-1.0, "a float in the range [0.0, inf] or None"),
        "algorithm": ("ball", "a str among {'auto', 'ball_tree', 'brute', 'kd_tree'}"),
        "leaf_size": (0, INT_1),
        "p": (0, "a float in the range (0.0, inf] or None"),
        # a name we do not compute goes to scikit-learn, whose error it is (below)
        "metric": (1.5, METRICS),
        "metric_params": ([("p", 3)], "an instance of 'dict' or None"),
        "n_jobs": (1.5, "an instance of 'int' or None"),
        "backend": ("gpu", BACKEND),
        "dtype": ("int8", "a dtype among {'float32', 'float64'} or None"),
    },
    Nystroem: {
        "kernel": ("gaussian", KERNELS),
        "gamma": (-1.0, "a float in the range [0.0, inf) or None"),
        "coef0": (np.nan, "a float in the range (-inf, inf) or None"),
        "degree": (0.5, "a float in the range [1.0, inf) or None"),
        "kernel_params": ("gamma=1", "an instance of 'dict' or None"),
        "n_components": (0, INT_1),
        "random_state": (2**32, RANDOM_STATE),
        "n_jobs": ("2", "an instance of 'int' or None"),
        "landmarks": (
            "kmeans",
            "a str among {'uniform', 'kmeans++', 'rls', 'rpcholesky'} or an array-like",
        ),
        "backend": ("gpu", BACKEND),
        "verbose": ("loud", VERBOSE),
    },
    SinkhornTransport: {
        "blur": (-1.0, "a float in the range (0.0, inf)"),
        "p": (3, "a float among {1, 2}"),
        "scaling": (1.0, "a float in the range (0.0, 1.0)"),
        "reach": (0.0, "a float in the range (0.0, inf) or None"),
        "tol": (None, "a float in the range (0.0, inf)"),
        "max_iter": (0, INT_1),
        "backend": ("gpu", BACKEND),
        "verbose": (-2, VERBOSE),
        "multiscale": ("yes", "an instance of 'bool' or an instance of 'numpy.bool'"),
        "truncate": (0.0, "a float in the range (0.0, inf) or None"),
        "cluster_scale": (-1.0, "a float in the range (0.0, inf) or None"),
    },
}
_KNN = {k: v for k, v in BAD[NearestNeighbors].items() if k != "radius"}
_KNN["weights"] = ("far", "a str among {'distance', 'uniform'}, a callable or None")
BAD[KNeighborsClassifier] = BAD[KNeighborsRegressor] = _KNN


def _fit(est):
    if isinstance(est, SinkhornTransport):
        return est.fit(X, Xt=X[:10])
    if isinstance(est, KNeighborsClassifier):
        return est.fit(X, Y_CLS)
    return est.fit(X, Y_REG)


def _message(owner, name, value, expected):
    return (
        f"The {name!r} parameter of {owner} must be {expected}. Got {value!r} instead."
    )


CASES = [(cls, name, *bad) for cls, table in BAD.items() for name, bad in table.items()]


@pytest.mark.parametrize(
    "cls, name, value, expected", CASES, ids=[f"{c.__name__}-{n}" for c, n, *_ in CASES]
)
def test_each_constrained_parameter_is_rejected_at_fit(cls, name, value, expected):
    est = cls(**{name: value})  # __init__ and set_params only store it
    est.set_params(**{name: value})
    with pytest.raises(InvalidParameterError) as info:
        _fit(est)
    assert str(info.value) == _message(cls.__name__, name, value, expected)
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)


@pytest.mark.parametrize("cls", list(BAD), ids=lambda c: c.__name__)
def test_every_parameter_has_a_constraint(cls):
    """As scikit-learn's check_param_validation asks; the table above covers them."""
    params = set(cls().get_params(deep=False))
    assert set(cls._parameter_constraints) == params
    assert set(BAD[cls]) == params


class BadType:
    """A value no constraint takes (not callable, not array-like, not None)."""

    def __repr__(self):
        return "BadType()"


@pytest.mark.parametrize("cls", list(BAD), ids=lambda c: c.__name__)
def test_a_value_of_no_valid_type_is_rejected(cls):
    for name in cls._parameter_constraints:
        with pytest.raises(
            InvalidParameterError,
            match=rf"^The '{name}' parameter of {cls.__name__} must be "
            r".* Got BadType\(\) instead\.$",
        ):
            _fit(cls(**{name: BadType()}))


# -- the same constraints as scikit-learn's -------------------------------------------

SKLEARN = {
    KernelRidge: sklearn.kernel_ridge.KernelRidge,
    GaussianProcessRegressor: sklearn.gaussian_process.GaussianProcessRegressor,
    NearestNeighbors: sklearn.neighbors.NearestNeighbors,
    KNeighborsClassifier: sklearn.neighbors.KNeighborsClassifier,
    KNeighborsRegressor: sklearn.neighbors.KNeighborsRegressor,
    Nystroem: sklearn.kernel_approximation.Nystroem,
}
#: Parameters whose valid names are a subset of scikit-learn's (the kernels and
#: metrics that we compute): the message lists ours.
SUBSET = {"kernel": (KernelRidge, Nystroem), "metric": tuple(SKLEARN)[2:5]}
CANDIDATES = [-1, 0, 0.5, 1.5, -np.inf, np.inf, np.nan, "bad", None, [], BadType()]


def _shared(cls):
    return sorted(
        set(cls._parameter_constraints) & set(SKLEARN[cls]._parameter_constraints)
    )


def _sklearn_error(est):
    """scikit-learn's parameter error at fit, or None if it takes the value."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _fit(est)
    except Exception as exc:  # noqa: BLE001 (only its parameter errors count)
        if type(exc).__name__ == "InvalidParameterError":
            return exc
    return None


def _normalised(message: str) -> str:
    """Options in sorted order: scikit-learn prints its sets in set order."""

    def sort(m):
        return "{" + ", ".join(sorted(m.group(1).split(", "))) + "}"

    return re.sub(r"\{([^{}]*)\}", sort, message)


SHARED = [(cls, name) for cls in SKLEARN for name in _shared(cls)]


@pytest.mark.parametrize(
    "cls, name", SHARED, ids=[f"{c.__name__}-{n}" for c, n in SHARED]
)
def test_shared_parameters_are_rejected_as_scikit_learn_rejects_them(cls, name):
    values = CANDIDATES + ([2**32] if name == "random_state" else [])
    compared = 0
    for value in values:
        ref = _sklearn_error(SKLEARN[cls](**{name: value}))
        if ref is None:  # scikit-learn takes it (we may not: a narrower set)
            continue
        # ours, or scikit-learn's own where the value is handed to it (a metric
        # name we do not compute)
        with pytest.raises(ValueError) as info:
            _fit(cls(**{name: value}))
        assert type(info.value).__name__ == "InvalidParameterError"
        ours, theirs = str(info.value), str(ref)
        if cls in SUBSET.get(name, ()):
            head = f"The {name!r} parameter of {cls.__name__} must be a str among {{"
            assert ours.startswith(head) and theirs.startswith(head)
            assert ours.endswith(f"Got {value!r} instead.")
            assert theirs.endswith(f"Got {value!r} instead.")
        else:
            assert _normalised(ours) == _normalised(theirs)
        compared += 1
    assert compared >= 2  # BadType() and a wrong value of the right type at least


@pytest.mark.parametrize("cls, name", [(c, n) for n, cs in SUBSET.items() for c in cs])
def test_narrower_options_are_among_scikit_learns(cls, name):
    ours = [c for c in cls._parameter_constraints[name] if isinstance(c, StrOptions)]
    theirs = [
        c
        for c in SKLEARN[cls]._parameter_constraints[name]
        if type(c).__name__ == "StrOptions"
    ]
    assert set(ours[0].options) <= set(theirs[0].options)


# -- backend ------------------------------------------------------------------------


def test_backend_names_are_the_engines():
    from kerneltools.backend._dispatch import BACKEND_NAMES as ENGINE

    assert BACKEND_NAMES == ENGINE


@pytest.mark.parametrize("cls", list(BAD), ids=lambda c: c.__name__)
def test_backend_takes_every_name_and_none(cls):
    for backend in (*BACKEND_NAMES, None):
        validate_params(cls(backend=backend))  # whether it runs here is fit's question


# -- the transport functions ----------------------------------------------------------

FUNCTION_BAD = {
    "p": (2.5, "a float among {1, 2}"),
    "blur": (0, "a float in the range (0.0, inf)"),
    "reach": (-1.0, "a float in the range (0.0, inf) or None"),
    "scaling": (np.nan, "a float in the range (0.0, 1.0)"),
    "backend": ("gpu", BACKEND),
}
FUNCTIONS = {
    sinkhorn_divergence: {
        **FUNCTION_BAD,
        "debias": ("yes", BOOL),
        "return_grad": (1, BOOL),
    },
    sinkhorn_potentials: {
        **FUNCTION_BAD,
        "tol": (0.0, "a float in the range (0.0, inf) or None"),
        "max_iter": (0, INT_1),
    },
}
FUNCTIONS[transport_plan] = FUNCTIONS[sinkhorn_potentials]
FCASES = [(f, n, *bad) for f, table in FUNCTIONS.items() for n, bad in table.items()]


@pytest.mark.parametrize(
    "fn, name, value, expected",
    FCASES,
    ids=[f"{f.__name__}-{n}" for f, n, *_ in FCASES],
)
def test_transport_functions_reject_bad_keywords(fn, name, value, expected):
    with pytest.raises(InvalidParameterError) as info:
        fn(X, X[:10], **{name: value})
    assert str(info.value) == _message(fn.__name__, name, value, expected)


# -- the constraints themselves --------------------------------------------------------


@pytest.mark.parametrize(
    "interval, text, inside, outside",
    [
        (
            Interval(Real, 0, None, closed="left"),
            "a float in the range [0.0, inf)",
            [0, 0.0, 1e300, np.float32(2)],
            [-1e-300, np.inf, np.nan, True, "1", None],
        ),
        (
            Interval(Real, 0, None, closed="both"),
            "a float in the range [0.0, inf]",
            [0, np.inf],
            [-np.inf, np.nan],
        ),
        (
            Interval(Real, None, 1, closed="right"),
            "a float in the range (-inf, 1.0]",
            [-1e300, 1],
            [-np.inf, 1.5],
        ),
        (
            Interval(Integral, 1, 3, closed="neither"),
            "an int in the range (1, 3)",
            [2, np.int64(2)],
            [1, 3, 2.0, np.True_, False],
        ),
    ],
)
def test_interval(interval, text, inside, outside):
    assert str(interval) == text
    assert all(interval.is_satisfied_by(v) for v in inside)
    assert not any(interval.is_satisfied_by(v) for v in outside)


def test_options_keep_the_given_order_and_sort_sets():
    assert str(StrOptions(("b", "a"))) == "a str among {'b', 'a'}"
    assert str(StrOptions({"b", "a"})) == "a str among {'a', 'b'}"
    p = Options(Real, (1, 2))
    assert p.is_satisfied_by(2.0) and p.is_satisfied_by(np.int64(1))
    assert not p.is_satisfied_by(True) and not p.is_satisfied_by("1")


def test_message_lists_every_constraint_with_or():
    table = {
        "a": [StrOptions({"x"})],
        "b": [None, callable],
        "c": [dict, "array-like", None],
    }
    with pytest.raises(
        InvalidParameterError, match=r"of f must be a str among \{'x'\}\. "
    ):
        validate_arguments(table, "f", a="y")
    with pytest.raises(
        InvalidParameterError, match=r"must be None or a callable\. Got 1 "
    ):
        validate_arguments(table, "f", b=1)
    with pytest.raises(
        InvalidParameterError,
        match=r"must be an instance of 'dict', an array-like or None\. Got 1 ",
    ):
        validate_arguments(table, "f", c=1)
    validate_arguments(table, "f", a="x", b=len, c=[1])
    validate_arguments({"k": "no_validation"}, "f", k=BadType())


def test_gp_kernel_objects_and_callables_pass():
    validate_params(KernelRidge(kernel=RBF()))
    validate_params(Nystroem(kernel=lambda x, y: x | y))
    validate_params(GaussianProcessRegressor(RBF(), alpha=np.full(20, 1e-3)))


@pytest.mark.parametrize("cls", [NearestNeighbors, KNeighborsClassifier,
                                 KNeighborsRegressor], ids=lambda c: c.__name__)
def test_a_metric_name_we_do_not_compute_gets_scikit_learns_own_error(cls):
    """Names outside ours are handed to scikit-learn: a wrong one gets its error."""
    with pytest.raises(ValueError) as info:
        _fit(cls(metric="kulsinski"))
    with pytest.raises(ValueError) as ref:
        _fit(SKLEARN[cls](metric="kulsinski"))
    assert type(info.value) is type(ref.value)
    assert _normalised(str(info.value)) == _normalised(str(ref.value))
