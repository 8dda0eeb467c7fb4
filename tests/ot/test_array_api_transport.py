"""Sinkhorn divergences, potentials, plans and SinkhornTransport on Array API
arrays (issue 24), without a GPU.

The three ways in of ``tests/estimators/test_array_api_estimators.py``, each against
the NumPy path on the same data:

* ``"strict"``: array-api-strict arrays on ``device1`` with
  ``array_api_dispatch``: host memory, solved on zero-copy NumPy views,
  outputs back on ``device1``;
* ``"torch"``: CPU torch tensors, the same way;
* ``"device"``: array-api-strict's ``device1`` standing for a GPU
  (:func:`kerneltools._utils._array_api.simulated_device`): the problem's
  arrays, the potentials and every softmin's input and output are
  array-api-strict arrays there, which reject NumPy arrays and arrays of
  another device, so a host array leaking into the loop fails here.

The device way computes the NumPy path's arithmetic in the same order, so
the results agree to rounding; the host ways are the NumPy path itself.
Clouds, schedules and sizes are those of ``tests/ot/test_optimal_transport.py``
(d = 2 or 3, p = 2, scaling 0.5): no new kernel to compile.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import sklearn
from _array_api_helpers import WAYS, assert_close, gpu_available, spy_softmins
from _array_api_helpers import as_way as _as
from _array_api_helpers import assert_where as _assert_where
from _array_api_helpers import way_context as _way
from sklearn.utils.estimator_checks import (
    check_array_api_input,
    check_array_api_same_namespace,
)

from kerneltools._utils._array_api import simulated_device
from kerneltools.estimators.optimal_transport import SinkhornTransport
from kerneltools.ot import sinkhorn_divergence, sinkhorn_potentials, transport_plan

xps = pytest.importorskip("array_api_strict")
torch = pytest.importorskip("torch")

DEVICE1 = xps.Device("device1")
DTYPES = pytest.mark.parametrize("dtype", [np.float32, np.float64],
                                 ids=["float32", "float64"])
#: Agreement with the NumPy path (the device way sums in the same orders;
#: float32 leaves room for another order of the float32 reductions).
RTOL = {np.float32: 1e-5, np.float64: 1e-12}


@pytest.fixture(autouse=True)
def _dispatch(monkeypatch):
    """array_api_dispatch on (scikit-learn asks for SCIPY_ARRAY_API=1)."""
    monkeypatch.setenv("SCIPY_ARRAY_API", "1")
    with sklearn.config_context(array_api_dispatch=True):
        yield


def clouds(n=80, m=60, d=2, seed=0, dtype=np.float64):
    """The weighted clouds of tests/ot/test_optimal_transport.py."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, d))
    y = 0.8 * rng.random((m, d)) + 0.3
    a, b = rng.random(n) + 0.5, rng.random(m) + 0.5
    return tuple(v.astype(dtype) for v in (x, y, a / a.sum(), b / b.sum()))


def _close(got, ref, dtype):
    assert_close(got, ref, RTOL[dtype])


@pytest.fixture
def softmin_inputs(monkeypatch):
    """The ``h`` of every softmin of the solves (the potentials' updates)."""
    return spy_softmins(monkeypatch)


def _on_device1(arrays):
    """Every array is array-api-strict's, on device1 (none leaked to NumPy)."""
    assert arrays
    assert all(isinstance(h, xps._array_object.Array) and h.device == DEVICE1
               for h in arrays)


@DTYPES
@pytest.mark.parametrize("way", WAYS)
def test_divergence_and_gradients_as_numpy_in_the_inputs_namespace(way, dtype,
                                                                    softmin_inputs):
    x, y, a, b = clouds(dtype=dtype)
    for reach in (None, 0.5):  # balanced and unbalanced
        ref, rx, ry = sinkhorn_divergence(x, y, a, b, reach=reach, return_grad=True)
        del softmin_inputs[:]
        with _way(way):
            X, Y = _as(way, x), _as(way, y)
            value, gx, gy = sinkhorn_divergence(X, Y, _as(way, a), _as(way, b),
                                                reach=reach, return_grad=True)
        if way == "device":
            _on_device1(softmin_inputs)
        assert type(value) is float
        _close(value, ref, dtype)
        for got, want, like in ((gx, rx, X), (gy, ry, Y)):
            _assert_where(got, like, dtype)
            _close(got, want, dtype)


