"""Log-domain Sinkhorn iterations on symbolic reductions (private).

The algorithm is GeomLoss's: J. Feydy, T. Séjourné, F.-X. Vialard, S. Amari,
A. Trouvé, G. Peyré, "Interpolating between optimal transport and MMD using
Sinkhorn divergences", AISTATS 2019, and J. Feydy's PhD thesis, "Geometric
data analysis, beyond convolutions" (2020), Algorithm 3.5: symmetric
log-domain Sinkhorn updates with epsilon-scaling, then one last
"extrapolation" step whose outputs carry the gradients (envelope theorem).
Unbalanced transport damps the updates by rho / (rho + eps) (T. Séjourné,
J. Feydy, F.-X. Vialard, A. Trouvé, G. Peyré, "Sinkhorn divergences for
unbalanced optimal transport", arXiv:1910.12958, Table 1 and Proposition 12).

As in GeomLoss's ``sinkhorn_loop``, the solver takes the kernel operation as
an argument: ``softmin(eps, C_xy, h_y)`` is the soft c-transform
``f_i = -eps log sum_j exp(h_j - C(x_i, y_j) / eps)``. :func:`lse_softmin`
gives the kerneltools one, a LogSumExp reduction that never stores the
``N x M`` cost matrix; the temperature enters it as a run-time parameter, so
the whole schedule runs one compiled kernel.

Where the arrays live: a :class:`Problem` carries the
:class:`~kerneltools._utils._array_api.Space` of its arrays. On the host
(NumPy, Dask points) every n-vector is NumPy; on a device (CuPy, or the
simulated device of the tests) the points, masses and potentials are arrays of
that namespace, each softmin a reduction fed and returning device arrays, and
the loop's vector arithmetic (log-weights, averages, marginal errors, values,
gradients) is written to the Array API standard, so that it runs there
unchanged. Only scalars (the temperatures, the marginal errors, the value)
reach the host.
"""

from __future__ import annotations

import time
from typing import Callable, NamedTuple

import numpy as np

from ..dask import is_dask_array, to_numpy
from ..lazy import LazyTensor, Vi, Vj
from .._utils._array_api import HOST, Space, compat

__all__ = [
    "Potentials",
    "Problem",
    "cost_over_eps",
    "damping",
    "epsilon_schedule",
    "lse_softmin",
    "max_diameter",
    "namespace",
    "ot_value",
    "progress",
    "sinkhorn_loop",
    "sinkhorn_refine",
    "value_gradients",
    "weight_gradients",
]

#: Log-weight of a point of zero mass (GeomLoss's ``log_weights``): finite, so
#: that no reduction ever meets ``-inf - (-inf)``.
LOG_ZERO = -100000.0


# -- the problem (checked and built by _inputs.check_problem) --------------------


def _compute(*arrays):
    """Dask arrays among ``arrays`` computed in one pass; the rest as they are."""
    if any(is_dask_array(a) for a in arrays):
        import dask

        return dask.compute(*arrays)
    return arrays


class Problem(NamedTuple):
    """A validated transport problem, arrays in the compute dtype."""

    x: np.ndarray  # (N, D)
    y: np.ndarray  # (M, D)
    a: np.ndarray  # (N,) masses
    b: np.ndarray  # (M,)
    p: int
    eps: float  # blur ** p
    rho: float | None  # reach ** p, None for balanced transport
    eps_list: list  # the epsilon-scaling schedule, ending at eps
    diameter: float
    cost: Callable | None = None  # (x_i, y_j) -> formula C_ij; None: |x - y|^p / p
    space: Space = HOST  # where x, y, a, b (and the potentials) live


def namespace(*arrays):
    """The Array API namespace of ``arrays`` (None ignored): NumPy itself for
    NumPy arrays (and Dask's, which NumPy's functions dispatch)."""
    arrays = [a for a in arrays if a is not None]
    if all(isinstance(a, np.ndarray) or is_dask_array(a) for a in arrays):
        return np
    return compat().array_namespace(*arrays)


def _cast(a, dtype):
    """``a`` in the dtype ``dtype`` (a NumPy dtype), in its own namespace."""
    if isinstance(a, np.ndarray) or is_dask_array(a):
        return a.astype(dtype)
    xp = namespace(a)
    return xp.astype(a, getattr(xp, np.dtype(dtype).name))


