"""k-nearest and radius neighbours: scikit-learn's estimators on K-min reductions.

:class:`NearestNeighbors`, :class:`KNeighborsClassifier`,
:class:`KNeighborsRegressor`, :class:`RadiusNeighborsClassifier`,
:class:`RadiusNeighborsRegressor`, :class:`KNeighborsTransformer` and
:class:`RadiusNeighborsTransformer` take scikit-learn's constructor arguments
and methods, so that swapping the import keeps user code working. The search
is always brute force, but in linear memory: each query's K nearest points
come from a ``Kmin_argKmin`` reduction of the metric's formula over the
fitted points (metrics in :mod:`._metrics`), queries taken in blocks. The
search strategies are in the :mod:`.search` package, whose ``choose()``
picks one from one ordered list: in low dimension a pruned search visits
only the nearby cells; euclidean searches in 16 or more features on the
CPU multiply float32 BLAS tiles, skip the groups of fitted points too far
to matter and re-rank the candidates exactly; queries on a device search
there. A radius query counts each query's neighbours with a radius-test
reduction, then finds them with a K-min of that size.

Layout: fitting, the hand-over to scikit-learn for what the engine does not
serve and where the inputs live in :mod:`._base`; the queries in
:mod:`._queries`; the neighbours' weights, votes and means in
:mod:`._targets`; what only a device needs in :mod:`._device`; the radius
estimators in :mod:`._radius`, the transformers in :mod:`._graph`, shared
docstring parts in :mod:`._docs`. This package imports the engine only
through the public API (LazyTensor, :mod:`kerneltools.ranges`,
:mod:`kerneltools.selection`), the array layer of :mod:`kerneltools._utils`
and :mod:`.._shared`.

Beyond scikit-learn: ``metric`` may be a callable that builds a formula from
LazyTensors ``(x_i, y_j)`` (a custom metric at full speed); ``backend``
chooses where the reductions run and ``dtype`` the precision.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import sklearn
from sklearn.base import ClassifierMixin, RegressorMixin

from ...dask import rows_method
from ..._utils._array_api import (
    DeviceCopies,
    Placement,
    host_array,
    is_cupy_array,
    r2_score_xp,
    to_cupy,
)
from ._base import NeighborsBase
from ._device import accuracy_xp, encode_labels
from ._docs import (
    _ARRAY_API_DOC,
    _ATTRIBUTES_DOC,
    _COMMON_DOC,
    _FALLBACK_DOC,
)
from ._graph import KNeighborsTransformer, RadiusNeighborsTransformer
from ._radius import RadiusNeighborsClassifier, RadiusNeighborsRegressor
from ._queries import KNeighborsQueries, RadiusQueries
from ._targets import (
    gather_rows,
    store_labels,
    votes,
    warn_column_vector,
    weighted_mean,
    weights_of,
)
from ..._utils._param_validation import StrOptions

__all__ = [
    "KNeighborsClassifier",
    "KNeighborsRegressor",
    "KNeighborsTransformer",
    "NearestNeighbors",
    "RadiusNeighborsClassifier",
    "RadiusNeighborsRegressor",
    "RadiusNeighborsTransformer",
]


class NearestNeighbors(KNeighborsQueries, RadiusQueries, NeighborsBase):
    __doc__ = (
        """Unsupervised nearest neighbours: K nearest and radius searches.

    Parameters
    ----------
    n_neighbors : int, default=5
        Number of neighbours of :meth:`kneighbors` by default.
    radius : float, default=1.0
        Radius of :meth:`radius_neighbors` by default."""
        + _COMMON_DOC
        + """
    Attributes
    ----------"""
        + _ATTRIBUTES_DOC
        + _FALLBACK_DOC
        + _ARRAY_API_DOC
        + """
    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators.neighbors import NearestNeighbors
    >>> X = np.array([[0.0, 0.0], [0.0, 1.0], [3.0, 0.0], [3.0, 1.5]])
    >>> nn = NearestNeighbors(n_neighbors=2).fit(X)
    >>> dist, ind = nn.kneighbors([[0.1, 0.2]])
    >>> ind
    array([[0, 1]])
    >>> [i.tolist() for i in nn.radius_neighbors([[3.0, 0.5]], radius=1.2)[1]]
    [[2, 3]]
    """
    )

    _parameter_constraints: ClassVar[dict] = {
        **KNeighborsQueries._parameter_constraints,
        **RadiusQueries._parameter_constraints,
    }
    _ARRAY_API = True

    def __init__(
        self,
        *,
        n_neighbors=5,
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
        self.n_neighbors = n_neighbors
        self.radius = radius
        self.algorithm = algorithm
        self.leaf_size = leaf_size
        self.metric = metric
        self.p = p
        self.metric_params = metric_params
        self.n_jobs = n_jobs
        self.backend = backend
        self.dtype = dtype

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
        self : NearestNeighbors
            The fitted estimator.
        """
        self._fit(X)
        return self


