"""Gaussian-process regression: scikit-learn's results at small n, and a
linear-memory iterative solver (BBMM) at large n; Laplace classification.

What lives here: the regressor; the classifier (:mod:`._classifier`, its
binary Laplace approximation in :mod:`._laplace`, exact, and in
:mod:`._laplace_iterative`, by CG and stochastic Lanczos); the regressor's
exact (:mod:`._exact`) and iterative (:mod:`._iterative`, :mod:`._control`)
solvers, the hyperparameter fit
(:mod:`._fit`, :mod:`._optimize`) and device arrays (:mod:`._arrays`,
:mod:`._device`). What it may import: the public API, :mod:`.._shared` and
:mod:`kerneltools._utils`.
"""

from __future__ import annotations

import time
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
import scipy.linalg
from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin, clone
from sklearn.gaussian_process.kernels import RBF, Kernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from ...kernels import make_kernel
from . import _exact as exact
from . import _iterative as it
from ..._utils._array_api import (HOST, DeviceScore, host_array, placement,
                         validate_on_device)
from .._shared._fallback import FallbackMixin, gp_kernel_refusal
from ._arrays import GPPlacement, copy_in
from ._classifier import GaussianProcessClassifier
from ._fit import HyperparameterFit
from ._predict import GPPrediction
from ..._utils._param_validation import Interval, StrOptions, validate_params
from ..._utils._validation import validate_numeric

__all__ = ["GaussianProcessRegressor", "GaussianProcessClassifier"]

#: Largest n that ``solver='auto'`` handles exactly (Cholesky) when it fits
#: hyperparameters: each evaluation of the objective factors and inverts
#: ``K + alpha I`` (``2 n^3 / 3`` flops, a few n x n buffers: 600 MB at 5,000;
#: see :mod:`._gp_exact`), which above this costs more than the iterative fit.
CHOLESKY_MAX_SAMPLES = 5000
#: Largest n that ``solver='auto'`` handles exactly with fixed hyperparameters
#: (``optimizer=None`` or none free): one n x n factor, 800 MB at 10^4, and
#: ``n^3 / 3`` flops, less than the iterative fit's log-det probes and the
#: predictive variances' CG at this size (at n = 4,000, D = 8: 26 s fit and 78
#: s for the std at 100 points iteratively).
CHOLESKY_MAX_SAMPLES_FIXED = it.DENSE_MAX_SAMPLES


def _default_kernel_to_fit():
    """What ``fit`` starts from with ``kernel=None``: scikit-learn's ``C() * RBF()``,
    both hyperparameters optimised within their default bounds (1e-5, 1e5)."""
    return C() * RBF()


