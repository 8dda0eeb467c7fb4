"""Fixtures of the torch front end's tests: the devices to run on."""

from __future__ import annotations

import pytest

from kerneltools.backend.cuda import _backend as _cuda_backend

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.fixture(params=DEVICES)
def device(request):
    """``"cpu"``, and ``"cuda"`` where torch and CuPy see a GPU."""
    if request.param == "cuda":
        torch = pytest.importorskip("torch")
        ok, why = _cuda_backend.gpu_status()
        if not ok or not torch.cuda.is_available():
            pytest.skip(f"no GPU for torch and CuPy: {why}")
    return request.param
