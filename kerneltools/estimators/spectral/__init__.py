"""Spectral embedding and spectral clustering with a lazy kernel affinity.

With a kernel affinity (``affinity="rbf"`` and the other named kernels), the
normalised Laplacian is never formed beyond ``DENSE_MAX_SAMPLES`` points: the
degrees ``d = (W - diag W) 1`` take one reduction, and each product
``D^-1/2 (W - diag W) D^-1/2 V`` one more
(:class:`~kerneltools.linalg.NormalizedAffinityOperator` on
:class:`~kerneltools.linalg.OffDiagonalKernel`, which never sums the
diagonal); its top eigenvectors come from block Lanczos, ARPACK or LOBPCG,
each of which reaches its tolerance or escalates (see
:func:`lazy_spectral_embedding`). ``"nearest_neighbors"``
builds the sparse k-NN graph with kerneltools' :class:`NearestNeighbors` and
embeds it with scikit-learn's public :func:`sklearn.manifold.spectral_embedding`
(a sparse problem, as scikit-learn solves it). Precomputed affinities,
callables, sparse input and ``eigen_solver="amg"`` go to scikit-learn's own
classes (``fallback_``).

What lives here: the two estimators, in this module; the embeddings (lazy
kernel affinity, sparse k-NN graph) in :mod:`._embedding`; the label
assignments :func:`cluster_qr` and :func:`discretize` in :mod:`._labels`. What
it may import: the public API (:mod:`kerneltools.kernels`,
:mod:`kerneltools.linalg`), the estimators' shared helpers
(:mod:`.._shared`), :mod:`kerneltools._utils` and the neighbours family.
"""

from __future__ import annotations

import sys
import time
import warnings
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import validate_data

from ...kernels import PAIRWISE_KERNELS, make_kernel
from ..._utils._param_validation import Interval, StrOptions
from ..._utils._validation import validate_numeric
from .._shared._fallback import FallbackMixin, is_sparse
from .._shared._handover import HandOver
from ._embedding import (
    DENSE_MAX_SAMPLES,
    knn_affinity,
    lazy_spectral_embedding,
    sparse_embedding,
)
from ._labels import cluster_qr, discretize

__all__ = ["SpectralEmbedding", "SpectralClustering", "cluster_qr", "discretize",
           "DENSE_MAX_SAMPLES"]

_SOLVERS = {"arpack", "lobpcg", "amg", "lanczos"}

#: The relative residual of SpectralClustering's eigenvectors with
#: ``eigen_tol="auto"`` (SpectralEmbedding's: the solver's default, 1e-10 on
#: float64 data). The labels need the span of the eigenvectors only, to an
#: angle of about this over the gap after the k-th eigenvalue; 1e-10 takes
#: about 12 products more (n = 10^4, 10 planted clusters: 1e-6 in 13-15
#: products, 1e-12 in 27). scikit-learn's own "auto" is as loose for LOBPCG
#: and AMG (``tol=None``: LOBPCG's ``n sqrt(eps)``).
CLUSTERING_TOL = 1e-6

class _LazyAffinity:
    """The ``affinity_matrix_`` attribute of a lazy fit: the dense matrix is
    built only when read (n^2 memory then), never by ``fit``; a fit that
    stores a matrix (k-NN graph, fallback) sets it as a plain value."""

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        d = obj.__dict__
        if "_affinity_value" in d:
            return d["_affinity_value"]
        if "_affinity_source" not in d:
            raise AttributeError("'affinity_matrix_' is set by fit")
        X = d["_affinity_source"]
        return obj._affinity_kernel()(X).astype(X.dtype, copy=False)

    def __set__(self, obj, value):
        obj.__dict__["_affinity_value"] = value

    def __delete__(self, obj):
        obj.__dict__.pop("_affinity_value", None)


def _forget_affinity(est):
    est.__dict__.pop("_affinity_value", None)
    est.__dict__.pop("_affinity_source", None)


