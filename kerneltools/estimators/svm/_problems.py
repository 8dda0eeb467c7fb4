"""libsvm's five formulations as dual problems for :func:`._solver.solve`.

Each function takes the kernel of its points (a :class:`._kernel_ops.DataKernel`
on the rows it trains on), their targets and per-point weights ``W`` (the
sample weights, all > 0), builds libsvm's dual problem (``solve_c_svc``,
``solve_nu_svc``, ``solve_one_class``, ``solve_epsilon_svr``,
``solve_nu_svr`` of libsvm's ``svm.cpp``: the same linear terms, bounds and
starting points), solves it, and returns a :class:`Dual`: the signed
coefficient of each point in the decision function
``f(x) = sum_t coef_t K(x_t, x) - rho``, ``rho``, and the solver's record.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._solver import DualProblem, solve

__all__ = ["Dual", "c_svc", "epsilon_svr", "nu_svc", "nu_svr", "one_class"]


@dataclass
class Dual:
    """One solved binary, regression or one-class problem."""

    coef: np.ndarray
    rho: float
    n_iter: int
    timed_out: bool
    obj: float


def _run(problem, kernel, opts, *, nu=False):
    return solve(problem, kernel, nu=nu, **opts)


def c_svc(kernel, sign, W, Cp, Cn, **opts) -> Dual:
    """C-SVC: ``sign`` is +1 for the first class of the pair, -1 for the second."""
    n = len(sign)
    y = sign.astype(np.float64)
    C = W * np.where(y > 0, Cp, Cn)
    sol = _run(DualProblem(p=-np.ones(n), y=y, C=C, alpha=np.zeros(n),
                           point=np.arange(n)), kernel, opts)
    return Dual(sol.alpha * y, sol.rho, sol.n_iter, sol.timed_out, sol.obj)


def nu_svc(kernel, sign, W, nu, **opts) -> Dual:
    """nu-SVC: libsvm's start (the first points of each class at their bound
    until each class holds ``nu sum(W) / 2``), then scaled by ``1 / r``."""
    y = sign.astype(np.float64)
    C = W.astype(np.float64)
    half = nu * C.sum() / 2
    alpha = np.zeros(len(y))
    for cls in (y > 0, y < 0):
        alpha[cls] = _fill(C[cls], half)
    sol = _run(DualProblem(p=np.zeros(len(y)), y=y, C=C, alpha=alpha,
                           point=np.arange(len(y))), kernel, opts, nu=True)
    r = sol.r
    return Dual(sol.alpha * y / r, sol.rho / r, sol.n_iter, sol.timed_out,
                sol.obj / (r * r))


def one_class(kernel, W, nu, **opts) -> Dual:
    """One-class SVM: libsvm's start fills ``nu sum(W)`` from the first points."""
    n = len(W)
    C = W.astype(np.float64)
    alpha = _fill(C, nu * C.sum())
    sol = _run(DualProblem(p=np.zeros(n), y=np.ones(n), C=C, alpha=alpha,
                           point=np.arange(n)), kernel, opts)
    return Dual(sol.alpha, sol.rho, sol.n_iter, sol.timed_out, sol.obj)


def epsilon_svr(kernel, target, W, C, epsilon, **opts) -> Dual:
    """epsilon-SVR: ``2n`` variables (``alpha``, ``alpha*``) on the ``n`` points."""
    n = len(target)
    y = np.concatenate([np.ones(n), -np.ones(n)])
    p = np.concatenate([epsilon - target, epsilon + target])
    Cv = np.tile(W * C, 2)
    sol = _run(DualProblem(p=p, y=y, C=Cv, alpha=np.zeros(2 * n),
                           point=np.tile(np.arange(n), 2)), kernel, opts)
    return Dual(sol.alpha[:n] - sol.alpha[n:], sol.rho, sol.n_iter, sol.timed_out,
                sol.obj)


def nu_svr(kernel, target, W, C, nu, **opts) -> Dual:
    """nu-SVR: libsvm's start puts ``min(rest, C_i)`` on both ``alpha_i`` and
    ``alpha*_i`` in point order until ``C nu sum(W) / 2`` is spent."""
    n = len(target)
    Ci = W * C
    a = _fill(Ci, float(np.sum(Ci * nu)) / 2)
    y = np.concatenate([np.ones(n), -np.ones(n)])
    p = np.concatenate([-target, target])
    sol = _run(DualProblem(p=p, y=y, C=np.tile(Ci, 2), alpha=np.tile(a, 2),
                           point=np.tile(np.arange(n), 2)), kernel, opts, nu=True)
    return Dual(sol.alpha[:n] - sol.alpha[n:], sol.rho, sol.n_iter, sol.timed_out,
                sol.obj)


def _fill(C, total):
    """``alpha_i = min(C_i, what is left of total)`` in order (libsvm's starts)."""
    before = np.concatenate([[0.0], np.cumsum(C)[:-1]])
    return np.clip(total - before, 0.0, C)
