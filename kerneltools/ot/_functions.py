"""The public optimal-transport functions (private module; public in
:mod:`kerneltools.ot`, whose docstring holds the conventions and the placement
of device arrays): each checks its arguments, places the data
(:mod:`kerneltools._utils._array_api`), builds the problem
(:mod:`._inputs`) and runs the solvers (:mod:`._multiscale`, :mod:`._solve`)."""

from __future__ import annotations

import time

import numpy as np

from .._utils._array_api import placement
from .._utils._param_validation import validate_arguments
from ..lazy import LazyTensor
from . import _large_blur as limit
from . import _multiscale as ms
from . import _sinkhorn as sk
from . import _solve as ts
from ._inputs import TRANSPORT_CONSTRAINTS, check_problem, inputs_in

__all__ = ["sinkhorn_divergence", "sinkhorn_potentials", "transport_plan"]


def sinkhorn_divergence(
    x,
    y,
    a=None,
    b=None,
    *,
    p=2,
    blur=0.05,
    reach=None,
    scaling=0.5,
    debias=True,
    return_grad=False,
    backend=None,
    multiscale=False,
    truncate=5.0,
    cluster_scale=None,
    verbose=False,
):
    r"""Sinkhorn divergence between two weighted point clouds, as GeomLoss.

    ``S(a, b) = OT(a, b) - OT(a, a) / 2 - OT(b, b) / 2`` (``debias=True``) or
    the entropic transport cost ``OT(a, b)`` (``debias=False``), where
    ``OT(a, b) = min_pi <pi, C> + eps KL(pi | a x b)`` (plus
    ``rho KL`` penalties on the marginals when ``reach`` is given), computed
    by GeomLoss's log-domain symmetric Sinkhorn loop with epsilon-scaling.
    The result equals ``geomloss.SamplesLoss("sinkhorn", p=p, blur=blur,
    reach=reach, scaling=scaling, debias=debias)(a, x, b, y)``.

    Parameters
    ----------
    x : array-like of shape (N, D)
        The points of the first measure.
    y : array-like of shape (M, D)
        The points of the second measure.
    a, b : array-like of shape (N,) and (M,), optional
        Non-negative masses of the points; uniform (``1 / N``, ``1 / M``) when
        omitted. Balanced transport (``reach=None``) needs equal total masses.
    p : {1, 2}, default=2
        The cost ``|x - y|^p / p``.
    blur : float > 0, default=0.05
        The final temperature is ``eps = blur^p``.
    reach : float > 0 or None, default=None
        Unbalanced transport with marginal penalty ``rho = reach^p``.
    scaling : float in (0, 1), default=0.5
        Ratio of successive blurs in the epsilon-scaling schedule, which runs
        from the diameter of the data down to ``blur``. As in GeomLoss, the
        schedule is not run to convergence: at 0.5 the value is typically
        within 2-5% of the converged divergence (measured on Gaussian clouds
        of 50-2,000 points), and further on small problems (up to a factor 2
        on 4 + 4 points in 1-D). Use 0.9-0.99 for the converged value, or
        :func:`sinkhorn_potentials` with ``tol`` to converge to a tolerance.
    debias : bool, default=True
        Subtract the self-transport terms (a divergence: 0 for equal measures).
    return_grad : bool, default=False
        Also return the gradients of the value in ``x`` and ``y``, from the
        dual potentials (envelope theorem), one extra reduction per potential.
    backend : {"auto", "cpu", "cuda", "numpy"} or None, default=None
        Where the reductions run; None: the configured backend
        (:func:`kerneltools.config_context`).
    multiscale : bool, default=False
        Coarse-to-fine Sinkhorn on block-sparse reductions (GeomLoss's
        ``backend="multiscale"``), for low dimensions (D <= 3): the
        temperatures above ``cluster_scale^p`` run on grid cells, the others
        on the points, restricted to the pairs of cells that the cells'
        potentials keep (see :mod:`kerneltools.ot._multiscale`).
    truncate : float > 0 or None, default=5.0
        Multiscale: a pair of cells is skipped when the plan's log-density
        bound over it is below ``-truncate`` (its pairs carry less than
        ``exp(-truncate) a_i b_j``); None: keep every pair (warm start only).
    cluster_scale : float > 0 or None, default=None
        Multiscale: the side of the grid cells; None: the diameter over
        ``sqrt(D) C^(1/D)``, C = 2,000 cells (GeomLoss's heuristic) up to
        1.2e5 points, then one cell per 60 points of the larger cloud, at
        most 20,000.
    verbose : bool, default=False
        Print the temperature schedule, then each annealing step's marginal
        error and the seconds elapsed (multiscale: also the cells and the
        share of blocks kept), and the value at the end.

    Returns
    -------
    value : float
        Accumulated in float64 (the reductions run in the inputs' dtype).
    grad_x, grad_y : ndarray of shape (N, D) and (M, D)
        Only with ``return_grad=True``, in the inputs' dtype, in ``x``'s
        namespace and on its device (see the module's docstring).

    Notes
    -----
    The reductions run in the points' dtype (``a`` and ``b`` are cast to it);
    integers become float64. The gradients are those of the last
    extrapolation step with its inputs held fixed, as GeomLoss' autograd
    computes them: exact at convergence (envelope theorem), first order
    only. For unbalanced transport they differentiate GeomLoss' value
    formula (weight ``rho + eps / 2``) as GeomLoss does. For p = 1 the
    gradient of ``|x - y|`` at ``x = y`` is taken as 0; GeomLoss' tensorized
    backend clamps such distances at 1e-4, its online backend does not (the
    values here equal the online ones).

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.ot import sinkhorn_divergence
    >>> rng = np.random.default_rng(0)
    >>> x = rng.random((200, 2))
    >>> t = np.array([0.3, 0.0])
    >>> round(sinkhorn_divergence(x, x + t, scaling=0.9), 3)  # |t|^2 / 2
    0.045
    """
    caller = "sinkhorn_divergence"
    validate_arguments(TRANSPORT_CONSTRAINTS, caller, p=p, blur=blur, reach=reach,
                       scaling=scaling, debias=debias, return_grad=return_grad,
                       backend=backend, multiscale=multiscale, truncate=truncate,
                       cluster_scale=cluster_scale, verbose=verbose)
    place = placement(x, backend=backend, who=caller)
    backend = place.backend
    prob = check_problem(*inputs_in(place, x, y, a, b), p=p, blur=blur, reach=reach,
                         scaling=scaling, caller=caller, space=place.space)
    dtype = place.space.np_dtype(prob.x)
    prob = limit.resolve_unbalanced(  # float64 where a large blur needs it
        prob, backend, lambda: check_problem(
            *inputs_in(place, x, y, a, b), p=p, blur=blur, reach=reach, scaling=scaling,
            caller=caller, space=place.space, dtype=np.float64), caller, reach)
    debias, return_grad = bool(debias), bool(return_grad)
    start = time.perf_counter()
    pot, costs, _ = ms.solve(prob, debias=debias, backend=backend,
                             multiscale=bool(multiscale), truncate=truncate,
                             cluster_scale=cluster_scale, verbose=bool(verbose),
                             callback=sk.progress(caller, prob, verbose))
    value = sk.ot_value(prob.a, prob.b, pot, debias)
    scale = limit.largest(pot.f_ba, pot.g_ab, pot.f_aa, pot.g_bb)
    if limit.regime(prob, backend, scale).value:  # blur dwarfs the costs
        value = limit.expansion(prob, debias, backend).value
    if return_grad:
        grad_x, grad_y = (place.to_output(sk._cast(g, dtype)) for g in
                          sk.value_gradients(prob, pot, costs, backend))
    if verbose:
        seconds = time.perf_counter() - start
        print(f"{caller}: {value:.6g} in {seconds:.1f} s", flush=True)
    return (value, grad_x, grad_y) if return_grad else value


