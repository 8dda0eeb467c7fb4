"""The five SVMs against scikit-learn's (libsvm) on several seeds, kernels and
class counts, through the decomposition (small working sets) and the single
block; invariants: working-set size, sample weights as repetitions, nu bounds,
float32 input; the hand-over to scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn.svm as sk
from sklearn.datasets import make_classification, make_regression
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.utils.estimator_checks import parametrize_with_checks

import kerneltools.estimators as kte
from kerneltools.estimators.svm import _solver

TOL = 1e-3
KERNELS = {"rbf": {}, "linear": {}, "poly": {"degree": 2}, "sigmoid": {"gamma": 0.01}}


@pytest.fixture(params=[32, 1024], ids=["q32", "q1024"])
def working_set(request, monkeypatch):
    """The decomposition with small working sets, and one block (n <= q)."""
    monkeypatch.setattr(_solver, "WORKING_SET", request.param)
    return request.param


def _classes(n, k, seed):
    return make_classification(n, 6, n_informative=4, n_classes=k, random_state=seed)


def _decision_tol(est):
    """Decision values of two solutions meeting libsvm's stopping rule on
    ``tol`` differ by a few ``tol``: each one's gradient is within ``tol`` of
    optimality (measured: at most 5 tol over these probes)."""
    return 10 * TOL


def _dual_objective(est, X):
    """libsvm's dual objective of a fitted binary SVC, from a dense float64 K."""
    K = pairwise_kernels(est.support_vectors_, metric=est.kernel, gamma=est._gamma,
                         degree=est.degree, coef0=est.coef0, filter_params=True)
    c = est.dual_coef_[0]
    return 0.5 * c @ K @ c - np.abs(c).sum()


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("n_classes", [2, 3, 4])
def test_svc_is_libsvms_solution(seed, kernel, n_classes, working_set):
    X, y = _classes(240, n_classes, seed)
    # one-vs-one values: continuous (the "ovr" shape adds votes, which jump)
    kw = dict(kernel=kernel, decision_function_shape="ovo", **KERNELS[kernel])
    ours = kte.SVC(**kw).fit(X, y)
    ref = sk.SVC(**kw).fit(X, y)
    dec, ref_dec = ours.decision_function(X), ref.decision_function(X)
    # bounded points' gradients are not bounded by tol: the error grows with
    # the kernel's scale (poly: |f| up to 5 here)
    atol = _decision_tol(ours) * max(1.0, np.abs(ref_dec).max() / 2)
    np.testing.assert_allclose(dec, ref_dec, atol=atol)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, atol=atol)
    # the same support set, up to points on the margin (|f| = 1 within tol)
    ovo = ref_dec.reshape(len(X), -1)
    for i in np.setxor1d(ours.support_, ref.support_):
        assert np.min(np.abs(np.abs(ovo[i]) - 1)) < 10 * TOL
    np.testing.assert_array_equal(ours.n_support_.sum(), len(ours.support_))
    # the same predictions away from the boundary
    away = np.abs(ovo).min(axis=1) > 0.05
    np.testing.assert_array_equal(ours.predict(X)[away], ref.predict(X)[away])
    if n_classes == 2:
        assert _dual_objective(ours, X) == pytest.approx(_dual_objective(ref, X),
                                                         rel=1e-6)
        assert ours.coef_.shape == ref.coef_.shape if kernel == "linear" else True


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_nusvc_is_libsvms_solution(seed, n_classes, working_set):
    X, y = _classes(200, n_classes, seed)
    ours = kte.NuSVC(nu=0.3).fit(X, y)
    ref = sk.NuSVC(nu=0.3).fit(X, y)
    scale = np.abs(ref.decision_function(X)).max()
    np.testing.assert_allclose(ours.decision_function(X), ref.decision_function(X),
                               atol=_decision_tol(ours) * scale)
    away = np.abs(ref.decision_function(X)).reshape(len(X), -1).min(axis=1) > 0.05 * scale
    np.testing.assert_array_equal(ours.predict(X)[away], ref.predict(X)[away])


@pytest.mark.parametrize("Est", ["SVR", "NuSVR"])
@pytest.mark.parametrize("kernel", ["rbf", "linear"])
@pytest.mark.parametrize("seed", [0, 1])
def test_regressors_are_libsvms_solution(Est, kernel, seed, working_set):
    X, y = make_regression(150, 5, noise=10, random_state=seed)
    y = y / y.std()
    ours = getattr(kte, Est)(kernel=kernel, C=2.0).fit(X, y)
    ref = getattr(sk, Est)(kernel=kernel, C=2.0).fit(X, y)
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), atol=_decision_tol(ours))
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, atol=_decision_tol(ours))
    assert abs(len(ours.support_) - len(ref.support_)) <= 0.02 * len(ref.support_) + 2
    assert isinstance(ours.n_iter_, int) and ours.n_support_.shape == (1,)


