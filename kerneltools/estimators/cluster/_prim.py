"""scikit-learn's Prim order of the MST, replayed on the tie-eligible edges.

With tied mutual reachabilities several minimum spanning trees exist, and
the single-linkage tree (hence HDBSCAN's labels) depends on which one, on
its edges' orientation and on the order that sorting gives tied weights.
scikit-learn builds its tree with Prim's algorithm from point 0 over all
pairs: each step adds the outside point of smallest key (its least mutual
reachability to the tree), the lowest index among equal keys, through the
earliest-added tree point that reaches that key; then it sorts the edges
with ``np.argsort`` (not stable) in that order.

Prim's choice at every step is a lightest edge across a cut, and such an
edge is in some MST: it weighs exactly the bottleneck distance of its ends.
So Prim's algorithm run on any subgraph that holds every such *eligible*
edge makes the same choices as on the full graph. Here that subgraph is:

* every pair whose mutual reachability is a core distance,
  ``m_uv = max(c_u, c_v)``: the point with the larger core distance has no
  lighter edge at all, so the pair is eligible; it is among that point's
  nearest neighbours (``d_uv <= c_u``);
* the Boruvka MST's edges.

Another eligible pair of weight ``d_uv / alpha`` (a far pair) ties exactly
with an MST edge: :func:`exact_prim_mst` looks for two different far pairs
of exactly equal weight among the K nearest neighbours (K a few more than
``min_samples``) and the MST, and returns None when it finds one (points on
a lattice, duplicated, mirrored or evenly spaced points): the caller then
fits scikit-learn's own Prim's. Not detected: data whose only exactly
equal far distances all lie beyond every point's K nearest.
Of the edges kept, Prim's takes at most one per point, weight and lighter
subtree (:func:`_first_per_subtree`), and a point of larger core distance
gets its key once, from its earliest neighbour in the tree. The weights
are computed in float64 in scikit-learn's arithmetic (the features summed
in order, minkowski's powers by C's ``pow``), so that ties are its ties.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

__all__ = ["core_distances", "exact_prim_mst", "pair_distances"]


#: C's ``pow`` elementwise (NumPy's SIMD power differs in the last bit)
_CPOW = np.frompyfunc(math.pow, 2, 1)


def _pow(x: np.ndarray, p: float) -> np.ndarray:
    return _CPOW(x, p).astype(np.float64)


#: Pairs per block of :func:`pair_distances` (a block's differences: a few MB).
_PAIR_BLOCK = 4096


def pair_distances(X, a, b, name: str, params: dict, core=False) -> np.ndarray:
    """Distances of the pairs ``(X[a], X[b])`` as scikit-learn's
    ``DistanceMetric`` computes them (one feature after the other: a
    running sum, ``np.cumsum``); with ``core``, as its trees return them
    (minkowski's root by NumPy)."""
    p = params.get("p", 2)
    w = params.get("w")
    if name == "minkowski" and w is None:
        name = {1: "manhattan", 2: "euclidean"}.get(p, name)
        name = "chebyshev" if np.isinf(p) else name
    acc = np.empty(len(a))
    for s in range(0, len(a), _PAIR_BLOCK):
        diff = np.abs(X[a[s:s + _PAIR_BLOCK]] - X[b[s:s + _PAIR_BLOCK]])
        if not diff.shape[1]:
            acc[s:s + _PAIR_BLOCK] = 0.0
            continue
        if name == "chebyshev":
            acc[s:s + _PAIR_BLOCK] = diff.max(axis=1)
            continue
        if name == "euclidean":
            diff *= diff
        elif name != "manhattan":
            diff = _pow(diff, float(p))
            if w is not None:
                diff *= w
        acc[s:s + _PAIR_BLOCK] = np.cumsum(diff, axis=1)[:, -1]
    if name == "euclidean":
        return np.sqrt(acc)
    if name in ("manhattan", "chebyshev"):
        return acc
    return acc ** (1.0 / p) if core else _pow(acc, 1.0 / p)


class _Levels:
    """The single-linkage tree of an MST, for the question: which subtree
    (component of the MST edges lighter than ``w``) holds point ``x``?"""

    def __init__(self, slt, n: int):
        parent = np.arange(2 * n - 1)
        parent[slt["left_node"]] = np.arange(n, 2 * n - 1)
        parent[slt["right_node"]] = np.arange(n, 2 * n - 1)
        self.height = np.concatenate([np.full(n, -np.inf), slt["value"]])
        self.up = [parent]  # ancestors 1, 2, 4, ... levels up
        while len(self.up) < 64 and (self.up[-1] != self.up[-1][self.up[-1]]).any():
            self.up.append(self.up[-1][self.up[-1]])

    def below(self, x: np.ndarray, w: np.ndarray) -> np.ndarray:
        """The highest ancestor of each ``x`` lower than ``w``."""
        for anc in reversed(self.up):
            y = anc[x]
            x = np.where(self.height[y] < w, y, x)
        return x


def _same_root(name: str, params: dict) -> bool:
    """Whether the trees' distances are the pairs' (no minkowski root)."""
    p = params.get("p", 2)
    return name != "minkowski" or (params.get("w") is None
                                   and (p in (1, 2) or np.isinf(p)))


def core_distances(X, name, params, k, nbr_ind, pairs=False):
    """Each point's k-th smallest float64 distance among its K neighbours
    ``nbr_ind`` (itself included), scikit-learn's core distance; with
    ``pairs``, also the (n, K) pair distances (:func:`pair_distances`)."""
    n, K = nbr_ind.shape
    u, v = np.repeat(np.arange(n), K), nbr_ind.ravel()
    d = pair_distances(X, u, v, name, params, core=True)
    core = np.partition(d.reshape(n, K), k - 1, axis=1)[:, k - 1].copy()
    if not pairs:
        return core
    return core, d if _same_root(name, params) else pair_distances(
        X, u, v, name, params)


def _candidates(X, name, params, alpha, nbr_ind, core, nbr_d=None):
    """The neighbour pairs ``(u, v, d_uv, m_uv)``, or None if some point's
    list may miss a pair that weighs its core distance (``nbr_d``: their
    distances, if known)."""
    n, K = nbr_ind.shape
    idx = np.int32 if 2 * n < 2**31 else np.int64  # 2n: the tree's nodes
    u = np.repeat(np.arange(n, dtype=idx), K)
    v = nbr_ind.ravel().astype(idx)
    d = pair_distances(X, u, v, name, params) if nbr_d is None else nbr_d
    if K < n and not (d.reshape(n, K).max(axis=1) / alpha > core).all():
        return None  # a core pair (d_uv / alpha <= c_u) may lie beyond
    keep = u != v
    u, v, d = u[keep], v[keep], d[keep]
    m = np.maximum(core[u], core[v])
    np.maximum(m, d / alpha, out=m)
    return u, v, d, m


def exact_prim_mst(X, name, params, alpha, nbr_ind, mst_a, mst_b, slt, core,
                   nbr_d=None):
    """scikit-learn's Prim MST ``(source, new, weight)`` in its order, or
    None where exactly tied distances may lie beyond the neighbour lists.

    ``nbr_ind`` holds each point's K nearest (itself included), ``mst_a``,
    ``mst_b`` an MST's edges, ``slt`` its single-linkage tree and ``core``
    the core distances (:func:`core_distances`), ``nbr_d`` the neighbour
    pairs' distances if known.
    """
    n = len(X)
    cand = _candidates(X, name, params, alpha, nbr_ind, core, nbr_d)
    if cand is None:
        return None
    u, v, d, m = cand
    if (d == 0).any():
        return None  # duplicated points: tied distances to every other point
    w_mst = np.maximum(np.maximum(core[mst_a], core[mst_b]),
                       pair_distances(X, mst_a, mst_b, name, params) / alpha)
    if _far_ties(core, (u, v, m), (mst_a, mst_b, w_mst)):
        return None
    # core pairs, once each, from the list of an end z whose core distance
    # they weigh (z has no lighter edge: a singleton below it)
    z = (m == core[u]) & ((core[v] < core[u]) | ((core[v] == core[u]) & (u < v)))
    z, o, w = u[z], v[z], m[z]
    del u, v, d, m, cand
    both = core[o] == core[z]
    wake_by = np.concatenate([o, z[both]])  # reaching it gives the key
    wake = np.concatenate([z, o[both]])
    # z -> o's lighter subtree; the MST's edges both ways
    src = np.concatenate([z[~both], mst_a, mst_b])
    dst = np.concatenate([o[~both], mst_b, mst_a])
    w = np.concatenate([w[~both], w_mst, w_mst])
    sub = _Levels(slt, n).below(dst, w * (1 - 1e-12))
    return _prim(n, *_first_per_subtree(src, dst, w, sub), wake_by, wake, core)


def _far_ties(core, cand, mst) -> bool:
    """Whether two different far pairs (weighing their distance, over both
    core distances) among the neighbour pairs ``cand`` and the MST's edges
    weigh exactly the same, or one weighs a core distance.

    Without such a tie, the only far pairs whose ends are not joined by
    lighter edges (the only far pairs that can be in an MST) are the MST's
    own, so the core pairs and the MST hold every eligible edge, unless
    exactly equal distances lie only beyond every neighbour list.
    """
    def far(a, b, w):
        f = w > np.maximum(core[a], core[b])
        return a[f].astype(np.int64), b[f].astype(np.int64), w[f]

    (a, b, w), (ma, mb, mw) = far(*cand), far(*mst)
    a, b, w = np.concatenate([a, ma]), np.concatenate([b, mb]), np.concatenate([w, mw])
    if _distinct_pairs_tie(np.minimum(a, b), np.maximum(a, b), w):
        return True
    srt = np.sort(core)
    at = np.minimum(np.searchsorted(srt, w), len(srt) - 1)
    return bool((srt[at] == w).any())


def _distinct_pairs_tie(lo, hi, w) -> bool:
    """Whether two different pairs ``(lo, hi)`` (a pair may come twice)
    have exactly the same weight ``w``."""
    order = np.argsort(w)  # equal weights side by side
    w, lo, hi = w[order], lo[order], hi[order]
    same = w[1:] == w[:-1]
    return bool((same & ((lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1]))).any())


