"""No silent wrong results (issue 19): inputs that used to give a wrong answer,
or a warning and zeros, now give the right answer or a clear error.

Each case compares against an independent reference (dense NumPy, SciPy) or
checks the exception's type and the argument its message names.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import kerneltools as kt
from kerneltools import ranges as kr
from kerneltools.exceptions import (
    BackendFallbackWarning,
    BackendUnavailableError,
    ConvergenceWarning,
    NotPositiveDefiniteError,
)
from kerneltools.kernels import make_kernel
from kerneltools.linalg import KernelOperator, conjugate_gradient, select_landmarks

RNG = np.random.default_rng(19)


def _gaussian(x, gamma=0.5):
    K = (-gamma * kt.Vi(x).sqdist(kt.Vj(x))).exp()
    Kd = np.exp(-gamma * ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))
    return K, Kd


# ---------------------------------------------------------------------------
# 1. LazyTensor.solve: validated like linalg.conjugate_gradient, one CG
# ---------------------------------------------------------------------------
def test_solve_rejects_nan_in_b():
    K, _ = _gaussian(RNG.normal(size=(20, 2)))
    b = np.ones(20)
    b[3] = np.nan
    with pytest.raises(ValueError, match=r"solve: 'b' contains NaN or infinity"):
        K.solve(b, alpha=0.1, backend="numpy")


@pytest.mark.parametrize("where", ["i", "j", "p"])
def test_solve_rejects_nan_in_the_operator_data(where):
    x = RNG.normal(size=(20, 2))
    xi, xj, g = x.copy(), x.copy(), np.array([0.5])
    {"i": xi, "j": xj, "p": g}[where].flat[0] = np.nan
    K = (-kt.Pm(g) * kt.Vi(xi).sqdist(kt.Vj(xj))).exp()
    cat = {"i": "i-variable", "j": "j-variable", "p": "parameter"}[where]
    with pytest.raises(ValueError, match=rf"solve: K's {cat} .* contains NaN or infinity"):
        K.solve(np.ones(20), alpha=0.1, backend="numpy")


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"max_iter": 0}, r"'max_iter' must be an int >= 1, got 0"),
        ({"max_iter": -3}, r"'max_iter' must be an int >= 1, got -3"),
        ({"max_iter": 2.5}, r"'max_iter' must be an int >= 1, got 2.5"),
        ({"max_iter": True}, r"'max_iter' must be an int >= 1, got True"),
        ({"tol": -1.0}, r"'tol' must be a finite float > 0, got -1.0"),
        ({"tol": 0.0}, r"'tol' must be a finite float > 0, got 0.0"),
        ({"tol": float("nan")}, r"'tol' must be a finite float > 0, got nan"),
        ({"tol": float("inf")}, r"'tol' must be a finite float > 0, got inf"),
    ],
)
def test_solve_and_conjugate_gradient_validate_alike(kwargs, match):
    x = RNG.normal(size=(15, 2))
    K, Kd = _gaussian(x)
    with pytest.raises(ValueError, match=r"solve: " + match):
        K.solve(np.ones(15), alpha=0.1, backend="numpy", **kwargs)
    with pytest.raises(ValueError, match=r"conjugate_gradient: " + match):
        conjugate_gradient(Kd + 0.1 * np.eye(15), np.ones(15), **kwargs)


def test_solve_rejects_an_infinite_alpha():
    K, _ = _gaussian(RNG.normal(size=(10, 2)))
    with pytest.raises(ValueError, match=r"solve: 'alpha' must be finite, got inf"):
        K.solve(np.ones(10), alpha=float("inf"), backend="numpy")


def test_solve_of_an_indefinite_operator_raises_and_names_alpha():
    x = RNG.normal(size=(30, 2))
    K, _ = _gaussian(x)
    with pytest.raises(NotPositiveDefiniteError, match=r"not positive definite.*'alpha'"):
        (-K).solve(RNG.normal(size=30), alpha=1e-3, backend="numpy")


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


def test_solve_with_a_zero_column_and_converged_columns():
    # A column of zeros (p = 0, p^T A p = 0 from the start) and columns that
    # converge at different iterations are legitimate: no error, exact results.
    x = RNG.normal(size=(30, 2))
    K, Kd = _gaussian(x)
    b = RNG.normal(size=(30, 3))
    b[:, 1] = 0
    b[:, 2] = Kd[:, 0] + 0.1 * np.eye(30)[:, 0]  # solution e_0
    a = K.solve(b, alpha=0.1, tol=1e-12, backend="numpy")
    ref = np.linalg.solve(Kd + 0.1 * np.eye(30), b)
    np.testing.assert_allclose(a, ref, atol=1e-8)
    assert np.all(a[:, 1] == 0)


def test_solve_on_a_singular_psd_operator_with_b_in_its_range():
    # The linear kernel of 2-D points has rank 2: p^T K p hits 0 to rounding
    # once the range is spanned, which must stop the column, not raise.
    x = RNG.normal(size=(40, 2))
    K = kt.Vi(x) | kt.Vj(x)
    b = x @ np.array([1.0, -2.0])
    a = K.solve(b, alpha=0.0, tol=1e-10, backend="numpy")
    ref = np.linalg.lstsq(x @ x.T, b, rcond=None)[0]  # the minimum-norm solution
    np.testing.assert_allclose(a, ref, atol=1e-8 * np.abs(ref).max())


def test_solve_of_a_zero_right_hand_side_is_zero():
    K, _ = _gaussian(RNG.normal(size=(10, 2)))
    assert np.all(K.solve(np.zeros(10), alpha=0.1, backend="numpy") == 0)


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


# ---------------------------------------------------------------------------
# 2. Variables keep their identity across processes
# ---------------------------------------------------------------------------
_PICKLER = textwrap.dedent("""
    import pickle, sys
    import numpy as np
    import kerneltools as kt
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(5, 2)), rng.normal(size=(6, 2))
    K = (kt.Vi(x) - kt.Vj(y)).sum(-1)
    sys.stdout.buffer.write(pickle.dumps((K, x, y)))
