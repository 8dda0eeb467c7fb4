"""Running K-smallest selection over tiles of values computed elsewhere (BLAS).

The engine's K-min reductions compute their values and select them in one
pass; here the values come in tiles (``rows x columns``, a matrix product's
output) and only the selection runs in C (``templates/tile_select.h``; the
NumPy functions below are the reference and the fallback without a
compiler). Each row keeps, in ``cap`` slots, the (value, column) pairs at
most its threshold: +inf at first, then a bound of the K-th smallest
value seen plus the row's ``slack``, found in the first tile that would
fill the slots and lowered at each compaction (when the slots are full).
Most values fail the threshold test, a vector comparison per 16; the rest
are appended, 16 columns at a time. A bound of the K-th is a bisection on
the value by vector counts (within 2^-12 of the range; no branch per
value to mispredict, as a quickselect's). A compaction frees at least
half of the free slots, else the row is flagged (``over``): the band of
values within the slack of the K-th is too dense for its slots.

Invariant: the kept pairs are all the values seen so far at most the
threshold, so they hold every value within ``slack`` of the K-th smallest
seen. :func:`rerank` then ranks the candidates by exact squared distances.
"""

from __future__ import annotations

import ctypes
import os
import threading

import numpy as np

from .._codegen import TEMPLATES
from .._errors import KernelStoreError
from ._compiler import find_compiler
from ._library import KEY, library

__all__ = ["TileState", "select_tile", "rerank", "compiled", "cells_kmin", "box_pairs"]

_SOURCE = (TEMPLATES / "tile_select.h").read_text()
_C_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_libs: dict = {}
_lock = threading.Lock()

_P = ctypes.c_void_p
_I = ctypes.c_int64
_CELLS = [_I, _I, *[_P] * 7, _I, _P, _I, _P, _I, _I, *[_P] * 6]
_BOX_PAIRS = [_I, _P, _P, _P, _I, *[_P] * 9]
_SIGNATURES = {
    "kt_select": [_I, _I, _P, _I, _I, _P, _P, _I, _I, _P, _P, _P, _P, _P, _P],
    "kt_rerank": [_I, _I, _I, _I, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P],
}


def compiled(dtype):
    """The loaded library for tiles of ``dtype`` (compiled once, cached on
    disk as the kernels are); None without a working C compiler, or where
    neither the kernel cache nor a temporary folder can store it."""
    dtype = np.dtype(dtype)
    lib = _libs.get(dtype)
    if lib is not None:
        return lib
    comp = find_compiler()
    if not comp.ok:
        return None
    with _lock:
        lib = _libs.get(dtype)
        if lib is None:
            try:
                lib = _libs[dtype] = _load(dtype, comp)
            except KernelStoreError:  # nowhere to store it: NumPy, as without a compiler
                return None
    return lib


def _load(dtype, comp):
    source = (f"typedef {_C_TYPES[dtype]} real_t;\n"
              f"#define KT_TILE_DOUBLE {int(dtype == np.float64)}\n" + _SOURCE)
    lib = library(source.replace("${key}", KEY), comp).cdll
    double_only = {"kt_cells_kmin": _CELLS, "kt_box_pairs": _BOX_PAIRS}
    signatures = dict(_SIGNATURES, **(double_only if dtype == np.float64 else {}))
    for name, argtypes in signatures.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = None, argtypes
    if dtype == np.float64:
        lib.kt_box_pairs.restype = _I
    return lib


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


class TileState:
    """The selection state of ``n`` rows: ``cap`` slots of (value, column)
    each, their counts, thresholds, slacks (float64, >= 0) and flags; the
    addresses of these arrays (taken once: a tile's call passes them)."""

    def __init__(self, n: int, k: int, cap: int, slack: np.ndarray, dtype):
        self.k, self.cap, self.dtype = k, cap, np.dtype(dtype)
        self.vals = np.empty((n, cap), self.dtype)
        self.cols = np.empty((n, cap), np.int64)
        self.cnt = np.zeros(n, np.int64)
        self.thr = np.full(n, np.inf, self.dtype)
        self.slack = np.ascontiguousarray(slack, np.float64)
        self.over = np.zeros(n, np.uint8)
        self.addresses = tuple(_address(a) for a in (
            self.vals, self.cols, self.cnt, self.thr, self.slack, self.over))


def select_tile(state: TileState, tile: np.ndarray, columns, rows, lib) -> None:
    """Fold ``tile`` (unit column stride) into ``state``: its rows are the
    state's ``rows`` (int64; None: all, in order), its columns ``columns``
    (an int64 array, or an int: the first of consecutive ones). In C with
    ``lib``, else in NumPy."""
    if lib is None:
        return _select_numpy(state, tile, columns, rows)
    s = state
    cmap = isinstance(columns, np.ndarray)
    lib.kt_select(tile.shape[0], tile.shape[1], _address(tile),
                  tile.strides[0] // tile.itemsize, 0 if cmap else columns,
                  None if rows is None else _address(rows),
                  _address(columns) if cmap else None, s.k, s.cap, *s.addresses)