@pytest.mark.parametrize("way", WAYS)
def test_potentials_and_plan_as_numpy(way, softmin_inputs):
    x, y, a, b = clouds(n=50, m=40, seed=3)
    f0, g0 = sinkhorn_potentials(x, y, a, b, tol=1e-9)
    rows = transport_plan(x, y, a, b, potentials=(f0, g0)).sum(axis=1)[:, 0]
    np.testing.assert_allclose(rows, a, rtol=1e-7)  # the plan's marginal
    del softmin_inputs[:]
    with _way(way):
        X = _as(way, x)
        f, g = sinkhorn_potentials(X, _as(way, y), _as(way, a), _as(way, b), tol=1e-9)
        P = transport_plan(X, _as(way, y), _as(way, a), _as(way, b), potentials=(f, g))
        got = P.sum(axis=1)[:, 0]
    if way == "device":
        _on_device1(softmin_inputs)
    for pot, want in ((f, f0), (g, g0)):
        _assert_where(pot, X, np.float64)
        _close(pot, want, np.float64)
    _close(got, rows, np.float64)


@DTYPES
@pytest.mark.parametrize("way", WAYS)
def test_sinkhorn_transport_as_numpy_in_the_inputs_namespace(way, dtype):
    x, y, _, _ = clouds(n=60, m=50, dtype=dtype)
    ref = SinkhornTransport(blur=0.2).fit(x, Xt=y)
    with _way(way):
        X, Y = _as(way, x), _as(way, y)
        est = SinkhornTransport(blur=0.2).fit(X, Xt=Y)
        moved, back = est.transform(X[:20, :]), est.inverse_transform(Y[:20, :])
        marginal = est.coupling_.sum(axis=0)[:, 0]
    assert est.n_iter_ == ref.n_iter_ and est.converged_
    assert est.marginal_error_ == pytest.approx(ref.marginal_error_, rel=1e-3)
    for name in ("xs_", "xt_", "mu_s_", "mu_t_", "potential_s_", "potential_t_"):
        _assert_where(getattr(est, name), X, dtype)
        _close(getattr(est, name), getattr(ref, name), dtype)
    _assert_where(moved, X, dtype)
    _assert_where(back, X, dtype)
    _close(moved, ref.transform(x[:20]), dtype)
    _close(back, ref.inverse_transform(y[:20]), dtype)
    _close(marginal, ref.coupling_.sum(axis=0)[:, 0], dtype)


@DTYPES
def test_multiscale_on_the_device_as_numpy(dtype, softmin_inputs):
    """The cells and blocks on the host, every softmin on the device; the
    same value, gradients and potentials as the NumPy multiscale solve."""
    rng = np.random.default_rng(0)  # the cube clouds of test_optimal_transport
    x = rng.random((120, 3)).astype(dtype)
    y = (0.8 * rng.random((100, 3)) + 0.1).astype(dtype)
    kw = dict(blur=0.05, multiscale=True, cluster_scale=0.25, return_grad=True)
    ref, rx, ry = sinkhorn_divergence(x, y, **kw)
    fit_ref = SinkhornTransport(blur=0.1, multiscale=True, cluster_scale=0.25).fit(x, Xt=y)
    del softmin_inputs[:]
    with _way("device"):
        X, Y = _as("device", x), _as("device", y)
        value, gx, gy = sinkhorn_divergence(X, Y, **kw)
        est = SinkhornTransport(blur=0.1, multiscale=True, cluster_scale=0.25).fit(X, Xt=Y)
        moved = est.transform(X)
    _on_device1(softmin_inputs)
    _close(value, ref, dtype)
    for got, want in ((gx, rx), (gy, ry)):
        _assert_where(got, X, dtype)
        _close(got, want, dtype)
    assert est.n_iter_ == fit_ref.n_iter_
    _close(est.potential_s_, fit_ref.potential_s_, dtype)
    _close(moved, fit_ref.transform(x), dtype)


