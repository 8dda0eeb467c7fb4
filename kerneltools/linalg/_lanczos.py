"""Eigen-solvers for lazy symmetric operators: every product is one reduction.

A symmetric ``n x n`` operator ``A`` (a :class:`~kerneltools.linalg.KernelOperator`,
any :class:`scipy.sparse.linalg.LinearOperator`, an array or a callable
``V -> A V``) is only ever applied to blocks of vectors, so a kernel matrix
is never stored: a product with ``b`` vectors is one reduction of
``O(n^2 (d + b))`` time and ``O(n (d + b))`` memory.

- :func:`block_lanczos`: thick-restart block Lanczos (block Krylov spaces
  with full re-orthogonalisation and Rayleigh-Ritz, restarted on the wanted
  Ritz vectors: Wu and Simon, SIAM J. Matrix Anal. Appl. 22, 2000, in block
  form), the default; with ``A_fast`` (the operator in float32) its Krylov
  blocks cost half, and products of ``A`` itself anchor the Rayleigh-Ritz
  steps, so the result keeps ``A``'s accuracy;
- LOBPCG, randomized subspace iteration, ARPACK and :func:`eigsh`, one
  entry point over them all, live in :mod:`kerneltools.linalg._eigsh`.

No solver returns pairs that it knows miss their tolerance: it escalates
(a stalled lower-precision twin dropped for exact products; a dense
eigendecomposition, :func:`_escalate`, for ``n <= DENSE_MAX``) and raises
:class:`~kerneltools.exceptions.ConvergenceError` only beyond that.

The small dense work (orthogonalisation by Cholesky QR, Rayleigh-Ritz) runs
with BLAS on one thread: on blocks of tens of columns, threads only wait.

The operators built on a kernel operator for the spectral estimators
(:class:`CenteredOperator`, :class:`NormalizedAffinityOperator`,
:class:`OffDiagonalKernel`) live in :mod:`kerneltools.linalg._spectral_operators`.

>>> import numpy as np
>>> A = np.diag(np.arange(1.0, 101.0))
>>> w, V = block_lanczos(A, 3, random_state=0)
>>> [round(float(x), 8) for x in w]
[98.0, 99.0, 100.0]
"""

from __future__ import annotations

import numbers
import sys
import time

import numpy as np
import scipy.linalg
from scipy.sparse.linalg import LinearOperator
from threadpoolctl import threadpool_limits

from ._spectral_operators import (CenteredOperator, NormalizedAffinityOperator,
                               OffDiagonalKernel, _working_dtype, dense_matrix)

__all__ = ["block_lanczos", "CenteredOperator", "NormalizedAffinityOperator",
           "OffDiagonalKernel", "DENSE_MAX"]

#: The rounding floor of a lower-precision operator's products, in units of
#: its dtype's epsilon, relative to the largest eigenvalue: below it, more
#: Krylov blocks of ``A_fast`` no longer bring ``A``'s residual down (float32
#: rbf kernels, n = 10^4: ``A``'s residual stayed at 2.6e-7 = 2.2 eps once
#: ``A_fast``'s was 7e-9).
_FAST_FLOOR = 2.0
#: Up to this many epsilons, a fast residual that stops falling (by half in a
#: restart) is taken for the floor.
_FAST_STALL = 1e3
#: Restarts on fast products whose residual may fail to halve before A
#: measures it.
_FAST_PATIENCE = 3
#: Exact products in a row that may fail to halve the residual before
#: ``A_fast`` is dropped.
_MIXED_PATIENCE = 2
#: Restarts with exact products in which the residual may fail to halve
#: before the solver escalates (8 products each by default).
_PATIENCE = 10
#: Largest ``n`` whose eigenpairs a solver that does not converge takes from
#: a dense eigendecomposition (72 MB in float64; about a second on 2 cores)
#: before it gives up with :class:`~kerneltools.exceptions.ConvergenceError`.
DENSE_MAX = 3000


def _matmat_of(A, who):
    """``(V -> A V, n, dtype)`` for an operator, array or callable."""
    if isinstance(A, LinearOperator) or isinstance(A, np.ndarray):
        if A.ndim != 2 or A.shape[0] != A.shape[1]:
            raise ValueError(f"{who}: 'A' must be square, got shape {A.shape}")
        if isinstance(A, np.ndarray):
            return (lambda V: A @ V), A.shape[0], A.dtype
        return (lambda V: np.asarray(A.matmat(V))), A.shape[0], _working_dtype(A)
    raise TypeError(f"{who}: 'A' must be a LinearOperator or a square array, got "
                    f"{type(A).__name__}")


