"""CPU kernels as XLA custom calls: what ``kerneltools.jax`` runs under XLA.

:func:`ffi_handler` compiles (once per jaxlib FFI header, through the
kernel cache like every library of this backend) a generic XLA FFI handler,
``templates/xla_ffi_call.h``, written against the plain C API that jaxlib
ships (``xla/ffi/api/c_api.h``, inlined into the source so that the cache
key follows the header). It calls a generated kernel, whose address it
receives as an attribute, on XLA's buffers: no host round trip, no Python
in the loop, the kernel's own OpenMP team (where the kernels are built without OpenMP,
the handler splits the rows over threads of its own).

:func:`kernel_entry` gives that address for a plan, with its
:class:`Layout`: what the dense kernel of :mod:`._backend` reads
(i-variables and parameters row-major, j-variables packed by tiles of ``tj``
points, and, for its specialisations, the dot-product micro-kernel's chunks
and norms, the centring of far-off points, the many-column Sum's row-major
B), which the caller produces with array operations of its own (XLA fuses
them), as :meth:`._backend.CpuBackend.run` does with NumPy. The K-min runs
without its prefilter. The CUDA platform's handler (``platform="cuda"`` of
:func:`ffi_handler`, ``templates/xla_ffi_cuda.h``) is host code built here
too; :mod:`kerneltools.backend.cuda._xla` gives its kernels. The handlers
share ``templates/xla_ffi_common.h`` (attributes, errors, the batch walk).
This module imports no JAX.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path
from string import Template

from .._codegen import template_text
from .._plan import Plan
from ._backend import CpuBackend, get_kernel
from ._compiler import find_compiler
from ._dots import _CENTRE_SAMPLE
from ._gemm import many_columns, padded_columns
from ._layout import centring_args, dot_products, tile_free_args, tile_size
from ._library import KEY, library
from ._threads import cores, openmp_ran

__all__ = ["Entry", "Layout", "ffi_handler", "kernel_entry", "layout", "plain_layout",
           "watch_sigint"]


@dataclass(frozen=True)
class Layout:
    """The arrays a dense kernel reads besides its arguments, and how (what
    :meth:`._backend.CpuBackend.run` passes; the caller builds them)."""

    tile_free: tuple = ()  # j-arguments passed as a dummy (read through dots)
    dots: tuple = ()  # j-arguments also passed by chunks of vl, then their norms
    centring: tuple = ()  # ((positions), centre's j-argument): see _dots.centred
    gemm: int = -1  # the many-column Sum's B (row-major), or -1
    gemm_columns: int = 0  # its columns, padded
    vl: int = 16  # the chunks' vector length
    centre_sample: int = _CENTRE_SAMPLE  # rows of y that the centre is the mean of


@dataclass(frozen=True)
class Entry:
    """A compiled kernel as the FFI handler calls it."""

    address: int  # of its kt_kernel(r0, r1, ny, args, outs)
    tj: int  # the tile size of its packed j-variables
    state_size: int  # bytes of one output row's reduction state
    threads: int  # threads the handler splits rows over (1: the kernel's OpenMP)
    layout: Layout = Layout()


_handlers: dict[tuple, object] = {}
_kept: dict[str, object] = {}  # the kernels whose addresses were handed out stay loaded
#: platform -> (the handler's template, its function)
_HANDLERS = {"cpu": ("xla_ffi_call.h", "kt_ffi_reduce"),
             "cuda": ("xla_ffi_cuda.h", "kt_ffi_cuda_reduce")}


def ffi_handler(c_api_header: Path, platform: str = "cpu"):
    """The generic handler (an ``XLA_FFI_Handler``, a ctypes function of its
    loaded library) of ``platform``, built against the FFI C header
    ``c_api_header``: ``kt_ffi_reduce`` runs a CPU kernel; on ``"cuda"``,
    ``kt_ffi_cuda_reduce`` launches a CUDA kernel on XLA's stream
    (``templates/xla_ffi_cuda.h``: host code, built here by the C compiler,
    no CUDA toolkit)."""
    text = Path(c_api_header).read_text()
    found = _handlers.get((text, platform))
    if found is None:
        name, symbol = _HANDLERS[platform]
        source = Template(template_text(name)).substitute(
            c_api=text, common=template_text("xla_ffi_common.h"), key=KEY)
        lib = library(source)
        found = getattr(lib.cdll, symbol)
        found._kt_lib = lib  # keep the library alive with the function
        _handlers[(text, platform)] = found
    return found


def watch_sigint(handler) -> bool:
    """Whether Ctrl-C (SIGINT) stops ``handler``'s calls (the CPU handler of
    :func:`ffi_handler`) between two chunks of rows: its signal handler is
    chained in front of the process's (Python's), now unless it is there
    already (a later ``signal.signal(SIGINT, ...)`` replaces it: call again).
    False where SIGINT is ignored or has its default action."""
    return bool(handler._kt_lib.cdll.kt_watch_sigint())


def plain_layout(plan: Plan) -> bool:
    """Whether ``plan``'s dense kernel reads only its arguments, in the plain
    layout (see the module docstring)."""
    return not (dot_products(plan) or tile_free_args(plan) or centring_args(plan)
                or many_columns(plan))


def layout(plan: Plan) -> Layout:
    """The :class:`Layout` of ``plan``'s dense kernel."""
    gemm = many_columns(plan)
    return Layout(tile_free_args(plan), dot_products(plan), centring_args(plan),
                  gemm[1].attrs[1] if gemm else -1,
                  padded_columns(plan) if gemm else 0,
                  max(1, 64 // plan.dtype.itemsize))


def kernel_entry(plan: Plan) -> Entry | None:
    """The :class:`Entry` of ``plan``'s dense kernel (compiled or loaded from
    the kernel cache; the K-min's without the prefilter), or None where the
    CPU backend cannot run it."""
    backend = CpuBackend()
    ok, _ = backend.available()
    if not ok or backend.unsupported(plan) is not None:
        return None
    fn = get_kernel(plan, prefilter=False)
    _kept[fn._kt_key] = fn
    if find_compiler().openmp:
        openmp_ran()  # (a child forked later runs its OpenMP kernels on one thread)
        threads = 1
    else:  # kernels without OpenMP: the handler's threads (pthreads)
        threads = cores()
    return Entry(ctypes.cast(fn, ctypes.c_void_p).value, tile_size(plan),
                 fn._kt_state_size, threads, layout(plan))
