"""probability=True: libsvm's Platt scaling and pairwise coupling.

The routines are checked against references written here from the papers
(Lin, Lin and Weng 2007 for the sigmoid; Wu, Lin and Weng 2004 for the
coupling) and against the exact optima of the problems they solve (scipy's
minimiser, a linear solve); the fold permutation against the C++
standard's Mersenne twister value and a scalar transcription of
scikit-learn's ``bounded_rand_int``; the estimator against scikit-learn's
probabilities: the same folds, so the same probabilities (to rounding where
the fold models follow libsvm's path, one block; to the solver's tolerance
through the decomposition); and the folds against scikit-learn's SVC trained
on the same folds.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import sklearn.svm as sk
from scipy.optimize import minimize
from sklearn.datasets import make_classification
from sklearn.metrics import log_loss

import kerneltools.estimators as kte
from kerneltools.estimators.svm import _solver
from kerneltools.estimators.svm._platt import (
    N_FOLDS,
    LibsvmRandom,
    multiclass_probability,
    sigmoid_predict,
    sigmoid_train,
)

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def _platt_reference(dec, labels):
    """Lin, Lin and Weng's pseudo-code (their Appendix), one point at a time."""
    prior1 = sum(1 for v in labels if v > 0)
    prior0 = len(labels) - prior1
    hi, lo = (prior1 + 1) / (prior1 + 2), 1 / (prior0 + 2)
    t = [hi if v > 0 else lo for v in labels]

    def f(A, B):
        s = 0.0
        for d, ti in zip(dec, t, strict=True):
            z = d * A + B
            s += ti * z + math.log1p(math.exp(-z)) if z >= 0 else \
                (ti - 1) * z + math.log1p(math.exp(z))
        return s

    A, B = 0.0, math.log((prior0 + 1) / (prior1 + 1))
    fval = f(A, B)
    for _ in range(100):
        h11 = h22 = 1e-12
        h21 = g1 = g2 = 0.0
        for d, ti in zip(dec, t, strict=True):
            z = d * A + B
            if z >= 0:
                p, q = math.exp(-z) / (1 + math.exp(-z)), 1 / (1 + math.exp(-z))
            else:
                p, q = 1 / (1 + math.exp(z)), math.exp(z) / (1 + math.exp(z))
            h11 += d * d * p * q
            h22 += p * q
            h21 += d * p * q
            g1 += d * (ti - p)
            g2 += ti - p
        if abs(g1) < 1e-5 and abs(g2) < 1e-5:
            break
        det = h11 * h22 - h21 * h21
        dA, dB = -(h22 * g1 - h21 * g2) / det, -(-h21 * g1 + h11 * g2) / det
        gd, step = g1 * dA + g2 * dB, 1.0
        while step >= 1e-10:
            nf = f(A + step * dA, B + step * dB)
            if nf < fval + 1e-4 * step * gd:
                A, B, fval = A + step * dA, B + step * dB, nf
                break
            step /= 2
        if step < 1e-10:
            break
    return A, B


def _scores(seed, n=300):
    rng = np.random.default_rng(seed)
    labels = np.where(rng.random(n) < 0.4, 1.0, -1.0)
    dec = labels * rng.gamma(2.0, 0.7, n) - 0.3 + rng.normal(0, 0.8, n)
    return dec, labels


@pytest.mark.parametrize("seed", range(5))
def test_sigmoid_fit_is_the_papers_and_the_optimum(seed):
    dec, labels = _scores(seed)
    A, B = sigmoid_train(dec, labels)
    rA, rB = _platt_reference(list(dec), list(labels))
    assert A == pytest.approx(rA, rel=1e-9, abs=1e-12)
    assert B == pytest.approx(rB, rel=1e-9, abs=1e-12)
    # the exact minimiser of Platt's objective, by scipy
    pos = labels > 0
    t = np.where(pos, (pos.sum() + 1) / (pos.sum() + 2), 1 / ((~pos).sum() + 2))

    def nll(ab):
        z = dec * ab[0] + ab[1]
        return np.sum(t * z + np.logaddexp(0, -z))

    opt = minimize(nll, [0.0, 0.0], method="BFGS", options={"gtol": 1e-10})
    np.testing.assert_allclose([A, B], opt.x, atol=1e-4)
    p = sigmoid_predict(dec, A, B)
    np.testing.assert_allclose(p, 1 / (1 + np.exp(dec * A + B)), rtol=1e-12)