class SpectralEmbedding(HandOver, FallbackMixin, BaseEstimator):
    """Laplacian eigenmaps, with a lazy RBF affinity: linear memory.

    A drop-in for :class:`sklearn.manifold.SpectralEmbedding` (same
    parameters, attributes, and embedding up to the sign of each column).
    With ``affinity="rbf"`` the affinity and the Laplacian are never stored;
    ``affinity_matrix_`` is then built only if read.

    Parameters
    ----------
    n_components : int, default=2
    affinity : {"nearest_neighbors", "rbf", "precomputed",
        "precomputed_nearest_neighbors"} or callable, default="nearest_neighbors"
    gamma : float, optional
        RBF parameter; None: ``1 / n_features``.
    random_state : int, RandomState or None
    eigen_solver : {"arpack", "lobpcg", "amg", "lanczos"} or None
        On the engine: None, a dense eigendecomposition up to
        ``DENSE_MAX_SAMPLES`` points and block Lanczos beyond; "lanczos"
        block Lanczos, "arpack" SciPy's ARPACK and "lobpcg" LOBPCG (dense
        below ``5 k + 1`` points, as scikit-learn), on the lazy operator;
        "amg" goes to scikit-learn. An iterative solver that misses its
        tolerance falls back on the dense problem up to
        :data:`kerneltools.linalg.DENSE_MAX` points and raises
        :class:`~kerneltools.exceptions.ConvergenceError` beyond.
    eigen_tol : float or "auto", default="auto"
        Relative residual of the eigenvectors ("auto": the solver's default).
    n_neighbors : int, optional
        Neighbours of the k-NN graph; None: ``max(n_samples // 10, 1)``.
    n_jobs : int, optional
        Unused on the engine; passed to a fallback.
    backend : {"auto", "cpu", "cuda", "numpy"} or None, default=None
    verbose : int, default=0

    Attributes
    ----------
    embedding_ : ndarray of shape (n_samples, n_components)
    affinity_matrix_ : ndarray or sparse matrix of shape (n_samples, n_samples)
    gamma_ : float (rbf)
    n_neighbors_ : int (nearest_neighbors)
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators import SpectralEmbedding
    >>> X = np.random.default_rng(0).normal(size=(200, 3))
    >>> SpectralEmbedding(n_components=2, affinity="rbf").fit_transform(X).shape
    (200, 2)
    """

    _sklearn_class = "sklearn.manifold.SpectralEmbedding"
    affinity_matrix_ = _LazyAffinity()

    _parameter_constraints: ClassVar[dict] = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "affinity": [StrOptions({"nearest_neighbors", "rbf", "precomputed",
                                 "precomputed_nearest_neighbors"}), callable],
        "gamma": [Interval(Real, 0, None, closed="left"), None],
        "random_state": ["random_state"],
        "eigen_solver": [StrOptions(_SOLVERS), None],
        "eigen_tol": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "n_neighbors": [Interval(Integral, 1, None, closed="left"), None],
        "n_jobs": [None, Integral],
        "backend": ["backend"],
        "verbose": ["verbose"],
    }

    def __init__(self, n_components=2, *, affinity="nearest_neighbors", gamma=None,
                 random_state=None, eigen_solver=None, eigen_tol="auto",
                 n_neighbors=None, n_jobs=None, backend=None, verbose=0):
        self.n_components = n_components
        self.affinity = affinity
        self.gamma = gamma
        self.random_state = random_state
        self.eigen_solver = eigen_solver
        self.eigen_tol = eigen_tol
        self.n_neighbors = n_neighbors
        self.n_jobs = n_jobs
        self.backend = backend
        self.verbose = verbose

    def _engine_refuses(self, X, y=None):
        if self.affinity not in ("rbf", "nearest_neighbors"):
            return (f"affinity={self.affinity!r}" if isinstance(self.affinity, str)
                    else "a callable affinity")
        if is_sparse(X):
            return "sparse input"
        if self.eigen_solver == "amg":
            return "eigen_solver='amg'"
        return None

    def fit(self, X, y=None):
        """Compute the embedding of X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self : object
        """
        _forget_affinity(self)
        if self._hand_over(X):
            return self
        X = validate_numeric(self, X, dtype=[np.float64, np.float32],
                             ensure_min_samples=2)
        rng = check_random_state(self.random_state)
        start = time.perf_counter()
        if self.affinity == "nearest_neighbors":
            self.n_neighbors_ = (max(int(X.shape[0] / 10), 1) if self.n_neighbors is None
                                 else self.n_neighbors)
            self.affinity_matrix_ = knn_affinity(X, self.n_neighbors_)
            self.embedding_ = sparse_embedding(
                self.affinity_matrix_, self.n_components, drop_first=True,
                eigen_solver=self.eigen_solver, eigen_tol=self.eigen_tol,
                random_state=rng)
        else:
            self.gamma_ = 1.0 / X.shape[1] if self.gamma is None else self.gamma
            kernel = self._affinity_kernel()
            self.__dict__["_affinity_source"] = X
            self.embedding_ = lazy_spectral_embedding(
                kernel, X, self.n_components, drop_first=True,
                eigen_solver=self.eigen_solver, eigen_tol=self.eigen_tol,
                random_state=rng, backend=self.backend, verbose=self.verbose)
        if self.verbose:
            print(f"[SpectralEmbedding] {self.affinity} affinity, {len(X)} points: "
                  f"{time.perf_counter() - start:.2f} s", file=sys.stderr)
        return self

    def _affinity_kernel(self):
        return make_kernel("rbf", gamma=self.gamma_)

    def fit_transform(self, X, y=None):
        """Compute the embedding of X and return it.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The samples (of shape (n_samples, n_samples): the affinities or
            neighbours' graph, with a precomputed ``affinity``).
        y : None
            Ignored.

        Returns
        -------
        ndarray of shape (n_samples, n_components)
            The embedding, ``embedding_``.
        """
        self.fit(X)
        return self.embedding_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.pairwise = self.affinity in ("precomputed",
                                                      "precomputed_nearest_neighbors")
        return tags