@pytest.mark.parametrize("nu", [0.05, 0.3, 0.8])
def test_one_class_is_libsvms_solution_and_meets_the_nu_bounds(nu, working_set):
    X, _ = _classes(300, 2, 4)
    ours = kte.OneClassSVM(nu=nu, gamma=0.1).fit(X)
    ref = sk.OneClassSVM(nu=nu, gamma=0.1).fit(X)
    scale = abs(ref.offset_[0])
    np.testing.assert_allclose(ours.decision_function(X), ref.decision_function(X),
                               atol=_decision_tol(ours) * scale)
    np.testing.assert_allclose(ours.score_samples(X), ref.score_samples(X),
                               atol=_decision_tol(ours) * scale)
    # nu: at most a fraction nu of bounded support vectors (the margin errors
    # at the optimum), at least nu of support vectors
    n = len(X)
    assert np.sum(ours.dual_coef_ >= 1) <= nu * n
    assert len(ours.support_) / n >= nu - 1e-9
    # libsvm's dual: sum alpha = nu n, 0 <= alpha <= 1
    assert ours.dual_coef_.sum() == pytest.approx(nu * n)
    assert ours.dual_coef_.max() <= 1 + 1e-12


def test_result_does_not_depend_on_the_working_set_size(monkeypatch):
    X, y = _classes(300, 3, 5)
    fits = []
    for q in (8, 64, 1024):
        monkeypatch.setattr(_solver, "WORKING_SET", q)
        fits.append(kte.SVC(C=3.0).fit(X, y).decision_function(X))
    for dec in fits[1:]:
        np.testing.assert_allclose(dec, fits[0], atol=10 * TOL)


@pytest.mark.parametrize("Est", ["SVC", "SVR", "OneClassSVM", "NuSVC"])
def test_sample_weight_is_repetition(Est):
    X, y = _classes(120, 2, 6)
    if Est == "SVR":
        y = X[:, 0] + 0.1 * X[:, 1]
    reps = np.random.default_rng(0).integers(1, 4, size=len(X))
    kw = {"nu": 0.2} if Est in ("OneClassSVM", "NuSVC") else {}
    weighted = getattr(kte, Est)(gamma=0.2, **kw).fit(X, y, sample_weight=reps)
    repeated = getattr(kte, Est)(gamma=0.2, **kw).fit(np.repeat(X, reps, axis=0),
                                                      np.repeat(y, reps))
    f = "predict" if Est == "SVR" else "decision_function"
    a, b = getattr(weighted, f)(X), getattr(repeated, f)(X)
    np.testing.assert_allclose(a, b, atol=10 * TOL * max(1.0, np.abs(b).max()))


def test_zero_weights_drop_rows_as_scikit_learn():
    X, y = _classes(60, 2, 7)
    w = np.ones(len(X))
    w[:10] = 0
    ours = kte.SVC(kernel="linear").fit(X, y, sample_weight=w)
    ref = sk.SVC(kernel="linear").fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(ours.support_, ref.support_)
    np.testing.assert_allclose(ours.support_vectors_, ref.support_vectors_)
    with pytest.raises(ValueError, match="all samples have zero or negative"):
        kte.SVC().fit(X, y, sample_weight=np.zeros(len(X)))


def test_float32_input_gives_the_float64_fit():
    X, y = _classes(150, 3, 8)
    a = kte.SVC().fit(X.astype(np.float32), y)
    b = kte.SVC().fit(X.astype(np.float32).astype(np.float64), y)
    np.testing.assert_array_equal(a.support_, b.support_)
    np.testing.assert_allclose(a.dual_coef_, b.dual_coef_)
    assert a.decision_function(X.astype(np.float32)).dtype == np.float64


def test_class_weight_and_break_ties_as_scikit_learn():
    X, y = _classes(200, 3, 9)
    kw = dict(class_weight={0: 3.0, 1: 0.5}, break_ties=True)
    ours, ref = kte.SVC(**kw).fit(X, y), sk.SVC(**kw).fit(X, y)
    np.testing.assert_allclose(ours.class_weight_, ref.class_weight_)
    np.testing.assert_allclose(ours.decision_function(X), ref.decision_function(X),
                               atol=10 * TOL)
    assert np.mean(ours.predict(X) == ref.predict(X)) > 0.98


def test_nu_infeasible_raises_as_libsvm():
    X, y = _classes(40, 2, 0)
    y = (np.arange(40) < 5).astype(int)
    with pytest.raises(ValueError, match="specified nu is infeasible"):
        kte.NuSVC(nu=0.9).fit(X, y)


