"""CUDA kernels as XLA custom calls: what ``kerneltools.jax`` launches on
XLA's stream for arrays on a GPU.

The handler is host code (``templates/xla_ffi_cuda.h``, built by the CPU
backend's compiler against jaxlib's FFI C header:
:func:`kerneltools.backend.cpu._xla.ffi_handler` with ``platform="cuda"``).
XLA gives it its stream (``XLA_FFI_Stream_Get``) and the device buffers; it
calls the driver's ``cuLaunchKernel`` on the kernel that this backend
compiled with NVRTC (CuPy's ``RawModule``, loaded in the device's primary
context, which XLA shares). :func:`kernel_entry` gives what the call needs:
the kernel's ``CUfunction``, the launcher's address and the launch shape
(:class:`CudaEntry`). The kernel reads its arguments row-major and writes
its float outputs, then its index outputs (the order of
:meth:`._backend.CudaBackend.run`). Plans that use the opt-in tensor-core
kernel run the generic one here. This module imports no JAX; CuPy only when
called.
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass

from .._plan import Plan
from ._backend import CudaBackend, get_kernel

__all__ = ["CudaEntry", "kernel_entry", "launcher"]


@dataclass(frozen=True)
class CudaEntry:
    """A compiled CUDA kernel as the FFI handler launches it."""

    function: int  # its CUfunction (in the device's primary context)
    launch: int  # the address of cuLaunchKernel (or a stand-in of its signature)
    block: int  # threads per block
    grid: int  # blocks
    smem: int  # dynamic shared memory, bytes
    stream: bool = True  # launch on XLA's stream (False: a stand-in without one)


@functools.cache
def launcher() -> int:
    """The address of the CUDA driver's ``cuLaunchKernel`` (libcuda, which
    XLA and CuPy have loaded already)."""
    lib = ctypes.CDLL("libcuda.so.1")
    return ctypes.cast(lib.cuLaunchKernel, ctypes.c_void_p).value


def kernel_entry(plan: Plan, device: int = 0) -> CudaEntry | None:
    """The :class:`CudaEntry` of ``plan``'s kernel on the GPU ``device``
    (compiled by NVRTC once per plan and device), or None where the CUDA
    backend cannot run it (no usable GPU, CuPy or NVRTC; an unsupported
    plan)."""
    backend = CudaBackend()
    ok, _ = backend.available()
    if not ok or backend.unsupported(plan) is not None:
        return None
    import cupy

    with cupy.cuda.Device(device):
        kernel, launch = get_kernel(plan)
    function = getattr(kernel, "kernel", kernel)  # RawKernel -> its cuda Function
    return CudaEntry(int(function.ptr), launcher(), launch.block,
                     -(-plan.nx // launch.rows_per_block), launch.smem)
