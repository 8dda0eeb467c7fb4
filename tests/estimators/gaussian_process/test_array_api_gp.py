"""GaussianProcessRegressor on Array API arrays (issue 24), without a GPU.

The three ways in of ``test_array_api_estimators.py`` (its helpers and
fixture, imported): array-api-strict on ``device1`` and CPU torch tensors
under ``array_api_dispatch`` (zero-copy NumPy views, the NumPy path), and
array-api-strict's ``device1`` standing for a GPU (``"device"``: the device
path in that namespace, which rejects NumPy arrays and arrays of another
device, so a host array leaking into it fails here). Every result is
compared with the NumPy path's on the same data; the NumPy path itself is
tested against scikit-learn in ``test_gaussian_process.py``.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import sklearn
from sklearn.gaussian_process.kernels import RBF, Matern, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from _array_api_helpers import gpu_available as _gpu_status
from _array_api_helpers import WAYS
from _array_api_helpers import as_way as _as
from _array_api_helpers import assert_where as _assert_where
from _array_api_helpers import dispatch as _dispatch  # noqa: F401 (autouse)
from _array_api_helpers import sklearn_array_api_checks
from _array_api_helpers import to_numpy as _np
from _array_api_helpers import way_context as _way

xps = pytest.importorskip("array_api_strict")
torch = pytest.importorskip("torch")
from sklearn.externals import array_api_compat as compat  # noqa: E402

DEVICE1 = xps.Device("device1")

from kerneltools.estimators import GaussianProcessRegressor
from kerneltools.estimators.gaussian_process import _device as device
from kerneltools._utils._array_api import Space, simulated_device

#: Fixed hyperparameters near the data's optimum (no optimizer: one solve).
KERNEL = C(0.8) * RBF([0.9, 1.2, 1.5]) + WhiteKernel(0.05)
#: The iterative solver's estimates are deterministic (fixed probes and
#: landmarks), the device path sums in other orders, and CG stops at tol:
#: agreement to well below the solver's own error.
RTOL = 1e-6


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = np.stack([np.sin(X[:, 0]), np.cos(X[:, 1])], axis=1)
    y += 0.1 * rng.normal(size=(120, 2))
    return X, y


@pytest.fixture(scope="module")
def numpy_fit(data):
    """``fit(solver, dtype, hyper)``: the NumPy path's model, fitted once per
    module (each way in compares with the same one). ``hyper``: the
    hyperparameter fit of :func:`test_hyperparameter_fit_equals_numpys`."""
    fits = {}

    def fit(solver, dtype=np.float64, hyper=False):
        key = (solver, np.dtype(dtype).name, hyper)
        if key not in fits:
            X, y = (a.astype(dtype) for a in data)
            est = _gp(solver, **HYPER) if hyper else _gp(solver)
            est._stall_gain = 1.0  # a few evaluations only (the same on both paths)
            fits[key] = est.fit(X, y if hyper else y[:, 0])
        return fits[key]

    return fit


#: The hyperparameter fit: L-BFGS-B, normalised multi-target y.
HYPER = {"optimizer": "fmin_l_bfgs_b", "normalize_y": True,
         "kernel": C(1.0) * RBF(1.0) + WhiteKernel(0.1)}


def _close(got, ref, rtol=RTOL):
    ref = np.asarray(ref)
    np.testing.assert_allclose(_np(got), ref, rtol=rtol, atol=rtol * np.abs(ref).max())


def _gp(solver, **kw):
    params = {"kernel": KERNEL, "optimizer": None, "solver": solver, "n_components": 30,
              "tol": 1e-8, "random_state": 0, **kw}
    return GaussianProcessRegressor(**params)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("way", WAYS)
def test_predictions_and_attributes_in_the_inputs_namespace(data, numpy_fit, way,
                                                            dtype):
    """Both solvers: mean, std, cov, sample_y and the fitted arrays equal the
    NumPy path's, in X's namespace and on its device (float64, as the GP
    computes; float32 inputs are converted as on the NumPy path)."""
    X, y = (a.astype(dtype) for a in data)
    Xa, ya = _as(way, X), _as(way, y[:, 0])
    Xq = Xa[:40, :]
    for solver in ("cholesky", "iterative"):
        ref = numpy_fit(solver, dtype)
        with _way(way):
            est = _gp(solver).fit(Xa, ya)
            mean, std = est.predict(Xq, return_std=True)
            _, cov = est.predict(Xq[:10, :], return_cov=True)
            draws = est.sample_y(Xq[:10, :], n_samples=3)
        assert est.solver_ == solver
        if solver == "iterative":  # the device path ran where it serves
            assert isinstance(est._iter, device.DeviceGP) is (way == "device")
        rmean, rstd = ref.predict(X[:40], return_std=True)
        for got, want in ((mean, rmean), (std, rstd),
                          (cov, ref.predict(X[:10], return_cov=True)[1]),
                          (draws, ref.sample_y(X[:10], n_samples=3))):
            _assert_where(got, Xa, np.float64)
            assert got.shape == want.shape
            _close(got, want, 1e-4 if solver == "iterative" and got is std else RTOL)
        for name in ("X_train_", "y_train_", "alpha_"):
            _assert_where(getattr(est, name), Xa, np.float64)
            _close(getattr(est, name), getattr(ref, name))
        if solver == "cholesky":
            _assert_where(est.L_, Xa, np.float64)
            _close(est.L_, ref.L_)
        assert est.log_marginal_likelihood_value_ == pytest.approx(
            ref.log_marginal_likelihood_value_, rel=RTOL)


@pytest.mark.parametrize("way", WAYS)
def test_hyperparameter_fit_equals_numpys(data, numpy_fit, way):
    """A few L-BFGS steps on each solver's objective (the iterative one with
    its device CG, log-determinant, gradient and control variate), multi-target
    y and normalize_y: the same hyperparameters and predictions."""
    X, y = data
    for solver in ("cholesky", "iterative"):
        ref = numpy_fit(solver, hyper=True)
        with _way(way):
            est = _gp(solver, **HYPER)
            est._stall_gain = 1.0
            est.fit(_as(way, X), _as(way, y))
            mean = est.predict(_as(way, X[:30]))
            theta = ref.kernel_.theta
            lml, grad = est.log_marginal_likelihood(theta, eval_gradient=True)
        np.testing.assert_allclose(est.kernel_.theta, ref.kernel_.theta, rtol=1e-5)
        _assert_where(mean, _as(way, X), np.float64)
        _close(mean, ref.predict(X[:30]), 1e-5)
        rlml, rgrad = ref.log_marginal_likelihood(ref.kernel_.theta, eval_gradient=True)
        assert lml == pytest.approx(rlml, rel=1e-6)
        np.testing.assert_allclose(grad, rgrad, rtol=1e-5,
                                   atol=1e-6 * np.abs(rgrad).max())


def test_device_gradient_and_control_variate_equal_the_hosts(data, monkeypatch):
    """The device solver's pieces against the host's at one theta (Matern 2.5
    with one length scale per feature, an alpha per point): the gradient of
    the log marginal likelihood, control variate included, the solve and the
    predictive std and covariance; blocks of rows, broadcasts and query
    batches made small, so that every blocked loop runs several blocks."""
    from kerneltools.estimators._shared import _xp_kernels
    from kerneltools.estimators.gaussian_process import _control
    from kerneltools.estimators.gaussian_process import _iterative as it
    from kerneltools.kernels import make_kernel

    monkeypatch.setattr(device, "_ROWS", 32)
    monkeypatch.setattr(_control, "_ROWS", 32)
    monkeypatch.setattr(_xp_kernels, "_BROADCAST_ENTRIES", 500)
    monkeypatch.setattr(it, "_BATCH", 16)
    X, y = data
    kernel = C(1.3) * Matern([0.8, 1.1, 1.4], nu=2.5) + WhiteKernel(0.03)
    alpha = np.linspace(1e-3, 2e-3, len(X))
    host = _gp("iterative", kernel=kernel, alpha=alpha)
    host._X_fit, host._y_fit, host._alpha, host._landmarks = X, y, alpha, None
    ref = it.IterativeGP(host, make_kernel(kernel), kernel)
    with simulated_device(xps, DEVICE1):
        sp = Space(xps, DEVICE1, "simulated")
        dev = _gp("iterative", kernel=kernel, alpha=alpha)
        dev._X_fit, dev._y_fit, dev._space = _as("device", X), _as("device", y), sp
        dev._alpha, dev._landmarks = alpha, None
        got = device.DeviceGP(dev, make_kernel(kernel), kernel, sp)
        lml, grad = got.lml(True)
        sol, _ = got.solve(_as("device", y))
        dev._alpha_fit = sol
        k = make_kernel(kernel)
        Xq = _as("device", X[:40])
        _, var, _ = got.predict(Xq, k, True, False)
        _, _, cov = got.predict(Xq, k, False, True)
    rlml, rgrad = ref.lml(True)
    assert lml == pytest.approx(rlml, rel=1e-9)
    np.testing.assert_allclose(grad, rgrad, rtol=1e-7, atol=1e-9 * np.abs(rgrad).max())
    assert sol.device == DEVICE1
    host._alpha_fit = ref.solve(y)[0]
    _close(sol, host._alpha_fit, 1e-7)
    ref._dense_pays = lambda n_query: False  # the host's CG path, as the device's
    _close(var, ref.predict(X[:40], k, True, False)[1], 1e-7)
    _close(cov, ref.predict(X[:40], k, False, True)[2], 1e-6)  # CG to tol: first order


@pytest.mark.parametrize("way", ["strict", "device"])
def test_mixed_and_wrong_namespace_inputs(data, way):
    X, y = data
    with _way(way):
        Xa = _as(way, X)
        # y in another namespace follows X (scikit-learn's rule)
        est = _gp("iterative").fit(Xa, torch.asarray(y[:, 0]))
        _assert_where(est.alpha_, Xa, np.float64)
        for method in ("predict", "sample_y"):
            pattern = (rf"GaussianProcessRegressor\.{method}\(\) must use the same "
                       r"namespace.*fit \(array_api_strict\) "
                       rf"and {method} \(numpy\) differ.*'X'")
            with pytest.raises(ValueError, match=pattern):
                getattr(est, method)(X[:5])
            with pytest.raises(ValueError, match=r"Devices used during fit .*device1.* "
                               r"differ"):
                getattr(est, method)(xps.asarray(X[:5]))
        with pytest.raises(ValueError, match="X has 2 features, but .* is expecting 3"):
            est.predict(Xa[:, :2])
    if way == "device":  # our own validation on the device
        with simulated_device(xps, DEVICE1):
            bad = X.copy()
            bad[3, 1] = np.inf
            with pytest.raises(ValueError, match="Input X contains infinity"):
                _gp("iterative").fit(_as(way, bad), _as(way, y))
            with pytest.raises(ValueError, match=r"inconsistent numbers of samples"):
                _gp("iterative").fit(Xa, _as(way, y[:50]))


def test_kernels_the_device_cannot_evaluate_run_on_the_host(data):
    """A kernel without a stationary form (a sum of two RBFs): one copy to
    the host per call, results back on the device; pickling drops the
    device state and the model still predicts where it was fitted."""
    X, y = data
    kernel = C(0.5) * RBF(1.0) + C(0.3) * RBF(3.0) + WhiteKernel(0.05)
    assert not device.serves(kernel) and device.serves(KERNEL)
    ref = _gp("iterative", kernel=kernel).fit(X, y[:, 0])
    with simulated_device(xps, DEVICE1):
        Xa = _as("device", X)
        est = _gp("iterative", kernel=kernel).fit(Xa, _as("device", y[:, 0]))
        mean = est.predict(Xa[:20, :])
        _assert_where(mean, Xa, np.float64)
        _close(mean, ref.predict(X[:20]))
        fitted = _gp("iterative").fit(Xa, _as("device", y[:, 0]))
        again = pickle.loads(pickle.dumps(fitted))
        assert not {"_iter", "_space", "_device_arrays"} & set(vars(again))
        _close(again.predict(Xa[:20, :]), _np(fitted.predict(Xa[:20, :])))


def test_host_data_with_backend_cuda_stays_numpy(data, numpy_fit):
    """backend="cuda" on NumPy data: the iterative fit runs on the device
    (simulated), the outputs and attributes are NumPy."""
    X, y = data
    ref = numpy_fit("iterative")
    with simulated_device(xps, DEVICE1):
        est = _gp("iterative", backend="cuda").fit(X, y[:, 0])
        assert compat.device(est._X_fit) == DEVICE1
        mean, std = est.predict(X[:20], return_std=True)
    assert type(mean) is np.ndarray and type(est.alpha_) is np.ndarray
    _close(mean, ref.predict(X[:20]))
    _close(std, ref.predict(X[:20], return_std=True)[1], 1e-4)


def test_prior_and_score_in_the_inputs_namespace(data, numpy_fit):
    X, y = data
    Xt = torch.asarray(X[:10])
    mean, std = GaussianProcessRegressor().predict(Xt, return_std=True)
    ref = GaussianProcessRegressor().predict(X[:10], return_std=True)
    assert isinstance(mean, torch.Tensor) and isinstance(std, torch.Tensor)
    _close(std, ref[1])
    est = _gp("cholesky").fit(torch.asarray(X), torch.asarray(y[:, 0]))
    assert est.score(torch.asarray(X), torch.asarray(y[:, 0])) == pytest.approx(
        numpy_fit("cholesky").score(X, y[:, 0]), rel=1e-10)
    # without dispatch: np.asarray, as scikit-learn
    with sklearn.config_context(array_api_dispatch=False):
        est = _gp("cholesky").fit(torch.asarray(X), torch.asarray(y[:, 0]))
        assert type(est.predict(torch.asarray(X[:5]))) is np.ndarray


@pytest.mark.parametrize(("way", "solver"),
                         [("strict", "cholesky"), ("device", "iterative")])
def test_scikit_learns_array_api_checks(way, solver):
    """scikit-learn's own checks of namespaces, devices and values of every
    array attribute and output, with array-api-strict on device1 (and mixed
    with torch for y)."""
    est = GaussianProcessRegressor(solver=solver, n_components=20, optimizer=None)
    sklearn_array_api_checks(est, way)


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu_status(), reason="needs a CUDA GPU and cupy")
def test_cupy_arrays_stay_on_the_gpu(data, numpy_fit):
    """CuPy arrays (served without array_api_dispatch too) and torch CUDA
    tensors: both solvers' outputs and fitted arrays on the GPU, equal to
    the NumPy path's."""
    import cupy

    X, y = data
    Xc, yc = cupy.asarray(X), cupy.asarray(y[:, 0])
    with sklearn.config_context(array_api_dispatch=False):
        for solver in ("cholesky", "iterative"):
            ref = numpy_fit(solver)
            est = _gp(solver).fit(Xc, yc)
            mean, std = est.predict(Xc[:40], return_std=True)
            assert isinstance(mean, cupy.ndarray) and isinstance(std, cupy.ndarray)
            assert isinstance(est.alpha_, cupy.ndarray)
            rmean, rstd = ref.predict(X[:40], return_std=True)
            np.testing.assert_allclose(mean.get(), rmean, rtol=1e-6, atol=1e-6)
            np.testing.assert_allclose(std.get(), rstd, rtol=1e-4, atol=1e-6)
            assert est.score(Xc, yc) == pytest.approx(ref.score(X, y[:, 0]), rel=1e-6)
    Xt = torch.asarray(X, device="cuda")
    est = _gp("iterative").fit(Xt, torch.asarray(y[:, 0], device="cuda"))
    out = est.predict(Xt[:20])
    assert isinstance(out, torch.Tensor) and out.device.type == "cuda"
    ref = numpy_fit("iterative").predict(X[:20])
    np.testing.assert_allclose(out.cpu().numpy(), ref, rtol=1e-6, atol=1e-6)


def test_pretraining_stages_on_the_device(data, monkeypatch):
    """The iterative optimizer alone (no exact polish) after pretraining in
    stages, 120 points <- 60 (iterative, on the device) <- 15 (exact, on the
    host): the NumPy path's hyperparameters."""
    from kerneltools.estimators.gaussian_process import _fit as _gp_fit

    monkeypatch.setattr(_gp_fit, "POLISH_MAX_SAMPLES", 0)
    monkeypatch.setattr(_gp_fit, "PRETRAIN_EXACT_MAX", 40)
    X, y = data
    kw = {**HYPER, "n_pretrain": 60}
    ref = _gp("iterative", **kw).fit(X, y[:, 0])
    with simulated_device(xps, DEVICE1):
        est = _gp("iterative", **kw).fit(_as("device", X), _as("device", y[:, 0]))
    assert est._pretrained and ref._pretrained
    np.testing.assert_allclose(est.kernel_.theta, ref.kernel_.theta, rtol=1e-6)
    assert est.log_marginal_likelihood_value_ == pytest.approx(
        ref.log_marginal_likelihood_value_, rel=1e-8)
