"""Bad input gets an exception of the right type whose message names the culprit.

One test per kind of bad input listed in DESIGN.md ("Bad input"): wrong ranks,
mismatched sizes and dimensions, non-numeric and empty arrays, K out of range,
unknown backends, bad axes, bad operands of ``@``, ``solve`` and the gradients.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import kerneltools as kt
from kerneltools.backend._dispatch import BACKENDS
from kerneltools.exceptions import BackendUnavailableError, KernelToolsError

x = np.ones((5, 3))
y = np.ones((4, 3))


def F():
    """A scalar formula of shape (5, 4)."""
    return kt.Vi(x).sqdist(kt.Vj(y))


# ---------------------------------------------------------------------------
# Ranks
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "build,match",
    [
        (lambda: kt.LazyTensor(np.ones((2, 2, 2, 2))), r"shape \(2, 2, 2, 2\).*batch"),
        (lambda: kt.LazyTensor(np.ones((2, 3, 2))), r"shape \(2, 3, 2\).*\(N, 1, D\)"),
        (lambda: kt.LazyTensor(np.ones((2, 3))), r"shape \(2, 3\).*axis=0"),
        (lambda: kt.LazyTensor(np.ones((2, 3)), axis=2), r"axis=0.*axis=1"),
        (lambda: kt.LazyTensor(np.ones(3), axis=0), r"axis is only meaningful.*\(3,\)"),
        (lambda: kt.Vi(np.ones(())), r"Vi: 'x' must be 1-D.*got shape \(\)"),
        (lambda: kt.Vj(np.ones(())), r"Vj: 'x' must be 1-D.*got shape \(\)"),
        (lambda: kt.Vi(3.0), r"Vi: 'x' must be 1-D .*shape \(\)"),
        (lambda: kt.Pm(np.ones((2, 2))), r"Pm: 'p' must be a scalar or 1-D.*\(2, 2\)"),
    ],
)
def test_wrong_rank(build, match):
    with pytest.raises(ValueError, match=match):
        build()


# ---------------------------------------------------------------------------
# Sizes and dimensions
# ---------------------------------------------------------------------------
def test_two_i_variables_with_different_n():
    with pytest.raises(
        ValueError, match=r"i-variable.*same number of rows.*\(5, 1, 3\), \(6, 1, 3\)"
    ):
        kt.Vi(x) + kt.Vi(np.ones((6, 3)))


def test_two_j_variables_with_different_m():
    with pytest.raises(
        ValueError, match=r"j-variable.*same number of rows.*\(1, 4, 3\), \(1, 6, 3\)"
    ):
        kt.Vj(y) * kt.Vj(np.ones((6, 3)))


def test_mismatched_sizes_inside_a_larger_formula():
    a = kt.Vi(x).exp()
    b = kt.Vj(y) + kt.Vi(np.ones((7, 3)))
    with pytest.raises(ValueError, match="5 and 7 points by i"):
        a - b


@pytest.mark.parametrize(
    "build,match",
    [
        (
            lambda: kt.Vi(x) + kt.Vj(np.ones((4, 2))),
            r"Add: incompatible dimensions \(3, 2\).*\(5, 1, 3\), \(1, 4, 2\)",
        ),
        (
            lambda: kt.minimum(kt.Vi(x), kt.Vj(np.ones((4, 2)))),
            r"Minimum: incompatible dimensions \(3, 2\)",
        ),
        (
            lambda: kt.Vi(x).clamp(kt.Pm(np.ones(2)), 1.0),
            r"Clamp: incompatible dimensions \(3, 2, 1\)",
        ),
        (lambda: kt.Vi(x) | kt.Vj(np.ones((4, 2))), r"dot product: dimensions 3 and 2"),
        (
            lambda: kt.Vi(x).sqdist(kt.Vj(np.ones((4, 2)))),
            r"incompatible dimensions \(3, 2\)",
        ),
        (
            lambda: kt.Vi(x).matvecmult(kt.Vj(np.ones((4, 2)))),
            r"matvecmult: a matrix of 3 entries.*dimension 2",
        ),
        (
            lambda: kt.Vi(x).weightedsqnorm(kt.Pm(np.ones(4))),
            r"weights have dimension 4; expected 1, 3 or 9",
        ),
        (
            lambda: kt.Vi(x).extract(2, 2),
            r"components \[2, 4\) are outside a vector of dimension 3",
        ),
        (lambda: kt.Vi(x)[3], r"components \[3, 4\).*dimension 3"),
        (lambda: kt.Vi(x)[-4], r"outside a vector of dimension 3"),
        (lambda: kt.Vi(x)[::2], r"contiguous.*slice\(None, None, 2\)"),
        (
            lambda: kt.Vi(x).one_hot(4),
            r"one_hot: needs a scalar formula, got dimension 3",
        ),
    ],
)
def test_incompatible_dimensions(build, match):
    with pytest.raises(ValueError, match=match):
        build()


@pytest.mark.parametrize(
    "build,match",
    [
        (lambda: kt.Vi(x)["a"], r"indices must be an int or a slice, got 'a'"),
        (lambda: kt.Vi(x).round(1.5), r"'decimals' must be an integer, got 1.5"),
        (lambda: kt.Vi(x).one_hot(2.0), r"'D' must be an integer"),
        (lambda: kt.Vi(x).extract(0, True), r"'d' must be an integer"),
        (lambda: bool(F()), r"truth value of a LazyTensor"),
    ],
)
def test_wrong_argument_types(build, match):
    with pytest.raises(TypeError, match=match):
        build()


# ---------------------------------------------------------------------------
# Non-numeric and empty arrays
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "data,match",
    [
        (np.array([["a", "b"]]), r"Vi: 'x' must be a numeric array.*<U1"),
        (
            np.array([[object()]], dtype=object),
            r"Vi: 'x' must be a numeric array.*object",
        ),
        ([[1.0, 2.0], [3.0]], r"Vi: 'x' must be a numeric array"),
        (
            np.array(["2020-01-01"], dtype="datetime64[D]"),
            r"Vi: 'x' must be a numeric array.*datetime64",
        ),
    ],
    ids=["strings", "objects", "ragged", "datetimes"],
)
def test_non_numeric_arrays(data, match):
    with pytest.raises(TypeError, match=match):
        kt.Vi(data)


@pytest.mark.parametrize(
    "build,match",
    [
        # complex formulas (issue 21): an operation without a complex meaning
        (lambda: (kt.Vi(x) * 1j).min(axis=1), r"the Min reduction has no meaning for "
         "complex values"),
        (lambda: (kt.Vi(x) * 1j).log(), r"the operation Log has no meaning for complex"),
        (lambda: kt.Vi(x) + "a", r"must be a numeric array.*<U1"),
        (lambda: kt.Vi(x) + None, r"must be a numeric array.*object"),
        (lambda: kt.Pm(np.array(["a"])), r"Pm: 'p' must be a numeric array"),
    ],
)
def test_non_numeric_operands(build, match):
    with pytest.raises(TypeError, match=match):
        build()


@pytest.mark.parametrize(
    "build,match",
    [
        (lambda: kt.Vi(np.ones((0, 3))), r"Vi: 'x' is empty \(shape \(0, 3\)\)"),
        (lambda: kt.Vj(np.ones((3, 0))), r"Vj: 'x' is empty \(shape \(3, 0\)\)"),
        (lambda: kt.Pm(np.ones(0)), r"Pm: 'p' is empty"),
        (lambda: kt.LazyTensor(np.ones((0, 1, 3))), r"is empty \(shape \(0, 1, 3\)\)"),
        (lambda: F() @ np.ones((0,)), r"right operand of @ is empty"),
        (lambda: kt.Vi(x).sqdist(kt.Vj(x)).solve(np.ones(0)), r"solve: 'b' is empty"),
    ],
)
def test_empty_arrays(build, match):
    with pytest.raises(ValueError, match=match):
        build()


# ---------------------------------------------------------------------------
# K in the K-reductions
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["Kmin", "argKmin", "Kmin_argKmin"])
@pytest.mark.parametrize("K", [5, 0, -1])
def test_K_out_of_range(method, K):
    with pytest.raises(
        ValueError, match=rf"K={K} but the reduced axis has 4 points.*between 1 and 4"
    ):
        getattr(F(), method)(K, axis=1, backend="numpy")


def test_K_larger_than_n_over_i():
    with pytest.raises(ValueError, match=r"K=6 but the reduced axis has 5 points"):
        F().argKmin(6, axis=0, backend="numpy")


@pytest.mark.parametrize("K", [2.0, "2", None, True])
def test_K_not_an_integer(K):
    with pytest.raises(TypeError, match=r"'K' must be an integer"):
        F().argKmin(K, axis=1, backend="numpy")


# ---------------------------------------------------------------------------
# Backends
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["gpu", "CUDA12", "", 3])
def test_unknown_backend_argument(name):
    with pytest.raises(
        ValueError,
        match=r"the 'backend' argument must be one of 'auto', 'cpu', 'cuda', 'numpy'; got "
        + re.escape(repr(name)),
    ):
        F().sum(axis=1, backend=name)


def test_unknown_backend_in_environment(monkeypatch):
    monkeypatch.setenv("KERNELTOOLS_BACKEND", "tpu")
    with pytest.raises(
        ValueError,
        match=r"environment variable KERNELTOOLS_BACKEND must be one of.*got 'tpu'",
    ):
        F().sum(axis=1)
    # The argument wins over the environment.
    out = F().sum(axis=1, backend="numpy")
    assert out.shape == (5, 1)


def test_backend_names_are_case_insensitive(monkeypatch):
    monkeypatch.setenv("KERNELTOOLS_BACKEND", "NumPy")
    np.testing.assert_array_equal(F().sum(axis=1), np.zeros((5, 1)))


def test_unknown_backend_is_rejected_before_computing():
    with pytest.raises(ValueError, match="backend"):
        kt.Vi(x).sqdist(kt.Vj(x)).solve(np.ones(5), backend="gpu")
    with pytest.raises(ValueError, match="backend"):
        F().vjp(kt.Vi(x), np.ones((5, 1)), "Sum", 1, backend="gpu")


@pytest.mark.skipif(BACKENDS["cuda"].available()[0], reason="a GPU is available here")
def test_cuda_without_a_gpu():
    with pytest.raises(
        BackendUnavailableError, match=r"backend='cuda' cannot run here"
    ):
        F().sum(axis=1, backend="cuda")
    assert issubclass(BackendUnavailableError, KernelToolsError)


# ---------------------------------------------------------------------------
# Axes
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [3, -1, -2, None, "i", 1.0])
@pytest.mark.parametrize("method", ["min", "logsumexp", "argKmin"])
def test_bad_axis(method, axis):
    if (method, axis) == ("min", -1):  # pykeops' feature-wise min: a formula (issue 21)
        assert isinstance(getattr(F(), method)(axis=axis), kt.LazyTensor)
        return
    kwargs = {"K": 1} if method == "argKmin" else {}
    with pytest.raises(
        ValueError,
        match=r"'axis' must be 0 \(reduce over i\) or 1 \(reduce over j\); got "
        + re.escape(repr(axis)),
    ):
        getattr(F(), method)(axis=axis, backend="numpy", **kwargs)


def test_bad_axis_in_vjp_and_sum():
    with pytest.raises(ValueError, match=r"'axis' must be 0.*got 5"):
        F().sum(axis=5)
    with pytest.raises(ValueError, match=r"'axis' must be 0.*got 2"):
        F().vjp(kt.Vi(x), np.ones((5, 1)), "Sum", 2)


# ---------------------------------------------------------------------------
# @, solve, weights, gradients
# ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "b,exc,match",
    [
        (np.ones(5), ValueError, r"K @ b.*shape \(5, 4\).*4 rows.*got \(5,\)"),
        (np.ones((3, 2)), ValueError, r"K @ b.*4 rows.*got \(3, 2\)"),
        (
            np.ones((4, 2, 2)),
            ValueError,
            r"K @ b.*4 rows.*batched \(B\.\.\., 4, E\); got \(4, 2, 2\)",
        ),
        (np.array(["a"] * 4), TypeError, r"right operand of @ must be a numeric array"),
    ],
)
def test_matmul_with_wrong_shapes(b, exc, match):
    with pytest.raises(exc, match=match):
        F() @ b


def test_matmul_needs_a_scalar_formula():
    with pytest.raises(
        ValueError, match=r"K @ b needs a scalar formula K, got dimension 3"
    ):
        kt.Vi(x) * kt.Vj(y) @ np.ones(4)


K_sq = kt.Vi(x).sqdist(kt.Vj(x))


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (
            lambda: K_sq.solve(np.ones(4)),
            ValueError,
            r"solve: 'b' must have shape \(5,\) or \(5, E\), got \(4,\)",
        ),
        (
            lambda: K_sq.solve(np.ones((5, 2, 2))),
            ValueError,
            r"solve: 'b' must have shape.*got \(5, 2, 2\)",
        ),
        (
            lambda: K_sq.solve(np.array(["a"] * 5)),
            TypeError,
            r"solve: 'b' must be a numeric array",
        ),
        (
            lambda: K_sq.solve(kt.Vj(np.ones((5, 1)))),
            TypeError,
            r"solve: 'b' must be an array or an i-variable",
        ),
        (
            lambda: K_sq.solve(np.ones(5), alpha=-1),
            ValueError,
            r"solve: 'alpha' must be >= 0, got -1.0",
        ),
        (
            lambda: K_sq.solve(np.ones(5), alpha=float("nan")),
            ValueError,
            r"'alpha' must be >= 0, got nan",
        ),
        (
            lambda: F().solve(np.ones(5)),
            ValueError,
            r"solve needs a square operator, got shape \(5, 4\)",
        ),
        (
            lambda: (kt.Vi(x) - kt.Vj(x)).solve(np.ones(5)),
            ValueError,
            r"solve needs a scalar formula K, got dimension 3",
        ),
    ],
)
def test_solve_with_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_weights_with_wrong_sizes_or_dimensions():
    with pytest.raises(ValueError, match=r"4 and 5 points by j"):
        F().sumsoftmaxweight(kt.Vj(np.ones((5, 1))), axis=1, backend="numpy")
    with pytest.raises(
        ValueError, match=r"LogSumExpWeight: the formula must be scalar.*dimension 3"
    ):
        kt.Vi(x).exp().logsumexp(axis=1, weight=kt.Vj(np.ones((4, 1))), backend="numpy")


def test_gradient_with_bad_input():
    with pytest.raises(TypeError, match=r"grad: 'v' must be a variable LazyTensor"):
        F().grad(F(), 1.0)
    with pytest.raises(
        ValueError,
        match=r"grad: 'gradin' has dimension 3; it must match the formula's dimension 1",
    ):
        F().grad(kt.Vi(x), kt.Vi(np.ones((5, 3))))
    with pytest.raises(TypeError, match=r"vjp: 'wrt' must be a variable LazyTensor"):
        F().vjp(F(), np.ones((5, 1)))
    with pytest.raises(
        ValueError, match=r"unknown reduction 'Median'; known: \[.*'Sum'"
    ):
        F().vjp(kt.Vi(x), np.ones((5, 1)), "Median", 1)
    with pytest.raises(
        ValueError, match=r"vjp: 'gradout' must have the shape.*\(5, 1\); got \(4, 1\)"
    ):
        F().vjp(kt.Vi(x), np.ones((4, 1)), "Sum", 1, backend="numpy")
    with pytest.raises(
        ValueError, match=r"vjp: 'gradout' must have the shape.*\(5, 2\); got \(5, 3\)"
    ):
        F().vjp(kt.Vi(x), np.ones((5, 3)), "KMin", 1, K=2, backend="numpy")


def test_nan_and_inf_are_allowed_in_lazytensors():
    """Unlike estimators, reductions accept NaN/inf and propagate them."""
    a = x.copy()
    a[2, 0] = np.nan
    out = kt.Vi(a).sqdist(kt.Vj(y)).sum(axis=1, backend="numpy")
    assert np.isnan(out[2, 0]) and np.isfinite(np.delete(out, 2, axis=0)).all()


def test_unknown_reduction_option_is_rejected():
    import numpy as np
    import pytest

    import kerneltools as kt

    x = np.random.rand(5, 2)
    with pytest.raises(TypeError, match="'bogus'"):
        kt.Vi(x).sqdist(kt.Vj(x)).sum(axis=1, bogus=1)