class _SupervisedNeighbors(DeviceCopies, KNeighborsQueries, NeighborsBase):
    _parameter_constraints: ClassVar[dict] = {
        **KNeighborsQueries._parameter_constraints,
        "weights": [StrOptions({"uniform", "distance"}), callable, None],
    }
    _ARRAY_API = True

    def __init__(
        self,
        n_neighbors=5,
        *,
        weights="uniform",
        algorithm="auto",
        leaf_size=30,
        p=2,
        metric="minkowski",
        metric_params=None,
        n_jobs=None,
        backend=None,
        dtype=None,
    ):
        self.n_neighbors = n_neighbors
        self.weights = weights
        self.algorithm = algorithm
        self.leaf_size = leaf_size
        self.p = p
        self.metric = metric
        self.metric_params = metric_params
        self.n_jobs = n_jobs
        self.backend = backend
        self.dtype = dtype

    def fit(self, X, y):
        """Store the training points and their targets.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training points.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Their targets (labels for a classifier).

        Returns
        -------
        self : estimator
            The fitted estimator.
        """
        return self._fit_supervised(X, y)

    def _neighbors_and_weights(self, X, place: Placement):
        """(neighbour indices, weights or None) of each query, arrays of the
        space where ``place`` computes."""
        uniform = self.weights in (None, "uniform")
        dist, ind = self._kneighbors_in(place, X, None, not uniform)
        if uniform:
            return ind, None
        xp = place.space.xp
        w = weights_of(dist, self.weights, xp)
        if w is not None and bool(xp.any(xp.all(w == 0, axis=1))):
            raise ValueError(
                "All neighbors of some sample is getting zero weights. Please modify "
                "'weights' to avoid this case if you are using a user-defined function."
            )
        return ind, w

    def _targets_on(self, place: Placement):
        """The fitted targets (a classifier's label codes) as an (n, E) array
        of ``place``'s compute space."""
        (y,) = self._fitted_on(place, "_y")
        if not place.space.on_device:
            y = host_array(y)
        return place.space.xp.reshape(y, (y.shape[0], -1))


_SUPERVISED_DOC = """

    Parameters
    ----------
    n_neighbors : int, default=5
        Number of neighbours that vote.
    weights : {'uniform', 'distance'}, callable or None, default='uniform'
        'uniform' (or None): equal votes; 'distance': votes weighted by
        1 / distance (a query that matches fitted points exactly takes the
        votes of those points only); a callable maps the (n_queries, K)
        distances to weights of the same shape."""


def _score(est, X, y, sample_weight, mixin):
    """``score`` of CuPy arrays computed on the GPU, also without
    ``array_api_dispatch`` (where scikit-learn's would convert them with
    ``np.asarray``, and fail); scikit-learn's ``mixin.score`` otherwise."""
    if is_cupy_array(X) and not sklearn.get_config()["array_api_dispatch"]:
        pred = est.predict(X)
        return est._score_xp(to_cupy(y), pred, host_array(sample_weight))
    return mixin.score(est, X, y, sample_weight=sample_weight)


_SCORE_DOC = """{what} of :meth:`predict` on ``X`` against ``y``, as
        scikit-learn's (CuPy arrays: computed on the GPU).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Test samples.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            True labels or targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.

        Returns
        -------
        score : float
        """