def _check_k(k, n, who, below=None):
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral) or k < 1:
        raise ValueError(f"{who}: 'k' must be an int >= 1, got {k!r}")
    top = n if below is None else below
    if k > top:
        raise ValueError(f"{who}: 'k' must be <= {top} for an operator of size {n}, "
                         f"got {k}")
    return int(k)


def _check_which(which, who):
    if which not in ("largest", "smallest"):
        raise ValueError(f"{who}: 'which' must be 'largest' or 'smallest', got {which!r}")
    return 1.0 if which == "largest" else -1.0


def _default_tol(dtype, tol, who):
    """``tol`` checked; None: about the square root of the unit roundoff
    (eigenvectors then carry about its square root of error, relative to the gap)."""
    if tol is None or tol == 0:
        return 1e-10 if np.dtype(dtype) == np.float64 else 1e-5
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not tol > 0 \
            or not np.isfinite(tol):
        raise ValueError(f"{who}: 'tol' must be a finite float > 0 (or None), got {tol!r}")
    return float(tol)


def _one_blas_thread(func):
    """``func`` with BLAS on one thread: the dense work of these solvers is on
    blocks of tens of columns, where BLAS threads cost more than they give
    (far more on a loaded machine, where they wait for each other: a
    Householder QR of 5,000 x 20 took 0.8 s on 2 busy cores)."""
    def wrapper(*args, **kwargs):
        with threadpool_limits(limits=1, user_api="blas"):
            return func(*args, **kwargs)
    wrapper.__name__, wrapper.__doc__ = func.__name__, func.__doc__
    return wrapper


@_one_blas_thread
def _orthonormalize(W, Q, rng, scale):
    """``W`` orthogonalised against the orthonormal columns of ``Q`` (twice:
    classical Gram-Schmidt is stable when repeated) then among itself; columns
    that vanish (a Krylov space that became invariant) are replaced by random
    directions, so the block keeps its width."""
    for _ in range(2):
        if Q is not None and Q.shape[1]:
            W = W - Q @ (Q.T @ W)
        W, R = _tall_qr(W)
    weak = np.abs(np.diag(R)) <= 1e-10 * max(scale, np.finfo(np.float64).tiny)
    if weak.any():
        fresh = rng.standard_normal((W.shape[0], int(weak.sum())))
        for _ in range(2):
            B = W[:, ~weak] if Q is None else np.hstack([Q, W[:, ~weak]])
            fresh = fresh - B @ (B.T @ fresh)
            fresh, _ = np.linalg.qr(fresh)
        W[:, weak] = fresh
    return W


def _tall_qr(W):
    """``W = Q R`` for a tall, thin ``W``: Cholesky QR twice (CholQR2:
    Yamamoto et al., ETNA 44, 2015), two Gram products and two triangular
    solves, many times faster than Householder QR on a tall block and as
    accurate when ``W`` is not nearly rank-deficient; Householder where the
    Gram matrix is (numerically) singular."""
    R = np.eye(W.shape[1])
    Q = W
    for _ in range(2):
        G = Q.T @ Q
        try:
            L = scipy.linalg.cholesky(G, lower=True)
        except np.linalg.LinAlgError:
            return np.linalg.qr(W)
        d = np.abs(np.diag(L))
        if d.min() <= 1e-6 * d.max():  # conditioning squared beyond 1e12: unsafe
            return np.linalg.qr(W)
        L_inv = scipy.linalg.solve_triangular(L, np.eye(len(L)), lower=True)
        Q = Q @ L_inv.T
        R = L.T @ R
    return Q, R


