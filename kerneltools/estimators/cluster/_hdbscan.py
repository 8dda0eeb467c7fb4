"""HDBSCAN (Campello et al. 2013) with the MST built on the engine.

scikit-learn's HDBSCAN computes the core distances with a tree and the
minimum spanning tree of mutual reachability with Prim's algorithm over
every pair (O(n^2) distance evaluations on one core). Here the core
distances and K nearest neighbours come from one K-min search of the k-NN
family, and the MST from Boruvka rounds pruned by those neighbours
(:mod:`._boruvka`). Mutual reachabilities tie (at core distances, on
any data once ``min_samples > 1``): then several MSTs exist, and the
single-linkage tree depends on the one scikit-learn's Prim's takes and on
its edges' order; that order is replayed on the tie-eligible edges
(:mod:`._prim`), with every weight in scikit-learn's float64 arithmetic.
Where exactly equal pair distances may lie beyond the neighbour lists
(lattice, duplicated or mirrored points) the fit is scikit-learn's own.
The n - 1 edges then go through our single-linkage and condensed trees
(:mod:`._condense`) and stability and selection (:mod:`._select`:
``eom``/``leaf``, ``cluster_selection_epsilon``, ``allow_single_cluster``,
``max_cluster_size``, ``probabilities_``), written to give scikit-learn's
labels, probabilities and tree (none of its private modules is imported:
they move between its releases). Everything after ``fit``
(``dbscan_clustering``, centres) is scikit-learn's class's, which this one
extends.
"""

from __future__ import annotations

import sys
import time
from numbers import Integral, Real
from typing import ClassVar
from warnings import catch_warnings, simplefilter, warn

import numpy as np
from sklearn.cluster import HDBSCAN as _SkHDBSCAN
from sklearn.neighbors import BallTree, KDTree
from sklearn.utils.validation import validate_data
from threadpoolctl import threadpool_limits

from ..._utils._param_validation import Interval, StrOptions, validate_arguments
from .._shared._fallback import is_sparse
from ..neighbors import NearestNeighbors
from ..neighbors import _metrics as M
from ._boruvka import MSTProblem, boruvka_mst
from ._condense import (
    MST_EDGE_DTYPE,
    condense_tree,
    remap_non_finite,
    single_linkage,
    stability,
)
from ._prim import core_distances, exact_prim_mst, pair_distances
from ._select import select_clusters, tree_labels

__all__ = ["HDBSCAN"]

#: Neighbours kept per point beyond ``min_samples`` to prune the rounds.
EXTRA_NEIGHBORS = 16
#: The metrics whose pair distances are written here (:func:`._prim.pair_distances`).
_ENGINE_METRICS = {"euclidean", "l2", "manhattan", "cityblock", "l1",
                   "chebyshev", "infinity", "minkowski"}
_ALIASES = {"l2": "euclidean", "l1": "manhattan", "cityblock": "manhattan",
            "infinity": "chebyshev"}
#: scikit-learn's constraints of the parameters that the engine's fits read
#: (the metric is one of ``_ENGINE_METRICS`` there; a ``copy`` of "warn"
#: is its default, hidden from the message).
_CONSTRAINTS = {
    "min_cluster_size": [Interval(Integral, 2, None, closed="left")],
    "min_samples": [Interval(Integral, 1, None, closed="left"), None],
    "cluster_selection_epsilon": [Interval(Real, 0, None, closed="left")],
    "max_cluster_size": [None, Interval(Integral, 1, None, closed="left")],
    "metric_params": [dict, None],
    "alpha": [Interval(Real, 0, None, closed="neither")],
    "algorithm": [StrOptions({"auto", "brute", "ball_tree", "kd_tree"})],
    "leaf_size": [Interval(Integral, 1, None, closed="left")],
    "n_jobs": [Integral, None],
    "cluster_selection_method": [StrOptions({"eom", "leaf"})],
    "allow_single_cluster": ["boolean"],
    "store_centers": [None, StrOptions({"centroid", "medoid", "both"})],
    "copy": ["boolean"],
}
_OUTLIER = {"infinite": (-2, 0.0), "missing": (-3, np.nan)}


