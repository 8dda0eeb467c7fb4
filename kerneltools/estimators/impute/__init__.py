"""Imputation of missing values from neighbours: scikit-learn's KNNImputer.

What lives here: :class:`KNNImputer` (:mod:`._knn`), whose neighbours are
K-min reductions of the ``nan_euclidean`` formula over the donors of each
column, in linear memory, on the imputers' shared parameters and indicator
columns (:mod:`._indicator`, ours: scikit-learn's base class is private).
What it may import: the public API (LazyTensor), :mod:`kerneltools._utils`,
:mod:`.._shared` and scikit-learn's public classes (``MissingIndicator``);
never the engine.
"""

from ._knn import KNNImputer

__all__ = ["KNNImputer"]
