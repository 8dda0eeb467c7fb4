"""Density clustering: scikit-learn's DBSCAN on neighbour reductions.

What lives here: :class:`DBSCAN` (:mod:`._dbscan`): neighbour counts, the
components of the core points and the border points' clusters, each a
reduction over all pairs of a metric's formula (the k-NN family's metrics,
:mod:`..neighbors._metrics`), so that no neighbour list and no n x n array
is ever held. What it may import: the public API (LazyTensor),
:mod:`kerneltools._utils`, :mod:`.._shared` and the k-NN family's metrics;
never the engine.
"""

from ._dbscan import DBSCAN

__all__ = ["DBSCAN"]
