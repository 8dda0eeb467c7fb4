"""Conjugate gradients with several right-hand sides, over any mat-vec."""

from __future__ import annotations

import time
import warnings

import numpy as np

from ._errors import _convergence_warning

__all__ = ["conjugate_gradient"]


def _col_dot(a, b):
    return np.einsum("ij,ij->j", a, b)


def conjugate_gradient(matvec, b, *, tol=1e-6, max_iter=None, x0=None, callback=None,
                       precond=None, verbose=0, record=None):
    """Solve ``A x = b`` for a symmetric positive-definite ``A`` given as ``matvec``.

    Each column of ``b`` (shape (n, E)) runs its own (preconditioned) CG
    recurrence (Hestenes and Stiefel, 1952), all of them through one ``matvec``
    call per iteration. ``precond(R)``, if given, applies an SPD approximation
    of ``A^{-1}`` to the residuals. Stops when every column has
    ``|r| <= tol |b|``; warns with :class:`ConvergenceWarning` when
    ``max_iter`` is reached first. ``callback(x)`` runs after each iteration;
    ``verbose`` prints the iteration, the largest relative residual and the
    elapsed time. ``record``, a list, receives ``(alpha, beta, active)`` per
    iteration (arrays over the columns): the coefficients from which the
    Lanczos tridiagonal matrix of each column is rebuilt.

    Returns ``(x, n_iter)``.
    """
    n = b.shape[0]
    max_iter = 10 * n + 100 if max_iter is None else int(max_iter)
    apply_m = precond if precond is not None else (lambda r: r)
    x = np.zeros_like(b) if x0 is None else np.array(x0, dtype=b.dtype).reshape(b.shape)
    r = b - matvec(x) if x0 is not None else b.copy()
    z = apply_m(r)
    p = z.copy()
    rz = _col_dot(r, z)
    bnorm = np.sqrt(_col_dot(b, b))
    scale = np.where(bnorm > 0, bnorm, 1)
    target = tol * scale
    rnorm = np.sqrt(_col_dot(r, r))
    it, start = 0, time.perf_counter()
    while it < max_iter and not np.all(rnorm <= target):
        Ap = matvec(p)
        pAp = _col_dot(p, Ap)
        active = (rnorm > target) & (pAp > 0)
        if not np.any(active):
            break
        alpha = np.where(active, rz / np.where(active, pAp, 1), 0)
        x += alpha * p
        r -= alpha * Ap
        rnorm = np.sqrt(_col_dot(r, r))
        z = apply_m(r)
        rz_new = _col_dot(r, z)
        beta = np.where(active, rz_new / np.where(rz != 0, rz, 1), 0)
        p = z + beta * p
        rz = rz_new
        it += 1
        if record is not None:
            record.append((alpha, beta, active))
        if verbose:
            print(f"[CG] iteration {it:4d}  relative residual "
                  f"{float(np.max(rnorm / scale)):.3e}  {time.perf_counter() - start:7.2f} s",
                  flush=True)
        if callback is not None:
            callback(x)
    if not np.all(rnorm <= target):
        warnings.warn(
            f"conjugate gradient did not converge in {it} iterations: relative residual "
            f"{float(np.max(rnorm / scale)):.2e} > tol={tol}; "
            "raise max_iter or alpha, or loosen tol",
            _convergence_warning(),
            stacklevel=3,
        )
    return x, it