_SUMMARY = """Hierarchical density-based clustering, the MST on the engine.

    scikit-learn's :class:`sklearn.cluster.HDBSCAN` (constructor, attributes,
    methods, labels), whose minimum spanning tree of mutual reachability is
    computed here by Boruvka rounds of masked ``min_argmin`` reductions,
    pruned by each point's nearest neighbours, in linear memory; the
    condensed tree and the cluster selection are ours, with scikit-learn's
    results. Its Parameters, Attributes, See Also, Notes
    and References follow, with two parameters of ours at the end of
    Parameters.

"""
_OWN_PARAMETERS = """    backend : {'auto', 'cpu', 'cuda', 'numpy'} or None, default=None
        Where the reductions run; None: the configured backend.

    verbose : int, default=0
        Print the Boruvka rounds (components left) and when a fit goes to
        scikit-learn's own HDBSCAN: sparse X, ``metric='precomputed'``,
        callables and metrics other than euclidean, manhattan, chebyshev and
        minkowski, and exactly tied pair distances (lattice, duplicated or
        mirrored points), whose tie order only scikit-learn's Prim's over
        all pairs decides.

"""
_EXAMPLES = """
    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators import HDBSCAN
    >>> X = np.array([[1, 2], [1.1, 2], [1, 2.1], [5, 5], [5.1, 5], [5, 5.2]])
    >>> HDBSCAN(min_cluster_size=3, copy=True).fit(X).labels_
    array([0, 0, 0, 1, 1, 1])
    """


def _docstring(theirs):
    """One numpydoc docstring: our summary, scikit-learn's sections with our
    parameters at the end of Parameters, our example (theirs is dropped: it
    imports scikit-learn's class)."""
    marks = ("    Parameters\n    ----------\n", "    Attributes\n    ----------\n")
    if not theirs or any(m not in theirs for m in marks):
        return _SUMMARY + "    Parameters\n    ----------\n" + _OWN_PARAMETERS + _EXAMPLES
    body = theirs[theirs.index(marks[0]):].split("    Examples\n    --------")[0]
    at = body.index(marks[1])
    return (_SUMMARY + body[:at].rstrip() + "\n\n" + _OWN_PARAMETERS + body[at:].rstrip()
            + "\n" + _EXAMPLES)


