"""DBSCAN's clusters: the connected components of the core points.

Rounds of hooking (Shiloach and Vishkin, J. Algorithms 1982, with the
merges of a round done at once by :func:`scipy.sparse.csgraph.connected_components`):
each round, one ``Min`` reduction gives every core point the smallest label
among its neighbours; every such pair of labels is an edge between two
components, and the components of those edges merge, each labelled by its
smallest point. A component not yet whole merges with a neighbour each
round: O(log n) rounds. Labels only decrease and stay in their component, so
the last ones are each component's smallest point, whatever edges the
rounds found on the way: any edge between core points within ``eps`` is as
valid. So, cheapest first:

1. where points have many neighbours, rounds over every ``stride``-th core
   point only (1/stride of the columns);
2. the core points left alone by those (no sampled neighbour), against all
   core points: the smallest label other than their own among their
   neighbours;
3. rounds over all pairs, until no label changes.

Where the float32 bracket of :mod:`._near` is made, 1 to 3 use its
``eps - m`` test (pairs the exact test keeps too; float32 ``Min``); the
last rounds, in float64 over all pairs, check that no pair within ``eps``
joins two components. With :class:`._cells.Cells` every round reduces over
the kept cell pairs only, less those whose core points all carry one and
the same label already (their pairs lower no label): after the first
rounds, most.
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from ...lazy import Vi, Vj

__all__ = ["components", "min_label"]


def min_label(near, rows, cols, values, backend, ranges=None, test=None,
              other_than=None) -> np.ndarray:
    """For each point of ``rows``, the smallest ``values[c]`` over the points
    ``c`` of ``cols`` within ``eps`` (more than ``len(cols)`` and than every
    value where none is), over the pairs ``ranges`` keeps (None: all of
    them); ``test="certain"``: within the float32 ``eps - m`` of
    :meth:`._near.Near.certain` only; ``other_than`` (one value per row):
    only the values that differ from the row's."""
    big = float(max(len(cols), int(values.max(initial=-1)) + 1) + 1)
    if test == "certain":
        near_ij, dtype = near.certain(rows, cols), np.float32
    else:
        near_ij, dtype = near(rows, cols), near.dtype
    v = Vj(values.astype(dtype)[:, None])
    if other_than is not None:
        near_ij = near_ij * (Vi(other_than.astype(dtype)[:, None]) != v)
    F = (1 - near_ij) * big + v
    m = F.min(axis=1, backend=backend, ranges=ranges).ravel()
    return np.rint(np.minimum(m, big)).astype(np.int64)  # (no pair kept: inf)


def _merge(lab: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The labels after joining the components labelled ``a[k]`` and
    ``b[k]``: each by its smallest point."""
    n = len(lab)
    g = coo_matrix((np.ones(len(a), np.int8), (a, b)), shape=(n, n))
    _, comp = connected_components(g, directed=True, connection="weak")
    root = np.full(comp.max() + 1, n)
    np.minimum.at(root, comp, np.arange(n))
    return root[comp[lab]]


def _skipped(cells, core_idx, lab):
    """For each kept cell pair, whether both cells' core points all carry one
    and the same label (their pairs can lower no label); None: no cells."""
    if cells is None:
        return None
    cl = cells.labels[core_idx]
    lo = np.full(cells.n_cells, np.iinfo(np.int64).max)
    hi = np.full(cells.n_cells, -1)
    np.minimum.at(lo, cl, lab)
    np.maximum.at(hi, cl, lab)
    same = lo == hi
    return same[cells.a] & same[cells.b] & (lo[cells.a] == lo[cells.b])


def components(near, core_idx: np.ndarray, backend, say, t0, cells=None,
               stride: int = 1) -> np.ndarray:
    """The connected components of the core points (joined within ``eps``),
    each labelled by its smallest (local) index (see the module)."""
    lab = np.arange(len(core_idx))
    every = np.arange(len(core_idx))
    test = None
    if near.bracket(slice(0, 1), slice(0, 1)) is not None and len(lab) < 2**24:
        test = "certain"
    if stride > 1:
        lab = _rounds(near, core_idx, lab, backend, say, t0, cells, test,
                      every[::stride], until_slow=True)
        lab = _lonely(near, core_idx, lab, backend, cells, test)
        say(f"the points left alone: {len(np.unique(lab))} components", t0)
    if test is not None:
        lab = _rounds(near, core_idx, lab, backend, say, t0, cells, test, every)
    return _rounds(near, core_idx, lab, backend, say, t0, cells, None, every)


def _lonely(near, core_idx, lab, backend, cells, test) -> np.ndarray:
    """The core points alone in their component, joined to the smallest
    other label among their neighbours."""
    size = np.bincount(lab, minlength=len(lab))
    rows = np.flatnonzero(size[lab] == 1)
    if not len(rows) or len(rows) == len(lab):
        return lab
    rng = None if cells is None else cells.ranges(core_idx[rows], core_idx)
    m = min_label(near, core_idx[rows], core_idx, lab, backend, rng, test,
                  other_than=lab[rows])
    found = m < len(lab)
    return _merge(lab, lab[rows][found], m[found])


def _rounds(near, core_idx, lab, backend, say, t0, cells, test, cols,
            until_slow=False) -> np.ndarray:
    """Rounds from the labels ``lab`` until none changes, each point joined
    to the smallest label other than its own among its neighbours in
    ``cols`` (local); ``until_slow``: or until a round fails to halve the
    components (measured, 1.8e5 x 9 blobs over 1/22 of the columns: 2,681,
    2,455, then 2,444 components, 0.5 CPU s a round; the later passes join
    the rest)."""
    n_comp = len(np.unique(lab))
    for n_round in itertools.count(1):
        skip = _skipped(cells, core_idx, lab)
        if skip is not None and skip.all():
            return lab
        rng = None if cells is None else cells.ranges(core_idx, core_idx[cols], skip)
        m = min_label(near, core_idx, core_idx[cols], lab[cols], backend, rng, test,
                      other_than=lab)
        found = m <= lab[cols].max()  # (none near: more)
        if not np.any(found):
            return lab
        lab = _merge(lab, lab[found], m[found])
        before, n_comp = n_comp, len(np.unique(lab))
        part = (f" (1/{len(lab) // len(cols)} of the columns)"
                if len(cols) < len(lab) else "")
        say(f"round {n_round}{' (float32)' if test else ''}{part}: "
            f"{n_comp} components", t0)
        if until_slow and 2 * n_comp > before:
            return lab
    return lab