@pytest.mark.parametrize("make", [
    lambda X: (kte.SVC(), sp.csr_array(X)),
    lambda X: (kte.SVC(kernel="precomputed"), X @ X.T),
    lambda X: (kte.SVC(kernel=lambda a, b: a @ b.T), X),
])
def test_what_the_engine_does_not_serve_goes_to_scikit_learn(make, capsys):
    X, y = _classes(50, 2, 1)
    est, data = make(X)
    est.set_params(verbose=1).fit(data, y)
    assert type(est.fallback_).__module__.startswith("sklearn.")
    assert "scikit-learn" in capsys.readouterr().err
    np.testing.assert_array_equal(est.predict(data), est.fallback_.predict(data))


def test_verbose_reports_the_outer_steps(capsys, monkeypatch):
    monkeypatch.setattr(_solver, "WORKING_SET", 16)
    X, y = _classes(100, 2, 2)
    kte.SVC(verbose=2).fit(X, y)
    out = capsys.readouterr().out
    assert "violation" in out and "support vectors" in out


def test_max_iter_warns_as_scikit_learn():
    X, y = _classes(100, 2, 2)
    from sklearn.exceptions import ConvergenceWarning

    with pytest.warns(ConvergenceWarning, match="max_iter=3"):
        est = kte.SVC(max_iter=3).fit(X, y)
    assert est.fit_status_ == 1


@pytest.mark.parametrize("Est", ["SVC", "SVR", "OneClassSVM"])
def test_prediction_by_reduction_is_the_dense_product(Est, monkeypatch):
    """Above ``DENSE_MAX`` entries, ``K(X, SV) @ dual_coef`` is one LazyTensor
    reduction (every pair at once): the same values as the dense product."""
    from kerneltools.estimators.svm import _kernel_ops

    X, y = _classes(150, 3, 3)
    if Est == "SVR":
        y = X[:, 0] - X[:, 1]
    est = getattr(kte, Est)().fit(X, y)
    f = "predict" if Est == "SVR" else "decision_function"
    dense = getattr(est, f)(X)
    monkeypatch.setattr(_kernel_ops, "DENSE_MAX", 0)
    np.testing.assert_allclose(getattr(est, f)(X), dense, rtol=1e-10, atol=1e-10)
    if Est == "SVC":
        np.testing.assert_array_equal(est.predict(X), sk.SVC().fit(X, y).predict(X))


#: The checks scikit-learn's own SVMs fail too (its PER_ESTIMATOR_XFAIL_CHECKS).
_SAME_AS_SCIKIT_LEARN = {
    "check_sample_weight_equivalence_on_dense_data": (
        "a weight rescales C where repetition adds variables: libsvm's two "
        "solutions agree to tol (test_sample_weight_is_repetition), not to 1e-7"),
    "check_sample_weight_equivalence_on_sparse_data": (
        "as the dense case (sparse input is scikit-learn's own fit)"),
}
_NUSVC_AS_SCIKIT_LEARN = {
    "check_classifiers_one_label_sample_weights": (
        "libsvm says 'specified nu is infeasible', as scikit-learn's NuSVC"),
    "check_class_weight_classifiers": "nu ignores C, hence class_weight's scale",
}


def _expected_failures(est):
    out = dict(_SAME_AS_SCIKIT_LEARN)
    if isinstance(est, kte.NuSVC):
        out.update(_NUSVC_AS_SCIKIT_LEARN)
    return out


@parametrize_with_checks([kte.SVC(), kte.NuSVC(), kte.SVR(), kte.NuSVR(),
                          kte.OneClassSVM()],
                         expected_failed_checks=_expected_failures)
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


@pytest.mark.skipif(not __import__("kerneltools.linalg", fromlist=["x"])
                    .smo_native_available(), reason="needs the compiled SMO")
@pytest.mark.parametrize("shrinking", [True, False])
@pytest.mark.parametrize("Est,kw", [("SVC", {}), ("SVC", {"kernel": "linear",
                                                          "C": 10.0}),
                                    ("SVR", {}), ("NuSVR", {})])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_block_follows_libsvms_path_with_or_without_shrinking(Est, kw, seed,
                                                                  shrinking):
    """A problem of one block runs libsvm's own loop, shrinking included
    (compiled): the same iterations and the same dual coefficients as
    scikit-learn's libsvm, up to its kernel values' last float32 bit."""
    X, y = _classes(300 + 100 * seed, 2 + seed % 2, seed)
    if Est != "SVC":
        y = X[:, 0] + np.sin(X[:, 1])
    ours = getattr(kte, Est)(shrinking=shrinking, **kw).fit(X, y)
    ref = getattr(sk, Est)(shrinking=shrinking, **kw).fit(X, y)
    np.testing.assert_array_equal(ours.n_iter_, ref.n_iter_)
    np.testing.assert_array_equal(ours.support_, ref.support_)
    np.testing.assert_allclose(ours.dual_coef_, ref.dual_coef_, rtol=0, atol=1e-8)
    np.testing.assert_allclose(ours.intercept_, ref.intercept_, rtol=0, atol=1e-8)
