"""libsvm's probability outputs: Platt scaling of the pairwise decision values.

``probability=True`` (scikit-learn 1.9, deprecated there and still working)
fits, for each pair of classes, a sigmoid ``P(y = +1 | f) = 1 / (1 + exp(A f
+ B))`` to decision values ``f`` that each training point gets from a model
trained without it: libsvm's ``svm_binary_svc_probability``, 5-fold
cross-validation on a random permutation of the pair's points. The
permutation is scikit-learn's libsvm's (:class:`LibsvmRandom`: its seed drawn
from ``random_state`` as scikit-learn draws it, a 32-bit Mersenne twister,
Lemire's bounded integers), so the folds are scikit-learn's. The sigmoid
is fitted by :func:`sigmoid_train`, the Newton
method with backtracking of Lin, Lin and Weng ("A note on Platt's
probabilistic outputs for support vector machines", Machine Learning 68,
2007; libsvm's ``sigmoid_train``), on Platt's regularised targets. Class
probabilities combine the pairwise ones by :func:`multiclass_probability`
(Wu, Lin and Weng, "Probability estimates for multi-class classification by
pairwise coupling", JMLR 5, 2004, method 2; libsvm's
``multiclass_probability``), for two classes too, as scikit-learn's libsvm
does.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LibsvmRandom", "cv_decision_values", "multiclass_probability",
           "pairwise_probability", "sigmoid_predict", "sigmoid_train"]

#: libsvm's number of folds for the probability model.
N_FOLDS = 5
#: libsvm's clipping of the pairwise probabilities.
MIN_PROB = 1e-7


def _objective(dec, t, A, B):
    """Platt's negative log-likelihood, libsvm's stable form."""
    f = dec * A + B
    return float(np.sum(np.where(f >= 0, t * f, (t - 1) * f)
                        + np.log1p(np.exp(-np.abs(f)))))


def _p_q(f):
    """``p = 1 / (1 + exp(f))`` and ``q = 1 - p``, without overflow."""
    e = np.exp(-np.abs(f))
    pos = f >= 0
    return np.where(pos, e / (1 + e), 1 / (1 + e)), np.where(pos, 1 / (1 + e),
                                                             e / (1 + e))


def sigmoid_train(dec, labels):
    """libsvm's ``sigmoid_train``: ``(A, B)`` minimising Platt's objective.

    Parameters
    ----------
    dec : ndarray of shape (l,)
        Decision values (cross-validated).
    labels : ndarray of shape (l,)
        +-1.

    Returns
    -------
    A, B : float
    """
    dec = np.asarray(dec, dtype=np.float64)
    pos = np.asarray(labels) > 0
    prior1, prior0 = int(pos.sum()), int((~pos).sum())
    t = np.where(pos, (prior1 + 1.0) / (prior1 + 2.0), 1.0 / (prior0 + 2.0))
    A, B = 0.0, float(np.log((prior0 + 1.0) / (prior1 + 1.0)))
    fval = _objective(dec, t, A, B)
    for _ in range(100):  # libsvm's max_iter
        p, q = _p_q(dec * A + B)
        d2, d1 = p * q, t - p
        h11 = 1e-12 + float(np.sum(dec * dec * d2))  # sigma: H positive definite
        h22 = 1e-12 + float(np.sum(d2))
        h21 = float(np.sum(dec * d2))
        g1, g2 = float(np.sum(dec * d1)), float(np.sum(d1))
        if abs(g1) < 1e-5 and abs(g2) < 1e-5:
            break
        det = h11 * h22 - h21 * h21
        dA = -(h22 * g1 - h21 * g2) / det
        dB = -(-h21 * g1 + h11 * g2) / det
        gd = g1 * dA + g2 * dB
        step = 1.0
        while step >= 1e-10:  # backtracking (Armijo, libsvm's 1e-4)
            newf = _objective(dec, t, A + step * dA, B + step * dB)
            if newf < fval + 1e-4 * step * gd:
                A, B, fval = A + step * dA, B + step * dB, newf
                break
            step /= 2.0
        if step < 1e-10:  # line search fails: libsvm keeps the last point
            break
    return A, B


def sigmoid_predict(dec, A, B):
    """``1 / (1 + exp(A dec + B))``, libsvm's ``sigmoid_predict``."""
    return _p_q(np.asarray(dec, dtype=np.float64) * A + B)[0]