def _f64(a):
    return _cast(a, np.float64)


# -- epsilon-scaling (GeomLoss's heuristic) ---------------------------------------


def max_diameter(x: np.ndarray, y: np.ndarray, space: Space = HOST) -> float:
    """The diagonal of the bounding box of both clouds: a bound on |x_i - y_j|
    (the (D,) corners copied to the host from a device)."""
    if space.on_device:
        xp = space.xp
        x_lo, x_hi, y_lo, y_hi = (space.host(r) for r in (
            xp.min(x, axis=0), xp.max(x, axis=0), xp.min(y, axis=0), xp.max(y, axis=0)))
    else:
        x_lo, x_hi, y_lo, y_hi = (to_numpy(r) for r in _compute(
            x.min(axis=0), x.max(axis=0), y.min(axis=0), y.max(axis=0)))
    lo = np.minimum(x_lo, y_lo).astype(np.float64)
    hi = np.maximum(x_hi, y_hi).astype(np.float64)
    return float(np.linalg.norm(hi - lo))


def epsilon_schedule(p: int, diameter: float, blur: float, scaling: float) -> list:
    """Temperatures from ``diameter^p`` down to ``blur^p``, ratio ``scaling^p``.

    Feydy's thesis, Section 3.3.3 (Fig. 3.25-26): the first temperature is of
    the order of the largest cost, then each step divides it by
    ``scaling^-p``; the last one is the target ``blur^p``.
    """
    logs = np.arange(p * np.log(diameter), p * np.log(blur), p * np.log(scaling))
    return [diameter**p] + [float(np.exp(e)) for e in logs] + [blur**p]


def damping(eps: float, rho: float | None) -> float:
    """rho / (rho + eps): the unbalanced (KL-penalised) update's factor, 1 if balanced."""
    return 1.0 if rho is None else 1.0 / (1.0 + eps / rho)


def log_weights(w: np.ndarray) -> np.ndarray:
    """log w, with LOG_ZERO for points of zero mass (in w's namespace)."""
    xp = namespace(w)
    if xp is np:
        out = np.full_like(w, LOG_ZERO)
        np.log(w, out=out, where=w > 0)
        return out
    pos = w > 0
    return xp.where(pos, xp.log(xp.where(pos, w, xp.ones_like(w))),
                    xp.full_like(w, LOG_ZERO))


# -- the kernel operation ------------------------------------------------------------


def cost_over_eps(p: int, u: LazyTensor, v: LazyTensor, eps: float) -> LazyTensor:
    """C(u, v) / eps = |u - v|^p / (p eps), symbolic.

    One multiplication per pair by a run-time parameter (``0.5 / eps``), so
    that every temperature runs the same compiled kernel.
    """
    if p == 2:
        return u.sqdist(v) * (0.5 / eps)
    return (u - v).norm2() * (1.0 / eps)


def cost_gradient(p: int, u: LazyTensor, v: LazyTensor) -> LazyTensor:
    """The gradient of C(u, v) in u: u - v for p = 2, (u - v) / |u - v| for p = 1."""
    return u - v if p == 2 else (u - v).normalize()


class CostMatrix(NamedTuple):
    """A cost "matrix" C(x_i, y_j), kept symbolic: the points and the exponent
    (or a user's ``cost(x_i, y_j)`` formula). ``x`` and ``y`` are the arrays
    the reductions read (NumPy or CuPy)."""

    x: np.ndarray
    y: np.ndarray
    x_i: LazyTensor
    y_j: LazyTensor
    p: int
    cost: Callable | None = None

    def over(self, eps: float) -> LazyTensor:
        """The formula C(x_i, y_j) / eps."""
        if self.cost is not None:
            return self.cost(self.x_i, self.y_j) * (1.0 / eps)
        return cost_over_eps(self.p, self.x_i, self.y_j, eps)

    def gradient(self) -> LazyTensor:
        """The formula grad_x C(x_i, y_j) (a user's cost: its symbolic derivative)."""
        if self.cost is not None:
            return self.cost(self.x_i, self.y_j).grad(self.x_i, 1.0)
        return cost_gradient(self.p, self.x_i, self.y_j)


