"""The K-nearest and radius queries of the k-NN estimators.

:class:`KNeighborsQueries` and :class:`RadiusQueries` are mixed into the
estimators with :class:`~._base.NeighborsBase` (whose fitted points and
searches they query); they derive from scikit-learn's ``KNeighborsMixin``
and ``RadiusNeighborsMixin`` only so that ``issubclass`` / ``isinstance``
checks against them (scikit-learn's ``kneighbors_graph(estimator)``, its
tests) hold for ours, and override every public method of them.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import ClassVar

import numpy as np

# scikit-learn's query mixins are private; they are base classes here for
# the isinstance / issubclass checks that user code and scikit-learn make.
from sklearn.neighbors._base import KNeighborsMixin as _SkKNeighborsMixin
from sklearn.neighbors._base import RadiusNeighborsMixin as _SkRadiusMixin
from sklearn.utils.validation import check_is_fitted

from ...dask import rows_method
from ..._utils._array_api import Placement, host_array, validate_on_device
from ..._utils._param_validation import Interval
from ._base import NeighborsBase
from .search._formula import (
    check_mode,
    check_n_neighbors,
    csr,
    drop_self,
    own_distances,
    radius_search,
    split_rows,
)

__all__ = ["KNeighborsQueries", "RadiusQueries"]


class KNeighborsQueries(_SkKNeighborsMixin):
    """:meth:`kneighbors` and :meth:`kneighbors_graph` on the engine."""

    _parameter_constraints: ClassVar[dict] = {
        **NeighborsBase._parameter_constraints,
        "n_neighbors": [Interval(Integral, 1, None, closed="left"), None],
    }

    @rows_method
    def kneighbors(self, X=None, n_neighbors=None, return_distance=True):
        """The K nearest fitted points of each query.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), default=None
            The queries. None: the fitted points, each excluded from its own
            neighbours (a duplicate of it is not excluded).
        n_neighbors : int, default=None
            K; the constructor's ``n_neighbors`` by default.
        return_distance : bool, default=True
            Whether to return the distances too.

        Returns
        -------
        neigh_dist : array of shape (n_queries, n_neighbors)
            The distances, increasing (only if ``return_distance``); in the
            namespace and on the device of X (of the fit's X for X=None).
        neigh_ind : array of shape (n_queries, n_neighbors)
            Indices of the neighbours in the fitted data; equal distances
            come in index order (as scikit-learn's brute force).
        """
        if self._delegating():
            return self.fallback_.kneighbors(X, n_neighbors, return_distance)
        check_is_fitted(self)
        place = self._query_place(X, "kneighbors")
        dist, ind = self._kneighbors_in(place, X, n_neighbors, return_distance)
        if not return_distance:
            return place.to_output(ind)
        return place.to_output(dist), place.to_output(ind)

    def _kneighbors_in(self, place: Placement, X, n_neighbors, return_distance: bool):
        """(distances or None, indices) of :meth:`kneighbors`, arrays of the
        space where ``place`` computes (NumPy on the host)."""
        n_neighbors = check_n_neighbors(n_neighbors, self.n_neighbors)
        sp = place.space
        if not sp.on_device:
            X, is_train = self._query(host_array(X))
        elif X is None:
            X, is_train = place.to_space(self._fit_X), True
        else:
            X, _ = validate_on_device(self, place.to_space(X), reset=False, space=sp)
            is_train = False
        k = n_neighbors + is_train
        if k > self.n_samples_fit_:
            rel = "n_neighbors < n_samples_fit" if is_train else (
                "n_neighbors <= n_samples_fit")
            raise ValueError(
                f"Expected {rel}, but n_neighbors = {n_neighbors}, n_samples_fit = "
                f"{self.n_samples_fit_}, n_samples = {X.shape[0]}"
            )
        search, X = self._search(X, place.backend, place if sp.on_device else None)
        vals, ind = search.kmin(X, k)
        if is_train:
            vals, ind = drop_self(vals, ind, sp.xp)
        return (own_distances(search.metric, vals, sp.xp) if return_distance
                else None), ind

    def kneighbors_graph(self, X=None, n_neighbors=None, mode="connectivity"):
        """The graph of the K nearest neighbours, a sparse CSR matrix.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), default=None
            The queries (None: the fitted points, excluding themselves).
        n_neighbors : int, default=None
            K; the constructor's by default.
        mode : {'connectivity', 'distance'}, default='connectivity'
            Ones, or the distances, as the entries.

        Returns
        -------
        A : sparse matrix of shape (n_queries, n_samples_fit)
            ``A[i, j]``: the edge from query i to fitted point j; each row's
            entries in increasing distance (explicit zeros kept).
        """
        if self._delegating():
            return self.fallback_.kneighbors_graph(X, n_neighbors, mode)
        check_is_fitted(self)
        check_mode(mode)
        k = check_n_neighbors(n_neighbors, self.n_neighbors)
        place = self._query_place(X, "kneighbors_graph")  # a SciPy matrix: on the host
        dist, ind = self._kneighbors_in(place, X, k, mode == "distance")
        ind = place.space.host(ind)
        data = np.ones(ind.size) if dist is None else place.space.host(dist).ravel()
        indptr = np.arange(0, ind.size + 1, k)
        return csr(data, ind.ravel(), indptr, (ind.shape[0], self.n_samples_fit_))


class RadiusQueries(_SkRadiusMixin):
    """:meth:`radius_neighbors` and :meth:`radius_neighbors_graph` on the engine."""

    _parameter_constraints: ClassVar[dict] = {
        **NeighborsBase._parameter_constraints,
        "radius": [Interval(Real, 0, None, closed="both"), None],
    }

    def radius_neighbors(
        self, X=None, radius=None, return_distance=True, sort_results=False
    ):
        """The fitted points within ``radius`` of each query.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), default=None
            The queries (None: the fitted points, each excluding itself).
        radius : float or array-like of shape (n_queries,), default=None
            The radius (distance <= radius), one for all queries or one per
            query; the constructor's by default.
        return_distance : bool, default=True
            Whether to return the distances too.
        sort_results : bool, default=False
            True: each query's neighbours by increasing distance (equal
            distances in index order); False: in index order. True needs
            ``return_distance=True``.

        Returns
        -------
        neigh_dist : ndarray of shape (n_queries,) of arrays
            Distances of each query's neighbours (only if ``return_distance``).
        neigh_ind : ndarray of shape (n_queries,) of arrays
            Their indices in the fitted data.
        """
        if self._delegating():
            return self.fallback_.radius_neighbors(X, radius, return_distance,
                                                   sort_results)
        check_is_fitted(self)
        if sort_results and not return_distance:
            raise ValueError("return_distance must be True if sort_results is True.")
        place = self._query_place(X, "radius_neighbors")
        dist, ind, indptr = self._radius_csr(host_array(X), host_array(radius),
                                             sort_results, place.backend)
        split = split_rows if place.trivial else (
            lambda a, ptr: split_rows(_host_to_output(place, a), ptr))
        ind_out = split(ind, indptr)
        if not return_distance:
            return ind_out
        return split(dist, indptr), ind_out

    def _radius_csr(self, X, radius, sort_results: bool, backend="estimator's"):
        """(distances, indices, indptr) of the neighbours within ``radius``,
        CSR rows by increasing distance (``sort_results``) or by index."""
        X, is_train = self._query(X)
        radius = self.radius if radius is None else radius
        search, X = self._search(X, backend)
        threshold = _thresholds(search.metric, radius, X.shape[0])
        vals, ind, indptr = radius_search(
            search, X, threshold, self.n_samples_fit_, exclude_self=is_train,
            by_index=not sort_results)  # scikit-learn's brute force: index order
        return search.metric.to_dist(vals), ind, indptr

    def radius_neighbors_graph(
        self, X=None, radius=None, mode="connectivity", sort_results=False
    ):
        """The graph of the neighbours within ``radius``, a sparse CSR matrix.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features), default=None
            The queries (None: the fitted points, excluding themselves).
        radius : float or array-like of shape (n_queries,), default=None
            The radius; the constructor's by default.
        mode : {'connectivity', 'distance'}, default='connectivity'
            Ones, or the distances, as the entries.
        sort_results : bool, default=False
            With ``mode='distance'``: each row's entries by increasing
            distance (else in index order).

        Returns
        -------
        A : sparse matrix of shape (n_queries, n_samples_fit)
            ``A[i, j]``: the edge from query i to fitted point j.
        """
        if self._delegating():
            return self.fallback_.radius_neighbors_graph(X, radius, mode, sort_results)
        check_is_fitted(self)
        check_mode(mode)
        place = self._query_place(X, "radius_neighbors_graph")  # SciPy's: on the host
        dist, ind, indptr = self._radius_csr(host_array(X), host_array(radius),
                                             sort_results and mode == "distance",
                                             place.backend)
        data = dist if mode == "distance" else np.ones(len(ind))
        return csr(data, ind, indptr, (len(indptr) - 1, self.n_samples_fit_))


def _host_to_output(place: Placement, a: np.ndarray):
    """A host result in the namespace and on the device of ``place``'s input."""
    return place.to_output(place.space.put(a) if place.space.on_device else a)


def _thresholds(metric, radius, n_queries: int):
    """The rdist threshold(s) of a radius: a float, or one per query."""
    if np.ndim(radius) == 0:
        if not Interval(Real, 0, None, closed="both").is_satisfied_by(radius):
            raise ValueError(f"radius must be a float >= 0; got {radius!r}")
        return metric.to_rdist(float(radius))
    r = np.asarray(radius, dtype=np.float64)
    if r.shape != (n_queries,) or not np.all(r >= 0):
        raise ValueError(
            "radius must be a float >= 0 or an array of one such per query "
            f"({n_queries}); got an array of shape {r.shape}"
        )
    return np.array([metric.to_rdist(float(v)) for v in r])
