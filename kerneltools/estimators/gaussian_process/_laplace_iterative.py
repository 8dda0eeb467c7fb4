"""Binary Laplace GP classification by conjugate gradients: nothing n x n
(private; :class:`._laplace.BinaryLaplaceGPC` with ``solver="iterative"``).

The exact path's algorithms (Rasmussen and Williams, 2006, Algorithms 3.1,
3.2, 5.1) with every solve by ``B = I + W^1/2 K W^1/2`` done by
preconditioned CG, ``K`` applied as reductions (:func:`._iterative.kernel_operator`):

- Newton steps: ``z = B^-1 W^1/2 K b`` by CG; the steps stop when the
  objective ``-a^T f / 2 + log p(y | f)`` gains less than ``NEWTON_TOL``
  relative (CG's residual bounds the digits that test can see);
- ``log det B`` by stochastic Lanczos quadrature on the last step's CG run
  (:func:`kerneltools.linalg.solve_with_logdet`, probes ``z ~ N(0, P)``);
- the preconditioner ``P = I + W^1/2 (D + F F^T) W^1/2``: ``F`` the
  Nystroem features of ``K`` on randomly pivoted Cholesky landmarks (chosen
  once per fit), ``D`` the diagonal it misses; applied by Woodbury;
- the gradient ``1/2 a^T dK a - 1/2 tr(R dK) + u^T dK (y - pi)``,
  ``R = W^1/2 B^-1 W^1/2``: the trace by Hutchinson on the same probes,
  ``E[(W^1/2 B^-1 z)^T dK (W^1/2 P^-1 z)]``; ``u = s_2 - R K s_2`` with
  ``s_2`` from ``diag((K^-1 + W)^-1) = diag K - diag(K R K)``, the latter
  estimated on the probes as ``mean (K W^1/2 B^-1 z) * (K W^1/2 P^-1 z)``;
- predictions: the latent mean ``k_*^T (y - pi)`` (one reduction), the
  variance ``k_** - k_*^T R k_*`` with ``R k_*`` by CG on the query
  columns (in blocks), the probability the same erf mixture as the exact
  path.

Memory: the n x m features (m = ``n_components``) and O(n) vectors.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
from scipy.sparse.linalg import LinearOperator
from scipy.special import expit

from ...kernels import make_kernel
from ...lazy import Vi, Vj
from ...linalg import (
    KernelOperator,
    conjugate_gradient,
    robust_cholesky,
    select_landmarks,
    solve_with_logdet,
)
from ._iterative import kernel_operator, woodbury_sample, woodbury_solve

__all__ = ["NEWTON_TOL", "IterativeLaplace"]

#: Relative gain of the Newton objective below which the steps stop.
NEWTON_TOL = 1e-9
#: Rows of a block of ``K(X, landmarks)``.
_BLOCK = 8192
#: Query columns per CG run of the predictive variances.
_QUERY_BLOCK = 64
_SEED = 0


def landmarks(sk_kernel, X, n_components):
    """Landmark rows of ``X`` by randomly pivoted Cholesky on the kernel."""
    return select_landmarks(make_kernel(sk_kernel), X, min(n_components, len(X)),
                            method="rpcholesky", random_state=_SEED)


class _Nystroem:
    """``K ~ D + F F^T``: ``F = K(X, Z) L^-T`` (``L L^T = K(Z, Z)``), ``D``
    the diagonal the low-rank part misses (white noise included)."""

    def __init__(self, sk_kernel, X, idx):
        Z = X[idx]
        L = robust_cholesky(np.asarray(sk_kernel(Z), np.float64), what="K(Z, Z)")
        self.F = np.empty((len(X), len(idx)))
        for r0 in range(0, len(X), _BLOCK):
            Knm = np.asarray(sk_kernel(X[r0 : r0 + _BLOCK], Z), np.float64)
            self.F[r0 : r0 + _BLOCK] = scipy.linalg.solve_triangular(
                L, Knm.T, lower=True, check_finite=False).T
        self.D = np.maximum(sk_kernel.diag(X) - np.einsum("ij,ij->i", self.F, self.F),
                            0.0)


class _BPreconditioner(LinearOperator):
    """``P = I + W^1/2 (D + F F^T) W^1/2`` for ``B``: ``P^-1`` by Woodbury,
    draws from ``N(0, P)``, ``log det P``."""

    def __init__(self, nys, W_sr):
        self.G = W_sr[:, None] * nys.F
        d = 1.0 + W_sr**2 * nys.D
        self.d_inv = 1.0 / d
        inner = np.eye(self.G.shape[1]) + self.G.T @ (self.d_inv[:, None] * self.G)
        self.chol = (scipy.linalg.cholesky(inner, lower=True), True)
        self._logdet = float(np.log(d).sum()
                             + 2 * np.log(np.diagonal(self.chol[0])).sum())
        super().__init__(dtype=np.float64, shape=(len(d), len(d)))

    def _matmat(self, R):
        R2 = np.asarray(R, np.float64).reshape(self.shape[0], -1)
        return woodbury_solve(self.G, self.d_inv, self.chol, R2).reshape(np.shape(R))

    def _matvec(self, r):
        return self._matmat(np.asarray(r).reshape(-1, 1)).ravel()

    def logdet(self):
        return self._logdet

    def sample(self, n_samples, random_state=None):
        rng = np.random.default_rng(random_state)
        e1 = rng.standard_normal((self.shape[0], n_samples))
        e2 = rng.standard_normal((self.G.shape[1], n_samples))
        return woodbury_sample(self.G, self.d_inv, e1, e2, np)


class _B(LinearOperator):
    """``B = I + W^1/2 K W^1/2``, ``K`` a kernel operator."""

    def __init__(self, K, W_sr):
        self.K, self.W_sr = K, W_sr
        super().__init__(dtype=np.float64, shape=K.shape)

    def _matmat(self, V):
        w = self.W_sr[:, None] if V.ndim == 2 else self.W_sr
        return V + w * self.K.matmat(w * V) if V.ndim == 2 else \
            V + w * self.K.matvec(w * V)

    def _matvec(self, v):
        return self._matmat(np.asarray(v).reshape(-1, 1)).ravel()


class IterativeLaplace:
    """The Laplace approximation at one kernel ``sk_kernel`` (scikit-learn's
    object, its current theta) on ``X`` (float64) and labels ``y`` in {0, 1},
    preconditioned on the landmark rows ``idx``."""

    def __init__(self, sk_kernel, X, y, idx, *, n_probes=64, tol=1e-5, max_iter=1000,
                 backend=None):
        self.sk_kernel, self.X, self.y = sk_kernel, X, y
        self.backend = backend
        self._operators()
        self.nys = _Nystroem(sk_kernel, X, idx)
        self.n_probes, self.tol, self.max_iter = n_probes, tol, max_iter
        self.n_iter = 0

    def _operators(self):
        """The kernel and ``K`` as reductions (rebuilt after unpickling: the
        formulas hold local functions)."""
        self.kernel = make_kernel(self.sk_kernel)
        self.K = kernel_operator(self.kernel, self.sk_kernel, self.X, 0.0,
                                 backend=self.backend)
        if hasattr(self, "W_sr"):
            self.B = _B(self.K, self.W_sr)

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k not in ("kernel", "K", "B")}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._operators()

    def _solve(self, A, R, M):
        X, n_iter = conjugate_gradient(A, R, M=M, tol=self.tol, max_iter=self.max_iter)
        self.n_iter += n_iter
        return X

    def mode(self, f, max_steps):
        """Newton's iteration from ``f``; sets ``f``, ``a``, ``pi``, ``W_sr``
        (the last step's, as the exact path) and ``psi``, the objective."""
        y, sign, psi = self.y, 2.0 * self.y - 1, -np.inf
        for self.steps in range(1, max_steps + 1):
            pi = expit(f)
            W_sr = np.sqrt(pi * (1 - pi))
            b = W_sr**2 * f + (y - pi)
            B, P = _B(self.K, W_sr), _BPreconditioner(self.nys, W_sr)
            z = self._solve(B, W_sr * self.K.matvec(b), P)
            a = b - W_sr * z
            f = self.K.matvec(a)
            new = -0.5 * a @ f - np.logaddexp(0.0, -sign * f).sum()
            done = new - psi < NEWTON_TOL * abs(new)
            psi = new
            if done:
                break
        self.f, self.a, self.pi, self.W_sr, self.psi = f, a, pi, W_sr, psi
        self.B, self.P = B, P
        return f

    def lml(self, eval_gradient=False):
        """The log marginal likelihood at the mode (and its gradient): the
        objective less ``log det B / 2`` (stochastic Lanczos quadrature)."""
        W_sr = self.W_sr
        _, U, Z, logdet, n_iter = solve_with_logdet(
            self.B, W_sr, self.P, n_probes=self.n_probes, random_state=_SEED,
            tol=self.tol, max_iter=self.max_iter)
        self.n_iter += n_iter
        lml = float(self.psi - 0.5 * logdet)
        if not eval_gradient:
            return lml
        return lml, self._gradient(U, self.P @ Z)

    def _gradient(self, U, V):
        """Algorithm 5.1 with stochastic traces (module docstring)."""
        W_sr, pi, a, p = self.W_sr, self.pi, self.a, U.shape[1]
        WU, WV = W_sr[:, None] * U, W_sr[:, None] * V
        KW = np.asarray(self.K.matmat(np.hstack([WU, WV])), np.float64)
        diag_KRK = np.mean(KW[:, :p] * KW[:, p:], axis=1)
        kdiag = self.sk_kernel.diag(self.X)
        s_2 = -0.5 * (kdiag - diag_KRK) * (pi * (1 - pi) * (1 - 2 * pi))
        Ks2 = self.K.matvec(s_2)
        u = s_2 - W_sr * self._solve(self.B, (W_sr * Ks2)[:, None], self.P)[:, 0]
        v = self.y - pi
        left = np.hstack([0.5 * a[:, None], (-0.5 / p) * WU, u[:, None]])
        right = np.hstack([a[:, None], WV, v[:, None]])
        return self._contract(left, right)

    def _contract(self, left, right):
        """``sum_ij left_i . right_j dk_ij / d log theta``: one reduction of the
        kernel's symbolic derivatives, plus the white noise's diagonal."""
        X = self.X
        formulas = self.kernel.log_gradient(Vi(X), Vj(X))
        sizes = [int(np.size(self.kernel.params[h]))
                 for h in self.kernel.hyperparameter_names]
        grad = np.zeros(sum(sizes))
        present = [f for f in formulas if f is not None]
        if present:
            G = present[0]
            for f in present[1:]:
                G = G.concat(f)
            total = (G * (Vi(left) | Vj(right))).sum(axis=1, backend=self.backend).sum(0)
            pos, k = 0, 0
            for f, size in zip(formulas, sizes):
                if f is not None:
                    grad[pos : pos + size] = total[k : k + size]
                    k += size
                pos += size
        return grad + self.kernel.white_log_gradient() * float(np.sum(left * right))

    def latent_mean_and_variance(self, Xq, variance=True):
        """Algorithm 3.2's latent mean and variance (None without
        ``variance``) at the rows of ``Xq``."""
        Kq = KernelOperator(self.kernel, Xq, self.X, backend=self.backend)
        mean = np.asarray(Kq.matvec(self.y - self.pi), np.float64)
        if not variance:
            return mean, None
        var = np.asarray(self.sk_kernel.diag(Xq), np.float64).copy()
        for q0 in range(0, len(Xq), _QUERY_BLOCK):
            C = self.W_sr[:, None] * np.asarray(
                self.sk_kernel(self.X, Xq[q0 : q0 + _QUERY_BLOCK]), np.float64)
            var[q0 : q0 + _QUERY_BLOCK] -= np.einsum(
                "ij,ij->j", C, self._solve(self.B, C, self.P))
        return mean, var
