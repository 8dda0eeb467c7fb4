"""Radius searches over a block sparsity: the points within a squared
radius of each query, as CSR rows, exact in float64.

The pairs visited are those of a :class:`~._ranges.BlockSparsity` (cells
of queries x cells of points, see :mod:`kerneltools.ranges`); each squared
distance is summed feature by feature in float64 (``(x_0 - y_0)^2 +
(x_1 - y_1)^2 + ...``, no fused multiply-add), the sum scikit-learn's
trees compute, and tested against the query's squared radius: a pair at
the radius falls on the same side as there.

Two implementations, the same results:

* :func:`radius_blocks`, NumPy, block by block: the reference (and the
  route of the NumPy backend);
* :func:`radius_native`, the C backend's: a small kernel
  (``templates/radius_csr.h``, one per number of features, compiled once
  into the kernel cache like the generated reductions) that counts each
  query's points over its blocks, then, once the caller's CSR offsets are
  known, writes each row's squared distances and indices in one pass over
  the same pairs and sorts the row in place (by index, or by distance with
  ties by index). OpenMP over blocks; chunks of blocks between which
  Ctrl-C is seen. Measured against the engine's former route (a count, a
  masked K-min per K bucket, a NumPy CSR assembly), CPU seconds at 10^5 x
  10^5 blobs, D = 3, ~23 neighbours per point: see
  ``asv_bench/lof_meanshift_compare_results.md``.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import replace
from string import Template

import numpy as np

from .._codegen import TEMPLATES
from .._progress import chunks
from ._compiler import find_compiler
from ._library import KEY, library
from ._threads import cores, openmp_ran, run_pieces, split_weighted

__all__ = ["radius_blocks", "radius_native", "native_available"]

_I64 = ctypes.c_int64
_P = ctypes.c_void_p
_COMMON = [_I64, _P, _P, _P, _P, _I64, _P, _P, _P, _P, ctypes.c_int]
#: Pairs from which the kernel runs on every core (below, one thread: a few
#: milliseconds of work, where waking the others costs about as much on a
#: busy machine).
PARALLEL_PAIRS = 2**23
_loaded: dict[int, tuple] = {}
_lock = threading.Lock()


def native_available() -> bool:
    """Whether the C backend (a working compiler) can run :func:`radius_native`."""
    return find_compiler().ok


def _compiler():
    """The C backend's compiler, with ``-ffp-contract=off`` in place of its
    ``-ffp-contract=fast``: no fused multiply-add in the distances."""
    comp = find_compiler()
    flags = [f for f in comp.flags if not f.startswith("-ffp-contract")]
    return replace(comp, flags=[*flags, "-ffp-contract=off"])


def _library(dim: int):
    """(count, fill) of the kernel for ``dim`` features: from memory, the
    kernel cache, or the compiler (keyed by the source and the compiler's
    identity, as every C kernel)."""
    lib = _loaded.get(dim)
    if lib is not None:
        return lib
    with _lock:
        lib = _loaded.get(dim)
        if lib is not None:
            return lib
        comp = _compiler()
        text = Template((TEMPLATES / "radius_csr.h").read_text())
        so = library(text.substitute(dim=dim, key=KEY), comp).cdll
        count, fill = so.kt_radius_count, so.kt_radius_fill
        count.restype, count.argtypes = None, [*_COMMON, _P]
        fill.restype, fill.argtypes = _I64, [*_COMMON, _P, ctypes.c_int, _P, _P]
        _loaded[dim] = lib = (count, fill, so)
        return lib


def _over_blocks(fn, blk, b0: int, b1: int, weights, common: list, tail: list) -> int:
    """``fn`` (count or fill) over the blocks [b0, b1) of ``blk``, the sum of
    what it returns: on OpenMP's threads (``common``'s last item, the
    thread count), or, for a library built without OpenMP, on pieces of
    about equal ``weights`` (pairs) run on Python threads (``_threads``)."""
    threads = common[-1]
    if threads <= 1 or find_compiler().openmp:
        return fn(b1 - b0, blk[b0:b1].ctypes.data, *common, *tail)
    results = []

    def piece(a: int, b: int) -> None:
        sub = blk[b0 + a:b0 + b]
        results.append(fn(b - a, sub.ctypes.data, *common[:-1], 1, *tail))

    run_pieces(piece, split_weighted(weights[b0:b1], threads))
    if None in results:  # (count returns nothing)
        return None
    return min(results) if min(results) < 0 else sum(results)


def radius_native(x, y, sq_radius, side, *, exclude, by_distance: bool):
    """``(sqdist, indices, indptr)``: the CSR rows, in the caller's order, of
    the points ``y`` within ``sq_radius`` (one per query) of each query
    ``x`` over the blocks of ``side`` (a :class:`~._ranges.SortedSide`),
    float64 squared distances and int64 indices; query r leaves point
    ``exclude[r]`` out (-1 or None: none). By index, or by distance then
    index."""
    n, dim = x.shape
    count, fill, _ = _library(dim)
    oo, ro = side.out_order, side.red_order
    xs = np.ascontiguousarray(x if oo is None else x[oo], dtype=np.float64)
    thr = np.ascontiguousarray(sq_radius if oo is None else sq_radius[oo],
                               dtype=np.float64)
    ys = len(y) + 8  # (the rows of yt padded to whole vectors)
    yt = np.zeros((dim, ys))
    yt[:, :len(y)] = (y if ro is None else y[ro]).T
    jmap = np.arange(len(y), dtype=np.int64) if ro is None else ro
    imap = np.arange(n, dtype=np.int64) if oo is None else oo
    skip = np.full(n, -1, np.int64) if exclude is None else np.ascontiguousarray(
        exclude if oo is None else exclude[oo], dtype=np.int64)
    blk, red, pairs = side.native()
    blk = np.ascontiguousarray(blk, dtype=np.int64)
    red = np.ascontiguousarray(red, dtype=np.int64).reshape(-1, 2)
    threads = cores() if pairs > PARALLEL_PAIRS else 1
    if threads > 1 and find_compiler().openmp:
        openmp_ran()
    common = [red.ctypes.data, xs.ctypes.data, yt.ctypes.data, ys, thr.ctypes.data,
              jmap.ctypes.data, imap.ctypes.data, skip.ctypes.data, threads]
    cum = np.concatenate([[0], np.cumsum(red[:, 1] - red[:, 0])])
    weights = (blk[:, 1] - blk[:, 0]) * (cum[blk[:, 3]] - cum[blk[:, 2]])  # pairs
    counts = np.zeros(n, dtype=np.int64)
    per_block = max(1, pairs // max(1, len(blk))) * dim
    what = f"the radius search over {pairs:,} pairs (cpu)"
    for b0, b1 in chunks(len(blk), per_block, what=what, min_items=threads):
        _over_blocks(count, blk, b0, b1, weights, common, [counts.ctypes.data])
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    dist = np.empty(indptr[-1])
    ind = np.empty(indptr[-1], dtype=np.int64)
    tail = [indptr.ctypes.data, int(by_distance), dist.ctypes.data, ind.ctypes.data]
    for b0, b1 in chunks(len(blk), per_block, what=what, min_items=threads):
        bad = _over_blocks(fill, blk, b0, b1, weights, common, tail)
        if bad < 0:
            raise MemoryError("the radius search could not allocate a row's sort "
                              "buffer")
        if bad:  # the same arithmetic twice: cannot differ
            raise RuntimeError(f"the radius search's fill pass disagreed with its "
                               f"count on {bad} rows")
    return dist, ind, indptr


def radius_blocks(x, y, sq_radius, blocks, *, exclude, by_distance: bool):
    """:func:`radius_native` in NumPy, block by block: ``blocks`` are
    ``(rows, cols)`` index arrays (each query in one block at most)."""
    n = len(x)
    parts = [(np.zeros(0, np.int64),) * 2 + (np.zeros(0),)]
    for rows, cols in blocks:
        if len(rows) == 0 or len(cols) == 0:
            continue
        xr = np.asarray(x[rows], dtype=np.float64)
        yc = np.asarray(y[cols], dtype=np.float64)
        d = np.zeros((len(rows), len(cols)))
        for f in range(x.shape[1]):  # feature by feature: the C kernel's sum
            u = xr[:, f, None] - yc[None, :, f]
            d += u * u
        keep = d <= sq_radius[rows][:, None]
        if exclude is not None:
            keep &= exclude[rows][:, None] != cols[None, :]
        r, c = np.nonzero(keep)
        parts.append((rows[r], cols[c], d[r, c]))
    r, c, d = (np.concatenate(p) for p in zip(*parts))
    order = np.lexsort((c, d, r) if by_distance else (c, r))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=n), out=indptr[1:])
    return d[order], c[order], indptr
