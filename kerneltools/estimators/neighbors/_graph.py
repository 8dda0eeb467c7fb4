"""Neighbour graphs as transformers, for scikit-learn's precomputed pipelines.

:class:`KNeighborsTransformer` and :class:`RadiusNeighborsTransformer` turn
X into the sparse graph of its neighbours among the fitted points, the input
that ``TSNE(metric="precomputed")``, ``Isomap``, ``DBSCAN`` or
``SpectralClustering(affinity="precomputed_nearest_neighbors")`` take: the
neighbour phase then runs on the engine. As scikit-learn's, in
``mode='distance'`` the K-nearest graph holds ``n_neighbors + 1`` entries per
row (a query among the fitted points is its own first neighbour, an explicit
zero), and the radius graph is sorted by distance.
"""

from __future__ import annotations

from typing import ClassVar

from sklearn.base import ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ..._utils._param_validation import StrOptions
from ._base import NeighborsBase
from ._docs import _ATTRIBUTES_DOC, _COMMON_DOC, _FALLBACK_DOC
from ._queries import KNeighborsQueries, RadiusQueries

__all__ = ["KNeighborsTransformer", "RadiusNeighborsTransformer"]

_MODE_DOC = """

    Parameters
    ----------
    mode : {'distance', 'connectivity'}, default='distance'
        The entries of the graph: the distances, or ones."""

_TRANSFORM_RETURNS = """
        Returns
        -------
        Xt : sparse matrix of shape (n_queries, n_samples_fit)
            ``Xt[i, j]``: the edge from query i to fitted point j, CSR; only
            the neighbours are stored (explicit zeros included)."""


class _GraphTransformer(ClassNamePrefixFeaturesOutMixin, TransformerMixin):
    """fit / transform / fit_transform of the two graph transformers."""

    def fit(self, X, y=None):
        """Store the points to search.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The points.
        y : None
            Ignored.

        Returns
        -------
        self : estimator
            The fitted transformer.
        """
        self._fit(X)
        if not self._delegating():
            self._n_features_out = self.n_samples_fit_
        return self

    def fit_transform(self, X, y=None):
        """Fit on X, then transform X (each point is its own neighbour).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The points.
        y : None
            Ignored.
        """
        return self.fit(X).transform(X)

    fit_transform.__doc__ += _TRANSFORM_RETURNS


class KNeighborsTransformer(_GraphTransformer, KNeighborsQueries, NeighborsBase):
    __doc__ = (
        """X as the sparse graph of its K nearest fitted neighbours."""
        + _MODE_DOC
        + """
    n_neighbors : int, default=5
        Neighbours per row ('distance': one more, the point itself when the
        queries are the fitted points)."""
        + _COMMON_DOC
        + """
    Attributes
    ----------"""
        + _ATTRIBUTES_DOC
        + _FALLBACK_DOC
        + """
    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators.neighbors import KNeighborsTransformer
    >>> X = np.array([[0.0], [1.0], [3.0]])
    >>> KNeighborsTransformer(n_neighbors=1).fit_transform(X).toarray()
    array([[0., 1., 0.],
           [1., 0., 0.],
           [0., 2., 0.]])
    """
    )

    _parameter_constraints: ClassVar[dict] = {
        **KNeighborsQueries._parameter_constraints,
        "mode": [StrOptions({"distance", "connectivity"})],
    }

    def __init__(
        self,
        *,
        mode="distance",
        n_neighbors=5,
        algorithm="auto",
        leaf_size=30,
        metric="minkowski",
        p=2,
        metric_params=None,
        n_jobs=None,
        backend=None,
        dtype=None,
    ):
        self.mode = mode
        self.n_neighbors = n_neighbors
        self.algorithm = algorithm
        self.leaf_size = leaf_size
        self.metric = metric
        self.p = p
        self.metric_params = metric_params
        self.n_jobs = n_jobs
        self.backend = backend
        self.dtype = dtype

    def transform(self, X):
        """The graph of the K nearest fitted neighbours of each row of X.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            The queries.
        """
        if self._delegating():
            return self.fallback_.transform(X)
        check_is_fitted(self)
        add_one = self.mode == "distance"
        return self.kneighbors_graph(X, mode=self.mode,
                                     n_neighbors=self.n_neighbors + add_one)

    transform.__doc__ += _TRANSFORM_RETURNS


class RadiusNeighborsTransformer(_GraphTransformer, RadiusQueries, NeighborsBase):
    __doc__ = (
        """X as the sparse graph of its fitted neighbours within a radius."""
        + _MODE_DOC
        + """
    radius : float, default=1.0
        The neighbours of a row are the fitted points within this distance."""
        + _COMMON_DOC
        + """
    Attributes
    ----------"""
        + _ATTRIBUTES_DOC
        + _FALLBACK_DOC
        + """
    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators.neighbors import RadiusNeighborsTransformer
    >>> X = np.array([[0.0], [1.0], [3.0]])
    >>> RadiusNeighborsTransformer(radius=1.5).fit_transform(X).toarray()
    array([[0., 1., 0.],
           [1., 0., 0.],
           [0., 0., 0.]])
    """
    )

    _parameter_constraints: ClassVar[dict] = {
        **RadiusQueries._parameter_constraints,
        "mode": [StrOptions({"distance", "connectivity"})],
    }

    def __init__(
        self,
        *,
        mode="distance",
        radius=1.0,
        algorithm="auto",
        leaf_size=30,
        metric="minkowski",
        p=2,
        metric_params=None,
        n_jobs=None,
        backend=None,
        dtype=None,
    ):
        self.mode = mode
        self.radius = radius
        self.algorithm = algorithm
        self.leaf_size = leaf_size
        self.metric = metric
        self.p = p
        self.metric_params = metric_params
        self.n_jobs = n_jobs
        self.backend = backend
        self.dtype = dtype

    def transform(self, X):
        """The graph of the fitted neighbours within the radius of each row of X,
        each row's entries by increasing distance.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features)
            The queries.
        """
        if self._delegating():
            return self.fallback_.transform(X)
        check_is_fitted(self)
        return self.radius_neighbors_graph(X, mode=self.mode, sort_results=True)

    transform.__doc__ += _TRANSFORM_RETURNS
