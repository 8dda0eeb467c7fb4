"""Mean shift clustering: scikit-learn's ``MeanShift`` with every seed at once.

scikit-learn moves each seed alone, with one radius query per seed and per
iteration. Here one iteration moves every active seed at once: a single
reduction ``[K @ X, K @ 1]`` over all points (block-sparse over nearby grid
cells in at most 3 features), with ``K_sj = 1`` where
``|s - x_j| <= bandwidth`` (scikit-learn's flat kernel), so the new seeds
are ``(K @ X) / (K @ 1)`` (Comaniciu and Meer, PAMI 2002, eq. 20 with a
flat profile). ``kernel='gaussian'`` (ours) weighs the points by
``exp(-|s - x_j|^2 / 2 bandwidth^2)`` instead. In 16 features or more
on the CPU the flat kernel's sums come from the pruned BLAS tiles of
:class:`~._neighbors_blas.BlasSearch` (float32 products, the pairs near the
bandwidth tested in float64, tiles of far-apart leaves skipped): measured,
3e4 blobs in D = 32, bandwidth 8, 27 CPU s on the engine's dense sums
against 4.4 s. Seeds that meet move as one. The stopping rule,
intensities, merging of near-duplicate centres and labels are
scikit-learn's, step by step, so that labels and centres agree with it.
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils import check_array, check_random_state, gen_batches
from sklearn.utils.validation import check_is_fitted, validate_data

from ..config import check_backend
from ..lazy import Pm, Vi, Vj
from ._shared._compact import compact_ranges
from ._shared._fallback import FallbackMixin, is_sparse
from .neighbors.search._blas import BlasSearch
from .neighbors._metrics import make_metric
from .._utils._param_validation import (
    Interval,
    StrOptions,
    validate_arguments,
    validate_params,
)
from .neighbors import NearestNeighbors

__all__ = ["MeanShift", "estimate_bandwidth", "get_bin_seeds"]

#: The flat kernel's distance, for the BLAS tiles of many features.
_EUCLIDEAN = make_metric("euclidean", {})

_ESTIMATE_CONSTRAINTS = {
    "quantile": [Interval(Real, 0, 1, closed="both")],
    "n_samples": [Interval(Integral, 1, None, closed="left"), None],
    "random_state": ["random_state"],
    "n_jobs": [Integral, None],
}


def estimate_bandwidth(X, *, quantile=0.3, n_samples=None, random_state=0,
                       n_jobs=None, backend=None):
    """A bandwidth for mean shift: the mean distance to the k-th neighbour.

    As scikit-learn's: ``k = int(n * quantile)`` (at least 1), the mean over
    the points (or ``n_samples`` of them drawn at random) of the distance to
    their k-th nearest neighbour (themselves included), on our
    :class:`~kerneltools.estimators.NearestNeighbors`.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        The points.
    quantile : float in [0, 1], default=0.3
        Share of the points within the neighbourhood.
    n_samples : int, default=None
        Number of points to use (all by default).
    random_state : int, RandomState instance or None, default=0
        Draw of those points.
    n_jobs : int, default=None
        Accepted for compatibility.
    backend : {'auto', 'cpu', 'cuda', 'numpy'} or None, default=None
        Where the reductions run.

    Returns
    -------
    bandwidth : float
        The estimate, in X's floating-point type.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.cluster import estimate_bandwidth as sklearn_estimate
    >>> from kerneltools.estimators.mean_shift import estimate_bandwidth
    >>> X = np.random.default_rng(0).normal(size=(60, 2))
    >>> round(float(estimate_bandwidth(X, quantile=0.2, backend="numpy")), 3)
    0.974
    >>> bool(np.isclose(estimate_bandwidth(X, quantile=0.2, backend="numpy"),
    ...                 sklearn_estimate(X, quantile=0.2)))
    True
    """
    validate_arguments(_ESTIMATE_CONSTRAINTS, "estimate_bandwidth",
                       quantile=quantile, n_samples=n_samples,
                       random_state=random_state, n_jobs=n_jobs)
    X = check_array(X)
    random_state = check_random_state(random_state)
    if n_samples is not None:
        X = X[random_state.permutation(X.shape[0])[:n_samples]]
    n_neighbors = max(1, int(X.shape[0] * quantile))
    # float64 distances, as scikit-learn's brute force gives for float32 X too
    nbrs = NearestNeighbors(n_neighbors=n_neighbors, backend=backend,
                            dtype="float64").fit(X)
    bandwidth = 0.0
    for batch in gen_batches(len(X), 500):  # scikit-learn's order of the sums
        d, _ = nbrs.kneighbors(X[batch, :], return_distance=True)
        bandwidth += np.max(d, axis=1).sum()
    return bandwidth / X.shape[0]


def get_bin_seeds(X, bin_size, min_bin_freq=1):
    """Seeds on a grid: the occupied cells of side ``bin_size`` (scikit-learn's).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        The points.
    bin_size : float
        Side of the cells; 0 gives X itself.
    min_bin_freq : int, default=1
        Cells with fewer points are dropped.

    Returns
    -------
    bin_seeds : ndarray of shape (n_seeds, n_features)
        Cell centres (float32, as scikit-learn's), in order of first
        occupation; X itself (with a warning) if every point has its own cell.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators.mean_shift import get_bin_seeds
    >>> X = np.array([[0.1, 0.2], [0.15, 0.1], [2.1, 1.9], [2.0, 2.2], [5.0, 5.0]])
    >>> get_bin_seeds(X, 1.0)
    array([[0., 0.],
           [2., 2.],
           [5., 5.]], dtype=float32)
    >>> get_bin_seeds(X, 1.0, min_bin_freq=2)  # the cell of (5, 5) has one point
    array([[0., 0.],
           [2., 2.]], dtype=float32)
    """
    if bin_size == 0:
        return X
    binned = np.round(X / bin_size)
    cells, first, counts = np.unique(binned, axis=0, return_index=True,
                                     return_counts=True)
    order = np.argsort(first, kind="stable")
    keep = order[counts[order] >= min_bin_freq]
    seeds = cells[keep].astype(np.float32)
    if len(seeds) == len(X):
        warnings.warn(f"Binning data failed with provided bin_size={bin_size:f}, "
                      "using data points as seeds.")
        return X
    return seeds * bin_size


#: Fewest features from which the distances of a step read the points as a
#: variable of their own (the sums ``K @ [x, 1]`` then take the C backend's
#: matrix-product route: measured, 4000 seeds x 3e4 blobs, D = 32, 1.4 CPU s
#: against 2.2-2.9 through ``[x, 1]``; at D = 3 dense, 11.5 against 10.4).
SEPARATE_MIN_DIM = 16


def _shift_step(means, X, XO_j, bandwidth, kernel, backend, tiles=None):
    """One mean-shift step of every seed: (new means, counts within bandwidth).

    ``XO_j``: the points with a column of ones, ``[x_j, 1]``. One reduction
    of ``w_sj [x_j, 1]`` over j; for the flat kernel,
    ``w_sj = step(bandwidth^2 - |s - x_j|^2)`` (``|s - x_j| <= bandwidth``),
    whose sum is also the count; in at most 3 features it visits only the
    grid-cell pairs within ``bandwidth`` (block-sparse, exact). ``tiles``
    (a :class:`~._neighbors_blas.BlasSearch` over X: the flat kernel in many
    features on the CPU): the sums from its pruned BLAS tiles instead.
    """
    if tiles is not None:
        thr = np.full(len(means), float(bandwidth) ** 2)
        out = tiles.radius_sums(np.ascontiguousarray(means, dtype=X.dtype), thr,
                                np.asarray(X, dtype=np.float64))
        if out is not None:
            sums, counts = out
            with np.errstate(invalid="ignore"):  # no point inside: the seed stops
                return sums / counts[:, None], counts
    dtype = XO_j.dtype
    s_i = Vi(np.ascontiguousarray(means, dtype=dtype))
    x_j = (Vj(np.ascontiguousarray(X, dtype=dtype)) if X.shape[1] >= SEPARATE_MIN_DIM
           else XO_j.extract(0, XO_j.dim - 1))
    d2 = s_i.sqdist(x_j)
    inside = (Pm(np.array([bandwidth * bandwidth], dtype=dtype)) - d2).step()
    if kernel == "flat" or bandwidth == 0:  # a Gaussian of width 0: equal points
        bs = compact_ranges(means, X, bandwidth)
        out = np.asarray((inside * XO_j).sum(axis=1, backend=backend, ranges=bs))
        counts = out[:, -1]
        with np.errstate(invalid="ignore"):  # no point inside: the seed stops
            return out[:, :-1] / counts[:, None], counts
    g = (-0.5 * d2 * Pm(np.array([1.0 / (bandwidth * bandwidth)], dtype=dtype))).exp()
    out = np.asarray((g * XO_j).sum(axis=1, backend=backend))
    counts = np.asarray(inside.sum(axis=1, backend=backend,
                                   ranges=compact_ranges(means, X, bandwidth))).ravel()
    return out[:, :-1] / out[:, -1:], counts


def shift_seeds(seeds, X, bandwidth, *, max_iter, kernel="flat", backend=None):
    """Move every seed to its mode, scikit-learn's stopping rule seed by seed.

    A seed stops when no point lies within ``bandwidth`` (it keeps its
    mean and a count of 0), or once its move is at most ``1e-3 *
    bandwidth``, or after ``max_iter`` iterations; its count is that of the
    neighbourhood its last mean was computed from.

    Returns
    -------
    means, counts, n_iter : the final seeds, their counts, and the largest
        number of completed iterations.
    """
    stop = 1e-3 * bandwidth
    means = np.array(seeds, dtype=X.dtype, copy=True)
    counts = np.zeros(len(means), dtype=np.int64)
    iters = np.zeros(len(means), dtype=np.int64)
    active = np.arange(len(means))
    XO_j = Vj(np.ascontiguousarray(np.hstack([X, np.ones((len(X), 1), X.dtype)])))
    tiles = None
    if kernel == "flat" and BlasSearch.is_usable_for(_EUCLIDEAN, X, backend):
        tiles = BlasSearch(_EUCLIDEAN, X, backend)
    while active.size:
        # seeds that met move as one from then on: each distinct mean once
        # (measured, blobs of 2e4 points, D = 3: after 5 iterations a quarter
        # of the active seeds are distinct)
        first, inv = _distinct_rows(means[active])
        new, cnt = _shift_step(means[active[first]], X, XO_j, bandwidth, kernel,
                               backend, tiles)
        new, cnt = new[inv], cnt[inv]
        cnt = np.rint(cnt).astype(np.int64)
        empty = cnt == 0
        new = new.astype(X.dtype, copy=False)
        moved = np.linalg.norm(new - means[active], axis=1)
        done = empty | (moved <= stop) | (iters[active] == max_iter)
        live = active[~empty]
        means[live], counts[active] = new[~empty], cnt
        iters[active[~done]] += 1
        active = active[~done]
    return means, counts, int(iters.max(initial=0))


#: Odd multipliers of the rows' hash in :func:`_distinct_rows`.
_HASH = np.random.default_rng(0).integers(1, 2**63, size=4096, dtype=np.uint64) | 1


def _distinct_rows(a: np.ndarray):
    """(first, inverse): ``a[first]`` are the distinct rows of ``a`` (bitwise),
    ``a == a[first][inverse]``; by a hash of each row's bits, checked (on a
    collision, every row is its own)."""
    n, d = a.shape
    if n < 2 or d > len(_HASH):
        return np.arange(n), np.arange(n)
    bits = np.ascontiguousarray(a).view(np.uint64 if a.itemsize == 8 else np.uint32)
    with np.errstate(over="ignore"):
        h = (bits.astype(np.uint64) * _HASH[:d]).sum(axis=1)
    _, first, inv = np.unique(h, return_index=True, return_inverse=True)
    inv = inv.ravel()
    if not np.array_equal(bits[first][inv], bits):
        return np.arange(n), np.arange(n)
    return first, inv


def _unique_centres(centres, bandwidth):
    """scikit-learn's greedy merge: in decreasing intensity, a centre removes
    the later ones within ``bandwidth`` of it (distances as our k-NN)."""
    n = len(centres)
    if n == 0:
        return np.ones(0, dtype=bool)
    nn = NearestNeighbors(radius=bandwidth).fit(centres)
    unique = np.ones(n, dtype=bool)
    for start in range(0, n, 1024):
        block = slice(start, min(start + 1024, n))
        neigh = nn.radius_neighbors(centres[block], return_distance=False)
        for i, idx in zip(range(block.start, block.stop), neigh):
            if unique[i]:
                unique[idx] = False
                unique[i] = True
    return unique


class MeanShift(FallbackMixin, ClusterMixin, BaseEstimator):
    """Mean shift clustering, every seed moved by one reduction per iteration.

    A drop-in for scikit-learn's ``MeanShift`` (same parameters,
    attributes, labels and centres); sparse X goes to scikit-learn.

    Parameters
    ----------
    bandwidth : float, default=None
        Radius of the flat kernel; None: :func:`estimate_bandwidth`.
    seeds : array-like of shape (n_seeds, n_features), default=None
        Starting points; None: X, or the grid of ``bin_seeding``.
    bin_seeding : bool, default=False
        Seeds on a grid of side ``bandwidth`` (:func:`get_bin_seeds`).
    min_bin_freq : int, default=1
        With ``bin_seeding``, cells with fewer points give no seed.
    cluster_all : bool, default=True
        Label every point with its nearest centre; False: points farther
        than ``bandwidth`` from every centre get -1.
    n_jobs : int, default=None
        Accepted for compatibility.
    max_iter : int, default=300
        Iterations per seed at most.
    kernel : {'flat', 'gaussian'}, default='flat'
        The weights of the points in the means: scikit-learn's flat kernel,
        or a Gaussian of standard deviation ``bandwidth`` (ours; the
        intensities are still the counts within ``bandwidth``).
    backend : {'auto', 'cpu', 'cuda', 'numpy'} or None, default=None
        Where the reductions run; None: the configured backend.
    verbose : int, default=0
        Whether to report the iterations.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (n_clusters, n_features)
        The modes, by decreasing intensity.
    labels_ : ndarray of shape (n_samples,)
        Cluster of each point.
    n_iter_ : int
        Largest number of iterations of a seed.
    n_features_in_ : int
        Number of features seen during :meth:`fit`.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features, when X had string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators import MeanShift
    >>> X = np.array([[1, 1], [2, 1], [1, 0], [4, 7], [3, 5], [3, 6]])
    >>> ms = MeanShift(bandwidth=2).fit(X)
    >>> ms.labels_
    array([1, 1, 1, 0, 0, 0])
    >>> ms.cluster_centers_.round(3)
    array([[3.333, 6.   ],
           [1.333, 0.667]])
    """

    _sklearn_class = "sklearn.cluster.MeanShift"
    _parameter_constraints: ClassVar[dict] = {
        "bandwidth": [Interval(Real, 0, None, closed="neither"), None],
        "seeds": ["array-like", None],
        "bin_seeding": ["boolean"],
        "min_bin_freq": [Interval(Integral, 1, None, closed="left")],
        "cluster_all": ["boolean"],
        "n_jobs": [Integral, None],
        "max_iter": [Interval(Integral, 0, None, closed="left")],
        "kernel": [StrOptions({"flat", "gaussian"})],
        "backend": ["backend"],
        "verbose": ["verbose"],
    }

    def __init__(self, *, bandwidth=None, seeds=None, bin_seeding=False,
                 min_bin_freq=1, cluster_all=True, n_jobs=None, max_iter=300,
                 kernel="flat", backend=None, verbose=0):
        self.bandwidth = bandwidth
        self.seeds = seeds
        self.bin_seeding = bin_seeding
        self.min_bin_freq = min_bin_freq
        self.cluster_all = cluster_all
        self.n_jobs = n_jobs
        self.max_iter = max_iter
        self.kernel = kernel
        self.backend = backend
        self.verbose = verbose

    def _engine_refuses(self, X, y=None):
        return "sparse X" if is_sparse(X) else None

    def fit(self, X, y=None):
        """Find the modes of X and label each point.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The points.
        y : None
            Ignored.

        Returns
        -------
        self : MeanShift
            The fitted estimator.
        """
        validate_params(self)
        reason = self._engine_refuses(X)
        if reason and self.kernel != "flat":
            raise TypeError(f"MeanShift: kernel={self.kernel!r} needs dense X, got "
                            f"{reason}; use X.toarray()")
        if reason:
            return self._fit_fallback(reason, X)
        self._drop_fallback()
        check_backend(self.backend, type(self).__name__)
        X = validate_data(self, X)
        Xf = X if X.dtype in (np.float32, np.float64) else X.astype(np.float64)
        bandwidth = self.bandwidth
        if bandwidth is None:
            bandwidth = estimate_bandwidth(X, n_jobs=self.n_jobs, backend=self.backend)
        seeds = self.seeds
        if seeds is None:
            seeds = get_bin_seeds(X, bandwidth, self.min_bin_freq) if \
                self.bin_seeding else X
        seeds = check_array(seeds, input_name="seeds")
        if seeds.shape[1] != X.shape[1]:
            raise ValueError(f"MeanShift: 'seeds' must have {X.shape[1]} features, as "
                             f"X; got shape {seeds.shape}")
        means, counts, self.n_iter_ = shift_seeds(
            seeds, Xf, bandwidth, max_iter=self.max_iter, kernel=self.kernel,
            backend=self.backend)
        if self.verbose:
            print(f"kerneltools: MeanShift: {len(seeds)} seeds, {self.n_iter_} "
                  "iterations at most, on the engine")
        intensity = {}
        for mean, count in zip(means, counts):  # equal means merge, as tuples
            if count:
                intensity[tuple(mean)] = int(count)
        if not intensity:
            raise ValueError(
                "No point was within bandwidth=%f of any seed. Try a different "
                "seeding strategy                              or increase the "
                "bandwidth." % bandwidth)
        ranked = sorted(intensity.items(), key=lambda t: (t[1], t[0]), reverse=True)
        centres = np.array([t[0] for t in ranked], dtype=Xf.dtype)
        centres = centres[_unique_centres(centres, bandwidth)]
        nn = NearestNeighbors(n_neighbors=1, backend=self.backend).fit(centres)
        dist, idx = nn.kneighbors(Xf)
        labels = idx.ravel().astype(int)
        if not self.cluster_all:
            labels = np.where(dist.ravel() <= bandwidth, labels, -1)
        self.cluster_centers_, self.labels_ = centres, labels
        return self

    def predict(self, X):
        """The cluster of each point: its nearest centre.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            The points.

        Returns
        -------
        labels : ndarray of shape (n_queries,)
            Index of the nearest centre (the first of equally near ones).
        """
        if self._delegating():
            return self.fallback_.predict(X)
        check_is_fitted(self)
        X = validate_data(self, X, reset=False)
        nn = NearestNeighbors(n_neighbors=1, backend=self.backend)
        nn.fit(self.cluster_centers_)
        return nn.kneighbors(X, return_distance=False).ravel().astype(np.intp)
