"""libsvm's SMO on a dense block: the inner solver of the kernel SVMs.

:func:`smo_block` runs libsvm's ``Solver`` (or ``Solver_NU``) loop on one
``b x b`` block of ``Q = y y^T K``: the second-order working-set selection
WSS2 (Fan, Chen and Lin, JMLR 2005; ties to the last index, as libsvm's
``>=``), libsvm's clipped two-variable update, and the update of ``-y G`` on
the block, until the block's maximal violation is below ``eps``. Two
implementations give identical iterates in float64: a C loop (the CPU
backend's compiler and loader, :func:`kerneltools.backend.cpu._library.
library`, built with ``-ffp-contract=off`` so that every operation rounds as
NumPy's does; a few microseconds an iteration at ``b = 2048``) and the NumPy
reference (:func:`smo_block_numpy`), which runs where there is no compiler or
the configured backend is ``"numpy"``.

``K`` holds libsvm's kernel values: float32 (its ``Qfloat``), read as float64.
"""

from __future__ import annotations

import warnings

import numpy as np

from ._smo_shrink import SHRINK_SOURCE

__all__ = ["smo_block", "smo_block_numpy", "smo_native_available"]

#: libsvm's TAU: the curvature used for a pair whose kernel curvature is <= 0.
TAU = 1e-12

