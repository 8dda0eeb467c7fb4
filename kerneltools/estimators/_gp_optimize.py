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
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.optimize
from sklearn.exceptions import ConvergenceWarning


def lbfgs(obj_func, initial_theta, bounds, *, iterative, options=None):
    """``(theta, value, n_evaluations)``: L-BFGS-B on ``obj_func`` (minus the
    log marginal likelihood and its gradient).

    The iterative objective is an estimate (fixed probes, CG to ``tol``): its
    value and gradient agree to a few digits only, so it stops at a relative
    change of 1e-5 (below the estimate's own error; L-BFGS otherwise spends
    as many evaluations again in line searches on that error) and does not
    report the line search's failure to find a decrease (status 2) as
    non-convergence. The exact objective gets scikit-learn's options, or
    ``options``."""
    if iterative:
        options = {"ftol": 1e-5, "maxls": 10}
    res = scipy.optimize.minimize(obj_func, initial_theta, method="L-BFGS-B", jac=True,
                                  bounds=bounds, options=options)
    if res.status == 1 or (res.status != 0 and not iterative):
        warnings.warn(f"lbfgs failed to converge (status={res.status}): {res.message}",
                      ConvergenceWarning, stacklevel=4)
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


def polish(obj_func, theta, bounds, mask):
    """``(theta, value, n_evaluations)``: L-BFGS-B on the exact ``obj_func``
    from ``theta``, in the inverse length scales ``w = exp(-theta)`` at
    ``mask`` (see the module's notes); ``bounds`` on ``theta`` become
    ``[exp(-hi), exp(-lo)]`` on ``w``. The variables are scaled so that
    L-BFGS-B's first step is small (:data:`FIRST_STEP`)."""
    theta = np.asarray(theta, dtype=np.float64)
    bounds = np.asarray(bounds, dtype=np.float64)
    z0 = theta.copy()
    z0[mask] = np.exp(-theta[mask])
    zb = bounds.copy()
    zb[mask] = np.exp(-bounds[mask][:, ::-1])
    scale = FIRST_STEP * np.where(mask, z0, 1.0)

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
    # the scaled variables, whose gradient is FIRST_STEP times that one
    u, value, nfev = lbfgs(scaled, np.zeros_like(z0), (zb - z0[:, None]) / scale[:, None],
                           iterative=False, options={"gtol": 1e-5 * FIRST_STEP})
    return np.clip(to_theta(u), bounds[:, 0], bounds[:, 1]), value, nfev
