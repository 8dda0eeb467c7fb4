"""Where :class:`~kerneltools.torch.SamplesLoss` computes, and the way
back into autograd (private): the tensors' place, the conversions between
torch tensors and the solvers' arrays, and the autograd node of a solved
loss (:class:`Solution`, whose value, gradients and potentials are arrays of
the place, becomes tensors on the inputs' device).

A call's tensors are computed in one :class:`TensorPlace`, chosen once per
call by :func:`tensor_place` from ``x``:

- CPU tensors: the host place. The solvers read zero-copy NumPy views of the
  tensors (``t.detach().numpy()``); gradients and potentials come back as
  tensors made from NumPy arrays. This is the path of before.
- CUDA tensors (float32, float64) with CuPy importable and seeing a GPU, and
  a ``backend`` that may run there (GeomLoss's names, ``"auto"``,
  ``"cuda"``): the device place, whose :class:`~kerneltools._utils._array_api.Space`
  is CuPy's. Each tensor becomes a CuPy array through DLPack
  (``cupy.from_dlpack``, zero copy), the Sinkhorn loop and the reductions
  run on those (the loop's vector arithmetic in CuPy, written to the Array
  API standard: :mod:`kerneltools.ot._sinkhorn`), and the gradients and
  potentials become tensors on the input's device through DLPack
  (``torch.from_dlpack``). Only scalars (temperatures, marginal errors,
  values, the bounding box's corners) cross to the host; the multiscale
  Sinkhorn also copies the points once for its cells and block choice, as
  it does for CuPy arrays (:mod:`kerneltools.ot._multiscale`). CuPy works on the
  tensors' device and on torch's current stream there.
- CUDA tensors otherwise (no CuPy, CuPy without a GPU, ``backend="cpu"`` or
  ``"numpy"``): copied to the host, computed there, the results sent back
  to the tensors' device; ``verbose`` says so. (float16 and bfloat16
  tensors arrive here cast to float32: :mod:`._inputs`.)

**Testing without a GPU.** Inside :func:`simulated_cuda_tensors` (tests
only), CPU tensors take the device place's code, with an Array API namespace
and device (array-api-strict's ``device1`` in the tests) standing for CuPy's,
as :func:`~kerneltools._utils._array_api.simulated_device` makes it stand for CuPy
arrays in the estimators: tensors enter it with that namespace's
``from_dlpack`` and leave through ``torch.from_dlpack``, the solvers'
arithmetic runs on its arrays (which reject NumPy arrays: a host array
leaking into the device path fails), and the reductions read NumPy views of
them (:meth:`Space.engine`), as they would read CuPy arrays.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np
import torch

from ..._utils._array_api import HOST, Space, _device_space, simulated_device

__all__ = ["HOST_PLACE", "Solution", "TensorPlace", "finish", "simulated_cuda_tensors",
           "tensor_place"]

_local = threading.local()

#: The dtypes the device place serves (the loop's arithmetic is tested in
#: these two; half-precision tensors are cast to float32 before they come).
_DEVICE_DTYPES = (torch.float32, torch.float64)


class TensorPlace:
    """Where a call's tensors are computed: a :class:`Space` (``space``) and
    the engine ``backend`` that runs there, with the conversions between
    torch tensors and the space's arrays."""

    def __init__(self, space: Space = HOST, backend_map=None):
        self.space = space
        self._backend_map = backend_map

    def __repr__(self):
        return f"TensorPlace({self.space})"

    @property
    def on_device(self) -> bool:
        return self.space.on_device

    def backend(self, backend):
        """The engine backend to run ``backend`` (SamplesLoss's engine
        backend, None for GeomLoss's names) here: on the simulated device,
        ``"cuda"`` stands for the host's default."""
        if self._backend_map is not None:
            return self._backend_map(backend)
        return backend

    def array(self, t: torch.Tensor):
        """``t``'s data as an array of the space: a NumPy view of a CPU tensor
        (a copy of a CUDA tensor on the host place), a CuPy array sharing a
        CUDA tensor's memory (DLPack), or the simulated namespace's array."""
        t = t.detach()
        kind = self.space.kind
        if kind == "host":
            return t.cpu().numpy()
        if kind == "cupy":
            import cupy

            return cupy.from_dlpack(t)
        return self.space.xp.from_dlpack(t, device=self.space.device)

    def engine(self, t: torch.Tensor):
        """``t`` as the reductions read it (NumPy or CuPy; no copy on the
        device)."""
        return self.space.engine(self.array(t))

    def tensor(self, arr, like: torch.Tensor) -> torch.Tensor:
        """An array of the space as a tensor on ``like``'s device with
        ``like``'s dtype (through DLPack from the device: no copy)."""
        if self.space.kind == "host":
            return torch.from_numpy(np.ascontiguousarray(arr)).to(like.device, like.dtype)
        return torch.from_dlpack(arr).to(like.dtype)

    def from_engine(self, out):
        """A reduction's output as an array of the space."""
        return self.space.from_engine(out) if self.on_device else out

    def running(self, tensors):
        """The context of the work on ``tensors``: CuPy on their device and on
        torch's current stream there (nothing elsewhere)."""
        if self.space.kind != "cupy":
            return contextlib.nullcontext()
        from .._autograd import stream

        return stream(tensors)


