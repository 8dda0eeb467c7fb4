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
  lighter edge at all, so the pair is eligible; both ends are then among
  each other's nearest neighbours (``d_uv <= c_u`` or ``c_v``);
* the pairs among the K nearest neighbours whose ends are not joined below
  their weight (a walk up the single-linkage tree of the Boruvka MST);
* the Boruvka MST's edges.

An eligible pair of weight ``d_uv / alpha`` beyond both ends' K nearest
can exist only if two pair distances are exactly equal (points on a
lattice, duplicated or mirrored points): :func:`exact_prim_mst` returns
None when it finds such equalities, and the caller fits scikit-learn's
own Prim's. The weights are computed in float64 in scikit-learn's
arithmetic (the features summed in order), so that ties are the same ties.
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


def pair_distances(X, a, b, name: str, params: dict, core=False) -> np.ndarray:
    """Distances of the pairs ``(X[a], X[b])`` as scikit-learn's
    ``DistanceMetric`` computes them (one feature after the other); with
    ``core``, as its trees return them (minkowski's root by NumPy)."""
    p = params.get("p", 2)
    w = params.get("w")
    if name == "minkowski" and w is None:
        name = {1: "manhattan", 2: "euclidean"}.get(p, name)
        name = "chebyshev" if np.isinf(p) else name
    acc = np.zeros(len(a))
    for f in range(X.shape[1]):
        diff = np.abs(X[a, f] - X[b, f])
        if name == "euclidean":
            acc += diff * diff
        elif name == "manhattan":
            acc += diff
        elif name == "chebyshev":
            np.maximum(acc, diff, out=acc)
        else:
            term = _pow(diff, float(p))
            acc += term if w is None else w[f] * term
    if name == "euclidean":
        return np.sqrt(acc)
    if name in ("manhattan", "chebyshev"):
        return acc
    return acc ** (1.0 / p) if core else _pow(acc, 1.0 / p)


def _below(parent, height, x, w):
    """The highest single-linkage ancestor of each ``x`` below ``w``."""
    up = [parent]
    while len(up) < 64 and (up[-1] != up[-1][up[-1]]).any():
        up.append(up[-1][up[-1]])
    for anc in reversed(up):
        y = anc[x]
        x = np.where(height[y] < w, y, x)
    return x


def _joined_below(slt, n, u, v, w):
    """Whether ``u`` and ``v`` are joined by MST edges lighter than ``w``."""
    parent = np.arange(2 * n - 1)
    parent[slt["left_node"]] = parent[slt["right_node"]] = np.arange(n, 2 * n - 1)
    height = np.concatenate([np.full(n, -np.inf), slt["value"]])
    return _below(parent, height, u, w) == _below(parent, height, v, w)


def core_distances(X, name, params, k, nbr_ind) -> np.ndarray:
    """Each point's k-th smallest float64 distance among its K neighbours
    ``nbr_ind`` (itself included), scikit-learn's core distance."""
    n, K = nbr_ind.shape
    d = pair_distances(X, np.repeat(np.arange(n), K), nbr_ind.ravel(), name,
                       params, core=True)
    return np.partition(d.reshape(n, K), k - 1, axis=1)[:, k - 1].copy()


def _candidates(X, name, params, alpha, nbr_ind, core):
    """The neighbour pairs ``(u, v, d_uv, m_uv)``, or None if some point
    has more points at its core distance than its list holds."""
    n, K = nbr_ind.shape
    u = np.repeat(np.arange(n), K)
    v = nbr_ind.ravel().astype(np.int64)
    d = pair_distances(X, u, v, name, params)
    if K < n and not (d.reshape(n, K).max(axis=1) > core).all():
        return None
    keep = u != v
    u, v, d = u[keep], v[keep], d[keep]
    return u, v, d, np.maximum(np.maximum(core[u], core[v]), d / alpha)


def exact_prim_mst(X, name, params, alpha, nbr_ind, mst_a, mst_b, slt, core):
    """scikit-learn's Prim MST ``(source, new, weight)`` in its order, or
    None where exactly tied distances may lie beyond the neighbour lists.

    ``nbr_ind`` holds each point's K nearest (itself included), ``mst_a``,
    ``mst_b`` an MST's edges, ``slt`` its single-linkage tree and ``core``
    the core distances (:func:`core_distances`).
    """
    n = len(X)
    cand = _candidates(X, name, params, alpha, nbr_ind, core)
    if cand is None:
        return None
    u, v, d, m = cand
    if (d == 0).any():
        return None  # duplicated points: tied distances to every other point
    md = pair_distances(X, mst_a, mst_b, name, params) / alpha
    mm = np.maximum(np.maximum(core[mst_a], core[mst_b]), md)
    dtype = m > np.maximum(core[u], core[v])
    # d-type pairs not joined below (a hair under) their weight
    elig = ~dtype
    elig[dtype] = ~_joined_below(slt, n, u[dtype], v[dtype], m[dtype] * (1 - 1e-12))
    a = np.concatenate([u[elig], mst_a])
    b = np.concatenate([v[elig], mst_b])
    w = np.concatenate([m[elig], mm])
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    _, first = np.unique(lo * n + hi, return_index=True)
    a, b, w = lo[first], hi[first], w[first]
    dt = w > np.maximum(core[a], core[b])
    wd = w[dt]
    if len(np.unique(wd)) < len(wd) or np.isin(wd, core).any():
        return None  # exactly tied pair distances: maybe more beyond the lists
    return _prim(n, np.concatenate([a, b]), np.concatenate([b, a]),
                 np.concatenate([w, w]))


def _prim(n, src, dst, w):
    """Prim's from point 0 with scikit-learn's tie rules, on a sparse graph:
    each tree point's edges sorted by (weight, index), one cursor each."""
    order = np.lexsort((dst, w, src))
    col, wt = dst[order].tolist(), w[order].tolist()
    ptr = np.searchsorted(src[order], np.arange(n + 1)).tolist()
    cur, end = ptr[:-1], ptr[1:]
    intree = bytearray(n)
    node_at, heap = [0], []
    out_s, out_d, out_w = [], [], []
    push, pop = heapq.heappush, heapq.heappop

    def advance(t, tt):
        p, e = cur[t], end[t]
        while p < e and intree[col[p]]:
            p += 1
        cur[t] = p
        if p < e:
            push(heap, (wt[p], col[p], tt))

    intree[0] = 1
    advance(0, 0)
    for i in range(1, n):
        while True:
            wj, j, tt = pop(heap)
            t = node_at[tt]
            cur[t] += 1
            advance(t, tt)
            if not intree[j]:
                break
        intree[j] = 1
        node_at.append(j)
        out_s.append(t)
        out_d.append(j)
        out_w.append(wj)
        advance(j, i)
    return (np.array(out_s, np.int64), np.array(out_d, np.int64),
            np.array(out_w, np.float64))
