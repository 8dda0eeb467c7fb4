"""KernelRidge's CG solver, one path for NumPy, Dask rows and device arrays.

``(K + alpha W^-1) c = y`` on the points of positive weight (``c = 0`` on
the others), the SPD form of ``(sqrt(W) K sqrt(W) + alpha I) c' = sqrt(W) y``
with ``c = sqrt(W) c'``, solved by
:func:`kerneltools.linalg.conjugate_gradient` with its vectors in the
namespace of the data (``sp``, a :class:`~kerneltools._utils._array_api.Space`:
NumPy on the host, CuPy on a GPU, array-api-strict in the tests). The
estimator converts X and y once where they enter (``fit``) and the
coefficients once where they leave; here everything stays in ``sp.xp``:
each product ``K v`` is one reduction on arrays of the space, float32
products are refined by float64 ones (iterative refinement), and where CG
stops at ``max_iter`` short of ``tol`` the system is solved densely in
float64 on the host (n <= ``DENSE_SOLVE_MAX``, else ConvergenceError:
:mod:`.._shared._cg_escalation`).

Two things differ by where the data are, each for a reason:

- the Nystroem preconditioner: on the host,
  :class:`kerneltools.linalg.NystroemPreconditioner` (any kernel: callables,
  GP kernel objects, Dask rows), kept across refits on the same data with
  the last solutions as warm starts (:mod:`._warm`, keyed on a hash of X's
  bytes, which a device array would have to copy to the host); on a device,
  :class:`_DevicePreconditioner`, the same ``P = D + F F^T`` for the named
  kernels, whose dense blocks of ``K_nm`` it evaluates where the data are
  (:mod:`.._shared._xp_kernels`): linalg's works on NumPy arrays only.
- the landmark rules read rows of device data through :class:`_HostRows`
  (randomly pivoted Cholesky looks at a pool of at most ``max(20 m, 10^4)``
  rows, on the host).
"""

from __future__ import annotations

import time

import numpy as np
import scipy.linalg

from ...dask import Rows, is_dask_array, to_numpy
from ...lazy import Vi
from ...linalg import (
    NystroemPreconditioner,
    conjugate_gradient,
    robust_cholesky,
    select_landmarks,
)
from .._shared._cg_escalation import solve_or_escalate
from .._shared._xp_kernels import DEVICE_KERNELS, kernel_block
from . import _warm

__all__ = ["DEVICE_KERNELS", "rows", "solve_cg"]

#: Entries of a dense block of K_nm evaluated at once (32 MB in float64).
_BLOCK_ENTRIES = 1 << 22


class _HostRows:
    """Rows of a device array, gathered to the host when indexed: what
    :func:`~kerneltools.linalg.select_landmarks` reads."""

    def __init__(self, X, sp):
        self.X, self.sp, self.shape = X, sp, tuple(X.shape)

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, idx):
        return self.sp.host(self.sp.take(self.X, np.asarray(idx).reshape(-1)))


def rows(X, sp):
    """What the landmark rules index: NumPy X itself, Dask rows through
    :class:`~kerneltools.dask.Rows`, device rows through :class:`_HostRows`."""
    if is_dask_array(X):
        return Rows(X)
    return _HostRows(X, sp) if sp.on_device else X


class _Products:
    """``V -> K V + shift V`` (white noise included), one reduction per call
    on arrays of the space ``sp``; ``dtype`` tells CG the products' rounding."""

    def __init__(self, kernel, X, shift, sp, backend):
        self.K = kernel.lazy(sp.engine(X), sp.engine(X))
        self.dtype, self.sp, self.backend = self.K.dtype, sp, backend
        self._dtype = sp.dtype(self.dtype)  # the namespace's
        self.shift = shift + kernel.white_level()

    def __call__(self, V):
        sp = self.sp
        out = self.K.matmul(sp.engine(sp.xp.astype(V, self._dtype, copy=False)),
                            backend=self.backend)
        out = to_numpy(out) if is_dask_array(out) else sp.from_engine(out)
        return out + self.shift * V


