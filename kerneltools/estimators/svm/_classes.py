"""The public SVMs: SVC, NuSVC, SVR, NuSVR and OneClassSVM."""

from __future__ import annotations

import numpy as np
from sklearn.base import OutlierMixin, RegressorMixin

from ._base import BaseSVM
from ._classifiers import BaseSVC
from ._problems import epsilon_svr, nu_svr, one_class

__all__ = ["SVC", "SVR", "NuSVC", "NuSVR", "OneClassSVM"]

_COMMON_DOC = """
    kernel : {"linear", "poly", "rbf", "sigmoid", "precomputed"} or callable
        libsvm's kernels. ``"precomputed"``, callables and sparse ``X`` are
        handed to scikit-learn's class (``fallback_``).
    degree, gamma, coef0 : as scikit-learn's (``gamma`` "scale", "auto" or >= 0)
    tol : float, default=1e-3
        libsvm's stopping rule: the maximal violating pair's gap below ``tol``.
    shrinking : bool, default=True
        libsvm's shrinking of the bounded variables that cannot move (the
        optimum does not depend on it; the stopping rule is checked on all).
    cache_size : accepted for compatibility (the solver keeps no cache)
    verbose : bool or int
        Progress of the solver: each outer step, the maximal violation, the
        support vectors so far (and the pairs of a multiclass fit).
    max_iter : int, default=-1
        Cap on SMO iterations (-1: none); reaching it warns as scikit-learn.
"""


class SVC(BaseSVC):
    __doc__ = """C-support vector classification, libsvm's solution on the engine.

    The dual of each pair of classes (one-vs-one) is solved to libsvm's
    tolerance by a large-working-set decomposition (:mod:`._solver`) whose
    gradient updates are kernel reductions over all points, never an ``n x n``
    matrix. Constructor, attributes and results are scikit-learn's
    :class:`sklearn.svm.SVC`'s.

    Parameters
    ----------
    C : float, default=1.0
        Regularisation: the bound of each dual variable (times its sample and
        class weight).
    """ + _COMMON_DOC + """
    probability : bool, default="deprecated"
        True: libsvm's Platt scaling of each pair's decision values, fitted on
        5-fold cross-validation (``predict_proba``, ``probA_``, ``probB_``).
    class_weight : dict or "balanced", optional
    decision_function_shape : {"ovr", "ovo"}, default="ovr"
    break_ties : bool, default=False
    random_state : int, RandomState or None
        Seeds the folds of ``probability=True`` only.

    Attributes
    ----------
    support_, support_vectors_, n_support_, dual_coef_, intercept_,
    fit_status_, n_iter_, classes_, class_weight_, shape_fit_ : as scikit-learn's

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators import SVC
    >>> X = np.array([[-1, -1], [-2, -1], [1, 1], [2, 1]])
    >>> y = np.array([1, 1, 2, 2])
    >>> SVC(kernel="linear").fit(X, y).predict([[-0.8, -1]])
    array([1])
    """

    _impl = "c_svc"
    _sklearn_class = "sklearn.svm.SVC"
    _parameter_constraints = {k: v for k, v in BaseSVC._parameter_constraints.items()}

    def __init__(self, *, C=1.0, kernel="rbf", degree=3, gamma="scale", coef0=0.0,
                 shrinking=True, probability="deprecated", tol=1e-3, cache_size=200,
                 class_weight=None, verbose=False, max_iter=-1,
                 decision_function_shape="ovr", break_ties=False, random_state=None):
        self.C = C
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.shrinking = shrinking
        self.probability = probability
        self.tol = tol
        self.cache_size = cache_size
        self.class_weight = class_weight
        self.verbose = verbose
        self.max_iter = max_iter
        self.decision_function_shape = decision_function_shape
        self.break_ties = break_ties
        self.random_state = random_state


class NuSVC(BaseSVC):
    __doc__ = """nu-support vector classification (libsvm's ``Solver_NU``) on the engine.

    As scikit-learn's :class:`sklearn.svm.NuSVC`; ``nu`` in (0, 1] bounds the
    fraction of margin errors from above and of support vectors from below.

    Parameters
    ----------
    nu : float, default=0.5
    """ + _COMMON_DOC + """
    probability, class_weight, decision_function_shape : as :class:`SVC`
    break_ties, random_state : as :class:`SVC`

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators import NuSVC
    >>> X = np.array([[-1, -1], [-2, -1], [1, 1], [2, 1]])
    >>> NuSVC().fit(X, [1, 1, 2, 2]).predict([[-0.8, -1]])
    array([1])
    """

    _impl = "nu_svc"
    _sklearn_class = "sklearn.svm.NuSVC"
    _parameter_constraints = {
        **{k: v for k, v in BaseSVC._parameter_constraints.items() if k != "C"},
        "nu": BaseSVM._parameter_constraints["nu"],
    }

    def __init__(self, *, nu=0.5, kernel="rbf", degree=3, gamma="scale", coef0=0.0,
                 shrinking=True, probability="deprecated", tol=1e-3, cache_size=200,
                 class_weight=None, verbose=False, max_iter=-1,
                 decision_function_shape="ovr", break_ties=False, random_state=None):
        self.nu = nu
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.shrinking = shrinking
        self.probability = probability
        self.tol = tol
        self.cache_size = cache_size
        self.class_weight = class_weight
        self.verbose = verbose
        self.max_iter = max_iter
        self.decision_function_shape = decision_function_shape
        self.break_ties = break_ties
        self.random_state = random_state


