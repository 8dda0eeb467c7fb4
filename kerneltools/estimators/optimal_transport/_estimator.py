"""SinkhornTransport: entropic optimal transport as a scikit-learn transformer
(private; public in :mod:`kerneltools.estimators.optimal_transport`; the
solvers' conventions and the placement of device arrays are described in
:mod:`kerneltools.ot`)."""

from __future__ import annotations

from numbers import Real
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_array, check_is_fitted

from ...lazy import LazyTensor, Vi, Vj
from ...ot import _sinkhorn as sk
from ...ot import _solve as ts
from ..._utils._array_api import (
    HOST,
    DeviceCopies,
    check_same_place,
    fitted_placement,
    host_array,
    placement,
    validate_on_device,
)
from ..._utils._param_validation import Interval, validate_params
from ...ot._inputs import (
    TRANSPORT_CONSTRAINTS,
    check_points,
    check_problem,
    inputs_in,
)

try:
    from sklearn.utils.validation import validate_data
except ImportError:  # scikit-learn < 1.6

    def validate_data(estimator, X, **kwargs):
        return estimator._validate_data(X, **kwargs)


__all__ = ["SinkhornTransport"]


class SinkhornTransport(DeviceCopies, TransformerMixin, BaseEstimator,
                        auto_wrap_output_keys=None):
    """Entropic optimal transport between two samples, for domain adaptation.

    After POT's ``ot.da.SinkhornTransport``: ``fit(Xs, Xt=Xt)`` solves the
    entropic transport between the uniform measures on the source and target
    samples, with GeomLoss's epsilon-scaling from the diameter of the data
    down to ``blur``, then Sinkhorn iterations at the final temperature until
    the plan's relative L1 marginal error is at most ``tol``;
    ``transform(Xs)`` maps points by the barycentric mapping of the plan.
    Neither the cost matrix nor the plan is ever stored: ``coupling_`` is a
    :class:`~kerneltools.LazyTensor`.

    CuPy arrays (and, under scikit-learn's ``array_api_dispatch``, Array API
    arrays such as torch tensors) are fitted and transformed in their
    namespace, on their device (see :mod:`kerneltools.ot`); the fitted arrays are
    there too, and :meth:`transform` takes data in the namespace and on the
    device of the fit (``ValueError`` otherwise).

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
        in :func:`~kerneltools.ot.sinkhorn_divergence`.
    truncate : float > 0 or None, default=5.0
        Multiscale: the truncation of
        :func:`~kerneltools.ot.sinkhorn_divergence`.
    cluster_scale : float > 0 or None, default=None
        Multiscale: the side of the grid cells.

    Attributes
    ----------
    xs_, xt_ : ndarray of shape (N, D) and (M, D)
        The samples seen in ``fit``, in the computation's dtype. These four
        arrays and the potentials are in the namespace and on the device of
        ``Xs``.
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
        place = placement(Xs, backend=self.backend, who=caller)
        shape = None if y is None else getattr(y, "shape", None)
        if shape is None and y is not None:
            shape = np.asarray(y).shape
        if shape is not None and len(shape) == 2 and shape[1] > 1 and Xt is None:
            raise TypeError(
                f"{caller}: the second argument is scikit-learn's 'y' (ignored); "
                "pass the target samples by keyword: fit(Xs, Xt=Xt)"
            )
        self._drop_device_copies()
        tol, max_iter, sp = float(self.tol), int(self.max_iter), place.space
        if sp.on_device:
            Xs, _ = validate_on_device(self, place.to_space(Xs), reset=True, space=sp)
        else:
            Xs = validate_data(self, host_array(Xs), dtype=[np.float64, np.float32])
        Xt = Xs if Xt is None else _check_samples(*inputs_in(place, Xt), "Xt",
                                                  self.n_features_in_, caller, sp)
        prob = check_problem(Xs, Xt, None, None, p=self.p, blur=self.blur,
                             reach=self.reach, scaling=self.scaling, caller=caller,
                             names=("Xs", "Xt", "mu_s", "mu_t"), space=sp)
        f, g, n_iter, err, target = ts.potentials(
            prob,
            tol,
            max_iter,
            place.backend,
            caller,
            callback=sk.progress(caller, prob, self.verbose),
            multiscale=None if not self.multiscale else {
                "multiscale": True, "truncate": self.truncate,
                "cluster_scale": self.cluster_scale, "verbose": self.verbose},
        )
        fitted = dict(xs_=prob.x, xt_=prob.y, mu_s_=prob.a, mu_t_=prob.b,
                      potential_s_=f, potential_t_=g)
        for name, value in fitted.items():
            setattr(self, name, place.to_output(value))
        self._keep_device_copies(place, **fitted)
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
        ndarray of shape (n, D), in the dtype of ``Xs``, in its namespace
        and on its device.
        """
        return self._map("transform", Xs, "xt_", "mu_t_", "potential_t_")

    def inverse_transform(self, Xt, batch_size=None):
        """Barycentric mapping of target points onto the source samples.

        The mirror of :meth:`transform`, through the fitted potential ``f``.

        Parameters
        ----------
        Xt : array-like of shape (m, D)
            The target points to map.
        batch_size : ignored
            Accepted for compatibility with POT: memory is linear anyway.

        Returns
        -------
        ndarray of shape (m, D)
            The mapped points, in the dtype of ``Xt``, in its namespace and on
            its device.
        """
        return self._map("inverse_transform", Xt, "xs_", "mu_s_", "potential_s_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.array_api_support = True  # NumPy, Array API arrays and CuPy (see above)
        return tags

    def fit_transform(self, Xs, y=None, *, Xt=None, ys=None, yt=None):
        """``fit(Xs, Xt=Xt)``, then ``transform(Xs)``.

        Parameters
        ----------
        Xs : array-like of shape (N, D)
            Source samples.
        y : None
            Ignored, as in :meth:`fit` (a 2-D ``y`` there raises ``TypeError``).
        Xt : array-like of shape (M, D), optional
            Target samples (None: ``Xs`` itself, as in :meth:`fit`).
        ys, yt : ignored
            Accepted for compatibility with POT (labels are not used).

        Returns
        -------
        ndarray of shape (N, D)
            The mapped source samples, in the dtype of ``Xs``, in its namespace
            and on its device.
        """
        return self.fit(Xs, y, Xt=Xt).transform(Xs)

    def _map(self, method, X, *names):
        """The barycentric mapping of ``X`` (the input of ``method``) onto the
        fitted samples ``names[0]``, with their masses and potential: one
        SumSoftMaxWeight reduction, where the fit computed."""
        check_is_fitted(self)
        caller = f"{type(self).__name__}.{method}"
        fitted = fitted_placement(self, "xs_", who=caller)
        place = check_same_place(self, X, fitted, method)
        sp = place.space
        if method == "inverse_transform":
            X = _check_samples(*inputs_in(place, X), "Xt", self.n_features_in_,
                               caller, sp)
        elif sp.on_device:
            X, _ = validate_on_device(self, place.to_space(X), reset=False, space=sp)
        else:
            X = validate_data(self, host_array(X), reset=False,
                              dtype=[np.float64, np.float32])
        z, mu, potential = self._fitted_on(place, *names)
        eps, dt = self.epsilon_, sp.np_dtype(z)
        h = sk.log_weights(mu) + potential / eps
        Xc = sp.astype(X, dt) if sp.on_device else np.ascontiguousarray(X, dtype=dt)
        x_i, z_j = Vi(sp.engine(Xc)), Vj(sp.engine(z))
        F = Vj(sp.engine(h)) - sk.cost_over_eps(self.p, x_i, z_j, eps)
        out = F.sumsoftmaxweight(z_j, axis=1, backend=place.backend)
        if sp.on_device:
            return place.to_output(sp.astype(sp.from_engine(out), sp.np_dtype(X)))
        return place.to_output(out.astype(X.dtype, copy=False))

    @property
    def coupling_(self) -> LazyTensor:
        """The transport plan between ``xs_`` and ``xt_``, as a LazyTensor (N, M, 1)
        (on the arrays the reductions read: see :func:`transport_plan`)."""
        check_is_fitted(self)
        place = fitted_placement(self, "xs_", who=f"{type(self).__name__}.coupling_")
        arrays = self._fitted_on(place, "xs_", "xt_", "mu_s_", "mu_t_", "potential_s_",
                                 "potential_t_")
        return ts.plan(*arrays, self.p, self.epsilon_, place.space)


def _check_samples(X, name, n_features, caller, space=HOST):
    """``X`` checked as scikit-learn's ``check_array`` (on a device: by
    :func:`._transport_inputs.check_points`, integers made float64)."""
    if space.on_device:
        X = check_points(X, name, caller, space)
        if space.np_dtype(X).kind in "biu":
            X = space.astype(X, np.float64)
    else:
        X = check_array(X, dtype=[np.float64, np.float32], input_name=name)
    if X.shape[1] != n_features:
        raise ValueError(
            f"{caller}: '{name}' has {X.shape[1]} features, but the source 'Xs' "
            f"has {n_features}"
        )
    return X
