"""The graphs that LabelSpreading and LabelPropagation iterate with (private).

Each graph is an object with ``matmat(F)`` (the product with the label
matrix ``F``, float64) and ``to_dense()`` (the matrix scikit-learn's
``_build_graph`` returns, for small n only):

- :class:`RbfGraph`: the RBF affinity ``W = exp(-gamma |x_i - x_j|^2)``
  applied as reductions, never stored. Its off-diagonal part is
  :class:`~kerneltools.linalg.OffDiagonalKernel` (the operator spectral
  clustering uses), its row sums are computed once. Label spreading
  multiplies by ``S = D^-1/2 (W - diag W) D^-1/2``
  (:class:`~kerneltools.linalg.NormalizedAffinityOperator`: scikit-learn's
  negated normalised Laplacian with a zero diagonal, isolated points of
  degree 1); label propagation by ``D^-1 W`` with the diagonal kept
  (``D`` the row sums of ``W`` itself), as scikit-learn's ``_build_graph``.
- :class:`SparseGraph`: the k-NN connectivity graph (each point its own first
  neighbour, scikit-learn's ``kneighbors_graph(X_, k)``) from kerneltools'
  :class:`~kerneltools.estimators.NearestNeighbors`, normalised as
  scikit-learn does with SciPy: ``O(n k)`` memory.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
from scipy.sparse import csgraph

from ...kernels import make_kernel
from ...linalg import KernelOperator, NormalizedAffinityOperator, OffDiagonalKernel
from ...linalg import translated
from ..neighbors import NearestNeighbors

__all__ = ["RbfGraph", "SparseGraph", "rbf_weights"]


class RbfGraph:
    """The normalised RBF graph of ``X`` for ``variant`` ("spreading" or
    "propagation"), as reductions on ``backend``."""

    def __init__(self, X, gamma, variant, *, backend=None):
        self.kernel = make_kernel("rbf", gamma=float(gamma))
        self.variant = variant
        self.W0 = OffDiagonalKernel(self.kernel, translated(self.kernel, X),
                                    backend=backend)
        if variant == "spreading":
            self.op = NormalizedAffinityOperator(self.W0, 0.0)
        else:
            # rows of W with its diagonal (k(x, x) = 1): d = (W - diag W) 1 + 1
            self.self_values = self.W0.self_values
            ones = np.ones((X.shape[0], 1), dtype=X.dtype)
            self.degrees = (np.asarray(self.W0.matmat(ones), np.float64).ravel()
                            + self.self_values)

    def matmat(self, F):
        """The graph times ``F`` (n, c), in float64."""
        if self.variant == "spreading":
            return np.asarray(self.op.matmat(F), np.float64)
        WF = np.asarray(self.W0.matmat(F), np.float64) + self.self_values[:, None] * F
        return WF / self.degrees[:, None]

    def to_dense(self):
        """The graph as a dense float64 array (n^2 memory: small n only)."""
        if self.variant == "spreading":
            return self.op.to_dense()
        W = self.W0.to_dense() + np.diag(self.self_values)
        return W / self.degrees[:, None]


class SparseGraph:
    """The k-NN connectivity graph of ``X``, normalised for ``variant``.

    ``nn`` is the fitted :class:`NearestNeighbors` (kept by the estimator
    as ``nn_fit`` for ``predict``)."""

    def __init__(self, X, n_neighbors, variant, *, n_jobs=None):
        self.nn = NearestNeighbors(n_neighbors=n_neighbors, n_jobs=n_jobs).fit(X)
        A = self.nn.kneighbors_graph(X, n_neighbors, mode="connectivity")
        A = scipy.sparse.csr_matrix(A, dtype=np.float64)
        if variant == "spreading":
            # scikit-learn: -laplacian(A, normed=True) with its diagonal zeroed
            # (degrees are column sums without the diagonal; isolated: 1)
            S = -scipy.sparse.csr_matrix(csgraph.laplacian(A, normed=True))
            S.setdiag(0.0)
            S.eliminate_zeros()
        else:
            S = scipy.sparse.diags(1.0 / np.ravel(A.sum(axis=1))) @ A
        self.graph = S.tocsr()

    def matmat(self, F):
        return np.asarray(self.graph @ F, np.float64)

    def to_dense(self):
        return self.graph.toarray()


def rbf_weights(X_fit, X, gamma, F, *, backend=None):
    """``k(X, X_fit) @ F`` for the RBF kernel: the unnormalised predictive
    weights of the classes, as one reduction (both sets translated alike)."""
    kernel = make_kernel("rbf", gamma=float(gamma))
    dtype = np.result_type(X_fit.dtype, X.dtype)
    X_fit = X_fit.astype(dtype, copy=False)
    X = X.astype(dtype, copy=False)
    op = KernelOperator(kernel, translated(kernel, X, reference=X_fit),
                        translated(kernel, X_fit), backend=backend)
    return np.asarray(op.matmat(np.asarray(F, dtype)), np.float64)
