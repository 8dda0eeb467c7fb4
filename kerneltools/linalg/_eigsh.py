"""LOBPCG, randomized subspace iteration, ARPACK and :func:`eigsh`, the one
entry point over them and block Lanczos (:mod:`kerneltools.linalg._lanczos`),
on lazy symmetric operators (private; public in :mod:`kerneltools.linalg`).

- :func:`lobpcg`: LOBPCG (Knyazev, SIAM J. Sci. Comput. 23, 2001) through
  :func:`scipy.sparse.linalg.lobpcg` on the lazy operator, with an optional
  preconditioner;
- :func:`randomized_eigsh`: randomized subspace iteration (Halko, Martinsson
  and Tropp, SIAM Review 53, 2011, Alg. 4.4) and Rayleigh-Ritz, a fixed
  number of products as scikit-learn's randomized solvers (no tolerance);
- ARPACK (``eigsh(method="arpack")``): SciPy's implicitly restarted Lanczos
  on the operator, checked for a missed copy of a multiple eigenvalue.

LOBPCG and ARPACK escalate as block Lanczos does (:func:`_escalate`).
"""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np
import scipy.linalg
import scipy.sparse.linalg
from scipy.sparse.linalg import LinearOperator

from ._lanczos import (_check_k, _check_which, _default_tol, _dense_eigh, _escalate,
                            _matmat_of, _one_blas_thread, _rng, _tall_qr, block_lanczos)

__all__ = ["lobpcg", "randomized_eigsh", "eigsh", "EIGEN_METHODS"]

#: The methods of :func:`eigsh`.
EIGEN_METHODS = ("lanczos", "lobpcg", "randomized", "arpack")


