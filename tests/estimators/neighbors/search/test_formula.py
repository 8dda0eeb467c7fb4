"""The result helpers of :mod:`kerneltools.estimators.neighbors.search._formula`
that every namespace shares: ``drop_self`` and ``split_rows``."""

from __future__ import annotations

import numpy as np
import pytest

from kerneltools.estimators.neighbors.search._formula import drop_self, split_rows

xps = pytest.importorskip("array_api_strict")


def _drop_self_loop(vals, ind):
    """scikit-learn's rule, row by row: drop the point itself; if it is
    missing, the first neighbour when it lies at distance 0 (a duplicate),
    else the last."""
    out_v, out_i = [], []
    for r, (v, i) in enumerate(zip(vals.tolist(), ind.tolist())):
        if r in i:
            j = i.index(r)
        else:
            j = 0 if v[0] <= 0 else len(i) - 1
        out_v.append(v[:j] + v[j + 1:])
        out_i.append(i[:j] + i[j + 1:])
    return np.array(out_v), np.array(out_i)


@pytest.mark.parametrize("k", [2, 3, 6])
@pytest.mark.parametrize("namespace", ["numpy", "strict"])
def test_drop_self_follows_scikit_learns_rule(k, namespace):
    """Rows holding the point anywhere, rows where duplicates hide it (first
    neighbour at 0: dropped), rows where it is missing at a non-zero or NaN
    distance (last dropped); the same in every namespace."""
    rng = np.random.default_rng(0)
    n = 40
    vals = np.sort(rng.random((n, k)), axis=1)
    ind = np.stack([rng.permutation(n)[:k] for _ in range(n)])
    for r in range(0, n, 3):  # the point itself, somewhere in its row
        if r not in ind[r]:
            ind[r, rng.integers(k)] = r
    vals[1::3, 0] = 0.0  # a duplicate at distance 0 where it may be missing
    vals[2::9, 0] = np.nan
    ref_v, ref_i = _drop_self_loop(vals, ind)
    if namespace == "strict":
        got_v, got_i = drop_self(xps.asarray(vals), xps.asarray(ind))
        got_v, got_i = np.asarray(got_v), np.asarray(got_i)
    else:
        got_v, got_i = drop_self(vals, ind)
    np.testing.assert_array_equal(got_i, ref_i)
    np.testing.assert_array_equal(got_v, ref_v)  # a selection: exact, NaN too


def test_split_rows_views_of_any_namespace():
    """Rows of a flat array, one object array of views, empty rows kept."""
    flat = np.arange(7.0)
    indptr = np.array([0, 3, 3, 7])
    for a in (flat, xps.asarray(flat)):
        rows = split_rows(a, indptr)
        assert rows.dtype == object and len(rows) == 3
        assert [np.asarray(r).tolist() for r in rows] == [[0, 1, 2], [], [3, 4, 5, 6]]
        assert type(rows[0]) is type(a)
