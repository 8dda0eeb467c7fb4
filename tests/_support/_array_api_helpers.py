"""Helpers of the Array API tests (issue 24): the ways in of an array, and
where an output is.

The ways: ``"strict"``, array-api-strict arrays on its ``device1`` (host
memory, served through zero-copy NumPy views under ``array_api_dispatch``);
``"torch"``, CPU torch tensors; ``"device"``, array-api-strict's ``device1``
standing for a GPU (:func:`kerneltools._utils._array_api.simulated_device`).
array-api-strict and torch are imported on use: the test modules skip
without them.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from kerneltools._utils._array_api import simulated_device

WAYS = ["strict", "torch", "device"]


def _strict():
    import array_api_strict  # noqa: PLC0415 - optional, the tests skip without it

    return array_api_strict


def device1():
    """array-api-strict's non-default device."""
    return _strict().Device("device1")


def as_way(way, a):
    """The NumPy array ``a`` as an array of ``way``."""
    if way == "torch":
        import torch  # noqa: PLC0415

        return torch.asarray(a)
    return _strict().asarray(a, device=device1())


def way_context(way):
    """The context of a way in: the simulated device for "device"."""
    if way == "device":
        return simulated_device(_strict(), device1())
    return contextlib.nullcontext()


def to_numpy(a) -> np.ndarray:
    """A host Array API array as NumPy (through DLPack)."""
    return np.asarray(np.from_dlpack(a))


def assert_where(out, like, dtype):
    """``out`` is in ``like``'s namespace, on its device, with ``dtype``."""
    from sklearn.externals import array_api_compat as compat  # noqa: PLC0415

    assert compat.array_namespace(out) is compat.array_namespace(like)
    assert compat.device(out) == compat.device(like)
    assert to_numpy(out).dtype == dtype


def assert_close(got, ref, rtol):
    """``got`` (a host Array API array, or a float) equals ``ref`` to
    ``rtol``, relative to ``ref``'s largest magnitude near zero."""
    got = got if isinstance(got, float) else to_numpy(got)
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol * np.abs(ref).max())


def gpu_available() -> bool:
    """CuPy importable and a CUDA GPU present."""
    try:
        import cupy  # noqa: PLC0415
    except ImportError:
        return False
    return bool(cupy.is_available())


class NamespaceAndDevice:
    """What scikit-learn's mixed-input check reads: ``xp`` and ``device`` names."""

    def __init__(self, xp: str, device: str):
        self.xp, self.device = xp, device


def spy_softmins(monkeypatch) -> list:
    """The ``h`` of every Sinkhorn softmin called from now on (the potentials'
    updates), appended to the returned list: where the loop's arithmetic ran."""
    from kerneltools.ot import _sinkhorn

    seen = []
    make = _sinkhorn.lse_softmin

    def spy(backend, space=_sinkhorn.HOST):
        softmin = make(backend, space)

        def run(eps, C, h):
            seen.append(h)
            return softmin(eps, C, h)

        return run

    monkeypatch.setattr(_sinkhorn, "lse_softmin", spy)
    return seen


def torch_measures(dt, n=40, m=30, d=3, seed=0, batch=None):
    """Two weighted point clouds as torch tensors ``(a, x, b, y)`` (weights
    summing to 1; ``batch``: a leading batch axis), seeded."""
    import torch

    g = torch.Generator().manual_seed(seed)
    shape = () if batch is None else (batch,)
    x = torch.rand(shape + (n, d), generator=g, dtype=dt)
    y = 0.8 * torch.rand(shape + (m, d), generator=g, dtype=dt) + 0.3
    a = torch.rand(shape + (n,), generator=g, dtype=dt) + 0.5
    b = torch.rand(shape + (m,), generator=g, dtype=dt) + 0.5
    return a / a.sum(-1, keepdim=True), x, b / b.sum(-1, keepdim=True), y


@pytest.fixture(autouse=True)
def dispatch(monkeypatch):
    """array_api_dispatch on, and no warm start between fits of one test;
    BLAS on one thread (tiny matrices: on a busy machine OpenBLAS' threads
    only wait for each other)."""
    import sklearn  # noqa: PLC0415
    from threadpoolctl import threadpool_limits  # noqa: PLC0415

    from kerneltools.estimators.kernel_ridge import _warm as _krr_warm  # noqa: PLC0415

    monkeypatch.setenv("SCIPY_ARRAY_API", "1")
    _krr_warm.clear()
    with sklearn.config_context(array_api_dispatch=True), threadpool_limits(1, "blas"):
        yield
    _krr_warm.clear()


def sklearn_array_api_checks(est, way):
    """scikit-learn's ``check_array_api_input`` (float32, values compared),
    ``check_array_api_mixed_inputs`` (y as a CPU torch tensor) and
    ``check_array_api_same_namespace`` on array-api-strict's device1, the
    way ``way`` in."""
    from sklearn.utils.estimator_checks import (  # noqa: PLC0415
        check_array_api_input,
        check_array_api_mixed_inputs,
        check_array_api_same_namespace,
    )

    name = type(est).__name__
    with way_context(way):
        check_array_api_input(name, est, "array_api_strict", "device1", "float32",
                              check_values=True)
        check_array_api_mixed_inputs(name, est,
                                     X_ns_and_device=_NS("array_api_strict", "device1"),
                                     other_ns_and_device=_NS("torch", "cpu"))
        check_array_api_same_namespace(name, est, "array_api_strict")


class _NS:
    def __init__(self, xp, device):
        self.xp, self.device = xp, device
