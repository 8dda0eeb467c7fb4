"""linalg.py: kernel operators against dense NumPy, conjugate gradients against
np.linalg.solve, and the Nystroem preconditioner."""

import numpy as np
import pytest
from scipy.sparse.linalg import LinearOperator, aslinearoperator

import kerneltools as kt
from kerneltools.exceptions import NotPositiveDefiniteError
from kerneltools.kernels import make_kernel
from kerneltools.linalg import (
    KernelOperator,
    NystroemPreconditioner,
    conjugate_gradient,
    select_landmarks,
)

RNG = np.random.default_rng(0)
X = RNG.normal(size=(300, 3))
Y = RNG.normal(size=(200, 3))
K = make_kernel("rbf", gamma=0.5)


def test_operator_products_match_dense(backend, dtype, rtol):
    Xd, Yd = X.astype(dtype), Y.astype(dtype)
    A = KernelOperator(K, Xd, Yd, backend=backend)
    dense = K(X, Y)
    assert isinstance(A, LinearOperator) and A.shape == (300, 200)
    v = RNG.normal(size=200)
    V = RNG.normal(size=(200, 3))
    u = RNG.normal(size=300)
    tol = {"rtol": 100 * rtol, "atol": 100 * rtol * 200}
    np.testing.assert_allclose(A @ v, dense @ v, **tol)
    np.testing.assert_allclose(A @ V, dense @ V, **tol)
    np.testing.assert_allclose(A.T @ u, dense.T @ u, **tol)
    np.testing.assert_allclose(A.rmatvec(u), dense.T @ u, **tol)


def test_square_operator_shift_and_lazytensor_input():
    shift = RNG.uniform(0.5, 1.0, 300)
    A = KernelOperator(K, X, shift=shift)
    v = RNG.normal(size=300)
    np.testing.assert_allclose(A @ v, K(X) @ v + shift * v, rtol=1e-10)
    B = KernelOperator((-0.5 * kt.Vi(X).sqdist(kt.Vj(X))).exp(), shift=2.0)
    np.testing.assert_allclose(B @ v, K(X) @ v + 2 * v, rtol=1e-10)
    with pytest.raises(ValueError, match="square"):
        KernelOperator(K, X, Y, shift=1.0)
    with pytest.raises(ValueError, match="shift"):
        KernelOperator(K, X, shift=np.ones(7))


@pytest.mark.parametrize("precondition", [False, True])
def test_conjugate_gradient_solves_several_right_hand_sides(precondition):
    alpha = 1e-2
    A = KernelOperator(K, X, shift=alpha)
    B = RNG.normal(size=(300, 3))
    M = NystroemPreconditioner(K, X, shift=alpha, n_components=100, random_state=0) \
        if precondition else None
    seen = []
    sol, n_iter = conjugate_gradient(A, B, M=M, tol=1e-10, callback=seen.append)
    ref = np.linalg.solve(K(X) + alpha * np.eye(300), B)
    np.testing.assert_allclose(sol, ref, rtol=1e-6, atol=1e-6 * np.abs(ref).max())
    assert len(seen) == n_iter > 0


def test_nystroem_preconditioner_cuts_iterations():
    alpha = 1e-3
    A = KernelOperator(K, X, shift=alpha)
    b = RNG.normal(size=300)
    _, plain = conjugate_gradient(A, b, tol=1e-8)
    counts = {}
    for lm in ("uniform", "rpcholesky"):
        M = NystroemPreconditioner(K, X, shift=alpha, n_components=80, landmarks=lm,
                                   random_state=0)
        x, counts[lm] = conjugate_gradient(A, b, M=M, tol=1e-8)
        assert np.linalg.norm(A @ x - b) <= 1e-7 * np.linalg.norm(b)
    assert max(counts.values()) < plain / 2


def test_preconditioner_is_the_inverse_when_every_point_is_a_landmark():
    alpha = 0.1
    M = NystroemPreconditioner(K, X[:100], shift=alpha, n_components=100)
    v = RNG.normal(size=100)
    exact = np.linalg.solve(K(X[:100]) + alpha * np.eye(100), v)
    np.testing.assert_allclose(M @ v, exact, rtol=1e-6, atol=1e-8)


def test_rpcholesky_landmarks_spread_over_clusters():
    centers = np.array([[0, 0], [10, 0], [0, 10], [10, 10]])
    sizes = [985, 5, 5, 5]  # one big cluster and three small ones
    pts = np.concatenate([c + 0.1 * RNG.normal(size=(s, 2)) for c, s in zip(centers, sizes)])
    idx = select_landmarks(make_kernel("rbf", gamma=1.0), pts, 8, method="rpcholesky",
                           random_state=0)
    clusters = {int(np.argmin(((pts[i] - centers) ** 2).sum(1))) for i in idx}
    assert len(idx) == 8 and len(set(idx)) == 8
    assert clusters == {0, 1, 2, 3}  # uniform sampling would mostly miss the small ones


