"""Kernel density estimation: scikit-learn's ``KernelDensity`` on the engine.

The log density of a query ``x`` is

    log p(x) = log sum_j w_j K_h(d(x, y_j)) + log C(h, D) - log sum_j w_j

with ``C(h, D)`` the normalisation of the kernel in ``D`` dimensions (the
Euclidean one, whatever the metric, as scikit-learn's). scikit-learn sums
over a tree within ``atol``/``rtol``; here every pair is summed, in linear
memory, so that the result is scikit-learn's with ``atol = rtol = 0`` to
float rounding (by default; with ``atol`` or ``rtol`` set, a Gaussian
density in at most 3 features skips the pairs beyond a cutoff whose tail is
within them, each row certified: see the parameters).
scikit-learn's own "exact" default is exact only up to an absolute error of
about ``1e-16 * N * K(0)``, from its log-space differences of node bounds:
where the density is small against that (high dimension, or a point that
no compact kernel reaches) its relative error shows, e.g. ``2e-5`` in
D = 16 with N = 4,000 (``asv_bench/kde_compare.py`` reports it), or
``exp(-36)`` instead of 0. Ours is exact to rounding relative to the
density itself:

- ``gaussian`` and ``exponential``, whose kernels never vanish: a weighted
  ``logsumexp`` reduction of ``log K`` (``-d^2 / 2h^2``, ``-d / h``), stable
  in float32 and float64 for queries far from every point;
- the compact kernels (``tophat``, ``epanechnikov``, ``linear``, ``cosine``):
  a ``sum`` reduction of ``K`` itself, which is 0 outside ``d < h``, and its
  log (``-inf`` where no point lies within ``h``, as scikit-learn). In at
  most 3 features, for the Euclidean, Manhattan, Chebyshev and Minkowski
  metrics and from 2^24 query x point pairs, the reduction visits only the
  pairs of grid cells within ``h`` of each other (block-sparse, exact:
  :mod:`._compact`).

The gradient of the log density in the query points (the *score function*
of score-based methods) is :meth:`KernelDensity.log_density_gradient`,
the symbolic gradient of the same formula, reduced by the engine.
"""

from __future__ import annotations

import numbers
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from scipy.special import gammainc, gammaln
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import (
    check_array,
    check_is_fitted,
    check_non_negative,
    validate_data,
)

from ..config import check_backend
from ..lazy import LazyTensor, Pm, Vi, Vj
from .neighbors import _metrics as M
from ._shared import _compact
from ._shared._compact import compact_ranges, euclidean_radius
from ._shared._fallback import FallbackMixin, is_sparse
from .._utils._param_validation import Dtypes, Interval, StrOptions, validate_params

__all__ = ["KernelDensity", "log_kernel_norm", "VALID_KERNELS"]

#: scikit-learn's kernels, in its order.
VALID_KERNELS = ("gaussian", "tophat", "epanechnikov", "exponential", "linear",
                 "cosine")

#: The metrics of scikit-learn's trees (``KDTree`` and ``BallTree``), which
#: scikit-learn's KernelDensity accepts.
_TREE_METRICS = {
    "kd_tree": ("euclidean", "l2", "minkowski", "p", "manhattan", "cityblock",
                "l1", "chebyshev", "infinity"),
}
_TREE_METRICS["ball_tree"] = (*_TREE_METRICS["kd_tree"], "seuclidean",
                              "mahalanobis", "hamming", "canberra", "braycurtis",
                              "jaccard", "dice", "rogerstanimoto", "russellrao",
                              "sokalmichener", "sokalsneath", "haversine", "pyfunc")
#: The tree metrics whose distance is a formula here with scikit-learn's
#: (``DistanceMetric``'s) definition. The boolean ones, ``pyfunc`` and
#: seuclidean/mahalanobis without their ``V``/``VI`` go to scikit-learn.
_ENGINE_METRICS = frozenset(_TREE_METRICS["kd_tree"]) | {
    "haversine", "canberra", "braycurtis", "hamming", "seuclidean", "mahalanobis"}
