"""``LazyTensor.solve`` (``lazy/_solve.py``): validated like
:func:`kerneltools.linalg.conjugate_gradient` (one CG), exact where the
operator is singular but consistent, and an error, never a wrong answer, where
it is not positive definite.

Each case compares against dense NumPy or checks the exception's type and the
argument its message names.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kerneltools as kt
from kerneltools.exceptions import ConvergenceWarning, NotPositiveDefiniteError
from kerneltools.linalg import conjugate_gradient

RNG = np.random.default_rng(19)


def _gaussian(x, gamma=0.5):
    K = (-gamma * kt.Vi(x).sqdist(kt.Vj(x))).exp()
    Kd = np.exp(-gamma * ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))
    return K, Kd


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
    match = rf"solve: K's {cat} .* contains NaN or infinity"
    with pytest.raises(ValueError, match=match):
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
    match = r"not positive definite.*'alpha'"
    with pytest.raises(NotPositiveDefiniteError, match=match):
        (-K).solve(RNG.normal(size=30), alpha=1e-3, backend="numpy")


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


def test_convergence_warning_still_comes_when_max_iter_is_reached():
    K, _ = _gaussian(RNG.normal(size=(30, 2)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        with pytest.raises(ConvergenceWarning, match="max_iter"):
            K.solve(RNG.normal(size=30), alpha=1e-3, max_iter=1, backend="numpy")
