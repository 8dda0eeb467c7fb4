"""Density clustering: scikit-learn's DBSCAN and HDBSCAN on neighbour reductions.

What lives here: :class:`DBSCAN` (:mod:`._dbscan`): neighbour counts, the
components of the core points (:mod:`._hooking`) and the border points'
clusters, each a reduction over pairs of a metric's formula (the k-NN
family's metrics, :mod:`..neighbors._metrics`; euclidean fits over the
nearby k-means cells of :mod:`._cells` only, with
:mod:`kerneltools.ranges`), so that no neighbour list and no n x n array
is ever held; :class:`HDBSCAN` (:mod:`._hdbscan`), whose minimum spanning
tree of mutual reachability comes from Boruvka rounds (:mod:`._boruvka`,
with the union-find of :mod:`._components`) on the k-NN family's searches
and masked ``min_argmin`` reductions, whose ties are ordered as
scikit-learn's Prim's orders them (:mod:`._prim`), and whose single-linkage
and condensed trees (:mod:`._condense`) and cluster selection
(:mod:`._select`) are written here. What it may import: the public API
(LazyTensor, :mod:`kerneltools.ranges`), :mod:`kerneltools._utils`,
:mod:`.._shared`, the k-NN family (:class:`..neighbors.NearestNeighbors`,
its metrics) and scikit-learn's public classes; never the engine.
"""

from ._dbscan import DBSCAN
from ._hdbscan import HDBSCAN

__all__ = ["DBSCAN", "HDBSCAN"]