""")


def _run(code: str, stdin: bytes = b"") -> bytes:
    env = dict(os.environ, KERNELTOOLS_BACKEND="numpy")
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          env=env, timeout=120, input=stdin).stdout


_COMBINER = textwrap.dedent("""
    import pickle, sys
    import numpy as np
    import kerneltools as kt
    rng = np.random.default_rng(1)
    # fresh variables of this process, made before and after the unpickling
    a, b = rng.normal(size=(5, 2)), rng.normal(size=(6, 2))
    G = (kt.Vi(a) * kt.Vj(b)).sum(-1)
    K, x, y = pickle.loads(sys.stdin.buffer.read())
    H = kt.Vj(b[:, :1])
    out = (K + G + H).sum(axis=1)
    sys.stdout.buffer.write(pickle.dumps((out, x, y, a, b)))
""")


def test_lazytensor_pickled_in_another_process_combines_correctly():
    # pickled in one fresh process, combined with new variables in another
    out, x, y, a, b = pickle.loads(_run(_COMBINER, stdin=_run(_PICKLER)))
    ref = ((x[:, None] - y[None]).sum(-1) + a @ b.T + b[None, :, 0]).sum(1)
    np.testing.assert_allclose(out[:, 0], ref, rtol=1e-12)


def test_two_processes_compute_the_same_kernel_key():
    code = textwrap.dedent("""
        import numpy as np, kerneltools as kt
        for _ in range({extra}):  # variables made before: other ids
            kt.Vi(np.ones((2, 1)))
        x = np.ones((5, 3))
        K = (-kt.Pm(0.5) * kt.Vi(x).sqdist(kt.Vj(x))).exp()
        print(K._plan("Sum", 1)[0].key)
    """)
    keys = {_run(code.format(extra=e)).decode().strip() for e in (0, 7)}
    x = np.zeros((9, 3))
    here = (-kt.Pm(2.0) * kt.Vi(x).sqdist(kt.Vj(x))).exp()._plan("Sum", 1)[0].key
    assert keys == {here}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_variables_made_in_a_forked_child_do_not_collide():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a new variable, sent back pickled
        try:
            os.close(r)
            payload = pickle.dumps(kt.Vi(np.full((4, 1), 10.0)))
            with os.fdopen(w, "wb") as f:
                f.write(payload)
        finally:
            os._exit(0)
    os.close(w)
    mine = kt.Vi(np.ones((4, 1)))  # made after the fork, as the child's was
    with os.fdopen(r, "rb") as f:
        theirs = pickle.loads(f.read())
    os.waitpid(pid, 0)
    out = ((mine + theirs) * kt.Vj(np.ones((3, 1)))).sum(axis=1, backend="numpy")
    np.testing.assert_array_equal(out[:, 0], np.full(4, 33.0))


def test_pickled_tensor_keeps_shared_variables_in_one_process():
    x = RNG.normal(size=(6, 2))
    x_i = kt.Vi(x)
    K = (x_i - kt.Vj(x)).sqnorm2()
    K2, x_i2 = pickle.loads(pickle.dumps((K, x_i)))
    g = K2.grad(x_i2, 1.0).sum(axis=1, backend="numpy")
    ref = (2 * (x[:, None] - x[None])).sum(1)
    np.testing.assert_allclose(g, ref, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------
# 3. Smaller ones: bad arguments get an exception that names them
# ---------------------------------------------------------------------------
_x, _y = RNG.normal(size=(4, 2)), RNG.normal(size=(3, 2))
_F = kt.Vi(_x).sqdist(kt.Vj(_y))


@pytest.mark.parametrize(
    "call",
    [
        lambda: _F.sum(axis=True),
        lambda: _F.sum(dim=True),
        lambda: _F.sum(axis=1.0),
        lambda: _F.sum(axis=-1.0),
        lambda: _F.min(axis=False),
        lambda: _F.logsumexp(dim=np.True_),
        lambda: _F.argKmin(1, axis=True),
        lambda: _F.vjp(kt.Vi(_x), np.ones((4, 1)), axis=True),
    ],
)
def test_bool_and_float_axes_are_rejected(call):
    with pytest.raises((TypeError, ValueError), match=r"'axis'"):
        call()


def test_lazytensor_axis_true_is_rejected():
    with pytest.raises((TypeError, ValueError), match=r"axis"):
        kt.LazyTensor(_x, axis=True)


def test_conflicting_axis_and_dim_are_rejected():
    with pytest.raises(ValueError, match=r"'axis'.*'dim'"):
        _F.sum(axis=0, dim=1)
    with pytest.raises(ValueError, match=r"'axis'.*'dim'"):
        _F.max(axis=0, dim=1)
    np.testing.assert_allclose(_F.sum(axis=1, dim=1), _F.sum(axis=1))


@pytest.mark.parametrize("D", [0, -3])
def test_one_hot_needs_a_positive_dimension(D):
    match = rf"one_hot: 'D' must be an integer between 1 and \d+, got {D}\b"
    with pytest.raises(ValueError, match=match):
        kt.Vi(np.arange(4.0)[:, None]).one_hot(D)


def test_block_sparsity_rejects_a_mask_larger_than_the_clusters():
    lab_x, lab_y = np.array([0, 1, 1, 2]), np.array([0, 0, 1])
    with pytest.raises(ValueError, match=r"'keep' must be a \(3, 2\) boolean mask"):
        kr.block_sparsity(lab_x, lab_y, np.ones((4, 2), bool))
    with pytest.raises(ValueError, match=r"'keep' must be a \(3, 2\) boolean mask"):
        kr.block_sparsity(lab_x, lab_y, np.ones((3, 5), bool))
    with pytest.raises(ValueError, match=r"'keep' pairs .* labels_j has 2 clusters"):
        kr.block_sparsity(lab_x, lab_y, (np.array([0, 1]), np.array([0, 2])))
    with pytest.raises(ValueError, match=r"'keep' pairs .* labels_i has 3 clusters"):
        kr.block_sparsity(lab_x, lab_y, (np.array([3, 1]), np.array([0, 1])))


def test_block_sparsity_with_the_right_mask_matches_dense():
    x, y, b = RNG.normal(size=(30, 2)), RNG.normal(size=(20, 2)), RNG.normal(size=(20, 1))
    lab_x, lab_y = kr.grid_cluster(x, 1.0), kr.grid_cluster(y, 1.0)
    keep = RNG.random((lab_x.max() + 1, lab_y.max() + 1)) < 0.6
    bs = kr.block_sparsity(lab_x, lab_y, keep)
    K = (-kt.Vi(x).sqdist(kt.Vj(y))).exp()
    out = (K * kt.Vj(b)).sum(axis=1, ranges=bs, backend="numpy")
    Kd = np.exp(-((x[:, None] - y[None]) ** 2).sum(-1)) * keep[lab_x][:, lab_y]
    np.testing.assert_allclose(out, Kd @ b, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("size", [1e-30, 1e-300, [1.0, 1e-25]])
def test_grid_cluster_detects_cell_index_overflow(size):
    x = RNG.normal(size=(10, 2))
    with pytest.raises(ValueError, match=r"'size'.*overflow"):
        kr.grid_cluster(x, size)


@pytest.mark.parametrize("size", [0.0, -1.0, float("inf"), float("nan")])
def test_grid_cluster_needs_a_finite_positive_size(size):
    with pytest.raises(ValueError, match=r"'size' must be finite and > 0"):
        kr.grid_cluster(RNG.normal(size=(10, 2)), size)


def test_grid_cluster_small_cells_still_work():
    x = RNG.normal(size=(50, 3))
    lab = kr.grid_cluster(x, 1e-6)  # every point in its own cell: no overflow
    assert len(np.unique(lab)) == 50
    cells = np.floor((x - x.min(0)) / 1e-6)
    _, ref = np.unique(cells, axis=0, return_inverse=True)
    np.testing.assert_array_equal(lab, ref.ravel())


_c2, _r2, _n2 = np.zeros((2, 2)), np.ones(2), np.array([2, 2])


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: kr.kmeans_cluster(_x, 2.5), r"'n_clusters' must be an integer, got 2.5"),
        (lambda: kr.kmeans_cluster(_x, True), r"'n_clusters' must be an integer, got True"),
        (lambda: kr.kmeans_cluster(_x, 2, n_iter=1.5), r"'n_iter' must be an integer"),
        (lambda: kr.knn_mask(_c2, _r2, _c2, _r2, _n2, 1.5), r"'K' must be an integer"),
        (lambda: select_landmarks("rbf", _x, 2.5), r"'n_components' must be an int >= 1"),
        (lambda: select_landmarks("rbf", _x, True), r"'n_components' must be an int >= 1"),
    ],
)
def test_counts_must_be_integers(call, match):
    # int() used to truncate them (2.5 -> 2, True -> 1) without a word
    with pytest.raises((TypeError, ValueError), match=match):
        call()


@pytest.mark.parametrize(
    "kernel,kwargs,param,expected,got",
    [
        ("rbf", {"gamma": -1}, "gamma", "a float >= 0", "-1"),
        ("laplacian", {"gamma": -0.5}, "gamma", "a float >= 0", "-0.5"),
        ("chi2", {"gamma": float("nan")}, "gamma", "a float >= 0", "nan"),
        ("poly", {"gamma": -2.0}, "gamma", "a float >= 0", "-2.0"),
        ("polynomial", {"degree": -1}, "degree", "a float >= 0", "-1"),
        ("poly", {"degree": float("inf")}, "degree", "a float >= 0", "inf"),
        ("poly", {"coef0": float("nan")}, "coef0", "a finite float", "nan"),
        ("sigmoid", {"gamma": -1.0}, "gamma", "a float >= 0", "-1.0"),
        ("sigmoid", {"coef0": float("inf")}, "coef0", "a finite float", "inf"),
        ("rbf", {"gamma": "big"}, "gamma", "a float >= 0", "'big'"),
        ("rbf", {"gamma": True}, "gamma", "a float >= 0", "True"),
    ],
)
def test_make_kernel_validates_named_kernel_parameters(kernel, kwargs, param, expected, got):
    msg = (f"The '{param}' parameter of make_kernel('{kernel}') must be {expected}. "
           f"Got {got} instead.")
    with pytest.raises(ValueError, match="^" + _escape(msg) + "$"):
        make_kernel(kernel, **kwargs)


def _escape(s):
    import re

    return re.escape(s)


def test_make_kernel_accepts_valid_parameters():
    X = RNG.random((6, 3))
    from sklearn.metrics.pairwise import pairwise_kernels

    # gamma = 0 is scikit-learn's constant kernel (KernelRidge's gamma is >= 0)
    for name, kw in [("rbf", {"gamma": 0.3}), ("rbf", {"gamma": 0.0}), ("laplacian", {"gamma": 0}), ("poly", {"degree": 0, "coef0": -1.0}),
                     ("sigmoid", {"gamma": 0.1, "coef0": -2.0}), ("chi2", {"gamma": 2.0})]:
        k = make_kernel(name, **kw)
        np.testing.assert_allclose(k.lazy(X).to_dense()[..., 0],
                                   pairwise_kernels(X, metric=name, **kw), rtol=1e-12)


@pytest.mark.parametrize(
    "make,param",
    [
        (lambda gk: gk.RBF(length_scale=-1.0), "length_scale"),
        (lambda gk: gk.RBF(length_scale=[1.0, 0.0]), "length_scale"),
        (lambda gk: gk.Matern(length_scale=-2.0, nu=1.5), "length_scale"),
        (lambda gk: gk.ConstantKernel(-1.0) * gk.RBF(), "constant_value"),
        (lambda gk: gk.RBF() + gk.WhiteKernel(noise_level=-1e-3), "noise_level"),
        (lambda gk: gk.RationalQuadratic(alpha=-1.0), "alpha"),
        (lambda gk: gk.ExpSineSquared(periodicity=0.0), "periodicity"),
        (lambda gk: gk.DotProduct(sigma_0=float("nan")), "sigma_0"),
    ],
)
def test_make_kernel_validates_gaussian_process_hyperparameters(make, param):
    from sklearn.gaussian_process import kernels as gk

    with pytest.raises(ValueError, match=rf"The '{param}' parameter of .* must be"):
        make_kernel(make(gk))


def _cpu_available():
    from kerneltools.backend._dispatch import BACKENDS

    return BACKENDS["cpu"].available()[0]


@pytest.mark.skipif(not _cpu_available(), reason="needs the C backend")
def test_a_formula_too_wide_for_the_c_backend_says_why():
    d = 12_000  # Var i, Var j, Mul: 36,000 scalar temporaries, then SumFeat
    x, y = RNG.normal(size=(3, d)), RNG.normal(size=(2, d))
    F = (kt.Vi(x) * kt.Vj(y)).sum(-1)
    with pytest.raises(BackendUnavailableError,
                       match=r"too wide for the cpu backend: 36001 scalar temporaries "
                             r"> limit 20000"):
        F.sum(axis=1, backend="cpu")
    from kerneltools.backend._dispatch import BACKENDS

    if BACKENDS["cuda"].available()[0]:
        pytest.skip("auto picks CUDA here, which has its own limit")
    with pytest.warns(BackendFallbackWarning,
                      match=r"too wide for the cpu backend: 36001 scalar temporaries "
                            r"> limit 20000"):
        out = F.sum(axis=1, backend="auto")
    np.testing.assert_allclose(out[:, 0], (x @ y.T).sum(1), rtol=1e-10)


def test_convergence_warning_still_comes_when_max_iter_is_reached():
    K, _ = _gaussian(RNG.normal(size=(30, 2)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        with pytest.raises(ConvergenceWarning, match="max_iter"):
            K.solve(RNG.normal(size=30), alpha=1e-3, max_iter=1, backend="numpy")
