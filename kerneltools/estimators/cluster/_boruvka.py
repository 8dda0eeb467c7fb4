"""The minimum spanning tree of mutual reachability, by Boruvka rounds.

HDBSCAN's tree (Campello, Moulavi and Sander, PAKDD 2013) is built on the
mutual reachability distance ``m_ij = max(c_i, c_j, d_ij / alpha)``, ``c``
the core distances. Boruvka's algorithm (1926) joins, each round, every
component to its nearest other component, so that at most log2(n) rounds
remain; a round needs each point's nearest point in another component.

Here that search is pruned by the K nearest neighbours found once (K a few
more than ``min_samples``): the best candidate among a point's neighbours
in other components is exact when it is no farther than the bound
``max(c_i, d_iK / alpha)`` that every non-neighbour exceeds, and a point
whose bound already exceeds its component's best candidate cannot give the
component's edge. Only the remaining points are searched exactly, with one
masked ``min_argmin`` reduction over all points (the component label a
variable of the formula, ``m`` compared in the metric's rdist space, where
it orders as the distance). Each chosen edge's weight is then computed in
float64 from its two points. Nothing of size n x n is stored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.sparse
from scipy.sparse.csgraph import breadth_first_order

from ...lazy import Vi, Vj, maximum
from ._components import MinLabels

__all__ = ["MSTProblem", "boruvka_mst"]

#: Late rounds (few components, many points to search): each such
#: component's points first get candidates from a k-NN search among the
#: points outside it, whose K-th distance bounds the rest (32 measured best
#: of 2, 8, 32, 64 and 128 on the benchmark's 10^5 x 2: 2.8 CPU s against
#: 3.9, 4.4, 3.2 and 4.2).
OUTSIDE_MIN_ROWS = 2048
OUTSIDE_MAX_COMPONENTS = 64
OUTSIDE_NEIGHBORS = 32
#: From this many components to search, in this many features or more (where
#: the k-NN search builds an index of groups for its GEMM tiles, the larger
#: part of a search), :func:`_outside_grouped`. Measured: 4*10^4 x 228,
#: 41.7 -> 33.4 CPU s a fit; 10^5 x 2 (cell searches, cheap to build):
#: 5.6 -> 8.4, so not there.
OUTSIDE_GROUPED_FROM = 8
OUTSIDE_GROUPED_DIMS = 16
#: Added to the formula's value for a pair in one component (never chosen).
_SAME = 1e300


@dataclass
class MSTProblem:
    """What Boruvka's rounds need: the points, core distances, neighbours."""

    P: np.ndarray  # the points, prepared for the metric's formula (float64)
    core: np.ndarray  # core distances
    nbr_dist: np.ndarray  # (n, K) distances of the K nearest, increasing
    nbr_ind: np.ndarray  # (n, K) their indices
    rdist: Callable  # the metric's rdist formula of (x_i, y_j)
    to_rdist: Callable  # distances -> rdist values (increasing)
    dist: Callable  # (a, b) index arrays -> float64 distances of the pairs
    alpha: float
    backend: object
    #: ``knn(rows, among, k)``: (distances, indices into ``among``) of the k
    #: nearest points of ``among`` to each point of ``rows`` (the k-NN search)
    knn: Callable
    #: a lower bound of each point's mutual reachability to every point
    #: outside its component, kept across rounds (components only grow, so
    #: a bound found in one round holds in the next ones)
    lower: np.ndarray | None = None


