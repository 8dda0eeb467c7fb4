"""Union-find over n points, labelled by their smallest point when flat.

Boruvka's rounds (:mod:`._boruvka`) join a few edges per component each
round (one per component). :meth:`MinLabels.join` joins a round's edges at
once where they form a forest of components (after dropping an edge chosen
by both its ends), with one connected-components pass over the component
graph; otherwise (tied weights chosen inconsistently close a cycle)
:meth:`MinLabels.union` joins them one by one, skipping an edge that the
round's earlier ones joined, and :meth:`MinLabels.flatten` gives every
point its component's smallest point, the labels the next round's formula
reads.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
from scipy.sparse.csgraph import connected_components

__all__ = ["MinLabels"]


class MinLabels:
    """Components of ``n`` points; ``lab`` (after :meth:`flatten`) holds
    each point's smallest point of its component."""

    def __init__(self, n: int):
        self.lab = np.arange(n, dtype=np.int64)
        self._parent = self.lab.copy()

    def find(self, x: int) -> int:
        parent = self._parent
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:  # path compression
            parent[x], x = root, parent[x]
        return int(root)

    def union(self, x: int, y: int) -> None:
        rx, ry = self.find(x), self.find(y)
        if rx != ry:  # the smaller root stays root
            self._parent[max(rx, ry)] = min(rx, ry)

    def join(self, a: np.ndarray, b: np.ndarray):
        """Join the components of a round's edges ``(a, b)``; the edges
        kept (``(a, b)`` without those that close a cycle), flat labels."""
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        _, first = np.unique(lo * len(self.lab) + hi, return_index=True)
        first.sort()
        ua, ub = a[first], b[first]
        n = len(self.lab)
        old = np.unique(self.lab)
        g = scipy.sparse.coo_matrix((np.ones(len(ua)), (self.lab[ua], self.lab[ub])),
                                    shape=(n, n))
        _, cc = connected_components(g, directed=False)
        new = np.full(n, n, dtype=np.int64)
        np.minimum.at(new, cc[old], old)
        if len(old) - len(np.unique(cc[old])) != len(ua):  # a cycle: one by one
            keep = []
            for i, (x, y) in enumerate(zip(ua.tolist(), ub.tolist())):
                if self.find(x) != self.find(y):
                    self.union(x, y)
                    keep.append(i)
            self.flatten()
            return ua[keep], ub[keep]
        self.lab = new[cc[self.lab]]
        self._parent = self.lab.copy()
        return ua, ub

    def flatten(self) -> None:
        """Every point to its root (the smallest point of its component)."""
        parent = self._parent
        while True:
            up = parent[parent]
            if np.array_equal(up, parent):
                break
            parent = up
        self._parent = parent
        self.lab = parent.copy()
