"""KernelRidge's CG solver on a device: the data and CG's vectors stay there.

The device half of :meth:`KernelRidge._solve_cg
<kerneltools.estimators.KernelRidge>` (see :mod:`._array_api` for when it
runs). The same system, ``(K + alpha W^-1) c = y`` on the points of positive
weight, solved by :func:`kerneltools.linalg.conjugate_gradient` with its
vectors in the device's namespace (``xp=``), each product ``K v`` one
reduction on device arrays, float32 products refined by float64 ones as on
the host. The Nystroem preconditioner is the host's
(:class:`kerneltools.linalg.NystroemPreconditioner`), written for arrays of
the device: ``P = D + F F^T`` with ``F = K_nm W``, ``W W^T = K_mm^+`` (its
eigenvalues below ``10^-8`` of the largest dropped), inverted by Woodbury;
its ``r x r`` Gram matrix ``F^T D^-1 F`` is accumulated from dense blocks of
``K_nm`` computed on the device (:mod:`._xp_kernels`), only ``r x r``
matrices and ``m``-vectors cross to the host. Not kept across fits: the warm
starts of :mod:`._krr_warm` (they key on a hash of X's bytes, which a device
array would have to copy to the host).
"""

from __future__ import annotations

import time

import numpy as np
import scipy.linalg

from ...lazy import Vi
from ...linalg import conjugate_gradient, robust_cholesky, select_landmarks
from .._shared._cg_escalation import solve_or_escalate
from .._shared._xp_kernels import DEVICE_KERNELS, kernel_block

__all__ = ["DEVICE_KERNELS", "kernel_params", "rows", "solve_cg"]

#: Entries of a dense block of K_nm evaluated at once (32 MB in float64).
_BLOCK_ENTRIES = 1 << 22


class _HostRows:
    """Rows of a device array, gathered to the host when indexed: what
    :func:`~kerneltools.linalg.select_landmarks` reads (its "rpcholesky"
    looks at a pool of at most ``max(20 m, 10^4)`` rows)."""

    def __init__(self, X, sp):
        self.X, self.sp, self.shape = X, sp, tuple(X.shape)

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, idx):
        return self.sp.host(self.sp.take(self.X, np.asarray(idx).reshape(-1)))


def rows(X, sp):
    """What the landmark rules index: X itself on the host, else :class:`_HostRows`."""
    return _HostRows(X, sp) if sp.on_device else X


def kernel_params(est) -> dict:
    """The named kernel's parameters of a KernelRidge, as scikit-learn reads them."""
    return {"gamma": est.gamma, "degree": est.degree, "coef0": est.coef0}


class _Products:
    """``V -> K V + shift V`` on device arrays, one reduction per call; its
    ``dtype`` tells the CG the products' rounding."""

    def __init__(self, kernel, X, shift, sp, backend):
        self.K = kernel.lazy(sp.engine(X), sp.engine(X))
        self.dtype, self.shift, self.sp, self.backend = self.K.dtype, shift, sp, backend

    def __call__(self, V):
        sp = self.sp
        out = sp.from_engine(self.K.matmul(sp.engine(sp.astype(V, self.dtype)),
                                           backend=self.backend))
        return out + self.shift * V