_NEEDS = {"seuclidean": "V", "mahalanobis": "VI"}
_NO_PREPARE = M.Metric.__dataclass_fields__["prepare"].default
_LOG_PI, _LOG_2PI = np.log(np.pi), np.log(2 * np.pi)


def _log_vn(n: int) -> float:
    """Log volume of the unit ball of R^n: pi^(n/2) / Gamma(n/2 + 1)."""
    return 0.5 * n * _LOG_PI - gammaln(0.5 * n + 1)


def _log_sn(n: int) -> float:
    """Log surface of the unit sphere S^n (in R^(n+1)): 2 pi V_(n-1)."""
    return _LOG_2PI + _log_vn(n - 1)


def log_kernel_norm(h: float, d: int, kernel: str) -> float:
    """Log of the constant that makes ``K((x - y) / h)`` a density in R^d.

    Each is ``-log(integral of the unnormalised kernel over R^d)``: a Gaussian
    integral, the unit ball's volume ``V_d`` times the radial integral of the
    profile (``2 / (d + 2)`` for ``1 - t^2``, ``1 / (d + 1)`` for ``1 - t``),
    ``S_(d-1) Gamma(d)`` for ``exp(-t)``, and for ``cos(pi t / 2)`` the
    radial integral ``int_0^1 cos(pi t / 2) t^(d-1) dt`` by repeated
    integration by parts.

    That last series is scikit-learn's, kept for a drop-in (its own tests
    compare with it): it is exact in odd dimensions, but in even ones it
    misses the final boundary term, so that scikit-learn's (and our) cosine
    density integrates to ``1 - 2/pi = 0.363`` in 2-D instead of 1 (a
    constant factor: the shape, the maximum-likelihood bandwidth and the
    ranking of points are unaffected).

    Parameters
    ----------
    h : float
        The bandwidth.
    d : int
        The number of features.
    kernel : str
        One of ``VALID_KERNELS`` ('gaussian', 'tophat', 'epanechnikov',
        'exponential', 'linear', 'cosine').

    Returns
    -------
    float
        ``-log`` of the integral of ``K(x / h)`` over R^d.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators.density import log_kernel_norm
    >>> c = log_kernel_norm(0.5, 1, "gaussian")  # h = 0.5: N(0, 0.25)'s constant
    >>> bool(np.isclose(c, -np.log(np.sqrt(2 * np.pi) * 0.5)))
    True
    >>> bool(np.isclose(log_kernel_norm(1.0, 2, "tophat"), -np.log(np.pi)))  # unit disc
    True
    """
    if kernel == "gaussian":
        factor = 0.5 * d * _LOG_2PI
    elif kernel == "tophat":
        factor = _log_vn(d)
    elif kernel == "epanechnikov":
        factor = _log_vn(d) + np.log(2.0 / (d + 2.0))
    elif kernel == "exponential":
        factor = _log_sn(d - 1) + gammaln(d)
    elif kernel == "linear":
        factor = _log_vn(d) - np.log(d + 1.0)
    elif kernel == "cosine":
        # int_0^1 cos(pi t/2) t^(d-1) dt = sum over odd k of the terms below
        total, term = 0.0, 2.0 / np.pi
        for k in range(1, d + 1, 2):
            total += term
            term *= -(d - k) * (d - k - 1) * (2.0 / np.pi) ** 2
        factor = np.log(total) + _log_sn(d - 1)
    else:
        raise ValueError(f"kernel must be one of {VALID_KERNELS}; got {kernel!r}")
    return float(-factor - d * np.log(h))


