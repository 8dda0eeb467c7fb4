"""Shared docstring sections of the k-NN estimators."""

_COMMON_DOC = """
    algorithm : {'auto', 'ball_tree', 'kd_tree', 'brute'}, default='auto'
        'brute' compares every pair, in linear memory. A metric that
        scikit-learn's chosen tree lacks raises its ValueError (e.g. 'kd_tree'
        with 'cosine'), as does Minkowski with p < 1 and a tree. Otherwise, for
        the Euclidean metrics in at most 3 features and at least 1,000 fitted
        points, pruning is enabled (``_fit_method == 'block_sparse'``): a
        K-nearest search of at least 2^24 query x fitted pairs cuts the points
        into cells along a Z-order curve and visits only the cells that can hold
        a neighbour (one block-sparse reduction, exact; smaller searches run
        brute force); elsewhere every search is brute force (``_fit_method ==
        'brute'``).
    leaf_size : int, default=30
        Accepted for compatibility, unused (there is no tree).
    metric : str, callable or DistanceMetric, default='minkowski'
        'euclidean' ('l2'), 'sqeuclidean', 'manhattan' ('cityblock', 'l1'),
        'chebyshev' ('infinity'), 'minkowski' (with ``p``; p = 1, 2, inf
        become manhattan, euclidean, chebyshev as in scikit-learn), 'cosine',
        'correlation', 'braycurtis', 'canberra', 'seuclidean', 'mahalanobis',
        'haversine' (2 features: latitude, longitude in radians),
        'nan_euclidean' (the only one that accepts NaN in X), 'hamming', and
        the boolean metrics 'jaccard', 'dice', 'rogerstanimoto',
        'russellrao', 'sokalsneath', 'yule' (data converted to bool, nonzero
        True, with scikit-learn's DataConversionWarning). Each is a formula
        reduced by the engine; their definitions and 0/0 conventions, those of
        scikit-learn's brute force, are in ``neighbors._metrics``. A callable
        is first called with LazyTensors ``(x_i, y_j,
        **metric_params)``: if it returns a scalar LazyTensor formula, that
        formula is the distance, reduced at full speed. What the engine does
        not serve is fitted by scikit-learn's class of the same name, whose
        results, attributes and errors are then ours (``fallback_``): a
        callable of two 1-D arrays (scikit-learn's convention), a
        ``DistanceMetric`` object, 'precomputed' (X a square matrix of
        distances), sparse X, a ``KDTree``, ``BallTree`` or fitted
        scikit-learn estimator as X.
    p : float, default=2
        Power of the Minkowski metric.
    metric_params : dict, default=None
        Extra metric arguments: ``p`` and ``w`` (per-feature weights) for
        'minkowski'; ``V`` (per-feature variances; default: those of the
        fitted X, ddof=1) for 'seuclidean'; ``VI`` (inverse covariance) or
        ``V`` (covariance) for 'mahalanobis' (default: from the covariance of
        the fitted X, as scikit-learn's ``kneighbors()``); keyword arguments
        of a callable metric.
    n_jobs : int, default=None
        Accepted for compatibility; the reductions use every OpenMP thread.
    backend : {'auto', 'cpu', 'cuda', 'numpy'} or None, default=None
        Where the reductions run; None: the configured backend
        (:func:`kerneltools.config_context`, else ``KERNELTOOLS_BACKEND``,
        else 'auto', the fastest available). ``fit`` raises
        :class:`~kerneltools.exceptions.BackendUnavailableError` for one that
        cannot run here.
    dtype : {'float32', 'float64'} or None, default=None
        Precision of the computation; None keeps float32 data in float32
        and computes everything else in float64.
"""
_ATTRIBUTES_DOC = """
    effective_metric_ : str or callable
        The metric used (minkowski with p = 1, 2, inf renamed).
    effective_metric_params_ : dict
        Its parameters.
    n_features_in_ : int
        Number of features seen during :meth:`fit`.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features, when X had string column names.
    n_samples_fit_ : int
        Number of fitted points."""

_FALLBACK_DOC = """
    fallback_ : estimator
        scikit-learn's fitted estimator, when the fit was handed to it (see
        ``metric``); absent otherwise.
"""

_ARRAY_API_DOC = """
    Notes
    -----
    Array API and device arrays (``kerneltools._utils._array_api`` and
    ``neighbors._device``): CuPy arrays always, and with
    ``sklearn.set_config(array_api_dispatch=True)`` CPU torch tensors,
    array-api-strict arrays and CUDA torch tensors are served where they
    are. Host arrays are searched through a zero-copy NumPy view; on a GPU
    (backend 'auto' or 'cuda') the brute-force K-min reductions take the
    device arrays, and the distances, indices, votes and means stay there.
    Every output (``kneighbors``, ``predict``, ``predict_proba``), the fitted
    arrays and numeric ``classes_`` are in the namespace and on the device
    of X; ``y`` follows X. The pruned search (D <= 3) builds its cells on
    the host: on a GPU the queries are copied there once per call and the
    results back. ``radius_neighbors`` returns a NumPy object array of rows
    in X's namespace and device (the Array API has no ragged arrays), the
    graph methods SciPy matrices. Metrics other than the euclidean,
    sqeuclidean, manhattan, chebyshev and unweighted minkowski ones compute
    device arrays on the host (one copy per call). A query in another
    namespace or on another device than the fit's raises ``ValueError``.
    scikit-learn 1.9's k-NN estimators do not support ``array_api_dispatch``.
"""