class _Preconditioner:
    """The Nystroem preconditioner of ``K + diag(d)`` on device arrays (see
    the module's docstring); called on a block of residuals."""

    def __init__(self, est, X, Z, d, sp, backend):
        xp = sp.xp
        self.sp, self.backend = sp, backend
        X64, Z64 = sp.astype(X, np.float64), sp.astype(Z, np.float64)
        name, params = est.kernel, kernel_params(est)
        S, V = np.linalg.eigh(sp.host(kernel_block(name, params, Z64, Z64, xp)))
        keep = S > 1e-8 * max(S[-1], np.finfo(np.float64).tiny)
        W = sp.put(V[:, keep] / np.sqrt(S[keep]))
        self.d_inv = 1.0 / d  # a float, or an n-vector of the device
        n, m = X.shape[0], Z.shape[0]
        step = max(256, _BLOCK_ENTRIES // max(m, 1))
        gram = xp.zeros((W.shape[1], W.shape[1]), dtype=xp.float64, device=sp.device)
        for i0 in range(0, n, step):
            i1 = min(n, i0 + step)
            F = kernel_block(name, params, X64[i0:i1, :], Z64, xp) @ W
            if not isinstance(self.d_inv, float):
                F = F * xp.sqrt(self.d_inv[i0:i1])[:, None]
            gram = gram + xp.matrix_transpose(F) @ F
        gram = sp.host(gram) * (self.d_inv if isinstance(self.d_inv, float) else 1.0)
        self.W = sp.host(W)
        self.chol = (robust_cholesky(np.eye(len(gram)) + (gram + gram.T) / 2,
                                     what="the Nystroem matrix"), True)
        self.Knm = est._kernel().lazy(sp.engine(X64), sp.engine(Z64))

    def __call__(self, R):
        # Woodbury: P^-1 = D^-1 - D^-1 F (I + F^T D^-1 F)^-1 F^T D^-1
        sp = self.sp
        d_inv = self.d_inv if isinstance(self.d_inv, float) else self.d_inv[:, None]
        DR = d_inv * R
        U = sp.host(sp.from_engine((self.Knm * Vi(sp.engine(DR))).sum(
            axis=0, backend=self.backend)))
        c = self.W @ scipy.linalg.cho_solve(self.chol, self.W.T @ U)
        Fc = sp.from_engine(self.Knm.matmul(sp.engine(sp.put(c)), backend=self.backend))
        return DR - d_inv * Fc


def solve_cg(est, kernel, X, Y, groups, w, sp, backend, precisions):
    """``(dual coefficients, iterations)`` of KernelRidge's "cg" solver on
    arrays of the device space ``sp``: X (n, d), Y (n, E), ``groups`` the
    ``(columns, alpha)`` pairs, ``w`` host weights or None, ``precisions``
    the estimator's ``_cg_precisions`` (a function of the kept rows); the
    coefficients an (n, E) float64 array of ``sp``."""
    xp = sp.xp
    n = X.shape[0]
    keep = np.ones(n, bool) if w is None else w > 0
    kept = np.flatnonzero(keep)
    Xk = X if keep.all() else sp.take(X, kept)
    Yk = Y if keep.all() else sp.take(Y, kept)
    fast, exact = precisions(Xk)
    m = min(est.n_components, Xk.shape[0])
    idx = select_landmarks(kernel, rows(Xk, sp), m, method=est.landmarks,
                           random_state=est.random_state)
    Z = sp.take(Xk, idx)
    parts, order, n_iters = [], [], []
    for cols, a in groups:
        shift = float(a) if w is None else sp.put(a / w[keep])
        A = _Products(kernel, fast, shift if w is None else shift[:, None], sp, backend)
        refine = None if exact is None else _Products(
            kernel, exact, shift if w is None else shift[:, None], sp, backend)
        start = time.perf_counter()
        M = _Preconditioner(est, Xk, Z, shift, sp, backend)
        if est.verbose:
            print(f"[KernelRidge] Nystroem preconditioner on the device, {m} landmarks: "
                  f"{time.perf_counter() - start:.2f} s; products in {A.dtype}"
                  + ("" if exact is None else ", refined in float64"), flush=True)
        b = sp.astype(sp.take(Yk, cols, axis=1), np.float64)
        sol, n_iter = _cg_or_dense(est, kernel, Xk, (A, M, refine), b, a,
                                   None if w is None else w[keep], sp)
        parts.append(sol)
        order.extend(int(c) for c in cols)
        n_iters.append(n_iter)
    C = parts[0] if len(parts) == 1 else xp.concat(parts, axis=1)
    if order != sorted(order):  # per-target alphas: back to the targets' order
        C = sp.take(C, np.argsort(order), axis=1)
    if not keep.all():  # zero weights: c = 0 there (a host scatter, n x E)
        full = np.zeros((n, C.shape[1]))
        full[kept] = sp.host(C)
        C = sp.put(full)
    return C, max(n_iters)


def _cg_or_dense(est, kernel, Xk, ops, b, a, wk, sp):
    """``(solution, iterations)`` of ``(K + a W^-1) c = b`` on the device by
    CG with ``ops = (A, M, refine)``, or, where CG stops at ``max_iter``
    short of ``tol``, by the host's dense float64 solve (n <=
    ``DENSE_SOLVE_MAX``; else ConvergenceError): :mod:`._cg_escalation`."""
    A, M, refine = ops
    args = est._iterative_args()

    def cg(info):
        return conjugate_gradient(A, b, M=M, refine_with=refine, xp=sp.xp, info=info,
                                  **args)

    def dense():  # iterations: CG's, all spent
        C = est._dense_solve(kernel, sp.host(Xk), sp.host(b), a, wk)
        return sp.put(C), args["max_iter"]

    return solve_or_escalate(cg, dense, size=Xk.shape[0], verbose=est.verbose,
                             **est._escalation_args("cg"))[0]
