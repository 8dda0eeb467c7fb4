"""Kernel matrices as linear operators, and the conjugate-gradient solvers on them.

The operator half of :mod:`kerneltools.linalg` (which re-exports these
names): :class:`KernelOperator` (``K(X, Z) + diag(shift)`` as a SciPy
``LinearOperator``, products by reductions), :func:`conjugate_gradient`
(the one CG of :mod:`kerneltools.backend._cg` on any operator) and
:func:`solve_with_logdet` (batched PCG with a stochastic Lanczos
log-determinant).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
from scipy.sparse.linalg import LinearOperator

from ..dask import to_numpy
from ..backend._cg import ArrayVectors
from ..backend._cg import conjugate_gradient as _cg
from ..backend._cg import refined_conjugate_gradient as _refined_cg
from ..kernels import Kernel, make_kernel
from ..lazy import LazyTensor, Vi

__all__ = ["KernelOperator", "conjugate_gradient", "solve_with_logdet"]


class KernelOperator(LinearOperator):
    """``K(X, Y) + shift I`` as a :class:`scipy.sparse.linalg.LinearOperator`.

    Products run as generated reductions: ``A @ v`` costs ``O(n m d)`` time and
    ``O((n + m) d)`` memory. With ``Y=None`` the operator is square, includes
    the kernel's white-noise diagonal, and ``shift`` (a scalar or one value per
    row) is added to its diagonal.

    Parameters
    ----------
    kernel : Kernel, str, callable or scikit-learn GP kernel
        Anything :func:`kerneltools.kernels.make_kernel` accepts, or a scalar
        :class:`~kerneltools.LazyTensor` formula ``K_ij`` (then X is unused).
    X, Y : arrays (n, d) and (m, d)
    shift : float or array (n,), default 0
    backend : {"auto", "cpu", "cuda", "numpy"} or None, default=None
        Where every product runs; None: the configured backend
        (:func:`kerneltools.config_context`), read at each product.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools import linalg
    >>> from kerneltools.kernels import make_kernel
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> kernel = make_kernel("rbf", gamma=0.5)
    >>> A = linalg.KernelOperator(kernel, X, shift=1.0)
    >>> A.shape
    (50, 50)
    >>> K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1)) + np.eye(50)
    >>> bool(np.allclose(A @ np.ones(50), K.sum(1)))
    True
    """

    def __init__(self, kernel, X=None, Y=None, *, shift=0.0, backend=None):
        if isinstance(kernel, LazyTensor):
            K = kernel
            white = 0.0
        else:
            self.kernel = make_kernel(kernel)
            K = self.kernel.lazy(X, Y)
            white = self.kernel.white_level() if Y is None else 0.0
        if K.dim != 1:
            raise ValueError(f"KernelOperator needs a scalar formula, got dimension {K.dim}")
        n, m = K.shape[:2]
        self.K = K
        self.backend = backend
        self.diag_shift = _shift(shift, n, "shift") + white
        if np.any(self.diag_shift != 0) and n != m:
            raise ValueError(f"'shift' needs a square operator; this one is {n} x {m}")
        dtype = np.result_type(K.dtype, np.asarray(self.diag_shift).dtype)
        super().__init__(dtype=dtype, shape=(n, m))

    def _matmat(self, V):
        V = np.asarray(V)
        out = to_numpy(self.K.matmul(V.astype(self.K.dtype, copy=False),
                                     backend=self.backend))  # Dask: computed here
        if np.ndim(self.diag_shift) or self.diag_shift:
            out = out + _col(self.diag_shift, V.ndim) * V
        return out

    def _matvec(self, v):
        return self._matmat(np.asarray(v).reshape(-1)).reshape(-1)

    def _rmatmat(self, V):
        V = np.asarray(V).astype(self.K.dtype, copy=False)
        V2 = V.reshape(V.shape[0], -1)
        out = to_numpy((self.K * Vi(V2)).sum(axis=0, backend=self.backend))
        if np.ndim(self.diag_shift) or self.diag_shift:
            out = out + _col(self.diag_shift, 2) * V2
        return out.reshape((self.shape[1],) + V.shape[1:])

    def _rmatvec(self, v):
        return self._rmatmat(np.asarray(v).reshape(-1, 1)).reshape(-1)

    def _adjoint(self):
        return _Adjoint(self)


class _Adjoint(LinearOperator):
    def __init__(self, op):
        self.op = op
        super().__init__(dtype=op.dtype, shape=op.shape[::-1])

    def _matmat(self, V):
        return self.op._rmatmat(V)

    def _rmatmat(self, V):
        return self.op._matmat(V)


def conjugate_gradient(A, B, *, M=None, x0=None, tol: float = 1e-6, max_iter=None,
                       callback=None, verbose: int = 0, refine_with=None, r0=None,
                       info=None, xp=None):
    """Solve ``A X = B`` for a symmetric positive-definite ``A``.

    Every column of ``B`` runs its own conjugate-gradient recurrence, and all
    of them share one product with ``A`` per iteration (one reduction for a
    :class:`KernelOperator`).

    Parameters
    ----------
    A : LinearOperator, array or callable ``V -> A V``
    B : array (n,) or (n, E)
    M : LinearOperator, array or callable, optional
        A preconditioner: an SPD approximation of ``A^{-1}``, such as
        :class:`NystroemPreconditioner`.
    x0 : array, optional
        Starting point.
    tol : float
        Stop when every column has ``|B - A X| <= tol |B|``.
    max_iter : int, optional
        Default ``10 n + 100``; a :class:`~kerneltools.ConvergenceWarning` is
        issued when it is reached first.
    callback : callable, optional
        ``callback(X)`` after each iteration.
    verbose : int
        Print the iteration, the largest relative residual and the time.
    refine_with : LinearOperator, array or callable, optional
        An accurate version of ``A`` when ``A`` computes in low precision
        (e.g. a float64 :class:`KernelOperator` for a float32 one): CG runs on
        ``A``, and iterative refinement recomputes the residual with
        ``refine_with`` until it meets ``tol`` (see
        :func:`kerneltools.backend._cg.refined_conjugate_gradient`).
    r0 : array, optional
        With ``refine_with`` and ``x0``: the accurate residual ``B - A x0``,
        if known (it saves one accurate product).
    info : dict, optional
        Receives ``"converged"`` (whether every column reached ``tol``) and
        ``"relative_residual"`` (the largest ``|B - A X| / |B|`` over the
        columns; of the accurate product with ``refine_with``), whether or not
        the warning is issued: callers that escalate read them. With
        ``refine_with`` also ``"residual"`` (the last accurate residual, shape
        (n, E)) and ``"exact_products"``.
    xp : Array API namespace, optional
        The namespace of ``B`` when it is not NumPy (CuPy's on a GPU): the
        iterates stay in it, on B's device, and ``A``, ``M`` and
        ``refine_with`` must be callables on such arrays; the per-column
        coefficients are computed on the host, a few numbers per iteration.

    Returns
    -------
    X : array of B's shape
    n_iter : int

    Raises
    ------
    ValueError
        NaN or infinity in ``B`` or ``x0``; ``tol`` not a finite float > 0;
        ``max_iter`` not an int >= 1.
    kerneltools.exceptions.NotPositiveDefiniteError
        ``p^T A p < 0`` beyond rounding: ``A`` is not positive definite.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools import linalg
    >>> from kerneltools.kernels import make_kernel
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> kernel = make_kernel("rbf", gamma=0.5)
    >>> A = linalg.KernelOperator(kernel, X, shift=1.0)
    >>> x, n_iter = linalg.conjugate_gradient(A, np.ones(50))
    >>> K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1)) + np.eye(50)
    >>> bool(np.allclose(K @ x, 1.0, atol=1e-4))
    True
    """
    if xp is not None:
        return _conjugate_gradient_xp(A, B, xp, M=M, x0=x0, tol=tol, max_iter=max_iter,
                                      callback=callback, verbose=verbose,
                                      refine_with=refine_with, r0=r0, info=info)
    B = np.asarray(B)
    if B.ndim not in (1, 2):
        raise ValueError(f"conjugate_gradient: 'B' must be 1-D or 2-D, got shape {B.shape}")
    B2 = B.reshape(B.shape[0], -1).astype(np.result_type(B.dtype, np.float32))
    matvec = _as_matmat(A, "A")
    precond = None if M is None else _as_matmat(M, "M")
    if refine_with is None:
        X, n_iter = _cg(matvec, B2, tol=tol, max_iter=max_iter, x0=x0, callback=callback,
                        precond=precond, verbose=verbose, info=info, **_cg_context(A))
    else:
        context = _cg_context(A)
        # what the cheap products resolve: float32 kernel products (float64
        # sums) stalled at about 6 unit roundoffs of float64 residual in
        # asv_bench/krr_compare.py; a first sweep that aims at 4 of them usually
        # meets tol=1e-6 with its one accurate residual (100, the earlier
        # floor, cost a second sweep and a second accurate product)
        floor = 4 * (context["eps"] or float(np.finfo(np.float32).eps))
        X, n_iter = _refined_cg(matvec, _as_matmat(refine_with, "refine_with"), B2,
                                tol=tol, max_iter=max_iter, x0=x0, floor=floor,
                                callback=callback, precond=precond, verbose=verbose,
                                r0=r0, info=info, **context)
    return X.reshape(B.shape), n_iter


def _conjugate_gradient_xp(A, B, xp, *, M, x0, tol, max_iter, callback, verbose,
                           refine_with, r0, info):
    """:func:`conjugate_gradient` on ``B`` of the Array API namespace ``xp``."""
    if B.ndim not in (1, 2):
        raise ValueError(f"conjugate_gradient: 'B' must be 1-D or 2-D, got shape "
                         f"{tuple(B.shape)}")
    for name, op in (("A", A), ("M", M), ("refine_with", refine_with)):
        if op is not None and not callable(op):
            raise TypeError(f"conjugate_gradient: with 'xp', '{name}' must be a callable "
                            f"V -> {name} V on arrays of xp, got {type(op).__name__}")
    B2 = xp.reshape(B, (B.shape[0], -1))
    if not xp.isdtype(B2.dtype, "real floating"):
        B2 = xp.astype(B2, xp.float64)
    kw = {"tol": tol, "max_iter": max_iter, "x0": x0, "callback": callback,
          "precond": M, "verbose": verbose, "vectors": ArrayVectors(xp), **_cg_context(A)}
    if refine_with is None:
        X, n_iter = _cg(A, B2, info=info, **kw)
    else:
        floor = 4 * (kw["eps"] or float(np.finfo(np.float32).eps))
        X, n_iter = _refined_cg(A, refine_with, B2, floor=floor, r0=r0, info=info, **kw)
    return xp.reshape(X, B.shape), n_iter


def _cg_context(A) -> dict:
    """What :func:`~kerneltools.backend._cg.conjugate_gradient` needs to judge
    and explain ``p^T A p <= 0``: the products' unit roundoff (float32's
    where unknown) and the name of the diagonal shift to raise."""
    if isinstance(A, KernelOperator):
        return {"eps": float(np.finfo(A.K.dtype).eps),
                "shift_name": "the KernelOperator's 'shift'"}
    dtype = getattr(A, "dtype", None)
    kind = np.dtype(dtype).kind if dtype is not None else ""
    return {"eps": float(np.finfo(dtype).eps) if kind == "f" else None}


def _as_matmat(A, name):
    if isinstance(A, LinearOperator):
        return lambda V: np.asarray(A.matmat(V)).reshape(V.shape)
    if isinstance(A, np.ndarray):
        return lambda V: A @ V
    if callable(A):
        return A
    raise TypeError(f"conjugate_gradient: '{name}' must be a LinearOperator, an array "
                    f"or a callable, got {type(A).__name__}")


def solve_with_logdet(A, B, M, *, n_probes: int = 16, random_state=0, tol: float = 1e-4,
                      max_iter=None, verbose: int = 0, xp=None, info=None):
    """Solve ``A X = B`` and estimate ``log det A`` in one batched PCG run.

    Stochastic Lanczos quadrature with a preconditioner (the BBMM estimator
    of Gardner et al., 2018): probes ``z ~ N(0, P)`` from the Nystroem
    approximation ``P`` that ``M`` inverts; preconditioned CG on ``A U = Z``
    runs alongside ``A X = B``, and its coefficients give, per probe, the
    Lanczos tridiagonal ``T`` of ``P^{-1/2} A P^{-1/2}``, so that::

        log det A = log det P + tr log(P^{-1} A)
                  ~ log det P + mean_i (z_i^T P^{-1} z_i) e_1^T log(T_i) e_1

    Parameters
    ----------
    A : LinearOperator, array-like of shape (n, n) or callable
        The symmetric positive definite operator (say a
        :class:`KernelOperator` with a shift).
    B : array-like of shape (n,) or (n, k)
        The right-hand sides.
    M : NystroemPreconditioner
        The preconditioner: applies ``P^{-1}``, and has
        ``sample(n_probes, random_state)`` (probes ``z ~ N(0, P)``) and
        ``logdet()``.
    n_probes : int, default=16
        The number of probes of the estimate.
    random_state : int, Generator or None, default=0
        Seeds the probes.
    tol : float, default=1e-4
        CG's relative residual.
    max_iter : int, default=None
        CG's iteration limit (None: its default).
    verbose : int, default=0
        Print CG's progress.
    xp : namespace, default=None
        The Array API namespace of ``B`` when it is not NumPy (CuPy's on a
        GPU): the solutions and probes stay in it, on B's device; ``A`` and
        ``M`` are then callables on such arrays; the CG coefficients and the
        Lanczos quadrature are computed on the host (a few numbers per
        iteration).
    info : dict, default=None
        Receives :func:`conjugate_gradient`'s ``"converged"`` and
        ``"relative_residual"`` (over B's columns and the probes').

    Returns
    -------
    X : ndarray of shape of B
        The solutions for B.
    U : ndarray of shape (n, n_probes)
        The solutions for the probes.
    Z : ndarray of shape (n, n_probes)
        The probes.
    logdet : float
        The estimate of ``log det A``.
    n_iter : int
        The CG iterations.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools import linalg
    >>> from kerneltools.kernels import make_kernel
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> kernel = make_kernel("rbf", gamma=0.5)
    >>> K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1))  # dense NumPy
    >>> A = linalg.KernelOperator(kernel, X, shift=1.0)
    >>> M = linalg.NystroemPreconditioner(kernel, X, shift=1.0, n_components=20,
    ...                                   random_state=0)
    >>> x, U, Z, logdet, n_iter = linalg.solve_with_logdet(A, np.ones(50), M)
    >>> bool(np.allclose((K + np.eye(50)) @ x, 1.0, atol=1e-3)), U.shape
    (True, (50, 16))
    >>> exact = np.linalg.slogdet(K + np.eye(50))[1]
    >>> bool(abs(logdet - exact) < 0.05 * exact)  # 16 probes: a few percent
    True
    """
    if xp is not None:
        return _solve_with_logdet_xp(A, B, M, xp, n_probes=_count(n_probes, "n_probes"),
                                     random_state=random_state, tol=tol,
                                     max_iter=max_iter, verbose=verbose, info=info)
    B = np.asarray(B, dtype=np.float64)
    B2 = B.reshape(B.shape[0], -1)
    Z = M.sample(_count(n_probes, "n_probes"), random_state)
    rhs = np.hstack([B2, Z])
    record: list = []
    sol, n_iter = _cg(_as_matmat(A, "A"), rhs, tol=tol, max_iter=max_iter,
                      precond=_as_matmat(M, "M"), verbose=verbose, record=record,
                      who="solve_with_logdet", info=info, **_cg_context(A))
    k = B2.shape[1]
    norms = np.einsum("ij,ij->j", Z, M @ Z)  # z^T P^{-1} z, the probes' start
    quad = [_lanczos_log_quadrature(record, k + i) for i in range(n_probes)]
    logdet = M.logdet() + float(np.mean(norms * np.asarray(quad)))
    return sol[:, :k].reshape(B.shape), sol[:, k:], Z, logdet, n_iter


def _solve_with_logdet_xp(A, B, M, xp, *, n_probes, random_state, tol, max_iter,
                          verbose, info=None):
    """:func:`solve_with_logdet` on ``B`` of the Array API namespace ``xp``."""
    B2 = xp.astype(xp.reshape(B, (B.shape[0], -1)), xp.float64)
    Z = M.sample(n_probes, random_state)
    vectors = ArrayVectors(xp)
    record: list = []
    sol, n_iter = _cg(A, xp.concat([B2, Z], axis=1), tol=tol, max_iter=max_iter,
                      precond=M, verbose=verbose, record=record,
                      who="solve_with_logdet", vectors=vectors, info=info,
                      **_cg_context(A))
    k = B2.shape[1]
    norms = vectors.dot(Z, M(Z))  # z^T P^{-1} z, the probes' start
    quad = [_lanczos_log_quadrature(record, k + i) for i in range(n_probes)]
    logdet = M.logdet() + float(np.mean(norms * np.asarray(quad)))
    return xp.reshape(sol[:, :k], B.shape), sol[:, k:], Z, logdet, n_iter


def _lanczos_log_quadrature(record, col) -> float:
    """``e_1^T log(T) e_1`` for the Lanczos matrix ``T`` rebuilt from the CG
    coefficients of column ``col`` (Saad, Iterative Methods, section 6.7.3)."""
    alphas, betas = [], []
    for a, b, active in record:
        if not active[col]:
            break
        alphas.append(a[col])
        betas.append(b[col])
    if not alphas:
        return 0.0
    k = len(alphas)
    diag = np.array([1 / alphas[j] + (betas[j - 1] / alphas[j - 1] if j else 0.0)
                     for j in range(k)])
    off = np.array([np.sqrt(max(betas[j], 0.0)) / alphas[j] for j in range(k - 1)])
    lam, vec = scipy.linalg.eigh_tridiagonal(diag, off)
    return float(np.sum(vec[0] ** 2 * np.log(np.clip(lam, 1e-300, None))))


def _count(v, name: str) -> int:
    """An integer >= 1 (NumPy's too; never a bool or a float)."""
    if (isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer))
            or v < 1):
        raise ValueError(f"'{name}' must be an int >= 1, got {v!r}")
    return int(v)


def _shift(shift, n, name):
    s = np.asarray(shift, dtype=np.float64)
    if s.ndim == 0:
        if not np.isfinite(s):
            raise ValueError(f"'{name}' must be finite, got {shift!r}")
        return float(s)
    if s.shape != (n,):
        raise ValueError(f"'{name}' must be a scalar or have shape ({n},), got {s.shape}")
    if not np.all(np.isfinite(s)):
        raise ValueError(f"'{name}' contains NaN or infinity")
    return s


def _col(v, ndim):
    v = np.asarray(v)
    return v[:, None] if v.ndim == 1 and ndim == 2 else v
