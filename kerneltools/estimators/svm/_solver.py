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

Shrinking (libsvm's ``do_shrinking``/``be_shrunk``, section 5.1 of the
paper): a variable at a bound whose ``-y G`` is below every value free to go
down (or above every value free to go up), so that it cannot join a violating
pair, leaves the gradient updates, which then run over the active variables
only. When the active variables meet the stopping rule, the gradient of the
shrunk ones is rebuilt (one reduction over the nonzero ``alpha``) and the rule
is checked on all; the solver goes on over all variables where it fails.

Problems of one block (at most ``WHOLE`` working sets' worth of variables)
run libsvm's own loop on the whole float32 kernel, its shrinking included
(compiled, :func:`kerneltools.linalg.smo_block` with ``shrinking``): libsvm's
iterates. In the decomposition, the gradient updates run as float32
reductions where the kernel allows (rbf with moderate exponents), their
tile sums added in float64: libsvm's own float32 kernel values, a few
roundings further off. Their error is measured, not assumed: ``SAMPLE``
variables keep a float64 gradient too, and the stopping rule is tightened
by ``MARGIN`` times the largest difference seen (about 2e-4 on the issue's
data at 10^5 points); past ``MARGIN_MAX eps`` the gradient is recomputed in
float64 and the updates stay float64. When the float32 gradient meets the
tightened rule, the gradient is recomputed in float64 (one reduction over
the nonzero ``alpha``) and the rule checked on it: the solver never stops
on a sampled error estimate.

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
#: Problems of at most this many working sets' worth of variables are one
#: block (its float32 kernel computed once), solved as libsvm does.
WHOLE = 2
#: Once shrinking leaves at most this many working sets' worth of active
#: variables, they all form the next block, solved to ``eps``.
ACTIVE_BLOCK = 2
#: Float32 gradient updates: this many variables (evenly spaced) also keep
#: their gradient in float64; the largest difference ``e`` between the two
#: tightens the stopping rule to ``eps - MARGIN e``.
SAMPLE = 256
MARGIN = 4.0
#: Once ``MARGIN e`` passes this fraction of ``eps``, the updates go back to
#: float64 and the gradient is recomputed exactly.
MARGIN_MAX = 0.5


class KernelOps(Protocol):
    """The kernel as the solver uses it, on data points ``0..n-1``."""

    def block(self, rows: np.ndarray, cols: np.ndarray,
              dtype=np.float64, single: bool = False) -> np.ndarray:
        """Dense ``K(x_rows, x_cols)`` computed in float64, stored as ``dtype``
        (``single``: in float32 where the kernel allows)."""

    def diag(self) -> np.ndarray:
        """``K(x_i, x_i)`` for every data point, float64."""

    def apply(self, cols: np.ndarray, w: np.ndarray,
              rows: np.ndarray | None = None, single: bool = False) -> np.ndarray:
        """``sum_k K(x_i, x_cols[k]) w_k`` for every data point ``i`` (of the
        sorted ``rows`` only, where given; ``single``: float32 reductions
        where the kernel allows, its attribute ``single`` says where)."""


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
          q: int = WORKING_SET, max_iter: int = -1, shrinking: bool = True,
          verbose: int = 0) -> Solution:
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
    shrinking : bool
        libsvm's shrinking: variables at a bound that cannot join a violating
        pair leave the gradient updates; their gradient is rebuilt and the
        stopping rule checked on all variables before the solver stops.
    verbose : int
        Print each outer step: violation, support vectors, time.
    """
    q = max(int(q), 2)
    if len(problem.y) <= WHOLE * q:  # one block: libsvm's own path
        q = 2 * len(problem.y)  # (a working set then takes every variable)
    st = _State(problem, kernel, nu, q)
    st.shrink_whole = shrinking  # one block: libsvm's own shrinking, compiled
    shrinking = shrinking and st.whole is None
    n_iter, timed_out, keep, step, t0 = 0, False, None, 0, time.perf_counter()
    while True:
        up, low = _up_low(st.y, st.alpha, st.C)
        v = -st.y * st.G
        gap = violation(v, up & st.active, low & st.active, st.groups)
        if verbose:
            _report(step, gap, st, n_iter, t0)
        if gap < st.eps(eps):
            if st.active.all() and not st.single:
                break
            if st.single:  # the rule on the float64 gradient, all variables
                st.exact()
            else:
                st.unshrink()  # libsvm: rebuild the gradient, check on all
            continue
        if max_iter != -1 and n_iter >= max_iter:
            timed_out = True
            break
        B, inner = _working_set(v, up & st.active, low & st.active, st.groups, q,
                                keep), max(eps, INNER_FRACTION * gap)
        if shrinking:
            st.shrink(v, up, low, B)
            act = np.flatnonzero(st.active)
            if act.size <= ACTIVE_BLOCK * q and act.size < len(st.y):
                B, inner = act, st.eps(eps)  # the few active: one block to eps
        budget = -1 if max_iter == -1 else max_iter - n_iter
        changed, its = st.step(B, inner, eps, budget)
        n_iter += its
        if changed == 0:  # nothing moved: the block is optimal to rounding
            if st.active.all() and not st.single:
                break
            if st.single:
                st.exact()
            else:
                st.unshrink()
            shrinking = False  # rounding-level stalls: no more shrinking
        keep = B[(st.alpha[B] > 0) & (st.alpha[B] < st.C[B])]
        step += 1
    if not st.active.all():  # stopped early (max_iter): the whole gradient
        st.unshrink()
    return st.solution(n_iter, timed_out, gap)


class _State:
    """The solver's variables: ``alpha``, the gradient ``G`` (exact on the
    ``active`` variables; the others are shrunk), the kernel and its block
    cache."""

    def __init__(self, problem, kernel, nu, q):
        self.problem, self.kernel, self.nu = problem, kernel, nu
        self.y = problem.y.astype(np.float64)
        self.C = problem.C.astype(np.float64)
        self.alpha = problem.alpha.astype(np.float64).copy()
        self.point = problem.point
        self.groups = _groups(self.y, nu)
        self.kdiag = kernel.diag()
        self.G, self.whole = _initial_gradient(problem, kernel, self.y, self.alpha, q)
        self.cache = _BlockCache(kernel, self.point)
        self.active = np.ones(len(self.y), dtype=bool)
        # each step's change (variables, y_t dalpha_t) since the first
        # shrinking, and the step at which each shrunk variable left
        self.log, self.left_at = [], np.zeros(len(self.y), dtype=np.intp)
        self.shrink_whole = False
        # float32 updates: the float64 gradient of a sample, and the largest
        # difference seen
        self.single = self.whole is None and getattr(kernel, "single", False)
        self.S = np.unique(np.linspace(0, len(self.y) - 1, SAMPLE).astype(np.intp))
        self.G_S, self.err = self.G[self.S].copy(), 0.0

    def eps(self, eps):
        """The stopping tolerance on the kept gradient: ``eps`` less the
        margin of its float32 updates' error."""
        return eps - MARGIN * self.err

    def _update(self, t, w, rows, sample=True):
        """``G[rows] += y K(rows, t) w`` (float32 reductions where allowed),
        and (``sample``) the sample's float64 gradient, which follows every
        step, shrunk or not."""
        y = self.y
        self.G[rows] += y[rows] * _apply(self.kernel, self.point, t, w, rows,
                                         single=self.single)
        if self.single and sample:
            S = self.S
            self.G_S += y[S] * (self.kernel.block(self.point[S], self.point[t]) @ w)
            self._measure()

    def _measure(self):
        """The largest float32 error seen on the sample's active variables."""
        if not self.single:
            return
        S = self.S
        seen = np.flatnonzero(self.active[S])
        self.err = max(self.err, float(np.abs(self.G[S[seen]] - self.G_S[seen])
                                       .max(initial=0.0)))

    def step(self, B, inner_eps, eps, budget):
        """Solve the sub-problem on ``B``, update ``alpha`` and the active
        gradient; the number of variables that moved, and the iterations."""
        y, alpha, point = self.y, self.alpha, self.point
        whole = B.size == len(y)
        # libsvm caches float32 kernel values (Qfloat), kept as float32 here;
        # its diagonal is float64
        one = whole and self.whole is not None  # the whole problem's block
        K = self.whole if one else self.cache.block(B, self.single)
        a_new, v_B, its = smo_block(alpha[B], self.G[B], y[B], self.C[B], K,
                                    self.kdiag[point[B]],
                                    eps=eps if whole else inner_eps, nu=self.nu,
                                    max_iter=budget,
                                    backend=getattr(self.kernel, "backend", None),
                                    p=self.problem.p[B] if one else None,
                                    shrinking=one and self.shrink_whole)
        delta = a_new - alpha[B]
        changed = np.flatnonzero(delta)
        alpha[B] = a_new
        if whole:  # one block: its gradient is the whole one
            self.G = -y * v_B
        elif changed.size:
            t = B[changed]
            w = y[t] * delta[changed]
            rows = np.flatnonzero(self.active)
            self._update(t, w, rows)
            if rows.size < len(y):
                self.log.append((t, w))
            if MARGIN * self.err > MARGIN_MAX * eps:
                self.exact()
        return changed.size, its

    def exact(self):
        """Back to float64 updates, the whole gradient recomputed (one
        reduction over the nonzero ``alpha``): all variables active."""
        self.unshrink()
        self.single, self.err = False, 0.0
        p, nz = self.problem.p, np.flatnonzero(self.alpha)
        self.G = p.astype(np.float64).copy()
        if nz.size:
            self.G += self.y * _apply(self.kernel, self.point, nz,
                                      self.y[nz] * self.alpha[nz])
        self.G_S = self.G[self.S].copy()

    def shrink(self, v, up, low, B):
        """libsvm's ``be_shrunk``: a variable free to move one way only leaves
        when its ``v = -y G`` cannot pair with any active variable (below the
        smallest ``v`` free to go down, or above the largest free to go up,
        per group)."""
        for g in self.groups:
            ga = g & self.active
            a, b = v[up & ga], v[low & ga]
            if a.size and b.size:
                m, M = a.max(), b.min()
                out = (up & ~low & (v < M)) | (low & ~up & (v > m))
                out[B] = False
                out &= g & self.active
                self.left_at[out] = len(self.log)
                self.active &= ~out

    def unshrink(self):
        """libsvm's ``reconstruct_gradient``: each shrunk variable's gradient was
        exact when it left; add the changes since (one reduction per step at
        which variables left, over the variables changed since). All active."""
        for at in np.unique(self.left_at[~self.active]):
            s = np.flatnonzero(~self.active & (self.left_at == at))
            if at == len(self.log):
                continue  # nothing changed since
            t = np.concatenate([c[0] for c in self.log[at:]])
            w = np.concatenate([c[1] for c in self.log[at:]])
            t, inv = np.unique(t, return_inverse=True)
            w = np.bincount(inv, weights=w, minlength=t.size)
            self._update(t, w, s, sample=False)
        self.active[:] = True
        self.log = []
        self._measure()

    def solution(self, n_iter, timed_out, gap):
        y, alpha, C, G = self.y, self.alpha, self.C, self.G
        rhos = _rho(y, alpha, C, G, self.nu)
        if self.nu:
            rho, r = (rhos[0] - rhos[1]) / 2, (rhos[0] + rhos[1]) / 2
        else:
            rho, r = rhos[0], 0.0
        obj = float(alpha @ (G + self.problem.p)) / 2
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
        whole = kernel.block(point, point, dtype=np.float32)
        for i in nz:  # libsvm: G += alpha_i Q_i, one column at a time
            G += alpha[i] * (y * y[i] * whole[:, i].astype(np.float64))
    elif nz.size:
        G += y * _apply(kernel, point, nz, y[nz] * alpha[nz])
    return G, whole


