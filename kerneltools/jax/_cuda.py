"""The reduction of :mod:`kerneltools.jax` on a GPU: the CUDA backend's
NVRTC-compiled kernel launched by an XLA custom call on XLA's stream.

:func:`cuda_reduce` runs a plan's kernel on ``jax.Array`` s on a CUDA
device: ``jax.ffi.ffi_call`` of the handler of
:mod:`kerneltools.backend.cuda._xla` (registered for the ``CUDA``
platform), with the kernel's ``CUfunction``, ``cuLaunchKernel`` and the
launch shape as attributes; the buffers stay on the device, the launch is
ordered on XLA's stream (no host round trip, no synchronisation).
``jax.vmap`` maps onto the handler's batch loop (one launch per batch
entry) as on the CPU. Index outputs are int64 in the kernel: without
``jax_enable_x64`` they are read as pairs of int32 (little-endian, low
first), as on the CPU. One device per process: a kernel's ``CUfunction``
belongs to the device it was compiled for (the arrays', or under ``jit``
the default device).

Tests without a GPU register the same handler for the CPU platform with a
stand-in launcher that runs the generated CUDA source on the CPU
(``tests/_support/_cuda_shim.py``), whose :class:`CudaEntry` says
``stream=False`` (the CPU platform has no stream).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import numpy as np

from ..backend.cpu._xla import ffi_handler
from ..backend.cuda._xla import CudaEntry, kernel_entry

__all__ = ["TARGET", "cuda_device", "cuda_reduce", "output_type", "output_value",
           "register"]

TARGET = "kerneltools_reduce_cuda"
_registered: dict = {}


def register(platform: str = "CUDA") -> None:
    """The handler registered as :data:`TARGET` for ``platform`` (once)."""
    if platform not in _registered:
        handler = ffi_handler(jax.ffi.include_dir() + "/xla/ffi/api/c_api.h", "cuda")
        jax.ffi.register_ffi_target(TARGET, jax.ffi.pycapsule(handler),
                                    platform=platform)
        _registered[platform] = handler


@dataclass(frozen=True)
class _CudaCall:
    """The static part of one custom call (the jit cache's key)."""

    entry: CudaEntry
    dtype: np.dtype
    nx: int
    ny: int
    out_shapes: tuple  # one per output, in the reduction's order
    int_outputs: tuple
    x64: bool


def cuda_device(arrays) -> int | None:
    """The id of the CUDA device the arrays live on (tracers: the default
    device's, where the default backend is a GPU), or None."""
    for a in arrays:
        if isinstance(a, jax.core.Tracer):
            if jax.default_backend() != "gpu":
                return None
        elif hasattr(a, "devices"):
            devices = a.devices()
            if len(devices) != 1 or next(iter(devices)).platform != "gpu":
                return None
            return next(iter(devices)).id
    return jax.devices()[0].id if jax.default_backend() == "gpu" else None


def cuda_reduce(plan, args, shape, device: int):
    """The outputs of ``plan`` on ``args`` (its arguments, one ``jax.Array``
    each, on the GPU ``device``), or None where the CUDA backend cannot run
    it."""
    entry = kernel_entry(plan, device)
    if entry is None:
        return None
    register()
    red = plan.red
    call = _CudaCall(entry, np.dtype(plan.dtype), plan.nx, plan.ny,
                     (shape,) * red.n_outputs, tuple(red.int_outputs),
                     bool(jax.config.jax_enable_x64))
    return run(call, *args)


@functools.partial(jax.jit, static_argnums=0)
def run(call: _CudaCall, *args):
    """The custom call: outputs in the kernel's order (float, then index),
    returned in the reduction's."""
    order = ([k for k, i in enumerate(call.int_outputs) if not i]
             + [k for k, i in enumerate(call.int_outputs) if i])
    types = [output_type(call.out_shapes[k], call.dtype, call.int_outputs[k],
                         call.x64) for k in order]
    ranks = [a.ndim for a in args] + [len(t.shape) for t in types]
    e = call.entry
    outs = jax.ffi.ffi_call(TARGET, types, vmap_method="expand_dims")(
        *args, fn=np.int64(e.function), launch=np.int64(e.launch),
        block=np.int64(e.block), grid=np.int64(e.grid), smem=np.int64(e.smem),
        nx=np.int64(call.nx), ny=np.int64(call.ny), stream=np.int64(e.stream),
        core_ranks=np.array(ranks, dtype=np.int64))
    res = [None] * len(order)
    for o, k in zip(outs, order):
        res[k] = output_value(o, call.out_shapes[k], call.int_outputs[k], call.x64)
    return tuple(res)


def output_type(shape, dtype, is_int: bool, x64: bool):
    """The type of a custom call's output (either platform): int64 indices
    are read as pairs of int32 (little-endian: low first) without x64."""
    if not is_int:
        return jax.ShapeDtypeStruct(shape, dtype)
    if x64:
        return jax.ShapeDtypeStruct(shape, np.int64)
    return jax.ShapeDtypeStruct(shape[:-1] + (2 * shape[-1],), np.int32)


def output_value(o, shape, is_int: bool, x64: bool):
    """A custom call's output as the reduction's (int32 pairs: the low half)."""
    return o.reshape(shape + (2,))[..., 0] if is_int and not x64 else o