def sinkhorn_potentials(
    x,
    y,
    a=None,
    b=None,
    *,
    p=2,
    blur=0.05,
    reach=None,
    scaling=0.5,
    tol=None,
    max_iter=1000,
    backend=None,
    verbose=False,
):
    """Dual potentials ``(f, g)`` of the entropic transport ``OT(a, b)``.

    With ``tol=None`` they are GeomLoss's (``SamplesLoss("sinkhorn", ...,
    debias=False, potentials=True)``): the fixed epsilon-scaling schedule and
    its last extrapolation. With a float ``tol``, (over-relaxed) Sinkhorn
    iterations continue at the final temperature until the plan's relative
    L1 marginal error is at most ``tol`` (a
    :class:`~kerneltools.ConvergenceWarning` after ``max_iter`` iterations
    otherwise). The plan is
    ``pi_ij = a_i b_j exp((f_i + g_j - C(x_i, y_j)) / eps)``; see
    :func:`transport_plan`.

    Parameters
    ----------
    x, y, a, b, p, blur, reach, scaling, backend, verbose
        As in :func:`sinkhorn_divergence` (``verbose``: the iterations at the
        final temperature too).
    tol : float > 0 or None, default=None
        Marginal error to reach at the final temperature, or None. In
        float32, the rounding of the potentials hides errors below about
        ``6e-8 (max |f| + max |g|) / eps`` (typically 1e-6 to 1e-5): ``tol``
        is raised to that floor.
    max_iter : int >= 1, default=1000
        Most iterations at the final temperature (with ``tol``).

    Returns
    -------
    f, g : ndarray of shape (N,) and (M,)
        In the inputs' dtype, in ``x``'s namespace and on its device.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.ot import sinkhorn_potentials
    >>> x = np.random.default_rng(0).random((100, 2))
    >>> f, g = sinkhorn_potentials(x, x + 1.0, tol=1e-6)
    >>> f.shape, g.shape
    ((100,), (100,))
    """
    caller = "sinkhorn_potentials"
    validate_arguments(TRANSPORT_CONSTRAINTS, caller, p=p, blur=blur, reach=reach,
                       scaling=scaling, tol=tol, max_iter=max_iter, backend=backend,
                       verbose=verbose)
    place = placement(x, backend=backend, who=caller)
    prob = check_problem(*inputs_in(place, x, y, a, b), p=p, blur=blur, reach=reach,
                         scaling=scaling, caller=caller, space=place.space)
    f, g, *_ = ts.potentials(prob, tol, int(max_iter), place.backend, caller,
                             callback=sk.progress(caller, prob, verbose))
    return place.to_output(f), place.to_output(g)


