"""One way to choose the backend (issue 20): the backend asked for is the one that RAN.

Each registered backend's ``run`` and ``run_ranges`` are wrapped to count their
calls; every estimator and solver path then runs with ``backend="numpy"``
(explicit), under ``config_context(backend="numpy")`` (no argument), and with
``backend="numpy"`` inside ``config_context(backend="cuda")`` (the explicit
argument wins: a call that fell back to the context would raise here, or run
on CUDA where there is a GPU, and be counted). Only NumPy may run, at least
once; a path that reduces nothing says so.
"""

from __future__ import annotations

import collections
import sys
import threading

import numpy as np
import pytest

import kerneltools as kt
from kerneltools import linalg
from kerneltools.backend import _dispatch
from kerneltools.backend._dispatch import BACKENDS
from kerneltools.estimators import (
    GaussianProcessRegressor,
    KernelRidge,
    KNeighborsClassifier,
    KNeighborsRegressor,
    NearestNeighbors,
    Nystroem,
    SinkhornTransport,
    sinkhorn_divergence,
)
from kerneltools.estimators import kernel_ridge as _kernel_ridge
from kerneltools.estimators.optimal_transport import sinkhorn_potentials, transport_plan
from kerneltools.exceptions import BackendUnavailableError

CUDA_RUNS = BACKENDS["cuda"].available()[0]


@pytest.fixture
def ran(monkeypatch):
    """Calls per backend name, counted at each backend's ``run``/``run_ranges``."""
    counts = collections.Counter()
    for name, b in BACKENDS.items():
        for method in ("run", "run_ranges"):
            f = getattr(b, method, None)
            if f is None:
                continue

            def counted(*args, _f=f, _name=name, **kwargs):
                counts[_name] += 1
                return _f(*args, **kwargs)

            monkeypatch.setattr(b, method, counted)
    return counts


def ran_only(counts, name="numpy"):
    """Only ``name`` ran, at least once."""
    assert counts[name] > 0, f"{name} never ran: {dict(counts)}"
    others = {k: v for k, v in counts.items() if v and k != name}
    assert not others, f"asked for {name!r}, but these ran too: {others}"


