"""The exact (Cholesky) log marginal likelihood of GaussianProcessRegressor,
and its gradient, without the ``(n, n, n_theta)`` tensor of derivatives.

Rasmussen and Williams, "Gaussian Processes for Machine Learning" (2006),
Algorithm 2.1 and eq. (5.9), with ``A = K + alpha I`` (white noise included)
and targets ``Y`` (n, t):

- ``L = chol(A)`` (LAPACK ``dpotrf``), ``a = A^{-1} Y`` (``dpotrs``),
  ``lml = -1/2 sum(Y * a) - t sum log L_ii - t n/2 log(2 pi)``;
- ``d lml / d theta_p = 1/2 sum_ij W_ij dA_ij / d theta_p`` with
  ``W = a a^T - t A^{-1}``, ``A^{-1}`` from the same factor (``dpotri``:
  ``n^3 / 3 + n^3 / 3`` flops, where scikit-learn's ``cho_solve(L, I)`` takes
  ``2 n^3``).

For ``c * phi(|x / l - y / l|^2)`` kernels (``c * RBF``, ``c * Matern`` with
nu = 1.5, 2.5 or inf, plus white noise; :func:`kerneltools.kernels.stationary_form`)
the gradient is a few BLAS calls on ``W``: ``d k / d log c = k`` and, with
``u = X / l`` and ``G = W * (-2 c phi'(s))`` elementwise,
``1/2 sum_ij G_ij (u_id - u_jd)^2 = sum_i u_id^2 (G 1)_i - (u_d^T G u_d)``,
one ``G @ u`` product for every length scale at once. (Matern nu = 0.5 is
left out: its ``phi'(s) ~ 1 / sqrt(s)`` makes that difference cancel
catastrophically for close points.) Other kernels evaluate their symbolic
derivatives (:meth:`kerneltools.kernels.Kernel.log_gradient`) by blocks of
rows, each contracted with its rows of ``W`` and dropped.

The BLAS thread policy is BLAS's own (all its threads): no OpenMP reduction
runs in between (the iterative solver's, :mod:`._gp_iterative`, limits BLAS
to one thread for that reason), and the ``n^3`` factorisations are where
threads pay.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import blas, lapack
from scipy.spatial.distance import cdist

from ...kernels import stationary_form
from ...lazy import Vi, Vj

#: Derivative values per block of rows in the general gradient (32 MB).
_BLOCK = 1 << 22


def _phi_and_weight(nu, S):
    """``(phi(s), -2 phi'(s))`` on the scaled squared distances ``S`` (in
    place of ``S`` for the first), for the stationary correlations."""
    if nu == math.inf:  # RBF: phi = exp(-s / 2), -2 phi' = phi
        np.multiply(S, -0.5, out=S)
        np.exp(S, out=S)
        return S, S
    r = np.sqrt(S)
    if nu == 1.5:  # (1 + t) e^-t, t = sqrt(3) r; -2 phi' = 3 e^-t
        r *= math.sqrt(3)
        w = np.exp(-r)
        phi = (1.0 + r) * w
        w *= 3.0
        return phi, w
    # nu = 2.5: (1 + t + t^2 / 3) e^-t, t = sqrt(5) r; -2 phi' = 5/3 (1 + t) e^-t
    r *= math.sqrt(5)
    e = np.exp(-r)
    phi = (1.0 + r + r * r / 3.0) * e
    w = (5.0 / 3.0) * (1.0 + r) * e
    return phi, w


def lml_and_gradient(sk_kernel, kernel, X, Y, shift, eval_gradient):
    """The exact log marginal likelihood (and its gradient) at ``sk_kernel``.

    Parameters
    ----------
    sk_kernel : sklearn.gaussian_process.kernels.Kernel
        The kernel at the hyperparameters to evaluate.
    kernel : kerneltools.kernels.Kernel
        Its translation (:func:`kerneltools.kernels.make_kernel`).
    X : ndarray of shape (n, d)
    Y : ndarray of shape (n, t)
    shift : float or ndarray of shape (n,)
        Added to the diagonal (the estimator's ``alpha``).
    eval_gradient : bool

    Returns
    -------
    lml : numpy.float64
        ``-inf`` where ``K + shift I`` is not positive definite.
    grad : ndarray of shape (n_theta,), if ``eval_gradient``
        Zeros where ``lml`` is ``-inf``.
    """
    n, t = Y.shape
    form = stationary_form(sk_kernel)
    if form is not None and form.nu == 0.5:
        form = None
    if form is not None:
        U = X / form.length_scale
        phi, w = _phi_and_weight(form.nu, cdist(U, U, "sqeuclidean"))
        A = phi * form.c
        A[np.diag_indices(n)] += kernel.white_level()
    else:
        A = np.require(sk_kernel(X), np.float64, ["C", "W"])
    A[np.diag_indices(n)] += shift
    # A is symmetric: its transpose is the same matrix in Fortran order, which
    # LAPACK factors, inverts and updates in place (lower triangle) without a copy.
    L, info = lapack.dpotrf(A.T, lower=1, clean=0, overwrite_a=1)
    if info != 0:
        return (-np.inf, np.zeros(kernel.theta.size)) if eval_gradient else -np.inf
    a, info = lapack.dpotrs(L, Y, lower=1)
    lml = lml_value(Y, a, L)
    if not eval_gradient:
        return lml
    Kinv, info = lapack.dpotri(L, lower=1, overwrite_c=1)
    # W = a a^T - t K^-1, on the lower triangle (dsyrk), then mirrored
    W = blas.dsyrk(1.0, a, beta=-float(t), c=Kinv, lower=1, overwrite_c=1)
    W = _mirror_lower(W)
    grad = 0.5 * np.trace(W) * kernel.white_log_gradient()
    if form is None:
        return lml, grad + _formula_gradient(kernel, X, W)
    amplitude = 0.5 * form.c * np.vdot(W, phi)  # 1/2 sum W * k, d k / d log c = k
    G = np.multiply(W, w, out=W)
    G *= form.c
    return lml, grad + _stationary_gradient(kernel, form, amplitude, G, U)


def lml_value(Y, a, L):
    """``-1/2 sum(Y * a) - t sum log L_ii - t n/2 log(2 pi)``, ``a = A^{-1} Y``
    and ``L`` the Cholesky factor of ``A`` (np.float64, as scikit-learn's)."""
    n, t = Y.shape
    logdiag = np.log(np.diagonal(L)).sum()
    return np.float64(-0.5 * np.einsum("ik,ik->", Y, a) - t * logdiag
                      - t * n / 2 * np.log(2 * np.pi))


#: Side of the square blocks in which :func:`_mirror_lower` copies.
_MIRROR = 256


def _mirror_lower(M):
    """The symmetric matrix whose lower triangle is that of the Fortran-order
    ``M``, in place, as a C-order array: ``M.T`` holds it in its upper
    triangle, copied to its lower one by square blocks (a whole-matrix
    transpose strides through memory: 10x slower at n = 3,000)."""
    C = M.T
    n = len(C)
    for i0 in range(0, n, _MIRROR):
        rows = slice(i0, i0 + _MIRROR)
        for j0 in range(0, i0, _MIRROR):
            cols = slice(j0, j0 + _MIRROR)
            C[rows, cols] = C[cols, rows].T
        D = C[rows, rows]
        low = np.tril_indices(len(D), -1)
        D[low] = D.T[low]
    return C


def _stationary_gradient(kernel, form, amplitude, G, U):
    """``1/2 sum_ij W_ij dk_ij / d log theta`` for ``c * phi(|u_i - u_j|^2)``
    (white noise apart): ``amplitude`` for each constant factor, and from
    ``G = W * (-2 c phi'(s))`` the length scales' (see the module's notes)."""
    GU = G @ U
    row = G.sum(axis=1)
    per_feature = (U * U).T @ row - np.einsum("id,id->d", U, GU)
    parts = []
    for name in kernel.hyperparameter_names:
        size = int(np.size(kernel.params[name]))
        if name in form.constants:
            parts.append(np.full(size, amplitude))
        elif name == form.length_scale_name:
            parts.append(per_feature if size > 1 else np.array([per_feature.sum()]))
        else:
            parts.append(np.zeros(size))
    return np.concatenate(parts) if parts else np.empty(0)


def _formula_gradient(kernel, X, W):
    """``1/2 sum_ij W_ij dk_ij / d log theta`` from the kernel's symbolic
    derivatives, evaluated by blocks of rows (white noise apart)."""
    n = len(X)
    sizes = [int(np.size(kernel.params[h])) for h in kernel.hyperparameter_names]
    grad = np.zeros(sum(sizes))
    step = max(1, _BLOCK // (n * max(sum(sizes), 1)))
    y_j = Vj(X)
    for r0 in range(0, n, step):
        rows = slice(r0, r0 + step)
        x_i, m = Vi(X[rows]), len(X[rows])
        pos = 0
        for f, size in zip(kernel.log_gradient(x_i, y_j), sizes):
            if f is not None:
                block = np.broadcast_to(f.to_dense(), (m, n, size))
                grad[pos : pos + size] += 0.5 * np.einsum("ij,ijp->p", W[rows], block)
            pos += size
    return grad
