"""Binary Gaussian-process classification by the Laplace approximation, exact
(private; the public estimator is :class:`GaussianProcessClassifier`).

Rasmussen and Williams, "Gaussian Processes for Machine Learning" (2006):

- Algorithm 3.1 (posterior mode, Newton): ``W = pi (1 - pi)``,
  ``B = I + W^1/2 K W^1/2 = L L^T``, ``b = W f + y - pi``,
  ``a = b - W^1/2 B^-1 W^1/2 K b``, ``f = K a``; stop when the approximate
  log marginal likelihood ``-a^T f / 2 + log p(y | f) - sum log L_ii`` gains
  less than 1e-10 (scikit-learn's test and its temporaries, those of the last
  step, kept to the digit);
- Algorithm 3.2 (predictions): latent mean ``k_*^T (y - pi)``, variance
  ``k(x_*, x_*) - |L^-1 W^1/2 k_*|^2``, class probability the sigmoid
  averaged over it (an erf mixture, as scikit-learn);
- Algorithm 5.1 (gradient of the log marginal likelihood): with
  ``R = W^1/2 B^-1 W^1/2``, ``s_2 = -1/2 diag((K^-1 + W)^-1) pi (1 - pi)(1 - 2 pi)``,
  ``v = y - pi`` and ``u = (I - R K) s_2``, every hyperparameter's
  ``s_1 + s_2^T s_3`` is ``1/2 sum_ij M_ij dK_ij / d theta_p`` for the one
  symmetric matrix ``M = a a^T - R + u v^T + v u^T``. That contraction is the
  regression's (:mod:`._exact`: a few BLAS calls for ``c * RBF`` and
  ``c * Matern``, blocks of symbolic derivatives otherwise), so no
  ``(n, n, n_theta)`` tensor is formed. LAPACK factors in place: ``dpotrf``
  for ``B``, ``dpotri`` for ``B^-1``, ``dtrtrs`` for ``L^-1 W^1/2 K``.

BLAS runs on one thread (:func:`_one_blas_thread`): each Newton step
alternates an ``n^3 / 3`` factorisation with ``n^2`` products and NumPy work,
and a multi-threaded BLAS spins between them. At n = 1,000 (8 features, ARD
RBF, on the shared 2-core machine at load 10) one likelihood-and-gradient
evaluation took 0.15 CPU s (1.2 s wall) on one thread against 2.7 CPU s
(11.9 s wall) with BLAS's own threads; scikit-learn's took 0.58 and 3.2 CPU s.
"""

from __future__ import annotations

import sys
import warnings
from typing import NamedTuple

import numpy as np
import scipy.optimize
from scipy.linalg import lapack
from scipy.spatial.distance import cdist
from scipy.special import erf, expit
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from ...kernels import make_kernel, stationary_form
from ._exact import (
    _formula_gradient,
    _mirror_lower,
    _phi_and_weight,
    _stationary_gradient,
)
from ._iterative import _one_blas_thread
from ._laplace_iterative import IterativeLaplace, landmarks

__all__ = ["EXACT_MAX_SAMPLES", "BinaryLaplaceGPC", "Gram", "posterior_mode"]

#: Largest n that ``solver="auto"`` fits on the exact path (about 3 GB at
#: peak there); above, the iterative one. Higher than the regressor's 5,000:
#: the iterative gradient is a stochastic estimate, and at n = 1,000 (ARD RBF,
#: 8 features) L-BFGS-B stopped on it at lml -377.3 where the exact path
#: reaches -368.0, so the exact path is kept wherever it fits.
EXACT_MAX_SAMPLES = 10000

# The sigmoid as a mixture of five error functions (Williams and Barber,
# 1998), fitted by scikit-learn: the same numbers give the same probabilities.
LAMBDAS = np.array([0.41, 0.4, 0.37, 0.44, 0.39])[:, np.newaxis]
COEFS = np.array([-1854.8214151, 3516.89893646, 221.29346712, 128.12323805,
                  -2010.49422654])[:, np.newaxis]


