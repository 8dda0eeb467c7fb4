"""Block-sparse reductions (kerneltools.ranges, ``ranges=``): the result equals
the dense reduction of the formula masked to the kept blocks, on every
backend; exact k-NN and truncated kernels through cluster pruning; bad
descriptions fail before any kernel runs."""

from __future__ import annotations

import numpy as np
import pytest

import kerneltools as kt
from kerneltools import ranges as kr

from _helpers import assert_close, sides

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
    """Reduced over the points of y on both axes: y (and b) are j-variables
    for axis=1, i-variables for axis=0 (the clusters' description and mask
    built that way round), so that both axes run the same compiled kernel
    (a reduction over i is the one over j of the formula with i and j
    exchanged), each against its own masked dense reference."""
    rng, x, y, lab_x, lab_y, keep = _setup(dtype)
    assert _candidates(keep, lab_x, lab_y, 1) >= 3  # per point of x
    if axis == 0:  # x on the j side
        lab_x, lab_y, keep = lab_y, lab_x, keep.T
    bs = kr.block_sparsity(lab_x, lab_y, keep)
    m = _mask_formula(lab_x, lab_y, keep, dtype) - 0.5  # >= 0 where kept
    kept, reduced = sides(axis)
    xk, yr = kept(x), reduced(y)
    F = -xk.sqdist(yr) * 4 + (xk - yr).sum(-1)
    b = reduced(rng.random((len(y), 2)).astype(dtype))
    K = 3
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


def _same_sums(backend):
    """How the block-sparse kernel's sums compare with the dense one's: bit
    for bit with gcc's code (the two loops reduce in the same order); clang
    (``zig cc``, no system compiler) vectorises the two reductions apart,
    which moves the last bit: within 8 eps."""
    if backend == "cpu":
        from kerneltools.backend.cpu._compiler import find_compiler

        comp = find_compiler()
        if "clang" in comp.version.lower() or "zig" in comp.version.lower():
            eps = np.finfo(np.float64).eps
            return lambda a, b: np.testing.assert_allclose(a, b, rtol=8 * eps, atol=0)
    return np.testing.assert_array_equal


