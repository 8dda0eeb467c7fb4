"""Operators built on a kernel operator for the spectral estimators (private).

Re-exported by :mod:`kerneltools.linalg` (their public home):

- :class:`CenteredOperator`: kernel PCA's doubly centred kernel, a rank-two
  correction of the lazy product;
- :class:`NormalizedAffinityOperator`: ``D^-1/2 (W - diag W) D^-1/2``, the
  normalised affinity whose top eigenvectors are the bottom ones of the
  normalised graph Laplacian;
- :class:`OffDiagonalKernel`: ``W - diag W`` for a kernel affinity, with the
  diagonal left out of every sum rather than subtracted from it;
- :func:`translated`: data moved near the origin for the kernels that only
  read differences of points;
- :func:`dense_matrix`: any of these operators as an array, for the dense
  eigendecomposition that the solvers fall back on for small ``n``.

Why :class:`OffDiagonalKernel`: a point far from the others (an RBF
affinity at large ``gamma``) has a degree ``d_i = sum_{j != i} W_ij`` far
below its own ``W_ii = 1``; ``W 1 - diag W`` then loses the digits of
``d_i`` that ``1 + d_i`` rounds away (all of them in float32 once
``d_i < 6e-8``: the point looks isolated, its row of the normalised
affinity is wrong by up to ``1 / sqrt(d_i)``, and block Lanczos on it
diverged). Summing only ``j != i`` keeps every degree and product accurate
to the precision of the kernel's values.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse.linalg import LinearOperator

from ..lazy import LazyTensor, Vi, Vj

__all__ = ["CenteredOperator", "NormalizedAffinityOperator", "OffDiagonalKernel",
           "dense_matrix", "translated", "translation", "TRANSLATION_INVARIANT"]

#: The named kernels that read the points only through ``x - y``: their
#: values do not change when all the points move by one vector.
TRANSLATION_INVARIANT = ("rbf", "laplacian")


def translated(kernel, X, reference=None):
    """Move points near the origin where a translation-invariant kernel allows.

    ``X`` minus the mean ``c`` of a sample of the rows of ``reference``
    (in float64, rounded to X's dtype) when ``kernel`` is translation
    invariant and ``reference`` sits far from the origin next to its spread
    (``|c|^2 > 3 mean |x - c|^2``); otherwise ``X`` itself. Two arrays
    translated with one ``reference`` keep their kernel values.

    The kernel's values are unchanged, but their rounding then depends on
    the spread of the points only: a float32 copy of float64 data offset by
    10^8 keeps its digits (the offset alone would round them to multiples
    of 8), and expanded squared distances ``|x|^2 + |y|^2 - 2 x.y`` (the
    dense BLAS kernels) stay accurate.

    Parameters
    ----------
    kernel : Kernel
        The kernel (see :func:`~kerneltools.kernels.make_kernel`).
    X : ndarray of shape (n, d)
        The points.
    reference : ndarray of shape (m, d), default=None
        The points whose centre is subtracted (None: X).

    Returns
    -------
    ndarray of shape (n, d)
        The translated points (of X's dtype), or X itself.

    See Also
    --------
    translation : The centre subtracted.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.kernels import make_kernel
    >>> from kerneltools.linalg import translated
    >>> X = np.array([[1e8, 0.0], [1e8 + 1, 1.0]])
    >>> translated(make_kernel("rbf"), X)
    array([[-0.5, -0.5],
           [ 0.5,  0.5]])
    """
    c = translation(kernel, X if reference is None else reference)
    if c is None:
        return X
    return (np.asarray(X, np.float64) - c).astype(X.dtype)


def translation(kernel, X):
    """Find the centre that :func:`translated` subtracts with ``reference=X``.

    Parameters
    ----------
    kernel : Kernel
        The kernel (see :func:`~kerneltools.kernels.make_kernel`).
    X : ndarray of shape (n, d)
        The reference points.

    Returns
    -------
    ndarray of shape (d,) or None
        The centre ``c`` (float64, a value of X's dtype), or None where
        :func:`translated` leaves the data as they are.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.kernels import make_kernel
    >>> from kerneltools.linalg import translation
    >>> X = np.array([[1e8, 0.0], [1e8 + 1, 1.0]])
    >>> translation(make_kernel("rbf"), X)
    array([1.e+08, 5.e-01])
    >>> translation(make_kernel("linear"), X) is None
    True
    """
    if getattr(kernel, "name", None) not in TRANSLATION_INVARIANT:
        return None
    sample = np.asarray(X[:: max(1, len(X) // 1024)], dtype=np.float64)
    sample = sample[np.isfinite(sample).all(axis=1)]
    if len(sample) == 0:
        return None
    c = sample.mean(axis=0).astype(X.dtype).astype(np.float64)
    dev = sample - c
    if float(c @ c) <= 3 * float(np.mean(np.einsum("ij,ij->i", dev, dev))):
        return None
    return c


def dense_matrix(A) -> np.ndarray:
    """The operator ``A`` as a float64 array: its own ``to_dense`` where it
    has one, the kernel's values for a kernel operator, else ``A`` applied to
    the identity by blocks of columns. ``n^2`` memory: for small ``n``."""
    if isinstance(A, np.ndarray):
        return np.asarray(A, np.float64)
    if hasattr(A, "to_dense"):
        return np.asarray(A.to_dense(), np.float64)
    K = getattr(A, "K", None)
    if isinstance(K, LazyTensor):  # a KernelOperator
        M = np.asarray(K.to_dense()[..., 0], np.float64)
        shift = np.broadcast_to(np.asarray(getattr(A, "diag_shift", 0.0)), (len(M),))
        return M + np.diag(shift)
    n = A.shape[0]
    cols = []
    for s in range(0, n, 256):
        E = np.zeros((n, min(256, n - s)), dtype=A.dtype)
        E[np.arange(s, s + E.shape[1]), np.arange(E.shape[1])] = 1
        cols.append(np.asarray(A.matmat(E), np.float64))
    return np.hstack(cols)


class _SymmetricOperator(LinearOperator):
    """A symmetric operator defined by its ``_matmat``: vectors as one-column
    blocks, its own adjoint."""

    def _matvec(self, v):
        return self._matmat(np.asarray(v).reshape(-1, 1)).ravel()

    def _adjoint(self):
        return self


class OffDiagonalKernel(_SymmetricOperator):
    """``W - diag W`` for the kernel affinity ``W = k(X, X)``, its diagonal
    never summed.

    A product is one reduction of ``k(x_i, x_j) [x_i != x_j]`` (the test on
    the squared distance, which the backends compute exactly for coincident
    points), plus, on the host, ``k(x_i, x_i) (sum_{j ~ i} V_j - V_i)`` for
    the exact duplicates ``j ~ i`` of a point (``O(n)`` per column, found
    once by sorting the rows). Compared with ``W V - diag(W) V`` it has no
    cancellation: each row is accurate to the precision of its own terms,
    however small they are next to ``W_ii``.

    Parameters
    ----------
    kernel : Kernel
    X : array (n, d)
    backend : {"auto", "cpu", "cuda", "numpy"} or None

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools import linalg
    >>> from kerneltools.kernels import make_kernel
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> kernel = make_kernel("rbf", gamma=0.5)
    >>> K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1))
    >>> A = linalg.OffDiagonalKernel(kernel, X)
    >>> bool(np.allclose(A @ np.ones(50), K.sum(1) - 1))
    True
    """

    def __init__(self, kernel, X, *, backend=None):
        self.kernel = kernel
        self.X = X
        self.backend = backend
        Xp = kernel._data(X)  # the rows the formula reads (cosine: normalised)
        x_i, y_j = Vi(Xp), Vj(Xp)
        self.K = kernel.formula(x_i, y_j) * x_i.sqdist(y_j).ne(0.0)
        self.self_values = np.asarray(kernel.diag(X), np.float64)
        _, inverse, counts = np.unique(Xp, axis=0, return_inverse=True,
                                       return_counts=True)
        inverse = inverse.ravel()
        self._dups = None
        if (counts > 1).any():
            rows = np.flatnonzero(counts[inverse] > 1)
            self._dups = (rows, inverse[rows], len(counts))
        super().__init__(dtype=np.dtype(self.K.dtype), shape=(len(X), len(X)))

    def _matmat(self, V):
        V = np.asarray(V)
        out = np.asarray(self.K.matmul(V.astype(self.K.dtype, copy=False),
                                       backend=self.backend))
        if self._dups is not None:
            rows, groups, n_groups = self._dups
            V64 = np.asarray(V, np.float64).reshape(len(V), -1)
            sums = np.zeros((n_groups, V64.shape[1]))
            np.add.at(sums, groups, V64[rows])
            extra = self.self_values[rows, None] * (sums[groups] - V64[rows])
            out = np.asarray(out, np.float64).reshape(V64.shape)
            out[rows] += extra
            out = out.reshape(V.shape)
        return out


    def to_dense(self):
        """``W - diag W`` as a float64 array, from the kernel's dense
        evaluation (n^2 memory: small n only).

        Returns
        -------
        ndarray of shape (n, n)
            The matrix, float64, with a zero diagonal.
        """
        W = np.array(self.kernel(np.asarray(self.X, np.float64)), dtype=np.float64)
        np.fill_diagonal(W, 0.0)
        return W


class CenteredOperator(_SymmetricOperator):
    """``C K C`` with ``C = I - 1 1^T / n``, applied without forming it.

    For a symmetric ``K`` with row means ``m = K 1 / n`` and grand mean
    ``mu = 1^T K 1 / n^2``::

        C K C v = K v - 1 (m^T v) - m (1^T v) + mu 1 (1^T v)

    so a product costs one product with ``K`` (one reduction) plus ``O(n)``;
    the row means come from one more product, once. This is kernel PCA's
    centring in feature space (Schoelkopf, Smola and Mueller, 1998).

    Parameters
    ----------
    K : LinearOperator (n, n), symmetric
    row_means : array (n,), optional
        ``K 1 / n`` if known (say, from the same kernel in higher precision:
        a float32 twin of a float64 operator then centres exactly as it).
    defer : bool, default False
        Compute the row means with the first product, ``K [V, 1]`` in one
        reduction, instead of by a product of their own at construction
        (one pass over the pairs fewer; reading ``row_means`` before any
        product computes them).

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools import linalg
    >>> from kerneltools.kernels import make_kernel
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> kernel = make_kernel("rbf", gamma=0.5)
    >>> K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1))
    >>> C = linalg.CenteredOperator(linalg.KernelOperator(kernel, X))
    >>> H = np.eye(50) - 1 / 50
    >>> bool(np.allclose(C @ np.eye(50)[:, :2], (H @ K @ H)[:, :2]))
    True
    """

    def __init__(self, K, row_means=None, *, defer=False):
        n = K.shape[0]
        self.op = K
        self._row_means = None
        if row_means is not None:
            self._set_row_means(row_means)
        elif not defer:
            ones = np.ones((n, 1), dtype=K.dtype)
            self._set_row_means(np.asarray(K.matmat(ones), np.float64).ravel() / n)
        super().__init__(dtype=_working_dtype(K), shape=K.shape)

    def _set_row_means(self, row_means):
        self._row_means = np.asarray(row_means, np.float64).reshape(self.op.shape[0])
        self._grand_mean = float(self._row_means.mean())

    @property
    def row_means(self):
        """``K 1 / n``, float64."""
        if self._row_means is None:
            self._matmat(np.zeros((self.op.shape[0], 1), self.op.dtype))
        return self._row_means

    @property
    def grand_mean(self):
        """``1^T K 1 / n^2``."""
        return float(self.row_means.mean())

    def _matmat(self, V):
        V = np.asarray(V)
        if self._row_means is None:  # deferred: the row means ride along
            n = V.shape[0]
            ones = np.full((n, 1), 1.0, dtype=V.dtype)
            KV = np.asarray(self.op.matmat(np.hstack([V, ones])), np.float64)
            self._set_row_means(KV[:, -1] / n)
            KV = KV[:, :-1]
        else:
            KV = np.asarray(self.op.matmat(V), np.float64)
        s = V.sum(axis=0, dtype=np.float64)  # 1^T v
        mv = self._row_means @ V  # m^T v
        out = (KV - mv[None, :] - np.outer(self._row_means, s)
               + self._grand_mean * s[None, :])
        return out.astype(np.result_type(V.dtype, np.float32), copy=False)


    def to_dense(self):
        """``C K C`` as a float64 array (n^2 memory: small n only).

        Returns
        -------
        ndarray of shape (n, n)
            The doubly centred matrix, float64.
        """
        K = dense_matrix(self.op)
        m = K.mean(axis=0)
        return K - m[None, :] - m[:, None] + m.mean()


class NormalizedAffinityOperator(_SymmetricOperator):
    """``D^-1/2 (W - diag W) D^-1/2``, ``D`` the degrees of ``W`` without
    its diagonal: ``I`` minus the normalised graph Laplacian.

    ``W`` is a symmetric affinity operator (a kernel matrix); its degrees
    ``d = W 1 - diag W`` take one product, once; each product then takes one
    more. The largest eigenvectors ``u`` of this operator are the smallest of
    the normalised Laplacian ``L = I - D^-1/2 W D^-1/2`` (as
    :func:`scipy.sparse.csgraph.laplacian` with ``normed=True``, which also
    ignores ``diag W``); ``u / sqrt(d)`` is the spectral embedding (Ng,
    Jordan and Weiss, 2001; von Luxburg, 2007). Isolated points (``d = 0``,
    flagged in ``isolated``) count degree 1 and get ``L_ii = 1``, as in
    scikit-learn's spectral embedding, which sets the whole diagonal of
    ``L`` to 1 (SciPy's own Laplacian has 0 there).

    Parameters
    ----------
    W : LinearOperator (n, n), symmetric
    diag : float or array (n,)
        The diagonal of ``W`` (1 for an RBF kernel).
    degrees : array (n,), optional
        ``W 1 - diag W`` if known (say, from the same kernel in higher
        precision: a float32 twin then normalises exactly as it).

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools import linalg
    >>> from kerneltools.kernels import make_kernel
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> kernel = make_kernel("rbf", gamma=0.5)
    >>> K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1))  # dense NumPy
    >>> W = linalg.NormalizedAffinityOperator(linalg.KernelOperator(kernel, X), 1.0)
    >>> d = K.sum(axis=1) - 1.0  # the degrees without the diagonal
    >>> dense = (K - np.eye(50)) / np.sqrt(np.outer(d, d))
    >>> bool(np.allclose(W @ np.eye(50), dense)), bool(np.allclose(W.degrees, d))
    (True, True)
    >>> round(float(np.linalg.eigvalsh(dense).max()), 6)  # L's smallest is 0
    1.0
    """

    def __init__(self, W, diag, degrees=None):
        n = W.shape[0]
        self.op = W
        self.diag = np.broadcast_to(np.asarray(diag, np.float64), (n,))
        if degrees is None:
            ones = np.ones((n, 1), dtype=W.dtype)
            degrees = np.asarray(W.matmat(ones), np.float64).ravel() - self.diag
        self.degrees = np.asarray(degrees, np.float64).reshape(n)
        self.isolated = self.degrees == 0
        d = np.where(self.isolated, 1.0, self.degrees)
        if np.any(d < 0):
            raise ValueError("the affinity has negative degrees (row sums); spectral "
                             "methods need an affinity >= 0")
        self.sqrt_degrees = np.sqrt(d)
        super().__init__(dtype=_working_dtype(W), shape=W.shape)

    def _matmat(self, V):
        V = np.asarray(V, np.float64)
        U = V / self.sqrt_degrees[:, None]
        WU = np.asarray(self.op.matmat(U.astype(self.op.dtype)), np.float64)
        out = (WU - self.diag[:, None] * U) / self.sqrt_degrees[:, None]
        return out


    def to_dense(self):
        """The operator as a float64 array (n^2 memory: small n only).

        Returns
        -------
        ndarray of shape (n, n)
            ``D^-1/2 (W - diag W) D^-1/2``, float64.
        """
        W = dense_matrix(self.op) - np.diag(self.diag)
        return W / self.sqrt_degrees[:, None] / self.sqrt_degrees[None, :]


def _working_dtype(op):
    """The precision of an operator's products: a kernel operator's formula's
    (its own dtype may be promoted by a float64 diagonal shift)."""
    K = getattr(op, "K", None)
    return np.dtype(getattr(K, "dtype", op.dtype))