_SOURCE = r"""
/* kerneltools: libsvm's SMO on a dense block (see linalg/_box_qp.py).
 * key ${key}
 * Compiled with -ffp-contract=off: each operation rounds as NumPy's. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#define TAU 1e-12
const char *kt_key(void) { return "${key}"; }

/* the first scan of WSS2 at t: the largest v free to go up (the last index
 * of the maximum, libsvm's >=), the smallest free to go down, per group */
#define KT_SCAN(t) { \
    int g_ = nu ? (y[t] > 0) : 0; \
    if (up[t] && v[t] >= vmax[g_]) { vmax[g_] = v[t]; ig[g_] = t; } \
    if (low[t] && v[t] < vmin[g_]) vmin[g_] = v[t]; }

static void kt_update_pair(double *pai, double *paj, double Gi, double Gj,
                           double yi, double yj, double Ci, double Cj,
                           double quad) {
    double ai = *pai, aj = *paj;
    quad = quad > 0 ? quad : TAU;
    if (yi != yj) {
        double delta = (-Gi - Gj) / quad, diff = ai - aj;
        ai = ai + delta; aj = aj + delta;
        if (diff > 0) { if (aj < 0) { aj = 0.0; ai = diff; } }
        else if (ai < 0) { ai = 0.0; aj = -diff; }
        if (diff > Ci - Cj) { if (ai > Ci) { ai = Ci; aj = Ci - diff; } }
        else if (aj > Cj) { aj = Cj; ai = Cj + diff; }
    } else {
        double delta = (Gi - Gj) / quad, total = ai + aj;
        ai = ai - delta; aj = aj + delta;
        if (total > Ci) { if (ai > Ci) { ai = Ci; aj = total - Ci; } }
        else if (aj < 0) { aj = 0.0; ai = total; }
        if (total > Cj) { if (aj > Cj) { aj = Cj; ai = total - Cj; } }
        else if (ai < 0) { ai = 0.0; aj = total; }
    }
    *pai = ai; *paj = aj;
}

/* alpha, v (= -y G) updated in place; returns the iterations. nu: one pair
 * per sign of y (Solver_NU). */
int64_t kt_smo_block(int64_t b, double *alpha, double *v, const double *y,
                     const double *C, const float *K, const double *kd,
                     double eps, int nu, int64_t max_iter) {
    char *up = malloc(b), *low = malloc(b);
    int64_t its = 0;
    if (!up || !low) { free(up); free(low); return -1; }
    for (int64_t t = 0; t < b; t++) {
        int pos = y[t] > 0, upper = alpha[t] >= C[t], lower = alpha[t] <= 0;
        up[t] = pos ? !upper : !lower;
        low[t] = pos ? !lower : !upper;
    }
    int64_t ig[2] = {-1, -1};
    double vmax[2] = {-INFINITY, -INFINITY}, vmin[2] = {INFINITY, INFINITY};
    for (int64_t t = 0; t < b; t++) KT_SCAN(t)
    while (max_iter == -1 || its < max_iter) {
        int64_t i, j = -1;
        double gap = -INFINITY, best = -INFINITY;
        if (!nu) {
            if (ig[0] < 0) break;
            gap = vmax[0] - vmin[0];
            if (!(gap >= eps)) break;
        } else {
            int any = 0;
            for (int g = 0; g < 2; g++) {
                if (ig[g] < 0 || vmin[g] == INFINITY) { ig[g] = -1; continue; }
                any = 1;
                if (vmax[g] - vmin[g] > gap) gap = vmax[g] - vmin[g];
            }
            if (!any || gap < eps) break;
        }
        for (int64_t t = 0; t < b; t++) {
            int g = nu ? (y[t] > 0) : 0;
            if (!low[t] || ig[g] < 0) continue;
            int64_t s = ig[g];
            double diff = v[s] - v[t];
            if (!(diff > 0)) continue;
            double q = kd[s] + kd[t] - 2 * (double)K[s * b + t];
            q = q > 0 ? q : TAU;
            double gain = diff * diff / q;
            if (gain >= best) { best = gain; j = t; }
        }
        if (j < 0) break;
        i = ig[nu ? (y[j] > 0) : 0];
        double ai = alpha[i], aj = alpha[j];
        double quad = kd[i] + kd[j] - 2 * (double)K[i * b + j];
        kt_update_pair(&ai, &aj, -y[i] * v[i], -y[j] * v[j], y[i], y[j], C[i],
                       C[j], quad);
        double di = (ai - alpha[i]) * y[i], dj = (aj - alpha[j]) * y[j];
        alpha[i] = ai; alpha[j] = aj;
        int64_t pair[2] = {i, j};
        for (int k = 0; k < 2; k++) {
            int64_t t = pair[k];
            up[t] = y[t] > 0 ? alpha[t] < C[t] : alpha[t] > 0;
            low[t] = y[t] > 0 ? alpha[t] > 0 : alpha[t] < C[t];
        }
        /* the update of v and the next selection's first scan, one pass */
        const float *Ki = K + i * b, *Kj = K + j * b;
        ig[0] = ig[1] = -1;
        vmax[0] = vmax[1] = -INFINITY;
        vmin[0] = vmin[1] = INFINITY;
        for (int64_t t = 0; t < b; t++) {
            v[t] -= (double)Ki[t] * di + (double)Kj[t] * dj;
            KT_SCAN(t)
        }
        its++;
    }
    free(up); free(low);
    return its;
}
"""

_loaded: list = []


def _native():
    """The compiled ``kt_smo_block``, or None where no compiler works."""
    if _loaded:
        return _loaded[0]
    import ctypes  # noqa: PLC0415
    from dataclasses import replace  # noqa: PLC0415
    from string import Template  # noqa: PLC0415

    from ..backend.cpu._compiler import find_compiler  # noqa: PLC0415
    from ..backend.cpu._library import KEY, library  # noqa: PLC0415
    from ..exceptions import (  # noqa: PLC0415
        BackendFallbackWarning,
        BackendUnavailableError,
        CacheError,
        CompileError,
    )

    comp = find_compiler()
    fn = None
    if comp.ok:
        flags = [f for f in comp.flags if not f.startswith("-ffp-contract")
                 and f != "-fopenmp"]
        comp = replace(comp, flags=[*flags, "-ffp-contract=off"])
        try:
            source = Template(_SOURCE).substitute(key=KEY) + SHRINK_SOURCE
            lib = library(source, comp).cdll
        except (BackendUnavailableError, CacheError, CompileError) as exc:
            warnings.warn(f"smo_block: no compiled loop ({exc}); the NumPy loop "
                          "runs", BackendFallbackWarning, stacklevel=3)
        else:
            fn, P, I64 = lib.kt_smo_block, ctypes.c_void_p, ctypes.c_int64
            fn.restype = I64
            fn.argtypes = [I64, P, P, P, P, P, P, ctypes.c_double, ctypes.c_int,
                           I64]
            shrink = lib.kt_smo_shrink
            shrink.restype = I64
            shrink.argtypes = [I64, P, P, P, P, P, P, P, ctypes.c_double,
                               ctypes.c_int, I64]
            fn.shrink = shrink
    _loaded.append(fn)
    return fn