def transport_plan(
    x,
    y,
    a=None,
    b=None,
    *,
    p=2,
    blur=0.05,
    reach=None,
    scaling=0.5,
    tol=1e-6,
    max_iter=1000,
    potentials=None,
    backend=None,
    verbose=False,
) -> LazyTensor:
    """The entropic transport plan between two point clouds, as a LazyTensor.

    ``pi_ij = a_i b_j exp((f_i + g_j - C(x_i, y_j)) / eps)``, symbolic: it is
    never materialised, and reduces like any formula (``P.sum(axis=1)`` are
    the row marginals, ``P @ y / a[:, None]`` the barycentric projection of
    the ``x_i``).

    Parameters
    ----------
    x, y, a, b, p, blur, reach, scaling, backend, verbose
        As in :func:`sinkhorn_divergence`.
    tol, max_iter
        As in :func:`sinkhorn_potentials`; by default the marginals are
        right to 1e-6 (relative L1 error).
    potentials : pair of arrays (f, g), optional
        Potentials already computed (by :func:`sinkhorn_potentials` on the
        same arguments); no Sinkhorn iteration then.

    Returns
    -------
    LazyTensor of shape (N, M, 1)
        On the arrays the reductions read: CuPy arrays for device inputs
        (its reductions give CuPy arrays), NumPy views for host Array API
        arrays.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.ot import transport_plan
    >>> rng = np.random.default_rng(0)
    >>> x, y = rng.random((100, 2)), rng.random((150, 2))
    >>> P = transport_plan(x, y)
    >>> bool(np.allclose(P.sum(axis=1)[:, 0], 1 / 100, rtol=1e-3))
    True
    >>> (P @ y).shape
    (100, 2)
    """
    caller = "transport_plan"
    validate_arguments(TRANSPORT_CONSTRAINTS, caller, p=p, blur=blur, reach=reach,
                       scaling=scaling, tol=tol, max_iter=max_iter, backend=backend,
                       verbose=verbose)
    place = placement(x, backend=backend, who=caller)
    prob = check_problem(*inputs_in(place, x, y, a, b), p=p, blur=blur, reach=reach,
                         scaling=scaling, caller=caller, space=place.space)
    if potentials is None:
        f, g, *_ = ts.potentials(prob, tol, int(max_iter), place.backend, caller,
                                 callback=sk.progress(caller, prob, verbose))
    else:
        f, g = ts.check_potentials(potentials, prob, caller, place.to_space)
    return ts.plan(prob.x, prob.y, prob.a, prob.b, f, g, prob.p, prob.eps, prob.space)
