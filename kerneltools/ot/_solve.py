"""The solves behind the optimal-transport functions and SinkhornTransport
(private): potentials (annealing, then refinement to a tolerance), the plan
as a LazyTensor, and the check of given potentials.

Every array here is one of the problem's
:class:`~kerneltools._utils._array_api.Space` (NumPy on the host, the device's
namespace for device inputs; see :mod:`._sinkhorn`); the LazyTensors are built
on the arrays the reductions read
(:meth:`~kerneltools._utils._array_api.Space.engine`: CuPy arrays for CuPy
inputs).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..exceptions import ConvergenceWarning
from ..lazy import LazyTensor, Vi, Vj
from . import _multiscale as ms
from . import _sinkhorn as sk
from .._utils._array_api import HOST, Space, host_array

__all__ = ["check_potentials", "plan", "potentials"]


def potentials(prob, tol, max_iter, backend, caller, callback=None, multiscale=None):
    """``(f, g, n_iter, error, tol reached for)``: annealing, then refinement.
    ``multiscale``: None (dense) or the keywords of :func:`._multiscale.solve`."""
    pot, costs, softmin = ms.solve(
        prob, debias=False, backend=backend, callback=callback, **(multiscale or {})
    )
    if tol is None:
        return pot.f_ba, pot.g_ab, 0, None, None
    # In float32 the potentials' rounding hides progress below a floor.
    target = max(tol, sk.rounding_floor(pot.f_ba, pot.g_ab, prob.eps))
    f, g, n_iter, err = sk.sinkhorn_refine(
        softmin=softmin,
        a_log=sk.log_weights(prob.a),
        b_log=sk.log_weights(prob.b),
        a=prob.a,
        b=prob.b,
        C_xy=costs.xy,
        C_yx=costs.yx,
        f=pot.f_ba,
        g=pot.g_ab,
        eps=prob.eps,
        rho=prob.rho,
        tol=target,
        max_iter=max_iter,
        callback=callback,
    )
    if not err <= target:
        dtype = prob.space.np_dtype(f)
        raised = (
            f" (raised from tol={tol:g} to the {dtype} rounding floor)"
            if target > tol
            else ""
        )
        warnings.warn(
            f"{caller}: the Sinkhorn iterations did not converge: marginal error "
            f"{err:.3g} > {target:.3g}{raised} after max_iter={max_iter} iterations "
            "at the final temperature. Increase max_iter or blur, or loosen tol",
            ConvergenceWarning,
            stacklevel=3,
        )
    return f, g, n_iter, err, target


def plan(x, y, a, b, f, g, p, eps, space: Space = HOST) -> LazyTensor:
    """``a_i b_j exp((f_i + g_j - C(x_i, y_j)) / eps)``, symbolic."""
    u = space.engine(sk.log_weights(a) + f / eps)
    v = space.engine(sk.log_weights(b) + g / eps)
    x, y = space.engine(x), space.engine(y)
    return (Vi(u) + Vj(v) - sk.cost_over_eps(p, Vi(x), Vj(y), eps)).exp()


def check_potentials(potentials, prob, caller, to_space=None):
    """The pair ``potentials`` as two vectors of the problem's space and
    dtype (``to_space``: moves an array there), checked against it."""
    try:
        f, g = potentials
    except (TypeError, ValueError):
        raise TypeError(f"{caller}: 'potentials' must be a pair (f, g)") from None
    sp = prob.space
    if sp.on_device:
        f, g = (sp.xp.reshape(sp.astype(to_space(v), sp.np_dtype(prob.x)), (-1,))
                for v in (f, g))
        finite = bool(sp.xp.all(sp.xp.isfinite(f)) and sp.xp.all(sp.xp.isfinite(g)))
    else:
        f = np.asarray(host_array(f), dtype=prob.x.dtype).reshape(-1)
        g = np.asarray(host_array(g), dtype=prob.x.dtype).reshape(-1)
        finite = bool(np.isfinite(f).all() and np.isfinite(g).all())
    shapes = [tuple(v.shape) for v in (prob.a, prob.b, f, g)]
    if shapes[2:] != shapes[:2]:
        raise ValueError(
            f"{caller}: 'potentials' must be (f, g) of shapes {shapes[0]} and "
            f"{shapes[1]}; got {shapes[2]} and {shapes[3]}"
        )
    if not finite:
        raise ValueError(f"{caller}: 'potentials' contain NaN or infinity")
    return f, g
