"""The iterative (BBMM) solver of GaussianProcessRegressor: nothing n x n.

Gardner, Pleiss, Bindel, Weinberger and Wilson, "GPyTorch: Blackbox
Matrix-Matrix Gaussian Process Inference with GPU Acceleration", NeurIPS 2018;
Wang et al., "Exact Gaussian Processes on a Million Data Points", NeurIPS 2019.
With ``A = K + alpha I`` (plus any white noise):

- ``A^{-1} y`` and ``A^{-1} z`` for probes ``z ~ N(0, P)`` come from one batched
  conjugate-gradient run preconditioned by the Nystroem approximation ``P``
  on randomly pivoted Cholesky landmarks (its features ``F = K_nm L^{-T}``
  held dense where they fit, :class:`StoredNystroem`: each application two
  BLAS products);
- ``log det A`` by stochastic Lanczos quadrature from that run's coefficients
  (:func:`kerneltools.linalg.solve_with_logdet`);
- ``d lml / d theta = 1/2 a^T dK a - 1/2 tr(A^{-1} dK)``, the trace by
  Hutchinson, ``E[(A^{-1} z)^T dK (P^{-1} z)] = tr(A^{-1} dK)``: one
  reduction of the symbolic derivative formulas for every probe and every
  hyperparameter at once; for ``c * RBF`` / ``c * Matern`` kernels with the
  preconditioner's own derivative as a control variate
  (:mod:`._gp_control`), which takes the gradient's error from 10-20 to
  0.1-0.5 at n = 10^4, D = 8 (its exact value 10 to 30 per component).

On a device (CuPy arrays, :mod:`._array_api`) the same algorithm runs with
its n-sized arrays there, through the same code: :mod:`._device` holds
what differs.

The probes and landmarks have fixed seeds, so the objective the optimizer
sees is a deterministic function of theta. ``P`` is rebuilt at every theta
(on the landmarks chosen once per fit): kept fixed over an optimizer stage
from a pretrained optimum, at n = 10^4, D = 8, it took CG from 2 to 7
iterations per evaluation as theta moved by 0.2 % of the likelihood, and to
17 on 2,500 points (the residual ``K - P``, relative to the noise level that
``P^{-1} A`` divides by, grows fast with the length scales' change).

Precision: the kernel products stay float64. In float32 (float64
accumulation, as KernelRidge's first sweeps), at n = 10^4, D = 8 and the
benchmark's optimum (amplitude 150, noise 0.04), the log marginal likelihood
estimate moved by 30 (1,495.1 against an exact 1,495.2) and the gradient's
amplitude component by 3: the rounding of each kernel value is amplified by
``A^{-1}`` (norm 1 / noise), and no refinement sweep restores a log
determinant computed from the float32 operator's Lanczos coefficients.
"""

from __future__ import annotations

import copy
import functools
import warnings

import numpy as np
import scipy.linalg
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from ...exceptions import NotPositiveDefiniteError
from ...kernels import stationary_form
from ...lazy import Pm, Vi, Vj
from ...linalg import (
    KernelOperator,
    NystroemPreconditioner,
    conjugate_gradient,
    select_landmarks,
    solve_with_logdet,
)
from . import _control as control
from ..._utils._array_api import HOST
from .._shared._cg_escalation import solve_or_escalate
from ..kernel_ridge._cg import rows