def data(n=60, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.sin(X[:, 0]) + 0.1 * X[:, 1]


# -- the paths: each runs everything it covers with the given `backend` --------
def kernel_ridge(solver):
    def case(backend):
        X, y = data()
        # predict on the lazy path too (_DENSE_PREDICT_MAX is 0 in the test)
        KernelRidge(kernel="rbf", solver=solver, n_components=10,
                    backend=backend).fit(X, y).predict(X)
    return case


def gp_iterative(optimizer):
    def case(backend):
        X, y = data()
        gp = GaussianProcessRegressor(solver="iterative", alpha=0.1, optimizer=optimizer,
                                      n_components=10, backend=backend).fit(X, y)
        gp.predict(X, return_std=True)
        gp.predict(X[:10], return_cov=True)
    return case


def nystroem_kmeans(backend):
    X, _ = data()
    Nystroem(landmarks="kmeans++", n_components=10, backend=backend).fit(X).transform(X)


def neighbors(algorithm):
    def case(backend):
        X, y = data(n=80)
        labels = (y > 0).astype(int)
        nn = NearestNeighbors(n_neighbors=3, algorithm=algorithm, backend=backend).fit(X)
        nn.kneighbors(X[:20])
        nn.kneighbors()
        nn.kneighbors_graph(X[:20])
        nn.radius_neighbors(X[:20], radius=0.5)
        nn.radius_neighbors_graph(X[:20], radius=0.5)
        clf = KNeighborsClassifier(n_neighbors=3, algorithm=algorithm,
                                   backend=backend).fit(X, labels)
        clf.predict(X[:20])
        clf.predict_proba(X[:20])
        clf.score(X[:20], labels[:20])
        KNeighborsRegressor(n_neighbors=3, algorithm=algorithm,
                            backend=backend).fit(X, y).predict(X[:20])
    return case


def sinkhorn(backend):
    X, _ = data()
    ot = SinkhornTransport(blur=0.5, backend=backend).fit(X, Xt=X + 1)
    ot.transform(X)
    sinkhorn_divergence(X, X + 1, blur=0.5, return_grad=True, backend=backend)
    sinkhorn_potentials(X, X + 1, blur=0.5, tol=1e-4, backend=backend)
    transport_plan(X, X + 1, blur=0.5, tol=1e-4, backend=backend)


def kernel_operator(backend):
    X, _ = data()
    A = linalg.KernelOperator("rbf", X, shift=0.5, backend=backend)
    v = np.ones(len(X))
    A.matvec(v)
    A.rmatvec(v)
    A.matmat(np.ones((len(X), 3)))
    A.H.matvec(v)


def nystroem_preconditioner(backend):
    X, _ = data()
    M = linalg.NystroemPreconditioner("rbf", X, shift=0.5, n_components=10,
                                      backend=backend)
    M.matvec(np.ones(len(X)))
    M.sample(2, random_state=0)


def conjugate_gradient(backend):
    X, y = data()
    A = linalg.KernelOperator("rbf", X, shift=0.5, backend=backend)
    M = linalg.NystroemPreconditioner("rbf", X, shift=0.5, n_components=10,
                                      backend=backend)
    linalg.conjugate_gradient(A, y, M=M)
    linalg.solve_with_logdet(A, y, M, n_probes=2)


def lazy_formulas():
    X, y = data()
    K = (-kt.Vi(X).sqdist(kt.Vj(X))).exp()
    return X, y, K


def lazy_solve(backend):
    _, y, K = lazy_formulas()
    K.solve(y, alpha=0.5, backend=backend)


def lazy_matmul(backend):
    X, y, K = lazy_formulas()
    K.matmul(y, backend=backend)
    K.matmul(np.ones((len(X), 40)), backend=backend)  # more columns than one block
    B = kt.LazyTensor(np.stack([X, X + 1])[:, :, None, :])
    Bj = kt.LazyTensor(np.stack([X, X + 1])[:, None, :, :])
    (-(B - Bj).square().sum(-1)).exp().matmul(np.ones((2, len(X), 1)),
                                              backend=backend)  # batched


def lazy_reductions(backend):
    X, _, K = lazy_formulas()
    D = kt.Vi(X).sqdist(kt.Vj(X))
    K.sum(axis=1, backend=backend)
    D.argKmin(3, axis=1, backend=backend)
    (-D).logsumexp(axis=0, backend=backend)
    K.vjp(kt.Vi(X), np.ones((len(X), 1)), backend=backend)
    halves = np.array([[0, 30], [30, 60]])
    K.sum(axis=1, backend=backend, ranges=kt.ranges.from_sorted(halves, halves, np.eye(2)))
    labels = np.arange(len(X)) % 2
    K.sum(axis=1, backend=backend,
          ranges=kt.ranges.block_sparsity(labels, labels, np.eye(2, dtype=bool)))


PATHS = {
    "KernelRidge-cholesky": kernel_ridge("cholesky"),
    "KernelRidge-cg": kernel_ridge("cg"),
    "KernelRidge-falkon": kernel_ridge("falkon"),
    "GP-iterative": gp_iterative(None),
    "GP-iterative-optimizer": gp_iterative("fmin_l_bfgs_b"),
    "Nystroem-kmeans++": nystroem_kmeans,
    "kNN-brute": neighbors("brute"),
    "kNN-block-sparse": neighbors("auto"),
    "Sinkhorn": sinkhorn,
    "KernelOperator": kernel_operator,
    "NystroemPreconditioner": nystroem_preconditioner,
    "conjugate_gradient": conjugate_gradient,
    "LazyTensor.solve": lazy_solve,
    "LazyTensor.matmul": lazy_matmul,
    "LazyTensor reductions": lazy_reductions,
}


@pytest.fixture
def small_thresholds(monkeypatch):
    """The lazy paths at test sizes: KernelRidge predicts by a reduction and the
    k-NN estimators prune (algorithm='auto') from a few points."""
    monkeypatch.setattr(_kernel_ridge, "_DENSE_PREDICT_MAX", 0)
    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("kerneltools.estimators"):
            for name, value in (("PRUNE_MIN_FIT", 10), ("PRUNE_MIN_PAIRS", 1)):
                if hasattr(mod, name):
                    monkeypatch.setattr(mod, name, value)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.filterwarnings("ignore:Predicted variances smaller than 0")
@pytest.mark.parametrize("how", ["explicit", "context", "explicit-beats-context"])
@pytest.mark.parametrize("path", list(PATHS))
def test_the_chosen_backend_is_the_one_that_ran(path, how, ran, small_thresholds):
    case = PATHS[path]
    if how == "explicit":
        case(backend="numpy")
    elif how == "context":
        with kt.config_context(backend="numpy"):
            case(backend=None)
    else:
        with kt.config_context(backend="cuda"):
            case(backend="numpy")
    ran_only(ran)


def test_the_block_sparse_knn_path_is_the_pruned_one(small_thresholds):
    X, _ = data(n=80)
    assert NearestNeighbors(backend="numpy").fit(X)._fit_method == "block_sparse"


def test_at_operator_follows_the_context(ran):
    X, y, K = lazy_formulas()
    with kt.config_context(backend="numpy"):
        a = K @ y
    ran_only(ran)
    ran.clear()
    b = K @ y  # outside: the process default again
    assert ran["numpy"] == 0 and sum(ran.values()) == 1
    np.testing.assert_allclose(a, b, rtol=1e-10)


@pytest.mark.parametrize("solver", ["cholesky", "auto"])
def test_exact_paths_reduce_nothing(ran, solver):
    """KernelRidge's Cholesky fit and small predictions, the exact GP and
    Nystroem's transform use dense kernel blocks (scikit-learn's): no backend
    runs, so none can be the wrong one."""
    X, y = data()
    KernelRidge(kernel="rbf", solver=solver, backend="numpy").fit(X, y).predict(X)
    gp = GaussianProcessRegressor(solver="cholesky", backend="numpy").fit(X, y)
    gp.predict(X, return_std=True)
    for landmarks in ("uniform", "rls", "rpcholesky"):
        Nystroem(landmarks=landmarks, n_components=10, backend="numpy").fit(X).transform(X)
    assert sum(ran.values()) == 0, dict(ran)


def test_dask_workers_use_the_callers_context(ran):
    da = pytest.importorskip("dask.array")
    import dask

    X, y = data()
    K = (-kt.Vi(da.from_array(X, chunks=20)).sqdist(kt.Vj(X))).exp()
    with dask.config.set(scheduler="threads"), kt.config_context(backend="numpy"):
        out = (K * kt.Vj(y[:, None])).sum(axis=1)
    np.asarray(out.compute() if hasattr(out, "compute") else out)
    ran_only(ran)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_estimator_methods_mapped_over_dask_rows_use_the_callers_context(
        ran, small_thresholds):
    da = pytest.importorskip("dask.array")
    import dask

    X, y = data()
    Xd = da.from_array(X, chunks=20)
    kr = KernelRidge(kernel="rbf", solver="cg", n_components=10,
                     backend="numpy").fit(X, y)
    knn = KNeighborsRegressor(n_neighbors=3, backend="numpy").fit(X, y)
    ran.clear()
    kr.backend = knn.backend = None
    with dask.config.set(scheduler="threads"), kt.config_context(backend="numpy"):
        kr.predict(Xd).compute()
        knn.predict(Xd).compute()
    ran_only(ran)


# -- the configuration itself --------------------------------------------------
def test_config_context_sets_and_restores():
    assert kt.get_config() == {"backend": None}
    with kt.config_context(backend="numpy"):
        assert kt.get_config()["backend"] == "numpy"
        with kt.config_context(backend="cpu"):
            assert kt.get_config()["backend"] == "cpu"
        assert kt.get_config()["backend"] == "numpy"
        with pytest.raises(RuntimeError), kt.config_context(backend="auto"):
            raise RuntimeError
        assert kt.get_config()["backend"] == "numpy"
    assert kt.get_config() == {"backend": None}


def test_set_config_is_for_this_thread_only(ran):
    """A thread's configuration does not leak into another: a new thread starts
    from the process default (scikit-learn's rule)."""
    seen = {}

    def worker():
        seen["config"] = kt.get_config()["backend"]
        _, y, K = lazy_formulas()
        K.matmul(y)  # on the default backend, not the main thread's "numpy"
        kt.set_config(backend="cuda")  # stays in this thread
        seen["after"] = kt.get_config()["backend"]

    default = _dispatch.resolve_backend(None).name
    with kt.config_context(backend="numpy"):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert kt.get_config()["backend"] == "numpy"
    assert seen == {"config": None, "after": "cuda"}
    assert ran[default] == 1 and sum(ran.values()) == 1, dict(ran)
    assert kt.get_config()["backend"] is None


def test_set_config_in_this_thread(ran):
    try:
        kt.set_config(backend="numpy")
        kt.set_config()  # None leaves it as it is, as scikit-learn's
        assert kt.get_config()["backend"] == "numpy"
        _, y, K = lazy_formulas()
        K @ y
        ran_only(ran)
    finally:
        _dispatch.configure_backend(None)


def test_the_context_beats_the_environment_variable(ran, monkeypatch):
    monkeypatch.setenv("KERNELTOOLS_BACKEND", "cuda")
    _, y, K = lazy_formulas()
    with kt.config_context(backend="numpy"):
        K @ y
    ran_only(ran)


@pytest.mark.parametrize("bad", ["tpu", "gpu", 3, ""])
def test_invalid_names_are_rejected_with_the_list(bad):
    names = ("auto", *sorted(BACKENDS))
    listed = r"'auto', 'cpu', 'cuda', 'numpy'"
    assert _dispatch.BACKEND_NAMES == names
    with pytest.raises(ValueError, match=f"set_config: 'backend' must be one of {listed}"):
        kt.set_config(backend=bad)
    with pytest.raises(ValueError, match=listed), kt.config_context(backend=bad):
        pass
    assert kt.get_config()["backend"] is None
    _, y, K = lazy_formulas()
    with pytest.raises(ValueError, match=listed):
        K.matmul(y, backend=bad)


def test_names_are_case_insensitive():
    with kt.config_context(backend="NumPy"):
        assert kt.get_config()["backend"] == "numpy"


# -- a backend that cannot run here: BackendUnavailableError at fit --------------
X_FIT, Y_FIT = data()
FITS = {
    "KernelRidge": lambda b: KernelRidge(kernel="rbf", backend=b).fit(X_FIT, Y_FIT),
    "GaussianProcessRegressor": lambda b: GaussianProcessRegressor(backend=b).fit(
        X_FIT, Y_FIT),
    "Nystroem": lambda b: Nystroem(n_components=10, backend=b).fit(X_FIT),
    "NearestNeighbors": lambda b: NearestNeighbors(backend=b).fit(X_FIT),
    "KNeighborsClassifier": lambda b: KNeighborsClassifier(backend=b).fit(
        X_FIT, Y_FIT > 0),
    "KNeighborsRegressor": lambda b: KNeighborsRegressor(backend=b).fit(X_FIT, Y_FIT),
    "SinkhornTransport": lambda b: SinkhornTransport(backend=b).fit(X_FIT, Xt=X_FIT + 1),
    "sinkhorn_divergence": lambda b: sinkhorn_divergence(X_FIT, X_FIT + 1, backend=b),
}


@pytest.mark.skipif(CUDA_RUNS, reason="CUDA runs here")
@pytest.mark.parametrize("name", list(FITS))
def test_an_unavailable_backend_fails_at_fit(name, ran):
    with pytest.raises(BackendUnavailableError, match=rf"{name}.*backend='cuda' cannot run"):
        FITS[name]("cuda")
    with kt.config_context(backend="cuda"), pytest.raises(
            BackendUnavailableError, match=rf"{name}.*backend='cuda' cannot run"):
        FITS[name](None)
    assert sum(ran.values()) == 0, f"{name} computed before failing: {dict(ran)}"


@pytest.mark.parametrize("name", list(FITS))
def test_estimators_default_to_the_configuration(name):
    import inspect

    from kerneltools import estimators

    obj = getattr(estimators, name)
    assert inspect.signature(obj).parameters["backend"].default is None