def _report(step, gap, st, n_iter, t0):
    print(f"[svm] step {step}: violation {gap:.3g}, support vectors "
          f"{np.count_nonzero(st.alpha)}, active {np.count_nonzero(st.active)}, "
          f"iterations {n_iter}, {time.perf_counter() - t0:.2f} s"
          + (f", float32 error {st.err:.2g}" if st.single else ""), flush=True)


class _BlockCache:
    """The last working set's kernel block (float32, libsvm's ``Qfloat``
    values): the next block computes only the rows of its new variables
    (half of a set is typically kept) and copies the kept ones."""

    def __init__(self, kernel, point):
        self.kernel, self.point = kernel, point
        self.B = self.K = None

    def _rows(self, rows, cols):
        # libsvm's Qfloat values (float32 arithmetic where the updates are)
        return self.kernel.block(self.point[rows], self.point[cols],
                                 dtype=np.float32, single=self.single)

    def block(self, B, single=False):
        self.single = single
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


def _apply(kernel, point, t, w, s=None, single=False):
    """``sum_{k} K(x_{point[s]}, x_{point[t_k]}) w_k`` for every variable ``s``
    (of ``s`` where given): one reduction over the points of ``s``
    (``single``: float32, see :meth:`KernelOps.apply`)."""
    kw = {"single": True} if single else {}
    if s is None or s.size == len(point):
        return kernel.apply(point[t], w, **kw)[point]
    pts, inv = np.unique(point[s], return_inverse=True)
    return kernel.apply(point[t], w, rows=pts, **kw)[inv]