def smo_native_available() -> bool:
    """Tell whether the compiled SMO loop runs here (a working C compiler).

    Returns
    -------
    bool
        True where :func:`smo_block` runs the compiled loop.

    Examples
    --------
    >>> from kerneltools.linalg import smo_native_available
    >>> isinstance(smo_native_available(), bool)
    True
    """
    return _native() is not None


def smo_block(alpha, G, y, C, K, kd, *, eps, nu=False, max_iter=-1, backend=None,
              p=None, shrinking=False):
    """libsvm's SMO on a block until its maximal violation is below ``eps``.

    Parameters
    ----------
    alpha, G, y, C : ndarray of shape (b,)
        Dual variables, gradient ``Q alpha + p``, labels (+-1), upper bounds.
    K : ndarray of shape (b, b)
        The block's kernel, libsvm's float32 values (any float type: read as
        float32 values).
    kd : ndarray of shape (b,)
        The block's kernel diagonal, float64.
    eps : float
    nu : bool
        ``Solver_NU``: each pair within one sign of ``y``.
    max_iter : int
        Cap on the iterations, -1 for none.
    backend : str or None
        ``"numpy"`` runs the NumPy reference; otherwise the compiled loop
        where a compiler works (None: the configured backend).
    p : ndarray of shape (b,), optional
        The linear term (``G = Q alpha + p``): needed by ``shrinking``.
    shrinking : bool, default=False
        Use libsvm's shrinking, on the whole problem (``K`` is all of it): its
        iterates, ties included (:mod:`._smo_shrink`). Compiled loop only;
        the NumPy reference runs without it (the same optimum to ``eps``).

    Returns
    -------
    alpha : ndarray, the block's new dual variables
    v : ndarray, ``-y G`` on the block at the end
    n_iter : int

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.linalg import smo_block
    >>> K = np.array([[1, .2, .1], [.2, 1, .3], [.1, .3, 1]], dtype=np.float32)
    >>> y, C = np.array([1., -1., 1.]), np.ones(3)
    >>> alpha, v, n_iter = smo_block(np.zeros(3), -np.ones(3), y, C, K,
    ...                              np.ones(3), eps=1e-3)
    >>> bool(abs(y @ alpha) < 1e-12 and np.all((alpha >= 0) & (alpha <= 1)))
    True
    """
    from ..config import get_config  # noqa: PLC0415

    backend = get_config()["backend"] if backend is None else backend
    fn = None if backend == "numpy" else _native()
    if fn is None:
        return smo_block_numpy(alpha, G, y, C, K, kd, eps=eps, nu=nu,
                               max_iter=max_iter)
    f64 = np.float64
    alpha = np.array(alpha, dtype=f64, order="C")
    y, C = np.ascontiguousarray(y, f64), np.ascontiguousarray(C, f64)
    K = np.ascontiguousarray(K, dtype=np.float32)
    kd = np.ascontiguousarray(kd, f64)
    if shrinking and p is not None:
        G = np.array(G, dtype=f64, order="C")
        p = np.ascontiguousarray(p, f64)
        its = fn.shrink(len(alpha), alpha.ctypes.data, G.ctypes.data, p.ctypes.data,
                        y.ctypes.data, C.ctypes.data, K.ctypes.data, kd.ctypes.data,
                        float(eps), int(nu), int(max_iter))
        if its < 0:
            raise MemoryError("smo_block: no memory for the solver's arrays")
        return alpha, -y * G, int(its)
    v = np.ascontiguousarray(-y * G, dtype=f64)
    its = fn(len(alpha), alpha.ctypes.data, v.ctypes.data, y.ctypes.data,
             C.ctypes.data, K.ctypes.data, kd.ctypes.data, float(eps), int(nu),
             int(max_iter))
    if its < 0:
        raise MemoryError("smo_block: no memory for the block's flags")
    return alpha, v, int(its)


