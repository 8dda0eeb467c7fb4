"""Semi-supervised label spreading and propagation on lazy kernel graphs.

:class:`LabelSpreading` and :class:`LabelPropagation` take scikit-learn's
arguments and give its attributes and label distributions. With the default
``kernel="rbf"`` the n x n affinity is never stored: each iteration is one
reduction of the RBF formula against the label matrix, and the row sums
(degrees) take one reduction, once (the off-diagonal kernel and normalised
affinity operators of :mod:`kerneltools.linalg`, the ones spectral
clustering uses). From 4,096 points on the CPU the reductions visit only
the pairs of k-means cells whose terms can matter: a cell pair is left out
only where all the terms left out of a row weigh at most 2^-53 of its total
(:mod:`._cells`). ``kernel="knn"`` builds the sparse k-NN graph with the
neighbours family's :class:`~kerneltools.estimators.NearestNeighbors`.
Callable kernels and sparse input go to scikit-learn's classes
(``fallback_``).

What lives here: the estimators in :mod:`._label_propagation`, the graphs
(lazy RBF, sparse k-NN) in :mod:`._graphs`, the RBF graph's cells in
:mod:`._cells`, the label iteration (written
against an injected graph product) in :mod:`._iteration`. What it may
import: the public API (:mod:`kerneltools.kernels`,
:mod:`kerneltools.linalg`), :mod:`kerneltools._utils`, the estimators'
shared helpers (:mod:`.._shared`) and the neighbours family.
"""

from ._label_propagation import LabelPropagation, LabelSpreading

__all__ = ["LabelPropagation", "LabelSpreading"]