def _first_per_subtree(src, dst, w, sub):
    """Of a point's edges of one weight into one subtree ``sub`` (lighter
    joined), only the one to the lowest index: Prim's enters a subtree
    whole once it reaches it, at its lowest index reachable at that weight,
    so the others are never taken (nor are they the earliest source)."""
    order = np.lexsort((dst, sub, w, src))
    src, dst, w, sub = src[order], dst[order], w[order], sub[order]
    new = np.ones(len(src), bool)
    new[1:] = (src[1:] != src[:-1]) | (w[1:] != w[:-1]) | (sub[1:] != sub[:-1])
    return src[new], dst[new], w[new]


def _csr(n, src, *cols):
    order = np.lexsort(tuple(reversed(cols)) + (src,))
    ptr = np.searchsorted(src[order], np.arange(n + 1)).tolist()
    return ptr, [c[order].tolist() for c in cols]


def _prim(n, src, dst, w, wake_by=None, wake=None, core=None):
    """Prim's from point 0 with scikit-learn's tie rules, on a sparse graph:
    each tree point's edges sorted by (weight, index), one cursor each in
    the heap; and the points ``wake`` whose key is their core distance as
    soon as one of their ``wake_by`` is in the tree (their earliest)."""
    ptr, (wt, col) = _csr(n, src, w, dst)
    if wake is None:
        wake_by = wake = np.zeros(0, np.int64)
    wptr, (wcol,) = _csr(n, wake_by, wake)
    ckey = [] if core is None else core.tolist()
    cur, end = ptr[:-1], ptr[1:]
    intree, awake = bytearray(n), bytearray(n)
    node_at, heap = [], []
    out_s, out_d, out_w = [], [], []
    push, pop = heapq.heappush, heapq.heappop
    j = 0
    for i in range(n):
        if i:
            while True:  # the least (weight, index, source's time)
                wj, j, tt, c = pop(heap)
                t = node_at[tt]
                if c:  # a cursor: its next edge to a point outside
                    p, e = cur[t] + 1, end[t]
                    while p < e and intree[col[p]]:
                        p += 1
                    cur[t] = p
                    if p < e:
                        push(heap, (wt[p], col[p], tt, 1))
                if not intree[j]:
                    break
            out_s.append(t)
            out_d.append(j)
            out_w.append(wj)
        intree[j] = 1
        node_at.append(j)
        for z in wcol[wptr[j]:wptr[j + 1]]:
            if not awake[z] and not intree[z]:
                awake[z] = 1
                push(heap, (ckey[z], z, i, 0))
        p, e = cur[j], end[j]
        while p < e and intree[col[p]]:
            p += 1
        cur[j] = p
        if p < e:
            push(heap, (wt[p], col[p], i, 1))
    return (np.array(out_s, np.int64), np.array(out_d, np.int64),
            np.array(out_w, np.float64))