def cost_matrix(p: int, x: np.ndarray, y: np.ndarray, cost=None,
                space: Space = HOST) -> CostMatrix:
    """The cost between the points ``x`` and ``y``, arrays of ``space``."""
    x, y = space.engine(x), space.engine(y)
    return CostMatrix(x, y, Vi(x), Vj(y), p, cost)


Softmin = Callable[[float, CostMatrix, np.ndarray], np.ndarray]


def _reduced(out, space: Space):
    """A reduction's output as an array of ``space`` (Dask: computed)."""
    return space.from_engine(out) if space.on_device else to_numpy(out)


def lse_softmin(backend, space: Space = HOST) -> Softmin:
    """The soft c-transform as a LogSumExp reduction over j.

    ``softmin(eps, C, h)[i] = -eps log sum_j exp(h_j - C(x_i, y_j) / eps)``; the
    float ``1 / eps`` is a run-time parameter of one compiled kernel. ``h``
    and the output are arrays of ``space`` (on a device: the reduction reads
    and writes device arrays).
    """

    def softmin(eps: float, C: CostMatrix, h: np.ndarray) -> np.ndarray:
        F = Vj(space.engine(h)) - C.over(eps)
        return -eps * _reduced(F.logsumexp(axis=1, backend=backend), space)[:, 0]

    return softmin


def softmin_gradient(eps: float, C: CostMatrix, h: np.ndarray, backend,
                     space: Space = HOST) -> np.ndarray:
    """The gradient in x_i of ``softmin(eps, C, h)[i]``, the y_j held fixed.

    ``sum_j w_ij grad_x C(x_i, y_j)`` with ``w_ij = softmax_j(h_j - C_ij / eps)``:
    one SumSoftMaxWeight reduction (for p = 2, x_i minus the barycentre of
    the y_j under the plan's row).
    """
    F = Vj(space.engine(h)) - C.over(eps)
    out = F.sumsoftmaxweight(C.gradient(), axis=1, backend=backend)
    return space.from_engine(out) if space.on_device else out


# -- the Sinkhorn loop (Feydy 2020, Algorithm 3.5) -----------------------------------


class Potentials(NamedTuple):
    """Dual potentials after the last extrapolation, and what produced them.

    ``f_ba`` (on x) and ``g_ab`` (on y) solve OT(a, b); ``f_aa`` and ``g_bb``
    the symmetric problems OT(a, a), OT(b, b) (None without debiasing). The
    ``h_*`` are the inputs of the last softmins (held fixed for gradients).
    """

    f_ba: np.ndarray
    g_ab: np.ndarray
    f_aa: np.ndarray | None
    g_bb: np.ndarray | None
    h_ba: np.ndarray
    h_ab: np.ndarray
    h_aa: np.ndarray | None
    h_bb: np.ndarray | None
    eps: float
    rho: float | None


def marginal_error(w: np.ndarray, f: np.ndarray, ft: np.ndarray, eps: float) -> float:
    """``sum_i w_i |exp((f_i - ft_i) / eps) - 1| / sum_i w_i``.

    With ``ft = softmin(eps, C, log b + g / eps)`` (balanced transport), it is
    the relative L1 error of the row marginal of the plan
    ``w_i b_j exp((f_i + g_j - C_ij) / eps)``; with damping, the residual of
    the fixed point ``f = damping * softmin(...)``.
    """
    xp = namespace(w, f, ft)
    d = (_f64(f) - _f64(ft)) / eps
    with np.errstate(over="ignore"):
        err = xp.abs(xp.expm1(d))
    w64 = _f64(w)
    return float(w64 @ err) / float(xp.sum(w64))