def test_convergence_warning_and_bad_input():
    A = KernelOperator(K, X, shift=1e-8)
    b = RNG.normal(size=300)
    with pytest.warns(kt.ConvergenceWarning, match="did not converge"):
        conjugate_gradient(A, b, tol=1e-14, max_iter=2)
    with pytest.raises(ValueError, match="tol"):
        conjugate_gradient(A, b, tol=0)
    with pytest.raises(ValueError, match="max_iter"):
        conjugate_gradient(A, b, max_iter=0)
    with pytest.raises(ValueError, match="NaN"):
        conjugate_gradient(A, np.full(300, np.nan))
    with pytest.raises(TypeError, match="'A'"):
        conjugate_gradient("matrix", b)
    with pytest.raises(ValueError, match="n_components"):
        select_landmarks(K, X, 0)
    with pytest.raises(ValueError, match="landmark method"):
        select_landmarks(K, X, 5, method="kmeans")
    with pytest.raises(ValueError, match="shift"):
        NystroemPreconditioner(K, X, shift=0.0)


def test_dense_array_and_scipy_operators_are_accepted():
    A = K(X) + 0.1 * np.eye(300)
    b = RNG.normal(size=300)
    for op in (A, aslinearoperator(A), lambda V: A @ V):
        x, _ = conjugate_gradient(op, b, tol=1e-10)
        np.testing.assert_allclose(A @ x, b, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("smooth", [False, True])
@pytest.mark.parametrize("diag_correction", [False, True])
def test_preconditioner_against_its_dense_definition(diag_correction, smooth):
    """P = D + F F^T with F F^T = K_nm K_mm^-1 K_mn (dense NumPy), D = shift
    plus, with the correction, diag(K - F F^T): P^-1, log det P and the
    covariance of the probes all match."""
    shift = RNG.uniform(0.05, 0.1, 300)
    k = make_kernel("rbf", gamma=2.0)  # rough: the landmarks leave a large residual
    M = NystroemPreconditioner(k, X, shift=shift, n_components=40, landmarks="rpcholesky",
                               random_state=0, diag_correction=diag_correction,
                               smooth=smooth)
    idx = M.landmarks_
    Knm = k(X, X[idx])
    FFt = Knm @ np.linalg.solve(k(X[idx]), Knm.T)
    D = shift + (np.clip(np.diag(k(X)) - np.diag(FFt), 0, None) if diag_correction else 0)
    P = FFt + np.diag(D)
    if diag_correction:
        np.testing.assert_allclose(np.diag(P), np.diag(k(X)) + shift, rtol=1e-6)
    V = RNG.normal(size=(300, 2))
    tol = 1e-4 if smooth else 1e-6  # the smooth factor adds a jitter of 1e-3 min(shift)
    np.testing.assert_allclose(M @ V, np.linalg.solve(P, V), rtol=tol, atol=tol * 10)
    np.testing.assert_allclose(M.logdet(), np.linalg.slogdet(P)[1], rtol=tol)
    Z = M.sample(20000, random_state=0)
    cov = Z @ Z.T / Z.shape[1]
    assert np.abs(cov - P).max() <= 0.05 * np.abs(P).max()


# ---------------------------------------------------------------------------
# Conjugate gradients never stop wrong: an indefinite operator raises (a
# LinAlgError), x0 is checked, and there is one implementation (the one
# LazyTensor.solve uses); counts are integers, never truncated.
# ---------------------------------------------------------------------------


def test_not_positive_definite_is_a_linalg_error():
    assert issubclass(NotPositiveDefiniteError, np.linalg.LinAlgError)
    assert issubclass(NotPositiveDefiniteError, kt.exceptions.KernelToolsError)


def test_conjugate_gradient_of_an_indefinite_matrix_raises():
    A = np.diag([1.0, 2.0, -3.0, 4.0])
    with pytest.raises(NotPositiveDefiniteError, match=r"not positive definite"):
        conjugate_gradient(A, np.ones(4))


def test_conjugate_gradient_of_a_negative_shift_kernel_operator_raises():
    X = RNG.normal(size=(25, 2))
    A = KernelOperator(make_kernel("rbf", gamma=0.5), X, shift=-30.0, backend="numpy")
    with pytest.raises(NotPositiveDefiniteError, match=r"'shift'"):
        conjugate_gradient(A, np.ones(25))


def test_conjugate_gradient_checks_x0():
    A = np.eye(4) * 2
    with pytest.raises(ValueError, match=r"conjugate_gradient: 'x0' must have shape"):
        conjugate_gradient(A, np.ones(4), x0=np.ones(3))
    with pytest.raises(ValueError, match=r"conjugate_gradient: 'x0' contains NaN"):
        conjugate_gradient(A, np.ones(4), x0=np.array([0, np.nan, 0, 0]))


def test_one_conjugate_gradient_implementation():
    import kerneltools.lazy as lazy
    import kerneltools.linalg as linalg
    from kerneltools.backend import _cg

    assert not hasattr(lazy, "conjugate_gradient") or (
        lazy.conjugate_gradient is _cg.conjugate_gradient)
    assert linalg._cg is _cg.conjugate_gradient


@pytest.mark.parametrize("n_components", [2.5, True])
def test_landmark_counts_must_be_integers(n_components):
    # int() used to truncate them (2.5 -> 2, True -> 1) without a word
    x = np.random.default_rng(19).normal(size=(4, 2))
    match = r"'n_components' must be an int >= 1"
    with pytest.raises((TypeError, ValueError), match=match):
        select_landmarks("rbf", x, n_components)