class _DevicePreconditioner:
    """The Nystroem preconditioner of ``K + diag(d)`` on device arrays (see
    the module): ``P = D + F F^T`` with ``F = K_nm W``, ``W W^T = K_mm^+``
    (eigenvalues below ``10^-8`` of the largest dropped), inverted by
    Woodbury. Its ``r x r`` Gram matrix ``F^T D^-1 F`` is accumulated from
    dense blocks of ``K_nm`` on the device; the ``m x m`` matrix
    ``W (I + F^T D^-1 F)^-1 W^T`` is formed on the host once and kept on
    the device, so that an application crosses nothing."""

    def __init__(self, est, kernel, X, Z, d, sp, backend):
        xp = sp.xp
        self.sp, self.backend = sp, backend
        X64, Z64 = xp.astype(X, xp.float64), xp.astype(Z, xp.float64)
        name = est.kernel
        params = {"gamma": est.gamma, "degree": est.degree, "coef0": est.coef0}
        S, V = np.linalg.eigh(sp.host(kernel_block(name, params, Z64, Z64, xp)))
        keep = S > 1e-8 * max(S[-1], np.finfo(np.float64).tiny)
        W = V[:, keep] / np.sqrt(S[keep])
        Wd = sp.put(W)
        self.d_inv = 1.0 / d  # a float, or an n-vector of the device
        n, m = X.shape[0], Z.shape[0]
        step = max(256, _BLOCK_ENTRIES // max(m, 1))
        gram = xp.zeros((W.shape[1], W.shape[1]), dtype=xp.float64, device=sp.device)
        for i0 in range(0, n, step):
            i1 = min(n, i0 + step)
            F = kernel_block(name, params, X64[i0:i1, :], Z64, xp) @ Wd
            if not isinstance(self.d_inv, float):
                F = F * xp.sqrt(self.d_inv[i0:i1])[:, None]
            gram = gram + xp.matrix_transpose(F) @ F
        gram = sp.host(gram) * (self.d_inv if isinstance(self.d_inv, float) else 1.0)
        chol = robust_cholesky(np.eye(len(gram)) + (gram + gram.T) / 2,
                               what="the Nystroem matrix")
        # W (I + F^T D^-1 F)^-1 W^T: m x m, SPD, on the device from here on
        self.core = sp.put(W @ scipy.linalg.cho_solve((chol, True), W.T))
        self.Knm = kernel.lazy(sp.engine(X64), sp.engine(Z64))

    def __call__(self, R):
        # Woodbury: P^-1 = D^-1 - D^-1 F (I + F^T D^-1 F)^-1 F^T D^-1
        sp = self.sp
        d_inv = self.d_inv if isinstance(self.d_inv, float) else self.d_inv[:, None]
        DR = d_inv * R
        U = sp.from_engine((self.Knm * Vi(sp.engine(DR))).sum(axis=0,
                                                               backend=self.backend))
        Fc = sp.from_engine(self.Knm.matmul(sp.engine(self.core @ U),
                                            backend=self.backend))
        return DR - d_inv * Fc


def solve_cg(est, kernel, X, Y, groups, w, sp, backend):
    """``(dual coefficients, iterations)`` of KernelRidge's "cg" solver on
    arrays of the space ``sp`` (or Dask rows on the host): X (n, d), Y (n, E),
    ``groups`` the ``(columns, alpha)`` pairs, ``w`` host weights or None;
    the coefficients an (n, E) float64 array of ``sp``."""
    xp = sp.xp
    n = X.shape[0]
    keep = np.ones(n, bool) if w is None else w > 0
    kept = np.flatnonzero(keep)
    Xk = X if keep.all() else sp.take(X, kept)
    Yk = Y if keep.all() else sp.take(Y, kept)
    fast, exact = est._cg_precisions(Xk, sp)
    m = min(est.n_components, Xk.shape[0])
    # refits on the same host data (a grid search over alpha) reuse the
    # landmarks, the preconditioner's Gram matrix and the last solutions
    key = None if w is not None or sp.on_device or is_dask_array(Xk) \
        else _warm.data_key(est, Xk, backend)
    entry = _warm.lookup(key)
    if entry is None:
        entry = {"landmarks": select_landmarks(kernel, rows(Xk, sp), m,
                                               method=est.landmarks,
                                               random_state=est.random_state)}
    elif est.verbose:
        print("[KernelRidge] same data and kernel as an earlier fit: its landmarks, "
              "preconditioner and solutions are reused", flush=True)
    y_key = None if key is None else _warm.fingerprint(Y)
    parts, order, n_iters = [], [], []
    for cols, a in groups:
        shift = a if w is None else sp.put(a / w[keep])  # one per kept point
        col = shift if w is None else shift[:, None]
        A = _Products(kernel, fast, col, sp, backend)
        refine = None if exact is None else _Products(kernel, exact, col, sp, backend)
        start = time.perf_counter()
        M = _preconditioner(est, entry, kernel, Xk, shift, key is not None, sp, backend)
        if est.verbose:
            where = " on the device" if sp.on_device else ""
            print(f"[KernelRidge] Nystroem preconditioner{where}, {m} landmarks: "
                  f"{time.perf_counter() - start:.2f} s; products in {A.dtype}"
                  + ("" if exact is None else ", refined in float64"), flush=True)
        b = Yk if len(groups) == 1 else sp.take(Yk, cols, axis=1)
        b = xp.astype(b, xp.float64, copy=False)
        x0, r0 = _warm.warm_start(entry, (y_key, tuple(cols)), a, b)
        wk = None if w is None else w[keep]
        sol, n_iter, info = _cg_or_dense(est, kernel, Xk, (A, M, refine), b, a, wk,
                                         (x0, r0), sp)
        if key is not None:
            R = info.get("residual")
            R = b - (A if refine is None else refine)(sol) if R is None else R
            _warm.remember_solution(entry, (y_key, tuple(cols)), a, sol, R)
        parts.append(sol)
        order.extend(int(c) for c in cols)
        n_iters.append(n_iter)
    _warm.store(key, entry)
    C = parts[0] if len(parts) == 1 else xp.concat(parts, axis=1)
    if order != sorted(order):  # per-target alphas: back to the targets' order
        C = sp.take(C, np.argsort(order), axis=1)
    if not keep.all():  # zero weights: c = 0 there (a host scatter, n x E)
        full = np.zeros((n, C.shape[1]))
        full[kept] = sp.host(C)
        C = sp.put(full)
    return C, max(n_iters)


def _preconditioner(est, entry, kernel, Xk, shift, reuse, sp, backend):
    """The Nystroem preconditioner on ``entry``'s landmarks (see the module):
    on the host a stored one with its shift changed (one m x m Cholesky)
    when ``reuse``, else built; on a device :class:`_DevicePreconditioner`."""
    if sp.on_device:
        Z = sp.take(Xk, entry["landmarks"])
        return _DevicePreconditioner(est, kernel, Xk, Z, shift, sp, backend)
    stored = entry.get("preconditioner")
    if reuse and stored is not None:
        return stored.with_shift(shift)
    M = NystroemPreconditioner(kernel, Xk, shift=shift, landmarks=entry["landmarks"],
                               backend=backend)
    if reuse and np.ndim(shift) == 0:
        entry["preconditioner"] = M
    return M


def _cg_or_dense(est, kernel, Xk, ops, b, a, wk, start, sp):
    """``(solution, iterations, info)`` of ``(K + a W^-1) c = b`` by CG with
    ``ops = (A, M, refine)`` from ``start = (x0, r0)``, or, where CG stops
    at ``max_iter`` short of ``tol``, by the host's dense float64 Cholesky
    (``len(Xk) <= DENSE_SOLVE_MAX``; else ConvergenceError). ``info``: CG's,
    without its ``"residual"`` after a dense solve."""
    A, M, refine = ops
    x0, r0 = start
    args = est._iterative_args()
    xp = sp.xp if sp.on_device else None  # NumPy: linalg's host recurrences

    def cg(info):
        return conjugate_gradient(A, b, M=M, x0=x0, r0=r0, info=info,
                                  refine_with=refine, xp=xp, **args)

    def dense():  # iterations: CG's, all spent
        Xh = to_numpy(Xk) if is_dask_array(Xk) else sp.host(Xk)
        return sp.put(est._dense_solve(kernel, Xh, sp.host(b), a, wk)), args["max_iter"]

    (sol, n_iter), info = solve_or_escalate(cg, dense, size=Xk.shape[0],
                                            verbose=est.verbose,
                                            **est._escalation_args("cg"))
    if info["escalated"]:
        info.pop("residual", None)
    return sol, n_iter, info
