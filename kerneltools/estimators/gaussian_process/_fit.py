"""The hyperparameter fit of GaussianProcessRegressor: its stages
(pretraining on subsets), L-BFGS-B on either solver's objective, and the
iterative optimum's exact polish (the algorithms: :mod:`._gp_optimize`).

A mixin of :class:`~kerneltools.estimators.GaussianProcessRegressor`: it
reads the estimator's parameters and its fit state (``_X_fit``,
``_y_fit``, ``_alpha``, ``kernel_``, ``solver_``, ``_space``: the training
data in the compute space, see :mod:`._array_api`) and sets ``kernel_.theta``
and ``log_marginal_likelihood_value_``.
"""

from __future__ import annotations

from operator import itemgetter

import numpy as np
from sklearn.base import clone

from ...kernels import make_kernel
from . import _iterative as it
from . import _optimize as opt
from ..._utils._array_api import HOST

#: Largest n at which ``solver='iterative'`` ends its optimisation with a
#: polish: L-BFGS-B on the exact objective (:mod:`._gp_exact`), started at the
#: iterative optimum, in the inverse length scales (:mod:`._gp_optimize`). The
#: stochastic estimates (16 probes) cannot resolve the small gradients of
#: nearly flat directions (the length scales of irrelevant features), where
#: the iterative optimizer stops short: at n = 1,500, D = 8, 1.2 below the
#: exact optimum's log marginal likelihood (27 evaluations, 166 CG
#: iterations). The polish stops where the exact path does (scikit-learn's
#: L-BFGS-B options). In ``log l``, as scikit-learn optimises, it took 74
#: exact evaluations at n = 1,500 to climb the flat tail of two irrelevant
#: length scales to their bound; in ``1 / l`` fewer (at n = 200, D = 8, from
#: a point where L-BFGS-B with ftol 1e-3 stopped: 31 against 83, same
#: optimum to 2e-8 relative).
POLISH_MAX_SAMPLES = 5000  # GaussianProcessRegressor's CHOLESKY_MAX_SAMPLES
#: ``n_pretrain="auto"``: the iterative solver pretrains from this many
#: points on (see ``n_pretrain``), on ``1 / PRETRAIN_RATIO`` of them (at
#: n = 10^4, D = 8: stages of 625 exact, 2,500 and 10^4 points, 61.5 CPU s
#: and an exact likelihood of 1,503.17 at the fit; with halves, 1,250 exact,
#: 2,500, 5,000 and 10^4: 75.5 CPU s and 1,503.01).
PRETRAIN_MIN_SAMPLES = 8000
PRETRAIN_RATIO = 4
#: Largest pretraining subset fitted exactly: the exact objective costs less
#: there than the iterative one's (at n = 1,500, D = 8: 0.16 CPU s per
#: evaluation) and needs no pretraining of its own. A larger subset is
#: fitted iteratively, itself after pretraining on a quarter of it (``auto``),
#: so that at n = 2 * 10^4 the stages are 1,250 (exact), 5,000 and 20,000
#: points, each started near its optimum.
PRETRAIN_EXACT_MAX = 2000


