"""KernelRidge's direct and Falkon solvers (the CG solver is the estimator's
own: :mod:`._cg`).

:func:`solve_dense` is scikit-learn's Cholesky path; :func:`solve_falkon`
restricts the model to landmarks (Falkon), on the host, on Dask rows or on a
device (``sp``, a :class:`~._array_api.Space`): its n-sized arrays stay where
X is, its CG runs on the ``m``-vectors, on the host. Where that CG stops at
``max_iter`` short of ``tol``, :func:`_dense_falkon` solves the same
least-squares problem densely for ``m <= DENSE_SOLVE_MAX``, else the fit
raises ConvergenceError (:mod:`._cg_escalation`).
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg

from ...dask import is_dask_array, to_numpy
from ...linalg import conjugate_gradient, robust_cholesky, select_landmarks
from ._cg import rows as landmark_rows
from ..._utils._array_api import HOST
from .._shared._cg_escalation import solve_or_escalate

#: Entries per block of Falkon's dense escalation (32 MB of float64).
_DENSE_BLOCK = 1 << 22

__all__ = ["alpha_groups", "np_dtype", "solve_dense", "solve_falkon"]


def solve_falkon(est, kernel, X, Y, alpha, w, sp=HOST, backend=None):
    """``(landmarks, coefficients, iterations)`` of ``est``'s Falkon fit of
    Y (n, E) on X (arrays of ``sp``, or Dask rows), landmarks and
    coefficients as arrays of ``sp``."""
    # Falkon (Rudi, Carratino and Rosasco, 2017, Alg. 1): the minimiser of
    # ||y - K_nm b||^2_W + alpha b^T K_mm b over b, found by CG on the
    # normal equations (K_mn W K_nm + alpha K_mm) b = K_mn W y, left and
    # right preconditioned by B = T^-1 A^-1 with T^T T = K_mm and
    # A^T A = T T^T / m + (alpha / n) I (their lambda is alpha / n).
    # On a device (sp), the n-sized arrays stay there; CG runs on the
    # m-vectors, on the host.
    Xw = est._working_data(X, sp)
    n = X.shape[0]
    m = min(est.n_components, n)
    rows = landmark_rows(Xw, sp)
    idx = select_landmarks(kernel, rows, m, method=est.landmarks,
                           random_state=est.random_state)
    Z = rows[idx] if is_dask_array(Xw) else sp.take(Xw, idx)
    Kmm = kernel(sp.host(Z).astype(np.float64))
    Kmm[np.diag_indices_from(Kmm)] -= kernel.white_level()
    T = robust_cholesky(Kmm + np.finfo(np.float64).eps * m * np.eye(m),
                        lower=False, what="the landmarks' kernel matrix")
    Knm = kernel.lazy(sp.engine(Xw), sp.engine(Z))
    wv = sp.put(np.ones(n) if w is None else np.asarray(w, dtype=np.float64))
    beta = np.zeros((m, Y.shape[1]))
    n_iters = []
    for cols, a in alpha_groups(alpha, Y.shape[1]):
        Yc = sp.astype(sp.take(Y, cols, axis=1), np.float64)
        rhs = _rsum(Knm, wv[:, None] * Yc, backend, sp) / n

        def cg(info, a=a, rhs=rhs):
            return _falkon_solve(Knm, T, wv, a / n, rhs, backend,
                                 {**est._iterative_args(), "info": info}, sp)

        def dense(a=a, Yc=Yc):  # iterations: CG's, all spent
            return (_dense_falkon(kernel, X, Z, w, T, a, Yc, sp),
                    est._iterative_args()["max_iter"])

        (beta[:, cols], n_iter), _ = solve_or_escalate(
            cg, dense, size=m, verbose=est.verbose, method="QR, float64",
            **est._escalation_args("falkon"))
        n_iters.append(n_iter)
    return sp.astype(Z, np_dtype(sp, X)), sp.put(beta), max(n_iters)


def _dense_falkon(kernel, X, Z, w, T, alpha, Y, sp=HOST):
    """Falkon's coefficients solved densely in float64 (its escalation, see
    :mod:`._cg_escalation`): the minimiser of ``|y - K_nm b|_W^2 + alpha b^T
    T^T T b`` (``T^T T = K_mm``, as CG's), by a QR factorisation of the
    stacked least-squares system ``[sqrt(alpha) T; sqrt(W) K_nm] b = [0;
    sqrt(W) y]`` updated block of rows by block of rows (``K(X[rows], Z)``
    from the kernel's dense evaluation, 32 MB at a time; ``m^2`` memory,
    ``2 n m^2`` operations). No normal equations: their condition number is
    the square of K_nm's, and with clustered landmarks they lost two of CG's
    digits to rounding."""
    n, m, t = X.shape[0], len(T), Y.shape[1]
    Zh = np.asarray(sp.host(Z) if not is_dask_array(X) else to_numpy(Z), np.float64)
    # the triangle R and Q^T [0; sqrt(W) y] in the last t columns: QR of [M | rhs]
    R = np.hstack([np.sqrt(alpha) * T, np.zeros((m, t))])
    step = max(1, _DENSE_BLOCK // m)
    for r0 in range(0, n, step):
        Xb = X[r0 : r0 + step]
        Xb = to_numpy(Xb) if is_dask_array(Xb) else sp.host(Xb)
        Yb = sp.host(Y[r0 : r0 + step])
        sw = np.ones(len(Xb)) if w is None else np.sqrt(np.asarray(w)[r0 : r0 + step])
        block = sw[:, None] * np.hstack([kernel(np.asarray(Xb, np.float64), Zh), Yb])
        R = scipy.linalg.qr(np.vstack([R, block]), mode="r", overwrite_a=True,
                            check_finite=False)[0][: m]
    return scipy.linalg.solve_triangular(R[:, :m], R[:, m:], check_finite=False)


def np_dtype(sp, X):
    """X's dtype, as NumPy's (Dask arrays have theirs)."""
    return np.dtype(X.dtype) if is_dask_array(X) else sp.np_dtype(X)


def _rsum(K, V, backend, sp=HOST):
    """``K^T V`` for a lazy ``K`` (a reduction over its rows), V of space
    ``sp``: the m values, gathered on the host in float64."""
    from ...lazy import Vi

    V = V.astype(K.dtype) if is_dask_array(V) else sp.engine(sp.astype(V, K.dtype))
    out = (K * Vi(V)).sum(axis=0, backend=backend)
    return np.asarray(to_numpy(out) if is_dask_array(out)
                      else sp.host(sp.from_engine(out)), dtype=np.float64)


def _falkon_solve(Knm, T, wv, lam, rhs, backend, cg_args, sp=HOST):
    """Falkon's preconditioned CG for (K_mn W K_nm / n + lam K_mm) b = rhs."""
    n, m = Knm.shape[0], len(T)
    A = robust_cholesky(T @ T.T / m + lam * np.eye(m), lower=False,
                        what="Falkon's preconditioner matrix")

    def solve(F, v, trans=False):
        return scipy.linalg.solve_triangular(F, v, trans=trans)

    def bhb(u):  # B^T H B u with B = T^-1 A^-1 and K_mm = T^T T
        v = sp.engine(sp.put(solve(T, solve(A, u)).astype(Knm.dtype)))
        Kv = Knm.matmul(v, backend=backend)
        Kv = Kv if is_dask_array(Kv) else sp.from_engine(Kv)
        knm_t_knm_v = _rsum(Knm, wv[:, None] * Kv, backend, sp) / n
        return solve(A, solve(T, knm_t_knm_v, True) + lam * solve(A, u), True)

    u, n_iter = conjugate_gradient(bhb, solve(A, solve(T, rhs, True), True), **cg_args)
    return solve(T, solve(A, u)), n_iter


def alpha_groups(alpha, n_targets):
    """``(columns, alpha)`` pairs: one group per distinct alpha."""
    if alpha.size == 1:
        return [(np.arange(n_targets), float(alpha[0]))]
    return [(np.flatnonzero(alpha == a), float(a)) for a in np.unique(alpha)]


def solve_dense(K, Y, alpha, w):
    """scikit-learn's Cholesky path: (sqrt(W) K sqrt(W) + alpha I) c' = sqrt(W) y."""
    if w is not None:
        sw = np.sqrt(w).astype(K.dtype)
        K = K * np.outer(sw, sw)
        Y = Y * sw[:, None]
    C = np.empty(Y.shape, dtype=np.result_type(K.dtype, Y.dtype))
    diag = K.flat[:: len(K) + 1]  # K is ours: shift its diagonal in place, and back
    for cols, a in alpha_groups(alpha, Y.shape[1]):
        K.flat[:: len(K) + 1] = diag + a
        try:
            C[:, cols] = scipy.linalg.solve(K, Y[:, cols], assume_a="pos")
        except np.linalg.LinAlgError:
            warnings.warn("Singular matrix in solving dual problem. Using "
                          "least-squares solution instead.", stacklevel=3)
            C[:, cols] = scipy.linalg.lstsq(K, Y[:, cols])[0]
    if w is not None:
        C *= np.sqrt(w)[:, None]
    return C
