"""The CPU backend: generated C + OpenMP kernels, compiled at run time.

The C source of a plan comes from :mod:`._cpu_codegen` (see there for the
kernel's shape); this module compiles it, loads it with ctypes and runs it.
Compiled libraries live in the kernel cache (:mod:`._cache`), keyed by the
generated source and the compiler's identity and flags, written to a
temporary name and renamed; only a library whose folder, owner and recorded
SHA-256 check out is loaded, anything else is rebuilt (see ``_cache.py``).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np

from ._cache import (
    atomic_write,
    cannot_store,
    kernel_folders,
    store_folder,
    store_library,
)
from .._codegen import MAX_COMPONENTS, unsupported, width
from ._compiler import find_compiler
from ._codegen import (
    IB,
    centring_args,
    dot_products,
    generate_source,
    tile_free_args,
    tile_size,
)
from ._dots import centred, row_sqnorms
from ._gemm import many_columns, pack_rows, padded_columns
from ._kmin import prefilter_arrays, prefilter_vars, prunes, worth
from ._dlopen import load_verified_library
from .._errors import CompileError, KernelStoreError, is_storage_error, storage_errno
from .._plan import Plan
from .._progress import chunks, compiling

__all__ = ["CpuBackend", "generate_source", "compile_count", "load_or_build",
           "MAX_COMPONENTS"]


# -- compilation and the cache ------------------------------------------------
_loaded: dict[str, object] = {}
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()
_compiles = [0]


def compile_count() -> int:
    """How many kernels this process has compiled (tests count recompilations)."""
    return _compiles[0]


def _carries(lib, key: str) -> bool:
    """Whether ``lib`` says it is the kernel ``key`` (a sanity check: its bytes
    were verified against the recorded digest before it was loaded)."""
    try:
        lib.kt_key.restype = ctypes.c_char_p
        return lib.kt_key().decode() == key
    except (AttributeError, UnicodeDecodeError):
        return False


_by_signature: dict = {}  # plan.signature -> (fn, tile size): the warm path
_unstorable: dict = {}  # plan.signature -> why its kernel could not be stored


def get_kernel(plan: Plan, *, ranges: bool = False, prefilter: bool | None = None):
    """The compiled ``kt_kernel`` of ``plan``: from memory, disk, or the compiler
    (``ranges``: its block-sparse variant; ``prefilter``: see
    :func:`generate_source`).

    The kernel key hashes the generated source itself (with the compiler's
    identity and flags), so a change to a template or a tile size can never
    pick up a library built from other code.
    """
    comp = find_compiler()
    source = generate_source(plan, vector_math=comp.vector_math, key="KT_KEY_PLACEHOLDER",
                             ranges=ranges, prefilter=prefilter)
    key = hashlib.sha256((source + "\n" + comp.identity).encode()).hexdigest()[:40]
    source = source.replace("KT_KEY_PLACEHOLDER", key)
    fn = _loaded.get(key)
    if fn is not None:
        return fn
    with _locks_guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        fn = _loaded.get(key)
        if fn is not None:
            return fn
        try:
            lib = load_or_build(source, comp, key)
        except KernelStoreError as exc:  # this backend declines the plan from now on
            _unstorable[plan.signature] = str(exc)
            raise
        fn = lib.kt_kernel
        fn.restype = None
        fn.argtypes = ([ctypes.c_int64] + [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 2
                       + [ctypes.c_void_p] * 2 if ranges else
                       [ctypes.c_int64] * 3 + [ctypes.c_void_p] * 2)
        fn._kt_lib = lib  # keep the library alive with the function
        fn._kt_key = key
        lib.kt_state_size.restype = ctypes.c_int64
        fn._kt_state_size = int(lib.kt_state_size())
        _loaded[key] = fn
        return fn


def load_or_build(source: str, comp, key: str):
    """The library of ``source`` (``key``: its hash with the compiler's
    identity): from the kernel cache, else compiled and stored.

    Missing, foreign, a link or not the recorded bytes: rebuilt, never run.
    A folder that cannot store the new kernel (full, read-only) gives way to
    the private temporary cache (see ``_cache.py``); :class:`KernelStoreError`
    where that too refuses it.
    """
    for folder in kernel_folders("cpu"):
        lib = load_verified_library(folder, key)
        if lib is not None and _carries(lib, key):
            return lib
    while True:
        folder = store_folder("cpu")  # KernelStoreError where none is left
        try:
            return _build(source, comp, folder, key)
        except OSError as exc:  # full, read-only: the next folder, if any
            if not (is_storage_error(exc) and cannot_store(folder, exc)):
                raise


def _build(source: str, comp, folder: Path, key: str):
    """Compile ``source`` into ``folder`` as ``key``; the loaded library.

    The source is kept as ``<key>.c`` (a compile error points to it); the
    compiler writes its output and its own temporary files (``TMPDIR``) in a
    private ``.tmp-build-*`` folder beside it, removed afterwards, so that a
    compile interrupted, or refused by a full disk, leaves no partial file
    under a kernel's name, and a full disk is the store folder's. OSError
    (:func:`is_storage_error`) where the folder cannot store the kernel.
    """
    src = folder / f"{key}.c"
    atomic_write(src, source.encode())
    work = tempfile.mkdtemp(dir=folder, prefix=".tmp-build-")
    try:
        built = os.path.join(work, f"{key}.so")
        try:
            with compiling(f"the C kernel {key[:12]}"):
                proc = comp.compile(str(src), built, tmpdir=work)
        except subprocess.TimeoutExpired as exc:
            raise CompileError(
                f"the C compiler did not finish the generated kernel {src} in "
                f"{exc.timeout:.0f} s",
                log=str(exc),
                source_path=str(src),
            ) from None
        _compiles[0] += 1
        if proc.returncode != 0:
            log = (proc.stderr or proc.stdout).strip()
            code = storage_errno(log)
            if code is not None:
                raise OSError(code, f"{os.strerror(code)} (the C compiler: {log[-300:]})")
            raise CompileError(
                f"the C compiler failed on the generated kernel {src}:\n{log[-4000:]}",
                log=log,
                source_path=str(src),
            )
        try:
            lib = store_library(folder, key, built)
        except OSError as exc:
            if is_storage_error(exc):
                raise
            lib, why = None, str(exc)
        if lib is None or not _carries(lib, key):
            raise CompileError(f"the compiled kernel {folder / key}.so does not load"
                               f"{': ' + why if lib is None else ''}", source_path=str(src))
        return lib
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _pack_tiles(a: np.ndarray, tj: int) -> np.ndarray:
    """(ny, d) -> tiles of (d, tj), zero-padded: the kernels' j-variable layout."""
    ny, d = a.shape
    nt = -(-ny // tj)
    packed = np.zeros((nt, d, tj), dtype=a.dtype)
    full = ny // tj
    if full:
        packed[:full] = a[: full * tj].reshape(full, tj, d).transpose(0, 2, 1)
    if ny % tj:
        packed[full, :, : ny % tj] = a[full * tj:].T
    return packed


def _pack_chunks(a: np.ndarray, tj: int, vl: int) -> np.ndarray:
    """(ny, d) -> chunks of (d, vl), zero-padded to whole tiles: the layout of
    the dot-product micro-kernel, which reads d consecutive vl-vectors."""
    ny, d = a.shape
    padded = -(-ny // tj) * tj
    out = np.zeros((padded // vl, d, vl), dtype=a.dtype)
    full = ny // vl
    out[:full] = a[: full * vl].reshape(full, vl, d).transpose(0, 2, 1)
    if ny % vl:
        out[full, :, : ny % vl] = a[full * vl:].T
    return out


# -- calls: fork safety and chunks ---------------------------------------------
#: [whether a kernel ran in this process, whether this process must run serial]
_omp_state = [False, False]


def _after_fork_in_child() -> None:
    """GNU OpenMP's thread pool does not survive ``fork``: a child that enters
    a parallel region after its parent used one waits forever for threads
    that only the parent has. Such a child runs its kernels on one thread."""
    if _omp_state[0]:
        _omp_state[1] = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _before_call(fn) -> None:
    if _omp_state[1] and not getattr(fn, "_kt_serial", False):
        fn._kt_lib.kt_set_parallel(0)
        fn._kt_serial = True
    _omp_state[0] = True


def _threads() -> int:
    return 1 if _omp_state[1] else max(1, len(os.sched_getaffinity(0))
                                        if hasattr(os, "sched_getaffinity")
                                        else os.cpu_count() or 1)


class CpuBackend:
    """Generated C with OpenMP; see the module docstring."""

    name = "cpu"

    def available(self) -> tuple[bool, str]:
        comp = find_compiler()
        if not comp.ok:
            return False, f"no usable C compiler: {comp.reason}"
        return True, f"generated C compiled by {comp.description}"

    def supports(self, plan: Plan) -> bool:
        if plan.signature in _by_signature:
            return True
        return self.unsupported(plan) is None

    def unsupported(self, plan: Plan) -> str | None:
        """Why this backend cannot run ``plan`` (None: it can)."""
        # its kernel could not be stored in this process (full or read-only
        # disks: see load_or_build); said by the error that found it
        if plan.signature in _unstorable:
            return _unstorable[plan.signature]
        return unsupported(plan, self.name, "C", plan.red.c)

    def run(self, plan: Plan, args, **options):
        # K-min of a squared distance, a large call: the prefilter's kernel
        # (_cpu_kmin; small calls keep the buffered one, and so do calls
        # whose data leave nothing to prune: _cpu_kmin.prunes)
        kpf = prefilter_vars(plan) is not None and worth(plan) and prunes(plan, args)
        sig = (plan.signature, "kpf") if kpf else plan.signature
        warm = _by_signature.get(sig)
        if warm is None or warm[0] is not _loaded.get(warm[2]):
            fn = get_kernel(plan, prefilter=kpf)
            gemm = padded_columns(plan) if many_columns(plan) else None
            warm = (fn, tile_size(plan), fn._kt_key, dot_products(plan), width(plan),
                    gemm, tile_free_args(plan), centring_args(plan), kpf and gemm is None)
            if len(_by_signature) > 512:
                _by_signature.clear()
            _by_signature[sig] = warm
        fn, tj, dot_args, cost = warm[0], warm[1], warm[3], warm[4]
        # far from the origin: the dot products' points moved near it (_cpu_dots)
        args = centred(args, warm[7], plan.dtype)
        if warm[8]:  # K-min of a squared distance: the prefilter's arrays (_cpu_kmin),
            # x's rows in their order there (the outputs are put back below)
            extra, xorder = prefilter_arrays(plan, args, warm[1], _pack_tiles)
            xk = prefilter_vars(plan)[0]
            args = [np.take(a, xorder, axis=0) if k == xk else a for k, a in enumerate(args)]
        # (the many-column Sum's B is passed row-major below, not as tiles)
        skip = many_columns(plan)[1].attrs[1] if warm[5] is not None else -1
        # (and j-variables read only through dot products: _cpu_dots)
        arrays = [
            np.zeros(1, plan.dtype) if k == skip or k in warm[6] else
            _pack_tiles(a, tj) if cat == "j" else np.ascontiguousarray(a, dtype=plan.dtype)
            for k, (a, cat) in enumerate(zip(args, plan.arg_cats))
        ]
        vl = max(1, 64 // np.dtype(plan.dtype).itemsize)
        arrays += [_pack_chunks(np.asarray(args[k], dtype=plan.dtype), tj, vl) for k in dot_args]
        # (_cpu_dots; padded to whole tiles)
        arrays += [row_sqnorms(args[k], plan.dtype, -(-plan.ny // tj) * tj) for k in dot_args]
        if warm[5] is not None:  # the many-column Sum's B, row-major (_cpu_gemm)
            arrays.append(pack_rows(np.asarray(args[skip], dtype=plan.dtype), tj, warm[5]))
        if warm[8]:
            arrays += extra
        E = plan.red.out_dim([f.dim for f in plan.formulas])
        shape = (plan.nx, plan.K, E) if plan.red.uses_k else (plan.nx, E)
        outs = [
            np.empty(shape, dtype=np.int64 if is_int else plan.dtype)
            for is_int in plan.red.int_outputs
        ]
        argv = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        scratch = np.empty(plan.nx * fn._kt_state_size, dtype=np.uint8)
        outv = (ctypes.c_void_p * (len(outs) + 1))(*[o.ctypes.data for o in outs],
                                                   scratch.ctypes.data)
        _before_call(fn)
        what = f"the {plan.reduction} reduction over {plan.nx:,} x {plan.ny:,} pairs (cpu)"
        # by chunks of rows: Ctrl-C is seen between chunks (see _progress)
        for r0, r1 in chunks(plan.nx, plan.ny * cost, what=what, align=IB,
                             min_items=IB * _threads()):
            fn(r0, r1, plan.ny, argv, outv)
        if warm[8]:  # rows back in the caller's order
            for o in outs:
                o[xorder] = o.copy()
        return tuple(outs)

    def run_ranges(self, plan: Plan, args, blk: np.ndarray, red: np.ndarray,
                   jmap: np.ndarray, imap: np.ndarray, npairs: int):
        """The block-sparse reduction of ``plan`` in one call: ``args`` sorted
        (blocks and intervals contiguous), ``blk`` (B, 4) int64 rows [r0, r1)
        and intervals ``red[v0:v1]`` of each output block, ``red`` (R, 2),
        ``jmap`` / ``imap`` the caller's index of each reduced position /
        output row. Every output row lies in one block (a block with no
        interval: the identity). Outputs in the caller's order."""
        key = (plan.signature, "ranges")
        warm = _by_signature.get(key)
        if warm is None or warm[0] is not _loaded.get(warm[2]):
            fn = get_kernel(plan, ranges=True)
            warm = (fn, None, fn._kt_key)
            if len(_by_signature) > 512:
                _by_signature.clear()
            _by_signature[key] = warm
        fn = warm[0]
        # j-variables (d, js): padded by a vector, read by the whole-vector loops
        js = plan.ny + max(1, 64 // np.dtype(plan.dtype).itemsize)
        arrays = []
        for a, cat in zip(args, plan.arg_cats):
            if cat == "j":
                a = np.asarray(a, dtype=plan.dtype)
                padded = np.zeros((a.shape[1], js), dtype=plan.dtype)
                padded[:, :plan.ny] = a.T
                arrays.append(padded)
            else:
                arrays.append(np.ascontiguousarray(a, dtype=plan.dtype))
        E = plan.red.out_dim([f.dim for f in plan.formulas])
        shape = (plan.nx, plan.K, E) if plan.red.uses_k else (plan.nx, E)
        outs = [
            np.empty(shape, dtype=np.int64 if is_int else plan.dtype)
            for is_int in plan.red.int_outputs
        ]
        blk = np.ascontiguousarray(blk, dtype=np.int64)
        red = np.ascontiguousarray(red, dtype=np.int64).reshape(-1, 2)
        jmap = np.ascontiguousarray(jmap, dtype=np.int64)
        imap = np.ascontiguousarray(imap, dtype=np.int64)
        argv = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        scratch = np.empty(plan.nx * fn._kt_state_size, dtype=np.uint8)
        outv = (ctypes.c_void_p * (len(outs) + 1))(*[o.ctypes.data for o in outs],
                                                   scratch.ctypes.data)
        _before_call(fn)
        # by chunks of output blocks (rows are written in place through imap):
        # Ctrl-C is seen between chunks; a block's pairs weigh its share
        lens = red[:, 1] - red[:, 0]
        cum = np.concatenate([[0], np.cumsum(lens)])
        pairs = (blk[:, 1] - blk[:, 0]) * (cum[blk[:, 3]] - cum[blk[:, 2]])
        what = f"the block-sparse {plan.reduction} reduction over {int(npairs):,} pairs (cpu)"
        per_block = max(1, int(npairs) // max(1, len(blk))) * width(plan)
        for b0, b1 in chunks(len(blk), per_block, what=what, min_items=_threads()):
            sub = blk[b0:b1]
            fn(b1 - b0, sub.ctypes.data, red.ctypes.data, jmap.ctypes.data, imap.ctypes.data,
               js, int(pairs[b0:b1].sum()), argv, outv)
        return tuple(outs)
