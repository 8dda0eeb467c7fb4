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
  (``D`` the row sums of ``W`` itself), as scikit-learn's ``_build_graph``;
  with the cells below, ``D`` is summed over the near cell pairs only (the
  other terms, each below ``2^-30 d / n`` for ``d`` a low quantile of the
  degrees, left out): the iteration normalises the rows of every product,
  which cancels any positive row scaling.
  From :data:`._cells.MIN_POINTS` points on the CPU, ``W`` is restricted to
  the cell pairs that :class:`._cells.RbfCells` keeps (each row's dropped
  terms within 2^-53 of its total), and the kept cell pairs whose terms are
  small enough (:meth:`._cells.RbfCells.far`: their float32 rounding, bounded
  by :func:`_float32_error`, within another 2^-53 of each row's total) are
  reduced in float32, at half the cost of a float64 pair
  (:class:`_SplitAffinity`); a label matrix with at most
  :data:`SPARSE_ROWS` of its rows nonzero (the first product: the labelled
  points) is reduced over those columns only.
- :class:`SparseGraph`: the k-NN connectivity graph (each point its own first
  neighbour, scikit-learn's ``kneighbors_graph(X_, k)``) from kerneltools'
  :class:`~kerneltools.estimators.NearestNeighbors`, normalised as
  scikit-learn does with SciPy: ``O(n k)`` memory.
"""

from __future__ import annotations

import copy
import sys

import numpy as np
import scipy.sparse
from scipy.sparse import csgraph
from scipy.sparse.linalg import LinearOperator

from ... import ranges as kr
from ...kernels import make_kernel
from ...lazy import Vi, Vj
from ...linalg import (
    KernelOperator,
    NormalizedAffinityOperator,
    OffDiagonalKernel,
    translated,
)
from ..neighbors import NearestNeighbors
from ._cells import MAX_KEPT, MIN_POINTS, RbfCells, on_cpu

__all__ = ["RbfGraph", "SparseGraph", "rbf_weights"]

#: Products with a label matrix whose nonzero rows are at most this share
#: (the first one: the labelled points) reduce over those columns only.
SPARSE_ROWS = 0.5
#: Share of the pairs in float32 (:meth:`RbfCells.far`) below which every
#: kept pair stays in float64 (one reduction per product rather than two).
FAR_MIN_SHARE = 0.02
#: The degrees' first pass sums the cell pairs whose bound is above
#: ``2^-53 NEAR_GUESS d / n`` (``d`` a low quantile of sampled degrees):
#: lower bounds of the degrees, with nearly all their mass.
NEAR_GUESS = 2.0**23


class RbfGraph:
    """The normalised RBF graph of ``X`` for ``variant`` ("spreading" or
    "propagation"), as reductions on ``backend``."""

    def __init__(self, X, gamma, variant, *, backend=None, verbose=0):
        self.kernel = make_kernel("rbf", gamma=float(gamma))
        self.variant = variant
        self.W0 = OffDiagonalKernel(self.kernel, translated(self.kernel, X),
                                    backend=backend)
        self.kept_share = 1.0
        self.backend, self.cells, self.keep = backend, None, None
        self._duplicates = None
        W, degrees = self._pruned(X, gamma, backend, verbose)
        if variant == "spreading":
            self.op = NormalizedAffinityOperator(W, 0.0, degrees=degrees)
            self.W = W
        else:
            # rows of W with its diagonal (k(x, x) = 1): d = (W - diag W) 1 + 1
            self.self_values = self.W0.self_values
            if degrees is None:
                degrees = _degrees(W)
            self.degrees = degrees + self.self_values
            self.W = W

    def _pruned(self, X, gamma, backend, verbose):
        """``(W, degrees)``: the off-diagonal operator over the cell pairs
        that :class:`RbfCells` keeps and its row sums, or ``(W0, None)``
        (every pair) for small n, GPUs and data the cells do not separate."""
        if len(X) < MIN_POINTS or not on_cpu(backend):
            return self.W0, None
        cells = RbfCells(X, gamma, backend=backend)
        sample = np.random.default_rng(0).choice(len(X), 256, replace=False)
        sampled = np.asarray(KernelOperator(
            self.kernel, np.asarray(X[sample], np.float64), np.asarray(X, np.float64),
            backend=backend).matmat(np.ones((len(X), 1))), np.float64).ravel() - 1.0
        d_guess = max(float(np.quantile(sampled, 0.05)) / 2, 0.0)
        if cells.kept_share(cells.candidates(d_guess)) > MAX_KEPT:
            return self.W0, None
        # lower bounds of the degrees from the near pairs (nearly all their
        # mass), the kept and float32 pairs chosen with them, then the rest
        # of the kept pairs' terms added (float64, float32)
        near = cells.candidates(d_guess * NEAR_GUESS)
        degrees = _degrees(self._with_ranges(cells, near))
        keep = cells.keep(degrees)
        far = np.zeros_like(keep)
        if self.W0.K.dtype == np.float64:
            far = cells.far(keep, degrees, _float32_error(gamma, self.W0.X))
            if cells.kept_share(far) < FAR_MIN_SHARE:
                far[:] = False
        K32 = self._float32_kernel(cells, far) if far.any() else None
        # (propagation: the iteration normalises each product's rows, so the
        # lower bounds serve as its degrees: RbfGraph's docstring)
        rest = () if self.variant == "propagation" else (
            (keep & ~near & ~far, self.W0.K), (far & ~near, K32))
        for mask, K in rest:
            if mask.any():
                ones = np.ones((len(X), 1), dtype=K.dtype)
                degrees = degrees + np.asarray(K.with_ranges(cells.ranges(mask)).matmul(
                    ones, backend=backend), np.float64).ravel()
        W = self._with_ranges(cells, keep & ~far)
        if K32 is not None:
            W = _SplitAffinity(W, K32, backend)
        self.kept_share = cells.kept_share(keep)
        self.cells, self.keep = cells, keep
        if verbose:
            print(f"[label {self.variant}] {len(cells.counts)} cells: the "
                  f"reductions visit {self.kept_share:.1%} of the pairs"
                  f", {cells.kept_share(far):.1%} in float32", file=sys.stderr,
                  flush=True)
        return W, degrees

    def _float32_kernel(self, cells, far):
        """The kernel of the translated points in float32 over the cell
        pairs of ``far`` (no diagonal pairs: a cell is never far from itself)."""
        X32 = np.asarray(self.W0.X, np.float32)
        return self.kernel.formula(Vi(X32), Vj(X32)).with_ranges(cells.ranges(far))

    def _with_ranges(self, cells, keep):
        """:attr:`W0` restricted to the cell pairs of ``keep``."""
        W = copy.copy(self.W0)
        W.K = self.W0.K.with_ranges(cells.ranges(keep))
        return W

    def matmat(self, F):
        """The graph times ``F`` (n, c), in float64."""
        F = np.asarray(F, np.float64)
        nz = np.flatnonzero(F.any(axis=1))
        sparse = len(nz) <= SPARSE_ROWS * len(F)
        if self.variant == "spreading":
            if not sparse:
                return np.asarray(self.op.matmat(F), np.float64)
            root = self.op.sqrt_degrees[:, None]
            return self._columns_product(F / root, nz) / root
        WF = (self._columns_product(F, nz) if sparse else
              np.asarray(self.W.matmat(F), np.float64))
        return (WF + self.self_values[:, None] * F) / self.degrees[:, None]

    def _columns_product(self, V, nz):
        """``(W - diag W) V`` for ``V`` zero outside the rows ``nz``: one
        reduction over those columns only (the kept cell pairs of theirs),
        plus the exact duplicates of a point (as :class:`OffDiagonalKernel`)."""
        X = self.W0.X
        x_i, y_j = Vi(X), Vj(np.ascontiguousarray(X[nz]))
        K = self.kernel.formula(x_i, y_j) * x_i.sqdist(y_j).ne(0.0)
        if self.cells is not None:
            lab = self.cells.labels
            # the columns' cells numbered as all the cells: the mask up to
            # the last one among them (block_sparsity counts them so)
            cols = lab[nz]
            K = K.with_ranges(kr.block_sparsity(lab, cols,
                                                self.keep[:, : cols.max() + 1]))
        out = np.asarray(K.matmul(V[nz].astype(K.dtype), backend=self.backend),
                         np.float64)
        if self._duplicates is None:
            _, inverse, counts = np.unique(X, axis=0, return_inverse=True,
                                           return_counts=True)
            self._duplicates = (inverse.ravel(), len(counts)) if (counts > 1).any() else ()
        if self._duplicates:
            inverse, n_groups = self._duplicates
            sums = np.zeros((n_groups, V.shape[1]))
            np.add.at(sums, inverse, V)
            out += self.W0.self_values[:, None] * (sums[inverse] - V)
        return out

    def to_dense(self):
        """The graph as a dense float64 array (n^2 memory: small n only)."""
        if self.variant == "spreading":
            return self.op.to_dense()
        W = self.W0.to_dense() + np.diag(self.self_values)
        return W / W.sum(axis=1)[:, None]  # (the exact degrees: see the docstring)


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


class _SplitAffinity(LinearOperator):
    """``near + far``: the off-diagonal RBF operator ``near`` (float64) plus
    the far cell pairs' kernel ``far`` (a LazyTensor with ranges, no
    diagonal pairs), whose products run in float32 (:func:`_float32_error`
    bounds their terms' rounding)."""

    def __init__(self, near, far, backend):
        self.near, self.far, self.backend = near, far, backend
        super().__init__(dtype=np.float64, shape=near.shape)

    def _matmat(self, V):
        V = np.asarray(V, np.float64)
        out = np.asarray(self.near.matmat(V), np.float64)
        far = self.far.matmul(V.astype(np.float32), backend=self.backend)
        return out + np.asarray(far, np.float64)


def _float32_error(gamma: float, X) -> float:
    """A bound of the relative error of one float32 term ``exp(-gamma |x -
    y|^2) v`` (``v`` >= 0) against its exact value, the points ``X`` (as the
    kernel reads them) of norm at most ``R``, summed by tiles of at most 512
    terms in float32 (then in float64): the points' and gamma's rounding and
    the float32 squared distance move the exponent by at most ``e = gamma R^2
    (4 D + 20) 2^-24`` (differences below 2R, D + 2 rounded operations), so
    the term by ``exp(e) - 1 <= 2 e`` (e <= 1); the exp, the product and the
    rounding of ``v`` within 2^-20; a tile's float32 sum within 2^-15 of its
    terms. Above e = 1: inf (no float32 pairs)."""
    X = np.asarray(X, np.float64)
    R2 = float((X * X).sum(1).max()) if len(X) else 0.0
    e = float(gamma) * R2 * (4 * X.shape[1] + 20) * 2.0**-24
    return 2 * e + 2.0**-20 + 2.0**-15 if e <= 1 else np.inf


def _degrees(W):
    """The row sums of the off-diagonal operator ``W``, float64."""
    ones = np.ones((W.shape[0], 1), dtype=W.dtype)
    return np.asarray(W.matmat(ones), np.float64).ravel()


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
