"""Eigen-solvers on lazy operators (kerneltools.linalg) against scipy.linalg.eigh."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg

from kerneltools.exceptions import ConvergenceError, ConvergenceWarning
from kerneltools.kernels import make_kernel
from kerneltools.linalg import (
    CenteredOperator,
    KernelOperator,
    LaplacianPreconditioner,
    NormalizedAffinityOperator,
    OffDiagonalKernel,
    block_lanczos,
    eigsh,
    lobpcg,
    randomized_eigsh,
)

# float32 kernel values carry ~1e-7 relative error; eigenvectors then ~1e-7/gap
VEC_TOL = {np.dtype(np.float32): 2e-3, np.dtype(np.float64): 1e-7}
VAL_TOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-10}


def _data(n=160, d=3, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


def _assert_eigvecs(V, Vref, tol):
    """Columns equal up to sign."""
    signs = np.sign(np.sum(V * Vref, axis=0))
    np.testing.assert_allclose(V * signs, Vref, atol=tol)


def _dense_rbf(X, gamma):
    return np.exp(-gamma * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))


@pytest.mark.parametrize("method", ["lanczos", "lobpcg", "arpack"])
def test_largest_match_eigh(method, backend, dtype):
    X = _data().astype(dtype)
    A = KernelOperator(make_kernel("rbf", gamma=0.3), X, backend=backend)
    w, V = eigsh(A, 5, method=method, random_state=0)
    ref_w, ref_V = scipy.linalg.eigh(_dense_rbf(X.astype(np.float64), 0.3))
    np.testing.assert_allclose(w, ref_w[-5:], rtol=0, atol=VAL_TOL[dtype] * ref_w[-1] * 10)
    _assert_eigvecs(V, ref_V[:, -5:], VEC_TOL[dtype])


def test_mixed_precision_reaches_float64_accuracy(backend):
    """Krylov blocks on the float32 twin of the operator, the residuals
    float64's: the eigenpairs are float64's (float32 alone stalls near 1e-6)."""
    X = _data()
    kernel = make_kernel("rbf", gamma=0.3)
    A = KernelOperator(kernel, X, backend=backend)
    fast = KernelOperator(kernel, X.astype(np.float32), backend=backend)
    w, V = block_lanczos(A, 5, A_fast=fast, tol=1e-11, random_state=0)
    ref_w, ref_V = scipy.linalg.eigh(_dense_rbf(X, 0.3))
    np.testing.assert_allclose(w, ref_w[-5:], rtol=1e-11)
    _assert_eigvecs(V, ref_V[:, -5:], 1e-8)
    R = A.matmat(V) - V * w
    assert np.linalg.norm(R, axis=0).max() <= 1e-11 * w.max()


def test_randomized_matches_eigh_on_decaying_spectrum():
    rng = np.random.default_rng(1)
    Q, _ = np.linalg.qr(rng.normal(size=(200, 200)))
    lam = 2.0 ** -np.arange(200)
    A = (Q * lam) @ Q.T
    w, V = randomized_eigsh(A, 4, n_iter=3, random_state=0)
    np.testing.assert_allclose(w, lam[:4], rtol=1e-10)
    _assert_eigvecs(V, Q[:, :4], 1e-8)


@pytest.mark.parametrize("solver", [block_lanczos, lobpcg])
def test_smallest_match_eigh(solver):
    rng = np.random.default_rng(2)
    Q, _ = np.linalg.qr(rng.normal(size=(120, 120)))
    lam = np.concatenate([[0.1, 0.5, 1.0], np.linspace(5, 10, 117)])
    A = (Q * lam) @ Q.T
    w, V = solver(A, 3, which="smallest", random_state=0)
    np.testing.assert_allclose(w, lam[:3], atol=1e-8)
    _assert_eigvecs(V, Q[:, :3], 1e-6)


def test_block_size_invariance():
    X = _data(200)
    A = KernelOperator(make_kernel("rbf", gamma=0.5), X)
    w4, V4 = block_lanczos(A, 6, block_size=4, random_state=0)
    w12, V12 = block_lanczos(A, 6, block_size=12, random_state=1)
    np.testing.assert_allclose(w4, w12, rtol=1e-10)
    _assert_eigvecs(V4, V12, 1e-7)


def test_centered_operator_is_the_centred_matrix(backend, dtype):
    X = _data(90).astype(dtype)
    op = CenteredOperator(KernelOperator(make_kernel("rbf", gamma=0.2), X, backend=backend))
    K = _dense_rbf(X.astype(np.float64), 0.2)
    C = np.eye(90) - 1.0 / 90
    V = np.random.default_rng(3).normal(size=(90, 4))
    np.testing.assert_allclose(op @ V, C @ K @ C @ V, atol=VAL_TOL[dtype] * 1e3)
    # the row means riding along with the first product: the same operator
    late = CenteredOperator(KernelOperator(make_kernel("rbf", gamma=0.2), X,
                                           backend=backend), defer=True)
    np.testing.assert_allclose(late @ V, C @ K @ C @ V, atol=VAL_TOL[dtype] * 1e3)
    np.testing.assert_allclose(late.row_means, K.mean(axis=1),
                               rtol=VAL_TOL[dtype] * 1e3)
    assert late.grand_mean == pytest.approx(K.mean(), rel=VAL_TOL[dtype] * 1e3)


def test_normalized_affinity_is_scipy_laplacian(backend, dtype):
    from scipy.sparse.csgraph import laplacian

    X = _data(80).astype(dtype)
    op = NormalizedAffinityOperator(
        KernelOperator(make_kernel("rbf", gamma=0.4), X, backend=backend), 1.0)
    L, dd = laplacian(_dense_rbf(X.astype(np.float64), 0.4), normed=True, return_diag=True)
    V = np.random.default_rng(4).normal(size=(80, 3))
    np.testing.assert_allclose(op @ V, V - L @ V, atol=VAL_TOL[dtype] * 1e3)
    np.testing.assert_allclose(op.sqrt_degrees, dd, rtol=VAL_TOL[dtype] * 1e3)


def test_no_convergence_escalates_to_dense_or_raises(capsys):
    """Stopped short of tol (2 products), block Lanczos returns no pairs with
    a warning: the dense eigendecomposition's for n <= dense_max, else a
    ConvergenceError that gives the residual and the parameter to raise."""
    X = _data(300)
    A = KernelOperator(make_kernel("rbf", gamma=0.5), X)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        w, V = block_lanczos(A, 5, n_blocks=1, max_iter=2, tol=1e-14, random_state=0,
                             verbose=1)
    err = capsys.readouterr().err
    assert "[block_lanczos] restart 0" in err and "dense eigendecomposition" in err
    ref_w, ref_V = scipy.linalg.eigh(_dense_rbf(X, 0.5))
    np.testing.assert_allclose(w, ref_w[-5:], rtol=1e-12)
    _assert_eigvecs(V, ref_V[:, -5:], 1e-8)
    with pytest.raises(ConvergenceError, match=r"block_lanczos did not converge: "
                       r"relative residual .* raise 'max_iter' or 'tol'"):
        block_lanczos(A, 5, n_blocks=1, max_iter=2, tol=1e-14, random_state=0,
                      dense_max=100)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"k": 0}, "'k' must be an int >= 1"),
    ({"k": 500}, "'k' must be <= 50"),
    ({"k": 2, "which": "middle"}, "'which' must be 'largest' or 'smallest'"),
    ({"k": 2, "tol": -1.0}, "'tol' must be a finite float > 0"),
])
def test_bad_arguments(kwargs, match):
    A = np.eye(50)
    with pytest.raises(ValueError, match=match):
        block_lanczos(A, **kwargs)


def test_bad_operator_and_method():
    with pytest.raises(ValueError, match="'A' must be square"):
        block_lanczos(np.ones((4, 3)), 1)
    with pytest.raises(TypeError, match="'A' must be a LinearOperator"):
        lobpcg([[1.0]], 1)
    with pytest.raises(ValueError, match="unknown method 'power'; valid: lanczos"):
        eigsh(np.eye(5), 1, method="power")


def test_normalized_affinity_with_an_isolated_point():
    """A point whose affinities all underflow to 0: scikit-learn's spectral
    embedding sets the normed Laplacian's diagonal to 1 (SciPy leaves 0 at
    an isolated point); the operator is I minus that matrix."""
    from scipy.sparse.csgraph import laplacian

    X = np.vstack([_data(30), [[1e3, 1e3, 1e3]]])
    op = NormalizedAffinityOperator(KernelOperator(make_kernel("rbf", gamma=1.0), X), 1.0)
    L = laplacian(_dense_rbf(X, 1.0), normed=True)
    np.fill_diagonal(L, 1.0)
    V = np.random.default_rng(5).normal(size=(31, 2))
    assert op.isolated[-1] and op.isolated.sum() == 1
    np.testing.assert_allclose(op @ V, V - L @ V, atol=1e-10)


def test_laplacian_preconditioner_is_its_woodbury_inverse(backend):
    """Every point a landmark: F F^T = W, so the preconditioner is exactly
    (c I - D^-1/2 W D^-1/2)^-1, SPD; LOBPCG with it finds the Laplacian's
    smallest eigenpairs (dense eigh)."""
    X = _data(80)
    kernel = make_kernel("rbf", gamma=0.4)
    S = NormalizedAffinityOperator(KernelOperator(kernel, X, backend=backend), 1.0)
    M = LaplacianPreconditioner(kernel, X, S.degrees, n_components=80, shift=1e-3,
                                backend=backend)
    W = _dense_rbf(X, 0.4)
    d = W.sum(1) - 1.0
    ref = np.linalg.inv(M.c * np.eye(80) - W / np.sqrt(np.outer(d, d)))
    np.testing.assert_allclose(M @ np.eye(80), ref, atol=1e-8 * np.abs(ref).max())
    assert M.c == pytest.approx(1 + 1e-3 + (1 / d).max())
    L = np.eye(80) - S @ np.eye(80)
    w, V = lobpcg(L, 3, which="smallest", M=M, tol=1e-9, random_state=0, scale=1.0)
    ref_w, ref_V = scipy.linalg.eigh((L + L.T) / 2)
    np.testing.assert_allclose(w, ref_w[:3], atol=1e-8)
    _assert_eigvecs(V, ref_V[:, :3], 1e-6)


def test_ritz_residual_estimate_is_the_ritz_residual():
    """The residuals predicted from the last block alone are those of the
    Ritz pairs, formed explicitly, in a Krylov basis and after a thick restart."""
    from kerneltools.linalg._lanczos import (_Basis, _orthonormalize, _rayleigh_ritz,
                                           _reorthonormalize, _ritz_residual_estimate)

    rng = np.random.default_rng(5)
    Q0, _ = np.linalg.qr(rng.normal(size=(150, 150)))
    A = (Q0 * np.linspace(0, 10, 150) ** 2) @ Q0.T
    b, k = 5, 3
    basis = _Basis(150, 40)
    W = _orthonormalize(rng.normal(size=(150, b)), None, rng, 1.0)
    basis.append(W, A @ W)
    for restart in range(2):
        for _ in range(3):
            P, estimate = _ritz_residual_estimate(basis, b, k)
            W = _orthonormalize(P, basis.Q, rng, 1.0)
            basis.append(W, A @ W)
        _, estimate = _ritz_residual_estimate(basis, b, k)
        X, AX, theta, R, res, ref = _rayleigh_ritz(basis.Q, basis.AQ, k + 2)
        assert estimate == pytest.approx(res[:k].max() / ref, rel=1e-6)
        basis.reset(*_reorthonormalize(X, AX))
        W = _orthonormalize(R[:, :b], basis.Q, rng, 1.0)
        basis.append(W, A @ W)


def test_nystroem_eigh_scaled_and_uncentred_with_every_point_a_landmark():
    """center=False, scale=s: the eigenpairs of S K S (exact when every
    point is a landmark), the bound 0."""
    from kerneltools.linalg import nystroem_eigh

    X = _data(60)
    s = np.random.default_rng(6).uniform(0.5, 2.0, 60)
    w, V, info = nystroem_eigh(make_kernel("rbf", gamma=0.3), X, 4, n_landmarks=60,
                               center=False, scale=s)
    ref_w, ref_V = scipy.linalg.eigh(s[:, None] * _dense_rbf(X, 0.3) * s[None, :])
    np.testing.assert_allclose(w, ref_w[::-1][:4], rtol=1e-8)
    _assert_eigvecs(V, ref_V[:, ::-1][:, :4], 1e-6)
    assert info["error_bound"] <= 1e-8 * ref_w[-1]


def _planted_spectrum(n=300, seed=7):
    """A symmetric matrix with eigenvalue 1 three times, 1 - 1e-5 next (a
    nearly disconnected graph's normalised affinity: three components and a
    nearly isolated point), the rest spread over [-0.5, 0.9]."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    lam = np.concatenate([[1.0, 1.0, 1.0, 1.0 - 1e-5], np.linspace(-0.5, 0.9, n - 4)])
    return (Q * lam) @ Q.T, lam