class GaussianProcessRegressor(GPPlacement, GPPrediction, DeviceScore,
                               HyperparameterFit, FallbackMixin, MultiOutputMixin,
                               RegressorMixin, BaseEstimator):
    """Gaussian-process regression with kernels as generated formulas.

    The constructor, attributes and results of scikit-learn's
    :class:`sklearn.gaussian_process.GaussianProcessRegressor` (Algorithm 2.1 of
    Rasmussen and Williams) on the exact path, where the gradient of the log
    marginal likelihood never forms the ``(n, n, n_theta)`` tensor of kernel
    derivatives (one Cholesky factor and its inverse per evaluation, then
    BLAS products or blocks of symbolic derivatives; see ``_gp_exact``). Above
    ``CHOLESKY_MAX_SAMPLES`` points, or with ``solver='iterative'``, nothing of
    size ``n x n`` is stored: solves by preconditioned conjugate gradients,
    ``log det`` by stochastic Lanczos quadrature and the gradient's trace by
    Hutchinson probes (BBMM, Gardner et al. 2018; for ``c * RBF`` and
    ``c * Matern`` kernels with the preconditioner as a control variate),
    each kernel product a generated reduction.

    Parameters
    ----------
    kernel : sklearn.gaussian_process.kernels object, default=None
        None means ``ConstantKernel() * RBF()``, whose amplitude and length
        scale ``fit`` optimises as scikit-learn does; an unfitted model's prior
        is ``ConstantKernel(1.0, "fixed") * RBF(1.0, "fixed")``, as scikit-learn's.
        Translated into formulas by :func:`kerneltools.kernels.from_sklearn`;
        a kernel it cannot translate (a user ``Kernel`` subclass, Matern with
        another ``nu``, a kernel on structured inputs) is fitted by
        scikit-learn's own GaussianProcessRegressor (see Notes).
    alpha : float or array of shape (n_samples,), default=1e-10
        Added to the diagonal of the training kernel matrix.
    optimizer : "fmin_l_bfgs_b", callable or None, default="fmin_l_bfgs_b"
    n_restarts_optimizer : int, default=0
    normalize_y : bool, default=False
    copy_X_train : bool, default=True
    n_targets : int, optional
    random_state : int, RandomState or None
        Seeds the optimizer restarts (and nothing of the iterative solver,
        whose probes have their own fixed seed so that the objective the
        optimizer sees is deterministic).
    solver : {"auto", "cholesky", "iterative"}, default="auto"
        "auto": "cholesky" up to ``CHOLESKY_MAX_SAMPLES`` (5,000) points when
        the optimizer fits hyperparameters, up to
        ``CHOLESKY_MAX_SAMPLES_FIXED`` (10,000) with fixed hyperparameters
        (no gradient to hold), else "iterative". The iterative solver's
        predictive std and covariance use a dense Cholesky factor (built at
        the first such call and kept) up to 10,000 points where it costs less
        than their conjugate-gradient solves, which otherwise go to a
        relative residual of 1e-5 (std within about 1e-4, relative, of the
        exact one; tested).
        Up to ``POLISH_MAX_SAMPLES`` (5,000) points the iterative
        optimizer's result is polished by L-BFGS-B on the exact log
        marginal likelihood, in the inverse length scales (the stochastic
        estimates stop short of the optimum along nearly flat directions,
        which are flat in ``log l`` and not in ``1 / l``), and
        ``log_marginal_likelihood_value_`` is the exact value there.
    n_probes : int, default=16
        Probe vectors of the iterative solver's trace and log-det estimates.
    n_components : int, default=300
        Rank of the iterative solver's pivoted-Cholesky preconditioner.
    tol : float, default=1e-3
        Relative residual at which the iterative solver's CG stops inside the
        objective (the optimizer needs a few digits only, as in GPyTorch; at
        1e-2 the estimate jumps by about 1e-3 of its value where CG stops one
        iteration earlier or later, which stalls L-BFGS);
        the solve for ``alpha_`` goes to ``min(tol, 1e-6)``, the predictive
        variances' to ``min(tol, 1e-5)`` (see ``solver``).
    max_iter : int, default=1000
        CG's cap. A solve that reaches it short of ``tol`` (outside the
        optimizer's steps) is redone by a dense Cholesky for n <= 5,000, else
        raises ConvergenceError (:mod:`kerneltools.estimators._shared._cg_escalation`).
    n_pretrain : int, "auto" or None, default="auto"
        Iterative solver with an optimizer: first fit the hyperparameters on
        a random subset of ``n_pretrain`` training points (by the same rule,
        recursively) and start the optimizer on all points from there, as
        Wang et al. (2019) pretrain on a subset. The first steps of the
        optimizer, far from the optimum, are then taken where each step is
        cheap, and the preconditioner's landmarks are drawn for the
        pretrained kernel. A subset of up to ``PRETRAIN_EXACT_MAX`` (2,000)
        points is fitted exactly (Cholesky), a larger one iteratively after
        its own pretraining on a quarter of it. The optimizer on all points
        then starts from the subset's optimum with a small first step, in
        the inverse length scales (see :mod:`._gp_optimize`).
        ``"auto"``: ``n // 4`` when ``n >= PRETRAIN_MIN_SAMPLES`` (8,000),
        else no pretraining; None: no pretraining. Restarts
        (``n_restarts_optimizer``) start from random points as always.
    backend : {"auto", "cpu", "cuda", "numpy"} or None, default=None
        Where the iterative solver reduces (the exact path uses scikit-learn's
        dense kernels); None: the configured backend
        (:func:`kerneltools.config_context`). ``fit`` raises
        :class:`~kerneltools.exceptions.BackendUnavailableError` for one that
        cannot run here.
    verbose : int, default=0
        Print each objective evaluation (theta, log marginal likelihood, CG
        iterations, time).

    Attributes
    ----------
    kernel_ : kernel object, with the fitted hyperparameters
    alpha_ : ndarray of shape (n_samples,) or (n_samples, n_targets)
    X_train_, y_train_ : ndarray
    L_ : ndarray (n, n), the Cholesky factor (exact path only; the iterative
        path raises AttributeError)
        These arrays are in the namespace and on the device of the training
        data (see Notes).
    log_marginal_likelihood_value_ : numpy.float64
    solver_ : str
    n_iter_ : int
        Conjugate-gradient iterations of the final solve for ``alpha_`` (1 on
        the exact path).
    n_features_in_ : int

    Notes
    -----
    Array API arrays: CuPy arrays, and with
    ``sklearn.set_config(array_api_dispatch=True)`` any Array API array
    (torch tensors, array-api-strict, ...), are fitted and predicted in their
    namespace, on their device: ``predict`` (mean, std, covariance),
    ``sample_y`` and the fitted arrays ``X_train_``, ``y_train_``,
    ``alpha_`` and ``L_`` are returned there. Host arrays (CPU tensors) are
    read through a zero-copy NumPy view and computed as NumPy's. On a GPU
    (CuPy arrays, or torch CUDA tensors through DLPack) the iterative solver
    keeps the data there for the whole fit: its CG solves, log-determinant
    probes, gradient reductions and control variate run on device arrays,
    the L-BFGS-B steps take theta and its gradient on the host; it serves
    ``c * RBF`` and ``c * Matern`` kernels (plus WhiteKernel terms), whose
    dense blocks it evaluates on the device, and computes predictive
    variances by CG there (never by the dense factor). The exact solver
    (``"cholesky"``) copies the data to the host once per fit and factors
    there (the Array API has no triangular solve; the factor goes back as
    ``L_``), and so does every solver with a kernel of another form, once
    per call, outputs moved back; pretraining subsets fitted exactly and the
    exact polish copy their points to the host once per fit. With
    ``backend="cuda"``, NumPy data are copied to the GPU once per fit. ``y``
    follows ``X``; ``predict`` and ``sample_y`` take X in the namespace and on
    the device of the fit (``ValueError`` otherwise). ``theta``, the log
    marginal likelihood and its gradient stay NumPy (hyperparameter-sized,
    as scikit-learn's kernels hold them). See
    :mod:`kerneltools._utils._array_api`.

    With a kernel that has no formula here, ``fit`` hands the call to
    scikit-learn's :class:`sklearn.gaussian_process.GaussianProcessRegressor`
    with the same parameters (its exact, dense algorithm, which is ours on
    the exact path; ``solver`` and our other parameters are then unused), copies
    its fitted attributes, keeps it in ``fallback_`` and sends every later
    call to it: results, warnings and errors are scikit-learn's. ``verbose``
    says so. Such a kernel cannot run the iterative solver: at large n this
    costs scikit-learn's ``O(n^2)`` memory.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    >>> from kerneltools.estimators import GaussianProcessRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 5, size=(80, 1))
    >>> y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=80)
    >>> gp = GaussianProcessRegressor(RBF() + WhiteKernel(), random_state=0).fit(X, y)
    >>> mean, std = gp.predict(X[:3], return_std=True)
    >>> bool(np.all(std < 0.2))
    True
    """

    _parameter_constraints: ClassVar[dict] = {
        # scikit-learn's GaussianProcessRegressor's
        "kernel": [None, Kernel],
        "alpha": [Interval(Real, 0, None, closed="left"), np.ndarray],
        "optimizer": [StrOptions({"fmin_l_bfgs_b"}), callable, None],
        "n_restarts_optimizer": [Interval(Integral, 0, None, closed="left")],
        "normalize_y": ["boolean"],
        "copy_X_train": ["boolean"],
        "n_targets": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
        # ours
        "solver": [StrOptions(("auto", "cholesky", "iterative"))],
        "n_probes": [Interval(Integral, 1, None, closed="left")],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "n_pretrain": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"}),
                       None],
        "backend": ["backend"],
        "verbose": ["verbose"],
    }

    def __init__(self, kernel=None, *, alpha=1e-10, optimizer="fmin_l_bfgs_b",
                 n_restarts_optimizer=0, normalize_y=False, copy_X_train=True,
                 n_targets=None, random_state=None, solver="auto", n_probes=16,
                 n_components=300, tol=1e-3, max_iter=1000, n_pretrain="auto", backend=None,
                 verbose=0):
        self.kernel = kernel
        self.alpha = alpha
        self.optimizer = optimizer
        self.n_restarts_optimizer = n_restarts_optimizer
        self.normalize_y = normalize_y
        self.copy_X_train = copy_X_train
        self.n_targets = n_targets
        self.random_state = random_state
        self.solver = solver
        self.n_probes = n_probes
        self.n_components = n_components
        self.tol = tol
        self.max_iter = max_iter
        self.n_pretrain = n_pretrain
        self.backend = backend
        self.verbose = verbose

    _sklearn_class = "sklearn.gaussian_process.GaussianProcessRegressor"

    def _engine_refuses(self, X, y=None):
        """Why the engine cannot fit (a kernel without a formula), or None."""
        return None if self.kernel is None else gp_kernel_refusal(self.kernel)

    # -- fit ----------------------------------------------------------------
    def fit(self, X, y):
        """Fit the Gaussian process (and its hyperparameters, with an optimizer).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)

        Returns
        -------
        self : object
        """
        validate_params(self)
        place = placement(X, backend=self.backend, who="GaussianProcessRegressor.fit",
                          device_ok=self._device_serves())
        reason = self._engine_refuses(X, y)
        if reason:
            return self._fit_fallback(reason, X, y)
        self._drop_fallback()
        self._drop_device_state()
        self.kernel_ = _default_kernel_to_fit() if self.kernel is None else clone(self.kernel)
        make_kernel(self.kernel_)  # an unsupported kernel fails here, by name
        rng = check_random_state(self.random_state)
        if place.space.on_device:
            X, y = validate_on_device(self, place.to_space(X), place.to_space(y),
                                      reset=True, space=place.space, dtype=np.float64,
                                      y_numeric=True, who="GaussianProcessRegressor")
        else:
            X, y = validate_numeric(self, host_array(X), host_array(y),
                                    multi_output=True, y_numeric=True, dtype=np.float64)
        n_seen = y.shape[1] if y.ndim > 1 else 1
        if self.n_targets is not None and n_seen != self.n_targets:
            raise ValueError(f"The number of targets seen in `y` is different from the "
                             f"parameter `n_targets`. Got {n_seen} != {self.n_targets}.")
        n = X.shape[0]
        optimize = self.optimizer is not None and self.kernel_.n_dims > 0
        self.solver_ = self.solver
        if self.solver == "auto":
            limit = CHOLESKY_MAX_SAMPLES if optimize else CHOLESKY_MAX_SAMPLES_FIXED
            self.solver_ = "cholesky" if n <= limit else "iterative"
        if self.solver_ == "cholesky" and place.space.on_device:
            # the exact path on the host: one copy of the data per fit (see Notes)
            X, y = place.space.host(X), place.space.host(y)
            place = place.on_host()
        self._fit_on(place, X, y, rng, optimize)
        self._publish(place)
        if self.verbose and not place.trivial:
            print(f"[GaussianProcessRegressor] {self.solver_} fit of {n} points on "
                  f"{place.describe()}", flush=True)
        return self

    def _fit_on(self, place, X, y, rng, optimize):
        """The fit on validated arrays of ``place``'s compute space."""
        sp = self._space = place.space
        self._run_backend = place.backend
        y = self._normalize(y, sp)
        self._alpha = self._check_alpha(X.shape[0])
        copy = self.copy_X_train
        self._X_fit = copy_in(X, sp) if copy else X
        self._y_fit = copy_in(y, sp) if copy else y
        self._landmarks = None
        self._pretrained = False
        if self.solver_ == "iterative":
            if optimize:
                self._pretrain(rng)
            self._landmarks = it.landmarks_for(self, make_kernel(self.kernel_))
        if optimize:
            self._optimize(rng)
        elif self.solver_ == "cholesky":
            self._factor()  # the lml from the same factor: one Cholesky, not two
            self.log_marginal_likelihood_value_ = self._lml_from_factor()
            return
        else:
            self.log_marginal_likelihood_value_ = self.log_marginal_likelihood(
                self.kernel_.theta, clone_kernel=False)
        self._factor()

    def _lml_from_factor(self):
        """The log marginal likelihood at ``kernel_`` from ``L_`` and ``alpha_``
        (as :meth:`_exact_lml`, without a second factorisation)."""
        y = self._y_fit[:, None] if self._y_fit.ndim == 1 else self._y_fit
        return exact.lml_value(y, self._alpha_fit.reshape(y.shape), self._L)

    def _normalize(self, y, sp=HOST):
        """``y`` normalised (``normalize_y``); the means and scales are kept
        on the host (one number per target)."""
        if self.normalize_y:
            xp = sp.xp
            self._y_train_mean = sp.host(xp.mean(y, axis=0))
            std = sp.host(xp.std(y, axis=0))
            self._y_train_std = np.where(std < 10 * np.finfo(std.dtype).eps, 1.0, std)
        else:
            shape = (y.shape[1],) if y.ndim == 2 else 1
            self._y_train_mean = np.zeros(shape)
            self._y_train_std = np.ones(shape) if y.ndim == 2 else 1.0
        return (y - sp.put(self._y_train_mean)) / sp.put(self._y_train_std)

    def _check_alpha(self, n):
        # a float or an array, by the constraints; an array's values here
        alpha = np.asarray(self.alpha, dtype=np.float64)
        if alpha.ndim > 1 or not np.all(np.isfinite(alpha)) or np.any(alpha < 0):
            raise ValueError("GaussianProcessRegressor: 'alpha' must be a float or a 1-D "
                             f"array of finite values >= 0; got {self.alpha!r}")
        if alpha.ndim == 1 and alpha.shape[0] != n:
            if alpha.shape[0] != 1:
                raise ValueError(f"alpha must be a scalar or an array with same number of "
                                 f"entries as y. ({alpha.shape[0]} != {n})")
            alpha = alpha[0]
        return alpha

    def _factor(self):
        """The quantities predict needs: alpha_ and, exactly, the Cholesky factor."""
        y = self._y_fit
        if self.solver_ == "cholesky":
            # No jitter (not linalg.robust_cholesky), as in scikit-learn:
            # alpha is the jitter, and the error says to raise it.
            try:
                self._L = it.dense_cholesky(self.kernel_, self._X_fit, self._alpha)
            except np.linalg.LinAlgError as exc:
                exc.args = (f"The kernel, {self.kernel_}, is not returning a positive "
                            "definite matrix. Try gradually increasing the 'alpha' "
                            "parameter of your GaussianProcessRegressor estimator.",
                            *exc.args)
                raise
            self._alpha_fit = scipy.linalg.cho_solve((self._L, True), y, check_finite=False)
            self.n_iter_ = 1  # one direct solve
        else:
            self._L = None
            # landmarks for the fitted hyperparameters: the predictive solves
            # need a preconditioner that suits them, not the initial ones
            self._landmarks = it.landmarks_for(self, make_kernel(self.kernel_))
            self._iter = None
            self._alpha_fit, self.n_iter_ = self._iterative().solve(y)

    def _iterative(self):
        """The iterative solver's state (rebuilt after unpickling)."""
        if getattr(self, "_iter", None) is None:
            self._iter = self._solver_at(self.kernel_)
        return self._iter

    def __getstate__(self):
        state = super().__getstate__()
        # lazy formulas and operators, namespaces, device copies: rebuilt on demand
        for name in ("_iter", "_space", "_device_arrays", "_host_copies"):
            state.pop(name, None)
        return state

    @property
    def L_(self):
        """The lower Cholesky factor of ``K + alpha I`` (exact path only)."""
        check_is_fitted(self)
        if self._delegating():
            return self.fallback_.L_
        if self._L is None:
            n = self._X_fit.shape[0]
            raise AttributeError(
                "L_ does not exist with solver='iterative': it would be an n x n "
                f"matrix ({n} x {n}), which the "
                "iterative solver never forms; use solver='cholesky' to get it")
        out = getattr(self, "_L_out", None)
        return self._L if out is None else out

    # -- log marginal likelihood -------------------------------------------
    def log_marginal_likelihood(self, theta=None, eval_gradient=False, clone_kernel=True):
        """Log marginal likelihood of ``theta`` (and its gradient), as scikit-learn.

        Parameters
        ----------
        theta : array-like of shape (n_kernel_params,), optional
            None returns ``log_marginal_likelihood_value_``.
        eval_gradient : bool, default=False
        clone_kernel : bool, default=True

        Returns
        -------
        log_likelihood : numpy.float64
        log_likelihood_gradient : ndarray of shape (n_kernel_params,), if eval_gradient
        """
        if self._delegating():
            return self.fallback_.log_marginal_likelihood(theta, eval_gradient,
                                                          clone_kernel)
        if theta is None:
            if eval_gradient:
                raise ValueError("Gradient can only be evaluated for theta!=None")
            return self.log_marginal_likelihood_value_
        return self._lml(theta, eval_gradient, clone_kernel)

    def _lml(self, theta, eval_gradient, clone_kernel, objective=False, exact=False):
        """log_marginal_likelihood; ``objective``: called by the optimizer
        (see :meth:`_gp_iterative.IterativeGP.lml`); ``exact``: by the exact
        path whatever ``solver_``."""
        kernel = self.kernel_.clone_with_theta(theta) if clone_kernel else self.kernel_
        kernel.theta = theta
        start = time.perf_counter()
        solver = "cholesky" if exact else getattr(self, "solver_", self.solver)
        cg = ""
        if solver == "iterative":
            solver = self._solver_at(kernel)
            out = solver.lml(eval_gradient, objective)
            # np.float64, as the exact path and scikit-learn
            out = (np.float64(out[0]), out[1]) if eval_gradient else np.float64(out)
            cg = f", {solver.n_iter} CG iterations"
        else:
            out = self._exact_lml(kernel, eval_gradient)
        if self.verbose:
            lml = out[0] if eval_gradient else out
            print(f"[GaussianProcessRegressor] theta={np.round(np.exp(theta), 4)} "
                  f"lml={lml:.6g} ({time.perf_counter() - start:.2f} s{cg})", flush=True)
        return out

    def _exact_lml(self, sk_kernel, eval_gradient):
        """The exact log marginal likelihood (and gradient): :mod:`._gp_exact`."""
        X, y = self._host_inputs()
        y = y[:, None] if y.ndim == 1 else y
        return exact.lml_and_gradient(sk_kernel, make_kernel(sk_kernel), X, y,
                                      self._alpha, eval_gradient)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = False
        # NumPy, Array API arrays (array_api_dispatch) and CuPy: see Notes
        tags.array_api_support = True
        return tags
