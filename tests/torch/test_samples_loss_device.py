"""SamplesLoss on CUDA tensors (issue 27): the device path, without a GPU.

Inside :func:`kerneltools.torch._samples_loss._device.simulated_cuda_tensors`, CPU
tensors take the code path of CUDA tensors, with array-api-strict's
``device1`` standing for CuPy: the tensors enter it through that namespace's
``from_dlpack`` (for ``cupy.from_dlpack``), the Sinkhorn loop, the softmins'
inputs and outputs, the kernel sums, the gradients and the potentials are
array-api-strict arrays there (which reject NumPy arrays: a host array
leaking into the device path fails), and they leave through
``torch.from_dlpack``. The device path computes the host path's arithmetic in
the same order, so values, gradients (in x, y, a, b) and potentials are
compared with the host path's to the last bit where possible, with GeomLoss
where the host tests compare with it. Transfers are counted: no N-sized
array crosses to the host, no tensor is read through NumPy
(``Tensor.numpy``, ``Tensor.cpu``, ``torch.from_numpy``). The CUDA test at
the end (``gpu``-marked) compares real CUDA tensors with the CPU result.

Clouds and sizes are those of ``tests/torch/test_samples_loss.py`` (D = 3): the
kernels it compiles are the ones used here.
"""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="SamplesLoss needs PyTorch (an optional extra)")
xps = pytest.importorskip("array_api_strict")

from _array_api_helpers import gpu_available, spy_softmins, torch_measures

import kerneltools
from kerneltools.torch._samples_loss import _device as device
from kerneltools._utils._array_api import Space
from kerneltools.torch import SamplesLoss

DEVICE1 = xps.Device("device1")
DTYPES = pytest.mark.parametrize("dt", [torch.float32, torch.float64],
                                 ids=["float32", "float64"])

#: (loss, keywords): every loss, balanced and unbalanced, debiased or not, a
#: given diameter, p = 1, a cost formula, the multiscale Sinkhorn, a blur
#: that dwarfs the costs (the large-blur expansion).
CASES = [
    ("sinkhorn", {}),
    ("sinkhorn", {"debias": False}),
    ("sinkhorn", {"reach": 0.5}),
    ("sinkhorn", {"reach": 0.5, "debias": False}),
    ("sinkhorn", {"diameter": 3.0, "scaling": 0.7}),
    ("sinkhorn", {"p": 1, "blur": 0.1}),
    ("sinkhorn", {"cost": "SqDist(X,Y) / IntCst(2)", "blur": 0.1}),
    ("sinkhorn", {"backend": "multiscale", "cluster_scale": 0.25}),
    ("sinkhorn", {"blur": 1e8}),
    ("hausdorff", {"blur": 0.1}),
    ("hausdorff", {"blur": 1e8}),
    ("gaussian", {"blur": 0.3}),
    ("laplacian", {"blur": 0.3}),
    ("energy", {}),
]
IDS = [f"{loss}-{kw}" for loss, kw in CASES]


measures = torch_measures  # the weighted clouds of tests/torch/test_samples_loss.py


def on_device():
    """CPU tensors through the device path, device1 standing for the GPU."""
    return device.simulated_cuda_tensors(xps, DEVICE1)


def value_and_grads(L, args, simulated):
    """``L(*args)`` and its gradients in every argument, forward and
    backward on the (simulated) device or on the host."""
    leaves = [t.detach().clone().requires_grad_() for t in args]
    with on_device() if simulated else contextlib.nullcontext():
        v = L(*leaves)
        v.sum().backward()
    return v.detach(), [t.grad for t in leaves]


