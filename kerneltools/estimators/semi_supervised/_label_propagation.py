"""LabelSpreading and LabelPropagation (private; public in
:mod:`kerneltools.estimators.semi_supervised`)."""

from __future__ import annotations

import sys
import time
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from ..._utils._param_validation import Interval, StrOptions
from ..._utils._validation import validate_numeric
from .._shared._fallback import FallbackMixin, is_sparse
from .._shared._handover import HandOver
from ._graphs import RbfGraph, SparseGraph, rbf_weights
from ._iteration import iterate_labels

__all__ = ["LabelPropagation", "LabelSpreading"]


class _BaseLabelPropagation(HandOver, FallbackMixin, ClassifierMixin, BaseEstimator):
    """What LabelSpreading and LabelPropagation share: scikit-learn's
    ``BaseLabelPropagation`` with the RBF graph as reductions."""

    _variant = "spreading"

    _parameter_constraints: ClassVar[dict] = {
        "kernel": [StrOptions({"knn", "rbf"}), callable],
        "gamma": [Interval(Real, 0, None, closed="left")],
        "n_neighbors": [Interval(Integral, 0, None, closed="neither")],
        "alpha": [None, Interval(Real, 0, 1, closed="neither")],
        "max_iter": [Interval(Integral, 0, None, closed="neither")],
        "tol": [Interval(Real, 0, None, closed="left")],
        "n_jobs": [None, Integral],
        "backend": ["backend"],
        "verbose": ["verbose"],
    }

    def _engine_refuses(self, X, y=None):
        if callable(self.kernel):
            return "a callable kernel"
        if is_sparse(X):
            return "sparse X"
        return None

    def _graph(self, X):
        """The normalised graph of the fitted points ``X``."""
        if self.kernel == "knn":
            graph = SparseGraph(X, self.n_neighbors, self._variant, n_jobs=self.n_jobs)
            self._nn_fit = graph.nn
            return graph
        self._nn_fit = None
        return RbfGraph(X, self.gamma, self._variant, backend=self.backend,
                        verbose=self.verbose)

    @property
    def nn_fit(self):
        """The fitted k-NN search of ``kernel="knn"`` (None for "rbf"), as
        scikit-learn's attribute of that name."""
        if self._delegating():
            return self.fallback_.nn_fit
        return getattr(self, "_nn_fit", None)

    def _build_graph(self):
        """The graph matrix of the fitted points, as scikit-learn's (dense, of
        the dtype of ``X_``, for ``kernel="rbf"``: n^2 memory; sparse for
        ``"knn"``)."""
        if self._delegating():
            return self.fallback_._build_graph()
        graph = self._graph(self.X_)
        if self.kernel == "knn":
            return graph.graph
        return graph.to_dense().astype(self.X_.dtype, copy=False)

    def fit(self, X, y):
        """Fit a semi-supervised label propagation model to X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data (labelled and unlabelled).
        y : array-like of shape (n_samples,)
            Target classes, -1 for the unlabelled samples (whose labels
            are then in ``transduction_``).

        Returns
        -------
        self : object
        """
        if self._hand_over_xy(X, y):
            return self
        X, y = validate_numeric(self, X, y, reset=True)
        check_classification_targets(y)
        start = time.perf_counter()
        self.X_ = X
        classes = np.unique(y)
        classes = classes[classes != -1]
        if len(classes) == 0:
            raise ValueError(f"{type(self).__name__}.fit needs at least one labelled "
                             "sample in 'y'; every label is -1 (unlabelled).")
        self.classes_ = classes
        y = np.asarray(y)
        Y = (y[:, None] == classes[None, :]).astype(np.float64)
        graph = self._graph(X)
        out = iterate_labels(matmat=graph.matmat, Y=Y, unlabeled=y == -1,
                             variant=self._variant, alpha=self.alpha,
                             max_iter=self.max_iter, tol=self.tol,
                             verbose=self.verbose)
        self.label_distributions_ = out.distributions
        self.n_iter_ = out.n_iter
        self.transduction_ = self.classes_[
            np.argmax(self.label_distributions_, axis=1)].ravel()
        if self.verbose:
            print(f"[{type(self).__name__}] {self.kernel} graph, {len(X)} points, "
                  f"{self.n_iter_} iterations: {time.perf_counter() - start:.2f} s",
                  file=sys.stderr, flush=True)
        return self

    def _hand_over_xy(self, X, y) -> bool:
        """:meth:`HandOver._hand_over` with the labels."""
        from ..._utils._param_validation import validate_params  # noqa: PLC0415
        from ...config import check_backend  # noqa: PLC0415

        validate_params(self)
        check_backend(self.backend, type(self).__name__)
        reason = self._engine_refuses(X)
        if reason:
            self._fit_fallback(reason, X, y)
            return True
        self._drop_fallback()
        return False

    def predict(self, X):
        """Predict the class of each sample of X (inductive inference).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        y : ndarray of shape (n_samples,)
        """
        if self._delegating():
            return self.fallback_.predict(X)
        probas = self.predict_proba(X)
        return self.classes_[np.argmax(probas, axis=1)].ravel()

    def predict_proba(self, X):
        """Class probabilities of each sample of X: the kernel-weighted
        average of the fitted label distributions.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        probabilities : ndarray of shape (n_samples, n_classes)
        """
        if self._delegating():
            return self.fallback_.predict_proba(X)
        check_is_fitted(self)
        if is_sparse(X):
            X = X.toarray()
        X = validate_numeric(self, X, reset=False)
        F = self.label_distributions_
        if self.kernel == "knn":
            neighbors = self._nn_fit.kneighbors(X, return_distance=False)
            probabilities = F[neighbors].sum(axis=1)
        else:
            probabilities = rbf_weights(self.X_, X, self.gamma, F,
                                        backend=self.backend)
        probabilities /= np.atleast_2d(np.sum(probabilities, axis=1)).T
        return probabilities

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


