"""Block-sparse reductions (kerneltools.ranges, ``ranges=``): the result equals
the dense reduction of the formula masked to the kept blocks, on every
backend; exact k-NN and truncated kernels through cluster pruning; bad
descriptions fail before any kernel runs."""

from __future__ import annotations

import numpy as np
import pytest

import kerneltools as kt
from kerneltools import ranges as kr

from _helpers import assert_close

INF = float("inf")


def _clustered(rng, n, d, n_centers=6, spread=0.05):
    centers = rng.random((n_centers, d))
    return centers[rng.integers(0, n_centers, n)] + spread * rng.standard_normal((n, d))


def _setup(dtype, seed=0, n=70, m=55, d=2):
    rng = np.random.default_rng(seed)
    x = _clustered(rng, n, d).astype(dtype)
    y = _clustered(rng, m, d).astype(dtype)
    lab_x = kr.grid_cluster(x, 0.25)
    lab_y = kr.grid_cluster(y, 0.25)
    keep = rng.random((lab_x.max() + 1, lab_y.max() + 1)) < 0.5
    # every cluster keeps itself-like neighbours: no row without candidates
    keep[np.arange(keep.shape[0]), rng.integers(0, keep.shape[1], keep.shape[0])] = True
    keep[rng.integers(0, keep.shape[0], keep.shape[1]), np.arange(keep.shape[1])] = True
    return rng, x, y, lab_x, lab_y, keep


def _mask_formula(lab_x, lab_y, keep, dtype):
    """m_ij = keep[lab_x[i], lab_y[j]] as a formula (one-hot rows times columns)."""
    onehot = np.eye(keep.shape[0], dtype=dtype)[lab_x]
    cols = keep[:, lab_y].T.astype(dtype)
    return kt.Vi(onehot) | kt.Vj(cols)


def _candidates(keep, lab_x, lab_y, axis):
    per_row = keep[lab_x][:, lab_y]  # (N, M) kept pairs
    return per_row.sum(axis=1 if axis == 1 else 0).min()