def test_full_description_gives_exactly_the_dense_result(backend):
    rng = np.random.default_rng(2)
    x, y = rng.random((40, 3)), rng.random((30, 3))
    full = (np.array([[0, 40]]), np.array([1]), np.array([[0, 30]]),
            np.array([[0, 30]]), np.array([1]), np.array([[0, 40]]))
    F = -kt.Vi(x).sqdist(kt.Vj(y))
    same = _same_sums(backend)
    for axis in (0, 1):
        same(F.exp().sum(axis=axis, ranges=full, backend=backend),
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
    from kerneltools.estimators.neighbors.search import _pruned as M

    monkeypatch.setattr(M, "PRUNE_MIN_FIT", 500)
    monkeypatch.setattr(M, "PRUNE_MIN_PAIRS", 0)
    monkeypatch.setattr(M, "PRUNE_CELL_POINTS", 16)
    rng = np.random.default_rng(d)
    X = _clustered(rng, 3000, d).astype(np.float32)
    Q = rng.random((400, d)).astype(np.float32)
    y = (X[:, 0] > X[:, 0].mean()).astype(int)
    # 9 neighbours in float32, as test_pruned_nearest_neighbors_equal_brute_force
    # below: in dimensions 2 and 3 the two tests run the same kernels
    pruned = kt.KNeighborsClassifier(n_neighbors=9).fit(X, y)
    brute = kt.KNeighborsClassifier(n_neighbors=9, algorithm="brute").fit(X, y)
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


# -- the C backend's native block-sparse kernel ------------------------------------


def _mask_of(ranges_out, slices, red, n_out, n_red):
    """(n_out, n_red) bool: the pairs a KeOps description (one axis) keeps."""
    mask = np.zeros((n_out, n_red), bool)
    start = 0
    for (r0, r1), end in zip(ranges_out, slices):
        for a, b in red[start:end]:
            mask[r0:r1, a:b] = True
        start = end
    return mask


def _masked_references(D, mask, w, K):
    """Independent NumPy results of the reductions of ``D`` (n_out, n_red)
    over the kept pairs: sum of exp(-D) w, min/argmin (first index on ties),
    the K smallest (ties by index), logsumexp of -D; rows with no pair get
    the identity (0; +inf, -1; -inf)."""
    n = len(D)
    E = np.where(mask, np.exp(-D), 0)
    ref = {"sum": E @ w, "min": np.full(n, np.inf), "argmin": np.full(n, -1),
           "kmin": np.full((n, K), np.inf), "argkmin": np.full((n, K), -1),
           "lse": np.full(n, -np.inf)}
    for r in range(n):
        idx = np.flatnonzero(mask[r])
        if not len(idx):
            continue
        order = idx[np.argsort(D[r, idx], kind="stable")]
        ref["min"][r], ref["argmin"][r] = D[r, order[0]], order[0]
        ref["kmin"][r, :min(K, len(order))] = D[r, order[:K]]
        ref["argkmin"][r, :min(K, len(order))] = order[:K]
        m = (-D[r, idx]).max()
        ref["lse"][r] = m + np.log(np.exp(-D[r, idx] - m).sum())
    return ref


#: Descriptions (over j) of a 23 x 31 reduction: empty output blocks, blocks
#: with no interval, rows in no block, intervals at both ends, one block
#: covering every row, intervals given in decreasing order.
EDGE_CASES = {
    "edges": ([[0, 5], [5, 5], [5, 9], [12, 23]], [2, 2, 2, 4],
              [[0, 1], [30, 31], [3, 17], [29, 31]]),
    "single block": ([[0, 23]], [1], [[0, 31]]),
    "single block, two intervals": ([[0, 23]], [2], [[0, 1], [30, 31]]),
    "no intervals at all": ([[0, 10], [10, 23]], [0, 0], np.zeros((0, 2), np.int64)),
    "any order": ([[0, 7], [7, 23]], [3, 5], [[20, 31], [0, 4], [9, 12], [30, 31], [0, 2]]),
}


@pytest.mark.parametrize("case", sorted(EDGE_CASES))
@pytest.mark.parametrize("axis", [0, 1])
def test_block_sparse_edge_cases(case, axis, dtype, rtol, backend):
    rng = np.random.default_rng(11)
    n_out, n_red, K = 23, 31, 4
    out_r, sl, red = (np.asarray(a, np.int64).reshape(-1, 2) if k != 1
                      else np.asarray(a, np.int64) for k, a in enumerate(EDGE_CASES[case]))
    mask = _mask_of(out_r, sl, red, n_out, n_red)
    # the other axis: every pair, so that the description is complete
    full = (np.array([[0, n_red]]), np.array([1]), np.array([[0, n_out]]))
    ranges = (out_r, sl, red) + full if axis == 1 else full + (out_r, sl, red)
    # integer coordinates: many equal distances (ties by index)
    o = rng.integers(0, 3, (n_out, 2)).astype(dtype)
    r_ = rng.integers(0, 3, (n_red, 2)).astype(dtype)
    w = rng.random((n_red, 1)).astype(dtype)
    # the output side o first on both axes: one compiled kernel for both
    kept, reduced = sides(axis)
    F = kept(o).sqdist(reduced(r_))
    D = ((o[:, None].astype(np.float64) - r_[None]) ** 2).sum(-1)
    ref = _masked_references(D, mask, w.astype(np.float64), K)
    Wv = reduced(w)
    got_sum = ((-F).exp() * Wv).sum(axis=axis, ranges=ranges, backend=backend)
    assert_close(got_sum, ref["sum"], 10 * rtol, scale=ref["sum"] + 1)
    v, i = F.min_argmin(axis=axis, ranges=ranges, backend=backend)
    np.testing.assert_array_equal(i[:, 0], ref["argmin"])
    np.testing.assert_array_equal(v[:, 0], ref["min"])
    v, i = F.Kmin_argKmin(K, axis=axis, ranges=ranges, backend=backend)
    np.testing.assert_array_equal(i.reshape(-1, K), ref["argkmin"])
    np.testing.assert_array_equal(v.reshape(-1, K), ref["kmin"])
    lse = (-F).logsumexp(axis=axis, ranges=ranges, backend=backend)[:, 0]
    assert_close(lse, ref["lse"], 10 * rtol, scale=np.abs(ref["lse"]) + 1)


def test_cpu_backend_runs_block_sparse_reductions_natively(monkeypatch):
    """One call of the compiled block-sparse kernel, no dense reduction per block."""
    from kerneltools.backend import _dispatch

    calls = {"native": 0, "dense": 0}
    cpu = _dispatch.BACKENDS["cpu"]
    if not cpu.available()[0]:
        pytest.skip("no C compiler")
    run_ranges, run = cpu.run_ranges, cpu.run

    def spy_native(*a, **k):
        calls["native"] += 1
        return run_ranges(*a, **k)

    def spy_dense(*a, **k):
        calls["dense"] += 1
        return run(*a, **k)

    monkeypatch.setattr(cpu, "run_ranges", spy_native)
    monkeypatch.setattr(cpu, "run", spy_dense)
    _, x, y, lab_x, lab_y, keep = _setup(np.float64, seed=6)
    bs = kr.block_sparsity(lab_x, lab_y, keep)
    kt.Vi(x).sqdist(kt.Vj(y)).argKmin(3, axis=1, ranges=bs, backend="cpu")
    kt.Vi(x).sqdist(kt.Vj(y)).sum(axis=0, ranges=bs, backend="cpu")
    assert calls == {"native": 2, "dense": 0}


@pytest.mark.parametrize("axis", [0, 1])
def test_pairs_with_priority_give_the_mask_result(axis, backend):
    """block_sparsity from sparse pairs, in any visiting order, equals the
    same description from a dense mask (ties on an integer grid included)."""
    rng, _, _, lab_x, lab_y, keep = _setup(np.float64, seed=7)
    x = rng.integers(0, 4, (len(lab_x), 2)).astype(np.float64)
    y = rng.integers(0, 4, (len(lab_y), 2)).astype(np.float64)
    a, b = np.nonzero(keep)
    perm = rng.permutation(len(a))
    pairs = kr.block_sparsity(lab_x, lab_y, (a[perm], b[perm]), priority=rng.random(len(a)))
    dense = kr.block_sparsity(lab_x, lab_y, keep)
    F = kt.Vi(x).sqdist(kt.Vj(y))
    for red in ("argKmin", "Kmin"):
        np.testing.assert_array_equal(
            getattr(F, red)(5, axis=axis, ranges=pairs, backend=backend),
            getattr(F, red)(5, axis=axis, ranges=dense, backend="numpy"))
    np.testing.assert_allclose(F.sum(axis=axis, ranges=pairs, backend=backend),
                               F.sum(axis=axis, ranges=dense, backend="numpy"), rtol=1e-12)


@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("kind", ["uniform", "clustered", "ties"])
def test_pruned_nearest_neighbors_equal_brute_force(d, kind, monkeypatch):
    """The estimators' pruned search (Z-order cells, certificate, second
    pass) returns exactly the brute-force neighbours, ties by index."""
    from kerneltools.estimators.neighbors.search import _pruned as M

    monkeypatch.setattr(M, "PRUNE_MIN_FIT", 1000)
    monkeypatch.setattr(M, "PRUNE_MIN_PAIRS", 0)
    rng = np.random.default_rng(20 + d)
    n = 4000
    if kind == "uniform":
        X, Q = rng.random((n, d)), rng.random((900, d))
    elif kind == "clustered":
        centers = rng.random((8, d))
        X = centers[rng.integers(0, 8, n)] + 0.01 * rng.standard_normal((n, d))
        Q = centers[rng.integers(0, 8, 900)] + 0.01 * rng.standard_normal((900, d))
    else:  # integer grid: many equal distances and duplicate points
        X, Q = rng.integers(0, 12, (n, d)), rng.integers(-2, 14, (900, d))
    X, Q = X.astype(np.float32), Q.astype(np.float32)
    pruned = kt.NearestNeighbors(n_neighbors=9).fit(X)
    assert pruned._fit_method == "block_sparse"
    brute = kt.NearestNeighbors(n_neighbors=9, algorithm="brute").fit(X)
    for q in (Q, None):
        dp, ip = pruned.kneighbors(q)
        db, ib = brute.kneighbors(q)
        np.testing.assert_array_equal(ip, ib)
        np.testing.assert_array_equal(dp, db)
        if q is Q:
            ib_q = ib
    assert "_built" in vars(pruned._grid)  # the cells were built and searched
    # queries by chunks (consecutive in Z-order): the same neighbours
    monkeypatch.setattr(M, "PRUNE_QUERY_CHUNK", 256)
    np.testing.assert_array_equal(pruned.kneighbors(Q, return_distance=False), ib_q)
    # and against an independent float64 reference (ties: smallest index)
    dd = ((Q[:50, None].astype(np.float64) - X[None]) ** 2).sum(-1)
    ref = np.argsort(dd, axis=1, kind="stable")[:, :9]
    got = pruned.kneighbors(Q[:50], return_distance=False)
    if kind == "ties":  # exact in float32 too: small integers
        np.testing.assert_array_equal(got, ref)
    else:
        assert (got == ref).mean() > 0.999


def test_distance_mask_pairs_by_blocks_equal_the_mask(monkeypatch):
    rng = np.random.default_rng(12)
    ci, cj = rng.random((300, 3)), rng.random((70, 3))
    ri, rj = rng.random(300) * 0.05, rng.random(70) * 0.05
    whole = kr.distance_mask(ci, ri, cj, rj, 0.2)
    monkeypatch.setattr(kr, "_MASK_BLOCK_ENTRIES", 1000)  # blocks of 14 rows
    np.testing.assert_array_equal(kr.distance_mask(ci, ri, cj, rj, 0.2), whole)
    a, b = kr.distance_mask(ci, ri, cj, rj, 0.2, pairs=True)
    np.testing.assert_array_equal(np.stack([a, b]), np.stack(np.nonzero(whole)))
    # the brute-force rule, pair by pair
    d = np.sqrt(((ci[:, None] - cj[None]) ** 2).sum(-1))
    np.testing.assert_array_equal(whole, d - ri[:, None] - rj[None] <= 0.2 + 1e-12)


def test_distance_pairs_through_trees_keep_every_close_pair(monkeypatch):
    """Many clusters (the k-d tree route): the pairs are those of the rule,
    up to the rounding slack of the centroid distances."""
    rng = np.random.default_rng(13)
    ci, cj = rng.random((500, 3)), rng.random((400, 3))
    ri, rj = rng.random(500) * 0.03, rng.random(400) * 0.03
    ri[:5] = 0.3  # a few large clusters: their own class
    monkeypatch.setattr(kr, "_MASK_BLOCK_ENTRIES", 1000)
    a, b = kr.distance_mask(ci, ri, cj, rj, 0.1, pairs=True)
    d = np.sqrt(((ci[:, None] - cj[None]) ** 2).sum(-1))
    ref = np.nonzero(d - ri[:, None] - rj[None] <= 0.1 * (1 + 1e-9))
    np.testing.assert_array_equal(np.stack([a, b]), np.stack(ref))


# ---------------------------------------------------------------------------
# Bad descriptions get an exception that names them (they used to give a
# wrong answer, or an overflowed cell index, without a word).
# ---------------------------------------------------------------------------
RNG = np.random.default_rng(19)
_x = RNG.normal(size=(4, 2))


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
    x, y = RNG.normal(size=(30, 2)), RNG.normal(size=(20, 2))
    b = RNG.normal(size=(20, 1))
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
        (lambda: kr.kmeans_cluster(_x, 2.5),
         r"'n_clusters' must be an integer, got 2.5"),
        (lambda: kr.kmeans_cluster(_x, True),
         r"'n_clusters' must be an integer, got True"),
        (lambda: kr.kmeans_cluster(_x, 2, n_iter=1.5), r"'n_iter' must be an integer"),
        (lambda: kr.knn_mask(_c2, _r2, _c2, _r2, _n2, 1.5), r"'K' must be an integer"),
    ],
)
def test_counts_must_be_integers(call, match):
    # int() used to truncate them (2.5 -> 2, True -> 1) without a word
    with pytest.raises((TypeError, ValueError), match=match):
        call()