def _distance(name: str, metric: M.Metric, params: dict, x_i, y_j) -> LazyTensor:
    """The distance ``d(x_i, y_j)`` as a formula, from the metric's rdist."""
    r = metric.rdist(x_i, y_j)
    if name in ("euclidean", "seuclidean", "mahalanobis"):
        return r.sqrt()
    if name == "minkowski":
        return r ** (1.0 / float(params["p"]))
    if name == "haversine":
        return 2 * r.sqrt().asin()
    return r  # manhattan, chebyshev, canberra, braycurtis, hamming: rdist = dist


def _kernel_formula(kernel: str, dist, sqdist, inv_h: LazyTensor) -> LazyTensor:
    """``log K`` (gaussian, exponential) or ``K`` (the compact kernels).

    ``dist`` is the distance formula; ``sqdist`` (its square, or None)
    spares the Gaussian a square root. The compact kernels are 0 where
    ``d >= h`` (scikit-learn's strict ``d < h``) through the mask
    ``1 - step(t - 1)``.
    """
    if kernel == "gaussian":
        if sqdist is not None:
            return -0.5 * sqdist * inv_h.square()
        return -0.5 * (dist * inv_h).square()
    t = dist * inv_h
    if kernel == "exponential":
        return -t
    inside = 1 - (t - 1).step()
    if kernel == "tophat":
        return inside
    if kernel == "epanechnikov":
        return inside * (1 - t.square())
    if kernel == "linear":
        return inside * (1 - t)
    return inside * (0.5 * np.pi * t).cos()  # cosine


def _check_sample_weight(sample_weight, n: int) -> np.ndarray | None:
    """scikit-learn's checks and messages for ``sample_weight`` (float64)."""
    if sample_weight is None:
        return None
    if isinstance(sample_weight, numbers.Number):
        w = np.full(n, float(sample_weight))
    else:
        w = check_array(sample_weight, ensure_2d=False, dtype=np.float64, order="C",
                        input_name="sample_weight")
        if w.ndim != 1:
            raise ValueError(
                f"Sample weights must be 1D array or scalar, got {w.ndim}D array. "
                f"Expected either a scalar value or a 1D array of length {n}.")
        if w.shape != (n,):
            raise ValueError(f"sample_weight.shape == {w.shape}, expected {(n,)}!")
    if np.all(w == 0):
        raise ValueError("Sample weights must contain at least one non-zero number.")
    check_non_negative(w, "`sample_weight`")
    return w