def _coupling_reference(r, k):
    """libsvm's multiclass_probability as Wu, Lin and Weng state it, one sample."""
    R = np.zeros((k, k))
    p = 0
    for i in range(k):
        for j in range(i + 1, k):
            R[i, j], R[j, i] = r[p], 1 - r[p]
            p += 1
    Q = np.zeros((k, k))
    for t in range(k):
        for j in range(k):
            if j != t:
                Q[t, t] += R[j, t] ** 2
                Q[t, j] = -R[j, t] * R[t, j]
    prob = np.full(k, 1 / k)
    for _ in range(max(100, k)):
        Qp = Q @ prob
        pQp = prob @ Qp
        if np.max(np.abs(Qp - pQp)) < 0.005 / k:
            break
        for t in range(k):
            diff = (-Qp[t] + pQp) / Q[t, t]
            prob[t] += diff
            pQp = (pQp + diff * (diff * Q[t, t] + 2 * Qp[t])) / (1 + diff) ** 2
            Qp = (Qp + diff * Q[t]) / (1 + diff)
            prob /= 1 + diff
    return prob, Q


@pytest.mark.parametrize("k", [3, 4, 7])
def test_coupling_is_the_papers_and_near_the_exact_optimum(k):
    rng = np.random.default_rng(k)
    r = rng.uniform(0.02, 0.98, size=(40, k * (k - 1) // 2))
    P = multiclass_probability(r, k)
    np.testing.assert_allclose(P.sum(axis=1), 1, atol=1e-12)
    for row, p in zip(r, P, strict=True):
        ref, Q = _coupling_reference(row, k)
        np.testing.assert_allclose(p, ref, rtol=1e-10, atol=1e-14)
        # the exact optimum of min p^T Q p, sum p = 1 (Wu, Lin, Weng, eq. 21)
        z = np.linalg.solve(Q, np.ones(k))
        np.testing.assert_allclose(p, z / z.sum(), atol=0.02 / k)


def test_generator_is_the_standards_mersenne_twister_and_libsvms_shuffle():
    # the C++ standard: the 10000th output of a default mt19937 (seed 5489)
    assert LibsvmRandom(5489)._peek(10000)[-1] == 4123659995
    rs = np.random.RandomState(123)
    raw = iter(rs.randint(0, 2**32, size=100000, dtype=np.uint32).tolist())

    def bounded(rng):  # newrand.h's bounded_rand_int, one draw at a time
        m = next(raw) * rng
        low = m & 0xFFFFFFFF
        if low < rng:
            t = (2**32 - rng) % rng
            while low < t:
                m = next(raw) * rng
                low = m & 0xFFFFFFFF
        return m >> 32

    gen = LibsvmRandom(123)
    for n in (1, 7, 1000, 2500):
        ref = list(range(n))
        for i in range(n):
            j = i + bounded(n - i)
            ref[i], ref[j] = ref[j], ref[i]
        np.testing.assert_array_equal(gen.permutation(n), ref)


@pytest.mark.parametrize("Est", [kte.SVC, kte.NuSVC])
@pytest.mark.parametrize("k", [2, 3, 4])
def test_probabilities_are_scikit_learns(Est, k):
    """The same folds and seeds as scikit-learn's libsvm: small problems (one
    block: libsvm's path) give its probabilities to rounding (measured 4e-15);
    the same through small working sets, to the solver's tolerance."""
    X, y = make_classification(300, 8, n_informative=5, n_classes=k,
                               n_clusters_per_class=1, random_state=k)
    Xt = X[200:]
    ref = getattr(sk, Est.__name__)(probability=True, random_state=0).fit(
        X[:200], y[:200])
    ours = Est(probability=True, random_state=0).fit(X[:200], y[:200])
    assert not ours._delegating()
    P, R = ours.predict_proba(Xt), ref.predict_proba(Xt)
    np.testing.assert_allclose(P, R, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(P.sum(axis=1), 1, atol=1e-9)
    np.testing.assert_allclose(ours.predict_log_proba(Xt), np.log(P))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        assert ours.probA_.shape == (k * (k - 1) // 2,)
        np.testing.assert_allclose(ours.probA_, ref.probA_, rtol=1e-6)
        np.testing.assert_allclose(ours.probB_, ref.probB_, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("k", [2, 3])
def test_probabilities_through_the_decomposition(k, monkeypatch):
    monkeypatch.setattr(_solver, "WORKING_SET", 16)
    X, y = make_classification(500, 8, n_informative=5, n_classes=k,
                               n_clusters_per_class=1, random_state=k)
    Xt, yt = X[400:], y[400:]
    P = kte.SVC(probability=True, random_state=0).fit(X[:400], y[:400]) \
        .predict_proba(Xt)
    R = sk.SVC(probability=True, random_state=0).fit(X[:400], y[:400]) \
        .predict_proba(Xt)
    # decision values within about 10 tol: probabilities within a few 1e-3
    assert np.abs(P - R).max() < 0.02
    assert log_loss(yt, P) == pytest.approx(log_loss(yt, R), rel=0.02)


def test_folds_are_scikit_learns_svc_on_the_same_folds():
    """Binary: the cross-validated decision values are those of scikit-learn's
    SVC trained on the same folds (our permutation), and the sigmoid is the
    reference fit of them."""
    X, y = make_classification(300, 6, n_informative=4, random_state=3)
    ours = kte.SVC(probability=True, random_state=7).fit(X, y)
    # the pair's points in libsvm's order (class 0's, then class 1's), permuted
    pts = np.concatenate([np.flatnonzero(y == 0), np.flatnonzero(y == 1)])
    seed = np.random.RandomState(7).randint(np.iinfo("i").max)  # scikit-learn's
    perm = pts[LibsvmRandom(seed).permutation(len(y))]
    dec = np.zeros(len(y))
    for f in range(N_FOLDS):
        test = perm[f * len(y) // N_FOLDS:(f + 1) * len(y) // N_FOLDS]
        train = np.setdiff1d(perm, test)
        ref = sk.SVC(gamma=ours._gamma).fit(X[train], y[train])  # our gamma
        # scikit-learn's binary decision is positive for classes_[1]; libsvm's
        # pair value (and the labels below) positive for class 0
        dec[test] = -ref.decision_function(X[test])
    labels = np.where(y == 0, 1.0, -1.0)
    rA, rB = _platt_reference(list(dec), list(labels))
    # decision values of two solutions to tol agree to about 10 tol
    assert ours._probA[0] == pytest.approx(rA, rel=1e-3)
    assert ours._probB[0] == pytest.approx(rB, abs=1e-3)
    P = ours.predict_proba(X)
    raw = -ours.decision_function(X)
    # two classes coupled as more (scikit-learn's libsvm): the sigmoid to the
    # coupling's stopping tolerance
    np.testing.assert_allclose(P[:, 0], sigmoid_predict(raw, ours._probA[0],
                                                        ours._probB[0]), atol=5e-3)


def test_same_random_state_same_probabilities_and_unfitted_raises():
    X, y = make_classification(200, 5, random_state=0)
    a = kte.SVC(probability=True, random_state=1).fit(X, y).predict_proba(X)
    b = kte.SVC(probability=True, random_state=1).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)
    with pytest.raises(AttributeError, match="predict_proba"):
        kte.SVC().fit(X, y).predict_proba(X)