REDUCTIONS = ["sum", "logsumexp", "min", "max", "argmin", "argmax", "min_argmin", "Kmin",
              "argKmin", "Kmin_argKmin", "sumsoftmaxweight", "lse_weight"]


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("name", REDUCTIONS)
def test_block_sparse_equals_masked_dense(name, axis, backend, dtype, rtol):
    rng, x, y, lab_x, lab_y, keep = _setup(dtype)
    bs = kr.block_sparsity(lab_x, lab_y, keep)
    m = _mask_formula(lab_x, lab_y, keep, dtype) - 0.5  # >= 0 where kept
    xi, yj = kt.Vi(x), kt.Vj(y)
    F = -xi.sqdist(yj) * 4 + (xi - yj).sum(-1)
    b = (kt.Vj(rng.random((len(y), 2)).astype(dtype)) if axis == 1
         else kt.Vi(rng.random((len(x), 2)).astype(dtype)))
    K = 3
    assert _candidates(keep, lab_x, lab_y, axis) >= K
    if name == "sum":
        got = (F.exp() * b).sum(axis=axis, ranges=bs, backend=backend)
        ref = (m.ifelse(F.exp(), 0) * b).sum(axis=axis, backend="numpy")
    elif name == "logsumexp":
        got = F.logsumexp(axis=axis, ranges=bs, backend=backend)
        ref = m.ifelse(F, -INF).logsumexp(axis=axis, backend="numpy")
    elif name == "lse_weight":
        got = F.logsumexp(axis=axis, weight=b.exp(), ranges=bs, backend=backend)
        ref = m.ifelse(F, -INF).logsumexp(axis=axis, weight=b.exp(), backend="numpy")
    elif name == "sumsoftmaxweight":
        got = F.sumsoftmaxweight(b, axis=axis, ranges=bs, backend=backend)
        ref = m.ifelse(F, -INF).sumsoftmaxweight(b, axis=axis, backend="numpy")
    else:
        big = INF if "min" in name.lower() else -INF
        masked = m.ifelse(F, big)
        args = (K,) if "K" in name else ()
        got = getattr(F, name)(*args, axis=axis, ranges=bs, backend=backend)
        ref = getattr(masked, name)(*args, axis=axis, backend="numpy")
    got = got if isinstance(got, tuple) else (got,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    for g, r in zip(got, ref):
        if r.dtype.kind == "i":
            np.testing.assert_array_equal(g, r)
        else:
            assert_close(g, r, 10 * rtol, scale=np.abs(r) + 1)


def test_keops_tuple_on_sorted_data_matches_block_sparsity(backend):
    _, x, y, lab_x, lab_y, keep = _setup(np.float64, seed=1)
    xs, lxs, ox = kr.sort_clusters(x, lab_x)
    ys, lys, oy = kr.sort_clusters(y, lab_y)
    ranges = kr.from_sorted(kr.cluster_ranges(lxs), kr.cluster_ranges(lys), keep)
    bs = kr.block_sparsity(lab_x, lab_y, keep)
    for axis in (0, 1):
        a = (-kt.Vi(xs).sqdist(kt.Vj(ys))).exp().sum(axis=axis, ranges=ranges, backend=backend)
        b = (-kt.Vi(x).sqdist(kt.Vj(y))).exp().sum(axis=axis, ranges=bs, backend=backend)
        order = ox if axis == 1 else oy
        np.testing.assert_allclose(a, b[order], rtol=1e-12)


def test_full_description_gives_exactly_the_dense_result(backend):
    rng = np.random.default_rng(2)
    x, y = rng.random((40, 3)), rng.random((30, 3))
    full = (np.array([[0, 40]]), np.array([1]), np.array([[0, 30]]),
            np.array([[0, 30]]), np.array([1]), np.array([[0, 40]]))
    F = -kt.Vi(x).sqdist(kt.Vj(y))
    for axis in (0, 1):
        np.testing.assert_array_equal(F.exp().sum(axis=axis, ranges=full, backend=backend),
                                      F.exp().sum(axis=axis, backend=backend))
        np.testing.assert_array_equal(F.argKmin(4, axis=axis, ranges=full, backend=backend),
                                      F.argKmin(4, axis=axis, backend=backend))


def test_with_ranges_and_running_index(backend):
    _, x, y, lab_x, lab_y, keep = _setup(np.float64, seed=3)
    bs = kr.block_sparsity(lab_x, lab_y, keep)
    F = kt.Vi(x).sqdist(kt.Vj(y))
    # the running index j inside the formula is the caller's, not the block's
    from kerneltools.backend._ir import index

    J = kt.LazyTensor._new(index("j"), {}, None, None)
    G = (F * 0 + J).with_ranges(bs)
    got = G.max(axis=1, backend=backend)
    ref = np.array([max(np.flatnonzero(keep[lab_x[i]][lab_y])) for i in range(len(x))])
    np.testing.assert_array_equal(got[:, 0], ref)


def test_gradients_with_ranges(backend):
    rng, x, y, lab_x, lab_y, keep = _setup(np.float64, seed=4)
    bs = kr.block_sparsity(lab_x, lab_y, keep)
    m = _mask_formula(lab_x, lab_y, keep, np.float64) - 0.5
    xi, yj = kt.Vi(x), kt.Vj(y)
    F = -xi.sqdist(yj) * 3
    g = rng.random((len(x), 1))
    for wrt in (xi, yj):
        got = F.vjp(wrt, g, "LogSumExp", axis=1, ranges=bs, backend=backend)
        ref = m.ifelse(F, -INF).vjp(wrt, g, "LogSumExp", axis=1, backend="numpy")
        assert_close(got, ref, 1e-9, scale=np.abs(ref) + 1e-3)


@pytest.mark.parametrize("d", [2, 3, 8])
@pytest.mark.parametrize("kind", ["uniform", "clustered"])
def test_exact_knn_through_cluster_pruning(d, kind, backend):
    rng = np.random.default_rng(d)
    n, K = 600, 7
    x = rng.random((n, d)) if kind == "uniform" else _clustered(rng, n, d)
    q = rng.random((300, d)) if kind == "uniform" else _clustered(rng, 300, d)
    lab_x, cx = kr.kmeans_cluster(x, 20, random_state=0)
    lab_q, cq = kr.kmeans_cluster(q, 15, random_state=0)
    cx, cq = kr.cluster_centroids(x, lab_x), kr.cluster_centroids(q, lab_q)
    keep = kr.knn_mask(cq, kr.cluster_radii(q, lab_q, cq), cx, kr.cluster_radii(x, lab_x, cx),
                       kr.cluster_counts(lab_x), K)
    bs = kr.block_sparsity(lab_q, lab_x, keep)
    assert bs.density < 1 or d == 8
    D = kt.Vi(q).sqdist(kt.Vj(x))
    vals, idx = D.Kmin_argKmin(K, axis=1, ranges=bs, backend=backend)
    dense = ((q[:, None] - x[None]) ** 2).sum(-1)
    ref_idx = np.argsort(dense, axis=1, kind="stable")[:, :K]
    np.testing.assert_array_equal(idx, ref_idx)
    np.testing.assert_allclose(vals, np.take_along_axis(dense, ref_idx, 1), rtol=1e-9)


def test_truncated_gaussian_through_distance_mask(backend):
    rng = np.random.default_rng(5)
    x, y, b = rng.random((500, 3)), rng.random((400, 3)), rng.random((400, 1))
    sigma = 0.05
    lab_x, lab_y = kr.grid_cluster(x, 0.1), kr.grid_cluster(y, 0.1)
    cx, cy = kr.cluster_centroids(x, lab_x), kr.cluster_centroids(y, lab_y)
    keep = kr.distance_mask(cx, kr.cluster_radii(x, lab_x, cx), cy,
                            kr.cluster_radii(y, lab_y, cy), 5 * sigma)
    bs = kr.block_sparsity(lab_x, lab_y, keep)
    assert bs.density < 0.5
    D = kt.Vi(x).sqdist(kt.Vj(y))
    K = (25 * sigma**2 - D).ifelse((-D / (2 * sigma**2)).exp(), 0)  # cut at 5 sigma
    got = (K * kt.Vj(b)).sum(axis=1, ranges=bs, backend=backend)
    ref = (K * kt.Vj(b)).sum(axis=1, backend="numpy")
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-15)


