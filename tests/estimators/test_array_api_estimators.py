"""KernelRidge and Nystroem on Array API arrays (issue 24), without a GPU.

Three ways in, each against the NumPy path on the same data:

* ``"strict"``: array-api-strict arrays on its non-default device
  (``device1``) with ``array_api_dispatch``: host memory, served through a
  zero-copy NumPy view, results back on ``device1``;
* ``"torch"``: CPU torch tensors, the same way;
* ``"device"``: array-api-strict's ``device1`` standing for a GPU
  (:func:`kerneltools._utils._array_api.simulated_device`): the device
  path runs in that namespace, where array-api-strict rejects NumPy arrays
  and arrays of another device, so a host array leaking into it fails here.

scikit-learn refuses ``array_api_dispatch`` unless ``SCIPY_ARRAY_API=1``;
its own SciPy support is not needed here (our path hands SciPy NumPy arrays
only, and a test would fail if it did not), so the fixture sets the variable
for scikit-learn's check only. The CuPy path runs on a GPU only.
"""

from __future__ import annotations

import importlib.util
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest
import sklearn
from sklearn.metrics.pairwise import pairwise_kernels
from threadpoolctl import threadpool_limits

from _array_api_helpers import WAYS, assert_close, gpu_available
from _array_api_helpers import dispatch as _dispatch  # noqa: F401 (autouse)
from _array_api_helpers import sklearn_array_api_checks
from _array_api_helpers import as_way as _as
from _array_api_helpers import assert_where as _assert_where
from _array_api_helpers import to_numpy as _np
from _array_api_helpers import way_context as _way

from kerneltools.estimators import KernelPCA, KernelRidge, Nystroem
from kerneltools.estimators.kernel_ridge import _warm as _krr_warm
from kerneltools._utils._array_api import simulated_device
from kerneltools.estimators._shared._xp_kernels import DEVICE_KERNELS, kernel_block
from kerneltools.kernels import PAIRWISE_KERNELS
from kerneltools.linalg import conjugate_gradient

xps = pytest.importorskip("array_api_strict")
torch = pytest.importorskip("torch")
from sklearn.externals import array_api_compat as compat  # noqa: E402

DEVICE1 = xps.Device("device1")
SOLVERS = ["cholesky", "cg", "falkon"]
KRR = {"alpha": 0.1, "kernel": "rbf", "gamma": 0.5, "n_components": 20, "tol": 1e-10,
       "random_state": 0}
NYS = {"kernel": "rbf", "gamma": 0.5, "n_components": 20, "random_state": 0}
#: Agreement with the NumPy path: the same arithmetic on the host views; the
#: device path sums in other orders (and CG stops within tol of the solution).
RTOL = {np.float32: 2e-4, np.float64: 1e-8}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = np.stack([np.sin(X[:, 0]), np.cos(X[:, 1])], axis=1) + 0.05 * rng.normal(size=(60, 2))
    return X, y