class Gram:
    """``K = k(X, X)`` (white noise included) at ``sk_kernel``, and the
    contraction ``M -> 1/2 sum_ij M_ij dK_ij / d log theta``."""

    def __init__(self, sk_kernel, X):
        self.kernel = make_kernel(sk_kernel)
        self.X = X
        form = stationary_form(sk_kernel)
        self.form = None if form is not None and form.nu == 0.5 else form
        if self.form is not None:
            self.U = X / self.form.length_scale
            self.phi, self.w = _phi_and_weight(self.form.nu,
                                               cdist(self.U, self.U, "sqeuclidean"))
            self.K = self.phi * self.form.c
            self.K[np.diag_indices(len(X))] += self.kernel.white_level()
        else:
            self.K = np.require(sk_kernel(X), np.float64, ["C", "W"])

    def contract(self, M):
        """``1/2 sum_ij M_ij dK_ij / d log theta`` for symmetric ``M``
        (C order; overwritten)."""
        grad = 0.5 * np.trace(M) * self.kernel.white_log_gradient()
        if self.form is None:
            return grad + _formula_gradient(self.kernel, self.X, M)
        amplitude = 0.5 * self.form.c * np.vdot(M, self.phi)
        G = np.multiply(M, self.w, out=M)
        G *= self.form.c
        return grad + _stationary_gradient(self.kernel, self.form, amplitude, G,
                                           self.U)


class Mode(NamedTuple):
    """The outcome of :func:`posterior_mode`: the approximate log marginal
    likelihood, the mode ``f`` and the temporaries of the last Newton step."""

    lml: float
    f: np.ndarray
    pi: np.ndarray
    W_sr: np.ndarray
    L: np.ndarray
    a: np.ndarray
    steps: int = 0


def posterior_mode(K, y, f, max_iter) -> Mode:
    """Newton's iteration for the mode of ``p(f | X, y)`` (Algorithm 3.1),
    from ``f``, with scikit-learn's stopping rule and outputs."""
    lml = -np.inf
    n = len(y)
    B = np.empty_like(K)
    sign = y * 2 - 1
    steps = 0
    for steps in range(1, max_iter + 1):
        pi = expit(f)
        W = pi * (1 - pi)
        W_sr = np.sqrt(W)
        np.multiply(K, W_sr[:, np.newaxis], out=B)
        B *= W_sr
        B[np.diag_indices(n)] += 1.0
        L, info = lapack.dpotrf(B.T, lower=1, clean=0, overwrite_a=1)
        if info != 0:
            raise np.linalg.LinAlgError(
                f"{info}-th leading minor of B = I + W^1/2 K W^1/2 not positive "
                "definite")
        b = W * f + (y - pi)
        z, _ = lapack.dpotrs(L, W_sr * (K @ b), lower=1)
        a = b - W_sr * z
        f = K @ a
        new = (-0.5 * a @ f - np.log1p(np.exp(-sign * f)).sum()
               - np.log(np.diagonal(L)).sum())
        if new - lml < 1e-10:
            break
        lml = new
    return Mode(lml, f, pi, W_sr, L, a, steps)


def lml_gradient(gram, y, mode):
    """``d lml / d log theta`` at the mode (Algorithm 5.1, in one contraction)."""
    K, pi, W_sr, L, a = gram.K, mode.pi, mode.W_sr, mode.L, mode.a
    Binv, info = lapack.dpotri(L.copy(order="F"), lower=1, overwrite_c=1)
    R = _mirror_lower(Binv)  # B^-1, then R = W^1/2 B^-1 W^1/2 in place
    R *= W_sr[:, np.newaxis]
    R *= W_sr
    Cm, info = lapack.dtrtrs(L, W_sr[:, np.newaxis] * K, lower=1)
    s_2 = (-0.5 * (np.diagonal(K) - np.einsum("ij,ij->j", Cm, Cm))
           * (pi * (1 - pi) * (1 - 2 * pi)))
    del Cm
    v = y - pi
    u = s_2 - R @ (K @ s_2)
    M = np.negative(R, out=R)
    M += np.outer(a, a)
    M += np.outer(u, v)
    M += np.outer(v, u)
    return gram.contract(M)