class Transfers:
    """What crossed to the host during a run: the shapes given to
    ``Space.host`` (a device array copied to the host), and the tensors read
    through NumPy (``Tensor.numpy``, ``Tensor.cpu``, ``torch.from_numpy``);
    and the arrays that became tensors through :meth:`TensorPlace.tensor`."""

    def __init__(self, monkeypatch):
        self.host, self.numpy, self.made = [], [], []
        spy = self

        def host(space, a):
            spy.host.append(tuple(a.shape))
            return original_host(space, a)

        def tensor(place, arr, like):
            spy.made.append(arr)
            return original_tensor(place, arr, like)

        def reading(name, fn):
            def read(t, *args, **kwargs):
                spy.numpy.append((name, tuple(t.shape)))
                return fn(t, *args, **kwargs)

            return read

        original_host, original_tensor = Space.host, device.TensorPlace.tensor
        monkeypatch.setattr(Space, "host", host)
        monkeypatch.setattr(device.TensorPlace, "tensor", tensor)
        for name in ("numpy", "cpu"):
            monkeypatch.setattr(torch.Tensor, name, reading(name, getattr(torch.Tensor, name)))
        monkeypatch.setattr(torch, "from_numpy", reading("from_numpy", torch.from_numpy))

    def clear(self):
        del self.host[:], self.numpy[:], self.made[:]


@pytest.fixture
def transfers(monkeypatch):
    return Transfers(monkeypatch)


def on_device1(arrays):
    """Every array is array-api-strict's, on device1 (none leaked to NumPy)."""
    assert arrays
    for arr in arrays:
        assert isinstance(arr, xps._array_object.Array) and arr.device == DEVICE1, type(arr)


def assert_same(got, ref, what, rtol=0.0):
    assert got.dtype == ref.dtype and got.shape == ref.shape, what
    err = float((got - ref).abs().max() / ref.abs().max().clamp_min(1e-300))
    assert err <= rtol, f"{what}: relative difference {err:.3g} > {rtol:.3g}"


# -- the device path equals the host path -------------------------------------------


@DTYPES
@pytest.mark.parametrize("batch", [None, 2], ids=["single", "batch"])
@pytest.mark.parametrize("loss, kw", CASES, ids=IDS)
def test_device_path_equals_the_host_path(loss, kw, dt, batch, transfers):
    """Value and gradients in x, y, a and b: the device path runs the host
    path's arithmetic in its order (the same bits here); the softmins' inputs
    and everything that becomes a tensor are device arrays; nothing N-sized
    reaches the host but, for the multiscale Sinkhorn, its one copy of the
    points and masses for the cells and of the potentials at the jump."""
    args = measures(dt, batch=batch, seed=1)
    L = SamplesLoss(loss, **kw)
    v_ref, grads_ref = value_and_grads(L, args, simulated=False)
    transfers.clear()
    v, grads = value_and_grads(L, args, simulated=True)
    assert_same(v, v_ref, "value")
    for name, g, g_ref in zip("axby", grads, grads_ref):
        assert_same(g, g_ref, f"gradient in {name}")
    on_device1(transfers.made)
    assert transfers.numpy == []
    d = args[1].shape[-1]
    if kw.get("backend") != "multiscale":
        assert all(np.prod(s) <= d for s in transfers.host), transfers.host
    else:  # per measure pair: x, y, a, b, and f, g, f_aa, g_bb at the jump
        big = [s for s in transfers.host if np.prod(s) > d]
        assert len(big) == 8 * (batch or 1), big


@pytest.mark.parametrize("loss, kw", [
    ("sinkhorn", {}), ("sinkhorn", {"debias": False}), ("sinkhorn", {"reach": 0.5}),
    ("hausdorff", {"blur": 0.1}), ("gaussian", {"blur": 0.3}), ("energy", {}),
])
@pytest.mark.parametrize("batch", [None, 2], ids=["single", "batch"])
def test_device_potentials_equal_the_host_potentials(loss, kw, batch, transfers):
    args = measures(torch.float64, batch=batch, seed=2)
    L = SamplesLoss(loss, potentials=True, **kw)
    F_ref, G_ref = L(*args)
    transfers.clear()
    with on_device():
        F, G = L(*args)
    assert F.shape == args[0].shape and G.shape == args[2].shape
    assert_same(F, F_ref, "F")
    assert_same(G, G_ref, "G")
    on_device1(transfers.made)
    assert transfers.numpy == []


