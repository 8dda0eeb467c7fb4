"""The balanced Sinkhorn divergence when the blur dwarfs the costs (private).

Why. The log-domain loop computes each potential as ``f_i = -eps
LSE_j(log b_j + (g_j - C_ij) / eps)``. When ``eps = blur^p`` is many times
the largest cost ``C_max``, the terms ``(g_j - C_ij) / eps`` are tiny next to
``log b_j`` and are rounded away: the potentials carry an absolute error of
about ``eps u (1 + max |log w|)`` (``u`` the dtype's unit roundoff), which
grows with ``eps`` while the divergence stays of the order of ``C_max``.
GeomLoss has the same loss of precision: at ``blur = 1e8`` (``p = 2``) both
returned 0 in float64, and the loop -7.5 in float32 where the divergence is
0.003 (-13 where it is 1.5).

What instead. For ``eps >> C_max`` the entropic plan is ``a x b (1 + h)``
with ``h = -C~ / eps + O(eps^-2)``, ``C~`` the cost doubly centred under
``a x b``, so that (expanding ``eps KL`` to second order)

    OT_eps(a, b) = <a x b, C> - |C~|^2_{a x b} / (2 eps) + O(C_max^3 / eps^2),
    |C~|^2_{a x b} = <a, C^2 b> - <a, (C b)^2> - <b, (C^T a)^2> + <a, C b>^2,

and ``S_eps = OT_eps(a, b) - OT_eps(a, a) / 2 - OT_eps(b, b) / 2``, whose
limit is ``1/2 |a - b|^2_{-C}`` (Feydy et al., AISTATS 2019, Theorem 1: the
energy distance for ``p = 1``, ``|mean(a) - mean(b)|^2 / 2`` for ``p = 2``).
Each term is one reduction of ``(C, C^2)`` against a weight vector, in
float64, never an ``N x M`` matrix. The masses are taken as normalised (the
formula is that of probability measures): the value's ``eps KL`` term turns
a mass gap ``delta`` (float32 weights summing to 1 +- 1e-7) into ``~ eps
delta``, which is rounding, not transport. Used by
:class:`~kerneltools.torch.SamplesLoss` and :func:`sinkhorn_divergence`.

When. With ``t = eps / C_max``, the loop's error is about ``t u L C_max``
(``L = 1 + max |log w|``) and the expansion's ``C_max / t^2``: the value is
the expansion's where ``t^3 u L >= 1`` (float64: ``t >~ 1e5``, the two
errors then below ``1e-10 C_max``; float32: ``t >~ 100``). The dual
potentials (``potentials=True``, and the gradients in the weights) are the
expansion's zeroth order ``f = C b - <a, C b> / 2`` (the loop's
normalisation ``<a, f> = <b, g>``) where its error ``C_max / t`` is the
smaller, ``t^2 u L >= 1``. The gradients in the points stay the loop's: they
do not carry the factor ``eps`` (softmax weights ``b_j (1 + O(1 / t))``,
exact to the dtype's rounding).

The Hausdorff divergence's softmins (no loop: one soft c-transform each)
lose the same precision, and take their cumulant expansion
(:func:`softmins`) under the same rule.

Unbalanced transport (``reach``) has no expansion here: its value carries
the same error ``~ t u L C_max``. Where that exceeds ``UNBALANCED_RTOL`` of
``C_max``, :func:`resolve_unbalanced` has the problem solved in float64 (float32 and
half inputs; :class:`SamplesLoss` and :func:`sinkhorn_divergence`), and
refuses it, naming ``blur`` and ``reach``, where float64 cannot resolve it
either (``t >~ 1e10``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from . import _sinkhorn as sk
from ..lazy import Vj

__all__ = ["UNBALANCED_RTOL", "Expansion", "Regime", "expansion", "largest", "regime",
           "resolve_unbalanced", "softmins", "unbalanced_rounding"]


class Regime(NamedTuple):
    """Which parts of a balanced solve come from the expansion."""

    value: bool  # the divergence (or OT_eps) from the first-order expansion
    potentials: bool  # the potentials and weight gradients from its zeroth order
    ratio: float  # t = eps / C_max


class Expansion(NamedTuple):
    """The large-eps expansion of a balanced problem (float64 arrays of the
    problem's space; ``f_aa``, ``g_bb`` None without debiasing)."""

    value: float
    f_ba: object
    g_ab: object
    f_aa: object
    g_bb: object


def _min_positive(w, xp) -> float:
    return float(xp.min(xp.where(w > 0, w, xp.ones_like(w))))


def cost_bound(prob: sk.Problem, backend) -> float:
    """``C_max``: ``diameter^p / p`` for ``|x - y|^p / p`` (the bounding box
    of the points, whatever diameter the user gave the schedule), or the
    largest ``|C|`` of a user's cost by Max reductions."""
    diameter = sk.max_diameter(prob.x, prob.y, prob.space)
    if prob.cost is None:
        return diameter**prob.p / prob.p
    sp = prob.space
    worst = 0.0
    for u, v in ((prob.x, prob.y), (prob.x, prob.x), (prob.y, prob.y)):
        C = sk.cost_matrix(prob.p, u, v, prob.cost, sp).over(1.0).abs()
        out = sk._reduced(C.max(axis=1, backend=backend), sp)
        worst = max(worst, float(sp.xp.max(sk._f64(out))))
    return worst


#: A user's cost is bounded by reductions only where the scale of the loop's
#: outputs puts ``t`` within this factor of a switch (see :func:`regime`).
HINT_MARGIN = 100.0


def _ratio_and_rounding(prob: sk.Problem, backend, scale=None) -> tuple[float, float]:
    """``(t, u L)``: ``t = eps / C_max`` and the loop's relative rounding per
    unit of ``t`` (module docstring). ``scale``: the largest output of the
    loop (potentials, softmins), about ``C_max`` where the loop resolves
    them and inflated by its rounding ``~ eps u L`` where it does not; with
    a user's cost, ``t`` is taken from it (no reductions) where it puts ``t``
    ``HINT_MARGIN`` times below every switch."""
    xp = prob.space.xp
    u = float(np.finfo(prob.space.np_dtype(prob.x)).eps)
    L = 1.0 - math.log(min(_min_positive(prob.a, xp), _min_positive(prob.b, xp)))
    if prob.cost is not None and scale is not None and scale > 0:
        t_hint = prob.eps / scale
        first_switch = min((u * L) ** (-1 / 3), UNBALANCED_RTOL / (u * L))
        if HINT_MARGIN * t_hint < first_switch:
            return t_hint, u * L
    c_max = cost_bound(prob, backend)
    t = math.inf if not c_max > 0 else prob.eps / c_max
    return t, u * L


def regime(prob: sk.Problem, backend, scale=None) -> Regime:
    """Where the loop's rounding exceeds the expansion's truncation
    (module docstring; ``scale``: see :func:`_ratio_and_rounding`).
    Balanced transport only."""
    if prob.rho is not None:
        return Regime(False, False, 0.0)
    t, uL = _ratio_and_rounding(prob, backend, scale)
    return Regime(t**3 * uL >= 1, t**2 * uL >= 1, t)


def largest(*arrays) -> float:
    """The largest magnitude in ``arrays`` (None skipped): a loop's scale."""
    out = 0.0
    for a in arrays:
        if a is not None:
            out = max(out, float(sk.namespace(a).max(sk.namespace(a).abs(sk._f64(a)))))
    return out


#: The relative error of the value above which an unbalanced solve is redone
#: in float64, or refused if float64 cannot resolve it either.
UNBALANCED_RTOL = 1e-5


def unbalanced_rounding(prob: sk.Problem, backend) -> tuple[float, float]:
    """``(t, error)``: the estimated relative rounding error ``t u L`` of the
    value of an unbalanced solve (no expansion here: the damped updates
    ``rho / (rho + eps)`` and the weight ``rho + eps / 2`` of the value
    carry the balanced loop's error ``~ eps u L`` into the value)."""
    t, uL = _ratio_and_rounding(prob, backend)
    return t, t * uL


def _moments(C: sk.CostMatrix, w, backend, sp):
    """``(C w, C^2 w)``: ``sum_j C_ij w_j`` and ``sum_j C_ij^2 w_j`` (float64),
    one reduction."""
    F = C.over(1.0)
    wj = Vj(sp.engine(sp.xp.reshape(w, (-1, 1))))
    out = sk._f64(sk._reduced((F.concat(F * F) * wj).sum(axis=1, backend=backend), sp))
    return out[:, 0], out[:, 1]


def _ot(a, b, Cb, C2b, Cta, eps):
    """``(OT_eps(a, b) to first order, f, g to zeroth order)`` from the moments."""
    m = float(a @ Cb)
    var = float(a @ C2b) - float(a @ (Cb * Cb)) - float(b @ (Cta * Cta)) + m * m
    return m - var / (2.0 * eps), Cb - 0.5 * m, Cta - 0.5 * m


def expansion(prob: sk.Problem, debias: bool, backend) -> Expansion:
    """The expansion of ``S_eps`` (``debias``) or ``OT_eps``, from four
    reductions of the costs (three without debiasing) on float64 copies of
    the points."""
    sp = prob.space
    x, y, a, b = (sk._f64(v) for v in (prob.x, prob.y, prob.a, prob.b))
    eps = prob.eps

    def cost(u, v):
        return sk.cost_matrix(prob.p, u, v, prob.cost, sp)

    Cb, C2b = _moments(cost(x, y), b, backend, sp)
    Cta, _ = _moments(cost(y, x), a, backend, sp)
    value, f_ba, g_ab = _ot(a, b, Cb, C2b, Cta, eps)
    if not debias:
        return Expansion(value, f_ba, g_ab, None, None)
    Ca, C2a = _moments(cost(x, x), a, backend, sp)
    Cb_y, C2b_y = _moments(cost(y, y), b, backend, sp)
    ot_aa, f_aa, _ = _ot(a, a, Ca, C2a, Ca, eps)
    ot_bb, g_bb, _ = _ot(b, b, Cb_y, C2b_y, Cb_y, eps)
    return Expansion(value - 0.5 * ot_aa - 0.5 * ot_bb, f_ba, g_ab, f_aa, g_bb)


def softmins(prob: sk.Problem, backend) -> dict:
    """The Hausdorff divergence's four softmins at large ``eps``, float64:
    ``-eps log sum_j w_j exp(-C_ij / eps) = <C_i, w> - Var_w(C_i) / (2 eps)
    + O(C_max^3 / eps^2)`` (the cumulant expansion; the masses taken as
    normalised, as the balanced expansion takes them), keyed ``"b_x"`` (x's
    softmin of b), ``"a_x"``, ``"a_y"``, ``"b_y"``."""
    sp = prob.space
    x, y, a, b = (sk._f64(v) for v in (prob.x, prob.y, prob.a, prob.b))
    out = {}
    for key, (u, v, w) in {"b_x": (x, y, b), "a_x": (x, x, a), "a_y": (y, x, a),
                           "b_y": (y, y, b)}.items():
        W = float(sp.xp.sum(w))
        Cw, C2w = _moments(sk.cost_matrix(prob.p, u, v, prob.cost, sp), w, backend, sp)
        mean = Cw / W
        out[key] = mean - (C2w / W - mean * mean) / (2.0 * prob.eps)
    return out


def resolve_unbalanced(prob: sk.Problem, backend, in_float64, who: str,
                       reach) -> sk.Problem:
    """``prob``, or ``in_float64()`` (the same problem in float64) where the
    unbalanced value needs float64 to be resolved (:func:`unbalanced_rounding`
    above ``UNBALANCED_RTOL``); a ``ValueError`` naming ``who``, ``blur`` and
    ``reach`` where float64 cannot resolve it either. Balanced: ``prob``."""
    if prob.rho is None:
        return prob
    t, err = unbalanced_rounding(prob, backend)
    if err > UNBALANCED_RTOL and prob.space.np_dtype(prob.x) != np.float64:
        prob = in_float64()
        t, err = unbalanced_rounding(prob, backend)
    if err > UNBALANCED_RTOL:
        raise ValueError(
            f"{who}: blur^p = {prob.eps:.3g} is {t:.3g} times the largest cost: the "
            f"unbalanced Sinkhorn loop (reach={reach!r}) cannot resolve it (relative "
            f"rounding ~{err:.1g} in float64); use a smaller 'blur' (the divergence "
            "changes little once blur dwarfs the costs) or reach=None")
    return prob
