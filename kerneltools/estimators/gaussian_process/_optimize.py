"""The hyperparameter optimisation of GaussianProcessRegressor: L-BFGS-B on
either solver's objective, and the iterative optimum's exact polish.

The polish runs L-BFGS-B on the exact log marginal likelihood
(:mod:`._gp_exact`) from the iterative optimum, with every length scale
``l`` replaced by its inverse ``w = 1 / l`` (the other hyperparameters stay
on scikit-learn's log scale). A kernel reads a length scale only through
``|x - y| / l``, so the likelihood is a smooth function of ``w`` up to and
including ``w = 0``, where the feature drops out: near an irrelevant
feature's optimum it is about ``L(0) - c w^2``, which a quasi-Newton step
solves in a few steps. In ``log l`` the same function is an exponentially
flat tail, ``L(inf) - c e^{-2 log l}``, along which L-BFGS-B crawls (the
stochastic path stops there, at n = 1,500, D = 8, 1.2 below the exact
optimum, and the polish in ``log l`` took 74 exact evaluations to climb it).
The iterative solver's stages that start from a pretrained optimum
(``n_pretrain``) run in the same variables (:func:`scaled_lbfgs`): from a
point near the optimum, L-BFGS-B's first step in ``log theta`` (length 1,
along a gradient that grows with n) jumped to the bounds (at n = 10^4, D = 8:
from a likelihood of 1,500 to -66,754).

On the iterative objective, L-BFGS-B stops when its evaluations stall
(:data:`STALL_EVALUATIONS`, :data:`STALL_GAIN`), judged over several
evaluations rather than L-BFGS-B's own test on one iteration's relative
decrease: near the optimum the stochastic value and gradient disagree in
their last digits, line searches fail, and L-BFGS-B restarts its memory and
searches again (at n = 2,500, D = 8: 18 evaluations after the best one, none
better by 10^-6 relative); and a small first step from a pretrained optimum
may decrease the objective by less than the relative test's 10^-5 while the
optimum is 1 higher (at n = 10^4, D = 8, from a pretraining on 5,000
points: stopped after 2 evaluations, 1.0 below).
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.optimize
from sklearn.exceptions import ConvergenceWarning

#: L-BFGS-B's options on the iterative objective (see :func:`lbfgs`): at
#: most 10 evaluations per line search; its own stopping tests are
#: scikit-learn's (and rarely reached: :data:`STALL_GAIN` stops it first).
ITERATIVE_OPTIONS = {"maxls": 10}
#: :func:`lbfgs` stops on the iterative objective when its last
#: ``STALL_EVALUATIONS`` evaluations raised the best log marginal likelihood
#: by less than ``STALL_GAIN`` together (at the best point seen). An
#: absolute measure: a difference of log likelihoods is a likelihood ratio
#: (0.05: 5 %), whatever n, and below the estimate's own error (0.1 to 0.2 at
#: n = 10^4, D = 8, 16 probes).
STALL_EVALUATIONS = 4
STALL_GAIN = 0.05


class _Stalled(Exception):
    """Raised inside L-BFGS-B's loop by :class:`_StallWatch`."""


class _StallWatch:
    """``obj_func`` that keeps the best point seen and raises :class:`_Stalled`
    once its last ``window`` evaluations lowered the best value by less
    than ``gain`` together."""

    def __init__(self, obj_func, gain, window):
        self.obj_func, self.gain, self.window = obj_func, gain, window
        self.best = (None, np.inf)
        self.history = []  # the best value after each evaluation

    @property
    def nfev(self):
        return len(self.history)

    def __call__(self, theta):
        value, grad = self.obj_func(theta)
        if value < self.best[1]:
            self.best = (np.array(theta, dtype=np.float64), float(value))
        self.history.append(self.best[1])
        if len(self.history) > self.window and \
                not self.history[-1] < self.history[-1 - self.window] - self.gain:
            raise _Stalled
        return value, grad