@pytest.mark.parametrize("loss, kw", [("sinkhorn", {}), ("sinkhorn", {"reach": 0.5}),
                                      ("gaussian", {"blur": 0.3})])
def test_device_path_equals_geomloss(loss, kw):
    """Against GeomLoss's tensorized backend, as tests/torch/test_samples_loss.py
    compares the host path (float64, its tolerances)."""
    geomloss = pytest.importorskip("geomloss", reason="the reference is GeomLoss")
    args = measures(torch.float64)
    v, grads = value_and_grads(SamplesLoss(loss, **kw), args, simulated=True)
    leaves = [t.detach().clone().requires_grad_() for t in args]
    v_ref = geomloss.SamplesLoss(loss, backend="tensorized", **kw)(*leaves)
    v_ref.backward()
    assert_same(v, v_ref.detach(), "value", rtol=1e-10)
    for name, g, t in zip("axby", grads, leaves):
        assert_same(g, t.grad, f"gradient in {name}", rtol=1e-9)


@pytest.mark.parametrize("loss", ["gaussian", "laplacian", "energy"])
def test_double_backward_on_the_device(loss, transfers):
    """Gradients of gradients of the kernel losses (a gradient penalty): the
    same on the device as on the host, the kernel sums' inputs read there
    (the NumPy backend: the second-order formulas compile nowhere)."""
    args = measures(torch.float64, seed=11)
    L = SamplesLoss(loss, blur=0.3)

    def penalty_grads(simulated):
        leaves = [t.detach().clone().requires_grad_() for t in args]
        with on_device() if simulated else contextlib.nullcontext():
            ga, gx = torch.autograd.grad(L(*leaves), leaves[:2], create_graph=True)
            penalty = (gx**2).sum() + (ga**2).sum()
            penalty.backward()
        return penalty.detach(), [t.grad for t in leaves]

    with kerneltools.config_context(backend="numpy"):
        p_ref, grads_ref = penalty_grads(False)
        transfers.clear()
        p, grads = penalty_grads(True)
    assert_same(p, p_ref, "penalty")
    for name, g, g_ref in zip("axby", grads, grads_ref):
        assert_same(g, g_ref, f"gradient of the penalty in {name}")
    on_device1(transfers.made)
    assert transfers.numpy == []


def test_the_sinkhorn_loop_runs_on_device_arrays(monkeypatch):
    """Every softmin's input ``h`` is a device1 array (the loop's arithmetic
    runs there), also in the multiscale Sinkhorn's coarse and fine loops."""
    seen = spy_softmins(monkeypatch)
    args = measures(torch.float32)
    with on_device():
        for kw in ({}, {"reach": 0.5}, {"backend": "multiscale", "cluster_scale": 0.25}):
            SamplesLoss(**kw)(*args)
        SamplesLoss("hausdorff")(*args)
    on_device1(seen)


# -- which place serves which tensors -------------------------------------------------


class _FakeCuda:
    """Stands for a CUDA tensor where tensor_place reads it."""

    is_cuda = True
    device = "cuda:0"

    def __init__(self, dtype=torch.float32):
        self.dtype = dtype


def test_cuda_tensors_without_cupy_take_the_host_round_trip(monkeypatch, capsys):
    monkeypatch.setattr(device, "_cupy_usable", lambda: (False, "CuPy is not installed"))
    place = device.tensor_place(_FakeCuda(), "auto", verbose=True)
    assert place is device.HOST_PLACE
    out = capsys.readouterr().out
    assert "copied to the host" in out and "CuPy is not installed" in out
    assert "cuda:0" in out
    assert device.tensor_place(_FakeCuda(), "auto") is device.HOST_PLACE
    assert capsys.readouterr().out == ""  # quiet without verbose


def test_cupy_that_cannot_use_the_gpu_is_no_crash(monkeypatch):
    """A broken CUDA setup: CuPy imports, its ``is_available`` raises."""
    import sys
    import types

    fake = types.ModuleType("cupy")

    def broken():
        raise RuntimeError("CUDA driver version is insufficient")

    fake.is_available = broken
    monkeypatch.setitem(sys.modules, "cupy", fake)
    ok, why = device._cupy_usable()
    assert not ok and "CUDA driver version is insufficient" in why
    assert device.tensor_place(_FakeCuda(), "auto") is device.HOST_PLACE