def test_malformed_descriptions_raise_before_running():
    x, y = np.ones((10, 2)), np.ones((8, 2))
    F = kt.Vi(x).sqdist(kt.Vj(y))
    ok_t = (np.array([[0, 8]]), np.array([1]), np.array([[0, 10]]))
    bad = {
        "overlap": (np.array([[0, 6], [5, 10]]), np.array([1, 2]), np.array([[0, 4], [4, 8]])),
        "out of range": (np.array([[0, 10]]), np.array([1]), np.array([[0, 9]])),
        "unsorted intervals": (np.array([[0, 10]]), np.array([2]), np.array([[4, 8], [0, 5]])),
        "slices": (np.array([[0, 10]]), np.array([3]), np.array([[0, 8]])),
    }
    for what, t in bad.items():
        with pytest.raises(ValueError, match="ranges"):
            F.sum(axis=1, ranges=t + ok_t)
    with pytest.raises(TypeError, match="integers"):
        F.sum(axis=1, ranges=(np.array([[0.0, 10]]),) + bad["overlap"][1:] + ok_t)
    with pytest.raises(TypeError, match="6-tuple"):
        F.sum(axis=1, ranges=[1, 2, 3])
    lab = np.zeros(5, dtype=np.int64)
    with pytest.raises(ValueError, match="shape"):
        F.sum(axis=1, ranges=kr.block_sparsity(lab, lab, np.ones((1, 1), bool)))
    with pytest.raises(ValueError, match="labels"):
        kr.block_sparsity(np.array([0.5]), lab, np.ones((1, 1)))
    with pytest.raises(ValueError, match="size"):
        kr.grid_cluster(x, 0)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_neighbors_use_cluster_pruning_in_low_dimension(d, monkeypatch):
    from kerneltools.estimators import _neighbors_metrics as M

    monkeypatch.setattr(M, "PRUNE_MIN_FIT", 500)
    monkeypatch.setattr(M, "PRUNE_CELL_POINTS", 32)
    rng = np.random.default_rng(d)
    X = _clustered(rng, 3000, d).astype(np.float32)
    Q = rng.random((400, d)).astype(np.float32)
    y = (X[:, 0] > X[:, 0].mean()).astype(int)
    pruned = kt.KNeighborsClassifier(n_neighbors=6).fit(X, y)
    brute = kt.KNeighborsClassifier(n_neighbors=6, algorithm="brute").fit(X, y)
    assert pruned._fit_method == "block_sparse" and brute._fit_method == "brute"
    for q in (Q, None):
        dp, ip = pruned.kneighbors(q)
        db, ib = brute.kneighbors(q)
        np.testing.assert_array_equal(ip, ib)
        np.testing.assert_array_equal(dp, db)
    np.testing.assert_array_equal(pruned.predict(Q), brute.predict(Q))
    # high dimension or another metric: brute force
    assert kt.NearestNeighbors().fit(rng.random((3000, 4)))._fit_method == "brute"
    assert kt.NearestNeighbors(metric="manhattan").fit(X)._fit_method == "brute"


def test_knn_mask_by_blocks_equals_whole():
    rng = np.random.default_rng(9)
    ci, cj = rng.random((600, 3)), rng.random((200, 3))
    ri, rj = rng.random(600) * 0.05, rng.random(200) * 0.05
    counts = rng.integers(1, 20, 200)
    kth = rng.random(600) * 0.2
    whole = kr.knn_mask(ci, ri, cj, rj, counts, 5, kth_i=kth)  # 3 blocks of rows
    parts = [kr.knn_mask(ci[s:s + 200], ri[s:s + 200], cj, rj, counts, 5, kth_i=kth[s:s + 200])
             for s in range(0, 600, 200)]
    np.testing.assert_array_equal(whole, np.concatenate(parts))
