"""Conjugate gradients with several right-hand sides, over any mat-vec.

The one implementation behind :func:`kerneltools.linalg.conjugate_gradient`,
:meth:`kerneltools.LazyTensor.solve` and the estimators' solvers; its
arguments are checked here, once, for all of them.
"""

from __future__ import annotations

import numbers
import time
import warnings

import numpy as np

from ._arrays import is_cupy_array
from ._errors import NotPositiveDefiniteError, _convergence_warning

__all__ = ["ArrayVectors", "conjugate_gradient", "check_cg_arguments",
           "refined_conjugate_gradient"]

#: Rounding allowance of ``p^T A p``: ``p^T A p < -slack`` proves that A is
#: not positive definite, with ``slack = _SLACK sqrt(n) eps |A| |p|^2`` and
#: ``|A|`` the largest ``|A p| / |p|`` seen so far.
_SLACK = 64.0


def _col_dot(a, b):
    return np.einsum("ij,ij->j", a, b)


class _NumpyVectors:
    """The vector arithmetic of CG on NumPy arrays (the default)."""

    dot = staticmethod(_col_dot)

    @staticmethod
    def coef(v, like):  # per-column coefficients, to scale columns of ``like``
        return v

    @staticmethod
    def finite(a) -> bool:
        return bool(np.all(np.isfinite(a)))

    @staticmethod
    def like(x0, b):  # x0 as a copy of b's dtype and shape
        return np.array(x0, dtype=b.dtype).reshape(b.shape)

    zeros_like = staticmethod(np.zeros_like)


class ArrayVectors:
    """CG's vector arithmetic in an Array API namespace ``xp`` (CuPy on a GPU):
    the n-sized vectors stay in ``xp`` on their device; the per-column numbers
    (dot products, CG's coefficients) come to the host as NumPy, a few values
    per iteration."""

    def __init__(self, xp):
        self.xp = xp

    def dot(self, a, b) -> np.ndarray:
        return _host(self.xp.sum(a * b, axis=0))

    def coef(self, v, like):
        return self.xp.asarray(np.asarray(v, dtype=np.float64), dtype=like.dtype,
                               device=like.device)

    def finite(self, a) -> bool:
        return bool(self.xp.all(self.xp.isfinite(a)))

    def like(self, x0, b):
        return self.xp.reshape(self.xp.astype(x0, b.dtype, copy=True), b.shape)

    def zeros_like(self, a):
        return self.xp.zeros_like(a)


def _host(a) -> np.ndarray:
    """A few numbers of a device array, as NumPy."""
    if is_cupy_array(a):
        return a.get()
    try:
        return np.array(np.from_dlpack(a))
    except (BufferError, TypeError, RuntimeError):
        return np.asarray(a)


def check_cg_arguments(b, *, tol, max_iter, x0=None, who="conjugate_gradient",
                       b_name="B", vectors=_NumpyVectors):
    """``(tol, max_iter, x0)`` checked for a 2-D right-hand side ``b``:
    ValueError naming the argument for NaN/inf in ``b`` or ``x0``, a ``tol``
    that is not a finite float > 0, a ``max_iter`` that is not an int >= 1."""
    if not vectors.finite(b):
        raise ValueError(f"{who}: '{b_name}' contains NaN or infinity")
    if (isinstance(tol, bool) or not isinstance(tol, numbers.Real)
            or not np.isfinite(tol) or not tol > 0):
        raise ValueError(f"{who}: 'tol' must be a finite float > 0, got {tol!r}")
    if max_iter is not None and (isinstance(max_iter, bool)
                                 or not isinstance(max_iter, numbers.Integral)
                                 or max_iter < 1):
        raise ValueError(f"{who}: 'max_iter' must be an int >= 1, got {max_iter!r}")
    if x0 is not None:
        x0 = np.asarray(x0) if vectors is _NumpyVectors else x0
        if (int(np.prod(x0.shape)) != int(np.prod(b.shape))
                or x0.shape[0] != b.shape[0]):
            raise ValueError(f"{who}: 'x0' must have shape {tuple(b.shape)} (that of "
                             f"'{b_name}'), got {tuple(x0.shape)}")
        x0 = vectors.like(x0, b)
        if not vectors.finite(x0):
            raise ValueError(f"{who}: 'x0' contains NaN or infinity")
    return float(tol), None if max_iter is None else int(max_iter), x0