def lbfgs(obj_func, initial_theta, bounds, *, iterative, options=None,
          gain=STALL_GAIN):
    """``(theta, value, n_evaluations)``: L-BFGS-B on ``obj_func`` (minus the
    log marginal likelihood and its gradient).

    The iterative objective is an estimate (fixed probes, CG to ``tol``): its
    value and gradient agree to a few digits only, so it stops when
    :data:`STALL_EVALUATIONS` evaluations gained less than ``gain``
    (:data:`STALL_GAIN`: below the estimate's own error; L-BFGS otherwise
    spends as many evaluations again in line searches on that error), at the
    best point evaluated (a failed line search may have tried a better one
    than the iterate it returns to), and does not report the line search's
    failure to find a decrease (status 2) as non-convergence. The exact objective gets
    scikit-learn's options, or ``options``."""
    watch = None
    if iterative:
        options = {**ITERATIVE_OPTIONS, **(options or {})}
        watch = obj_func = _StallWatch(obj_func, gain, STALL_EVALUATIONS)
    try:
        res = scipy.optimize.minimize(obj_func, initial_theta, method="L-BFGS-B",
                                      jac=True, bounds=bounds, options=options)
    except _Stalled:
        return watch.best[0], watch.best[1], watch.nfev
    if res.status == 1 or (res.status != 0 and not iterative):
        warnings.warn(f"lbfgs failed to converge (status={res.status}): {res.message}",
                      ConvergenceWarning, stacklevel=4)
    if watch is not None:  # a failed line search's best trial point is kept too
        best = watch.best if watch.best[1] < res.fun else (res.x, res.fun)
        return best[0], best[1], watch.nfev
    return res.x, res.fun, int(res.nfev)


def length_scale_mask(kernel):
    """A boolean mask over ``kernel.theta``: True at the entries of length
    scales (hyperparameters whose name ends in ``length_scale``)."""
    mask = [h.name.endswith("length_scale")
            for h in kernel.hyperparameters if not h.fixed
            for _ in range(h.n_elements)]
    return np.array(mask, dtype=bool)


#: Size of L-BFGS-B's first step in the polish, relative to each variable
#: (its value for an inverse length scale, 1 for a log hyperparameter).
#: L-BFGS-B's first step has length 1 in its variables, before any curvature
#: is known: from a point near the optimum that is a jump far from it (at
#: n = 1,500, D = 8, from a likelihood of 15 to -3,000, and 10 evaluations
#: to come back).
FIRST_STEP = 0.1


def stage_first_step(n):
    """The first step of an iterative stage on ``n`` points from a pretrained
    optimum: :data:`FIRST_STEP` at 1,500 points, as ``n^{-1/2}`` beyond
    (the pretrained optimum is off by about the subset's statistical error,
    while the likelihood's curvature grows as n: with 0.1 at n = 10^4, D = 8,
    the first trial point fell from 1,499 to 1,089)."""
    return FIRST_STEP * min(1.0, float(np.sqrt(1500 / n)))


def polish(obj_func, theta, bounds, mask):
    """``(theta, value, n_evaluations)``: L-BFGS-B on the exact ``obj_func``
    from ``theta`` in the inverse length scales (:func:`scaled_lbfgs`)."""
    return scaled_lbfgs(obj_func, theta, bounds, mask, iterative=False)


def scaled_lbfgs(obj_func, theta, bounds, mask, *, iterative, first_step=FIRST_STEP,
                 gain=STALL_GAIN):
    """``(theta, value, n_evaluations)``: L-BFGS-B on ``obj_func`` (the exact
    objective, or the iterative one with :func:`lbfgs`'s rules and ``gain``)
    from ``theta``, in the inverse length scales ``w = exp(-theta)`` at ``mask``
    (see the module's notes); ``bounds`` on ``theta`` become
    ``[exp(-hi), exp(-lo)]`` on ``w``. The variables are scaled so that
    L-BFGS-B's first step is small (``first_step``, relative as
    :data:`FIRST_STEP`)."""
    theta = np.asarray(theta, dtype=np.float64)
    bounds = np.asarray(bounds, dtype=np.float64)
    z0 = theta.copy()
    z0[mask] = np.exp(-theta[mask])
    zb = bounds.copy()
    zb[mask] = np.exp(-bounds[mask][:, ::-1])
    scale = first_step * np.where(mask, z0, 1.0)

    def to_theta(u):
        z = z0 + scale * u
        z[mask] = -np.log(z[mask])
        return z

    def scaled(u):
        value, grad = obj_func(to_theta(u))
        grad = np.array(grad, dtype=np.float64)
        grad[mask] /= -(z0 + scale * u)[mask]  # d theta / d w = -1 / w
        return value, grad * scale

    # scikit-learn's gtol (1e-5, on the projected gradient in log theta) in
    # the scaled variables, whose gradient is first_step times that one
    u, value, nfev = lbfgs(scaled, np.zeros_like(z0), (zb - z0[:, None]) / scale[:, None],
                           iterative=iterative, options={"gtol": 1e-5 * first_step},
                           gain=gain)
    return np.clip(to_theta(u), bounds[:, 0], bounds[:, 1]), value, nfev
