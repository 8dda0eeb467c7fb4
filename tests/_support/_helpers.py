"""Helpers shared by the test modules (not collected: no ``test_`` prefix)."""

from __future__ import annotations

import numpy as np

import kerneltools as kt

#: Leaves of each category from a NumPy array: (n, d) for i and j, (d,) for p.
LEAF = {"i": kt.Vi, "j": kt.Vj, "p": kt.Pm}


def sides(axis: int):
    """(kept, reduced): the leaf makers (``kt.Vi``/``kt.Vj``) of the variables
    of the side kept in the output and of the side reduced over ``axis``.

    The engine computes a reduction over i as the same reduction over j of
    the formula with i and j exchanged, so a formula built with these is one
    compiled kernel on both axes, and one dense (kept, reduced) reference.
    """
    return (kt.Vi, kt.Vj) if axis == 1 else (kt.Vj, kt.Vi)


def grid_operand(cat: str, arr: np.ndarray) -> np.ndarray:
    """The dense (N|1, M|1, d) view of a variable, for reference computations."""
    arr = np.asarray(arr, dtype=np.float64)
    if cat == "i":
        return arr[:, None, :]
    if cat == "j":
        return arr[None, :, :]
    return arr[None, None, :]


def assert_close(got, ref, rtol: float, scale=None, err_msg: str = "") -> None:
    """``|got - ref| <= rtol * scale`` entry-wise, NaN matching NaN, inf equal inf.

    ``scale`` defaults to ``|ref|``; reductions pass the sum of the absolute
    values they reduce, which is what bounds their rounding error.
    """
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape, (
        f"shape {got.shape} != expected {ref.shape}. {err_msg}"
    )
    scale = np.abs(ref) if scale is None else np.broadcast_to(scale, ref.shape)
    with np.errstate(invalid="ignore"):
        ok = (np.isnan(got) & np.isnan(ref)) | (got == ref)
        ok |= np.abs(got - ref) <= rtol * scale
    if not ok.all():
        bad = np.argwhere(~ok)
        k = tuple(bad[0])
        raise AssertionError(
            f"{len(bad)} of {ok.size} entries differ (rtol={rtol:g}); first at {k}: "
            f"got {got[k]!r}, expected {ref[k]!r} (scale {scale[k]!r}). {err_msg}"
        )


def fd_gradient(phi_diff, arr: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """Central finite differences of a scalar function of ``arr``, entry by entry.

    ``phi_diff(plus, minus)`` returns ``phi(plus) - phi(minus)``, which callers
    compute as a sum of entry-wise differences so that the terms that ``arr``
    does not touch cancel exactly instead of adding rounding noise.
    """
    out = np.zeros(arr.shape, dtype=np.float64)
    for idx in np.ndindex(arr.shape):
        plus, minus = arr.copy(), arr.copy()
        plus[idx] += h
        minus[idx] -= h
        out[idx] = phi_diff(plus, minus) / (2 * h)
    return out
