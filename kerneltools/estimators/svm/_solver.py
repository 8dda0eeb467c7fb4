"""libsvm's dual solvers, as a two-level (large working set) decomposition.

The problem is libsvm's (Chang and Lin, "LIBSVM: a library for support vector
machines", 2011, section 4.1)::

    min_a  1/2 a^T Q a + p^T a   s.t.  y^T a = const,  0 <= a_t <= C_t,

with ``Q_st = y_s y_t K(x_s, x_t)``, ``y_t = +-1``; ``Solver_NU`` (section
4.1.3) adds ``e^T a = const`` by keeping each step within one sign of ``y``.
The gradient ``G = Q a + p`` and ``a`` are float64 over all ``l`` variables.

Each outer step picks a working set ``B`` of at most ``q`` variables, the
ones violating the optimality conditions most (the top of ``-y G`` among the
variables free to go up, the bottom among those free to go down; per sign of
``y`` for ``Solver_NU``), solves the sub-problem on ``B`` with libsvm's own
SMO (second-order working-set selection WSS2, Fan, Chen and Lin, JMLR 2005,
and libsvm's two-variable update with clipping) on the dense ``|B| x |B|``
kernel block (float32, libsvm's values; :func:`kerneltools.linalg.smo_block`,
compiled), and then updates ``G`` for all
``l`` with one kernel reduction over the changed variables::

    G_s += y_s sum_{t changed} K(x_s, x_t) y_t (a_t - a_t^old).

The solver stops on libsvm's rule for the whole problem, the maximal
violating pair: ``max_{up} -y G - min_{low} -y G < eps`` (per sign for
``Solver_NU``), checked on the exact gradient; ``rho`` (and ``r``) are
computed as libsvm's ``calculate_rho``. The result is libsvm's optimum to
libsvm's tolerance; only the path to it differs. Memory: ``O(l + q^2)``
beyond the kernel reductions'.

The kernel enters as a :class:`KernelOps` (dense blocks, its diagonal and
the reduction), so the solver never sees the data.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ...linalg import smo_block

__all__ = ["DualProblem", "KernelOps", "Solution", "solve"]

#: Default working-set size (points per outer step).
WORKING_SET = 3072
#: The sub-problem is solved to this fraction of the outer violation (or eps).
INNER_FRACTION = 0.03


class KernelOps(Protocol):
    """The kernel as the solver uses it, on data points ``0..n-1``."""

    def block(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Dense ``K(x_rows, x_cols)`` in float64."""

    def diag(self) -> np.ndarray:
        """``K(x_i, x_i)`` for every data point, float64."""

    def apply(self, cols: np.ndarray, w: np.ndarray) -> np.ndarray:
        """``sum_k K(x_i, x_cols[k]) w_k`` for every data point ``i``."""


@dataclass
class DualProblem:
    """libsvm's dual problem: variable ``t`` sits on data point ``point[t]``."""

    p: np.ndarray
    y: np.ndarray
    C: np.ndarray
    alpha: np.ndarray
    point: np.ndarray


@dataclass
class Solution:
    """A solved dual problem (libsvm's ``SolutionInfo`` and ``alpha``)."""

    alpha: np.ndarray
    G: np.ndarray
    rho: float
    r: float
    obj: float
    n_iter: int
    timed_out: bool
    gap: float


def _bounds(alpha, C):
    """libsvm's ``alpha_status``: (at upper bound, at lower bound)."""
    return alpha >= C, alpha <= 0


def _up_low(y, alpha, C):
    """Variables free to increase ``-y G`` (``I_up``) and to decrease (``I_low``)."""
    upper, lower = _bounds(alpha, C)
    pos = y > 0
    up = np.where(pos, ~upper, ~lower)
    low = np.where(pos, ~lower, ~upper)
    return up, low


def _groups(y, nu):
    """The variable sets a step may mix: all (``Solver``), or one per sign."""
    if not nu:
        return [np.ones(len(y), dtype=bool)]
    return [y > 0, y < 0]