def test_transform_in_another_namespace_or_device_is_refused():
    x, y, _, _ = clouds(n=40, m=30)
    for way in ("strict", "device"):
        with _way(way):
            est = SinkhornTransport(blur=0.2).fit(_as(way, x), Xt=_as(way, y))
            for method in ("transform", "inverse_transform"):
                with pytest.raises(ValueError, match=rf"SinkhornTransport\.{method}\(\) "
                                   r"must use the same namespace.*fit \(array_api_strict\)"
                                   rf" and {method} \(numpy\) differ.*'X'"):
                    getattr(est, method)(x)
                with pytest.raises(ValueError, match=r"Devices used during fit .*device1"
                                   r".* differ"):
                    getattr(est, method)(xps.asarray(x))
    numpy_fit = SinkhornTransport(blur=0.2).fit(x, Xt=y)
    with pytest.raises(ValueError, match=r"fit \(numpy\) and transform \(array_api_strict\)"):
        numpy_fit.transform(_as("strict", x))


def test_bad_device_input_names_the_argument():
    """The device's own checks say what the host's say."""
    x, y, a, b = clouds(n=40, m=30)
    bad = x.copy()
    bad[3, 1] = np.nan
    cases = [((bad, y, None, None), ValueError, "'x' contains NaN or infinity"),
             ((x[:, 0], y, None, None), ValueError, "'x' must be a 2-D array"),
             ((x, y[:, :1], None, None), ValueError, "the same number of features"),
             ((x, y, -a, b), ValueError, "'a' must be >= 0"),
             ((x, y, a[:-1], b), ValueError, r"'a' must have shape \(40,\)"),
             ((x, y, a, 2 * b), ValueError, "the same total mass")]
    with simulated_device(xps, DEVICE1):
        for args, exc, match in cases:
            dev = [None if v is None else _as("device", v) for v in args]
            with pytest.raises(exc, match=match):
                sinkhorn_divergence(*dev)
            with pytest.raises(exc, match=match):  # the host says the same
                sinkhorn_divergence(*args)
        est = SinkhornTransport(blur=0.2).fit(_as("device", x))
        with pytest.raises(ValueError, match="X has 1 features, but SinkhornTransport is "
                           "expecting 2"):
            est.transform(_as("device", x[:, :1]))
        with pytest.raises(ValueError, match="'Xt' has 1 features"):
            est.inverse_transform(_as("device", x[:, :1]))


def test_host_data_with_backend_cuda_stays_numpy(capsys):
    """backend="cuda" on NumPy data: solved on the (simulated) device, the
    outputs and fitted attributes NumPy; transform reuses device copies;
    ``verbose`` says where the arrays were."""
    x, y, a, b = clouds(n=40, m=30)
    ref, rx, _ = sinkhorn_divergence(x, y, a, b, return_grad=True)
    fit_ref = SinkhornTransport(blur=0.2).fit(x, Xt=y)
    with simulated_device(xps, DEVICE1):
        value, gx, _ = sinkhorn_divergence(x, y, a, b, return_grad=True, backend="cuda",
                                           verbose=True)
        assert "arrays on the device: Space(simulated" in capsys.readouterr().out
        est = SinkhornTransport(blur=0.2, backend="cuda").fit(x, Xt=y)
        copies = est._device_copies
        assert all(v.device == DEVICE1 for v in copies.values())
        moved = est.transform(x)
        assert est._device_copies is copies
    assert type(gx) is np.ndarray and type(moved) is np.ndarray
    assert type(est.potential_t_) is np.ndarray
    _close(value, ref, np.float64)
    _close(gx, rx, np.float64)
    _close(moved, fit_ref.transform(x), np.float64)


def test_device_data_with_a_host_backend_come_back_on_the_device(softmin_inputs):
    """backend="cpu" on (simulated) device arrays: solved on the host, the
    outputs moved back to the device."""
    x, y, a, b = clouds(n=40, m=30)
    ref, rx, _ = sinkhorn_divergence(x, y, a, b, return_grad=True)
    del softmin_inputs[:]
    with simulated_device(xps, DEVICE1):
        X = _as("device", x)
        value, gx, _ = sinkhorn_divergence(X, _as("device", y), _as("device", a),
                                           _as("device", b), return_grad=True,
                                           backend="cpu")
    assert all(type(h) is np.ndarray for h in softmin_inputs)  # the host's loop
    _assert_where(gx, X, np.float64)
    _close(value, ref, np.float64)
    _close(gx, rx, np.float64)


