"""Conjugate gradients with several right-hand sides, over any mat-vec."""

from __future__ import annotations

import warnings

import numpy as np

from ._errors import _convergence_warning

__all__ = ["conjugate_gradient"]


def conjugate_gradient(matvec, b, *, tol=1e-6, max_iter=None, x0=None, callback=None):
    """Solve ``A x = b`` for a symmetric positive-definite ``A`` given as ``matvec``.

    Each column of ``b`` (shape (n, E)) runs its own CG recurrence (Hestenes and
    Stiefel, 1952), all of them through one ``matvec`` call per iteration. Stops
    when every column has ``|r| <= tol |b|``; warns with
    :class:`ConvergenceWarning` when ``max_iter`` is reached first.

    Returns ``(x, n_iter)``.
    """
    n = b.shape[0]
    max_iter = 10 * n + 100 if max_iter is None else int(max_iter)
    x = np.zeros_like(b) if x0 is None else np.array(x0, dtype=b.dtype).reshape(b.shape)
    r = b - matvec(x) if x0 is not None else b.copy()
    p = r.copy()
    rr = np.einsum("ij,ij->j", r, r)
    bnorm = np.sqrt(np.einsum("ij,ij->j", b, b))
    target = tol * np.where(bnorm > 0, bnorm, 1)
    it = 0
    while it < max_iter:
        if np.all(np.sqrt(rr) <= target):
            break
        Ap = matvec(p)
        pAp = np.einsum("ij,ij->j", p, Ap)
        active = (np.sqrt(rr) > target) & (pAp > 0)
        if not np.any(active):
            break
        alpha = np.where(active, rr / np.where(active, pAp, 1), 0)
        x += alpha * p
        r -= alpha * Ap
        rr_new = np.einsum("ij,ij->j", r, r)
        beta = np.where(active, rr_new / np.where(rr > 0, rr, 1), 0)
        p = r + beta * p
        rr = rr_new
        it += 1
        if callback is not None:
            callback(x)
    if not np.all(np.sqrt(rr) <= target):
        warnings.warn(
            f"conjugate gradient did not converge in {it} iterations: relative residual "
            f"{float(np.max(np.sqrt(rr) / np.where(bnorm > 0, bnorm, 1))):.2e} > tol={tol}; "
            "raise max_iter or alpha, or loosen tol",
            _convergence_warning(),
            stacklevel=3,
        )
    return x, it