def _close(got, ref, dtype):
    assert_close(got, ref, RTOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("way", WAYS)
def test_kernel_ridge_predicts_as_numpy_in_the_inputs_namespace(data, way, dtype):
    X, y = (a.astype(dtype) for a in data)
    Xa, ya = _as(way, X), _as(way, y[:, 0])
    for solver in SOLVERS:
        ref = KernelRidge(solver=solver, **KRR).fit(X, y[:, 0])
        with _way(way):
            est = KernelRidge(solver=solver, **KRR).fit(Xa, ya)
            pred = est.predict(Xa[:25, :])
        assert est.solver_ == solver
        _assert_where(pred, Xa, dtype)
        # fitted attributes: in X's namespace, on its device, in its dtype
        for name in ("dual_coef_", "X_fit_"):
            _assert_where(getattr(est, name), Xa, dtype)
            assert getattr(est, name).shape == getattr(ref, name).shape
        _close(pred, ref.predict(X[:25]), dtype)


@pytest.mark.parametrize("way", WAYS)
def test_kernel_ridge_weights_and_targets_follow_x(data, way):
    """y and sample_weight in another namespace are moved where X is
    (scikit-learn's rule); per-target alphas and a zero weight."""
    X, y = data
    w = np.linspace(0.0, 2.0, len(X))  # the first point has weight 0
    kw = dict(KRR, alpha=[0.1, 0.3])
    for solver in ("cg", "falkon"):
        ref = KernelRidge(solver=solver, **kw).fit(X, y, sample_weight=w)
        with _way(way):
            Xa = _as(way, X)
            est = KernelRidge(solver=solver, **kw).fit(Xa, torch.asarray(y),
                                                       sample_weight=w.tolist())
            pred = est.predict(Xa)
        _assert_where(pred, Xa, np.float64)
        _close(pred, ref.predict(X), np.float64)


def _count_crossings(monkeypatch):
    """A counter of the calls to Space.host and Space.put (host <-> device
    copies on a device), installed with ``monkeypatch``."""
    from kerneltools._utils._array_api import Space

    counts = {"host": 0, "put": 0}
    for name in counts:
        original = getattr(Space, name)

        def counted(self, *args, _name=name, _original=original, **kwargs):
            counts[_name] += 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(Space, name, counted)
    return counts


def test_kernel_ridge_cg_on_a_device_copies_per_fit_not_per_iteration(data,
                                                                      monkeypatch):
    """The device CG works in the device's namespace throughout: its copies
    between host and device (landmark-sized, per fit) are as many for a fit
    of many iterations as for one of few, and its coefficients are the NumPy
    path's."""
    X, y = data
    counts = _count_crossings(monkeypatch)
    seen = {}
    for tol in (1e-2, 1e-10):
        kw = dict(KRR, tol=tol, n_components=5)  # a weak preconditioner: iterations
        ref = KernelRidge(solver="cg", **kw).fit(X, y[:, 0])
        counts.update(host=0, put=0)
        with _way("device"):
            est = KernelRidge(solver="cg", **kw).fit(_as("device", X),
                                                     _as("device", y[:, 0]))
        seen[tol] = (est.n_iter_, dict(counts))
        _close(est.dual_coef_, ref.dual_coef_, np.float64)
    (few, copies_few), (many, copies_many) = seen[1e-2], seen[1e-10]
    assert many > few + 5, seen  # the tight fit iterates more
    assert copies_many == copies_few, seen


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("way", WAYS)
def test_nystroem_transforms_as_numpy_in_the_inputs_namespace(data, way, dtype):
    X = data[0].astype(dtype)
    Xa = _as(way, X)
    for landmarks in ("uniform", "kmeans++"):
        ref = Nystroem(landmarks=landmarks, **NYS).fit(X)
        with _way(way):
            est = Nystroem(landmarks=landmarks, **NYS).fit(Xa)
            F = est.transform(Xa[:30, :])
        _assert_where(F, Xa, dtype)
        for name in ("components_", "normalization_"):
            _assert_where(getattr(est, name), Xa, dtype)
        _assert_where(est.component_indices_, Xa, ref.component_indices_.dtype)
        np.testing.assert_array_equal(_np(est.component_indices_), ref.component_indices_)
        _close(F, ref.transform(X[:30]), dtype)


@pytest.mark.parametrize("way", WAYS)
def test_kernel_pca_transforms_in_the_inputs_namespace(data, way):
    """KernelPCA fits on NumPy; its transform takes X where it is."""
    X = data[0]
    for solver in ("dense", "nystroem"):
        kpca = KernelPCA(4, kernel="rbf", gamma=0.5, eigen_solver=solver, n_landmarks=20,
                         random_state=0).fit(X)
        ref = kpca.transform(X[:30])
        with _way(way):
            Xa = _as(way, X[:30])
            out = kpca.transform(Xa)
            again = kpca.transform(Xa)  # the device copies, reused
        _assert_where(out, Xa, np.float64)
        _close(out, ref, np.float64)
        _close(again, ref, np.float64)
    kpca.fit(X[:40] * 1.5)  # a refit: new fitted arrays, no stale device copies
    new = kpca.transform(X[:30])
    assert np.abs(new - ref).max() > 0.1
    with _way(way):
        _close(kpca.transform(_as(way, X[:30])), new, np.float64)


def test_host_data_with_backend_cuda_is_copied_once_and_stays_numpy(data):
    """backend="cuda" on NumPy data: the fit runs on the device (simulated);
    outputs and attributes are NumPy; device copies are kept, not pickled."""
    X, y = data
    ref = KernelRidge(solver="falkon", **KRR).fit(X, y)
    nref = Nystroem(**NYS).fit(X)
    with simulated_device(xps, DEVICE1):
        est = KernelRidge(solver="falkon", backend="cuda", **KRR).fit(X, y)
        nys = Nystroem(backend="cuda", **NYS).fit(X)
        copies = est._device_copies
        assert all(compat.device(a) == DEVICE1 for a in copies.values())
        pred, F = est.predict(X), nys.transform(X)
        assert est._device_copies is copies  # reused, not copied again
        assert type(pred) is np.ndarray and type(est.dual_coef_) is np.ndarray
        assert type(F) is np.ndarray and type(nys.components_) is np.ndarray
        _close(pred, ref.predict(X), np.float64)
        _close(F, nref.transform(X), np.float64)
        again = pickle.loads(pickle.dumps(est))
        assert "_device_copies" not in vars(again)
        _close(again.predict(X), ref.predict(X), np.float64)


def test_without_dispatch_torch_tensors_become_numpy(data):
    """scikit-learn's convention: without array_api_dispatch, np.asarray."""
    X, y = data
    with sklearn.config_context(array_api_dispatch=False):
        est = KernelRidge(**KRR).fit(torch.asarray(X), torch.asarray(y))
        pred = est.predict(torch.asarray(X))
        F = Nystroem(**NYS).fit(torch.asarray(X)).transform(torch.asarray(X))
    assert type(pred) is np.ndarray and type(est.X_fit_) is np.ndarray
    assert type(F) is np.ndarray
    _close(pred, KernelRidge(**KRR).fit(X, y).predict(X), np.float64)


@pytest.mark.parametrize("way", ["strict", "device"])
def test_bad_input_names_the_argument(data, way):
    X, y = data
    with _way(way):
        Xa = _as(way, X)
        est = KernelRidge(solver="falkon", **KRR).fit(Xa, _as(way, y))
        nys = Nystroem(**NYS).fit(Xa)
        for model, method in ((est, "predict"), (nys, "transform")):
            name = type(model).__name__
            with pytest.raises(ValueError, match=rf"{name}\.{method}\(\) must use the "
                               r"same namespace.*fit \(array_api_strict\) and "
                               rf"{method} \(numpy\) differ.*'X'"):
                getattr(model, method)(X)
            with pytest.raises(ValueError, match=r"Devices used during fit .*device1.* "
                               r"differ"):
                getattr(model, method)(xps.asarray(X))
            with pytest.raises(ValueError, match="X has 2 features, but .* is expecting 3"):
                getattr(model, method)(Xa[:, :2])
    if way == "device":  # our own validation on the device
        with simulated_device(xps, DEVICE1):
            bad = X.copy()
            bad[3, 1] = np.nan
            with pytest.raises(ValueError, match="Input X contains NaN"):
                KernelRidge(**KRR).fit(_as(way, bad), _as(way, y))
            with pytest.raises(ValueError, match=r"inconsistent numbers of samples: "
                               r"\[60, 59\]"):
                KernelRidge(**KRR).fit(Xa, _as(way, y[:59]))
            with pytest.raises(ValueError, match="Expected 2D array for 'X'"):
                Nystroem(**NYS).fit(_as(way, X[:, 0]))


@pytest.mark.parametrize("way", ["strict", "device"])
@pytest.mark.parametrize("est", [KernelRidge(kernel="rbf", solver="cg", n_components=10),
                                 KernelRidge(kernel="rbf", solver="falkon", n_components=10),
                                 Nystroem(n_components=10)], ids=["cg", "falkon", "nystroem"])
def test_scikit_learns_array_api_checks(est, way):
    """scikit-learn's own checks of namespaces, devices, dtypes and values,
    with array-api-strict on device1 (and mixed with torch for y)."""
    sklearn_array_api_checks(est, way)


def test_kernel_blocks_on_a_device_are_scikit_learns():
    rng = np.random.default_rng(1)
    A, B = rng.uniform(size=(9, 4)), rng.uniform(size=(6, 4))
    A[2] = 0  # a zero row: cosine and chi2's 0/0 terms
    assert DEVICE_KERNELS == set(PAIRWISE_KERNELS)
    for name in sorted(DEVICE_KERNELS):
        for params in ({}, {"gamma": 0.3, "degree": 2, "coef0": 0.5}):
            sk = {k: v for k, v in params.items() if k in PAIRWISE_KERNELS[name]}
            ref = pairwise_kernels(A, B, metric=name, **sk)
            got = kernel_block(name, params, xps.asarray(A, device=DEVICE1),
                               xps.asarray(B, device=DEVICE1), xps)
            assert got.device == DEVICE1
            np.testing.assert_allclose(_np(got), ref, rtol=1e-12, atol=1e-14,
                                       err_msg=f"{name} {params}")
            g32 = kernel_block(name, params, A.astype(np.float32), B.astype(np.float32), np)
            assert g32.dtype == np.float32
            np.testing.assert_allclose(g32, ref, rtol=1e-6, atol=1e-6)


def test_r2_on_the_device_is_scikit_learns():
    """KernelRidge.score of CuPy arrays computes R^2 where they are."""
    from sklearn.metrics import r2_score

    from kerneltools._utils._array_api import r2_score_xp

    rng = np.random.default_rng(3)
    for shape in [(20,), (20, 3)]:
        y = rng.normal(size=shape)
        p = y + 0.3 * rng.normal(size=shape)
        w = rng.uniform(size=20)
        yd, pd = xps.asarray(y, device=DEVICE1), xps.asarray(p, device=DEVICE1)
        assert r2_score_xp(yd, pd) == pytest.approx(r2_score(y, p), rel=1e-12)
        assert r2_score_xp(yd, pd, w) == pytest.approx(r2_score(y, p, sample_weight=w),
                                                       rel=1e-12)
    flat = xps.ones(5, dtype=xps.float64)
    assert r2_score_xp(flat, flat) == 1.0 and r2_score_xp(flat, flat + 1) == 0.0


def test_conjugate_gradient_in_another_namespace_matches_numpys():
    rng = np.random.default_rng(2)
    G = rng.normal(size=(40, 40))
    A = G @ G.T + 40 * np.eye(40)
    B = rng.normal(size=(40, 3))
    Ad = xps.asarray(A, device=DEVICE1)
    ref, it_ref = conjugate_gradient(A, B, tol=1e-12)
    got, it = conjugate_gradient(lambda V: Ad @ V, xps.asarray(B, device=DEVICE1),
                                 tol=1e-12, xp=xps)
    assert got.device == DEVICE1 and it == it_ref
    np.testing.assert_allclose(_np(got), ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ref, np.linalg.solve(A, B), rtol=1e-9)
    with pytest.raises(TypeError, match="'A' must be a callable"):
        conjugate_gradient(Ad, xps.asarray(B, device=DEVICE1), xp=xps)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU and cupy")
def test_cupy_arrays_stay_on_the_gpu(data):
    import cupy

    X, y = data
    Xc, yc = cupy.asarray(X), cupy.asarray(y)
    with sklearn.config_context(array_api_dispatch=False):  # CuPy is always served
        for solver in SOLVERS:
            ref = KernelRidge(solver=solver, **KRR).fit(X, y).predict(X)
            est = KernelRidge(solver=solver, **KRR).fit(Xc, yc)
            pred = est.predict(Xc)
            assert isinstance(pred, cupy.ndarray) and isinstance(est.dual_coef_, cupy.ndarray)
            np.testing.assert_allclose(pred.get(), ref, rtol=1e-7, atol=1e-7)
            assert est.score(Xc, yc) == pytest.approx(
                KernelRidge(solver=solver, **KRR).fit(X, y).score(X, y), rel=1e-6)
        F = Nystroem(**NYS).fit(Xc).transform(Xc)
        assert isinstance(F, cupy.ndarray)
        np.testing.assert_allclose(F.get(), Nystroem(**NYS).fit(X).transform(X),
                                   rtol=1e-7, atol=1e-7)
    Xt = torch.asarray(X, device="cuda")  # torch CUDA tensors, through DLPack
    pred = KernelRidge(solver="falkon", **KRR).fit(Xt, torch.asarray(y, device="cuda"))
    out = pred.predict(Xt)
    assert isinstance(out, torch.Tensor) and out.device.type == "cuda"


def test_gpu_benchmark_runs_in_cpu_mode(tmp_path):
    """asv_bench/estimators_gpu.py (run by asv_bench/gpu_session.sh) at a
    tiny size on the CPU, so that it cannot rot between GPU sessions."""
    path = Path(__file__).resolve().parents[2] / "asv_bench" / "estimators_gpu.py"
    spec = importlib.util.spec_from_file_location("estimators_gpu", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["estimators_gpu"] = module
    spec.loader.exec_module(module)
    out = tmp_path / "est.json"
    with sklearn.config_context(array_api_dispatch=False):
        rows = module.main(["--cpu", "--sizes", "400", "--repeat", "1", "--landmarks", "20",
                            "--gp-sizes", "200", "--gp-exact", "100", "--gp-steps", "1",
                            "--out", str(out)])
    assert out.exists() and rows
    assert {r["estimator"] for r in rows} == {"KernelRidge(falkon)", "Nystroem",
                                              "NearestNeighbors(D=3)",
                                              "NearestNeighbors(D=64)",
                                              "GP(iterative)", "GP(cholesky)"}
    assert {r["d"] for r in rows} == {8, 3, 64}
    assert all(r["time_s"] > 0 for r in rows)