def test_without_dispatch_torch_tensors_become_numpy():
    x, y, a, b = clouds(n=40, m=30)
    with sklearn.config_context(array_api_dispatch=False):
        value, gx, _ = sinkhorn_divergence(torch.asarray(x), torch.asarray(y),
                                           return_grad=True)
        moved = SinkhornTransport(blur=0.2).fit(torch.asarray(x)).transform(
            torch.asarray(x))
    assert type(gx) is np.ndarray and type(moved) is np.ndarray
    _close(value, sinkhorn_divergence(x, y), np.float64)


@pytest.mark.parametrize("way", ["strict", "device"])
def test_scikit_learns_array_api_checks(way):
    est = SinkhornTransport(blur=0.5, max_iter=100)
    with _way(way):
        check_array_api_input("SinkhornTransport", est, "array_api_strict", "device1",
                              "float32", check_values=True)
        check_array_api_same_namespace("SinkhornTransport", est, "array_api_strict")


def test_gpu_benchmark_of_the_divergence_runs_in_cpu_mode(tmp_path):
    """asv_bench/estimators_gpu.py --estimators sinkhorn (run by
    asv_bench/gpu_session.sh) at a tiny size on the CPU, so that it cannot
    rot between GPU sessions."""
    path = Path(__file__).resolve().parents[2] / "asv_bench" / "estimators_gpu.py"
    spec = importlib.util.spec_from_file_location("estimators_gpu_sinkhorn", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / "sinkhorn.json"
    with sklearn.config_context(array_api_dispatch=False):
        rows = module.main(["--cpu", "--estimators", "sinkhorn", "--sinkhorn-sizes", "200",
                            "--out", str(out)])
    assert out.exists()
    assert {r["estimator"] for r in rows} == {"sinkhorn_divergence(online)",
                                              "sinkhorn_divergence(multiscale)"}
    x, y = module._clouds(200)
    ref = sinkhorn_divergence(x, y, blur=0.05)
    for r in rows:
        assert r["path"] == "cpu" and r["time_s"] > 0
        assert r["value"] == pytest.approx(ref, rel=1e-2)  # multiscale: truncated


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU and cupy")
def test_cupy_arrays_stay_on_the_gpu():
    import cupy

    x, y, a, b = clouds(dtype=np.float32)
    xc, yc, ac, bc = (cupy.asarray(v) for v in (x, y, a, b))
    with sklearn.config_context(array_api_dispatch=False):  # CuPy is always served
        for multiscale in (False, True):
            ref, rx, _ = sinkhorn_divergence(x, y, a, b, return_grad=True,
                                             multiscale=multiscale, cluster_scale=0.2)
            value, gx, _ = sinkhorn_divergence(xc, yc, ac, bc, return_grad=True,
                                               multiscale=multiscale, cluster_scale=0.2)
            assert isinstance(gx, cupy.ndarray) and type(value) is float
            assert value == pytest.approx(ref, rel=1e-4)
            np.testing.assert_allclose(gx.get(), rx, rtol=1e-3, atol=1e-6)
        f, g = sinkhorn_potentials(xc, yc, ac, bc, tol=1e-5)
        assert isinstance(f, cupy.ndarray)
        est = SinkhornTransport(blur=0.2).fit(xc, Xt=yc)
        moved = est.transform(xc)
        assert isinstance(moved, cupy.ndarray) and isinstance(est.potential_t_, cupy.ndarray)
        np.testing.assert_allclose(
            moved.get(), SinkhornTransport(blur=0.2).fit(x, Xt=y).transform(x),
            rtol=1e-4, atol=1e-5)
    xt = torch.asarray(x, device="cuda")  # torch CUDA tensors, through DLPack
    _, gt, _ = sinkhorn_divergence(xt, torch.asarray(y, device="cuda"), return_grad=True)
    assert isinstance(gt, torch.Tensor) and gt.device.type == "cuda"