class HyperparameterFit:
    """``_pretrain``, ``_optimize`` and the optimizer's helpers (see the
    module's notes)."""

    #: The iterative objective's L-BFGS-B stops at this gain over
    #: ``opt.STALL_EVALUATIONS`` evaluations (a pretraining fit's is smaller).
    _stall_gain = opt.STALL_GAIN

    def _pretrain(self, rng, nested=False):
        """Start ``kernel_`` from the hyperparameters fitted on a subset
        (see ``n_pretrain``); ``nested``: this is itself a pretraining fit."""
        n = self._X_fit.shape[0]
        m = self.n_pretrain
        if m == "auto":
            least = PRETRAIN_EXACT_MAX if nested else PRETRAIN_MIN_SAMPLES
            m = n // PRETRAIN_RATIO if n >= least else None
        if m is None or m >= n:
            return
        idx = np.sort(np.random.default_rng(it._SEED).choice(n, size=m, replace=False))
        sub = clone(self).set_params(n_restarts_optimizer=0)
        sub.kernel_ = clone(self.kernel_)
        sub._alpha = self._alpha[idx] if np.ndim(self._alpha) else self._alpha
        sp = getattr(self, "_space", HOST)
        sub.solver_ = "cholesky" if m <= PRETRAIN_EXACT_MAX else "iterative"
        sub._X_fit, sub._y_fit = sp.take(self._X_fit, idx), sp.take(self._y_fit, idx)
        sub._space, sub._run_backend = sp, it.run_backend(self)
        if sub.solver_ == "cholesky" and sp.on_device:  # exact: on the host (m x m)
            sub._X_fit, sub._y_fit = sp.host(sub._X_fit), sp.host(sub._y_fit)
            sub._space = HOST
        sub._pretrained = False
        # a start only, whose evaluations cost (m / n)^2 of one here: run
        # closer to its optimum (a smaller gain to stop at, opt.STALL_GAIN)
        sub._stall_gain = self._stall_gain * (m / n) ** 2
        if sub.solver_ == "iterative":
            sub._pretrain(rng, nested=True)
            sub._landmarks = it.landmarks_for(sub, make_kernel(sub.kernel_))
        sub._optimize(rng, polish=False, start_only=True)
        self.kernel_.theta = sub.kernel_.theta
        self._pretrained = True
        if self.verbose:
            print(f"[GaussianProcessRegressor] pretrained on {m} of {n} points "
                  f"({sub.solver_}): {self.kernel_}", flush=True)

    def _objective(self, exact=False):
        """The optimizer's ``obj_func``: minus the log marginal likelihood (and
        its gradient) by ``solver_``, or by the exact path with ``exact``."""

        def obj_func(theta, eval_gradient=True):
            if eval_gradient:
                lml, grad = self._lml(theta, True, False, objective=True, exact=exact)
                return -lml, -grad
            return -self._lml(theta, False, False, objective=True, exact=exact)

        return obj_func

    def _optimize(self, rng, polish=True, start_only=False):
        """Fit ``kernel_.theta`` (and ``log_marginal_likelihood_value_``);
        ``start_only``: a pretraining fit, whose optimum is a starting point
        only (L-BFGS-B's looser rules of the iterative objective, no polish)."""
        obj_func = self._objective()
        optima = [self._first_optimization(obj_func, start_only)]
        if self.n_restarts_optimizer > 0:
            bounds = self.kernel_.bounds
            if not np.isfinite(bounds).all():
                raise ValueError("Multiple optimizer restarts (n_restarts_optimizer>0) "
                                 "requires that all bounds are finite.")
            for _ in range(self.n_restarts_optimizer):
                start = rng.uniform(bounds[:, 0], bounds[:, 1])
                optima.append(self._constrained_optimization(obj_func, start, bounds))
        values = list(map(itemgetter(1), optima))
        theta, value = optima[int(np.argmin(values))]
        if polish and self.solver_ == "iterative" and \
                self._X_fit.shape[0] <= POLISH_MAX_SAMPLES:
            polished = self._polish(theta)
            if np.isfinite(polished[1]):  # else K + alpha I is singular there
                theta, value = polished
        self.kernel_.theta = theta
        self.kernel_._check_bounds_params()
        self.log_marginal_likelihood_value_ = np.float64(-value)

    def _first_optimization(self, obj_func, start_only):
        """``(theta, value)`` of the optimizer from ``kernel_.theta``; from a
        pretrained optimum, the iterative objective's L-BFGS-B runs in the
        inverse length scales with a small first step (see ``n_pretrain``)."""
        theta, bounds = self.kernel_.theta, self.kernel_.bounds
        if self._pretrained and self.solver_ == "iterative" and \
                self.optimizer == "fmin_l_bfgs_b":
            step = opt.stage_first_step(self._X_fit.shape[0])
            return opt.scaled_lbfgs(obj_func, theta, bounds,
                                    opt.length_scale_mask(self.kernel_), iterative=True,
                                    first_step=step, gain=self._stall_gain)[:2]
        return self._constrained_optimization(obj_func, theta, bounds,
                                              iterative=True if start_only else None)

    def _polish(self, theta):
        """The iterative optimum, refined on the exact objective in the
        inverse length scales (see :data:`POLISH_MAX_SAMPLES` and
        :mod:`._gp_optimize`): ``(theta, minus the exact lml)``."""
        if self.optimizer != "fmin_l_bfgs_b":
            return self._constrained_optimization(self._objective(exact=True), theta,
                                                  self.kernel_.bounds, iterative=False)
        if self.verbose:
            print("[GaussianProcessRegressor] polishing the iterative optimum on the "
                  "exact log marginal likelihood", flush=True)
        theta, value, nfev = opt.polish(self._objective(exact=True), theta,
                                        self.kernel_.bounds,
                                        opt.length_scale_mask(self.kernel_))
        if self.verbose:
            print(f"[GaussianProcessRegressor] polish: {nfev} exact evaluations",
                  flush=True)
        return theta, value

    def _constrained_optimization(self, obj_func, initial_theta, bounds, iterative=None):
        if self.optimizer == "fmin_l_bfgs_b":
            if iterative is None:
                iterative = self.solver_ == "iterative"
            return opt.lbfgs(obj_func, initial_theta, bounds, iterative=iterative,
                             gain=self._stall_gain)[:2]
        return self.optimizer(obj_func, initial_theta, bounds=bounds)