def sinkhorn_loop(
    *,
    softmin: Softmin,
    a_log: np.ndarray,
    b_log: np.ndarray,
    C_xy: CostMatrix,
    C_yx: CostMatrix,
    C_xx: CostMatrix | None,
    C_yy: CostMatrix | None,
    eps_list: list,
    rho: float | None,
    debias: bool,
    callback=None,
    a=None,
    init=None,
) -> Potentials:
    """Symmetric Sinkhorn with epsilon-scaling, then one extrapolation step.

    ``callback(step, eps, error)``, if given, is called after each update with
    the row-marginal error of the OT(a, b) plan (``a``, the masses, needed).
    ``init``: the potentials ``(f_ba, g_ab, f_aa, g_bb)`` to start from (a
    coarser scale's, extrapolated), instead of lines 1-2.
    """
    eps = eps_list[0]
    lam = damping(eps, rho)
    if init is not None:
        f_ba, g_ab, f_aa, g_bb = init
    else:
        # Lines 1-2: the coarsest temperature; initial potentials are softmins
        # of the log-weights (at eps ~ diameter^p, about a convolution).
        f_ba = lam * softmin(eps, C_xy, b_log)  # b -> a
        g_ab = lam * softmin(eps, C_yx, a_log)  # a -> b
        if debias:
            f_aa = lam * softmin(eps, C_xx, a_log)  # a -> a
            g_bb = lam * softmin(eps, C_yy, b_log)  # b -> b
    # Lines 4-5: epsilon-scaling descent.
    for step, eps in enumerate(eps_list):
        lam = damping(eps, rho)  # Line 6: the damping follows eps.
        # Line 7: "coordinate ascent" on the dual problems, symmetric updates
        # (thesis Section 3.3.3, Fig. 3.24.b): both Sinkhorn updates from the
        # current pair, then their averages.
        ft_ba = lam * softmin(eps, C_xy, b_log + g_ab / eps)
        gt_ab = lam * softmin(eps, C_yx, a_log + f_ba / eps)
        if debias:
            ft_aa = lam * softmin(eps, C_xx, a_log + f_aa / eps)
            gt_bb = lam * softmin(eps, C_yy, b_log + g_bb / eps)
        if callback is not None:
            callback(step, eps, marginal_error(a, f_ba, ft_ba, eps))
        f_ba, g_ab = 0.5 * (f_ba + ft_ba), 0.5 * (g_ab + gt_ab)
        if debias:
            f_aa, g_bb = 0.5 * (f_aa + ft_aa), 0.5 * (g_bb + gt_bb)
    # Last extrapolation: one plain Sinkhorn step from the converged inputs
    # h, held fixed; the gradients are those of these softmins in their
    # output points (envelope theorem, thesis Eq. 3.226-227).
    h_ba, h_ab = b_log + g_ab / eps, a_log + f_ba / eps
    f_ba, g_ab = lam * softmin(eps, C_xy, h_ba), lam * softmin(eps, C_yx, h_ab)
    h_aa = h_bb = f_aa_out = g_bb_out = None
    if debias:
        h_aa, h_bb = a_log + f_aa / eps, b_log + g_bb / eps
        f_aa_out, g_bb_out = (
            lam * softmin(eps, C_xx, h_aa),
            lam * softmin(eps, C_yy, h_bb),
        )
    return Potentials(f_ba, g_ab, f_aa_out, g_bb_out, h_ba, h_ab, h_aa, h_bb, eps, rho)


def sinkhorn_refine(
    *,
    softmin: Softmin,
    a_log,
    b_log,
    a,
    b,
    C_xy,
    C_yx,
    f,
    g,
    eps: float,
    rho,
    tol: float,
    max_iter: int,
    callback=None,
):
    """Over-relaxed Sinkhorn updates at the final temperature until converged.

    Each iteration updates ``f`` then ``g`` by ``u <- (1 - w) u + w T(v)``
    (T the damped soft c-transform), which measures both marginal errors of
    the pair ``(f_new, g_old)`` on the way: the columns from ``T(f_new)``,
    the rows from ``f_new - T(g_old) = (1 - w) (f_old - T(g_old))``. The
    relaxation ``w`` starts at 1 (plain Sinkhorn) and follows the observed
    convergence rate (successive over-relaxation, Young's relation; see
    Lehmann et al., "A note on overrelaxation in the Sinkhorn algorithm",
    Optim. Lett. 2022), capped at ``MAX_RELAXATION``, and falls back to 1 if
    the error grows. Returns ``(f, g, n_iter, error)``: the pair whose
    error, the larger of the two relative L1 marginal errors, was measured.
    """
    lam = damping(eps, rho)
    omega, errs = 1.0, []
    for it in range(1, max_iter + 1):
        ft = lam * softmin(eps, C_xy, b_log + g / eps)
        f_new = (1.0 - omega) * f + omega * ft
        gt = lam * softmin(eps, C_yx, a_log + f_new / eps)
        err = max(marginal_error(a, f_new, ft, eps), marginal_error(b, g, gt, eps))
        errs.append(err)
        if callback is not None:
            callback(it, eps, err)
        if err <= tol or it == max_iter:
            return f_new, g, it, err
        omega = _relaxation(omega, errs)
        f, g = f_new, (1.0 - omega) * g + omega * gt
    return f, g, 0, np.inf  # max_iter < 1