def lobpcg(A, k: int, *, which: str = "largest", M=None, tol=None, max_iter=None,
           X0=None, random_state=None, verbose: int = 0, scale=None, dense_max=None):
    """The ``k`` largest (or smallest) eigenpairs by LOBPCG.

    :func:`scipy.sparse.linalg.lobpcg` on the operator, each of its products
    with a block one reduction. A preconditioner ``M`` (an approximation of
    ``A^{-1}``, for ``which="smallest"``) speeds it up. Where it stops short
    of ``tol`` (``max_iter``), the pairs come from a dense eigendecomposition
    for ``n <= dense_max``, else a
    :class:`~kerneltools.exceptions.ConvergenceError` is raised.

    Parameters
    ----------
    A : LinearOperator or array-like of shape (n, n)
        The symmetric operator (say a
        :class:`~kerneltools.linalg.KernelOperator`).
    k : int
        The number of eigenpairs, ``1 <= k < n``.
    which : {"largest", "smallest"}, default="largest"
        The algebraically largest or smallest eigenvalues.
    M : LinearOperator or array-like of shape (n, n), default=None
        A preconditioner.
    tol : float, default=None
        Relative residual (default as :func:`block_lanczos`).
    max_iter : int, default=None
        LOBPCG iterations (None: 200).
    X0 : array-like of shape (n, b), default=None
        The starting block (None: random normal, ``b = k``).
    random_state : int, Generator, RandomState or None, default=None
        Seeds the starting block.
    verbose : int, default=0
        Print the iterations and the largest residual.
    scale : float, default=None
        The size of ``A`` that residuals are relative to (None: the largest
        absolute eigenvalue found, which is no scale for eigenvalues near 0,
        e.g. a Laplacian's smallest: give its norm then).
    dense_max : int, default=None
        Largest ``n`` for the dense fallback (None: :data:`DENSE_MAX`).

    Returns
    -------
    w : ndarray of shape (k,)
        The eigenvalues, ascending.
    V : ndarray of shape (n, k)
        The eigenvectors, orthonormal columns.

    See Also
    --------
    eigsh : Any of the eigensolvers, by name.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.linalg import lobpcg
    >>> A = np.diag(np.arange(1.0, 31.0))
    >>> w, V = lobpcg(A, 3, which="smallest", random_state=0)
    >>> np.round(w, 6), V.shape
    (array([1., 2., 3.]), (30, 3))
    """
    who = "lobpcg"
    matmat, n, dtype = _matmat_of(A, who)
    sign = _check_which(which, who)
    k = _check_k(k, n, who)
    tol = _default_tol(dtype, tol, who)
    rng = _rng(random_state)
    if n < 5 * k + 2:  # scipy's LOBPCG needs n >= 5 k; the dense problem is tiny
        return _dense_eigh(A, k, sign)
    X = rng.standard_normal((n, k)) if X0 is None else np.asarray(X0, np.float64)
    op = LinearOperator((n, n), matvec=lambda v: matmat(v.reshape(n, -1).astype(dtype)),
                        matmat=lambda V: np.asarray(matmat(V.astype(dtype)), np.float64),
                        dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # scipy's own "not reaching" note
        w, V, res = scipy.sparse.linalg.lobpcg(
            op, X, M=M, tol=tol * (1.0 if scale is None else float(scale)),
            maxiter=200 if max_iter is None else int(max_iter),
            largest=which == "largest", verbosityLevel=0, retResidualNormsHistory=True)
    ref = np.abs(w).max() if scale is None else float(scale)
    last = np.asarray(res[-1]) / max(ref, np.finfo(np.float64).tiny)
    if verbose:
        print(f"[lobpcg] {len(res)} iterations, largest relative residual "
              f"{last.max():.2e}", file=sys.stderr, flush=True)
    if not last.max() <= max(tol, 1e-7) * 10:  # NaN included
        why = (f"relative residual {last.max():.2e} > tol={tol:g} after {len(res)} "
               "iterations")
        return _escalate(who, A, k, sign, dense_max, why, verbose,
                         "raise 'max_iter' or 'tol'")
    order = np.argsort(w)
    return w[order], V[:, order]


def randomized_eigsh(A, k: int, *, n_oversamples: int = 10, n_iter: int = 4,
                     selection: str = "value", random_state=None, verbose: int = 0):
    """``k`` eigenpairs of a symmetric operator by randomized subspace iteration.

    Halko, Martinsson and Tropp (2011), Alg. 4.4: ``Q = orth((A^T A)^q A G)``
    for a Gaussian block ``G`` of ``k + n_oversamples`` vectors,
    re-orthonormalised after each product, then the Ritz pairs of
    ``Q^T A Q``. Each of the ``n_iter = q`` iterations costs two products, as
    in randomized SVD (scikit-learn's ``iterated_power`` counts the same). ``selection``:
    ``"value"`` keeps the ``k`` largest eigenvalues, ``"module"`` the ``k``
    largest in absolute value (scikit-learn's KernelPCA).

    Parameters
    ----------
    A : LinearOperator or array-like of shape (n, n)
        The symmetric operator (say a
        :class:`~kerneltools.linalg.KernelOperator`).
    k : int
        The number of eigenpairs, ``1 <= k < n``.
    n_oversamples : int, default=10
        The extra vectors of the Gaussian block.
    n_iter : int, default=4
        The power iterations ``q``.
    selection : {"value", "module"}, default="value"
        Which eigenvalues to keep (above).
    random_state : int, Generator, RandomState or None, default=None
        Seeds the Gaussian block.
    verbose : int, default=0
        Print each product and the time.

    Returns
    -------
    w : ndarray of shape (k,)
        The eigenvalues, in decreasing order of the selection's key.
    V : ndarray of shape (n, k)
        The eigenvectors, orthonormal columns.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.linalg import randomized_eigsh
    >>> A = np.diag(np.arange(1.0, 31.0))
    >>> w, V = randomized_eigsh(A, 3, random_state=0)
    >>> np.round(w), V.shape
    (array([30., 29., 28.]), (30, 3))
    """
    who = "randomized_eigsh"
    matmat, n, dtype = _matmat_of(A, who)
    k = _check_k(k, n, who)
    if selection not in ("value", "module"):
        raise ValueError(f"{who}: 'selection' must be 'value' or 'module', got {selection!r}")
    rng = _rng(random_state)
    p = min(n, k + int(n_oversamples))
    orth = _one_blas_thread(lambda M: _tall_qr(M)[0])
    Q = orth(rng.standard_normal((n, p)))
    start = time.perf_counter()
    Q = orth(np.asarray(matmat(Q.astype(dtype)), np.float64))
    for it in range(2 * int(n_iter)):
        Q = orth(np.asarray(matmat(Q.astype(dtype)), np.float64))
        if verbose:
            print(f"[randomized_eigsh] product {it + 2}/{2 * n_iter + 2}, "
                  f"{time.perf_counter() - start:.2f} s", file=sys.stderr, flush=True)
    AQ = np.asarray(matmat(Q.astype(dtype)), np.float64)
    T = Q.T @ AQ
    theta, Y = scipy.linalg.eigh((T + T.T) / 2)
    key = theta if selection == "value" else np.abs(theta)
    order = np.argsort(key)[::-1][:k]
    return theta[order], Q @ Y[:, order]


def eigsh(A, k: int, *, which: str = "largest", method: str = "lanczos", tol=None,
          max_iter=None, random_state=None, verbose: int = 0, **options):
    """``k`` eigenpairs of a symmetric operator, by ``method``.

    ``"lanczos"`` (:func:`block_lanczos`), ``"lobpcg"`` (:func:`lobpcg`),
    ``"randomized"`` (:func:`randomized_eigsh`, largest only) or ``"arpack"``
    (:func:`scipy.sparse.linalg.eigsh` on the operator, one vector per
    product).

    Parameters
    ----------
    A : LinearOperator or array-like of shape (n, n)
        The symmetric operator (say a
        :class:`~kerneltools.linalg.KernelOperator`).
    k : int
        The number of eigenpairs, ``1 <= k < n``.
    which : {"largest", "smallest"}, default="largest"
        The algebraically largest or smallest eigenvalues.
    method : {"lanczos", "lobpcg", "randomized", "arpack"}, default="lanczos"
        The eigensolver.
    tol : float, default=None
        Relative residual (None: the method's default).
    max_iter : int, default=None
        The method's iteration limit (None: its default).
    random_state : int, Generator, RandomState or None, default=None
        Seeds the starting vectors.
    verbose : int, default=0
        Print the method's progress.
    **options : dict
        Other arguments of the method (say ``X0``, ``dense_max``).

    Returns
    -------
    w : ndarray of shape (k,)
        The eigenvalues, ascending.
    V : ndarray of shape (n, k)
        The eigenvectors, orthonormal columns.

    See Also
    --------
    block_lanczos, lobpcg, randomized_eigsh : The methods.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.linalg import eigsh
    >>> A = np.diag(np.arange(1.0, 31.0))
    >>> w, V = eigsh(A, 3, random_state=0)
    >>> np.round(w, 6), V.shape
    (array([28., 29., 30.]), (30, 3))
    """
    if method == "lanczos":
        return block_lanczos(A, k, which=which, tol=tol, max_iter=max_iter,
                             random_state=random_state, verbose=verbose, **options)
    if method == "lobpcg":
        return lobpcg(A, k, which=which, tol=tol, max_iter=max_iter,
                      random_state=random_state, verbose=verbose, **options)
    if method == "randomized":
        if which != "largest":
            raise ValueError("eigsh: method='randomized' finds only which='largest'")
        w, V = randomized_eigsh(A, k, random_state=random_state, verbose=verbose,
                                **options)
        return w[::-1], V[:, ::-1]
    if method == "arpack":
        return _arpack(A, k, which=which, tol=tol, max_iter=max_iter,
                       random_state=random_state, verbose=verbose, **options)
    raise ValueError(f"eigsh: unknown method {method!r}; valid: {', '.join(EIGEN_METHODS)}")


def _arpack(A, k, *, which, tol, max_iter, random_state, verbose, dense_max=None,
            **options):
    """ARPACK (:func:`scipy.sparse.linalg.eigsh`, implicitly restarted
    Lanczos, one vector per product) on the operator, ascending pairs. As
    SciPy, ``k >= n`` is a dense eigendecomposition (with SciPy's warning);
    where ARPACK does not converge, the dense one for ``n <= dense_max``,
    else :class:`~kerneltools.exceptions.ConvergenceError`."""
    who = "eigsh(method='arpack')"
    sign = _check_which(which, who)
    matmat, n, dtype = _matmat_of(A, who)
    k = _check_k(k, n, who)
    if k >= n:
        warnings.warn("k >= N for N * N square matrix. Attempting to use "
                      "scipy.linalg.eigh instead.", RuntimeWarning, stacklevel=3)
        return _dense_eigh(A, k, sign)
    op = LinearOperator((n, n), matvec=lambda v: matmat(v.reshape(n, 1).astype(dtype)),
                        matmat=lambda V: matmat(V.astype(dtype)), dtype=dtype)
    v0 = _rng(random_state).uniform(-1, 1, n)
    try:
        w, V = scipy.sparse.linalg.eigsh(op, k, which="LA" if sign > 0 else "SA",
                                         tol=0 if tol is None else tol, maxiter=max_iter,
                                         v0=v0, **options)
    except scipy.sparse.linalg.ArpackNoConvergence as e:
        why = f"ARPACK converged {len(e.eigenvalues)} of {k} eigenpairs"
        return _escalate(who, A, k, sign, dense_max, why, verbose,
                         "raise 'max_iter' or 'tol'")
    if _missed_eigenvalue(matmat, dtype, w, V, sign, random_state):
        # one start vector spans one direction of a multiple eigenvalue:
        # ARPACK's converged pairs need not be the wanted ones (3 clusters
        # apart: eigenvalue 1 three times, and ARPACK returned the fourth)
        if verbose:
            print(f"[{who}] an eigenvalue beyond the {k} found: block Lanczos",
                  file=sys.stderr, flush=True)
        return block_lanczos(A, k, which=which, tol=tol, max_iter=max_iter,
                             random_state=random_state, verbose=verbose,
                             block_size=min(n, k + 10), dense_max=dense_max)
    order = np.argsort(w)
    return w[order], V[:, order]


def _missed_eigenvalue(matmat, dtype, w, V, sign, random_state) -> bool:
    """Whether ``A`` has an eigenvalue beyond the wanted end of ``w`` outside
    ``span V``: block Lanczos on ``A`` deflated of ``V`` (``V`` itself sent
    to the far end), whose Ritz values bound its extreme eigenvalue from
    inside, so that one beyond ``w`` proves a miss."""
    n = V.shape[0]
    ref = max(np.abs(w).max(), np.finfo(np.float64).tiny)

    def deflated(U):
        U = np.asarray(U, np.float64)
        PU = U - V @ (V.T @ U)
        APU = sign * np.asarray(matmat(PU.astype(dtype)), np.float64)
        return APU - V @ (V.T @ APU) - 2 * ref * (V @ (V.T @ U))

    op = LinearOperator((n, n), matvec=lambda v: deflated(v.reshape(n, 1)).ravel(),
                        matmat=deflated, dtype=np.float64)
    from ..exceptions import ConvergenceError

    try:
        theta, _ = block_lanczos(op, 1, tol=1e-4, random_state=random_state,
                                 max_iter=60, dense_max=0)
    except ConvergenceError:
        return True  # no proof either way: the block solver decides
    return bool(theta[-1] > (sign * w).min() + 1e-8 * ref)
