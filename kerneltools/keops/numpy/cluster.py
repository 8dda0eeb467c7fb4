"""``pykeops.numpy.cluster`` on kerneltools: grid clustering and block-sparsity ranges
(``grid_cluster``'s grid anchored at the origin, as pykeops.numpy's; see
:mod:`kerneltools.keops._cluster`)."""

from __future__ import annotations

import numpy as np

from .._cluster import functions


def _wrap(a, like, kind=None):
    return np.asarray(a, dtype=np.int64) if kind is int else np.asarray(a)


globals().update(functions(np.asarray, _wrap, origin=True))

__all__ = ["grid_cluster", "sort_clusters", "cluster_ranges", "cluster_centroids",
           "cluster_ranges_centroids", "from_matrix", "swap_axes"]