def rerank(state: TileState, X: np.ndarray, Y: np.ndarray, labels, lib):
    """The K nearest candidates of each row by exact squared distance
    (float64 direct differences, ties by label): ``(d, labels)``, each
    (n, K); rows flagged in ``state.over`` are left unset. ``X``: the
    state's rows, ``Y``: the points of the columns, both float64;
    ``labels``: int64, one per column (None: the columns)."""
    s, n = state, len(state.cnt)
    d = np.empty((n, s.k))
    ind = np.empty((n, s.k), np.int64)
    if lib is None:
        return _rerank_numpy(s, X, Y, labels, d, ind)
    X, Y = (np.ascontiguousarray(a, np.float64) for a in (X, Y))
    pairs = np.empty(4 * s.cap, np.int64)  # 2 cap (distance, label) pairs
    lib.kt_rerank(n, X.shape[1], s.k, s.cap, _address(X), _address(Y),
                  None if labels is None else _address(labels), *s.addresses,
                  _address(d), _address(ind), _address(pairs))
    return d, ind


def _round_up(t: np.ndarray, dtype) -> np.ndarray:
    """The least values of ``dtype`` >= t (float64)."""
    r = t.astype(dtype)
    low = r.astype(np.float64) < t
    r[low] = np.nextafter(r[low], dtype.type(np.inf))
    return r


def _select_numpy(s: TileState, tile: np.ndarray, columns, rows) -> None:
    """:func:`select_tile` in NumPy: the kept pairs and the tile's values at
    most each row's threshold, compacted at once (a row whose pairs within
    the new threshold pass its slots is flagged)."""
    rows = np.arange(len(tile)) if rows is None else rows
    mine = np.flatnonzero(s.over[rows] == 0)
    live = rows[mine]
    t, thr = tile[mine], s.thr[live]
    valid = np.concatenate([np.arange(s.cap) < s.cnt[live, None],
                            t <= thr[:, None]], axis=1)
    vals = np.concatenate([s.vals[live], t], axis=1)
    if not isinstance(columns, np.ndarray):
        columns = columns + np.arange(t.shape[1])
    new = np.broadcast_to(columns, t.shape)
    cols = np.concatenate([s.cols[live], new], axis=1)
    vals[~valid] = np.inf
    full = valid.sum(axis=1) >= s.k
    if full.any():
        kth = np.partition(vals[full], s.k - 1, axis=1)[:, s.k - 1].astype(np.float64)
        thr[full] = np.minimum(thr[full], _round_up(kth + s.slack[live[full]], s.dtype))
    keep = valid & (vals <= thr[:, None])
    count = keep.sum(axis=1)
    order = np.argsort(~keep, axis=1, kind="stable")[:, : s.cap]
    ok = count <= s.cap
    rows = live[ok]
    s.vals[rows] = np.take_along_axis(vals, order, axis=1)[ok]
    s.cols[rows] = np.take_along_axis(cols, order, axis=1)[ok]
    s.cnt[rows], s.thr[rows] = count[ok], thr[ok]
    s.over[live[~ok]], s.cnt[live[~ok]] = 1, 0


def _rerank_numpy(s: TileState, X, Y, labels, d, ind):
    """:func:`rerank` in NumPy (padded candidates, masked to +inf)."""
    rows = np.flatnonzero(~s.over.astype(bool))
    width = int(s.cnt[rows].max(initial=0))
    if not len(rows) or width == 0:
        return d, ind
    cols = s.cols[rows, :width]
    valid = np.arange(width) < s.cnt[rows, None]
    cols = np.where(valid, cols, 0)
    diff = np.subtract(np.asarray(Y, np.float64)[cols],
                       np.asarray(X, np.float64)[rows, None, :])
    dist = np.where(valid, np.einsum("rcf,rcf->rc", diff, diff), np.inf)
    if labels is not None:
        cols = labels[cols]
    order = np.lexsort((cols, dist), axis=1)[:, : s.k]
    d[rows] = np.take_along_axis(dist, order, axis=1)
    ind[rows] = np.take_along_axis(cols, order, axis=1)
    return d, ind


