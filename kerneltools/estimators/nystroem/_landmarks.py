"""Nystroem's dense kernel blocks and its landmark strategies beyond uniform.

:func:`kernel_blocks` evaluates ``K(X, Z)`` block of rows by block of rows
(the transform's, and the scores' of "rls"); :func:`kmeans_plusplus` and
:func:`ridge_leverage_sample` are ``Nystroem(landmarks="kmeans++")`` and
``"rls"`` (see :class:`kerneltools.estimators.Nystroem`), on host arrays.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
from sklearn.utils import check_random_state

from ...kernels import make_kernel
from ...lazy import Vi, Vj
from .._shared._fallback import is_sparse

__all__ = ["kernel_blocks", "kmeans_plusplus", "ridge_leverage_sample", "self_kernel"]

#: Entries of ``K(X, Z)`` evaluated at once (64 MB in float64): blocks large
#: enough that the product with ``normalization_.T`` runs as a few big BLAS
#: calls (many small ones are slower, much slower on a busy machine).
_BLOCK_ENTRIES = 1 << 23
#: Entries evaluated per kernel call inside a block (8 MB): the kernel's
#: element-wise passes (distances, exp) run faster on pieces near cache size.
_PIECE_ENTRIES = 1 << 20


def kernel_blocks(kernel, X, Z):
    """``(i0, i1, K(X[i0:i1], Z))`` over blocks of rows of X, each block
    evaluated piece by piece into one buffer."""
    m = max(1, len(Z))
    rows, piece = max(1, _BLOCK_ENTRIES // m), max(1, _PIECE_ENTRIES // m)
    buf = None
    for i0 in range(0, X.shape[0], rows):
        i1 = min(X.shape[0], i0 + rows)
        for j0 in range(i0, i1, piece):
            j1 = min(i1, j0 + piece)
            Xp = X[j0:j1].toarray() if is_sparse(X) else X[j0:j1]
            Kp = np.asarray(kernel(Xp, Z))
            if j0 == i0 and j1 == i1:  # a single piece: no copy
                buf = Kp
                break
            if buf is None or buf.dtype != Kp.dtype or len(buf) < i1 - i0:
                buf = np.empty((i1 - i0, Kp.shape[1]), dtype=Kp.dtype)
            buf[j0 - i0 : j1 - i0] = Kp
        yield i0, i1, buf[: i1 - i0]


def self_kernel(kernel, X):
    """``k(x, x)`` for every row, without GP white noise, in float64."""
    return np.asarray(kernel.diag(X), dtype=np.float64) - kernel.white_level()


# ---------------------------------------------------------------------------
# k-means++ seeding in the kernel's feature space
# ---------------------------------------------------------------------------
def kmeans_plusplus(
    kernel, X, n_components: int, *, random_state=None, backend=None, batch: int = 32
) -> np.ndarray:
    """Row indices of X chosen by k-means++ seeding in feature space.

    The first landmark is uniform; each next one is drawn with probability
    proportional to ``D(x)^2 = min_z k(x, x) + k(z, z) - 2 k(x, z)`` over the
    landmarks ``z`` chosen so far (Arthur and Vassilvitskii, 2007, step 1b).
    ``bound``, an upper bound of ``D^2`` for every row, is refreshed by one
    ``Min`` reduction over the landmarks added since the last refresh, so no
    ``n x m`` matrix is ever formed. Between refreshes, candidates are drawn
    ``batch`` at a time in proportion to ``bound`` and accepted with
    probability ``D(x)^2 / bound(x)``, which makes every draw exactly the
    k-means++ one.

    Parameters
    ----------
    kernel : str, callable, Kernel or scikit-learn GP kernel
        The kernel, as :func:`kerneltools.kernels.make_kernel` takes it
        (``"rbf"``: gamma ``1 / n_features``).
    X : ndarray of shape (n_samples, n_features)
        The points.
    n_components : int
        The number of landmarks.
    random_state : int, RandomState instance or None, default=None
        The draws.
    backend : {'auto', 'cpu', 'cuda', 'numpy'} or None, default=None
        Where the ``Min`` reductions run.
    batch : int, default=32
        Candidates drawn at a time between two refreshes of the bound.

    Returns
    -------
    ndarray of shape (n_components,)
        Distinct row indices of X (int64), in the order they were chosen.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators.nystroem import kmeans_plusplus
    >>> rng = np.random.default_rng(0)
    >>> centres = ([0, 0], [5, 0], [0, 5])  # three tight blobs of 50 points
    >>> X = np.concatenate([c + 0.01 * rng.normal(size=(50, 2)) for c in centres])
    >>> idx = kmeans_plusplus("rbf", X, 3, random_state=0, backend="numpy")
    >>> idx.shape, sorted((idx // 50).tolist())  # one landmark in each blob
    ((3,), [0, 1, 2])
    """
    rnd = check_random_state(random_state)
    seeding = _Seeding(make_kernel(kernel), X, rnd, backend)
    m = int(n_components)
    seeding.add(int(rnd.randint(len(X))))
    while len(seeding.chosen) < m:
        cum = seeding.refresh()
        if not cum[-1] > 0:  # every row is (numerically) a landmark already
            break
        cap = min(256, max(batch, len(seeding.chosen) // 2))
        while len(seeding.chosen) < m and len(seeding.pending) < cap:
            u = rnd.uniform(0, cum[-1], batch)
            cand = np.minimum(np.searchsorted(cum, u, side="right"), len(X) - 1)
            if 4 * seeding.screen(cand, m) < batch:  # bound is stale: refresh it
                break
    chosen = seeding.chosen
    if len(chosen) < m:  # top up uniformly among the other rows
        rest = np.flatnonzero(~seeding.taken)
        chosen += list(rnd.choice(rest, m - len(chosen), replace=False))
    return np.asarray(chosen, dtype=np.int64)


class _Seeding:
    """The state of :func:`kmeans_plusplus`: landmarks chosen, those not yet
    in ``bound`` (pending), and ``bound >= D^2`` for every row."""

    def __init__(self, kernel, X, rnd, backend):
        self.kernel, self.X, self.rnd, self.backend = kernel, X, rnd, backend
        self.kd = self_kernel(kernel, X)
        self.bound = np.full(len(X), np.inf)
        self.taken = np.zeros(len(X), dtype=bool)
        self.chosen, self.pending = [], []

    def add(self, i):
        self.chosen.append(i)
        self.pending.append(i)
        self.taken[i] = True

    def refresh(self):
        """``bound = min(bound, D^2(x, pending))``, one Min reduction; returns
        the cumulative sums of ``bound``."""
        if self.pending:
            idx = np.asarray(self.pending)
            K = self.kernel.lazy(self.X, self.X[idx])
            kd = self.kd.astype(K.dtype)
            d2 = (Vi(kd[:, None]) + Vj(kd[idx, None]) - 2.0 * K).min(
                axis=1, backend=self.backend
            )
            self.bound = np.minimum(self.bound, np.maximum(d2[:, 0], 0.0))
            self.bound[self.taken] = 0.0
            self.pending = []
        return np.cumsum(self.bound)

    def screen(self, cand, m):
        """Accept candidates in turn with probability ``D^2 / bound``, ``D^2``
        counting the pending landmarks (those just accepted too), until m
        landmarks are chosen; returns the number accepted."""
        ref = np.concatenate([np.asarray(self.pending, dtype=np.int64), cand])
        K = np.asarray(self.kernel(self.X[cand], self.X[ref]))
        sq = self.kd[cand, None] + self.kd[None, ref] - 2.0 * K
        cols = list(range(len(self.pending)))
        accepted = 0
        for t, i in enumerate(cand):
            if self.taken[i] or len(self.chosen) == m:
                continue
            d2 = min(self.bound[i], sq[t, cols].min()) if cols else self.bound[i]
            if self.rnd.uniform() * self.bound[i] < d2:
                self.add(int(i))
                cols.append(len(ref) - len(cand) + t)
                accepted += 1
        return accepted


# ---------------------------------------------------------------------------
# approximate ridge leverage scores, in rounds
# ---------------------------------------------------------------------------
def ridge_leverage_sample(
    kernel, X, n_components: int, *, random_state=None, rounds: int = 3
) -> np.ndarray:
    """Row indices of X drawn by approximate ridge leverage scores, in rounds.

    The ``lam``-ridge leverage score of row i, ``(K (K + lam I)^{-1})_ii``,
    is estimated from landmarks S as Musco and Musco (2017, eq. 3) do:
    ``(k_ii - k_iS (K_SS + lam' I)^{-1} k_Si) / lam`` with
    ``lam' = lam |S| / n`` (S weighted as a uniform sample). The first
    ``n_components / 2^rounds`` landmarks are uniform; each round then draws
    as many new rows again (half the landmarks in the last round), without
    replacement, in proportion to the scores given the landmarks so far, so
    that regions already covered stop drawing landmarks. ``lam`` is their
    choice for a rank-m approximation, ``sum_{i>m} e_i(K) / m``, with the
    tail trace estimated by that of the residual of the uniform sample.

    Parameters
    ----------
    kernel : str, callable, Kernel or scikit-learn GP kernel
        The kernel, as :func:`kerneltools.kernels.make_kernel` takes it
        (``"rbf"``: gamma ``1 / n_features``).
    X : ndarray of shape (n_samples, n_features)
        The points.
    n_components : int
        The number of landmarks.
    random_state : int, RandomState instance or None, default=None
        The draws.
    rounds : int, default=3
        The number of rounds after the uniform first sample.

    Returns
    -------
    ndarray of shape (n_components,)
        Distinct row indices of X, the uniform sample first.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators.nystroem import ridge_leverage_sample
    >>> rng = np.random.default_rng(0)
    >>> centres = ([0, 0], [5, 0], [0, 5])  # three tight blobs of 50 points
    >>> X = np.concatenate([c + 0.01 * rng.normal(size=(50, 2)) for c in centres])
    >>> S = ridge_leverage_sample("rbf", X, 12, random_state=0)
    >>> S.shape, len(np.unique(S)), bool((np.bincount(S // 50) > 0).all())
    ((12,), 12, True)
    """
    kernel = make_kernel(kernel)
    rnd = check_random_state(random_state)
    n, m = len(X), int(n_components)
    kd = np.maximum(self_kernel(kernel, X), 0.0)
    sizes = [-(-m // 2**r) for r in range(rounds, -1, -1)]  # m/2^rounds ... m
    S = rnd.permutation(n)[: sizes[0]]
    lam = _ridge_residual(kernel, X, S, kd, 0.0).sum() / m
    for size in sizes[1:]:
        tau = _ridge_residual(kernel, X, S, kd, lam * len(S) / n)
        free = np.ones(n, dtype=bool)
        free[S] = False
        S = np.concatenate([S, _weighted_draw(rnd, tau, free, size - len(S))])
    return S


def _ridge_residual(kernel, X, S, kd, ridge):
    """``k_ii - k_iS (K_SS + ridge I)^{-1} k_Si`` for every row, in blocks."""
    W = _inverse_factor(np.asarray(kernel(X[S], X[S]), dtype=np.float64), ridge)
    out = np.empty(len(X))
    for i0, i1, Kb in kernel_blocks(kernel, X, X[S]):
        F = Kb @ W
        out[i0:i1] = kd[i0:i1] - np.einsum("ij,ij->i", F, F)
    return np.maximum(out, 0.0)


def _inverse_factor(K, ridge):
    """``W`` with ``W W^T = (K + ridge I)^{-1}`` (K's negative eigenvalues,
    if any, raised to 0), the ridge at least ``m eps |K|``.

    Not :func:`kerneltools.linalg.robust_cholesky`, on purpose: the ridge is
    part of the scores being estimated (Musco and Musco's ``lam'``), so it may
    not grow until the matrix factors; a kernel that is not positive
    semi-definite (sigmoid) has its negative eigenvalues clipped instead.
    """
    m = len(K)
    ridge = max(ridge, m * np.finfo(np.float64).eps * np.abs(K).max(initial=0.0))
    if ridge <= 0:  # K = 0
        return np.zeros_like(K)
    try:
        L = scipy.linalg.cholesky(K + ridge * np.eye(m), lower=True)
        return scipy.linalg.solve_triangular(L, np.eye(m), lower=True).T
    except np.linalg.LinAlgError:  # not positive semi-definite (sigmoid, ...)
        e, U = np.linalg.eigh(K)
        return U / np.sqrt(np.maximum(e, 0.0) + ridge)


def _weighted_draw(rnd, w, free, k):
    """``k`` distinct indices among ``free`` drawn in proportion to ``w >= 0``
    (uniformly among the zero weights once the positive ones run out)."""
    w = np.where(free, w, 0.0)
    positive = np.flatnonzero(w > 0)
    if len(positive) <= k:
        rest = np.flatnonzero(free & (w <= 0))
        extra = rnd.choice(rest, k - len(positive), replace=False)
        return np.concatenate([positive, extra]).astype(np.int64)
    return rnd.choice(len(w), size=k, replace=False, p=w / w.sum())
