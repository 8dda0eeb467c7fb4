"""The CPU backend: generated C kernels, compiled at run time, loaded with ctypes.

The C source of a plan comes from :mod:`._codegen` (see there for the
kernel's shape); :func:`._library.library` compiles and caches it (keyed by
the generated source and the compiler's identity and flags; only a library
whose folder, owner and recorded SHA-256 check out is loaded, see
``_cache.py``), and this module runs it: by chunks of rows (Ctrl-C is seen
between them), on OpenMP's threads, or on Python threads where the kernels
are built without OpenMP (:mod:`._threads`).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from .._codegen import MAX_COMPONENTS, unsupported, width
from .._errors import KernelStoreError
from .._plan import Plan
from .._progress import chunks
from ._codegen import generate_source
from ._layout import IB, centring_args, dot_products, tile_free_args, tile_size
from ._compiler import find_compiler
from ._dots import centred, row_sqnorms
from ._gemm import many_columns, pack_rows, padded_columns
from ._kmin import prefilter_arrays, prefilter_vars, prunes, worth
from ._library import KEY, compile_count, library
from ._threads import PARALLEL_PAIRS, before_call, cores, run_pieces, split_rows, \
    split_weighted

__all__ = ["CpuBackend", "generate_source", "compile_count", "MAX_COMPONENTS"]


# -- kernels: compiled and loaded by _library -----------------------------------
_functions: dict[str, object] = {}  # library key -> its kt_kernel, set up


@dataclass(frozen=True)
class _Warm:
    """What a plan's call needs besides its inputs, worked out once per plan."""

    fn: object  # the kernel's kt_kernel, set up by get_kernel
    tj: int  # the tile size: the j-variables' packing
    key: str  # the library's key (the record is stale once that is unloaded)
    dot_args: tuple = ()  # j-variables read through dot products (_dots)
    cost: int = 1  # the formula's width: the work per pair (chunk sizes)
    gemm: object = None  # the many-column Sum's padded columns (_gemm), or None
    tile_free: tuple = ()  # j-variables passed as a dummy (_dots)
    centring: tuple = ()  # the arguments moved near the origin (_dots)
    prefilter: bool = False  # the K-min prefilter's arrays are passed (_kmin)


_by_signature: dict = {}  # plan.signature -> _Warm: the warm path
_unstorable: dict = {}  # plan.signature -> why its kernel could not be stored