_COMMON_DOC = """
    kernel : {"knn", "rbf"} or callable, default="rbf"
        "rbf": the Gaussian affinity as reductions (never stored); "knn":
        the k-NN connectivity graph (sparse); a callable of two arrays (as
        scikit-learn's) goes to scikit-learn's class (``fallback_``).
    gamma : float, default=20
        Parameter of the rbf kernel.
    n_neighbors : int, default=7
        Parameter of the knn kernel (> 0)."""

_TAIL_DOC = """
    tol : float, default=1e-3
        Convergence: the iteration stops when the summed absolute change of
        the label distributions is below ``tol``.
    n_jobs : int, default=None
        Passed to the k-NN search and to a fallback.
    backend : {"auto", "cpu", "cuda", "numpy"} or None, default=None
        Where the reductions run; None: the configured backend.
    verbose : int, default=0
        Print the change at each iteration and the time of ``fit``.

    Attributes
    ----------
    X_ : ndarray of shape (n_samples, n_features)
    classes_ : ndarray of shape (n_classes,)
    label_distributions_ : ndarray of shape (n_samples, n_classes)
    transduction_ : ndarray of shape (n_samples,)
    n_iter_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
    nn_fit : NearestNeighbors or None
        The fitted k-NN search of ``kernel="knn"``."""


class LabelSpreading(_BaseLabelPropagation):
    __doc__ = f"""Label spreading with a lazy RBF graph: linear memory.

    A drop-in for :class:`sklearn.semi_supervised.LabelSpreading` (same
    parameters, attributes and label distributions). Each iteration
    ``F <- alpha S F + (1 - alpha) Y`` multiplies by the normalised
    affinity ``S = D^-1/2 (W - diag W) D^-1/2`` as one reduction; the
    degrees ``D`` take one more, once.

    Parameters
    ----------{_COMMON_DOC}
    alpha : float, default=0.2
        Clamping factor in (0, 1): the share of a point's label taken from
        its neighbours at each iteration.
    max_iter : int, default=30
        Maximum number of iterations.{_TAIL_DOC}

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators import LabelSpreading
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(0, 0.1, (20, 2)), rng.normal(2, 0.1, (20, 2))])
    >>> y = np.full(40, -1)
    >>> y[0], y[-1] = 0, 1
    >>> model = LabelSpreading(gamma=5).fit(X, y)
    >>> model.transduction_[:20].tolist() == [0] * 20, model.transduction_[20:].min()
    (True, np.int64(1))
    """

    _sklearn_class = "sklearn.semi_supervised.LabelSpreading"
    _variant = "spreading"

    _parameter_constraints: ClassVar[dict] = {
        **_BaseLabelPropagation._parameter_constraints,
        "alpha": [Interval(Real, 0, 1, closed="neither")],
    }

    def __init__(self, kernel="rbf", *, gamma=20, n_neighbors=7, alpha=0.2,
                 max_iter=30, tol=1e-3, n_jobs=None, backend=None, verbose=0):
        self.kernel = kernel
        self.gamma = gamma
        self.n_neighbors = n_neighbors
        self.alpha = alpha
        self.max_iter = max_iter
        self.tol = tol
        self.n_jobs = n_jobs
        self.backend = backend
        self.verbose = verbose


class LabelPropagation(_BaseLabelPropagation):
    __doc__ = f"""Label propagation with a lazy RBF graph: linear memory.

    A drop-in for :class:`sklearn.semi_supervised.LabelPropagation` (same
    parameters, attributes and label distributions). Each iteration
    multiplies by the row-normalised affinity ``D^-1 W`` (one reduction; the
    row sums ``D`` take one more, once), normalises the rows and resets the
    labelled points to their labels.

    Parameters
    ----------{_COMMON_DOC}
    max_iter : int, default=1000
        Maximum number of iterations.{_TAIL_DOC}

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators import LabelPropagation
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(0, 0.1, (20, 2)), rng.normal(2, 0.1, (20, 2))])
    >>> y = np.full(40, -1)
    >>> y[0], y[-1] = 0, 1
    >>> LabelPropagation(gamma=5).fit(X, y).predict([[0.1, 0.0], [1.9, 2.1]])
    array([0, 1])
    """

    _sklearn_class = "sklearn.semi_supervised.LabelPropagation"
    _variant = "propagation"

    _parameter_constraints: ClassVar[dict] = {
        k: v for k, v in _BaseLabelPropagation._parameter_constraints.items()
        if k != "alpha"}

    def __init__(self, kernel="rbf", *, gamma=20, n_neighbors=7, max_iter=1000,
                 tol=1e-3, n_jobs=None, backend=None, verbose=0):
        self.kernel = kernel
        self.gamma = gamma
        self.n_neighbors = n_neighbors
        self.max_iter = max_iter
        self.tol = tol
        self.n_jobs = n_jobs
        self.backend = backend
        self.verbose = verbose

    alpha = None  # scikit-learn's LabelPropagation holds alpha=None, not a parameter
