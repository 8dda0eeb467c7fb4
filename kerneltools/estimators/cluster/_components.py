"""Union-find over n points, labelled by their smallest point when flat.

Boruvka's rounds (:mod:`._boruvka`) join a few edges per component each
round (one per component): :meth:`MinLabels.union` joins them one by one,
then :meth:`MinLabels.flatten` gives every point its component's smallest
point, the labels the next round's formula reads.
"""

from __future__ import annotations

import numpy as np

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