def rounding_floor(f: np.ndarray, g: np.ndarray, eps: float) -> float:
    """The marginal error below which rounding hides progress, in f's dtype.

    A relative rounding u of the potentials moves ``exp((f + g - C) / eps)``
    by about ``u (|f| + |g|) / eps``; the measured errors level off at 0.1 to
    0.16 times that bound (float32: about 1e-6 to 1e-5), so half of it is a
    tolerance that Sinkhorn iterations can reach. Negligible in float64.
    """
    xp = namespace(f, g)
    u = float(xp.finfo(f.dtype).eps)
    return 0.5 * u * float(xp.max(xp.abs(f)) + xp.max(xp.abs(g))) / eps


#: Largest over-relaxation factor: beyond about 1.9 the log-domain updates
#: can diverge.
MAX_RELAXATION = 1.8
_RATE_WINDOW = 10


def _relaxation(omega: float, errs: list) -> float:
    """The next relaxation factor, from the error history."""
    if not np.isfinite(errs[-1]) or errs[-1] > 10 * min(errs):
        return 1.0  # diverging: back to plain Sinkhorn
    n = len(errs)
    if n % _RATE_WINDOW or n < 2 * _RATE_WINDOW:
        return omega
    rate = float(errs[-1] / errs[-1 - _RATE_WINDOW]) ** (1 / _RATE_WINDOW)
    if not 0 < rate < 1:
        return omega
    # Young's relation (rate + w - 1)^2 = rate w^2 k links the rate at w to
    # the plain Sinkhorn rate k; the optimal w is 2 / (1 + sqrt(1 - k)).
    k = min((rate + omega - 1) ** 2 / (rate * omega**2), 0.9999)
    return max(omega, min(MAX_RELAXATION, 2 / (1 + float(np.sqrt(1 - k)))))


# -- values and gradients ----------------------------------------------------------


def ot_value(a: np.ndarray, b: np.ndarray, pot: Potentials, debias: bool) -> float:
    """S_eps (debias) or OT_eps from the potentials, accumulated in float64.

    Balanced: thesis Eq. 3.207 / 3.209. Unbalanced: Séjourné et al. 2019,
    Proposition 12, with GeomLoss's weight rho + eps / 2. The value is linear
    in the masses, its coefficients :func:`weight_gradients`.
    """
    da, db = weight_gradients(pot, debias)
    return float(_f64(a) @ da) + float(_f64(b) @ db)


def weight_gradients(pot: Potentials, debias: bool):
    """``(d value / d a, d value / d b)`` of :func:`ot_value`, the potentials
    held fixed (GeomLoss's autograd: the last extrapolation's inputs are
    detached), in float64."""

    v = _f64
    xp = namespace(pot.f_ba)
    rho = pot.rho
    if rho is None:
        if debias:
            return v(pot.f_ba) - v(pot.f_aa), v(pot.g_ab) - v(pot.g_bb)
        return v(pot.f_ba), v(pot.g_ab)
    w = rho + pot.eps / 2

    def e(arr):
        return xp.exp(-v(arr) / rho)

    if debias:
        return w * (e(pot.f_aa) - e(pot.f_ba)), w * (e(pot.g_bb) - e(pot.g_ab))
    return w * (1.0 - e(pot.f_ba)), w * (1.0 - e(pot.g_ab))