@pytest.mark.parametrize("backend", ["cpu", "numpy"])
def test_cuda_tensors_with_a_host_backend_go_to_the_host(monkeypatch, backend, capsys):
    monkeypatch.setattr(device, "_cupy_usable", lambda: (True, ""))
    assert device.tensor_place(_FakeCuda(), backend, verbose=True) is device.HOST_PLACE
    assert f"backend={backend!r} runs on the host" in capsys.readouterr().out
    with on_device():  # the simulated device declines them too
        assert device.tensor_place(_FakeCuda(), backend) is device.HOST_PLACE


def test_half_precision_cuda_tensors_go_to_the_host(monkeypatch):
    monkeypatch.setattr(device, "_cupy_usable", lambda: (True, ""))
    assert device.tensor_place(_FakeCuda(torch.float16), "auto") is device.HOST_PLACE


def test_cpu_tensors_keep_the_numpy_path():
    x = torch.rand(5, 3)
    assert device.tensor_place(x, "auto", verbose=True) is device.HOST_PLACE
    assert device.tensor_place(x, "cuda") is device.HOST_PLACE
    with on_device():
        place = device.tensor_place(x, "cuda")
    assert place.on_device and place.backend("cuda") is None  # the host's default
    assert place.backend(None) is None


def test_verbose_says_where_it_ran(capsys):
    args = measures(torch.float64)
    with on_device():
        SamplesLoss(verbose=True)(*args)
    out = capsys.readouterr().out
    assert "computed on the device, Space(simulated" in out
    assert "(on the device: Space(simulated" in out  # the schedule's line
    SamplesLoss(verbose=True)(*args)
    assert "device" not in capsys.readouterr().out


def test_bad_device_input_is_refused_as_on_the_host():
    """The device's checks (Array API functions there) say what the host's say."""
    a, x, b, y = measures(torch.float64)
    with on_device():
        with pytest.raises(ValueError, match="same total mass"):
            SamplesLoss("sinkhorn")(a, x, 2 * b, y)
        bad = x.clone()
        bad[3, 1] = float("nan")
        with pytest.raises(ValueError, match="'x' contains NaN or infinity"):
            SamplesLoss("sinkhorn")(a, bad, b, y)


# -- the GPU benchmark script, and real CUDA tensors ------------------------------------


def _benchmark_module():
    path = Path(__file__).resolve().parents[2] / "asv_bench" / "samples_loss_gpu.py"
    spec = importlib.util.spec_from_file_location("samples_loss_gpu", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_benchmark_runs_in_cpu_mode(tmp_path):
    """asv_bench/samples_loss_gpu.py (a step of asv_bench/gpu_session.sh) at
    a tiny size on the CPU, the simulated device standing for the GPU, so
    that it cannot rot between GPU sessions."""
    out = tmp_path / "samples_loss.json"
    rows = _benchmark_module().main(["--cpu", "--sizes", "60", "--check-size", "40",
                                     "--no-geomloss", "--out", str(out)])
    assert out.exists()
    checks = [r for r in rows if r["kind"] == "check"]
    assert {r["loss"] for r in checks} == {"sinkhorn", "hausdorff", "energy", "gaussian",
                                           "laplacian", "sinkhorn(multiscale)"}
    for r in checks:
        assert r["value_rel_diff"] <= 1e-5 and r["grad_rel_diff"] <= 1e-4, r
        assert r["big_host_copies"] == (8 if r["loss"] == "sinkhorn(multiscale)" else 0), r
    timed = [r for r in rows if r["kind"] == "time"]
    assert [r["system"] for r in timed] == ["kerneltools", "geomloss-online"]
    assert timed[0]["time_s"] > 0 and timed[1]["skipped"] == "--no-geomloss"


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available() or not torch.cuda.is_available(),
                    reason="needs a CUDA GPU, cupy and a CUDA build of torch")