def _weights(pb: MSTProblem, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.maximum(np.maximum(pb.core[a], pb.core[b]), pb.dist(a, b) / pb.alpha)


def _candidates(pb: MSTProblem, comp: np.ndarray):
    """Each point's best neighbour in another component: (weight, index)."""
    other = comp[pb.nbr_ind] != comp[:, None]
    m = np.maximum(np.maximum(pb.core[:, None], pb.core[pb.nbr_ind]),
                   pb.nbr_dist / pb.alpha)
    m = np.where(other, m, np.inf)
    k = np.argmin(m, axis=1)
    rows = np.arange(len(comp))
    return m[rows, k], pb.nbr_ind[rows, k]


def _exact(pb: MSTProblem, rows: np.ndarray, comp: np.ndarray) -> np.ndarray:
    """The nearest point of another component of each point of ``rows``."""
    R = pb.to_rdist(pb.alpha * pb.core).astype(np.float64)[:, None]
    c = comp.astype(np.float64)[:, None]
    mr = maximum(maximum(Vi(R[rows]), Vj(R)), pb.rdist(Vi(pb.P[rows]), Vj(pb.P)))
    same = (Vi(c[rows]) - Vj(c)) ** 2 < 0.25
    _, j = (mr + same * _SAME).min_argmin(axis=1, backend=pb.backend)
    return j.ravel().astype(np.int64)


def _apply(pb: MSTProblem, rows, d, i, exact, w, j, bound) -> None:
    """Candidates and bounds of ``rows`` from their nearest points ``i``
    outside their component, at distances ``d`` (increasing, inf where
    missing; ``exact``: every outside point seen), in place: the K-th
    distance bounds a point's other edges."""
    m = np.maximum(np.maximum(pb.core[rows, None], pb.core[i]), d / pb.alpha)
    best = np.argmin(m, axis=1)
    r = np.arange(len(rows))
    mb = m[r, best]
    better = mb < w[rows]
    w[rows[better]], j[rows[better]] = mb[better], i[r, best][better]
    rest = np.where(exact, np.inf, np.maximum(pb.core[rows], d[:, -1] / pb.alpha))
    bound[rows] = np.maximum(bound[rows], rest)
    pb.lower[rows] = np.where(exact, mb, np.maximum(pb.lower[rows],
                                                    np.minimum(mb, rest)))


def _outside(pb: MSTProblem, comp, need, w, j, bound) -> None:
    """For the points ``need``, candidates and bounds from their K nearest
    points outside their component (one k-NN search per component)."""
    for c in np.unique(comp[need]):
        rows = need[comp[need] == c]
        among = np.flatnonzero(comp != c)
        k = min(OUTSIDE_NEIGHBORS, len(among))
        d, i = pb.knn(rows, among, k)
        _apply(pb, rows, d, among[i], np.full(len(rows), k == len(among)),
               w, j, bound)


def _outside_grouped(pb: MSTProblem, comp, need, w, j, bound) -> None:
    """:func:`_outside` with fewer indices to build: the components in
    about sqrt(C) groups, one search of each group's points for the points
    of the other groups, and one per component among its own group's
    other points; each point's K nearest of those lists are its K nearest
    outside its component (every list's K-th bounds what it left out)."""
    labels = np.unique(comp)
    n_groups = math.isqrt(len(np.unique(comp[need])) - 1) + 1
    group = np.zeros(len(comp), np.int64)
    group[labels] = np.arange(len(labels)) % n_groups
    g_pt, k = group[comp], OUTSIDE_NEIGHBORS
    pos = np.empty(len(comp), np.int64)
    pos[need] = np.arange(len(need))
    D = np.full((len(need), n_groups * k), np.inf)
    ind = np.zeros((len(need), n_groups * k), np.int64)

    def search(rows, among, col):
        kk = min(k, len(among))
        if len(rows) and kk:
            d, i = pb.knn(rows, among, kk)
            D[pos[rows], col:col + kk], ind[pos[rows], col:col + kk] = d, among[i]

    for g in range(n_groups):
        among = np.flatnonzero(g_pt == g)
        search(need[g_pt[need] != g], among, g * k)
        for c in np.unique(comp[need][g_pt[need] == g]):
            search(need[comp[need] == c], among[comp[among] != c], g * k)
    order = np.argsort(D, axis=1, kind="stable")[:, :k]
    d = np.take_along_axis(D, order, axis=1)
    exact = ~np.isfinite(d[:, -1])  # fewer than K outside points in all
    _apply(pb, need, d, np.take_along_axis(ind, order, axis=1), exact, w, j, bound)


def _round(pb: MSTProblem, comp: np.ndarray):
    """One Boruvka round: each component's lightest outgoing edge (a, b)."""
    n = len(comp)
    w, j = _candidates(pb, comp)
    best = np.full(n, np.inf)
    np.minimum.at(best, comp, w)
    if pb.lower is None:
        pb.lower = np.zeros(n)
    bound = np.maximum(np.maximum(pb.core, pb.nbr_dist[:, -1] / pb.alpha), pb.lower)
    if pb.nbr_dist.shape[1] < n:  # else every point is a neighbour: exact
        need = np.flatnonzero(bound < best[comp])
        if len(need) > OUTSIDE_MIN_ROWS and len(np.unique(comp[need])) <= (
                OUTSIDE_MAX_COMPONENTS):
            many = (len(np.unique(comp[need])) >= OUTSIDE_GROUPED_FROM
                    and pb.P.shape[1] >= OUTSIDE_GROUPED_DIMS)
            (_outside_grouped if many else _outside)(pb, comp, need, w, j, bound)
            best = np.full(n, np.inf)
            np.minimum.at(best, comp, w)
            need = np.flatnonzero(bound < best[comp])
        if len(need):
            j[need] = _exact(pb, need, comp)
            w[need] = _weights(pb, need, j[need])
            pb.lower[need] = w[need]
    order = np.lexsort((np.arange(n), w))  # lightest first, ties by index
    _, first = np.unique(comp[order], return_index=True)
    a = order[first]
    return a, j[a]


def boruvka_mst(pb: MSTProblem, say=None) -> tuple:
    """The MST's n - 1 edges ``(a, b, weight)`` of mutual reachability."""
    n = len(pb.core)
    comps = MinLabels(n)
    ea, eb = [], []
    n_round = 0
    n_edges = 0
    while n_edges < n - 1:
        a, b = comps.join(*_round(pb, comps.lab))
        ea.append(a)
        eb.append(b)
        n_edges += len(a)
        n_round += 1
        if say:
            say(f"Boruvka round {n_round}: {n - n_edges} components")
    a, b = _from_root(np.concatenate(ea).astype(np.int64),
                      np.concatenate(eb).astype(np.int64), n)
    return a, b, _weights(pb, a, b)


def _from_root(a: np.ndarray, b: np.ndarray, n: int):
    """The edges oriented away from point 0 (Prim's ``(tree node, new
    node)``, which scikit-learn's single-linkage tree keeps as left, right)."""
    graph = scipy.sparse.coo_matrix((np.ones(len(a)), (a, b)), shape=(n, n))
    _, pred = breadth_first_order(graph, 0, directed=False)
    flip = pred[a] == b  # b is a's parent
    return np.where(flip, b, a), np.where(flip, a, b)