def conjugate_gradient(matvec, b, *, tol=1e-6, max_iter=None, x0=None, callback=None,
                       precond=None, verbose=0, record=None, eps=None,
                       who="conjugate_gradient", b_name="B",
                       shift_name="the diagonal shift of 'A'", warn=True,
                       vectors=_NumpyVectors, info=None):
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
    Lanczos tridiagonal matrix of each column is rebuilt. ``vectors``: the
    arithmetic of the n-sized vectors, NumPy's by default, or
    :class:`ArrayVectors` for ``b`` of another Array API namespace (the
    per-column numbers are NumPy either way).

    Raises :class:`NotPositiveDefiniteError` when a column that has not
    converged meets ``p^T A p < 0`` beyond rounding (``eps``: the unit
    roundoff of the products, float32's by default); its message says to
    raise ``shift_name``, the caller's diagonal shift. A column whose ``p^T A p`` is 0
    to rounding (A singular there) stops, with the warning. ``who`` and
    ``b_name`` name the caller and its right-hand side in errors. ``warn=False``
    leaves the warning to the caller (:func:`refined_conjugate_gradient`
    judges the accurate residual instead). ``info``, a dict, receives
    ``"converged"`` (whether every column met ``tol``) and
    ``"relative_residual"`` (the largest ``|r| / |b|``), warning or not.

    Returns ``(x, n_iter)``.
    """
    tol, max_iter, x0 = check_cg_arguments(b, tol=tol, max_iter=max_iter, x0=x0,
                                           who=who, b_name=b_name, vectors=vectors)
    n = b.shape[0]
    max_iter = 10 * n + 100 if max_iter is None else max_iter
    eps = float(np.finfo(np.float32).eps) if eps is None else float(eps)
    apply_m = precond if precond is not None else (lambda r: r)
    dot, coef = vectors.dot, vectors.coef
    x = vectors.zeros_like(b) if x0 is None else x0
    r = b - matvec(x) if x0 is not None else b * 1  # a copy, in any namespace
    z = apply_m(r)
    p = z * 1
    rz = dot(r, z)
    bnorm = np.sqrt(dot(b, b))
    scale = np.where(bnorm > 0, bnorm, 1)
    target = tol * scale
    rnorm = np.sqrt(dot(r, r))
    anorm, singular = 0.0, False
    it, start = 0, time.perf_counter()
    while it < max_iter and not np.all(rnorm <= target):
        Ap = matvec(p)
        pAp = dot(p, Ap)
        working = rnorm > target
        anorm = _check_curvature(p, Ap, pAp, working, anorm, eps, it, who, shift_name,
                                 dot)
        active = working & (pAp > 0)
        singular |= bool(np.any(working & ~active))
        if not np.any(active):
            break
        alpha = np.where(active, rz / np.where(active, pAp, 1), 0)
        x += coef(alpha, p) * p
        r -= coef(alpha, Ap) * Ap
        rnorm = np.sqrt(dot(r, r))
        z = apply_m(r)
        rz_new = dot(r, z)
        beta = np.where(active, rz_new / np.where(rz != 0, rz, 1), 0)
        p = z + coef(beta, p) * p
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
    converged = bool(np.all(rnorm <= target))
    if info is not None:
        info.update(converged=converged, relative_residual=float(np.max(rnorm / scale)))
    if warn and not converged:
        why = ("; p^T A p was 0 to rounding: the operator is singular, or not "
               "positive definite, to working precision" if singular else "")
        _warn_not_converged(it, float(np.max(rnorm / scale)), tol, why, shift_name)
    return x, it


def _warn_not_converged(it, relres, tol, why, shift_name, stacklevel=4):
    warnings.warn(
        f"conjugate gradient did not converge in {it} iterations: relative residual "
        f"{relres:.2e} > tol={tol}{why}; raise max_iter or {shift_name}, or loosen tol",
        _convergence_warning(),
        stacklevel=stacklevel,
    )


#: Most refinement sweeps of :func:`refined_conjugate_gradient`; each gains
#: about ``-log10(floor)`` digits, so three or four reach any ``tol``.
_MAX_SWEEPS = 8


def refined_conjugate_gradient(matvec, exact_matvec, b, *, tol=1e-6, max_iter=None,
                               x0=None, floor=1e-5, precond=None, callback=None,
                               verbose=0,
                               eps=None, who="conjugate_gradient", b_name="B",
                               shift_name="the diagonal shift of 'A'", r0=None,
                               info=None, vectors=_NumpyVectors):
    """Solve ``A x = b`` with cheap products ``matvec`` (e.g. float32 kernel
    values) and an accurate residual ``exact_matvec`` (float64): mixed-precision
    iterative refinement (Wilkinson; Carson and Higham, 2018) around
    :func:`conjugate_gradient`.

    Each sweep solves the correction equation ``A d = r`` with ``matvec`` to a
    relative residual of ``max(tol |b| / (2 |r|), floor)``, ``floor`` being what
    the cheap products can resolve (about 100 of their unit roundoffs), then
    recomputes ``r = b - A x`` with ``exact_matvec``; it stops when every
    column has ``|r| <= tol |b|`` in the accurate product. If a sweep fails to
    halve the residual (the cheap operator is too far from ``A`` for this
    system), the rest of the solve runs :func:`conjugate_gradient` on
    ``exact_matvec`` from the current ``x``, so the answer never depends on the
    cheap products' accuracy. ``max_iter`` bounds the CG iterations of all
    sweeps together; ``x0`` is a starting point (a warm start) and ``r0``, if
    given, its accurate residual ``b - A x0`` (known to a caller that reuses a
    solution of a nearby system: it saves one accurate product); ``info``, a
    dict, receives ``"residual"`` (the last accurate residual, shape of ``b``)
    and ``"exact_products"`` (how many ``exact_matvec`` calls ran), and
    :func:`conjugate_gradient`'s ``"converged"`` and ``"relative_residual"``
    (of the accurate residual); the other
    arguments are :func:`conjugate_gradient`'s.

    Returns ``(x, n_iter)``, ``n_iter`` counting the CG iterations of all sweeps.
    """
    tol, max_iter, x0 = check_cg_arguments(b, tol=tol, max_iter=max_iter, x0=x0, who=who,
                                           b_name=b_name, vectors=vectors)
    max_iter = 10 * b.shape[0] + 100 if max_iter is None else max_iter
    dot = vectors.dot
    scale = np.sqrt(dot(b, b))
    scale = np.where(scale > 0, scale, 1)
    x = vectors.zeros_like(b) if x0 is None else x0
    exact = _Counted(exact_matvec)
    if r0 is not None:
        r = vectors.like(r0, b)
    else:
        r = b * 1 if x0 is None else b - exact(x)
    rel = np.sqrt(dot(r, r)) / scale
    it, start = 0, time.perf_counter()
    kw = {"precond": precond, "who": who, "b_name": b_name, "shift_name": shift_name,
          "warn": False, "vectors": vectors}
    for sweep in range(_MAX_SWEEPS):
        todo = rel > tol
        if not np.any(todo) or it >= max_iter:
            break
        # aim at half of what is needed: the accurate residual differs a little
        inner = max(0.5 * float(np.min(tol / rel[todo])), floor)
        # converged columns get a zero right-hand side: nothing to do there
        d, k = conjugate_gradient(matvec, vectors.coef(todo, r) * r, tol=inner,
                                  max_iter=max_iter - it, eps=eps, verbose=verbose,
                                  callback=None if callback is None
                                  else (lambda d: callback(x + d)), **kw)
        x += d
        it += k
        r = b - exact(x)
        last, rel = rel, np.sqrt(dot(r, r)) / scale
        if verbose:
            print(f"[CG] refinement sweep {sweep + 1}: accurate relative residual "
                  f"{float(np.max(rel)):.3e}  {time.perf_counter() - start:7.2f} s",
                  flush=True)
        if np.any(todo & (rel > tol) & (rel > 0.5 * last)) and it < max_iter:
            # the cheap products stall: finish with the accurate ones
            x, k = conjugate_gradient(exact, b, x0=x, tol=tol,
                                      max_iter=max_iter - it, verbose=verbose,
                                      callback=callback, info=info,
                                      **{**kw, "warn": True})
            if info is not None:  # the accurate CG's residual, recomputed
                info.update(residual=b - exact(x), exact_products=exact.calls)
            return x, it + k
    if np.any(rel > tol):
        _warn_not_converged(it, float(np.max(rel)), tol, "", shift_name, stacklevel=3)
    if info is not None:
        info.update(residual=r, exact_products=exact.calls,
                    converged=bool(np.all(rel <= tol)),
                    relative_residual=float(np.max(rel)))
    return x, it


class _Counted:
    """A mat-vec that counts its calls (the accurate products are the cost)."""

    def __init__(self, f):
        self.f, self.calls = f, 0

    def __call__(self, v):
        self.calls += 1
        return self.f(v)


def _check_curvature(p, Ap, pAp, working, anorm, eps, it, who, shift_name,
                     dot=_col_dot) -> float:
    """Raise unless ``p^T A p`` is finite, and > 0 to rounding, on the
    columns still ``working``; returns the updated estimate of ``|A|``."""
    if not np.any(working):
        return anorm
    if not np.all(np.isfinite(pAp[working])):
        raise FloatingPointError(
            f"{who}: the operator's product A p is NaN or infinite at iteration "
            f"{it + 1}: the operator overflows or computes NaN on finite input"
        )
    pp = dot(p, p)
    nonzero = working & (pp > 0)
    if np.any(nonzero):
        ratio = np.sqrt(dot(Ap, Ap)[nonzero] / pp[nonzero])
        anorm = max(anorm, float(np.max(ratio)))
    slack = _SLACK * np.sqrt(p.shape[0]) * eps * anorm * pp
    bad = np.flatnonzero(working & (pAp < -slack))
    if len(bad):
        c = int(bad[0])
        raise NotPositiveDefiniteError(
            f"{who}: the operator is not positive definite: conjugate gradients met "
            f"p^T A p = {float(pAp[c]):.3g} < 0 (|p|^2 = {float(pp[c]):.3g}) at "
            f"iteration {it + 1}, column {c}, beyond rounding; raise {shift_name}, "
            "or check that the kernel is positive semi-definite"
        )
    return anorm