def violation(v, up, low, groups) -> float:
    """libsvm's stopping quantity: ``max_up v - min_low v`` (``v = -y G``), the
    largest over ``groups``; -inf when nothing can move."""
    gap = -np.inf
    for g in groups:
        a, b = v[up & g], v[low & g]
        if a.size and b.size:
            gap = max(gap, float(a.max() - b.min()))
    return gap


def _working_set(v, up, low, groups, q, keep):
    """The next working set, of at most ``q`` variables: per group, the most
    violating ones (largest ``v`` free to go up, smallest free to go down),
    a quarter of ``q`` each side; then the last set's free variables
    (``keep``), whose kernel rows are known; then more violators up to ``q``
    (ThunderSVM's policy, Wen et al. 2018)."""
    per = max(q // (2 * len(groups)), 1)
    ranked = []  # per side, the top ``per`` violators, most violating first
    for g in groups:
        for mask, sign in ((up & g, -1.0), (low & g, 1.0)):
            idx = np.flatnonzero(mask)
            if idx.size > per:
                idx = idx[np.argpartition(sign * v[idx], per - 1)[:per]]
            ranked.append(idx[np.argsort(sign * v[idx], kind="stable")])
    half = max(per // 2, 1)
    B = np.unique(np.concatenate([r[:half] for r in ranked]))
    if keep is not None and keep.size:
        B = np.union1d(B, np.setdiff1d(keep, B)[: max(q - B.size, 0)])
    if B.size < q:
        rest = np.setdiff1d(np.concatenate([r[half:] for r in ranked]), B)
        B = np.union1d(B, rest[: q - B.size])
    return B


def _rho(y, alpha, C, G, nu):
    """libsvm's ``calculate_rho``: the mean of ``y G`` over free variables, else
    the middle of its feasible interval; ``Solver_NU``'s, per sign of ``y``, on
    ``G`` itself (a list of one or two values)."""
    upper, lower = _bounds(alpha, C)
    if nu:
        return [_middle(G, upper & g, lower & g, g) for g in (y > 0, y < 0)]
    pos = y > 0
    # ub: bounds that y G may not go below; lb: above
    return [_middle(y * G, (upper & pos) | (lower & ~pos),
                    (upper & ~pos) | (lower & pos), np.ones(len(y), dtype=bool))]


def _middle(values, lb_mask, ub_mask, group):
    free = group & ~lb_mask & ~ub_mask
    if free.any():
        return float(values[free].mean())
    ub = values[ub_mask].min() if ub_mask.any() else np.inf
    lb = values[lb_mask].max() if lb_mask.any() else -np.inf
    return float((ub + lb) / 2)


def solve(problem: DualProblem, kernel: KernelOps, *, eps: float, nu: bool = False,
          q: int = WORKING_SET, max_iter: int = -1, verbose: int = 0) -> Solution:
    """Solve ``problem`` to libsvm's tolerance ``eps``.

    Parameters
    ----------
    problem : DualProblem
    kernel : KernelOps
    eps : float
        libsvm's ``eps`` (scikit-learn's ``tol``).
    nu : bool
        ``Solver_NU``: steps within one sign of ``y``; ``rho`` and ``r`` as libsvm's.
    q : int
        Working-set size (>= 2). The optimum does not depend on it.
    max_iter : int
        Cap on the SMO iterations over all steps, -1 for none (libsvm's).
    verbose : int
        Print each outer step: violation, support vectors, time.
    """
    y = problem.y.astype(np.float64)
    C = problem.C.astype(np.float64)
    alpha = problem.alpha.astype(np.float64).copy()
    point = problem.point
    groups = _groups(y, nu)
    kdiag = kernel.diag()
    G, whole = _initial_gradient(problem, kernel, y, alpha, q)
    n_iter, timed_out, keep, step, t0 = 0, False, None, 0, time.perf_counter()
    cache = _BlockCache(kernel, point)
    q = max(int(q), 2)
    while True:
        up, low = _up_low(y, alpha, C)
        v = -y * G
        gap = violation(v, up, low, groups)
        if verbose:
            _report(step, gap, alpha, n_iter, t0)
        if gap < eps:
            break
        if max_iter != -1 and n_iter >= max_iter:
            timed_out = True
            break
        B = _working_set(v, up, low, groups, q, keep)
        budget = -1 if max_iter == -1 else max_iter - n_iter
        inner_eps = eps if B.size == len(y) else max(eps, INNER_FRACTION * gap)
        # libsvm caches float32 kernel values (Qfloat), kept as float32 here;
        # its diagonal is float64
        K = whole if B.size == len(y) and whole is not None else cache.block(B)
        a_new, v_B, its = smo_block(alpha[B], G[B], y[B], C[B], K, kdiag[point[B]],
                                    eps=inner_eps, nu=nu, max_iter=budget,
                                    backend=getattr(kernel, "backend", None))
        n_iter += its
        delta = a_new - alpha[B]
        changed = np.flatnonzero(delta)
        if changed.size == 0:
            break  # nothing moved: the block is optimal to rounding
        alpha[B] = a_new
        if B.size == len(y):  # one block: its gradient is the whole one
            G = -y * v_B
        else:
            t = B[changed]
            G += y * _apply(kernel, point, t, y[t] * delta[changed])
        keep = B[(a_new > 0) & (a_new < C[B])]
        step += 1
    rhos = _rho(y, alpha, C, G, nu)
    if nu:
        rho, r = (rhos[0] - rhos[1]) / 2, (rhos[0] + rhos[1]) / 2
    else:
        rho, r = rhos[0], 0.0
    obj = float(alpha @ (G + problem.p)) / 2
    return Solution(alpha=alpha, G=G, rho=rho, r=r, obj=obj, n_iter=n_iter,
                    timed_out=timed_out, gap=gap)


def _initial_gradient(problem, kernel, y, alpha, q):
    """``G = Q alpha + p`` at the start, and the whole kernel block when the
    problem fits in one (``l <= q``: then libsvm's own float32 columns, summed
    in libsvm's order, so that small problems follow libsvm's path)."""
    G = problem.p.astype(np.float64).copy()
    point, nz = problem.point, np.flatnonzero(alpha)
    whole = None
    if len(y) <= q:
        whole = kernel.block(point, point).astype(np.float32)
        for i in nz:  # libsvm: G += alpha_i Q_i, one column at a time
            G += alpha[i] * (y * y[i] * whole[:, i].astype(np.float64))
    elif nz.size:
        G += y * _apply(kernel, point, nz, y[nz] * alpha[nz])
    return G, whole


def _report(step, gap, alpha, n_iter, t0):
    print(f"[svm] step {step}: violation {gap:.3g}, support vectors "
          f"{np.count_nonzero(alpha)}, iterations {n_iter}, "
          f"{time.perf_counter() - t0:.2f} s", flush=True)


class _BlockCache:
    """The last working set's kernel block (float32, libsvm's ``Qfloat``
    values): the next block computes only the rows of its new variables
    (half of a set is typically kept) and copies the kept ones."""

    def __init__(self, kernel, point):
        self.kernel, self.point = kernel, point
        self.B = self.K = None

    def _rows(self, rows, cols):
        K = self.kernel.block(self.point[rows], self.point[cols])
        return K.astype(np.float32)  # libsvm's Qfloat values

    def block(self, B):
        if self.B is None:
            K = self._rows(B, B)
        else:
            pos = np.minimum(np.searchsorted(self.B, B), len(self.B) - 1)
            hit = self.B[pos] == B
            old, new = np.flatnonzero(hit), np.flatnonzero(~hit)
            K = np.empty((B.size, B.size), dtype=np.float32)
            if old.size:
                K[np.ix_(old, old)] = self.K[np.ix_(pos[old], pos[old])]
            if new.size:  # rows, then their transpose (K symmetric) as a copy:
                R = self._rows(B[new], B)  # a strided column write is slower
                K[new, :] = R
                K[np.ix_(old, new)] = np.ascontiguousarray(R[:, old].T)
        self.B, self.K = B, K
        return K


def _apply(kernel, point, t, w):
    """``sum_{k} K(x_{point[s]}, x_{point[t_k]}) w_k`` for every variable ``s``."""
    return kernel.apply(point[t], w)[point]