#: CPU tensors: NumPy views, the path of before.
HOST_PLACE = TensorPlace()


def _simulated() -> bool:
    return bool(getattr(_local, "simulated", False))


@contextlib.contextmanager
def simulated_cuda_tensors(xp, device):
    """Tests only: in this thread, CPU tensors given to SamplesLoss take the
    CUDA tensors' device path, computed in the namespace ``xp`` on
    ``device`` (array-api-strict's ``device1``) standing for CuPy (see the
    module docstring). ``backend="cuda"`` then stands for the host's default
    backend."""
    old = _simulated()
    _local.simulated = True
    try:
        with simulated_device(xp, device):
            yield
    finally:
        _local.simulated = old


def _cupy_usable() -> tuple[bool, str]:
    try:
        import cupy
    except ImportError:
        return False, "CuPy is not installed (pip install 'kerneltools[cuda]')"
    try:
        ok = bool(cupy.is_available())
    except Exception as exc:  # noqa: BLE001 - a broken CUDA setup: the host path
        return False, f"CuPy cannot use the GPU ({type(exc).__name__}: {exc})"
    return ok, "" if ok else "CuPy sees no GPU"


def _host_reason(x: torch.Tensor, backend: str, simulated: bool) -> str:
    """Why the device place cannot serve ``x``, or "" when it can."""
    if backend in ("cpu", "numpy"):
        return f"backend={backend!r} runs on the host"
    if x.dtype not in _DEVICE_DTYPES:
        return f"{x.dtype} is computed on the host (the device path takes float32, float64)"
    if simulated:
        return ""
    return _cupy_usable()[1]


def tensor_place(x: torch.Tensor, backend: str, verbose=False) -> TensorPlace:
    """The place where SamplesLoss computes a call whose points are ``x``
    (module docstring); ``backend`` is SamplesLoss's. With ``verbose``, says
    where CUDA tensors are computed."""
    simulated = _simulated()
    if not (x.is_cuda or simulated):
        return HOST_PLACE
    why = _host_reason(x, backend, simulated)
    if why:
        if verbose:
            print(f"SamplesLoss: CUDA tensors copied to the host and computed there "
                  f"({why}); the results go back to {x.device}", flush=True)
        return HOST_PLACE
    space = _device_space("cupy-ok")
    if verbose:
        print(f"SamplesLoss: computed on the device, {space}: the tensors read "
              "through DLPack (no copy)", flush=True)
    if space.kind == "simulated":
        return TensorPlace(space, lambda b: None if b == "cuda" else b)
    return TensorPlace(space)


# -- one autograd node for every loss ---------------------------------------------


class Solution:
    """A solved loss: its value (float64) and, on demand, its gradients
    ``(d/da, d/dx, d/db, d/dy)`` as arrays of ``place``'s space (NumPy on
    the host), from ``gradients(need)``; ``torch_gradients(need, a, x, b,
    y)``: the same as differentiable tensors (None: no double backward,
    ``why`` says why)."""

    def __init__(self, value: float, gradients, potentials=None, torch_gradients=None,
                 why="", place: TensorPlace = HOST_PLACE):
        self.value, self.gradients, self.potentials = float(value), gradients, potentials
        self.torch_gradients, self.why, self.place = torch_gradients, why, place


class _LossValue(torch.autograd.Function):
    """The value of a solved loss; backward from its gradients, differentiable
    under ``create_graph=True`` where the loss provides ``torch_gradients``."""

    @staticmethod
    def forward(ctx, solution: Solution, a, x, b, y):
        ctx.solution = solution
        ctx.save_for_backward(a, x, b, y)
        return torch.tensor(solution.value, dtype=x.dtype, device=x.device)

    @staticmethod
    def backward(ctx, grad_out):
        need = ctx.needs_input_grad[1:]
        if not any(need):
            return (None,) * 5
        solution = ctx.solution
        if torch.is_grad_enabled():  # create_graph=True: a graph of the gradients
            if solution.torch_gradients is None:
                raise NotImplementedError(
                    "SamplesLoss: gradients of gradients (backward with "
                    f"create_graph=True) are not supported for {solution.why}; "
                    "they are for the kernel losses 'gaussian', 'laplacian' and "
                    "'energy'")
            with solution.place.running(ctx.saved_tensors):
                grads = solution.torch_gradients(need, *ctx.saved_tensors)
            return (None,) + tuple(None if not n or d is None else grad_out * d
                                   for n, d in zip(need, grads))
        g = float(grad_out)
        with solution.place.running(ctx.saved_tensors):
            grads = solution.gradients(need)
            return (None,) + tuple(
                None if not n or d is None else solution.place.tensor(g * d, grad_out)
                for n, d in zip(need, grads)
            )


def finish(loss, solution: Solution, a, x, b, y):
    """The loss value as a differentiable tensor, or ``(F, G)`` with potentials."""
    if loss.potentials:
        F, G = solution.potentials
        return solution.place.tensor(F, x), solution.place.tensor(G, x)
    return _LossValue.apply(solution, a, x, b, y)