def cells_kmin(X, Yt, labels, k, query_starts, pair_starts, pair_cells, cells, lo, hi,
               rows, lib):
    """The K nearest by squared distance (float64 direct differences; ties by
    label) of each query among the fitted points of its cell's cells: see
    ``kt_cells_kmin``; ``X`` (n, d), ``Yt`` (d, m), ``lo``, ``hi`` (cells, d)
    float64, C order, the rest int64 (``cells``: (cells, 2) ranges). In C
    (one thread per core, by chunks of query cells) with ``lib``, else in
    NumPy (no box skipping). Query q's results in row ``rows[q]``. Missing
    slots: +inf and -1."""
    n, m = len(X), Yt.shape[1]
    if lib is None:
        d, ind = np.full((n, k), np.inf), np.full((n, k), -1, np.int64)
        _cells_kmin_numpy(X, Yt, labels, k, query_starts, pair_starts,
                          cells[pair_cells], d, ind)
        out_d, out_i = np.empty_like(d), np.empty_like(ind)
        out_d[rows], out_i[rows] = d, ind
        return out_d, out_i
    d, ind = np.empty((n, k)), np.empty((n, k), np.int64)  # every row written
    cap = 2 * k + 64
    n_cells = len(query_starts) - 1
    arrays = (query_starts, pair_starts, pair_cells, cells, lo, hi, X)

    def run(bounds):
        v, c = np.empty(cap), np.empty(cap, np.int64)
        pairs = np.empty(4 * cap, np.int64)  # 2 cap (distance, label) pairs
        lib.kt_cells_kmin(*bounds, *(_address(a) for a in arrays), X.shape[1],
                          _address(Yt), m, _address(labels), k, cap, _address(rows),
                          _address(d), _address(ind), _address(v), _address(c),
                          _address(pairs))

    workers = max(1, min(os.cpu_count() or 1, n_cells // 64))
    edges = np.linspace(0, n_cells, 4 * workers + 1).astype(np.int64)
    chunks = list(zip(edges[:-1].tolist(), edges[1:].tolist()))
    if workers == 1:
        for b in chunks:
            run(b)
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(run, chunks))
    return d, ind


def _cells_kmin_numpy(X, Yt, labels, k, query_starts, pair_starts, ranges, d, ind):
    """:func:`cells_kmin` in NumPy, cell by cell."""
    for cell in range(len(query_starts) - 1):
        q0, q1 = query_starts[cell], query_starts[cell + 1]
        rs = ranges[pair_starts[cell] : pair_starts[cell + 1]]
        if q0 == q1 or not len(rs):
            continue
        cols = np.concatenate([np.arange(a, b) for a, b in rs])
        diff = X[q0:q1, None, :] - Yt[:, cols].T[None, :, :]
        dist = np.einsum("qcf,qcf->qc", diff, diff)
        lab = np.broadcast_to(labels[cols], dist.shape)
        order = np.lexsort((lab, dist), axis=1)[:, :k]
        w = order.shape[1]
        d[q0:q1, :w] = np.take_along_axis(dist, order, axis=1)
        ind[q0:q1, :w] = np.take_along_axis(lab, order, axis=1)
    return d, ind


def box_pairs(group_first, group_starts, candidates, lo, hi, radius, cell_lo, cell_hi,
              lib):
    """The candidates of each box within its radius, nearest first: see
    ``kt_box_pairs`` (``lo``, ``hi``, ``cell_lo``, ``cell_hi``: float64 C
    order, (boxes, d) and (cells, d); the rest int64, ``radius`` float64).
    ``(starts, cells)``: box a's pairs are ``cells[starts[a]:starts[a + 1]]``.
    In C with ``lib``, else in NumPy."""
    n = len(lo)
    sizes = np.diff(group_first) * np.diff(group_starts)
    if lib is None:
        return _box_pairs_numpy(group_first, group_starts, candidates, lo, hi, radius,
                                cell_lo, cell_hi, sizes)
    starts = np.zeros(n + 1, np.int64)
    cells = np.empty(int(sizes.sum()), np.int64)
    dist = np.empty(len(cells))
    if len(group_first) > 1:
        groups = (group_first, group_starts, candidates)
        soa = np.empty(2 * lo.shape[1] * max(int(np.diff(group_starts).max()), 1))
        boxes = (lo, hi, radius, cell_lo, cell_hi, starts, cells, dist, soa)
        used = lib.kt_box_pairs(len(group_first) - 1, *map(_address, groups),
                                lo.shape[1], *map(_address, boxes))
        cells = cells[:used].copy()
    return starts, cells


def _box_pairs_numpy(group_first, group_starts, candidates, lo, hi, radius, cell_lo,
                     cell_hi, sizes):
    """:func:`box_pairs` in NumPy: every (box, candidate of its group), the
    distances feature by feature, one stable sort by (box, distance)."""
    g = np.repeat(np.arange(len(sizes)), sizes)
    t = np.arange(len(g)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    width = np.diff(group_starts)[g]
    a = group_first[g] + t // np.maximum(width, 1)
    b = candidates[group_starts[g] + t % np.maximum(width, 1)]
    acc = np.zeros(len(a))
    for f in range(lo.shape[1]):
        gap = np.maximum(cell_lo[b, f] - hi[a, f], lo[a, f] - cell_hi[b, f])
        acc += np.maximum(gap, 0) ** 2
    dist = np.sqrt(acc)
    near = dist <= radius[a]
    a, b, dist = a[near], b[near], dist[near]
    order = np.lexsort((dist, a))
    starts = np.searchsorted(a[order], np.arange(len(lo) + 1))
    return starts.astype(np.int64), b[order]