class HDBSCAN(_SkHDBSCAN):
    __doc__ = _docstring(_SkHDBSCAN.__doc__)

    _sklearn_class = "sklearn.cluster.HDBSCAN"
    _parameter_constraints: ClassVar[dict] = {
        **_SkHDBSCAN._parameter_constraints}
    _OWN: ClassVar[dict] = {"backend": ["backend"], "verbose": ["verbose"]}

    def __init__(self, min_cluster_size=5, min_samples=None,
                 cluster_selection_epsilon=0.0, max_cluster_size=None,
                 metric="euclidean", metric_params=None, alpha=1.0,
                 algorithm="auto", leaf_size=40, n_jobs=None,
                 cluster_selection_method="eom", allow_single_cluster=False,
                 store_centers=None, copy="warn", backend=None, verbose=0):
        super().__init__(
            min_cluster_size=min_cluster_size, min_samples=min_samples,
            cluster_selection_epsilon=cluster_selection_epsilon,
            max_cluster_size=max_cluster_size, metric=metric,
            metric_params=metric_params, alpha=alpha, algorithm=algorithm,
            leaf_size=leaf_size, n_jobs=n_jobs,
            cluster_selection_method=cluster_selection_method,
            allow_single_cluster=allow_single_cluster,
            store_centers=store_centers, copy=copy)
        self.backend = backend
        self.verbose = verbose

    def _engine_refuses(self, X):
        if is_sparse(X):
            return "sparse X"
        if not isinstance(self.metric, str):
            return "a callable metric"
        if self.metric not in _ENGINE_METRICS:
            return f"metric={self.metric!r}"
        return None

    def fit(self, X, y=None):
        """Find the clusters (scikit-learn's ``fit``, the MST on the engine).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The points (sparse X or distances with ``metric='precomputed'``:
            scikit-learn's HDBSCAN fits).
        y : None
            Ignored.

        Returns
        -------
        self : HDBSCAN
            The fitted estimator.
        """
        params = self.get_params(deep=False)
        validate_arguments(self._OWN, "HDBSCAN", backend=self.backend,
                           verbose=self.verbose)
        reason = self._engine_refuses(X)
        if reason:
            if self.verbose:
                print(f"kerneltools: HDBSCAN: {reason} is not served by the "
                      "engine; fitting scikit-learn's HDBSCAN", file=sys.stderr)
            return super().fit(X, y)
        validate_arguments(_CONSTRAINTS, "HDBSCAN", **{
            k: params[k] for k in _CONSTRAINTS
            if not (k == "copy" and isinstance(params[k], str) and params[k] == "warn")})
        return self._fit_engine(X)

    def _fit_engine(self, X):
        if self.copy == "warn":
            warn("The default value of `copy` will change from False to True in "
                 "1.10. Explicitly set a value for `copy` to silence this warning.",
                 FutureWarning)
        self._metric_params = self.metric_params or {}
        for algo, tree in (("kd_tree", KDTree), ("ball_tree", BallTree)):
            if self.algorithm == algo and self.metric not in tree.valid_metrics:
                raise ValueError(
                    f"{self.metric} is not a valid metric for a "
                    f"{tree.__name__}-based algorithm. Please select a different "
                    "metric.")
        X = validate_data(self, X, ensure_all_finite=False, dtype=np.float64)
        self._raw_data = X
        finite = np.flatnonzero(np.isfinite(X.sum(axis=1)))
        Xf = X[finite] if len(finite) < len(X) else X
        if Xf.shape[0] == 1 or X.shape[0] == 1:
            raise ValueError("n_samples=1 while HDBSCAN requires more than one sample")
        self._min_samples = (self.min_cluster_size if self.min_samples is None
                             else self.min_samples)
        if self._min_samples > X.shape[0]:
            raise ValueError(
                f"min_samples ({self._min_samples}) must be at most the number of"
                f" samples in X ({X.shape[0]})")
        # the searches' GEMM tiles run one per core already; BLAS's own
        # threads only spin around the small products of their index builds
        # (measured: 1.0-1.5 CPU s per build of 2*10^4 x 228 against 0.16)
        with threadpool_limits(limits=1, user_api="blas"):
            mst = self._mst(Xf)
        if mst is None:
            return self._fit_sklearn(X)
        # scikit-learn's sort of its Prim's edges (argsort's own tie order)
        mst = mst[np.argsort(mst["distance"])]
        self._single_linkage_tree_ = single_linkage(
            mst["current_node"], mst["next_node"], mst["distance"])
        labels, probs = self._labels(self._single_linkage_tree_)
        self._place_non_finite(X, finite, labels, probs)
        if self.store_centers:
            self._weighted_cluster_center(Xf)
        return self

    def _labels(self, slt):
        """labels and probabilities from the single-linkage tree (:mod:`._condense`,
        :mod:`._select`)."""
        tree = condense_tree(slt, self.min_cluster_size)
        single, eps = self.allow_single_cluster, self.cluster_selection_epsilon
        chosen = select_clusters(tree, stability(tree), self.cluster_selection_method,
                                 single, eps, self.max_cluster_size)
        return tree_labels(tree, chosen, single, eps)

    def _fit_sklearn(self, X):
        """scikit-learn's fit, where exactly tied distances may lie beyond
        the neighbour lists (:func:`._prim.exact_prim_mst`)."""
        if self.verbose:
            print("kerneltools: HDBSCAN: ties beyond the neighbour lists "
                  "(exactly tied distances: lattice, duplicated points; or "
                  "alpha > 1); fitting scikit-learn's HDBSCAN", file=sys.stderr)
        self._mst_route = "sklearn"
        with catch_warnings():
            simplefilter("ignore", FutureWarning)
            return super().fit(X)

    def _place_non_finite(self, X, finite, labels, probs) -> None:
        """labels_ and probabilities_ of every row (scikit-learn's codes for
        rows with inf, -2, or NaN, -3), and the tree in the raw indices."""
        if len(finite) == len(X):
            self.labels_, self.probabilities_ = labels, probs
            return
        s = X.sum(axis=1)
        missing, infinite = np.flatnonzero(np.isnan(s)), np.flatnonzero(np.isinf(s))
        # scikit-learn merges them in a set's order
        self._single_linkage_tree_ = remap_non_finite(
            self._single_linkage_tree_, finite,
            set(np.hstack([infinite, missing]).tolist()))
        self.labels_ = np.empty(len(X), dtype=np.int32)
        self.labels_[finite] = labels
        self.probabilities_ = np.zeros(len(X), dtype=np.float64)
        self.probabilities_[finite] = probs
        for rows, code in ((infinite, _OUTLIER["infinite"]),
                           (missing, _OUTLIER["missing"])):
            self.labels_[rows], self.probabilities_[rows] = code

    def _knn(self, X: np.ndarray):
        def knn(rows, among, k):
            nn = NearestNeighbors(n_neighbors=k, metric=self.metric, p=None,
                                  metric_params=self._metric_params,
                                  backend=self.backend).fit(X[among])
            d, i = nn.kneighbors(X[rows], k)
            return d.astype(np.float64), i
        return knn

    def _mst(self, X: np.ndarray):
        """The MST of mutual reachability of the finite rows ``X``."""
        t0 = time.perf_counter()
        n, k = X.shape[0], self._min_samples
        K = min(n, k + EXTRA_NEIGHBORS)
        nn = NearestNeighbors(n_neighbors=K, metric=self.metric, p=None,
                              metric_params=self._metric_params,
                              backend=self.backend).fit(X)
        dist, ind = nn.kneighbors(X, K)
        name, params = nn.effective_metric_, nn.effective_metric_params_
        metric = M.make_metric(name, M.formula_params(name, params, X))
        pb = MSTProblem(
            P=np.ascontiguousarray(metric.prepare(X)), core=dist[:, k - 1].copy(),
            nbr_dist=dist.astype(np.float64), nbr_ind=ind, rdist=metric.rdist,
            to_rdist=metric.to_rdist, alpha=float(self.alpha), backend=self.backend,
            dist=lambda a, b: pair_distances(X, a, b, name, params), knn=self._knn(X))

        def say(what):
            if self.verbose:
                print(f"HDBSCAN: {what} ({time.perf_counter() - t0:.2f} s)",
                      file=sys.stderr, flush=True)

        say(f"core distances of {n} points")
        a, b, _ = boruvka_mst(pb, say)
        return self._exact_order(X, name, params, ind, a, b, say)

    def _exact_order(self, X, name, params, ind, a, b, say):
        """The MST in scikit-learn's Prim's order and float64 weights (see
        :mod:`._prim`), or None: scikit-learn's fit decides the ties."""
        k, alpha = self._min_samples, float(self.alpha)
        core, nbr_d = core_distances(X, name, params, k, ind, pairs=True)
        w = np.maximum(np.maximum(core[a], core[b]),
                       pair_distances(X, a, b, name, params) / alpha)
        mst = np.empty(len(a), dtype=MST_EDGE_DTYPE)
        if len(np.unique(w)) == len(w):  # one single-linkage tree for all MSTs
            self._mst_route = "boruvka"
            mst["current_node"], mst["next_node"], mst["distance"] = a, b, w
            return mst
        srt = np.argsort(w, kind="stable")
        slt = single_linkage(a[srt], b[srt], w[srt])
        out = exact_prim_mst(X, name, params, alpha, ind, a, b, slt, core, nbr_d)
        if out is None:
            return None
        say("Prim's order replayed on the tied edges")
        self._mst_route = "prim"
        mst["current_node"], mst["next_node"], mst["distance"] = out
        return mst