class KNeighborsClassifier(ClassifierMixin, _SupervisedNeighbors):
    __doc__ = (
        """Classifier voting among the K nearest neighbours."""
        + _SUPERVISED_DOC
        + _COMMON_DOC
        + """
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,) or list of such arrays
        The class labels (one array per output for multi-output y).
    outputs_2d_ : bool
        Whether y was 2-D (several outputs) at fit."""
        + _ATTRIBUTES_DOC
        + _FALLBACK_DOC
        + _ARRAY_API_DOC
        + """
    Examples
    --------
    >>> from kerneltools.estimators.neighbors import KNeighborsClassifier
    >>> X, y = [[0.0], [1.0], [2.0], [3.0]], [0, 0, 1, 1]
    >>> clf = KNeighborsClassifier(n_neighbors=3).fit(X, y)
    >>> clf.predict([[1.1]])
    array([0])
    >>> clf.predict_proba([[0.9]]).round(3)
    array([[0.667, 0.333]])
    """
    )

    _score_xp = staticmethod(accuracy_xp)

    def score(self, X, y, sample_weight=None):
        return _score(self, X, y, sample_weight, ClassifierMixin)

    score.__doc__ = _SCORE_DOC.format(what="The mean accuracy")

    def _store_targets(self, y) -> None:
        place = self._query_place(None, "fit")
        if place.xp is not None and place.space.on_device:  # checked on the device
            return self._store_device_labels(y, place)
        store_labels(self, y)
        self._y = self._kept(self._y)
        if place.xp is not None:  # numeric labels: in the namespace and device of X
            classes = self.classes_ if self.outputs_2d_ else [self.classes_]
            out = [place.to_output(c) if c.dtype.kind in "biuf" else c for c in classes]
            self.classes_ = out if self.outputs_2d_ else out[0]
        return None

    def _store_device_labels(self, y, place: Placement) -> None:
        """``classes_`` (in X's namespace) and the label codes ``_y`` (on the
        device) of labels ``y`` checked on the device."""
        xp = place.space.xp
        warn_column_vector(y, stacklevel=5)
        self.outputs_2d_ = y.ndim == 2 and y.shape[1] != 1
        classes, codes = encode_labels(xp.reshape(y, (y.shape[0], -1)), xp)
        self.classes_ = [place.to_output(c) for c in classes]
        self._y = self._kept(codes)
        if not self.outputs_2d_:
            self.classes_, self._y = self.classes_[0], self._kept(codes[:, 0])

    def _proba_in(self, X, place: Placement) -> list:
        """The class probabilities of each output, arrays of the compute space."""
        xp = place.space.xp
        ind, w = self._neighbors_and_weights(X, place)
        classes = self.classes_ if self.outputs_2d_ else [self.classes_]
        labels = gather_rows(self._targets_on(place), ind, xp)  # (n, K, n_outputs)
        return [votes(labels[:, :, k], w, int(c.shape[0]), xp)
                for k, c in enumerate(classes)]

    @rows_method
    def predict_proba(self, X):
        """Class probabilities: the neighbours' (weighted) votes, normalised.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features) or None
            The queries (None: the fitted points, each excluded from its own
            neighbours).

        Returns
        -------
        p : ndarray of shape (n_queries, n_classes), or a list of such arrays
            (one per output); classes in the order of ``classes_``.
        """
        if self._delegating():
            return self.fallback_.predict_proba(X)
        place = self._query_place(X, "predict_proba")
        out = [place.to_output(p) for p in self._proba_in(X, place)]
        return out if self.outputs_2d_ else out[0]

    @rows_method
    def predict(self, X):
        """The class with the most (weighted) votes among the K neighbours.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features) or None
            The queries (None: the fitted points, each excluded from its own
            neighbours).

        Returns
        -------
        y : ndarray of shape (n_queries,) or (n_queries, n_outputs)
            Predicted labels; ties go to the first class of ``classes_``.
        """
        if self._delegating():
            return self.fallback_.predict(X)
        place = self._query_place(X, "predict")
        sp = place.space
        classes = self.classes_ if self.outputs_2d_ else [self.classes_]
        picks = [sp.xp.argmax(p, axis=1) for p in self._proba_in(X, place)]
        hosts = [host_array(c) for c in classes]  # n_classes labels each
        if all(c.dtype.kind in "biuf" for c in hosts):  # in the space, then out
            out = [sp.xp.take(c if not sp.on_device else sp.put(c), i, axis=0)
                   for c, i in zip(hosts, picks)]
            out = out[0] if not self.outputs_2d_ else sp.xp.stack(out, axis=1)
            return place.to_output(out)
        # labels that no array namespace holds (strings): NumPy, on the host
        out = [c[sp.host(i)] for c, i in zip(hosts, picks)]
        return out[0] if not self.outputs_2d_ else np.stack(out, axis=1)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = True
        return tags


class KNeighborsRegressor(RegressorMixin, _SupervisedNeighbors):
    __doc__ = (
        """Regression by the (weighted) mean of the K nearest neighbours' targets."""
        + _SUPERVISED_DOC
        + _COMMON_DOC
        + """
    Attributes
    ----------"""
        + _ATTRIBUTES_DOC
        + _FALLBACK_DOC
        + _ARRAY_API_DOC
        + """
    Examples
    --------
    >>> from kerneltools.estimators.neighbors import KNeighborsRegressor
    >>> X, y = [[0.0], [1.0], [2.0], [3.0]], [0.0, 0.0, 1.0, 1.0]
    >>> reg = KNeighborsRegressor(n_neighbors=2).fit(X, y)
    >>> reg.predict([[1.5]])
    array([0.5])
    """
    )

    _score_xp = staticmethod(r2_score_xp)

    def score(self, X, y, sample_weight=None):
        return _score(self, X, y, sample_weight, RegressorMixin)

    score.__doc__ = _SCORE_DOC.format(what="The coefficient of determination R^2")

    @rows_method
    def predict(self, X):
        """The (weighted) mean target of the K nearest neighbours.

        Parameters
        ----------
        X : array-like of shape (n_queries, n_features) or None
            The queries (None: the fitted points, each excluded from its own
            neighbours).

        Returns
        -------
        y : ndarray of shape (n_queries,) or (n_queries, n_outputs)
            Predicted targets.
        """
        if self._delegating():
            return self.fallback_.predict(X)
        place = self._query_place(X, "predict")
        xp = place.space.xp
        ind, w = self._neighbors_and_weights(X, place)
        pred = weighted_mean(gather_rows(self._targets_on(place), ind, xp), w, xp)
        if self._y.ndim == 1:
            pred = xp.reshape(pred, (-1,))
        return place.to_output(pred)