class _Regressor(RegressorMixin, BaseSVM):
    """SVR and NuSVR: one problem on ``2n`` variables; prediction ``f(x)``."""

    def _fit_kept(self, X, y, W, removed):
        kernel = self._data_kernel(X)
        if self._impl == "nu_svr":
            dual = nu_svr(kernel, y, W, self.C, self.nu, **self._solver_options())
        else:
            dual = epsilon_svr(kernel, y, W, self.C, self.epsilon,
                               **self._solver_options())
        self._set_single(X, dual, removed)

    def predict(self, X):
        """Predicted targets of the samples in X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        if self._delegating():
            return self.fallback_.predict(X)
        return self._raw_decision(self._validate_for_predict(X))[:, 0]


class SVR(_Regressor):
    __doc__ = """epsilon-support vector regression, libsvm's solution on the engine.

    As scikit-learn's :class:`sklearn.svm.SVR`.

    Parameters
    ----------
    C : float, default=1.0
    epsilon : float, default=0.1
        Half-width of the tube in which errors cost nothing.
    """ + _COMMON_DOC + """
    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators import SVR
    >>> X = np.linspace(0, 5, 40)[:, None]
    >>> model = SVR(C=10).fit(X, np.sin(X[:, 0]))
    >>> bool(model.score(X, np.sin(X[:, 0])) > 0.95)
    True
    """

    _impl = "epsilon_svr"
    _sklearn_class = "sklearn.svm.SVR"
    _parameter_constraints = {k: v for k, v in BaseSVM._parameter_constraints.items()
                              if k not in ("class_weight", "nu", "probability",
                                           "random_state")}

    def __init__(self, *, kernel="rbf", degree=3, gamma="scale", coef0=0.0, tol=1e-3,
                 C=1.0, epsilon=0.1, shrinking=True, cache_size=200, verbose=False,
                 max_iter=-1):
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.tol = tol
        self.C = C
        self.epsilon = epsilon
        self.shrinking = shrinking
        self.cache_size = cache_size
        self.verbose = verbose
        self.max_iter = max_iter


class NuSVR(_Regressor):
    __doc__ = """nu-support vector regression (libsvm's ``Solver_NU``) on the engine.

    As scikit-learn's :class:`sklearn.svm.NuSVR`.

    Parameters
    ----------
    nu : float, default=0.5
    C : float, default=1.0
    """ + _COMMON_DOC + """
    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators import NuSVR
    >>> X = np.linspace(0, 5, 40)[:, None]
    >>> model = NuSVR(C=10).fit(X, np.sin(X[:, 0]))
    >>> bool(model.score(X, np.sin(X[:, 0])) > 0.95)
    True
    """

    _impl = "nu_svr"
    _sklearn_class = "sklearn.svm.NuSVR"
    _parameter_constraints = {k: v for k, v in BaseSVM._parameter_constraints.items()
                              if k not in ("class_weight", "epsilon", "probability",
                                           "random_state")}

    def __init__(self, *, nu=0.5, C=1.0, kernel="rbf", degree=3, gamma="scale",
                 coef0=0.0, shrinking=True, tol=1e-3, cache_size=200, verbose=False,
                 max_iter=-1):
        self.nu = nu
        self.C = C
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.shrinking = shrinking
        self.tol = tol
        self.cache_size = cache_size
        self.verbose = verbose
        self.max_iter = max_iter


class OneClassSVM(OutlierMixin, BaseSVM):
    __doc__ = """Unsupervised outlier detection (libsvm's one-class SVM) on the engine.

    As scikit-learn's :class:`sklearn.svm.OneClassSVM`; ``offset_`` is
    ``-intercept_`` and ``decision_function = score_samples - offset_``.

    Parameters
    ----------
    nu : float, default=0.5
        Upper bound on the fraction of training errors, lower bound on the
        fraction of support vectors.
    """ + _COMMON_DOC + """
    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators import OneClassSVM
    >>> X = [[0], [0.44], [0.45], [0.46], [1]]
    >>> OneClassSVM(gamma="auto").fit(X).predict(X)
    array([-1,  1,  1,  1, -1])
    """

    _impl = "one_class"
    _sklearn_class = "sklearn.svm.OneClassSVM"
    _parameter_constraints = {k: v for k, v in BaseSVM._parameter_constraints.items()
                              if k not in ("class_weight", "C", "epsilon",
                                           "probability", "random_state")}

    def __init__(self, *, kernel="rbf", degree=3, gamma="scale", coef0=0.0, tol=1e-3,
                 nu=0.5, shrinking=True, cache_size=200, verbose=False, max_iter=-1):
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.tol = tol
        self.nu = nu
        self.shrinking = shrinking
        self.cache_size = cache_size
        self.verbose = verbose
        self.max_iter = max_iter

    def _fit_kept(self, X, y, W, removed):
        dual = one_class(self._data_kernel(X), W, self.nu, **self._solver_options())
        self._set_single(X, dual, removed)

    def fit(self, X, y=None, sample_weight=None):
        """Detect the soft boundary of the set of samples X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : ignored
        sample_weight : array-like of shape (n_samples,), optional

        Returns
        -------
        self : object
        """
        super().fit(X, None, sample_weight=sample_weight)
        self.offset_ = -self._intercept_
        return self

    def decision_function(self, X):
        """Signed distance to the separating hyperplane (> 0 for inliers).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        if self._delegating():
            return self.fallback_.decision_function(X)
        return self._raw_decision(self._validate_for_predict(X))[:, 0]

    def score_samples(self, X):
        """Raw scores ``decision_function(X) + offset_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self.decision_function(X) + self.offset_

    def predict(self, X):
        """+1 for inliers, -1 for outliers.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        if self._delegating():
            return self.fallback_.predict(X)
        dec = self.decision_function(X)
        return np.where(dec > 0, 1, -1).astype(np.intp)
