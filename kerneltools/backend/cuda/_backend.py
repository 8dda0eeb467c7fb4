"""The CUDA backend: generated kernels compiled by NVRTC through CuPy.

The source of a plan and its launch shape come from :mod:`._cuda_codegen`
(see there for the kernel's shape); the compile-only check without a GPU
from :mod:`._nvrtc`. Detection never touches CUDA at import:
:func:`gpu_status` runs on first use and is cached. Kernels are compiled by
CuPy's ``RawModule`` (NVRTC, cached on disk by CuPy per architecture; in
memory where that disk refuses them, with one warning) and kept in memory
per device. With ``KERNELTOOLS_CUDA_TENSOR_CORES=1``, the
plans that :func:`._cuda_tcore.tcore_unsupported` accepts (float32 Gaussian
``K @ B`` at D >= 32) run on the tensor-core kernel instead (opt-in until
measured on a GPU). Block-sparse reductions (``ranges=``) run in one
launch of the generated block-sparse kernel (:meth:`CudaBackend.run_ranges`,
the C backend's interface).
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
import warnings

import numpy as np

from .._arrays import is_cupy_array
from .._codegen import unsupported
from ._codegen import (
    TUNING, choose_shape, generate_cuda_source, launch_shape, ranges_shape, ranges_tasks,
    ranges_unsupported,
)
from ._tcore import (
    generate_tcore_source, tcore_arguments, tcore_enabled, tcore_match, tcore_unsupported,
)
from .._errors import CacheWarning, CompileError, is_storage_error, outside_stacklevel
from ._nvrtc import NVRTC_OPTIONS, numbered, nvrtc, nvrtc_compile
from .._plan import Plan
from .._progress import compiling

# The generator's and the compile-only check's names are part of this
# backend's interface (the check command and the tests use them from here).
__all__ = [
    "CudaBackend", "gpu_status", "generate_cuda_source", "launch_shape", "nvrtc",
    "nvrtc_compile", "numbered", "NVRTC_OPTIONS", "TUNING", "ranges_tasks", "ranges_shape",
]


# -- detection ------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def gpu_status() -> tuple[bool, str]:
    """(usable, reason): CuPy importable, a device present, NVRTC loadable.

    Never raises and never warns; called on first use, not at import.
    """
    if os.environ.get("KERNELTOOLS_DISABLE_CUDA"):
        return False, "disabled by the environment variable KERNELTOOLS_DISABLE_CUDA"
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken install
        return False, (f"CuPy is not importable ({type(exc).__name__}: {exc}); "
                       "install it with pip install 'kerneltools[cuda]'")
    try:
        ok = cupy.is_available()
    except Exception:
        ok = False
    if not ok:
        try:
            n = cupy.cuda.runtime.getDeviceCount()
            why = "no CUDA device" if n == 0 else "the device is not usable"
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}"
        return False, f"CuPy {cupy.__version__} is installed but sees no usable GPU ({why})"
    try:
        major, minor = cupy.cuda.nvrtc.getVersion()
    except Exception as exc:
        return False, (f"a GPU is present but NVRTC cannot be loaded ({type(exc).__name__}); "
                       "pip install nvidia-cuda-nvrtc (same CUDA major version as CuPy)")
    try:
        name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        name = "a CUDA device"
    return True, f"{name}, CuPy {cupy.__version__}, NVRTC {major}.{minor}"


# -- running ------------------------------------------------------------------------
_kernels: dict = {}  # (device id, source key) -> cupy RawKernel
_kernel_lock = threading.Lock()
_by_signature: dict = {}  # (device id, plan signature) -> (kernel, Launch)
_compiles = [0]


def compile_count() -> int:
    return _compiles[0]


@functools.lru_cache(maxsize=None)
def _sm_count(device_id: int) -> int:
    import cupy

    return int(cupy.cuda.Device(device_id).attributes["MultiProcessorCount"])


def get_kernel(plan: Plan, shape=None, ranges: bool = False):
    """(RawKernel, Launch) of ``plan`` on the current device (``ranges``: its
    block-sparse variant; ``shape``: (block, rows), default by
    :func:`choose_shape`)."""
    import cupy

    dev = cupy.cuda.Device().id
    shape = shape or choose_shape(plan, _sm_count(dev))
    hit = _by_signature.get((dev, plan.signature, shape, ranges))
    if hit is not None:
        return hit
    source, launch = generate_cuda_source(plan, key="KT_KEY_PLACEHOLDER", shape=shape,
                                          ranges=ranges)
    key = hashlib.sha256(source.encode()).hexdigest()[:40]
    source = source.replace("KT_KEY_PLACEHOLDER", key)
    with _kernel_lock:
        kernel = _compiled(dev, key, source)
        if len(_by_signature) > 512:
            _by_signature.clear()
        _by_signature[(dev, plan.signature, shape, ranges)] = (kernel, launch)
    return kernel, launch


def _compiled(dev: int, key: str, source: str):
    """The RawKernel ``kt_kernel`` of ``source`` on device ``dev``, compiled
    once (the caller holds ``_kernel_lock``)."""
    import cupy

    kernel = _kernels.get((dev, key))
    if kernel is None:
        try:
            with compiling(f"the CUDA kernel {key[:12]}"):
                kernel = _compile_in_cupy(cupy, source)
        except cupy.cuda.compiler.CompileException as exc:
            raise CompileError(
                f"NVRTC failed on the generated CUDA kernel:\n{exc}\n\n"
                f"options: {' '.join(NVRTC_OPTIONS)}\n{numbered(source)}",
                log=str(exc),
            ) from None
        _compiles[0] += 1
        _kernels[(dev, key)] = kernel
    return kernel


_in_memory = [False]  # whether CuPy's disk cache refused a kernel in this process


def _compile_in_cupy(cupy, source: str):
    """``kt_kernel`` of ``source`` through CuPy, whose disk cache (a warm one
    is read even where it cannot be written) stores it. Where that cache
    cannot store it (full, read-only), CuPy compiles in memory
    (``CUPY_CACHE_IN_MEMORY``, for our compiles only) for the rest of the
    process, with one :class:`CacheWarning` naming the folder and the fix."""
    if not _in_memory[0]:
        try:
            return cupy.RawModule(code=source, options=NVRTC_OPTIONS).get_function(
                "kt_kernel")
        except OSError as exc:
            if not is_storage_error(exc):
                raise
            _in_memory[0] = True
            _warn_cupy_cache(cupy, exc)
    before = os.environ.get("CUPY_CACHE_IN_MEMORY")
    os.environ["CUPY_CACHE_IN_MEMORY"] = "1"  # read by CuPy at each compile
    try:
        return cupy.RawModule(code=source, options=NVRTC_OPTIONS).get_function("kt_kernel")
    finally:
        if before is None:
            os.environ.pop("CUPY_CACHE_IN_MEMORY", None)
        else:
            os.environ["CUPY_CACHE_IN_MEMORY"] = before


def _warn_cupy_cache(cupy, exc: OSError) -> None:
    try:
        folder = cupy.cuda.compiler.get_cache_dir()
    except AttributeError:  # a CuPy without it: its documented default
        folder = os.environ.get("CUPY_CACHE_DIR") or os.path.expanduser(
            "~/.cupy/kernel_cache")
    warnings.warn(
        f"CuPy's kernel cache folder {folder} cannot store new CUDA kernels "
        f"({exc.strerror or exc}); this process compiles them in memory. To fix: "
        "free space on its disk or make it writable, or set CUPY_CACHE_DIR to a "
        "folder you can write (CUPY_CACHE_IN_MEMORY=1: in memory, without this "
        "warning)",
        CacheWarning,
        stacklevel=outside_stacklevel(),
    )


def get_tcore_kernel(plan: Plan):
    """(RawKernel, TcoreLaunch) of ``plan``'s tensor-core kernel (see
    :mod:`._cuda_tcore`) on the current device."""
    import cupy

    dev = cupy.cuda.Device().id
    hit = _by_signature.get((dev, plan.signature, "tcore"))
    if hit is not None:
        return hit
    source, launch = generate_tcore_source(plan, key="KT_KEY_PLACEHOLDER")
    key = hashlib.sha256(source.encode()).hexdigest()[:40]
    source = source.replace("KT_KEY_PLACEHOLDER", key)
    with _kernel_lock:
        kernel = _compiled(dev, key, source)
        if launch.smem > 48 * 1024:  # past the default: opt in per kernel
            kernel.max_dynamic_shared_size_bytes = launch.smem
        _by_signature[(dev, plan.signature, "tcore")] = (kernel, launch)
    return kernel, launch


class CudaBackend:
    """Generated CUDA through CuPy; see the module docstring."""

    name = "cuda"

    def available(self) -> tuple[bool, str]:
        return gpu_status()

    def supports(self, plan: Plan) -> bool:
        return self.unsupported(plan) is None

    def unsupported(self, plan: Plan) -> str | None:
        """Why this backend cannot run ``plan`` (None: it can)."""
        return unsupported(plan, self.name, "CUDA", plan.red.cuda)

    def ranges_unsupported(self, plan: Plan) -> str | None:
        """Why the native block-sparse kernel cannot run ``plan`` (None: it
        can; else the dispatcher runs one dense reduction per block)."""
        return self.unsupported(plan) or ranges_unsupported(plan)

    def run(self, plan: Plan, args, **options):
        if tcore_enabled() and tcore_unsupported(plan) is None:
            out = self.run_tcore(plan, args)
            if out is not None:
                return out
        import cupy

        kernel, launch = get_kernel(plan)
        arrays, outs, ordered = _device_arrays(plan, args)
        grid = (-(-plan.nx // launch.rows_per_block),)
        kernel(grid, (launch.block,),
               (np.int64(plan.nx), np.int64(plan.ny), *arrays, *ordered),
               shared_mem=launch.smem)
        if any(is_cupy_array(a) for a in args):
            return tuple(outs)
        return tuple(cupy.asnumpy(o) for o in outs)

    def run_tcore(self, plan: Plan, args):
        """``plan`` (accepted by ``tcore_unsupported``) on the tensor-core
        kernel; outputs as :meth:`run`'s (None: non-finite data, which the
        generic kernel runs)."""
        import cupy

        prepared = tcore_arguments(plan, args, cupy)
        if prepared is None:
            return None
        c2, x, y, b, xn, yn = prepared
        kernel, launch = get_tcore_kernel(plan)
        E = tcore_match(plan).e
        out = cupy.empty((plan.nx, E), dtype=np.float32)
        grid = (-(-plan.nx // launch.rows_per_block),)
        kernel(grid, (launch.block,),
               (np.int64(plan.nx), np.int64(plan.ny), c2, x, y, b, xn, yn, out),
               shared_mem=launch.smem)
        outs = [out]
        if any(is_cupy_array(a) for a in args):
            return tuple(outs)
        return tuple(cupy.asnumpy(o) for o in outs)

    def run_ranges(self, plan: Plan, args, blk, red, jmap, imap, npairs: int):
        """The block-sparse reduction of ``plan`` in one launch (the C
        backend's interface, see ``CpuBackend.run_ranges``): ``args`` sorted,
        ``blk`` (B, 4) rows [r0, r1) and intervals ``red[v0:v1]`` per output
        block, ``jmap`` / ``imap`` the caller's indices; outputs in the
        caller's order, on the device when an argument was."""
        import cupy

        blk = np.asarray(blk, np.int64).reshape(-1, 4)
        heights = blk[:, 1] - blk[:, 0]
        # most output blocks in one task (threads past a block's rows idle)
        typical = int(np.percentile(heights[heights > 0], 90)) if (heights > 0).any() else 1
        kernel, launch = get_kernel(plan, ranges_shape(plan, typical), ranges=True)
        arrays, outs, ordered = _device_arrays(plan, args)
        tasks = ranges_tasks(blk, launch.rows_per_block)
        ints = [cupy.asarray(np.ascontiguousarray(a, dtype=np.int64).reshape(shape))
                for a, shape in ((tasks, (-1, 4)), (red, (-1, 2)), (jmap, (-1,)),
                                 (imap, (-1,)))]
        if len(tasks):
            kernel((len(tasks),), (launch.block,), (*ints, *arrays, *ordered),
                   shared_mem=launch.smem)
        if any(is_cupy_array(a) for a in args):
            return tuple(outs)
        return tuple(cupy.asnumpy(o) for o in outs)


def _device_arrays(plan: Plan, args):
    """(inputs on the device, outputs, outputs in the kernel's order: float
    outputs first, then the index outputs)."""
    import cupy

    arrays = [cupy.ascontiguousarray(cupy.asarray(a), dtype=plan.dtype) for a in args]
    E = plan.red.out_dim([f.dim for f in plan.formulas])
    shape = (plan.nx, plan.K, E) if plan.red.uses_k else (plan.nx, E)
    outs = [cupy.empty(shape, dtype=np.int64 if is_int else plan.dtype)
            for is_int in plan.red.int_outputs]
    ordered = [o for o, is_int in zip(outs, plan.red.int_outputs) if not is_int]
    ordered += [o for o, is_int in zip(outs, plan.red.int_outputs) if is_int]
    return arrays, outs, ordered