@pytest.mark.parametrize("method", ["lanczos", "lobpcg", "arpack"])
def test_multiple_eigenvalue_found_by_every_method(method):
    """The three copies of eigenvalue 1, never the 1 - 1e-5 after them
    (ARPACK's single start vector spans one direction of the triple
    eigenspace: it returned 1 - 1e-5 for one of them), no warning."""
    A, lam = _planted_spectrum()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        w, V = eigsh(A, 3, method=method, random_state=0, tol=1e-10)
    np.testing.assert_allclose(w, [1.0, 1.0, 1.0], atol=1e-9)
    # the span of V is the eigenspace of 1: no component along the others
    _, ref_V = scipy.linalg.eigh(A)
    np.testing.assert_allclose(np.linalg.norm(ref_V[:, :-3].T @ V), 0, atol=1e-4)


def test_a_twin_that_is_not_the_operator_is_dropped():
    """A_fast far from A (a perturbation of 1e-2 in norm): its Krylov blocks
    stop bringing A's residual down, block Lanczos drops it and finishes on
    A's own products: A's eigenpairs, no warning."""
    rng = np.random.default_rng(8)
    A = _dense_rbf(_data(400), 0.3)
    E = rng.normal(size=A.shape)
    bad = A + 1e-2 * (E + E.T) / np.linalg.norm(E + E.T, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        w, V = block_lanczos(A, 5, A_fast=bad, tol=1e-10, random_state=0)
    ref_w, ref_V = scipy.linalg.eigh(A)
    np.testing.assert_allclose(w, ref_w[-5:], rtol=1e-9)
    assert np.linalg.norm(A @ V - V * w, axis=0).max() <= 1e-10 * ref_w[-1]


def test_lobpcg_that_stops_short_escalates_or_raises():
    A, lam = _planted_spectrum(200)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        w, _ = lobpcg(A, 3, max_iter=2, tol=1e-12, random_state=0)
    np.testing.assert_allclose(w, [1.0, 1.0, 1.0], atol=1e-12)
    with pytest.raises(ConvergenceError, match="lobpcg did not converge: relative"):
        lobpcg(A, 3, max_iter=2, tol=1e-12, random_state=0, dense_max=100)


def test_arpack_with_k_equal_n_is_dense_as_scipy():
    A, _ = _planted_spectrum(12)
    with pytest.warns(RuntimeWarning, match="k >= N"):
        w, V = eigsh(A, 12, method="arpack", random_state=0)
    np.testing.assert_allclose(w, scipy.linalg.eigvalsh(A), atol=1e-12)


def test_off_diagonal_kernel_keeps_the_degree_of_a_nearly_isolated_point(backend, dtype):
    """A point 4 away from the others at gamma = 2: degree ~1e-10, below
    float32's rounding of 1 + degree. W 1 - diag W lost it (relative error
    1, the point looked isolated); the diagonal-free sum keeps it to the
    kernel's precision. Duplicated rows count each other (W_ij = 1)."""
    rng = np.random.default_rng(9)
    X = np.vstack([rng.normal(0, 0.3, (60, 2)), [[4.0, 0.0]], rng.normal(0, 0.3, (3, 2))])
    X[-1] = X[0]  # an exact duplicate
    X = X.astype(dtype)
    kernel = make_kernel("rbf", gamma=2.0)
    W = OffDiagonalKernel(kernel, X, backend=backend)
    S = NormalizedAffinityOperator(W, 0.0)
    ref = _dense_rbf(X.astype(np.float64), 2.0)
    np.fill_diagonal(ref, 0)
    d = ref.sum(1)
    assert d[60] < 1e-8
    np.testing.assert_allclose(S.degrees, d, rtol=VAL_TOL[dtype] * 100)
    V = rng.normal(size=(len(X), 3))
    np.testing.assert_allclose(W @ V, ref @ V, rtol=0, atol=VAL_TOL[dtype] * 100)
    np.testing.assert_allclose(W.to_dense(), ref, atol=1e-12)