class LibsvmRandom:
    """scikit-learn's libsvm generator (``newrand.h``): ``std::mt19937`` seeded
    with ``seed`` (NumPy's legacy ``RandomState`` seeding is the same
    ``init_genrand``, and its full-range uint32 draws are the raw outputs),
    bounded integers by Lemire's method with rejection, as ``bounded_rand_int``.
    One generator serves all the pairs of a fit in order; each fold model's
    training seeds it again (:meth:`reset`), as scikit-learn's ``svm_train``
    does with the parameters it copies."""

    def __init__(self, seed: int):
        self.seed = seed
        self.reset()

    def reset(self):
        """``set_seed(seed)``."""
        self._rs = np.random.RandomState(self.seed)
        self._buf = np.empty(0, dtype=np.uint64)

    def _peek(self, k):
        if self._buf.size < k:
            more = self._rs.randint(0, 2**32, size=max(k, 4096), dtype=np.uint32)
            self._buf = np.concatenate([self._buf, more.astype(np.uint64)])
        return self._buf[:k]

    def permutation(self, n):
        """libsvm's shuffle: ``swap(perm[i], perm[i + bounded_rand_int(n - i)])``."""
        j = np.empty(n, dtype=np.int64)
        i = 0
        while i < n:
            r = np.arange(n - i, 0, -1, dtype=np.uint64)  # the ranges n - i, ...
            m = self._peek(r.size) * r
            bad = (m & 0xFFFFFFFF) < (2**32 - r) % r  # Lemire's rejection zone
            k = int(np.argmax(bad)) if bad.any() else r.size
            j[i:i + k] = np.arange(i, i + k) + (m[:k] >> 32).astype(np.int64)
            self._buf = self._buf[k:]
            i += k
            if k < r.size:  # draw again for this i until accepted
                self._buf = self._buf[1:]
        perm = np.arange(n)
        for i, t in enumerate(j.tolist()):
            perm[i], perm[t] = perm[t], perm[i]
        return perm


def cv_decision_values(n, labels, train_predict, rng):
    """libsvm's ``svm_binary_svc_probability`` folds: each point's decision
    value from a model trained on the other folds (+1 / -1 where a fold's
    training set has one class only, 0 where it is empty).

    ``train_predict(train_idx, test_idx)`` returns the decision values of
    ``test_idx`` (positive for label +1) of a model trained on ``train_idx``.
    """
    perm = rng.permutation(n)
    dec = np.zeros(n)
    for k in range(N_FOLDS):
        start, stop = k * n // N_FOLDS, (k + 1) * n // N_FOLDS
        test = perm[start:stop]
        train = np.concatenate([perm[:start], perm[stop:]])
        npos = int(np.sum(labels[train] > 0))
        if train.size == 0:
            dec[test] = 0.0
        elif npos == train.size:
            dec[test] = 1.0
        elif npos == 0:
            dec[test] = -1.0
        elif test.size:
            dec[test] = train_predict(train, test)
    return dec


def pairwise_probability(dec, probA, probB):
    """(n, n_pairs) clipped ``P(class i | pair (i, j))``, libsvm's."""
    r = sigmoid_predict(dec, np.asarray(probA)[None, :], np.asarray(probB)[None, :])
    return np.clip(r, MIN_PROB, 1 - MIN_PROB)


def multiclass_probability(r, k):
    """Class probabilities from pairwise ones: libsvm's
    ``multiclass_probability`` on each row, the rows batched (each stops at
    its own iteration, as libsvm's loop for one sample).

    Parameters
    ----------
    r : ndarray of shape (n, k * (k - 1) / 2)
        ``P(i | i or j)`` for the pairs ``i < j`` in order.
    k : int

    Returns
    -------
    ndarray of shape (n, k)
    """
    n = r.shape[0]
    i, j = np.triu_indices(k, 1)
    R = np.zeros((n, k, k))
    R[:, i, j], R[:, j, i] = r, 1 - r
    Q = -R.transpose(0, 2, 1) * R  # Q[t, j] = -r_jt r_tj off the diagonal
    d = np.arange(k)
    Q[:, d, d] = (R * R).sum(axis=1)  # sum_j r_jt^2
    p = np.full((n, k), 1.0 / k)
    live = np.arange(n)
    for _ in range(max(100, k)):
        Qs, ps = Q[live], p[live]
        Qp = np.einsum("ntj,nj->nt", Qs, ps)
        pQp = (ps * Qp).sum(axis=1)
        go = np.abs(Qp - pQp[:, None]).max(axis=1) >= 0.005 / k
        live, Qs, ps, Qp, pQp = live[go], Qs[go], ps[go], Qp[go], pQp[go]
        if live.size == 0:
            break
        for t in range(k):
            diff = (-Qp[:, t] + pQp) / Qs[:, t, t]
            ps[:, t] += diff
            pQp = (pQp + diff * (diff * Qs[:, t, t] + 2 * Qp[:, t])) / (1 + diff) \
                / (1 + diff)
            Qp = (Qp + diff[:, None] * Qs[:, t, :]) / (1 + diff)[:, None]
            ps /= (1 + diff)[:, None]
        p[live] = ps
    return p