def block_lanczos(A, k: int, *, which: str = "largest", block_size=None, n_blocks=None,
                  tol=None, max_iter=None, X0=None, random_state=None, verbose: int = 0,
                  A_fast=None, dense_max=None, floor=0.0):
    """The ``k`` largest (or smallest) eigenpairs of a symmetric operator.

    Thick-restart block Lanczos: from a block ``X`` of ``b`` vectors it builds
    the block Krylov basis ``Q = [X, A X, A^2 X, ...]`` (at most ``n_blocks``
    blocks, each orthogonalised against all the previous ones) until the
    residuals that the basis predicts for the ``k`` wanted Ritz pairs
    (:func:`_ritz_residual_estimate`, from the last block alone) reach the
    target, takes the Ritz pairs of ``Q^T A Q``, and restarts from the best
    ``k + b // 2`` Ritz vectors and their residuals until the ``k`` wanted
    ones have ``|A v - theta v| <= tol * |theta_max|``. Each step costs one
    product of ``A`` with ``b`` vectors (one reduction for a kernel operator).
    Converged wanted vectors are locked: the next block grows from the
    residuals of the others.

    It never returns pairs that miss the tolerance. It escalates instead:
    ``A_fast`` is dropped once two exact products in a row fail to halve
    ``A``'s residual (exact products from there); with exact products, at
    ``max_iter`` or when the residual has not halved in
    ``_PATIENCE`` restarts, the pairs come from a dense eigendecomposition
    of ``A`` for ``n <= dense_max``, else a
    :class:`~kerneltools.exceptions.ConvergenceError` says what was reached.

    With ``A_fast`` (the same operator in lower precision, e.g. the kernel in
    float32: about half the cost per product), the Krylov blocks are products
    with ``A_fast`` and the orthogonalisation and Rayleigh-Ritz stay float64;
    once ``A_fast``'s residuals reach half of ``tol`` (or ``A_fast``'s
    rounding floor, for smaller tolerances), ``A`` itself is applied to the
    ``k`` wanted Ritz vectors, which measures the residual that decides
    convergence and anchors any further Rayleigh-Ritz on exact products. A
    product of ``A_fast`` with a Krylov block enters the Ritz vectors with a
    weight of the order of their residual, so its rounding error shrinks
    with it: mixed precision reaches ``A``'s own accuracy (iterative
    refinement, as in mixed-precision linear solvers). With a good ``X0``
    (:func:`kerneltools.linalg.nystroem_start`) one exact product is
    usually the only one.

    Parameters
    ----------
    A : LinearOperator or array (n, n)
        Symmetric.
    k : int
        Number of eigenpairs, ``1 <= k < n``.
    which : {"largest", "smallest"}
        The algebraically largest or smallest eigenvalues.
    block_size : int, optional
        Vectors per product (default ``min(n, max(k, 8))``).
    n_blocks : int, optional
        Most blocks of the basis between restarts (default: enough for about
        ``3 k + 2 b`` columns, at least 3).
    tol : float, optional
        Relative residual; default ``1e-10`` (float64 operators) or ``1e-5``
        (float32).
    max_iter : int, optional
        Products with ``A`` before the solver escalates (default
        ``max(300, n // 10)``).
    X0 : array (n, b), optional
        Starting block; default random normal.
    random_state : int, Generator, RandomState or None
    verbose : int
        Print the restart, the converged count, the largest residual, the time.
    A_fast : LinearOperator or array (n, n), optional
        A cheaper approximation of ``A`` (lower precision) for the Krylov
        blocks; the residuals that decide convergence are always ``A``'s.
    dense_max : int, optional
        Largest ``n`` for the dense fallback (default :data:`DENSE_MAX`).
    floor : float, default 0
        The size of ``A``'s rounding: residuals are relative to
        ``max(|theta_max|, floor)``, so that an operator that is 0 to
        rounding (kernel PCA of constant data) converges at once.

    Returns
    -------
    w : array (k,)
        Eigenvalues, ascending (as :func:`scipy.linalg.eigh`).
    V : array (n, k)
        Orthonormal eigenvectors, in the order of ``w``.

    Raises
    ------
    kerneltools.exceptions.ConvergenceError
        No convergence and ``n > dense_max``.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools import linalg
    >>> from kerneltools.kernels import make_kernel
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> kernel = make_kernel("rbf", gamma=0.5)
    >>> A = linalg.KernelOperator(kernel, X, shift=1.0)
    >>> w, V = linalg.block_lanczos(A, 3, random_state=0)
    >>> K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1)) + np.eye(50)
    >>> bool(np.allclose(w, np.linalg.eigvalsh(K)[-3:]))
    True
    """
    who = "block_lanczos"
    matmat, n, dtype = _matmat_of(A, who)
    sign = _check_which(which, who)
    k = _check_k(k, n, who)
    tol = _default_tol(dtype, tol, who)
    rng = _rng(random_state)
    b = min(n, max(k, 8)) if block_size is None else _check_k(block_size, n, who)
    if n_blocks is None:
        n_blocks = max(3, -(-(3 * k + 2 * b) // b))
    max_iter = max(300, n // 10) if max_iter is None else int(max_iter)
    keep = min(n, k + b // 2)
    X = rng.standard_normal((n, b)) if X0 is None else np.asarray(X0, np.float64)
    if X.shape[0] != n:
        raise ValueError(f"{who}: 'X0' must have {n} rows, got shape {X.shape}")
    if n <= max(2 * (k + b), 50):  # tiny: the dense problem is cheaper and exact
        return _dense_eigh(A, k, sign)
    fast, fast_dtype = matmat, dtype
    mixed = A_fast is not None
    if mixed:
        fast, n_fast, fast_dtype = _matmat_of(A_fast, who)
        if n_fast != n:
            raise ValueError(f"{who}: 'A_fast' must have the shape of 'A', ({n}, {n}); "
                             f"got ({n_fast}, {n_fast})")
    # A is applied when A_fast's residual is half the tolerance (A's residual
    # is then A_fast's plus A_fast's rounding: one exact product confirms
    # it), or at A_fast's rounding floor for tolerances below it (from there
    # the Rayleigh-Ritz steps anchored on exact products refine it)
    eps_fast = float(np.finfo(fast_dtype).eps)
    switch = max(tol / 2, _FAST_FLOOR * eps_fast) if mixed else 0

    def product(V, exact):
        f, t = (matmat, dtype) if exact or not mixed else (fast, fast_dtype)
        return sign * np.asarray(f(V.astype(t)), dtype=np.float64)

    start = time.perf_counter()
    limit = min(n, n_blocks * b + keep)
    basis = _Basis(n, limit + b)
    W = _orthonormalize(X, None, rng, 1.0)
    basis.append(W, product(W, not mixed))
    products = 1
    restart = 0
    anchored = 0
    # the residual at which the basis is good enough to try: switch for fast
    # products, tol for exact ones
    target = switch if mixed else tol
    stalled_at = 0.0  # the last fast residual, where near A_fast's rounding
    progress, fast_progress = _Progress(), _Progress()
    while True:
        # extend the basis: each new block is A times the last one, made
        # orthogonal to the whole basis (full re-orthogonalisation), until
        # the Ritz residuals that the basis predicts reach the target
        scale = np.linalg.norm(basis.AQ, axis=0).max()
        while True:
            P, estimate = _ritz_residual_estimate(basis, b, k, floor)
            # anchored on exact products (refining below A_fast's rounding),
            # the estimate from fast products is no guide: the basis is filled
            if (estimate <= target and not (anchored and mixed)) \
                    or basis.size + b > limit or products >= max_iter:
                break
            W = _orthonormalize(P, basis.Q, rng, scale)
            basis.append(W, product(W, not mixed))
            products += 1
        X, AX, theta, R, res, ref = _rayleigh_ritz(basis.Q, basis.AQ, keep, anchored,
                                                   floor)
        exact = not mixed
        fast_res = res[:k].max() / ref
        # A_fast's rounding floor is a guess (it grows with the operator's
        # conditioning: 1e-6 for a normalised affinity of 150 points): a fast
        # residual that stopped falling near it calls A too
        stalled = stalled_at > 0 and fast_res > stalled_at / 2
        if not exact:
            # at any level: a fast residual that has not halved in
            # _FAST_PATIENCE restarts (an operator whose size is its
            # rounding; a poor twin) is measured with A
            fast_progress.record(fast_res)
            if fast_progress.stalled(_FAST_PATIENCE):
                stalled, fast_progress = True, _Progress()
        if not exact and (fast_res <= switch or stalled or products >= max_iter):
            # A on the k wanted Ritz vectors: the residuals that count, and
            # exact products under the next Rayleigh-Ritz
            X = X[:, :k]
            AX = product(X, True)
            products += 1
            X, AX, theta, R, res, ref = _rayleigh_ritz(X, AX, k, 0, floor)
            exact = True
        anchored = X.shape[1] if exact else 0  # leading columns with exact A Q
        converged = res[:k] <= tol * ref if exact else np.zeros(k, bool)
        done = int(converged.sum())
        if verbose:
            note = ""
            if mixed:
                note = (" (fast products)" if not exact
                        else f" (fast products: {fast_res:.2e})")
            print(f"[block_lanczos] restart {restart}: {done}/{k} converged, largest "
                  f"residual {res[:k].max() / ref:.2e}{note}, {products} products, "
                  f"{time.perf_counter() - start:.2f} s", file=sys.stderr, flush=True)
        if done == k:
            w, V = sign * theta[:k], X[:, :k]
            order = np.argsort(w)
            return w[order], V[:, order]
        if exact:
            progress.record(res[:k].max() / ref)
            if mixed and progress.stalled(_MIXED_PATIENCE):
                # A_fast brings A's residual down no more (its rounding, or a
                # twin that is not A's approximation): exact products from here
                mixed, target, stalled_at = False, tol, 0.0
                progress = _Progress(progress.best)
                if verbose:
                    print(f"[{who}] A_fast stalled at {progress.best:.2e}: exact "
                          "products from here", file=sys.stderr, flush=True)
            elif not mixed and (products >= max_iter or progress.stalled(_PATIENCE)):
                why = (f"relative residual {res[:k].max() / ref:.2e} > tol={tol:g} after "
                       f"{products} products" + ("" if products >= max_iter else
                                                 " (no longer decreasing)"))
                return _escalate(who, A, k, sign, dense_max, why, verbose,
                                 "raise 'max_iter' or 'tol'")
        if not exact:
            stalled_at = fast_res if fast_res <= _FAST_STALL * eps_fast else 0.0
        # thick restart: keep the best Ritz vectors (and A times them); the
        # next block continues the Krylov space from their residuals, those
        # of the converged wanted vectors last (locked: their residuals are
        # rounding, no direction worth a product)
        basis.reset(*_reorthonormalize(X, AX), anchored=anchored)
        restart += 1
        order = np.concatenate([np.flatnonzero(~converged), np.arange(k, R.shape[1]),
                                np.flatnonzero(converged)])
        W = _orthonormalize(R[:, order[:b]], basis.Q, rng, scale)
        basis.append(W, product(W, not mixed))
        products += 1


class _Progress:
    """The best exact residual so far and the restarts since it last halved."""

    def __init__(self, best=np.inf):
        self.best, self.since = best, 0

    def record(self, residual):
        if residual <= self.best / 2:
            self.best, self.since = residual, 0
        else:
            self.best, self.since = min(self.best, residual), self.since + 1

    def stalled(self, patience):
        return self.since >= patience


def _dense_eigh(A, k, sign):
    """The ``k`` largest (``sign > 0``) or smallest eigenpairs of ``A`` by a
    dense eigendecomposition (``n^2`` memory), ascending."""
    M = dense_matrix(A)
    n = len(M)
    lo, hi = (n - k, n - 1) if sign > 0 else (0, k - 1)
    return scipy.linalg.eigh((M + M.T) / 2, subset_by_index=(lo, hi))


def _escalate(who, A, k, sign, dense_max, why, verbose, fix):
    """The last step of a solver that did not converge: the dense
    eigendecomposition for ``n <= dense_max``, else :class:`ConvergenceError`."""
    n = A.shape[0]
    limit = DENSE_MAX if dense_max is None else int(dense_max)
    if n <= limit:
        if verbose:
            print(f"[{who}] {why}: dense eigendecomposition of the {n} x {n} operator",
                  file=sys.stderr, flush=True)
        return _dense_eigh(A, k, sign)
    from ..exceptions import ConvergenceError

    raise ConvergenceError(f"{who} did not converge: {why}; n = {n} is above "
                           f"dense_max={limit}, the size of a dense eigendecomposition; "
                           f"{fix}")


class _Basis:
    """The Krylov basis ``Q``, ``A Q`` and the projection ``T = Q^T A Q`` in
    preallocated arrays, grown in place (``np.hstack`` would copy the whole
    basis at each block: quadratic in its width); ``T`` gains one block
    column per block, ``O(n m b)`` for a basis of ``m`` columns."""

    def __init__(self, n, capacity):
        self._Q = np.empty((n, capacity))
        self._AQ = np.empty((n, capacity))
        self._T = np.empty((capacity, capacity))
        self.size = 0
        self.anchored = 0  # leading columns whose A Q are exact products

    @property
    def Q(self):
        return self._Q[:, :self.size]

    @property
    def AQ(self):
        return self._AQ[:, :self.size]

    @property
    def T(self):
        return self._T[:self.size, :self.size]

    @_one_blas_thread
    def append(self, W, AW):
        start, end = self.size, self.size + W.shape[1]
        self._Q[:, start:end] = W
        self._AQ[:, start:end] = AW
        self.size = end
        C = self.Q.T @ AW  # the new block column of Q^T A Q
        if self.anchored and start >= self.anchored:
            # coupling with the exact columns from the exact side (as
            # _rayleigh_ritz takes it)
            C[:self.anchored] = self.AQ[:, :self.anchored].T @ W
        self._T[:end, start:end] = C
        self._T[start:end, :start] = C[:start].T

    def reset(self, Q, AQ, anchored=0):
        self.size, self.anchored = 0, 0
        self.append(Q, AQ)
        self.anchored = anchored


@_one_blas_thread
def _ritz_residual_estimate(basis, b, k, floor=0.0):
    """``(P, r)``: the last block's product made orthogonal to the basis,
    ``P = (I - Q Q^T) A Q_last``, and the largest relative residual of the
    ``k`` wanted Ritz pairs that the basis predicts, without forming them.

    Every block but the last is mapped by ``A`` into the basis (the next
    block was made from its product; a kept Ritz vector ``x`` has
    ``A x = theta x + r`` and the block after the kept ones spans ``r``),
    so for a Ritz vector ``x = Q y``, ``(A - theta) x = P y_last`` with
    ``y_last`` its coordinates on the last block: a ``b``-column product
    instead of the ``n x m`` Rayleigh-Ritz (the classical block Lanczos
    estimate, ``|B_j y_last|``). ``P`` is also the start of the next
    block's orthogonalisation."""
    size = basis.size
    P = basis.AQ[:, size - b:] - basis.Q @ basis.T[:, size - b:]
    T = basis.T
    theta, Y = scipy.linalg.eigh((T + T.T) / 2)
    Y = Y[:, ::-1][:, :k]
    ref = max(np.abs(theta).max(), floor, np.finfo(np.float64).tiny)
    return P, float(np.linalg.norm(P @ Y[size - b:], axis=0).max() / ref)


@_one_blas_thread
def _rayleigh_ritz(Q, AQ, keep, exact=0, floor=0.0):
    """The ``keep`` largest Ritz pairs of the basis ``Q`` (orthonormal
    columns, ``AQ = A Q``): ``(X, A X, theta, residuals R, their norms, the
    largest |theta|)``.

    The first ``exact`` columns of ``AQ`` are exact products, the others
    lower-precision ones: the coupling of the two groups is then taken from
    the exact side, ``(A Q_e)^T Q_f``. It is of the order of the residual
    of ``Q_e`` (the Krylov blocks ``Q_f`` start from that residual), so
    from the lower-precision side its rounding would be as large as itself
    once the residual reaches that precision, and the iteration would stall
    there."""
    T = Q.T @ AQ
    if 0 < exact < Q.shape[1]:
        T[:exact, exact:] = AQ[:, :exact].T @ Q[:, exact:]
        T[exact:, :exact] = T[:exact, exact:].T
    theta, Y = scipy.linalg.eigh((T + T.T) / 2)
    theta, Y = theta[::-1], Y[:, ::-1]
    keep = min(keep, Q.shape[1])
    X, AX = Q @ Y[:, :keep], AQ @ Y[:, :keep]
    R = AX - X * theta[:keep]
    res = np.linalg.norm(R, axis=0)
    ref = max(np.abs(theta).max(), floor, np.finfo(np.float64).tiny)
    return X, AX, theta, R, res, ref


@_one_blas_thread
def _reorthonormalize(Q, AQ):
    """Ritz vectors lose orthogonality slowly through rounding: restore it,
    transforming ``A Q`` alike (``Q = Q' R`` gives ``A Q' = (A Q) R^-1``)."""
    Qn, R = _tall_qr(Q)
    return Qn, scipy.linalg.solve_triangular(R, AQ.T, trans="T").T


def _rng(random_state):
    """A NumPy Generator from an int, Generator, RandomState or None."""
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(np.iinfo(np.int32).max))
    return np.random.default_rng(random_state)
