"""kerneltools.ranges.radius_csr: the points within a squared radius over a
block sparsity, as CSR rows, against dense float64 distances summed feature
by feature; the C kernel and the NumPy blocks give the same arrays, whatever
the threads; bad arguments raise, naming themselves."""

from __future__ import annotations

import numpy as np
import pytest

from kerneltools import ranges as kr
from kerneltools.backend.cpu import _radius


def _problem(d=3, n=300, m=400, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, d))
    y = np.concatenate([rng.random((m - 40, d)), x[:40]])  # distance 0 (x_i = y_j)
    y[-20:-10] = y[-10:]  # duplicates: equal distances, ties by index
    return x, y


def _blocks(x, y, radius, size=0.15):
    lab_x, lab_y = kr.grid_cluster(x, size), kr.grid_cluster(y, size)
    cx, cy = kr.cluster_centroids(x, lab_x), kr.cluster_centroids(y, lab_y)
    rx, ry = kr.cluster_radii(x, lab_x, cx), kr.cluster_radii(y, lab_y, cy)
    keep = kr.distance_mask(cx, rx, cy, ry, radius, pairs=True)
    return kr.block_sparsity(lab_x, lab_y, keep)


def _dense(x, y, r2, exclude, by_distance):
    """CSR rows from the (N, M) squared distances, feature by feature."""
    d = np.zeros((len(x), len(y)))
    for f in range(x.shape[1]):
        d += (x[:, f, None] - y[None, :, f]) ** 2
    keep = d <= r2[:, None]
    if exclude is not None:
        keep[np.arange(len(x)), exclude] &= exclude < 0
    rows = [np.flatnonzero(k) for k in keep]
    rows = [i[np.lexsort((i, d[r, i]))] if by_distance else i for r, i in enumerate(rows)]
    indptr = np.concatenate([[0], np.cumsum([len(i) for i in rows])])
    ind = np.concatenate(rows)
    return d[np.repeat(np.arange(len(x)), np.diff(indptr)), ind], ind, indptr


@pytest.mark.parametrize("sort", ["index", "distance"])
def test_radius_csr_equals_dense_distances(sort, backend, monkeypatch):
    if backend == "cuda":  # (a host kernel: it says so)
        x, y = _problem(n=20, m=60)
        with pytest.raises(ValueError, match="'backend'"):
            kr.radius_csr(x, y, 0.1, _blocks(x, y, 0.1), backend="cuda")
        return

    x, y = _problem()
    for every_pair in (False, True):
        r2 = np.where(np.arange(len(x)) % 3, 0.02, 0.05)
        r2[0] = 0.0  # radius 0: the points equal to x_0 only
        if not every_pair:
            bs = _blocks(x, y, np.sqrt(0.05))
        else:  # every pair kept: an infinite radius sees every point
            bs, r2[1] = _blocks(x, y, np.inf, 2.0), np.inf
        for exclude in (None, np.where(np.arange(len(x)) < 40, 360 + np.arange(len(x)),
                                       -1)):
            got = kr.radius_csr(x, y, r2, bs, exclude=exclude, sort=sort, backend=backend)
            ref = _dense(x, y, r2, exclude, sort == "distance")
            for a, b in zip(got, ref):
                np.testing.assert_array_equal(a, b)
            assert got[0].dtype == np.float64 and got[1].dtype == np.int64
            assert ref[2][-1] > 5 * len(x)
        if backend == "cpu":  # one thread: the same arrays
            monkeypatch.setattr(_radius, "cores", lambda: 1)
            one = kr.radius_csr(x, y, r2, bs, exclude=exclude, sort=sort)
            monkeypatch.undo()
            for a, b in zip(one, got):
                np.testing.assert_array_equal(a, b)


def test_radius_csr_bad_arguments():
    x, y = _problem(n=20, m=60)
    bs = _blocks(x, y, 0.2)
    cases = [
        (dict(x=x[:, :2]), "same number of features"),
        (dict(sq_radius=-1.0), "'sq_radius'"),
        (dict(sq_radius=np.ones(3)), "'sq_radius'"),
        (dict(sq_radius=np.nan), "'sq_radius'"),
        (dict(ranges=_blocks(y, x, 0.2)), "'ranges'"),
        (dict(ranges=None), "'ranges'"),
        (dict(exclude=np.zeros(3, int)), "'exclude'"),
        (dict(exclude=np.zeros(20)), "'exclude'"),
        (dict(sort="value"), "'sort'"),
        (dict(backend="gpu"), "backend"),
    ]
    for bad, match in cases:
        args = {"x": x, "y": y, "sq_radius": 0.04, "ranges": bs, **bad}
        with pytest.raises(ValueError, match=match):
            kr.radius_csr(args.pop("x"), args.pop("y"), args.pop("sq_radius"),
                          args.pop("ranges"), **args)
    with pytest.raises(ValueError, match="NaN or inf"):
        kr.radius_csr(np.full_like(x, np.nan), y, 0.04, bs)