def get_kernel(plan: Plan, *, ranges: bool = False, prefilter: bool | None = None):
    """The compiled ``kt_kernel`` of ``plan`` (``ranges``: its block-sparse
    variant; ``prefilter``: see :func:`generate_source`), from
    :func:`._library.library`: memory, the kernel cache or the compiler."""
    comp = find_compiler()
    source = generate_source(plan, vector_math=comp.vector_math, key=KEY,
                             ranges=ranges, prefilter=prefilter)
    try:
        built = library(source, comp)
    except KernelStoreError as exc:  # this backend declines the plan from now on
        _unstorable[plan.signature] = str(exc)
        raise
    fn = _functions.get(built.key)
    if fn is None:
        lib = built.cdll
        fn = lib.kt_kernel
        fn.restype = None
        fn.argtypes = ([ctypes.c_int64] + [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 2
                       + [ctypes.c_void_p] * 2 if ranges else
                       [ctypes.c_int64] * 3 + [ctypes.c_void_p] * 2)
        fn._kt_lib = lib  # keep the library alive with the function
        fn._kt_key = built.key
        lib.kt_state_size.restype = ctypes.c_int64
        fn._kt_state_size = int(lib.kt_state_size())
        _functions[built.key] = fn
    return fn


def _warm(sig, make) -> _Warm:
    """The record of ``sig``, made by ``make()`` where there is none or its
    library is no longer the loaded one."""
    warm = _by_signature.get(sig)
    if warm is None or warm.fn is not _functions.get(warm.key):
        warm = make()
        if len(_by_signature) > 512:
            _by_signature.clear()
        _by_signature[sig] = warm
    return warm


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

        def make() -> _Warm:
            fn = get_kernel(plan, prefilter=kpf)
            gemm = padded_columns(plan) if many_columns(plan) else None
            return _Warm(fn, tile_size(plan), fn._kt_key, dot_products(plan), width(plan),
                         gemm, tile_free_args(plan), centring_args(plan),
                         kpf and gemm is None)

        warm = _warm(sig, make)
        fn, tj, dot_args = warm.fn, warm.tj, warm.dot_args
        # far from the origin: the dot products' points moved near it (_dots)
        args = centred(args, warm.centring, plan.dtype)
        if warm.prefilter:  # K-min of a squared distance: the prefilter's arrays
            # (_kmin), x's rows in their order there (the outputs are put back below)
            extra, xorder = prefilter_arrays(plan, args, tj, _pack_tiles)
            xk = prefilter_vars(plan)[0]
            args = [np.take(a, xorder, axis=0) if k == xk else a for k, a in enumerate(args)]
        # (the many-column Sum's B is passed row-major below, not as tiles)
        skip = many_columns(plan)[1].attrs[1] if warm.gemm is not None else -1
        # (and j-variables read only through dot products: _cpu_dots)
        arrays = [
            np.zeros(1, plan.dtype) if k == skip or k in warm.tile_free else
            _pack_tiles(a, tj) if cat == "j" else np.ascontiguousarray(a, dtype=plan.dtype)
            for k, (a, cat) in enumerate(zip(args, plan.arg_cats))
        ]
        vl = max(1, 64 // np.dtype(plan.dtype).itemsize)
        arrays += [_pack_chunks(np.asarray(args[k], dtype=plan.dtype), tj, vl) for k in dot_args]
        # (_cpu_dots; padded to whole tiles)
        arrays += [row_sqnorms(args[k], plan.dtype, -(-plan.ny // tj) * tj) for k in dot_args]
        if warm.gemm is not None:  # the many-column Sum's B, row-major (_gemm)
            arrays.append(pack_rows(np.asarray(args[skip], dtype=plan.dtype), tj, warm.gemm))
        if warm.prefilter:
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
        what = f"the {plan.reduction} reduction over {plan.nx:,} x {plan.ny:,} pairs (cpu)"
        # by chunks of rows: Ctrl-C is seen between chunks (see _progress)
        for r0, r1 in chunks(plan.nx, plan.ny * warm.cost, what=what, align=IB,
                             min_items=IB * cores()):
            _call_rows(fn, r0, r1, plan.ny, argv, outv)
        if warm.prefilter:  # rows back in the caller's order
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
        def make() -> _Warm:
            fn = get_kernel(plan, ranges=True)
            return _Warm(fn, 0, fn._kt_key)

        fn = _warm((plan.signature, "ranges"), make).fn
        # j-variables (d, js): padded by a vector, read by the whole-vector loops
        js = plan.ny + max(1, 64 // np.dtype(plan.dtype).itemsize)
        gemm = many_columns(plan)  # its B: row-major, after the variables (_gemm)
        skip = gemm[1].attrs[1] if gemm else -1
        arrays = []
        for k, (a, cat) in enumerate(zip(args, plan.arg_cats)):
            if k == skip:
                arrays.append(np.zeros(1, plan.dtype))
            elif cat == "j":
                a = np.asarray(a, dtype=plan.dtype)
                padded = np.zeros((a.shape[1], js), dtype=plan.dtype)
                padded[:, :plan.ny] = a.T
                arrays.append(padded)
            else:
                arrays.append(np.ascontiguousarray(a, dtype=plan.dtype))
        if gemm:
            arrays.append(pack_rows(np.asarray(args[skip], dtype=plan.dtype), 1,
                                    padded_columns(plan)))
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
        # by chunks of output blocks (rows are written in place through imap):
        # Ctrl-C is seen between chunks; a block's pairs weigh its share
        lens = red[:, 1] - red[:, 0]
        cum = np.concatenate([[0], np.cumsum(lens)])
        pairs = (blk[:, 1] - blk[:, 0]) * (cum[blk[:, 3]] - cum[blk[:, 2]])
        what = f"the block-sparse {plan.reduction} reduction over {int(npairs):,} pairs (cpu)"
        per_block = max(1, int(npairs) // max(1, len(blk))) * width(plan)
        for b0, b1 in chunks(len(blk), per_block, what=what, min_items=cores()):
            _call_blocks(fn, blk, b0, b1, pairs, red.ctypes.data, jmap.ctypes.data,
                         imap.ctypes.data, js, argv, outv)
        return tuple(outs)


def _call_rows(fn, r0: int, r1: int, ny: int, argv, outv) -> None:
    """``fn(r0, r1, ny, argv, outv)``: rows [r0, r1) of a kernel, on OpenMP's
    threads, else cut into one piece per core on Python threads (_threads)."""
    if find_compiler().openmp:
        before_call(fn)
        fn(r0, r1, ny, argv, outv)
    elif (r1 - r0) * ny <= PARALLEL_PAIRS:  # (the kernels' own threshold)
        fn(r0, r1, ny, argv, outv)
    else:
        run_pieces(fn, [(a, b, ny, argv, outv) for a, b in split_rows(r0, r1, cores(), IB)])


def _call_blocks(fn, blk, b0: int, b1: int, pairs, *rest) -> None:
    """The block-sparse kernel ``fn`` over output blocks [b0, b1) of ``blk``
    (``pairs``: each block's pairs; ``rest``: the arguments after them but
    for the pair count), as :func:`_call_rows`: pieces of about equal pairs."""
    *head, argv, outv = rest

    def call(a: int, b: int) -> None:
        sub = blk[b0 + a:b0 + b]
        fn(b - a, sub.ctypes.data, *head, int(pairs[b0 + a:b0 + b].sum()), argv, outv)

    npairs = int(pairs[b0:b1].sum())
    if find_compiler().openmp:
        before_call(fn)
        call(0, b1 - b0)
    elif npairs <= PARALLEL_PAIRS:
        call(0, b1 - b0)
    else:
        run_pieces(call, split_weighted(pairs[b0:b1], cores()))