_SEED = 0
#: Most CG iterations per evaluation of the optimizer's objective.
OBJECTIVE_MAX_ITER = 100
#: Test points per batch of the variance solves: an n x 128 block at a time.
_BATCH = 128
#: Relative residual of the variance solves. The variance needs the quadratic
#: form ``b^T A^{-1} b`` only, whose CG error is the squared A-norm error of
#: the solve, ``||x - x_k||_A^2``, but how small that is depends on the
#: preconditioner: measured std errors (relative, against scikit-learn's),
#: n = 400, rank-40 preconditioner: 4e-4 at 1e-4 (39 iterations), 2.3e-5 at
#: 1e-5 (50), 5.9e-6 at 1e-6 (61); n = 2,000, D = 8, rank 300: 6e-6 at 1e-4.
VARIANCE_TOL = 1e-5
#: Largest n for which a predictive variance may use a dense Cholesky factor
#: of ``K + alpha I`` instead of CG (n^2 float64: 800 MB at 10^4, what
#: scikit-learn holds twice), and for which ``solver='auto'`` is exact with
#: fixed hyperparameters.
DENSE_MAX_SAMPLES = 10_000
#: Kernel entries per block of rows in :func:`dense_cholesky` (32 MB).
_DENSE_BLOCK = 1 << 22
#: Largest ``n x rank`` float64 feature matrix that :class:`StoredNystroem`
#: holds (256 MB: n = 10^5 at rank 300).
STORED_FEATURES_BYTES = 1 << 28


def run_backend(est):
    """The backend of the fit's reductions: its placement's (``_run_backend``,
    :mod:`._array_api`: a device input computed on the host does not reduce
    with ``backend="cuda"``), else the estimator's."""
    return getattr(est, "_run_backend", est.backend)


def landmarks_for(est, kernel):
    """The preconditioner's landmarks, by randomly pivoted Cholesky on ``kernel``.

    Chosen once per fit (at the initial hyperparameters) and kept while the
    optimizer moves theta: the objective stays a smooth, deterministic
    function of theta, and each evaluation skips the pivoting."""
    X = est._X_fit
    n = X.shape[0]
    return select_landmarks(kernel, rows(X, getattr(est, "_space", HOST)),
                            min(est.n_components, n), method="rpcholesky",
                            random_state=_SEED)


def kernel_operator(kernel, sk_kernel, X, shift, dtype=np.float64, backend=None):
    """``K(X, X) + shift I`` (white noise included) as a :class:`KernelOperator`.

    For ``c * RBF`` or ``c * Matern`` (plus WhiteKernel terms) the formula runs
    on the rescaled points ``X / l`` in ``dtype``, ``c * phi(|x' - y'|^2)``:
    no division per pair and feature (1.7x faster at D = 8), and in float32
    half the bandwidth; the reductions accumulate in float64 and the vectors
    stay float64. Other kernels use their formula as written."""
    form = None if sk_kernel is None else stationary_form(sk_kernel)
    if form is None:
        return KernelOperator(kernel, X, shift=shift, backend=backend)
    Xs = np.ascontiguousarray(X / form.length_scale, dtype=dtype)
    K = form.phi(Vi(Xs).sqdist(Vj(Xs))) * form.c
    return KernelOperator(K, shift=np.asarray(shift) + kernel.white_level(), backend=backend)


