"""The classifiers' share: one-vs-one training, libsvm's layout, voting.

libsvm trains one C-SVC (or nu-SVC) per pair of classes ``i < j`` on the
points of the two classes, class ``i`` as +1, in class order then point
order. The support vectors are the points nonzero in any pair, grouped by
class; ``dual_coef_`` has ``n_classes - 1`` rows: for the pair ``(i, j)`` the
coefficients of ``i``'s vectors are in row ``j - 1``, those of ``j``'s in
row ``i``. Decision values of every pair come from one product
``K(X, SV) @ W`` (``W`` is ``n_SV x n_pairs``, zero off the pair).
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils.metaestimators import available_if
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from ..._utils._param_validation import StrOptions
from ._base import BaseSVM
from ._kernel_ops import cross_apply
from ._platt import LibsvmRandom, cv_decision_values, multiclass_probability, \
    pairwise_probability, sigmoid_train
from ._problems import c_svc, nu_svc

__all__ = ["BaseSVC"]


class BaseSVC(ClassifierMixin, BaseSVM):
    """One-vs-one training and prediction of SVC and NuSVC."""

    _parameter_constraints = {
        **{k: v for k, v in BaseSVM._parameter_constraints.items()
           if k not in ("epsilon", "nu")},
        "decision_function_shape": [StrOptions({"ovr", "ovo"})],
        "break_ties": ["boolean"],
    }

    def _validate_targets(self, y, n):
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y.ravel()
        check_classification_targets(y)
        classes, codes = np.unique(y, return_inverse=True)
        self.class_weight_ = compute_class_weight(self.class_weight, classes=classes,
                                                  y=y)
        if len(classes) < 2:
            raise ValueError("The number of classes has to be greater than one; got "
                             f"{len(classes)} class")
        self.classes_ = classes
        return codes.astype(np.intp)

    def _fit_kept(self, X, y, W, removed):
        k = len(self.classes_)
        if removed and np.unique(y).size < 2 and self._impl == "c_svc":
            raise ValueError("Invalid input - all samples with positive weights belong "
                             "to the same class.")
        if self._impl == "nu_svc":
            _check_nu(self.nu, np.bincount(y, weights=W, minlength=k))
        members = [np.flatnonzero(y == c) for c in range(k)]
        duals, pairs, probA, probB = [], [], [], []
        platt = None
        if self.probability is True:  # scikit-learn's seed of its libsvm
            seed = check_random_state(self.random_state).randint(np.iinfo("i").max)
            platt = LibsvmRandom(seed)
        for i in range(k):
            for j in range(i + 1, k):
                pts = np.concatenate([members[i], members[j]])
                sign = np.concatenate([np.ones(len(members[i])),
                                       -np.ones(len(members[j]))])
                if platt is not None:
                    a, b = self._platt_pair(X[pts], sign, W[pts], i, j, platt)
                    probA.append(a)
                    probB.append(b)
                duals.append(self._solve_pair(X[pts], sign, W[pts], i, j))
                pairs.append((i, j, pts))
                self._say(f"pair ({i}, {j}): {duals[-1].n_iter} iterations")
        self._set_ovo(X, duals, pairs, members)
        if platt is not None:
            self._probA, self._probB = np.array(probA), np.array(probB)
            self._effective_probability = True

    def _platt_pair(self, X, sign, W, i, j, rng):
        """libsvm's ``svm_binary_svc_probability``: the sigmoid of the pair
        ``(i, j)`` fitted to 5-fold cross-validated decision values."""
        def train_predict(train, test):
            rng.reset()  # the fold model's svm_train seeds the generator again
            # libsvm's fold model: its labels sorted, -1 (class j) first
            order = np.concatenate([train[sign[train] < 0], train[sign[train] > 0]])
            kernel = self._data_kernel(X[order])
            dual = self._solve_pair(X[order], -sign[order], W[order], j, i)
            nz = np.flatnonzero(dual.coef)
            dec = cross_apply(kernel.kernel, X[test], X[order][nz], dual.coef[nz])
            return -(dec - dual.rho)  # positive for class i

        dec = cv_decision_values(len(sign), sign, train_predict, rng)
        return sigmoid_train(dec, sign)

    def _solve_pair(self, X, sign, W, i, j):
        kernel = self._data_kernel(X)
        if self._impl == "nu_svc":
            return nu_svc(kernel, sign, W, self.nu, **self._solver_options())
        cw = self.class_weight_
        return c_svc(kernel, sign, W, self.C * cw[i], self.C * cw[j],
                     **self._solver_options())

    def _set_ovo(self, X, duals, pairs, members):
        """libsvm's model layout from the pairs' solutions."""
        n, k = len(X), len(self.classes_)
        nonzero = np.zeros(n, dtype=bool)
        for dual, (_, _, pts) in zip(duals, pairs, strict=True):
            nonzero[pts[dual.coef != 0]] = True
        sv_by_class = [m[nonzero[m]] for m in members]
        sv = np.concatenate(sv_by_class)
        position = np.full(n, -1)
        position[sv] = np.arange(sv.size)
        coef = np.zeros((k - 1, sv.size))
        for dual, (i, j, pts) in zip(duals, pairs, strict=True):
            full = np.zeros(n)
            full[pts] = dual.coef
            si, sj = sv_by_class[i], sv_by_class[j]
            coef[j - 1, position[si]] = full[si]
            coef[i, position[sj]] = full[sj]
        self.support_ = sv.astype(np.int32)
        self.support_vectors_ = X[sv]
        self._n_support = np.array([s.size for s in sv_by_class], dtype=np.int32)
        self._dual_coef_ = coef
        self._intercept_ = np.array([-d.rho for d in duals])
        self._num_iter = np.array([d.n_iter for d in duals], dtype=np.intc)
        self.fit_status_ = int(any(d.timed_out for d in duals))
        self._probA = self._probB = np.empty(0)

    def _coef_columns(self):
        """(n_SV, n_pairs): pair ``(i, j)``'s coefficient of each vector."""
        k = len(self.classes_)
        bounds = np.concatenate([[0], np.cumsum(self._n_support)])
        W = np.zeros((self._dual_coef_.shape[1], k * (k - 1) // 2))
        p = 0
        for i in range(k):
            for j in range(i + 1, k):
                si = slice(bounds[i], bounds[i + 1])
                sj = slice(bounds[j], bounds[j + 1])
                W[si, p] = self._dual_coef_[j - 1, si]
                W[sj, p] = self._dual_coef_[i, sj]
                p += 1
        return W

    def _linear_coef(self):
        if len(self.classes_) == 2:  # the public (flipped) sign, as scikit-learn
            return self.dual_coef_ @ self.support_vectors_
        return self._coef_columns().T @ self.support_vectors_

    # -- prediction ---------------------------------------------------------
    def _decision_function(self, X):
        X = self._validate_for_predict(X)
        dec = self._raw_decision(X)
        if len(self.classes_) == 2:
            return -dec.ravel()
        return dec

    def decision_function(self, X):
        """Decision values of the samples in X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,) for two classes, else (n_samples,
        n_classes) with ``decision_function_shape="ovr"`` or (n_samples,
        n_classes * (n_classes - 1) / 2) with "ovo".
        """
        if self._delegating():
            return self.fallback_.decision_function(X)
        dec = self._decision_function(X)
        if self.decision_function_shape == "ovr" and len(self.classes_) > 2:
            return ovr_decision_function(dec < 0, -dec, len(self.classes_))
        return dec

    def predict(self, X):
        """Class labels of the samples in X (one-vs-one votes, libsvm's ties).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        if self._delegating():
            return self.fallback_.predict(X)
        check_is_fitted(self)
        if self.break_ties and self.decision_function_shape == "ovo":
            raise ValueError("break_ties must be False when decision_function_shape "
                             "is 'ovo'")
        k = len(self.classes_)
        if self.break_ties and self.decision_function_shape == "ovr" and k > 2:
            return self.classes_.take(np.argmax(self.decision_function(X), axis=1))
        X = self._validate_for_predict(X)
        dec = self._raw_decision(X)
        votes = np.zeros((len(X), k), dtype=np.intp)
        p = 0
        for i in range(k):
            for j in range(i + 1, k):
                win = dec[:, p] > 0
                votes[win, i] += 1
                votes[~win, j] += 1
                p += 1
        return self.classes_.take(np.argmax(votes, axis=1))

    def _check_proba(self):
        if self.probability == "deprecated" or not self.probability:
            raise AttributeError("predict_proba is not available when "
                                 "probability=False")
        return True

    @available_if(_check_proba)
    def predict_proba(self, X):
        """Class probabilities: libsvm's Platt scaling of the pairwise decision
        values, coupled over the pairs (Wu, Lin and Weng, 2004).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes), in the order of ``classes_``
        """
        if self._delegating():
            return self.fallback_.predict_proba(X)
        check_is_fitted(self)
        if self._probA.size == 0 or self._probB.size == 0:
            raise NotFittedError("predict_proba is not available when fitted with "
                                 "probability=False")
        X = self._validate_for_predict(X)
        r = pairwise_probability(self._raw_decision(X), self._probA, self._probB)
        # scikit-learn's libsvm couples two classes too (libsvm itself does not)
        return multiclass_probability(r, len(self.classes_))

    @available_if(_check_proba)
    def predict_log_proba(self, X):
        """Log of :meth:`predict_proba`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        return np.log(self.predict_proba(X))

    @property
    def probA_(self):
        """Platt scaling's first parameter (deprecated in scikit-learn 1.9)."""
        warnings.warn(_PROB_DEPRECATION.format("probA_"), FutureWarning)
        return self._probA

    @property
    def probB_(self):
        """Platt scaling's second parameter (deprecated in scikit-learn 1.9)."""
        warnings.warn(_PROB_DEPRECATION.format("probB_"), FutureWarning)
        return self._probB


_PROB_DEPRECATION = (
    "Attribute `{}` was deprecated in version 1.9 and will be removed in 1.11 as the "
    "`probability=True` option for SVC and NuSVC was deprecated and will be removed "
    "in 1.11.")


def ovr_decision_function(predictions, confidences, n_classes):
    """One-vs-rest scores from one-vs-one votes, as scikit-learn's: the votes
    plus the summed confidences squashed into (-1/3, 1/3)."""
    n = predictions.shape[0]
    votes = np.zeros((n, n_classes))
    total = np.zeros((n, n_classes))
    k = 0
    for i in range(n_classes):
        for j in range(i + 1, n_classes):
            total[:, i] -= confidences[:, k]
            total[:, j] += confidences[:, k]
            votes[predictions[:, k] == 0, i] += 1
            votes[predictions[:, k] == 1, j] += 1
            k += 1
    return votes + total / (3 * (np.abs(total) + 1))


def _check_nu(nu, counts):
    """libsvm's feasibility of ``nu`` for every pair of (weighted) class sizes."""
    for i in range(len(counts)):
        for j in range(i + 1, len(counts)):
            if nu * (counts[i] + counts[j]) / 2 > min(counts[i], counts[j]):
                raise ValueError("specified nu is infeasible")
