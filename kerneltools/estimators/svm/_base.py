"""What the five SVMs share: parameters, validation, the fit driver, the
decision function as one kernel product, and the hand-over to scikit-learn.

Fitted attributes follow scikit-learn's (libsvm's layout): ``support_``
indexes the rows that kept a positive sample weight, as scikit-learn's does;
``_dual_coef_`` and ``_intercept_`` are libsvm's signs (``intercept = -rho``),
the public ``dual_coef_`` and ``intercept_`` flip them for binary classifiers
as scikit-learn does.
"""

from __future__ import annotations

import sys
import warnings
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from .._shared._fallback import FallbackMixin, is_sparse
from ..._utils._param_validation import Interval, StrOptions, validate_params
from sklearn.utils.validation import validate_data
from ._kernel_ops import DataKernel, cross_apply, svm_kernel
from . import _solver

__all__ = ["BaseSVM"]

#: Copied from a scikit-learn fit handed over (its private fitted state, read
#: by its own methods and by scikit-learn's tests).
_PRIVATE_STATE = ("_gamma", "_sparse", "_n_support", "_probA", "_probB",
                  "_effective_probability", "_num_iter")


class BaseSVM(FallbackMixin, BaseEstimator):
    """The shared machinery; subclasses set ``_impl`` and ``_solve``."""

    _impl: ClassVar[str] = ""
    _parameter_constraints: ClassVar[dict] = {
        # scikit-learn's BaseLibSVM's
        "kernel": [StrOptions({"linear", "poly", "rbf", "sigmoid", "precomputed"}),
                   callable],
        "degree": [Interval(Integral, 0, None, closed="left")],
        "gamma": [StrOptions({"scale", "auto"}), Interval(Real, 0.0, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "tol": [Interval(Real, 0.0, None, closed="neither")],
        "C": [Interval(Real, 0.0, None, closed="right")],
        "nu": [Interval(Real, 0.0, 1.0, closed="right")],
        "epsilon": [Interval(Real, 0.0, None, closed="left")],
        "shrinking": ["boolean"],
        "probability": ["boolean", StrOptions({"deprecated"})],
        "cache_size": [Interval(Real, 0, None, closed="neither")],
        "class_weight": [StrOptions({"balanced"}), dict, None],
        "verbose": ["verbose"],
        "max_iter": [Interval(Integral, -1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self.kernel == "precomputed"
        tags.input_tags.sparse = self.kernel != "precomputed"
        return tags

    # -- the hand-over ------------------------------------------------------
    def _engine_refuses(self, X, y=None):
        """Why the engine cannot fit (types and parameters only), or None."""
        if is_sparse(X):
            return "sparse X"
        if callable(self.kernel):
            return "a callable kernel"
        if self.kernel == "precomputed":
            return "kernel='precomputed'"
        return None

    def _fit_fallback(self, reason, *args, **kwargs):
        super()._fit_fallback(reason, *args, **kwargs)
        for name in _PRIVATE_STATE:
            if hasattr(self.fallback_, name):
                setattr(self, name, getattr(self.fallback_, name))
                self._fallback_names.append(name)
        return self

    # -- fit ----------------------------------------------------------------
    def fit(self, X, y=None, sample_weight=None):
        """Fit the SVM on the training data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Class labels or targets (ignored by ``OneClassSVM``).
        sample_weight : array-like of shape (n_samples,), optional
            Per-sample weights: each rescales ``C`` (and the ``nu`` budgets).

        Returns
        -------
        self : object
        """
        validate_params(self)
        if self._impl in ("c_svc", "nu_svc") and self.probability != "deprecated":
            warnings.warn(
                "The `probability` parameter was deprecated in 1.9 and will be "
                "removed in version 1.11. Use `CalibratedClassifierCV("
                f"{type(self).__name__}(), ensemble=False)` instead of "
                f"`{type(self).__name__}(probability=True)`", FutureWarning)
        reason = self._engine_refuses(X, y)
        if reason:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # said above
                return self._fit_fallback(reason, X, y, sample_weight=sample_weight)
        self._drop_fallback()
        if self._impl == "one_class":
            X = validate_data(self, X, dtype=np.float64, order="C")
        else:
            X, y = validate_data(self, X, y, dtype=np.float64, order="C",
                                    y_numeric=self._impl in ("epsilon_svr", "nu_svr"))
        y = self._validate_targets(y, len(X))
        W = _sample_weight(sample_weight, len(X))
        self._sparse = False
        self._effective_probability = False
        self._gamma = _resolve_gamma(self.gamma, X)
        if self.verbose:
            print("[LibSVM]", end="", flush=True)
        keep = np.flatnonzero(W > 0)
        if keep.size == 0:
            raise ValueError("Invalid input - all samples have zero or negative weights.")
        self._fit_kept(X[keep], None if y is None else y[keep], W[keep],
                       removed=keep.size < len(X))
        self.shape_fit_ = X.shape
        self._public_state()
        self._warn_from_fit_status()
        return self

    def _public_state(self):
        """The public attributes from libsvm's (scikit-learn's sign flip for
        binary classifiers), checked finite as scikit-learn does."""
        self._intercept_ = np.asarray(self._intercept_, dtype=np.float64)
        self.dual_coef_ = self._dual_coef_
        self.intercept_ = self._intercept_.copy()
        if self._impl in ("c_svc", "nu_svc") and len(self.classes_) == 2:
            self.intercept_ = -self.intercept_
            self.dual_coef_ = -self.dual_coef_
        if not (np.isfinite(self._intercept_).all() and np.isfinite(self._dual_coef_).all()):
            raise ValueError("The dual coefficients or intercepts are not finite. The "
                             "input data may contain large values and need to be "
                             "preprocessed.")
        self.n_iter_ = (self._num_iter if self._impl in ("c_svc", "nu_svc")
                        else int(self._num_iter[0]))

    def _validate_targets(self, y, n):
        """Regression and one-class targets: float64 (overridden by the classifiers)."""
        if y is None:
            return None
        return np.asarray(y, dtype=np.float64).reshape(-1)

    def _solver_options(self) -> dict:
        return {"eps": float(self.tol), "max_iter": int(self.max_iter),
                "q": _solver.WORKING_SET, "verbose": int(self.verbose),
                "shrinking": bool(self.shrinking)}

    def _data_kernel(self, X):
        kernel = svm_kernel(self.kernel, gamma=self._gamma, degree=self.degree,
                            coef0=self.coef0)
        rbf = isinstance(self.kernel, str) and self.kernel == "rbf"
        return DataKernel(kernel, X, rbf_gamma=self._gamma if rbf else None)

    def _set_single(self, X, dual, removed_rows):
        """Fitted state of a regression or one-class problem (one ``Dual``)."""
        sv = np.flatnonzero(dual.coef)
        self.support_ = sv.astype(np.int32)
        self.support_vectors_ = X[sv]
        self._dual_coef_ = dual.coef[sv][None, :]
        self._intercept_ = np.array([-dual.rho])
        self._n_support = np.array([sv.size, sv.size], dtype=np.int32)
        self._num_iter = np.array([dual.n_iter], dtype=np.intc)
        self.fit_status_ = int(dual.timed_out)
        self._probA = self._probB = np.empty(0)

    def _warn_from_fit_status(self):
        if self.fit_status_ == 1:
            warnings.warn(f"Solver terminated early (max_iter={self.max_iter}).  Consider "
                          "pre-processing your data with StandardScaler or "
                          "MinMaxScaler.", ConvergenceWarning)

    # -- prediction ---------------------------------------------------------
    def _validate_for_predict(self, X):
        check_is_fitted(self)
        if is_sparse(X):
            raise ValueError(f"cannot use sparse input in {type(self).__name__!r} "
                             "trained on dense data")
        X = validate_data(self, X, dtype=np.float64, order="C", reset=False)
        sv = self.support_vectors_
        if sv.size > 0 and self.n_support_.sum() != sv.shape[0]:
            raise ValueError(f"The internal representation of {type(self).__name__} "
                             "was altered")
        return X

    def _raw_decision(self, X):
        """libsvm's decision values (``sum coef K - rho``, libsvm's signs), one
        column per problem: one product ``K(X, SV) @ W`` for all of them."""
        W = self._coef_columns()
        kernel = svm_kernel(self.kernel, gamma=self._gamma, degree=self.degree,
                            coef0=self.coef0)
        if self.support_vectors_.shape[0] == 0:
            return np.zeros((len(X), W.shape[1])) + self._intercept_
        return cross_apply(kernel, X, self.support_vectors_, W) + self._intercept_

    def _coef_columns(self):
        """(n_SV, n_problems): each problem's coefficient of each support vector."""
        return self._dual_coef_.T

    @property
    def n_support_(self):
        """Number of support vectors for each class (one count for SVR and
        one-class)."""
        try:
            check_is_fitted(self)
        except Exception as exc:  # scikit-learn's: hasattr says False
            raise AttributeError("n_support_") from exc
        if self._impl in ("c_svc", "nu_svc"):
            return self._n_support
        return np.array([self._n_support[0]])

    @property
    def coef_(self):
        """Weights of the features (``kernel="linear"`` only), read-only."""
        if self.kernel != "linear":
            raise AttributeError("coef_ is only available when using a linear kernel")
        if self._delegating():
            return self.fallback_.coef_
        coef = self._linear_coef()
        coef.flags.writeable = False
        return coef

    def _linear_coef(self):
        return self._dual_coef_ @ self.support_vectors_

    def _say(self, msg):
        if self.verbose:
            print(f"[{type(self).__name__}] {msg}", file=sys.stderr, flush=True)


def _sample_weight(sample_weight, n):
    """Per-sample weights as scikit-learn's SVMs take them (ones when None)."""
    W = np.asarray([] if sample_weight is None else sample_weight, dtype=np.float64)
    if W.ndim == 0:
        W = np.full(n, float(W))
    if W.ndim != 1:
        raise ValueError("Sample weights must be 1D array or scalar")
    if W.shape[0] > 0 and W.shape[0] != n:
        raise ValueError("sample_weight and X have incompatible shapes: %r vs %r\n"
                         "Note: Sparse matrices cannot be indexed w/boolean masks "
                         "(use `indices=True` in CV)." % (W.shape, (n,)))
    return np.ones(n) if W.shape[0] == 0 else W


def _resolve_gamma(gamma, X):
    """scikit-learn's ``gamma``: "scale" is ``1 / (n_features X.var())``."""
    if gamma == "scale":
        var = X.var()
        return 1.0 / (X.shape[1] * var) if var != 0 else 1.0
    if gamma == "auto":
        return 1.0 / X.shape[1]
    return float(gamma)