class KernelDensity(FallbackMixin, BaseEstimator):
    """Kernel density estimation, exact, in linear memory.

    A drop-in for scikit-learn's ``KernelDensity``: same parameters,
    attributes, results (those of scikit-learn with ``atol = rtol = 0``) and
    errors; every query-point pair is reduced by the engine, so that no tree
    is built and no tolerance is needed.

    Parameters
    ----------
    bandwidth : float or {"scott", "silverman"}, default=1.0
        The bandwidth ``h``, or the rule that gives it from the data:
        Scott's ``n^(-1/(D+4))``, Silverman's ``(n (D+2) / 4)^(-1/(D+4))``.
    algorithm : {'kd_tree', 'ball_tree', 'auto'}, default='auto'
        Accepted for compatibility (there is no tree); 'kd_tree' refuses the
        metrics scikit-learn's KDTree refuses, as scikit-learn does.
    kernel : {'gaussian', 'tophat', 'epanechnikov', 'exponential', 'linear', \
'cosine'}, default='gaussian'
        The kernel, of ``t = d / h``: ``exp(-t^2/2)``, ``1``, ``1 - t^2``,
        ``exp(-t)``, ``1 - t``, ``cos(pi t / 2)``, the compact ones 0 for
        ``t >= 1``.
    metric : str, default='euclidean'
        The distance. 'euclidean' ('l2'), 'manhattan' ('cityblock', 'l1'),
        'chebyshev' ('infinity'), 'minkowski' ('p', with ``metric_params``
        ``p`` and ``w``), 'haversine', 'canberra', 'braycurtis', 'hamming',
        'seuclidean' (``V``) and 'mahalanobis' (``VI``) run on the engine;
        the other metrics of scikit-learn's BallTree ('jaccard', ...,
        'pyfunc') are handed to scikit-learn. As in scikit-learn, the density
        is normalised for the Euclidean distance only (and the cosine
        kernel's normalisation is scikit-learn's, off by a constant factor
        in even dimensions: see :func:`log_kernel_norm`).
    atol, rtol : float, default=0
        Tolerances on the density, as scikit-learn's: the result ``p_est``
        satisfies ``|p_est - p| <= atol + rtol * p``. 0 (the default): exact,
        every pair. Set, with the Gaussian kernel and the Euclidean metric
        in at most 3 features, the sum skips the pairs farther than a cutoff
        where the dropped tail is within the tolerance (each row certified,
        the others summed exactly); otherwise the result is exact, which
        satisfies them a fortiori.
    breadth_first : bool, default=True
        Accepted for compatibility, unused.
    leaf_size : int, default=40
        Accepted for compatibility, unused.
    metric_params : dict, default=None
        Parameters of the metric (``p``, ``w``, ``V``, ``VI``).
    backend : {'auto', 'cpu', 'cuda', 'numpy'} or None, default=None
        Where the reductions run; None: the configured backend.
    dtype : {'float32', 'float64'} or None, default=None
        Precision of the reductions; None: float64, as scikit-learn
        (float32 is faster on GPUs; the log-sum-exp stays stable).
    verbose : int, default=0
        Whether to say which path (engine or scikit-learn) ran.

    Attributes
    ----------
    bandwidth_ : float
        The bandwidth used.
    n_features_in_ : int
        Number of features seen during :meth:`fit`.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features, when X had string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators import KernelDensity
    >>> rng = np.random.RandomState(42)
    >>> X = rng.random_sample((100, 3))
    >>> kde = KernelDensity(kernel='gaussian', bandwidth=0.5).fit(X)
    >>> kde.score_samples(X[:3]).round(6)
    array([-1.529559, -1.51462 , -1.602447])
    """

    _sklearn_class = "sklearn.neighbors.KernelDensity"
    _parameter_constraints: ClassVar[dict] = {
        "bandwidth": [Interval(Real, 0, None, closed="neither"),
                      StrOptions({"scott", "silverman"})],
        "algorithm": [StrOptions({"kd_tree", "ball_tree", "auto"})],
        "kernel": [StrOptions(set(VALID_KERNELS))],
        "metric": [StrOptions(set(_TREE_METRICS["ball_tree"]))],
        "atol": [Interval(Real, 0, None, closed="left")],
        "rtol": [Interval(Real, 0, None, closed="left")],
        "breadth_first": ["boolean"],
        "leaf_size": [Interval(Integral, 1, None, closed="left")],
        "metric_params": [None, dict],
        "backend": ["backend"],
        "dtype": [Dtypes(("float32", "float64")), None],
        "verbose": ["verbose"],
    }

    def __init__(self, *, bandwidth=1.0, algorithm="auto", kernel="gaussian",
                 metric="euclidean", atol=0, rtol=0, breadth_first=True, leaf_size=40,
                 metric_params=None, backend=None, dtype=None, verbose=0):
        self.bandwidth = bandwidth
        self.algorithm = algorithm
        self.kernel = kernel
        self.metric = metric
        self.atol = atol
        self.rtol = rtol
        self.breadth_first = breadth_first
        self.leaf_size = leaf_size
        self.metric_params = metric_params
        self.backend = backend
        self.dtype = dtype
        self.verbose = verbose

    def _engine_refuses(self, X, y=None):
        if is_sparse(X):
            return "sparse X"
        if self.metric not in _ENGINE_METRICS:
            return f"metric={self.metric!r}"
        need = _NEEDS.get(self.metric)
        if need and need not in (self.metric_params or {}):
            return f"metric={self.metric!r} without metric_params[{need!r}]"
        return None

    def fit(self, X, y=None, sample_weight=None):
        """Store the points (and their weights) of the density.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The points.
        y : None
            Ignored.
        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the points (not all zero).

        Returns
        -------
        self : KernelDensity
            The fitted estimator.
        """
        validate_params(self)
        if self.algorithm == "kd_tree" and self.metric not in _TREE_METRICS["kd_tree"]:
            raise ValueError(f"invalid metric for KDTree: '{self.metric}'")
        reason = self._engine_refuses(X)
        if reason:
            return self._fit_fallback(reason, X, y, sample_weight=sample_weight)
        self._drop_fallback()
        check_backend(self.backend, type(self).__name__)
        X = validate_data(self, X, order="C", dtype=np.float64)
        n, d = X.shape
        if self.bandwidth == "scott":
            self.bandwidth_ = n ** (-1 / (d + 4))
        elif self.bandwidth == "silverman":
            self.bandwidth_ = (n * (d + 2) / 4) ** (-1 / (d + 4))
        else:
            self.bandwidth_ = self.bandwidth
        self._sample_weight = _check_sample_weight(sample_weight, n)
        name = "minkowski" if self.metric == "p" else self.metric
        name, params = M.effective_metric(name, None, self.metric_params)
        M.check_metric_params(name, params, d)
        self._metric_name = M._CANONICAL[name] if isinstance(name, str) else name
        self._metric_params = params
        self._fit_X = X
        if self.verbose:
            print(f"kerneltools: KernelDensity: {n} points, kernel={self.kernel!r}, "
                  f"metric={self._metric_name!r} on the engine")
        return self

    # -- the formula -------------------------------------------------------------
    def _formula(self, X):
        """(X validated, metric, x_i, weights or None, the kernel's formula)."""
        check_is_fitted(self)
        X = validate_data(self, X, order="C", dtype=np.float64, reset=False)
        dtype = np.dtype(self.dtype or np.float64)
        name, params = self._metric_name, self._metric_params
        metric = M.make_metric(name, params)
        x_i = Vi(np.ascontiguousarray(metric.prepare(X), dtype=dtype))
        y_j = Vj(np.ascontiguousarray(metric.prepare(self._fit_X), dtype=dtype))
        w = self._sample_weight
        w = None if w is None else Vj(np.ascontiguousarray(w[:, None], dtype=dtype))
        inv_h = Pm(np.array([1.0 / self.bandwidth_], dtype=dtype))
        dist = _distance(name, metric, params, x_i, y_j)
        sq = metric.rdist(x_i, y_j) if name == "euclidean" else None
        return X, metric, x_i, w, _kernel_formula(self.kernel, dist, sq, inv_h)

    def _ranges(self, X):
        """Block-sparse ``ranges=`` of a compact kernel's sum, or None (dense)."""
        r = euclidean_radius(self._metric_name, self._metric_params, self.bandwidth_,
                             X.shape[1])
        bs = None if r is None else compact_ranges(X, self._fit_X, r)
        if self.verbose and bs is not None:
            print(f"kerneltools: KernelDensity: block-sparse sum over the cell pairs "
                  f"within {r:.3g}")
        return bs

    def _log_total_weight(self) -> float:
        w = self._sample_weight
        return float(np.log(len(self._fit_X) if w is None else w.sum()))

    def score_samples(self, X):
        """The log density at each query point.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            The queries.

        Returns
        -------
        density : ndarray of shape (n_queries,)
            ``log p(x)``, normalised as a probability density (for the
            Euclidean metric); ``-inf`` where a compact kernel covers none of
            the points.
        """
        if self._delegating():
            return self.fallback_.score_samples(X)
        X, _, _, w, F = self._formula(X)
        norm = log_kernel_norm(self.bandwidth_, X.shape[1], self.kernel)
        if self.kernel in ("gaussian", "exponential"):
            out = self._gaussian_within_tolerance(X, w, F, norm)
            if out is None:
                out = F.logsumexp(axis=1, weight=w, backend=self.backend)
        else:
            s = (F * w if w is not None else F).sum(axis=1, backend=self.backend,
                                                    ranges=self._ranges(X))
            with np.errstate(divide="ignore"):
                out = np.log(np.asarray(s, dtype=np.float64))
        out = np.asarray(out, dtype=np.float64).ravel()
        return out + (norm - self._log_total_weight())

    def _gaussian_within_tolerance(self, X, w, F, log_c: float):
        """The Gaussian log-sums over the pairs within a cutoff R only, where
        the user set ``atol`` or ``rtol`` (Euclidean, low dimension, enough
        pairs; else None: every pair).

        A dropped pair is farther than R (:func:`compact_ranges` keeps every
        pair within it), so the dropped density is at most
        ``delta = C exp(-R^2 / 2h^2)`` (C the kernel's normalisation, the
        dropped weight at most the total) and the kept density ``p_kept <= p``.
        R is chosen so that ``delta = atol + rtol q``, q the 1st percentile
        of the exact density of 256 sampled queries; each row is then
        certified, ``delta <= atol + rtol p_kept`` (hence
        ``|p_kept - p| <= atol + rtol p``, scikit-learn's criterion), and
        the rows that fail are summed again over every pair.
        """
        atol, rtol = float(self.atol), float(self.rtol)
        n, m, d = len(X), len(self._fit_X), X.shape[1]
        if (self.kernel != "gaussian" or not (atol > 0 or rtol > 0)
                or self._metric_name != "euclidean" or d > _compact.PRUNE_MAX_DIM
                or n * m < _compact.PRUNE_MIN_PAIRS):
            return None
        const = log_c - self._log_total_weight()
        with np.errstate(divide="ignore"):
            log_atol, log_rtol = np.log(atol), np.log(rtol)
        pilot = np.random.default_rng(0).choice(n, size=min(n, 256), replace=False)
        lse = np.asarray(self._formula(X[pilot])[4].logsumexp(
            axis=1, weight=w, backend=self.backend), dtype=np.float64).ravel()
        log_q = float(np.percentile(lse + const, 1))
        two_h2 = 2.0 * self.bandwidth_**2
        # (1 + 1e-9): delta a hair below the tolerance, so that rounding does
        # not fail the certificate of every row when rtol = 0
        r2 = two_h2 * (log_c - np.logaddexp(log_atol, log_rtol + log_q)) * (1 + 1e-9)
        if not np.isfinite(r2) or r2 <= 0:
            return None
        # cells of side R / 4: the cut is ~6 bandwidths, the balls' cover is
        # tight (measured, 1e6 x 1e6 Gaussian, rtol=1e-4: 16% of the pairs
        # kept, against 44% with cells of side R)
        bs = compact_ranges(X, self._fit_X, float(np.sqrt(r2)), 4.0)
        if bs is None:
            return None
        lse = np.asarray(F.logsumexp(axis=1, weight=w, backend=self.backend, ranges=bs),
                         dtype=np.float64).ravel()
        log_delta = log_c - r2 / two_h2
        bad = np.flatnonzero(~(log_delta <= np.logaddexp(log_atol, log_rtol + lse + const)))
        if bad.size:
            lse[bad] = np.asarray(self._formula(X[bad])[4].logsumexp(
                axis=1, weight=w, backend=self.backend), dtype=np.float64).ravel()
        if self.verbose:
            print(f"kerneltools: KernelDensity: Gaussian tail cut at {np.sqrt(r2):.3g} "
                  f"(atol={atol:g}, rtol={rtol:g}); {bad.size} of {n} rows summed "
                  "again over every pair")
        return lse

    def log_density_gradient(self, X):
        """The gradient of the log density in the query points (score function).

        ``grad log p(x) = sum_j w_j grad K_h(x, y_j) / sum_j w_j K_h(x, y_j)``,
        the symbolic gradient of the kernel's formula, reduced by the
        engine: for the gaussian and exponential kernels a softmax-weighted
        sum, ``sum_j softmax_j(log K + log w) grad log K``, stable far from
        the points (for the Gaussian, ``(m(x) - x) / h^2`` with ``m`` the
        kernel-weighted mean); for the compact kernels, where the gradient is
        0 where no point is within ``h``, the ratio of two sums (NaN there).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            The queries.

        Returns
        -------
        grad : ndarray of shape (n_queries, n_features)
            ``d log p / d x`` at each query (float64).
        """
        if self._delegating():
            raise NotImplementedError(
                "log_density_gradient needs the engine; this fit went to "
                f"scikit-learn ({self.metric=!r} or sparse X)")
        X, metric, x_i, w, F = self._formula(X)
        if metric.prepare is not _NO_PREPARE:
            raise NotImplementedError(
                f"log_density_gradient: metric={self.metric!r} transforms the points "
                "before the formula; use a metric without that step (euclidean, "
                "manhattan, chebyshev, minkowski, seuclidean, canberra)")
        ones = Vi(np.ones((X.shape[0], 1), dtype=x_i.dtype))
        G = F.grad(x_i, ones)  # d F / d x_i: (n, 1, D)
        if self.kernel in ("gaussian", "exponential"):
            logits = F if w is None else F + w.log()
            out = logits.sumsoftmaxweight(G, axis=1, backend=self.backend)
        else:
            Kw = F if w is None else F * w
            Gw = G if w is None else G * w
            bs = self._ranges(X)
            num = Gw.sum(axis=1, backend=self.backend, ranges=bs)
            den = Kw.sum(axis=1, backend=self.backend, ranges=bs)
            with np.errstate(invalid="ignore", divide="ignore"):
                out = np.asarray(num, np.float64) / np.asarray(den, np.float64)
        return np.asarray(out, dtype=np.float64).reshape(X.shape)

    def score(self, X, y=None):
        """Total log density of the points of X.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            The points.
        y : None
            Ignored.

        Returns
        -------
        logprob : float
            ``sum log p(x)`` over X.
        """
        return np.sum(self.score_samples(X))

    def sample(self, n_samples=1, random_state=None):
        """Random points drawn from the density (gaussian and tophat kernels).

        The random stream is scikit-learn's: the same ``random_state`` gives
        the same points.

        Parameters
        ----------
        n_samples : int, default=1
            Number of points.
        random_state : int, RandomState instance or None, default=None
            Seed or generator.

        Returns
        -------
        X : ndarray of shape (n_samples, n_features)
            The points.
        """
        if self._delegating():
            return self.fallback_.sample(n_samples, random_state)
        check_is_fitted(self)
        if self.kernel not in ("gaussian", "tophat"):
            raise NotImplementedError()
        data = self._fit_X
        rng = check_random_state(random_state)
        u = rng.uniform(0, 1, size=n_samples)
        if self._sample_weight is None:
            i = (u * data.shape[0]).astype(np.int64)
        else:
            cumsum = np.cumsum(self._sample_weight)
            i = np.searchsorted(cumsum, u * cumsum[-1])
        if self.kernel == "gaussian":
            return np.atleast_2d(rng.normal(data[i], self.bandwidth_))
        # uniform in the ball: a Gaussian direction, its radius mapped through
        # the chi-square CDF to the uniform law of r^D
        dim = data.shape[1]
        Z = rng.normal(size=(n_samples, dim))
        s_sq = np.einsum("ij,ij->i", Z, Z)
        scale = gammainc(0.5 * dim, 0.5 * s_sq) ** (1.0 / dim) * self.bandwidth_
        return data[i] + Z * (scale / np.sqrt(s_sq))[:, None]
