"""Argument checks of the reductions (``lazy/_args.py``): a bool or float
axis, or ``axis`` and ``dim`` that disagree, get an exception naming them
(they used to be read as 0 or 1 without a word).
"""

from __future__ import annotations

import numpy as np
import pytest

import kerneltools as kt

RNG = np.random.default_rng(19)
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