def dense_cholesky(sk_kernel, X, shift):
    """The lower Cholesky factor of ``K(X, X) + shift I``, in one n x n buffer.

    ``K`` is built by blocks of rows, ``sk_kernel(X[rows], X)`` (scikit-learn's
    own ``sk_kernel(X)`` holds several n x n temporaries: 2.4 GB at peak at
    n = 10^4), its diagonal set to ``sk_kernel.diag(X)`` (white noise
    included: ``k(X, Y)`` leaves it out), and factored in place: ``K.T`` is
    the same symmetric matrix in Fortran order, which LAPACK does not copy.
    Raises :class:`numpy.linalg.LinAlgError` where it is not positive
    definite."""
    n = len(X)
    K = np.empty((n, n))
    step = max(1, _DENSE_BLOCK // n)
    for r0 in range(0, n, step):
        K[r0 : r0 + step] = sk_kernel(X[r0 : r0 + step], X)
    K[np.diag_indices(n)] = sk_kernel.diag(X) + shift
    return scipy.linalg.cholesky(K.T, lower=True, overwrite_a=True, check_finite=False)


class StoredNystroem(NystroemPreconditioner):
    """:class:`~kerneltools.linalg.NystroemPreconditioner` with its features
    ``F = K_nm W`` (``W W^T = K_mm^{-1}``, ``n x r``) computed once, by blocks
    of rows, and held: an application of ``P^{-1}`` is then two BLAS products
    with ``F`` (at n = 2 * 10^4, rank 300, 17 columns: milliseconds, against
    0.3 s for the two lazy ``n x m`` reductions), and so is a draw from
    ``N(0, P)``. Same values as the parent's, to rounding."""

    def __init__(self, kernel, X, **kwargs):
        super().__init__(kernel, X, **kwargs)
        W = self._W
        self._F = np.empty((len(self.X), W.shape[1]))
        step = max(1, _DENSE_BLOCK // max(len(self.Z), 1))
        for r0 in range(0, len(self.X), step):
            rows = slice(r0, r0 + step)
            K = np.asarray(self.kernel(self.X[rows], self.Z), np.float64)
            self._F[rows] = K @ W

    def _matmat(self, R):
        R2 = np.asarray(R, dtype=np.float64).reshape(len(self.X), -1)
        return woodbury_solve(self._F, self.d_inv, self._chol, R2).reshape(np.shape(R))

    def sample(self, n_samples, random_state=None):
        """``n_samples`` columns from ``N(0, P)``: the parent's draws."""
        rng = np.random.default_rng(random_state)
        e1 = rng.standard_normal((len(self.X), n_samples))
        e2 = rng.standard_normal((len(self.Z), n_samples))
        return woodbury_sample(self._F, self.d_inv, e1, e2, np)


def woodbury_solve(F, d_inv, chol, R, sp=HOST):
    """``P^-1 R`` for ``P = D + F F^T`` (``d_inv = 1 / diag(D)``, ``chol`` the
    Cholesky factor of ``I + F^T D^-1 F``, on the host) by Woodbury:
    ``D^-1 R - D^-1 F (I + F^T D^-1 F)^-1 F^T D^-1 R``, in the namespace of
    the space ``sp`` (NumPy on the host, the device's for :mod:`._device`).

    The ``r x k`` system is solved on the host by the Cholesky factor (the
    Array API has no triangular solve): with an explicit inverse on the
    device instead, CG's iterates, hence the variances, moved by 2e-7
    (relative) from the host path's, which they equal to rounding this way.
    """
    d = d_inv[:, None] if R.ndim == 2 else d_inv
    DR = d * R
    c = scipy.linalg.cho_solve(chol, sp.host(sp.xp.matrix_transpose(F) @ DR))
    return DR - d * (F @ sp.put(c))


def woodbury_sample(F, d_inv, e1, e2, xp):
    """Columns from ``N(0, D + F F^T)`` made of the standard normal draws
    ``e1`` (``n x p``) and ``e2`` (``m x p``, ``m >= r`` rows; its first
    ``r`` used), in namespace ``xp``."""
    return e1 / xp.sqrt(d_inv)[:, None] + F @ e2[: F.shape[1], :]


def preconditioner(kernel, X, shift, landmarks, backend=None):
    """The solver's ``P``: :class:`StoredNystroem` where its features fit in
    :data:`STORED_FEATURES_BYTES`, else the lazy
    :class:`~kerneltools.linalg.NystroemPreconditioner` (linear memory)."""
    kind = StoredNystroem if 8 * len(X) * len(landmarks) <= STORED_FEATURES_BYTES \
        else NystroemPreconditioner
    return kind(kernel, X, shift=shift, landmarks=landmarks, backend=backend,
                diag_correction=True, smooth=True)


def _one_blas_thread(method):
    """Run ``method`` with BLAS on one thread.

    Its BLAS calls are small (``m x m`` factorisations, ``n x m`` products)
    and alternate with the OpenMP reductions, whose idle threads spin for a
    while after each one: a multi-threaded BLAS call right after a reduction
    competes with them (a 300 x 300 Cholesky took 0.5 s instead of 5 ms on
    two cores)."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with threadpool_limits(limits=1, user_api="blas"):
            return method(*args, **kwargs)

    return wrapper


class IterativeGP:
    """The iterative solver at one value of the hyperparameters.

    ``kernel`` is the translated :class:`~kerneltools.kernels.Kernel` and
    ``sk_kernel`` the scikit-learn kernel object it comes from (optional):
    with it, dense blocks (the preconditioner's ``K(X, landmarks)``) come
    from scikit-learn, and ``c * RBF`` / ``c * Matern`` kernels take the
    rescaled fast path (:func:`kernel_operator`). ``sp``: the space of the
    fit's arrays (NumPy here; :class:`._device.DeviceGP` on a device)."""

    sp = HOST

    @_one_blas_thread
    def __init__(self, est, kernel, sk_kernel=None):
        self.est = est
        if sk_kernel is not None:
            kernel = copy.copy(kernel)
            kernel.dense = sk_kernel.__call__
        self.kernel = kernel
        self.sk_kernel = sk_kernel
        X = est._X_fit
        self.A = kernel_operator(kernel, sk_kernel, X, est._alpha, backend=run_backend(est))
        landmarks = getattr(est, "_landmarks", None)
        if landmarks is None:
            landmarks = landmarks_for(est, kernel)
        self.M = preconditioner(kernel, X, est._alpha, landmarks, run_backend(est))

    @_one_blas_thread
    def solve(self, B):
        """``(A^{-1} B, iterations)`` to ``min(tol, 1e-6)``."""
        return self._cg_or_dense(B, min(self.est.tol, 1e-6))

    def _cg_or_dense(self, B, tol):
        """``(A^{-1} B, iterations)`` by preconditioned CG to ``tol``, or,
        where CG stops at ``max_iter`` short of it, by a dense float64
        Cholesky factor of ``A`` (n <= ``DENSE_SOLVE_MAX``, kept for later
        solves), else :class:`~kerneltools.exceptions.ConvergenceError`
        (:mod:`._cg_escalation`)."""
        est = self.est
        n = est._X_fit.shape[0]

        def dense():  # iterations: CG's, all spent
            return self._dense_solve(B), est.max_iter

        return solve_or_escalate(lambda info: self._cg(B, tol, info), dense, size=n,
                                 tol=tol, max_iter=est.max_iter,
                                 **self._escalation())[0]

    def _escalation(self):
        """The arguments of :func:`._cg_escalation.solve_or_escalate` that
        name the estimator and its fixes."""
        est = self.est
        alpha = f"it is {est.alpha!r}; " if np.ndim(est.alpha) == 0 else ""
        return {"who": "GaussianProcessRegressor(solver='iterative')",
                "verbose": est.verbose,
                "fixes": f"Raise 'max_iter' (it is {est.max_iter}), raise 'alpha' "
                         f"({alpha}more noise conditions K + alpha I better), loosen "
                         f"'tol' (it is {est.tol!r}), or use solver='cholesky' (a "
                         f"dense solve, n x n memory)."}

    def _logdet_solve(self, y, max_iter, objective, eval_gradient):
        """``(result, escalated)``: :func:`~kerneltools.linalg.solve_with_logdet`'s
        result and False; outside the optimizer's calls (``objective``, which
        judge CG themselves), where its CG stops at ``max_iter`` short of
        ``tol``, the exact log marginal likelihood (and gradient) from a dense
        Cholesky factor and True for n <= ``DENSE_SOLVE_MAX``, else
        :class:`~kerneltools.exceptions.ConvergenceError`."""
        est = self.est

        def run(info):
            return solve_with_logdet(self.A, y, self.M, n_probes=est.n_probes,
                                     random_state=_SEED, tol=est.tol, max_iter=max_iter,
                                     info=info, **self._namespace())

        if objective:
            return run(None), False

        def exact():
            self.n_iter = max_iter
            return est._exact_lml(self.sk_kernel, eval_gradient)

        result, info = solve_or_escalate(run, exact, size=est._X_fit.shape[0],
                                         tol=est.tol, max_iter=max_iter,
                                         **self._escalation())
        return result, info["escalated"]

    def _namespace(self):
        """The ``xp`` argument of the CG primitives: none on the host (linalg's
        NumPy recurrences)."""
        return {"xp": self.sp.xp} if self.sp.on_device else {}

    def _cg(self, B, tol, info):
        """CG's ``(A^{-1} B, iterations)`` to ``tol``; ``info`` as
        :func:`~kerneltools.linalg.conjugate_gradient`'s."""
        return conjugate_gradient(self.A, B, M=self.M, tol=tol,
                                  max_iter=self.est.max_iter, info=info,
                                  **self._namespace())

    def _dense_solve(self, B):
        """``A^{-1} B`` by the dense Cholesky factor (:meth:`_cholesky`)."""
        return scipy.linalg.cho_solve((self._cholesky(), True), B, check_finite=False)

    @_one_blas_thread
    def lml(self, eval_gradient, objective=False):
        """The log marginal likelihood (and its gradient) by BBMM.

        With ``objective`` (the optimizer's calls), CG stops after
        ``min(max_iter, OBJECTIVE_MAX_ITER)`` iterations, and a point where it
        has not converged by then, or where CG finds ``K + alpha I`` not
        positive definite, gets ``-inf`` (zero gradient): L-BFGS-B
        steps back from it as from a kernel that is not positive definite on
        the exact path, instead of spending up to ``max_iter`` iterations on
        a trial point far from the optimum."""
        est, xp = self.est, self.sp.xp
        y = est._y_fit
        y = xp.reshape(y, (y.shape[0], 1)) if y.ndim == 1 else y
        n, t = y.shape
        max_iter = min(est.max_iter, OBJECTIVE_MAX_ITER) if objective else est.max_iter
        theta = self.kernel.theta
        failed = (-np.inf, np.zeros_like(theta)) if eval_gradient else -np.inf
        with warnings.catch_warnings():
            if objective:
                warnings.simplefilter("ignore", ConvergenceWarning)
            try:
                result, escalated = self._logdet_solve(y, max_iter, objective,
                                                       eval_gradient)
            except NotPositiveDefiniteError:
                if not objective:
                    raise
                return failed  # as the exact path's failed Cholesky
        if escalated:
            return result
        alpha, U, Z, logdet, self.n_iter = result
        if objective and self.n_iter >= max_iter:
            return failed
        lml = float(-0.5 * float(xp.sum(y * alpha)) - 0.5 * t * logdet
                    - 0.5 * t * n * np.log(2 * np.pi))
        if not eval_gradient:
            return lml
        return lml, self._gradient(alpha, U, self.M(Z), t)

    def _gradient(self, alpha, U, V, t, dtype=np.float64):
        """1/2 sum_t a_t^T dK a_t - t/2 mean_p (A^-1 z_p)^T dK (P^-1 z_p), for
        all theta; for ``c * phi`` kernels with the preconditioner as a
        control variate of the trace (:mod:`._gp_control`)."""
        xp = self.sp.xp
        p = U.shape[1]
        left = xp.concat([0.5 * alpha, (-t / (2 * p)) * U], axis=1)
        right = xp.concat([alpha, V], axis=1)
        grad = self._kernel_gradient(left, right, dtype)
        # white noise: dA / d log h = level * I
        trace_term = (0.5 * float(xp.sum(alpha * alpha))
                      - t / (2 * p) * float(xp.sum(U * V)))
        form = None if self.sk_kernel is None else stationary_form(self.sk_kernel)
        if control.applies(form, self.M):
            kernel_part, white_part = self._trace_corrections(form, V)
            grad -= t / 2 * self._per_hyperparameter(form, kernel_part[0],
                                                     kernel_part[1:])
            trace_term -= t / 2 * white_part
        return grad + self.kernel.white_log_gradient() * trace_term

    def _kernel_gradient(self, left, right, dtype):
        """``sum_ij left_i . right_j d k_ij / d theta``: on the rescaled
        points for ``c * phi`` kernels, else from the symbolic derivatives."""
        form = None if self.sk_kernel is None else stationary_form(self.sk_kernel)
        if form is None:
            return self._formula_gradient(left, right)
        return self._stationary_gradient(form, left, right, dtype)

    def _trace_corrections(self, form, V):
        """:func:`._gp_control.trace_corrections` with this solver's ``M``."""
        return control.trace_corrections(form, self.M,
                                         self._rescaled(form, np.float64), V, self.sp)

    def _sizes(self):
        return [int(np.size(self.kernel.params[h])) for h in self.kernel.hyperparameter_names]

    def _formula_gradient(self, left, right):
        """``sum_ij left_i . right_j d k_ij / d theta`` from the kernel's
        symbolic derivatives: one reduction for all hyperparameters."""
        X = self.est._X_fit
        x_i, y_j = Vi(X), Vj(X)
        formulas = self.kernel.log_gradient(x_i, y_j)
        sizes = self._sizes()
        grad = np.zeros(sum(sizes))
        present = [f for f in formulas if f is not None]
        if present:
            G = present[0]
            for f in present[1:]:
                G = G.concat(f)
            weight = Vi(left) | Vj(right)
            total = (G * weight).sum(axis=1, backend=run_backend(self.est)).sum(0)
            pos, k = 0, 0
            for f, size in zip(formulas, sizes):
                if f is not None:
                    grad[pos : pos + size] = total[k : k + size]
                    k += size
                pos += size
        return grad

    def _stationary_gradient(self, form, left, right, dtype):
        """The same for ``c * phi(|x/l - y/l|^2)`` on the rescaled points, in
        ``dtype`` (accumulated in float64): ``d k / d log c = k`` for every
        constant factor, and ``d k / d log l = -d k / d s`` at ``s = 1`` for
        ``k = c * phi(|(x/l - y/l) * s|^2)``, one reduction."""
        sp, xp = self.sp, self.sp.xp
        Xs = self._rescaled(form, dtype)
        x_i, y_j = Vi(sp.engine(Xs)), Vj(sp.engine(Xs))
        s = Pm(np.ones(form.length_scale.size, dtype=sp.np_dtype(Xs)))
        k = form.phi(((x_i - y_j) * s).square().sum(-1)) * form.c
        weight = Vi(sp.engine(xp.astype(left, Xs.dtype, copy=False))) \
            | Vj(sp.engine(xp.astype(right, Xs.dtype, copy=False)))
        total = sp.from_engine((k.concat(k.grad(s, 1.0)) * weight).sum(
            axis=1, backend=run_backend(self.est)))
        total = sp.host(xp.sum(xp.astype(total, xp.float64), axis=0))
        return self._per_hyperparameter(form, total[0], -total[1:])

    def _rescaled(self, form, dtype):
        """The training points over the length scales, in ``dtype``."""
        return np.ascontiguousarray(self.est._X_fit / form.length_scale, dtype=dtype)

    def _per_hyperparameter(self, form, amplitude, length_scales):
        """A vector over ``theta`` with ``amplitude`` at every constant factor
        of ``c * phi`` and ``length_scales`` at the length scale(s)."""
        grad = []
        for name, size in zip(self.kernel.hyperparameter_names, self._sizes()):
            if name in form.constants:
                grad.append(np.full(size, amplitude))
            elif name == form.length_scale_name:
                grad.append(np.asarray(length_scales, dtype=np.float64)[:size])
            else:
                grad.append(np.zeros(size))
        return np.concatenate(grad) if grad else np.empty(0)

    def _dense_pays(self, n_query):
        """Whether a dense Cholesky factor costs less than the variance's CG.

        A factor costs ``n^3 / 3`` flops once (then ``n^2`` per query point);
        CG ``2 n^2`` per query point and iteration, about as many iterations
        as the fit's solve for ``alpha_`` (``n_iter_``, to 1e-6; the variance
        goes to :data:`VARIANCE_TOL`, so count half). A factor built once is
        kept (``_L``) for later calls."""
        n = len(self.est._X_fit)
        if getattr(self, "_L", None) is not None:
            return True
        iters = max(getattr(self.est, "n_iter_", 1), 1) / 2
        return n <= DENSE_MAX_SAMPLES and 6 * n_query * iters >= n

    def _cholesky(self):
        """The lower Cholesky factor of ``K + alpha I`` (white noise
        included), built on first use and kept."""
        if getattr(self, "_L", None) is None:
            dense = self.sk_kernel if self.sk_kernel is not None else self.kernel
            self._L = dense_cholesky(dense, self.est._X_fit, self.est._alpha)
        return self._L

    @_one_blas_thread
    def predict(self, X, kernel, return_std, return_cov):
        """Mean (by ``alpha_``) and variance or covariance at ``X`` (rows of
        the fit's space).

        The variance ``k(x, x) - k_x^T A^{-1} k_x`` by one block CG over all
        query columns (batches of :data:`_BATCH`) to :data:`VARIANCE_TOL` (the
        covariance to ``min(tol, 1e-6)``), or,
        where that costs more (:meth:`_dense_pays`), by a dense Cholesky
        factor kept for later calls."""
        sp, xp = self.sp, self.sp.xp
        if self.sk_kernel is not None:
            kernel = self.kernel  # dense blocks K(train, X) by scikit-learn
        train = self.est._X_fit
        alpha = self.est._alpha_fit
        coef = xp.reshape(alpha, (alpha.shape[0], -1))
        backend = run_backend(self.est)
        lazy = kernel.lazy(sp.engine(X), sp.engine(train))
        mean = sp.from_engine(lazy.matmul(sp.engine(coef), backend=backend))
        mean = xp.reshape(mean, (X.shape[0],) + tuple(alpha.shape[1:]))
        if not (return_std or return_cov):
            return mean, None, None
        if self._dense_pays(X.shape[0]):
            V = scipy.linalg.solve_triangular(self._cholesky(), kernel(train, X),
                                              lower=True, check_finite=False)
            if return_cov:
                return mean, None, kernel(X) - V.T @ V
            return mean, kernel.diag(X) - np.einsum("ij,ij->j", V, V), None
        cross, prior = self._query_blocks(X, kernel, return_cov)
        parts = []
        for b0 in range(0, X.shape[0], _BATCH):
            b1 = min(X.shape[0], b0 + _BATCH)
            B = cross(b0, b1)  # K(train, X[b0:b1])
            if return_cov:
                # off the diagonal k_x^T A^{-1} k_y: a bilinear form, whose
                # error is first order in the solve's, so to min(tol, 1e-6)
                W = sp.engine(self.solve(B)[0])
                parts.append(prior[:, b0:b1]
                             - sp.from_engine(lazy.matmul(W, backend=backend)))
            else:
                parts.append(prior[b0:b1] - xp.sum(B * self._variance_solve(B), axis=0))
        out = parts[0] if len(parts) == 1 else xp.concat(parts, axis=int(return_cov))
        return (mean, None, out) if return_cov else (mean, out, None)

    def _query_blocks(self, X, kernel, cov):
        """``(cross, prior)``: ``cross(b0, b1)`` the block ``K(train,
        X[b0:b1])`` and ``prior`` ``K(X, X)`` (``cov``) or its diagonal, by
        the (scikit-learn) kernel's dense evaluation."""
        train = self.est._X_fit
        prior = kernel(X) if cov else kernel.diag(X)
        return (lambda b0, b1: kernel(train, X[b0:b1])), prior

    def _variance_solve(self, B):
        """``A^{-1} B`` to :data:`VARIANCE_TOL` (see there)."""
        return self._cg_or_dense(B, min(self.est.tol, VARIANCE_TOL))[0]
