"""Entropic optimal transport: Sinkhorn divergences, plans and a transport estimator.

The definitions are GeomLoss's (``geomloss.SamplesLoss("sinkhorn", ...)``), so
that values and gradients can be compared: the cost is ``|x - y|^p / p``
(``|x - y|^2 / 2`` for p = 2), the temperature ``eps = blur^p``, and
``reach`` (``rho = reach^p``) turns on unbalanced transport with KL-penalised
marginals. Every step is a LogSumExp reduction over one of the point clouds:
the ``N x M`` cost matrix and plan are never stored, and the temperature is a
run-time parameter, so the whole epsilon-scaling schedule runs one compiled
kernel.

Conventions that differ between libraries:

- GeomLoss's p = 2 cost is ``|x - y|^2 / 2``; POT's ``"sqeuclidean"`` metric
  is ``|x - y|^2``, so POT's ``reg`` is ``2 blur^2`` for the same plan, and
  its costs are twice ours.
- GeomLoss (and :func:`sinkhorn_divergence`) runs a fixed schedule with no
  convergence test: with ``scaling=0.5`` the value is a few percent below the
  converged one. ``scaling`` closer to 1 trades time for accuracy.
  :class:`SinkhornTransport` and :func:`transport_plan` iterate further at the
  final temperature until the plan's marginals are right to ``tol``.
"""

from __future__ import annotations

import time
import warnings
from numbers import Real
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_array, check_is_fitted

from ..config import check_backend
from ..exceptions import ConvergenceWarning
from ..lazy import LazyTensor, Vi, Vj
from . import _multiscale as ms
from . import _sinkhorn as sk
from ._param_validation import Interval, validate_arguments, validate_params
from ._transport_inputs import TRANSPORT_CONSTRAINTS, check_problem

try:
    from sklearn.utils.validation import validate_data
except ImportError:  # scikit-learn < 1.6

    def validate_data(estimator, X, **kwargs):
        return estimator._validate_data(X, **kwargs)


