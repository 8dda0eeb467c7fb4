"""The iterative (BBMM) solver of GaussianProcessRegressor: nothing n x n.

Gardner, Pleiss, Bindel, Weinberger and Wilson, "GPyTorch: Blackbox
Matrix-Matrix Gaussian Process Inference with GPU Acceleration", NeurIPS 2018;
Wang et al., "Exact Gaussian Processes on a Million Data Points", NeurIPS 2019.
With ``A = K + alpha I`` (plus any white noise):

- ``A^{-1} y`` and ``A^{-1} z`` for probes ``z ~ N(0, P)`` come from one batched
  conjugate-gradient run preconditioned by the Nystroem approximation ``P``
  on randomly pivoted Cholesky landmarks;
- ``log det A`` by stochastic Lanczos quadrature from that run's coefficients
  (:func:`kerneltools.linalg.solve_with_logdet`);
- ``d lml / d theta = 1/2 a^T dK a - 1/2 tr(A^{-1} dK)``, the trace by
  Hutchinson, ``E[(A^{-1} z)^T dK (P^{-1} z)] = tr(A^{-1} dK)``: one
  reduction of the symbolic derivative formulas for every probe and every
  hyperparameter at once.

The probes and landmarks have fixed seeds, so the objective the optimizer
sees is a deterministic function of theta.
"""

from __future__ import annotations

import numpy as np

from .. import Vi, Vj
from ..linalg import (
    KernelOperator,
    NystroemPreconditioner,
    conjugate_gradient,
    select_landmarks,
    solve_with_logdet,
)

_SEED = 0
#: Test points per batch of the variance solves: an n x 128 block at a time.
_BATCH = 128


def landmarks_for(est, kernel):
    """The preconditioner's landmarks, by randomly pivoted Cholesky on ``kernel``.

    Chosen once per fit (at the initial hyperparameters) and kept while the
    optimizer moves theta: the objective stays a smooth, deterministic
    function of theta, and each evaluation skips the pivoting."""
    n = len(est.X_train_)
    return select_landmarks(kernel, est.X_train_, min(est.n_components, n),
                            method="rpcholesky", random_state=_SEED)


class IterativeGP:
    def __init__(self, est, kernel):
        self.est = est
        self.kernel = kernel
        X = est.X_train_
        self.A = KernelOperator(kernel, X, shift=est._alpha, backend=est.backend)
        landmarks = getattr(est, "_landmarks", None)
        if landmarks is None:
            landmarks = landmarks_for(est, kernel)
        self.M = NystroemPreconditioner(kernel, X, shift=est._alpha, landmarks=landmarks,
                                        backend=est.backend)

    def _cg(self, B):
        return self.solve(B)[0]

    def solve(self, B):
        """``(A^{-1} B, iterations)`` to ``min(tol, 1e-6)``."""
        est = self.est
        return conjugate_gradient(self.A, B, M=self.M, tol=min(est.tol, 1e-6),
                                  max_iter=est.max_iter)

    def lml(self, eval_gradient):
        est = self.est
        y = est.y_train_[:, None] if est.y_train_.ndim == 1 else est.y_train_
        n, t = y.shape
        alpha, U, Z, logdet, _ = solve_with_logdet(
            self.A, y, self.M, n_probes=est.n_probes, random_state=_SEED, tol=est.tol,
            max_iter=est.max_iter)
        lml = float(-0.5 * np.einsum("ik,ik->", y, alpha) - 0.5 * t * logdet
                    - 0.5 * t * n * np.log(2 * np.pi))
        if not eval_gradient:
            return lml
        return lml, self._gradient(alpha, U, self.M @ Z, t)

    def _gradient(self, alpha, U, V, t):
        """1/2 sum_t a_t^T dK a_t - t/2 mean_p (A^-1 z_p)^T dK (P^-1 z_p), for all theta."""
        p = U.shape[1]
        left = np.hstack([0.5 * alpha, -t / (2 * p) * U])
        right = np.hstack([alpha, V])
        X = self.est.X_train_
        x_i, y_j = Vi(X), Vj(X)
        formulas = self.kernel.log_gradient(x_i, y_j)
        sizes = [int(np.size(self.kernel.params[h])) for h in self.kernel.hyperparameter_names]
        grad = np.zeros(sum(sizes))
        present = [f for f in formulas if f is not None]
        if present:
            G = present[0]
            for f in present[1:]:
                G = G.concat(f)
            weight = Vi(left) | Vj(right)
            total = (G * weight).sum(axis=1, backend=self.est.backend).sum(0)
            pos, k = 0, 0
            for f, size in zip(formulas, sizes):
                if f is not None:
                    grad[pos : pos + size] = total[k : k + size]
                    k += size
                pos += size
        # white noise: dA / d log h = level * I
        trace_term = 0.5 * np.einsum("ik,ik->", alpha, alpha) \
            - t / (2 * p) * np.einsum("ik,ik->", U, V)
        return grad + self.kernel.white_log_gradient() * trace_term

    def predict(self, X, kernel, return_std, return_cov):
        train = self.est.X_train_
        alpha = self.est.alpha_
        coef = alpha.reshape(len(alpha), -1)
        mean = (kernel.lazy(X, train) @ coef).reshape((len(X),) + alpha.shape[1:])
        if not (return_std or return_cov):
            return mean, None, None
        if return_cov:
            cov = kernel(X)
            lazy = kernel.lazy(X, train)
            for b0 in range(0, len(X), _BATCH):
                W = self._cg(kernel(train, X[b0 : b0 + _BATCH]))
                cov[:, b0 : b0 + _BATCH] -= lazy @ W
            return mean, None, cov
        var = kernel.diag(X)
        for b0 in range(0, len(X), _BATCH):
            B = kernel(train, X[b0 : b0 + _BATCH])
            var[b0 : b0 + _BATCH] -= np.einsum("ij,ij->j", B, self._cg(B))
        return mean, var, None