# -- the NumPy reference -----------------------------------------------------


def _up_low(y, alpha, C):
    """Variables free to increase ``-y G`` (``I_up``) and to decrease (``I_low``)."""
    upper, lower = alpha >= C, alpha <= 0
    pos = y > 0
    return np.where(pos, ~upper, ~lower), np.where(pos, ~lower, ~upper)


def smo_block_numpy(alpha, G, y, C, K, kd, *, eps, nu=False, max_iter=-1):
    """Run :func:`smo_block` in NumPy, vectorised over the block (the reference).

    Parameters
    ----------
    alpha : ndarray of shape (b,)
        The dual variables.
    G : ndarray of shape (b,)
        The gradient ``Q alpha + p``.
    y : ndarray of shape (b,)
        The labels (+-1).
    C : ndarray of shape (b,)
        The upper bounds.
    K : ndarray of shape (b, b)
        The block's kernel (read as float32 values).
    kd : ndarray of shape (b,)
        The block's kernel diagonal, float64.
    eps : float
        The stopping tolerance on the maximal violation.
    nu : bool, default=False
        ``Solver_NU``: each pair within one sign of ``y``.
    max_iter : int, default=-1
        Cap on the iterations, -1 for none.

    Returns
    -------
    alpha : ndarray of shape (b,)
        The block's new dual variables.
    v : ndarray of shape (b,)
        ``-y G`` on the block at the end.
    n_iter : int
        The iterations.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.linalg import smo_block_numpy
    >>> K = np.array([[1, .2, .1], [.2, 1, .3], [.1, .3, 1]], dtype=np.float32)
    >>> y, C = np.array([1., -1., 1.]), np.ones(3)
    >>> alpha, v, n_iter = smo_block_numpy(np.zeros(3), -np.ones(3), y, C, K,
    ...                                    np.ones(3), eps=1e-3)
    >>> bool(abs(y @ alpha) < 1e-12 and np.all((alpha >= 0) & (alpha <= 1)))
    True
    """
    alpha = np.array(alpha, dtype=np.float64)
    v = -y * G  # -y G, updated in place
    up, low = _up_low(y, alpha, C)
    quad = _Curvature(K, kd)
    groups = [y > 0, y < 0] if nu else None
    its = 0
    while max_iter == -1 or its < max_iter:
        pair = _select_pair(v, up, low, quad, groups, eps)
        if pair is None:
            break
        i, j = pair
        # Python floats: C = inf (a hard margin) gives inf - inf = nan in the
        # clipping tests, as in libsvm's C, without NumPy's warning
        ai, aj = update_pair(float(alpha[i]), float(alpha[j]), float(-y[i] * v[i]),
                             float(-y[j] * v[j]), y[i], y[j], float(C[i]),
                             float(C[j]), float(quad.pair(i, j)))
        di, dj = ai - alpha[i], aj - alpha[j]
        alpha[i], alpha[j] = ai, aj
        Ki, Kj = K[i].astype(np.float64), K[j].astype(np.float64)
        v -= Ki * (y[i] * di) + Kj * (y[j] * dj)  # K symmetric: rows
        for t in (i, j):
            up[t] = alpha[t] < C[t] if y[t] > 0 else alpha[t] > 0
            low[t] = alpha[t] > 0 if y[t] > 0 else alpha[t] < C[t]
        its += 1
    return alpha, v, its