__all__ = [
    "SinkhornTransport",
    "sinkhorn_divergence",
    "sinkhorn_potentials",
    "transport_plan",
]


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
        from the diameter of the data down to ``blur``.
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
        potentials keep (see :mod:`kerneltools.estimators._multiscale`).
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
        Only with ``return_grad=True``, in the inputs' dtype.

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
    >>> from kerneltools.estimators.optimal_transport import sinkhorn_divergence
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
    check_backend(backend, caller)
    prob = check_problem(
        x, y, a, b, p=p, blur=blur, reach=reach, scaling=scaling, caller=caller
    )
    debias, return_grad = bool(debias), bool(return_grad)
    start = time.perf_counter()
    pot, costs, _ = ms.solve(prob, debias=debias, backend=backend,
                             multiscale=bool(multiscale), truncate=truncate,
                             cluster_scale=cluster_scale, verbose=bool(verbose),
                             callback=sk.progress(caller, prob, verbose))
    value = sk.ot_value(prob.a, prob.b, pot, debias)
    if return_grad:
        grad_x, grad_y = sk.value_gradients(prob, pot, costs, backend)
    if verbose:
        print(f"{caller}: {value:.6g} in {time.perf_counter() - start:.1f} s", flush=True)
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
        In the inputs' dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators.optimal_transport import sinkhorn_potentials
    >>> x = np.random.default_rng(0).random((100, 2))
    >>> f, g = sinkhorn_potentials(x, x + 1.0, tol=1e-6)
    >>> f.shape, g.shape
    ((100,), (100,))
    """
    caller = "sinkhorn_potentials"
    validate_arguments(TRANSPORT_CONSTRAINTS, caller, p=p, blur=blur, reach=reach,
                       scaling=scaling, tol=tol, max_iter=max_iter, backend=backend,
                       verbose=verbose)
    check_backend(backend, caller)
    prob = check_problem(
        x, y, a, b, p=p, blur=blur, reach=reach, scaling=scaling, caller=caller
    )
    f, g, *_ = _potentials(prob, tol, int(max_iter), backend, caller,
                           callback=sk.progress(caller, prob, verbose))
    return f, g


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

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators.optimal_transport import transport_plan
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
    prob = check_problem(
        x, y, a, b, p=p, blur=blur, reach=reach, scaling=scaling, caller=caller
    )
    if potentials is None:
        f, g, *_ = _potentials(prob, tol, int(max_iter), backend, caller,
                               callback=sk.progress(caller, prob, verbose))
    else:
        f, g = _check_potentials(potentials, prob, caller)
    return _plan(prob.x, prob.y, prob.a, prob.b, f, g, prob.p, prob.eps)


def _potentials(prob, tol, max_iter, backend, caller, callback=None, multiscale=None):
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
        raised = (
            f" (raised from tol={tol:g} to the {f.dtype} rounding floor)"
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


def _plan(x, y, a, b, f, g, p, eps) -> LazyTensor:
    u = sk.log_weights(a) + f / eps
    v = sk.log_weights(b) + g / eps
    return (Vi(u) + Vj(v) - sk.cost_over_eps(p, Vi(x), Vj(y), eps)).exp()


def _check_potentials(potentials, prob, caller):
    try:
        f, g = potentials
    except (TypeError, ValueError):
        raise TypeError(f"{caller}: 'potentials' must be a pair (f, g)") from None
    f = np.asarray(f, dtype=prob.x.dtype).reshape(-1)
    g = np.asarray(g, dtype=prob.x.dtype).reshape(-1)
    if f.shape != prob.a.shape or g.shape != prob.b.shape:
        raise ValueError(
            f"{caller}: 'potentials' must be (f, g) of shapes {prob.a.shape} and "
            f"{prob.b.shape}; got {f.shape} and {g.shape}"
        )
    if not (np.isfinite(f).all() and np.isfinite(g).all()):
        raise ValueError(f"{caller}: 'potentials' contain NaN or infinity")
    return f, g


class SinkhornTransport(TransformerMixin, BaseEstimator, auto_wrap_output_keys=None):
    """Entropic optimal transport between two samples, for domain adaptation.

    After POT's ``ot.da.SinkhornTransport``: ``fit(Xs, Xt=Xt)`` solves the
    entropic transport between the uniform measures on the source and target
    samples, with GeomLoss's epsilon-scaling from the diameter of the data
    down to ``blur``, then Sinkhorn iterations at the final temperature until
    the plan's relative L1 marginal error is at most ``tol``;
    ``transform(Xs)`` maps points by the barycentric mapping of the plan.
    Neither the cost matrix nor the plan is ever stored: ``coupling_`` is a
    :class:`~kerneltools.LazyTensor`.

    Parameters
    ----------
    blur : float > 0, default=0.05
        The temperature is ``eps = blur^p``. POT's ``reg_e`` with its
        ``"sqeuclidean"`` metric (no 1/2) is ``2 blur^2`` for the same plan.
    p : {1, 2}, default=2
        The cost ``|x - y|^p / p``.
    scaling : float in (0, 1), default=0.5
        Ratio of successive blurs in the annealing schedule.
    reach : float > 0 or None, default=None
        Unbalanced transport with marginal penalty ``rho = reach^p``; ``tol``
        then bounds the residual of the damped fixed point.
    tol : float > 0, default=1e-6
        Relative L1 error of the plan's marginals at which to stop. In
        float32, the rounding of the potentials hides errors below about
        ``6e-8 (max |f| + max |g|) / eps`` (typically 1e-6 to 1e-5): ``tol``
        is raised to that floor.
    max_iter : int >= 1, default=1000
        Most Sinkhorn iterations at the final temperature.
    backend : {"auto", "cpu", "cuda", "numpy"} or None, default=None
        Where the reductions run; None: the configured backend
        (:func:`kerneltools.config_context`).
    verbose : bool, default=False
        Print the temperature schedule and the marginal error at each step.
    multiscale : bool, default=False
        Coarse-to-fine Sinkhorn on block-sparse reductions (D <= 3); the
        refinement at the final temperature then runs on the kept blocks. As
        in :func:`sinkhorn_divergence`.
    truncate : float > 0 or None, default=5.0
        Multiscale: the truncation of :func:`sinkhorn_divergence`.
    cluster_scale : float > 0 or None, default=None
        Multiscale: the side of the grid cells.

    Attributes
    ----------
    xs_, xt_ : ndarray of shape (N, D) and (M, D)
        The samples seen in ``fit``, in the computation's dtype.
    mu_s_, mu_t_ : ndarray of shape (N,) and (M,)
        Their (uniform) masses.
    potential_s_, potential_t_ : ndarray of shape (N,) and (M,)
        The dual potentials ``f`` and ``g``: the plan is
        ``mu_s_i mu_t_j exp((f_i + g_j - C(xs_i, xt_j)) / eps)``.
    epsilon_ : float
        The final temperature ``blur^p``.
    eps_schedule_ : list of float
        The temperatures of the annealing steps.
    n_iter_ : int
        Sinkhorn iterations at the final temperature, after the annealing.
    marginal_error_ : float
        The plan's relative L1 marginal error at the end.
    converged_ : bool
        Whether ``marginal_error_ <= tol`` (or the float32 floor).
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators.optimal_transport import SinkhornTransport
    >>> rng = np.random.default_rng(0)
    >>> Xs = rng.standard_normal((300, 2))
    >>> Xt = rng.standard_normal((200, 2)) + [3.0, 0.0]
    >>> ot = SinkhornTransport(blur=0.5).fit(Xs, Xt=Xt)
    >>> ot.converged_
    True
    >>> moved = ot.transform(Xs)  # the barycentric mapping keeps the target's mean
    >>> bool(np.allclose(moved.mean(axis=0), Xt.mean(axis=0)))
    True
    """

    _parameter_constraints: ClassVar[dict] = {
        **{name: TRANSPORT_CONSTRAINTS[name]
           for name in ("blur", "p", "scaling", "reach", "max_iter", "backend",
                        "verbose", "multiscale", "truncate", "cluster_scale")},
        "tol": [Interval(Real, 0, None, closed="neither")],  # None: no stopping rule
    }

    def __init__(
        self,
        blur=0.05,
        *,
        p=2,
        scaling=0.5,
        reach=None,
        tol=1e-6,
        max_iter=1000,
        backend=None,
        verbose=False,
        multiscale=False,
        truncate=5.0,
        cluster_scale=None,
    ):
        self.blur = blur
        self.p = p
        self.scaling = scaling
        self.reach = reach
        self.tol = tol
        self.max_iter = max_iter
        self.backend = backend
        self.verbose = verbose
        self.multiscale = multiscale
        self.truncate = truncate
        self.cluster_scale = cluster_scale

    def fit(self, Xs, y=None, *, Xt=None, ys=None, yt=None):
        """Solve the transport from the samples ``Xs`` to ``Xt``.

        Parameters
        ----------
        Xs : array-like of shape (N, D)
            Source samples.
        y : None
            Ignored: scikit-learn's place for labels (``fit(X, y)``). The
            target is passed by keyword, ``fit(Xs, Xt=Xt)``; a 2-D second
            argument (the target passed by position) raises ``TypeError``.
        Xt : array-like of shape (M, D), optional
            Target samples. None: the target is ``Xs`` itself, and
            :meth:`transform` is the entropic barycentric smoothing of the
            sample at scale ``blur`` (what scikit-learn's generic checks fit).
        ys, yt : ignored
            Accepted for compatibility with POT (labels are not used).

        Returns
        -------
        self
        """
        caller = f"{type(self).__name__}.fit"
        validate_params(self)
        check_backend(self.backend, caller)
        shape = None if y is None else np.asarray(y).shape
        if shape is not None and len(shape) == 2 and shape[1] > 1 and Xt is None:
            raise TypeError(
                f"{caller}: the second argument is scikit-learn's 'y' (ignored); "
                "pass the target samples by keyword: fit(Xs, Xt=Xt)"
            )
        tol, max_iter = float(self.tol), int(self.max_iter)
        Xs = validate_data(self, Xs, dtype=[np.float64, np.float32])
        Xt = Xs if Xt is None else _check_samples(Xt, "Xt", self.n_features_in_, caller)
        prob = check_problem(
            Xs,
            Xt,
            None,
            None,
            p=self.p,
            blur=self.blur,
            reach=self.reach,
            scaling=self.scaling,
            caller=caller,
            names=("Xs", "Xt", "mu_s", "mu_t"),
        )
        f, g, n_iter, err, target = _potentials(
            prob,
            tol,
            max_iter,
            self.backend,
            caller,
            callback=sk.progress(caller, prob, self.verbose),
            multiscale=None if not self.multiscale else {
                "multiscale": True, "truncate": self.truncate,
                "cluster_scale": self.cluster_scale, "verbose": self.verbose},
        )
        self.xs_, self.xt_, self.mu_s_, self.mu_t_ = prob.x, prob.y, prob.a, prob.b
        self.potential_s_, self.potential_t_ = f, g
        self.epsilon_, self.eps_schedule_ = prob.eps, list(prob.eps_list)
        self.n_iter_, self.marginal_error_ = n_iter, err
        self.converged_ = bool(err <= target)
        return self

    def transform(self, Xs, batch_size=None):
        """Barycentric mapping of source points onto the target samples.

        ``T(x) = sum_j pi(x, xt_j) xt_j / sum_j pi(x, xt_j)``, where
        ``pi(x, .)`` is the plan's row at ``x`` through the fitted potential
        ``g`` (the same for the fitted samples and new points; ``f(x)``
        cancels out). One SumSoftMaxWeight reduction over the target.

        Parameters
        ----------
        Xs : array-like of shape (n, D)
        batch_size : ignored
            Accepted for compatibility with POT: memory is linear anyway.

        Returns
        -------
        ndarray of shape (n, D), in the dtype of ``Xs``.
        """
        check_is_fitted(self)
        X = validate_data(self, Xs, reset=False, dtype=[np.float64, np.float32])
        return self._map(X, self.xt_, self.mu_t_, self.potential_t_)

    def inverse_transform(self, Xt, batch_size=None):
        """Barycentric mapping of target points onto the source samples.

        The mirror of :meth:`transform`, through the fitted potential ``f``.
        """
        check_is_fitted(self)
        caller = f"{type(self).__name__}.inverse_transform"
        X = _check_samples(Xt, "Xt", self.n_features_in_, caller)
        return self._map(X, self.xs_, self.mu_s_, self.potential_s_)

    def fit_transform(self, Xs, y=None, *, Xt=None, ys=None, yt=None):
        """``fit(Xs, Xt=Xt)``, then ``transform(Xs)``."""
        return self.fit(Xs, y, Xt=Xt).transform(Xs)

    def _map(self, X, z, mu, potential):
        dt = self.xs_.dtype
        eps = self.epsilon_
        h = sk.log_weights(mu) + potential / eps
        x_i, z_j = Vi(np.ascontiguousarray(X, dtype=dt)), Vj(z)
        F = Vj(h) - sk.cost_over_eps(self.p, x_i, z_j, eps)
        out = F.sumsoftmaxweight(z_j, axis=1, backend=self.backend)
        return out.astype(X.dtype, copy=False)

    @property
    def coupling_(self) -> LazyTensor:
        """The transport plan between ``xs_`` and ``xt_``, as a LazyTensor (N, M, 1)."""
        check_is_fitted(self)
        return _plan(
            self.xs_,
            self.xt_,
            self.mu_s_,
            self.mu_t_,
            self.potential_s_,
            self.potential_t_,
            self.p,
            self.epsilon_,
        )


def _check_samples(X, name, n_features, caller):
    X = check_array(X, dtype=[np.float64, np.float32], input_name=name)
    if X.shape[1] != n_features:
        raise ValueError(
            f"{caller}: '{name}' has {X.shape[1]} features, but the source 'Xs' "
            f"has {n_features}"
        )
    return X