def _coefficient(pot: Potentials, f: np.ndarray) -> np.ndarray | float:
    """d value / d f_i per unit mass: 1, or (rho + eps/2) / rho exp(-f_i / rho)."""
    if pot.rho is None:
        return 1.0
    w = (pot.rho + pot.eps / 2) / pot.rho
    return w * namespace(f).exp(-_f64(f) / pot.rho)


def _gradient(w, f, h, C: CostMatrix, f_self, h_self, C_self, pot, backend, space):
    """Gradient of the value in the points of one measure (masses ``w``).

    ``w_i lam (c(f_i) grad f_i - c(f_self_i) grad f_self_i)``: each ``grad``
    is that of the last extrapolation's softmin, its input ``h`` held fixed.
    """
    lam = damping(pot.eps, pot.rho)
    xp = space.xp

    def term(f, h, C):
        g = _f64(softmin_gradient(pot.eps, C, h, backend, space))
        c = _coefficient(pot, f)
        return lam * (c if isinstance(c, float) else xp.reshape(c, (-1, 1))) * g

    grad = term(f, h, C)
    if f_self is not None:
        grad = grad - term(f_self, h_self, C_self)
    return _cast(xp.reshape(_f64(w), (-1, 1)) * grad, np.dtype(C.x.dtype))


def value_gradients(prob: Problem, pot: Potentials, costs, backend):
    """``(grad_x, grad_y)``: the gradients of :func:`ot_value` in the points,
    arrays of the problem's space."""
    sp = prob.space
    grad_x = _gradient(prob.a, pot.f_ba, pot.h_ba, costs.xy, pot.f_aa, pot.h_aa,
                       costs.xx, pot, backend, sp)
    grad_y = _gradient(prob.b, pot.g_ab, pot.h_ab, costs.yx, pot.g_bb, pot.h_bb,
                       costs.yy, pot, backend, sp)
    return grad_x, grad_y


# -- one solve ------------------------------------------------------------------------


class Costs(NamedTuple):
    """The symbolic cost matrices of a problem (xx and yy only when debiasing)."""

    xy: CostMatrix
    yx: CostMatrix
    xx: CostMatrix | None
    yy: CostMatrix | None


def cost_matrices(prob: Problem, debias: bool) -> Costs:
    x, y, p, c, sp = prob.x, prob.y, prob.p, prob.cost, prob.space
    return Costs(
        cost_matrix(p, x, y, c, sp),
        cost_matrix(p, y, x, c, sp),
        cost_matrix(p, x, x, c, sp) if debias else None,
        cost_matrix(p, y, y, c, sp) if debias else None,
    )


def solve(prob: Problem, *, debias: bool, backend, callback=None):
    """Annealed Sinkhorn on ``prob``: ``(potentials, cost matrices, softmin)``."""
    softmin = lse_softmin(backend, prob.space)
    costs = cost_matrices(prob, debias)
    pot = sinkhorn_loop(
        softmin=softmin,
        a_log=log_weights(prob.a),
        b_log=log_weights(prob.b),
        C_xy=costs.xy,
        C_yx=costs.yx,
        C_xx=costs.xx,
        C_yy=costs.yy,
        eps_list=prob.eps_list,
        rho=prob.rho,
        debias=debias,
        callback=callback,
        a=prob.a,
    )
    return pot, costs, softmin


def progress(caller: str, prob: Problem, verbose) -> Callable | None:
    """``verbose`` progress of a Sinkhorn solve: prints the temperature
    schedule now (and, on a device, its space) and returns the
    ``callback(step, eps, error)`` of the loops, which prints each step's
    marginal error and the seconds since the start; None when not
    ``verbose``."""
    if not verbose:
        return None
    where = f" (arrays on the device: {prob.space})" if prob.space.on_device else ""
    print(f"{caller}: epsilon-scaling over {len(prob.eps_list)} temperatures, "
          f"eps = {', '.join(f'{e:.3g}' for e in prob.eps_list)}{where}", flush=True)
    start = time.perf_counter()

    def report(step, eps, err):
        print(f"  step {step:4d}  eps={eps:.4g}  marginal error={err:.3e}  "
              f"({time.perf_counter() - start:.1f} s)", flush=True)

    return report
