"""Imputation of missing values from neighbours: scikit-learn's KNNImputer.

What lives here: :class:`KNNImputer` (:mod:`._knn`), whose neighbours are
K-min reductions of the ``nan_euclidean`` formula over the donors of each
column, in linear memory. What it may import: the public API (LazyTensor),
:mod:`kerneltools._utils`, :mod:`.._shared` and scikit-learn's imputer base
class (its missing-value mask and indicator); never the engine.
"""

from ._knn import KNNImputer

__all__ = ["KNNImputer"]