class _Curvature:
    """libsvm's curvature ``K_ii + K_jj - 2 K_ij`` of a pair (TAU where <= 0),
    a row at a time: a step uses far fewer rows than the block has."""

    def __init__(self, K, kd):
        self.K, self.kd = K, kd

    def __getitem__(self, i):
        q = self.kd[i] + self.kd - 2 * self.K[i].astype(np.float64)
        return np.where(q > 0, q, TAU)

    def pair(self, i, j):
        q = self.kd[i] + self.kd[j] - 2 * float(self.K[i, j])
        return q if q > 0 else TAU


def _last(a, fn):
    """The last index where ``fn`` (argmax or argmin) is reached (libsvm's ties)."""
    return len(a) - 1 - int(fn(a[::-1]))


def _select_pair(v, up, low, quad, groups, eps):
    """WSS2 (libsvm's ``select_working_set``; per sign for ``Solver_NU``): ``i``
    maximal ``v`` in ``up``; ``j`` in ``low`` maximising ``(v_i - v_j)^2 /
    quad_ij`` (libsvm minimises its negative); ties go to the last index, as
    libsvm's ``>=`` and ``<=``. None when the violation is below ``eps`` or
    no pair can move."""
    if groups is None:
        vu = np.where(up, v, -np.inf)
        i = _last(vu, np.argmax)
        vl = np.where(low, v, np.inf)
        gap = vu[i] - vl.min()
        if not gap >= eps:  # also NaN: nothing free on one side
            return None
        diff = vu[i] - vl  # -inf off the low set
        gain = np.where(diff > 0, diff * diff / quad[i], -np.inf)
        j = _last(gain, np.argmax)
        return (i, j) if gain[j] > -np.inf else None
    gap, gain, first = -np.inf, None, np.empty(len(v), dtype=np.intp)
    for g in groups:
        vu = np.where(up & g, v, -np.inf)
        i = _last(vu, np.argmax)
        vl = np.where(low & g, v, np.inf)
        if vu[i] == -np.inf or vl.min() == np.inf:
            continue
        gap = max(gap, vu[i] - vl.min())
        diff = vu[i] - vl
        o = np.where(diff > 0, diff * diff / quad[i], -np.inf)
        gain = o if gain is None else np.where(g, o, gain)
        first[g] = i
    if gap < eps or gain is None:
        return None
    j = _last(gain, np.argmax)
    return (int(first[j]), j) if gain[j] > -np.inf else None


def update_pair(ai, aj, Gi, Gj, yi, yj, Ci, Cj, quad):
    """libsvm's two-variable update of ``Solver::Solve``, with its clipping to
    the box; ``quad = K_ii + K_jj - 2 K_ij``."""
    quad = quad if quad > 0 else TAU
    if yi != yj:
        delta = (-Gi - Gj) / quad
        diff = ai - aj
        ai, aj = ai + delta, aj + delta
        if diff > 0:
            if aj < 0:
                aj, ai = 0.0, diff
        elif ai < 0:
            ai, aj = 0.0, -diff
        if diff > Ci - Cj:
            if ai > Ci:
                ai, aj = Ci, Ci - diff
        elif aj > Cj:
            aj, ai = Cj, Cj + diff
    else:
        delta = (Gi - Gj) / quad
        total = ai + aj
        ai, aj = ai - delta, aj + delta
        if total > Ci:
            if ai > Ci:
                ai, aj = Ci, total - Ci
        elif aj < 0:
            aj, ai = 0.0, total
        if total > Cj:
            if aj > Cj:
                aj, ai = Cj, total - Cj
        elif ai < 0:
            ai, aj = 0.0, total
    return ai, aj