class SpectralClustering(HandOver, FallbackMixin, ClusterMixin, BaseEstimator):
    """Spectral clustering with a lazy kernel affinity: linear memory.

    A drop-in for :class:`sklearn.cluster.SpectralClustering` (same
    parameters and attributes; labels equal up to a permutation where the
    embedding is well determined). With a named kernel as ``affinity`` (the
    default ``"rbf"``), the embedding is :func:`lazy_spectral_embedding`;
    ``affinity_matrix_`` is then built only if read. Labels from the
    embedding as scikit-learn: k-means (:func:`sklearn.cluster.k_means`),
    :func:`discretize` or :func:`cluster_qr`.

    Parameters
    ----------
    n_clusters : int, default=8
    eigen_solver : {"arpack", "lobpcg", "amg", "lanczos"} or None
        As :class:`SpectralEmbedding`.
    n_components : int, optional
        Eigenvectors used; None: ``n_clusters``.
    random_state : int, RandomState or None
    n_init : int, default=10
        k-means restarts.
    gamma : float, default=1.0
    affinity : str or callable, default="rbf"
        A name of ``sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS``
        (engine), "nearest_neighbors" (our k-NN graph), "precomputed",
        "precomputed_nearest_neighbors" or a callable (scikit-learn).
    n_neighbors : int, default=10
    eigen_tol : float or "auto", default="auto"
    assign_labels : {"kmeans", "discretize", "cluster_qr"}, default="kmeans"
    degree, coef0 : float
    kernel_params : dict, optional
    n_jobs : int, optional
    verbose : bool, default=False
    backend : {"auto", "cpu", "cuda", "numpy"} or None, default=None

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
    affinity_matrix_ : ndarray or sparse matrix of shape (n_samples, n_samples)
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators import SpectralClustering
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(0, 0.1, (50, 2)), rng.normal(3, 0.1, (50, 2))])
    >>> labels = SpectralClustering(n_clusters=2, random_state=0).fit_predict(X)
    >>> len(set(labels[:50])), len(set(labels[50:])), labels[0] != labels[-1]
    (1, 1, np.True_)
    """

    _sklearn_class = "sklearn.cluster.SpectralClustering"
    affinity_matrix_ = _LazyAffinity()

    _parameter_constraints: ClassVar[dict] = {
        "n_clusters": [Interval(Integral, 1, None, closed="left")],
        "eigen_solver": [StrOptions(_SOLVERS), None],
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
        "n_init": [Interval(Integral, 1, None, closed="left")],
        "gamma": [Interval(Real, 0, None, closed="left")],
        "affinity": [callable, StrOptions({*PAIRWISE_KERNELS, "nearest_neighbors",
                                           "precomputed", "precomputed_nearest_neighbors"})],
        "n_neighbors": [Interval(Integral, 1, None, closed="left")],
        "eigen_tol": [Interval(Real, 0.0, None, closed="left"), StrOptions({"auto"})],
        "assign_labels": [StrOptions({"kmeans", "discretize", "cluster_qr"})],
        "degree": [Interval(Real, 0, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "kernel_params": [dict, None],
        "n_jobs": [Integral, None],
        "verbose": ["verbose"],
        "backend": ["backend"],
    }

    def __init__(self, n_clusters=8, *, eigen_solver=None, n_components=None,
                 random_state=None, n_init=10, gamma=1.0, affinity="rbf", n_neighbors=10,
                 eigen_tol="auto", assign_labels="kmeans", degree=3, coef0=1,
                 kernel_params=None, n_jobs=None, verbose=False, backend=None):
        self.n_clusters = n_clusters
        self.eigen_solver = eigen_solver
        self.n_components = n_components
        self.random_state = random_state
        self.n_init = n_init
        self.gamma = gamma
        self.affinity = affinity
        self.n_neighbors = n_neighbors
        self.eigen_tol = eigen_tol
        self.assign_labels = assign_labels
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.backend = backend

    def _engine_refuses(self, X, y=None):
        if callable(self.affinity):
            return "a callable affinity"
        if self.affinity in ("precomputed", "precomputed_nearest_neighbors"):
            return f"affinity={self.affinity!r}"
        if is_sparse(X):
            return "sparse input"
        if self.eigen_solver == "amg":
            return "eigen_solver='amg'"
        return None

    def _affinity_kernel(self):
        # as scikit-learn: the named kernel with this estimator's gamma, degree
        # and coef0 (they override any in kernel_params)
        return make_kernel(self.affinity, gamma=self.gamma, degree=self.degree,
                           coef0=self.coef0)

    def fit(self, X, y=None):
        """Cluster X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self : object
        """
        _forget_affinity(self)
        if self._hand_over(X):
            return self
        X = validate_data(self, X, dtype=np.float64, ensure_min_samples=2)
        if X.shape[0] == X.shape[1]:
            warnings.warn("The spectral clustering API has changed. ``fit``now constructs "
                          "an affinity matrix from data. To use a custom affinity matrix, "
                          "set ``affinity=precomputed``.", stacklevel=2)
        rng = check_random_state(self.random_state)
        k = self.n_clusters if self.n_components is None else self.n_components
        if self.affinity == "nearest_neighbors":
            self.affinity_matrix_ = knn_affinity(X, self.n_neighbors)
            maps = sparse_embedding(self.affinity_matrix_, k, drop_first=False,
                                     eigen_solver=self.eigen_solver,
                                     eigen_tol=self.eigen_tol, random_state=rng)
        else:
            kernel = self._affinity_kernel()
            self.__dict__["_affinity_source"] = X
            maps = lazy_spectral_embedding(kernel, X, k, drop_first=False,
                                           eigen_solver=self.eigen_solver,
                                           eigen_tol=self.eigen_tol, random_state=rng,
                                           backend=self.backend,
                                           verbose=int(self.verbose),
                                           auto_tol=CLUSTERING_TOL)
        if self.verbose:
            print(f"Computing label assignment using {self.assign_labels}")
        if self.assign_labels == "kmeans":
            from sklearn.cluster import k_means

            _, self.labels_, _ = k_means(maps, self.n_clusters, random_state=rng,
                                         n_init=self.n_init, verbose=self.verbose)
        elif self.assign_labels == "cluster_qr":
            self.labels_ = cluster_qr(maps)
        else:
            self.labels_ = discretize(maps, random_state=rng)
        return self

    def fit_predict(self, X, y=None):
        """Cluster X and return the labels.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The samples (of shape (n_samples, n_samples): the affinities or
            neighbours' graph, with a precomputed ``affinity``).
        y : None
            Ignored.

        Returns
        -------
        ndarray of shape (n_samples,)
            The cluster of each sample, ``labels_``.
        """
        return self.fit(X).labels_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.pairwise = self.affinity in ("precomputed",
                                                      "precomputed_nearest_neighbors")
        return tags