@pytest.mark.parametrize("loss, kw", CASES, ids=IDS)
def test_cuda_tensors_stay_on_the_gpu(loss, kw, monkeypatch):
    """Real CUDA tensors: value, gradients and potentials on the GPU, equal to
    the CPU's; no N-sized device-to-host copy (``Space.host``,
    ``cupy.asnumpy``, ``Tensor.cpu``, ``Tensor.numpy``) but the multiscale
    Sinkhorn's 8 ``Space.host`` copies; and, with CuPy declared unusable,
    the host round trip gives the same, on the GPU."""
    import cupy

    n, d = 40, 3
    copies = []

    def counted(name, fn, method=False):
        def run(*args, **kwargs):
            a = args[1] if method else args[0]
            if int(np.prod(a.shape)) > d:
                copies.append((name, tuple(a.shape)))
            return fn(*args, **kwargs)

        return run

    for dt, rtol in ((torch.float32, 1e-4), (torch.float64, 1e-9)):
        args = measures(dt, n=n)
        v_ref, grads_ref = value_and_grads(SamplesLoss(loss, **kw), args, simulated=False)
        F_ref, G_ref = SamplesLoss(loss, potentials=True, **kw)(*args)
        cuda_args = [t.cuda() for t in args]
        del copies[:]
        with monkeypatch.context() as m:
            m.setattr(Space, "host", counted("Space.host", Space.host, method=True))
            m.setattr(cupy, "asnumpy", counted("asnumpy", cupy.asnumpy))
            for name in ("cpu", "numpy"):
                m.setattr(torch.Tensor, name, counted(name, getattr(torch.Tensor, name)))
            v, grads = value_and_grads(SamplesLoss(loss, **kw), cuda_args, simulated=False)
            F, G = SamplesLoss(loss, potentials=True, **kw)(*cuda_args)
        if kw.get("backend") != "multiscale":
            assert copies == []
        else:  # x, y, a, b and the 4 potentials at the jump, twice (loss, potentials)
            assert [c for c in copies if c[0] != "Space.host"] == []
            assert len(copies) == 16, copies
        assert v.device.type == "cuda" and F.device.type == "cuda"
        assert_same(v.cpu(), v_ref, "value", rtol)
        for name, g, g_ref in zip("axby", grads, grads_ref):
            assert g.device.type == "cuda"
            assert_same(g.cpu(), g_ref, f"gradient in {name}", 10 * rtol)
        assert_same(F.cpu(), F_ref, "F", 10 * rtol)
        assert_same(G.cpu(), G_ref, "G", 10 * rtol)
        with monkeypatch.context() as m:  # no CuPy: the host round trip
            m.setattr(device, "_cupy_usable", lambda: (False, "CuPy declared unusable"))
            v_host, grads_host = value_and_grads(SamplesLoss(loss, **kw), cuda_args,
                                                 simulated=False)
        assert v_host.device.type == "cuda" and grads_host[1].device.type == "cuda"
        assert_same(v_host.cpu(), v_ref, "value (host round trip)", rtol)


def test_cupy_runs_on_torchs_current_stream(monkeypatch):
    """The device place runs CuPy on the tensors' device and on torch's
    current stream there (a stand-in CuPy and torch stream: no GPU here)."""
    import sys
    import types

    entered = []

    class Ctx:
        def __init__(self, what):
            self.what = what

        def __enter__(self):
            entered.append(self.what)

        def __exit__(self, *exc):
            return False

    fake = types.ModuleType("cupy")
    fake.cuda = types.SimpleNamespace(
        Device=lambda index: Ctx(("device", index)),
        Stream=types.SimpleNamespace(from_external=lambda s: Ctx(("stream", s))))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda dev: f"torch stream of {dev}")

    class Tensor:
        is_cuda = True
        device = types.SimpleNamespace(index=1)

    place = device.TensorPlace(Space(None, None, "cupy"))
    with place.running([Tensor()]):
        pass
    assert entered == [("device", 1), ("stream", f"torch stream of {Tensor.device}")]