class BinaryLaplaceGPC(BaseEstimator):
    """Binary Laplace GP classification on the exact path: scikit-learn's
    private ``_BinaryGaussianProcessClassifierLaplace``, its parameters,
    attributes and numbers."""

    def __init__(self, kernel=None, *, optimizer="fmin_l_bfgs_b",
                 n_restarts_optimizer=0, max_iter_predict=100, warm_start=False,
                 copy_X_train=True, random_state=None, solver="auto", n_probes=64,
                 n_components=300, tol=1e-5, max_iter=1000, backend=None, verbose=0):
        self.kernel = kernel
        self.solver = solver
        self.n_probes = n_probes
        self.n_components = n_components
        self.tol = tol
        self.max_iter = max_iter
        self.backend = backend
        self.optimizer = optimizer
        self.n_restarts_optimizer = n_restarts_optimizer
        self.max_iter_predict = max_iter_predict
        self.warm_start = warm_start
        self.copy_X_train = copy_X_train
        self.random_state = random_state
        self.verbose = verbose

    @_one_blas_thread
    def fit(self, X, y):
        """Fit on validated float64 ``X`` and two classes in ``y``."""
        if self.kernel is None:  # scikit-learn's default: fixed C(1) * RBF(1)
            self.kernel_ = C(1.0, constant_value_bounds="fixed") * RBF(
                1.0, length_scale_bounds="fixed")
        else:
            self.kernel_ = clone(self.kernel)
        self.rng = check_random_state(self.random_state)
        self.X_train_ = np.copy(X) if self.copy_X_train else X
        encoder = LabelEncoder()
        self.y_train_ = encoder.fit_transform(y)
        self.classes_ = encoder.classes_
        if self.classes_.size > 2:
            raise ValueError(f"{type(self).__name__} supports only binary "
                             f"classification. y contains classes {self.classes_}")
        if self.classes_.size == 1:
            raise ValueError(f"{type(self).__name__} requires 2 classes; got "
                             f"{self.classes_.size} class")
        n = len(self.y_train_)
        self.solver_ = ("iterative" if self.solver == "iterative" or (
            self.solver == "auto" and n > EXACT_MAX_SAMPLES) else "exact")
        if self.solver_ == "iterative":  # landmarks once, at the initial kernel
            self._landmarks = landmarks(self.kernel_, self._X64(), self.n_components)
        if self.optimizer is not None and self.kernel_.n_dims > 0:
            self._optimize()
        else:
            self.log_marginal_likelihood_value_ = self.log_marginal_likelihood(
                self.kernel_.theta)
        if self.solver_ == "iterative":
            it = self._iterative_mode(self.kernel_)
            self.pi_, self.W_sr_, self.iterative_ = it.pi, it.W_sr, it
            self.n_iter_ = it.steps
            return self
        gram = Gram(self.kernel_, self._X64())
        mode = self._mode(gram.K)
        self.pi_, self.W_sr_, self.L_ = mode.pi, mode.W_sr, np.tril(mode.L)
        self.n_iter_ = mode.steps
        return self

    def _iterative_mode(self, kernel):
        """The iterative path's mode at ``kernel`` (:mod:`._laplace_iterative`)."""
        y = self.y_train_
        it = IterativeLaplace(kernel, self._X64(), y.astype(np.float64),
                              self._landmarks, n_probes=self.n_probes, tol=self.tol,
                              max_iter=self.max_iter, backend=self.backend)
        warm = (self.warm_start and hasattr(self, "f_cached")
                and self.f_cached.shape == y.shape)
        self.f_cached = it.mode(self.f_cached if warm else np.zeros(len(y)),
                                self.max_iter_predict)
        return it

    def _optimize(self):
        def obj_func(theta, eval_gradient=True):
            if eval_gradient:
                lml, grad = self.log_marginal_likelihood(theta, eval_gradient=True,
                                                         clone_kernel=False)
                return -lml, -grad
            return -self.log_marginal_likelihood(theta, clone_kernel=False)

        bounds = self.kernel_.bounds
        optima = [self._constrained_optimization(obj_func, self.kernel_.theta, bounds)]
        if self.n_restarts_optimizer > 0:
            if not np.isfinite(bounds).all():
                raise ValueError("Multiple optimizer restarts (n_restarts_optimizer>0) "
                                 "requires that all bounds are finite.")
            for _ in range(self.n_restarts_optimizer):
                # as scikit-learn (which draws log-bounds and exponentiates)
                theta_initial = np.exp(self.rng.uniform(bounds[:, 0], bounds[:, 1]))
                optima.append(self._constrained_optimization(obj_func, theta_initial,
                                                             bounds))
        values = [value for _, value in optima]
        self.kernel_.theta = optima[int(np.argmin(values))][0]
        self.kernel_._check_bounds_params()
        self.log_marginal_likelihood_value_ = -np.min(values)

    def _constrained_optimization(self, obj_func, initial_theta, bounds):
        if self.optimizer == "fmin_l_bfgs_b":
            res = scipy.optimize.minimize(obj_func, initial_theta, method="L-BFGS-B",
                                          jac=True, bounds=bounds)
            if res.status != 0:
                warnings.warn(f"lbfgs failed to converge (status={res.status}):\n"
                              f"{res.message}.\n", ConvergenceWarning, stacklevel=4)
            return res.x, res.fun
        if callable(self.optimizer):
            return self.optimizer(obj_func, initial_theta, bounds=bounds)
        raise ValueError(f"Unknown optimizer {self.optimizer}.")

    def _X64(self):
        return np.asarray(self.X_train_, dtype=np.float64)

    def _mode(self, K):
        y = self.y_train_
        if (self.warm_start and hasattr(self, "f_cached")
                and self.f_cached.shape == y.shape):
            f = self.f_cached
        else:
            f = np.zeros_like(y, dtype=np.float64)
        mode = posterior_mode(K, y, f, self.max_iter_predict)
        self.f_cached = mode.f
        return mode

    @_one_blas_thread
    def log_marginal_likelihood(self, theta=None, eval_gradient=False,
                                clone_kernel=True):
        """The Laplace approximation of the log marginal likelihood at
        ``theta`` (and its gradient), as scikit-learn's."""
        if theta is None:
            if eval_gradient:
                raise ValueError("Gradient can only be evaluated for theta!=None")
            return self.log_marginal_likelihood_value_
        kernel = self.kernel_.clone_with_theta(theta) if clone_kernel else self.kernel_
        kernel.theta = theta
        if getattr(self, "solver_", "exact") == "iterative":
            it = self._iterative_mode(kernel)
            out = it.lml(eval_gradient)
            if self.verbose:
                print(f"[GaussianProcessClassifier] theta={np.round(np.exp(theta), 4)} "
                      f"lml={np.ravel(out)[0]:.6g} (iterative: {it.n_iter} CG "
                      "iterations)", file=sys.stderr, flush=True)
            return out
        gram = Gram(kernel, self._X64())
        mode = self._mode(gram.K)
        if self.verbose:
            print(f"[GaussianProcessClassifier] theta={np.round(np.exp(theta), 4)} "
                  f"lml={mode.lml:.6g}", file=sys.stderr, flush=True)
        if not eval_gradient:
            return mode.lml
        return mode.lml, lml_gradient(gram, self.y_train_, mode)

    def latent_mean_and_variance(self, X):
        """Mean and variance of the latent function at X (Algorithm 3.2)."""
        check_is_fitted(self)
        if self.solver_ == "iterative":
            return self.iterative_.latent_mean_and_variance(np.asarray(X, np.float64))
        K_star = self.kernel_(self.X_train_, X)
        mean = K_star.T.dot(self.y_train_ - self.pi_)
        v, _ = lapack.dtrtrs(self.L_, self.W_sr_[:, np.newaxis] * K_star, lower=1)
        return mean, self.kernel_.diag(X) - np.einsum("ij,ij->j", v, v)

    def predict(self, X):
        check_is_fitted(self)
        if self.solver_ == "iterative":
            f_star = self.iterative_.latent_mean_and_variance(
                np.asarray(X, np.float64), variance=False)[0]
            return np.where(f_star > 0, self.classes_[1], self.classes_[0])
        K_star = self.kernel_(self.X_train_, X)
        f_star = K_star.T.dot(self.y_train_ - self.pi_)
        return np.where(f_star > 0, self.classes_[1], self.classes_[0])

    def predict_proba(self, X):
        mean, var = self.latent_mean_and_variance(X)
        alpha = 1 / (2 * var)
        gamma = LAMBDAS * mean
        integrals = (np.sqrt(np.pi / alpha)
                     * erf(gamma * np.sqrt(alpha / (alpha + LAMBDAS**2)))
                     / (2 * np.sqrt(var * 2 * np.pi)))
        pi_star = (COEFS * integrals).sum(axis=0) + 0.5 * COEFS.sum()
        return np.vstack((1 - pi_star, pi_star)).T
