"""The tiled euclidean k-NN (float32 BLAS tiles, a running selection, exact
float64 re-ranking) against direct float64 distances.

The tiled route runs from MIN_PAIRS query x fitted pairs; the tests lower
that bound and the tile sizes, so that small data go through several tiles
(partial ones too) and the selection's slots fill and compact.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import datasets

from kerneltools.backend.cpu import _select as _cpu_select
from kerneltools.estimators.neighbors.search import _blas as _neighbors_blas, _gemm as _neighbors_gemm
from kerneltools.estimators.neighbors.search._formula import drop_self
from kerneltools.estimators.neighbors import NearestNeighbors
from kerneltools.exceptions import BackendUnavailableError
from kerneltools.selection import TileSelection, block_sparse_knn, box_pairs


def direct_knn(X, Q, k: int):
    """Squared distances by direct float64 differences, the k smallest of each
    row in increasing order, ties by index."""
    X = X.astype(np.float64)
    d2 = np.stack([((X - q) ** 2).sum(axis=1) for q in Q.astype(np.float64)])
    ind = np.argsort(d2, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(d2, ind, axis=1), ind


def _points(kind: str):
    """(fitted, queries), D = 64: Gaussian, or digits (duplicate points)."""
    if kind == "digits":
        X = datasets.load_digits().data[:800]
    else:
        X = np.random.default_rng(3).standard_normal((800, 64))
    return X[:600], X[600:]


@pytest.fixture
def tiled(monkeypatch) -> list:
    """Small tiles, the tiled route at any size; the sizes of the row batches
    that went to the engine's route instead (overflowing rows)."""
    monkeypatch.setattr(_neighbors_gemm, "MIN_PAIRS", 0)
    monkeypatch.setattr(_neighbors_gemm, "TILE_ROWS", 48)
    monkeypatch.setattr(_neighbors_gemm, "TILE_COLUMNS", 100)
    monkeypatch.setattr(_neighbors_gemm, "GROUP_POINTS", 40)
    rows = []
    original = _neighbors_blas.BlasSearch.kmin

    def spy(self, X, k):
        rows.append(len(X))
        return original(self, X, k)

    monkeypatch.setattr(_neighbors_blas.BlasSearch, "kmin", spy)
    return rows


def _expanded(X, y, dtype):
    return (((y**2).sum(1) - 2 * X @ y.T)).astype(dtype)


def test_tile_selection_is_exact(backend, dtype):
    """Every row's K nearest, ties by index (duplicated points), through tiles
    of expanded values; rows whose ties overflow the slots are flagged, the
    others exact."""
    import kerneltools

    assert kerneltools.selection.TileSelection is TileSelection  # lazy attribute
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((700, 20))
    Y[100:140] = Y[7]  # 41 copies: more ties than the slots of k = 3 hold
    X = np.concatenate([Y[[7, 8]], rng.standard_normal((38, 20))])
    for k, cap in ((3, 36), (12, 90), (150, 340)):  # (150: sorted by qsort)
        slack = 1e-3 * ((X**2).sum(1) + (Y**2).sum(1).max())  # > twice the rounding
        sel = TileSelection(len(X), k, slack=slack, capacity=cap, dtype=dtype,
                            backend=backend)
        for c0 in range(0, len(Y), 130):
            sel.update(_expanded(X, Y[c0 : c0 + 130], dtype), c0)
        d, ind = sel.rerank(X, Y)
        ref_d, ref_ind = direct_knn(Y, X, k)
        ok = ~sel.overflow
        assert sel.overflow[0] == (k == 3) and ok[1:].mean() > 0.9
        np.testing.assert_array_equal(ind[ok], ref_ind[ok])
        np.testing.assert_allclose(d[ok], ref_d[ok], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kind", ["gaussian", "digits"])
def test_tiled_search_matches_direct_distances(kind, dtype, tiled):
    X, Q = (a.astype(dtype) for a in _points(kind))
    nn = NearestNeighbors(n_neighbors=10).fit(X)
    assert isinstance(nn._search(Q)[0], _neighbors_gemm.GemmSearch)
    dist, ind = nn.kneighbors(Q)
    ref_d2, ref_ind = direct_knn(X, Q, 10)
    np.testing.assert_array_equal(ind, ref_ind)
    assert dist.dtype == dtype
    np.testing.assert_allclose(dist, np.sqrt(ref_d2), rtol=2e-7 if dtype == np.float32
                               else 1e-13)
    # X=None: digits' duplicates stay (ties by index), the point itself goes
    ref_d2, ref_ind = drop_self(*direct_knn(X, X, 10))
    np.testing.assert_array_equal(nn.kneighbors(n_neighbors=9)[1], ref_ind)
    assert tiled == []  # no row fell back


def test_tiled_search_with_k_near_the_fitted_points(tiled):
    """K close to the number of fitted points (their slots never fill; a
    capacity of m + 1 was refused once): exact, all of them in order."""
    rng = np.random.default_rng(10)
    X, Q = rng.standard_normal((60, 20)), rng.standard_normal((50, 20))
    dist, ind = NearestNeighbors(n_neighbors=55).fit(X).kneighbors(Q)
    ref_d2, ref_ind = direct_knn(X, Q, 55)
    np.testing.assert_array_equal(ind, ref_ind)
    np.testing.assert_allclose(dist, np.sqrt(ref_d2), rtol=1e-13)
    assert tiled == []


def test_tiled_search_does_not_depend_on_tiles_or_backend(tiled, monkeypatch):
    """Same neighbours and distances with other tile sizes, one thread, and the
    selection in NumPy (the reference) rather than C."""
    X, Q = _points("gaussian")
    first = NearestNeighbors(n_neighbors=25).fit(X).kneighbors(Q)
    monkeypatch.setattr(_neighbors_gemm, "TILE_ROWS", 7)
    monkeypatch.setattr(_neighbors_gemm, "TILE_COLUMNS", 600)
    monkeypatch.setattr(_neighbors_gemm, "GROUP_POINTS", 300)
    monkeypatch.setattr(_neighbors_gemm, "_over_blocks",
                        lambda block, starts: [block(s) for s in starts])
    again = NearestNeighbors(n_neighbors=25).fit(X).kneighbors(Q)
    ref = NearestNeighbors(n_neighbors=25, backend="numpy").fit(X).kneighbors(Q)
    for a, b, c in zip(first, again, ref):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=1e-14)
    assert tiled == []


def test_tiled_search_falls_back_where_float32_cannot_tell(tiled):
    """Groups of 60 points 1e-9 apart (float32 tiles see one point, give or
    take rounding): rows whose band of near-equal values overflows their
    slots are searched on the engine's route, in float64; every row stays
    exact."""
    rng = np.random.default_rng(4)
    base = rng.standard_normal((20, 64))
    X = np.repeat(base, 60, axis=0) + 1e-9 * rng.standard_normal((1200, 64))
    Q = base[:10] + 1e-9 * rng.standard_normal((10, 64))
    dist, ind = NearestNeighbors(n_neighbors=10).fit(X).kneighbors(Q)
    ref_d2, ref_ind = direct_knn(X, Q, 10)
    np.testing.assert_array_equal(ind, ref_ind)
    np.testing.assert_allclose(dist, np.sqrt(ref_d2), rtol=1e-6)
    assert 0 < sum(tiled) <= len(Q)


def test_tiled_search_prunes_far_groups(tiled, monkeypatch):
    """Well-parted clusters: most groups of fitted points are never multiplied
    (their distance bound fails every query's threshold), and the neighbours
    stay exact; the bounds hold for every point of every group."""
    rng = np.random.default_rng(6)
    centres = 30 * rng.standard_normal((6, 32))
    X = centres[rng.integers(0, 6, 700)] + rng.standard_normal((700, 32))
    Q = centres[:2][rng.integers(0, 2, 60)] + rng.standard_normal((60, 32))
    visited = []
    original = _neighbors_gemm._visits

    def spy(low, sel, starts):
        for sub, g in original(low, sel, starts):
            visited.append(g)
            yield sub, g

    monkeypatch.setattr(_neighbors_gemm, "_visits", spy)
    nn = NearestNeighbors(n_neighbors=7).fit(X)
    dist, ind = nn.kneighbors(Q)
    ref_d2, ref_ind = direct_knn(X, Q, 7)
    np.testing.assert_array_equal(ind, ref_ind)
    search = nn._search(Q)[0]
    order, starts, centres_g, radii = search._groups[:4]
    blocks = -(-len(Q) // _neighbors_gemm.TILE_ROWS)
    assert len(visited) < 0.5 * blocks * (len(starts) - 1)  # 2 clusters of 6
    assert (np.diff(starts) <= _neighbors_gemm.GROUP_POINTS).all()
    np.testing.assert_array_equal(np.sort(order), np.arange(len(X)))
    # every point of group g is at least sqrt(bound) from every query
    Qs = (Q - search._centre) * search._scale
    Ps = (X[order] - search._centre) * search._scale
    bound = _neighbors_gemm.group_bounds(Qs, centres_g, radii)
    exact = ((Qs[:, None, :] - Ps[None, :, :]) ** 2).sum(-1)
    nearest = np.minimum.reduceat(exact, starts[:-1], axis=1)
    assert (bound <= nearest).all() and (bound > 0).mean() > 0.5


def _cells(rng, n_points: int, size: int):
    """About n_points / size cells of consecutive rows, as (start, end) ranges."""
    cuts = np.sort(rng.choice(np.arange(1, n_points), n_points // size, replace=False))
    starts = np.concatenate([[0], cuts])
    return np.stack([starts, np.append(cuts, n_points)], axis=1)


@pytest.mark.parametrize("n_features", [2, 3])  # (the C loop's unrolled cases)
def test_block_sparse_knn_is_exact(backend, n_features):
    """Each query's K nearest among the points of the cells its cell visits
    (in a given order), ties by label (duplicated points), results in the
    given rows; fewer than K points visited: +inf and -1; with and without
    boxes (which only skip cells that cannot hold a neighbour)."""
    rng = np.random.default_rng(7)
    Y = rng.random((400, n_features))
    Y[50:60] = Y[3]  # ties
    labels = rng.permutation(400)
    X = np.concatenate([Y[[3]], rng.random((59, n_features))])
    cells = _cells(rng, 400, 20)
    lo = np.stack([Y[a:b].min(0) for a, b in cells])
    hi = np.stack([Y[a:b].max(0) for a, b in cells])
    query_starts = np.array([0, 25, 25, 60])  # an empty query cell
    visits = [rng.permutation(len(cells))[:12], [], rng.permutation(len(cells))[:1]]
    pair_starts = np.cumsum([0] + [len(v) for v in visits])
    pair_cells = np.concatenate(visits).astype(np.int64)
    rows = rng.permutation(60)
    k = 12
    for boxes in ({}, {"lo": lo, "hi": hi}):
        d, ind = block_sparse_knn(X, Y, k, query_starts, pair_starts, pair_cells, cells,
                                  labels=labels, rows=rows, backend=backend, **boxes)
        for c, v in enumerate(visits):
            cols = np.concatenate([np.arange(*cells[b]) for b in v] + [[]]).astype(int)
            for q in range(query_starts[c], query_starts[c + 1]):
                d2 = ((Y[cols] - X[q]) ** 2).sum(1)
                order = np.lexsort((labels[cols], d2))[:k]
                got_d, got_i = d[rows[q]], ind[rows[q]]
                w = len(order)
                np.testing.assert_array_equal(got_i[:w], labels[cols][order])
                np.testing.assert_allclose(got_d[:w], d2[order], rtol=1e-14, atol=1e-15)
                assert (got_i[w:] == -1).all() and np.isinf(got_d[w:]).all()


def test_box_pairs_are_the_cells_within_each_radius(backend):
    """Each box's candidates within its radius, by the smallest distance
    between points of the two boxes (a dense check of every pair), nearest
    first, equal distances in the candidates' order; an empty group, a box
    with an infinite radius, touching and overlapping boxes."""
    rng = np.random.default_rng(11)
    lo = rng.random((10, 3))
    hi = lo + 0.2 * rng.random((10, 3))
    cell_lo = rng.random((30, 3))
    cell_hi = cell_lo + 0.1 * rng.random((30, 3))
    cell_lo[5], cell_hi[5] = lo[0], hi[0]  # overlapping: distance 0
    cell_lo[6], cell_hi[6] = hi[1], hi[1] + 0.1  # touching at a corner
    radius = np.full(10, 0.3)
    radius[2] = np.inf
    group_first = [0, 4, 4, 10]  # an empty group
    lists = [rng.permutation(30)[:20], [], rng.permutation(30)[:25]]
    group_starts = np.cumsum([0] + [len(v) for v in lists])
    candidates = np.concatenate(lists).astype(np.int64)
    starts, cells = box_pairs(lo, hi, radius, group_first, group_starts, candidates,
                              cell_lo, cell_hi, backend=backend)
    for g, v in enumerate(lists):
        for a in range(group_first[g], group_first[g + 1]):
            gap = np.maximum(cell_lo[v] - hi[a], lo[a] - cell_hi[v])
            dist = np.sqrt((np.maximum(gap, 0) ** 2).sum(1))
            want = np.asarray(v, dtype=np.int64)[np.argsort(dist, kind="stable")]
            want = want[np.sort(dist) <= radius[a]]
            np.testing.assert_array_equal(cells[starts[a]:starts[a + 1]], want)
    assert starts[-1] == len(cells)
    with pytest.raises(ValueError, match="'candidates'"):
        box_pairs(lo, hi, radius, group_first, group_starts, candidates + 30,
                  cell_lo, cell_hi, backend=backend)


def test_block_sparse_knn_with_more_ties_than_slots():
    """More points at one distance than a query's slots hold (duplicates:
    a crash once, writing past the slots): the K of smallest label."""
    rng = np.random.default_rng(9)
    Y = np.concatenate([np.zeros((300, 3)), rng.random((100, 3))])
    labels = rng.permutation(400)
    X = np.zeros((5, 3))
    k = 40  # 2 k + 64 = 144 slots < 300 ties
    d, ind = block_sparse_knn(X, Y, k, [0, 5], [0, 2], [0, 1], [[0, 200], [200, 400]],
                              labels=labels, backend="cpu")
    np.testing.assert_array_equal(ind, np.tile(np.sort(labels[:300])[:k], (5, 1)))
    assert (d == 0).all()


def test_pruned_search_in_c_matches_direct_distances(dtype, monkeypatch):
    """Low dimension, pruned (algorithm='auto'): the block-sparse K-min runs
    in C on the pairs of cells the pruned search chose; same neighbours as
    direct float64 distances, ties by index, for queries and for X=None."""
    from kerneltools import selection
    from kerneltools.estimators.neighbors.search import _cells as _neighbors_cells, _pruned as _neighbors_pruned

    monkeypatch.setattr(_neighbors_pruned, "PRUNE_MIN_FIT", 500)
    monkeypatch.setattr(_neighbors_pruned, "PRUNE_MIN_PAIRS", 10_000)
    calls = []
    original = selection.block_sparse_knn

    def spy(*args, **kw):
        calls.append(kw.get("backend"))
        return original(*args, **kw)

    monkeypatch.setattr(_neighbors_cells, "block_sparse_knn", spy)
    rng = np.random.default_rng(8)
    X = rng.random((1500, 3))
    X[100:110] = X[7]  # ties
    X = X.astype(dtype)
    Q = np.concatenate([X[:5], rng.random((295, 3)).astype(dtype)])
    nn = NearestNeighbors(n_neighbors=40, backend="cpu").fit(X)
    assert isinstance(nn._search(Q)[0], _neighbors_cells.CellSearch)
    dist, ind = nn.kneighbors(Q)
    ref_d2, ref_ind = direct_knn(X, Q, 40)
    np.testing.assert_array_equal(ind, ref_ind)
    np.testing.assert_allclose(dist, np.sqrt(ref_d2), rtol=2e-7 if dtype == np.float32
                               else 1e-13, atol=1e-12)
    ref_d2, ref_ind = drop_self(*direct_knn(X, X, 40))
    np.testing.assert_array_equal(nn.kneighbors(n_neighbors=39)[1], ref_ind)
    assert calls and set(calls) == {"cpu"}


def test_pruned_search_of_the_fitted_points_with_sparse_cells(dtype, monkeypatch):
    """A transform of the training set (a copy of X, as TSNE's neighbour
    graph): the query cells are the fitted cells (not cut again); a dense
    blob with scattered points, so that cells are halved where the points
    are sparse and some centres' nearest cells hold fewer than K points (the
    centres' K-th distances then ask more cells, never an infinite bound).
    Same neighbours as direct float64 distances (ties by index) and as
    scikit-learn's k-d tree."""
    from sklearn.neighbors import NearestNeighbors as SkNN

    from kerneltools.estimators.neighbors.search import _pruned as _neighbors_pruned

    monkeypatch.setattr(_neighbors_pruned, "PRUNE_MIN_FIT", 500)
    monkeypatch.setattr(_neighbors_pruned, "PRUNE_MIN_PAIRS", 10_000)
    rng = np.random.default_rng(8)
    X = np.concatenate([rng.normal(size=(1400, 3)) * 0.05, rng.random((100, 3)) * 3])
    X[100:110] = X[7]  # ties
    X = X.astype(dtype)
    nn = NearestNeighbors(n_neighbors=40, backend="cpu").fit(X)
    grid = nn._search(X)[0].grid
    assert len(grid.cells.counts)  # built (a cut) before the spies
    asked, cuts = [], []
    nearest, cut = grid.nearest, _neighbors_pruned.Cells.cut
    monkeypatch.setattr(grid, "nearest", lambda c, m: asked.append(m) or nearest(c, m))
    monkeypatch.setattr(_neighbors_pruned.Cells, "cut",
                        lambda *a: cuts.append(len(a[0])) or cut(*a))
    dist, ind = nn.kneighbors(X.copy())
    assert cuts == [] and len(set(asked)) > 1  # the fitted cells; more cells asked
    ref_d2, ref_ind = direct_knn(X, X, 40)
    np.testing.assert_array_equal(ind, ref_ind)
    rtol = 2e-7 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(dist, np.sqrt(ref_d2), rtol=rtol, atol=1e-12)
    sk_dist = SkNN(n_neighbors=40, algorithm="kd_tree").fit(X).kneighbors(X)[0]
    np.testing.assert_allclose(dist, sk_dist, rtol=rtol, atol=1e-6)


def test_tile_selection_rejects_bad_input(monkeypatch):
    with pytest.raises(ValueError, match="'k'"):
        TileSelection(3, 0)
    with pytest.raises(TypeError, match="'n_rows'"):
        TileSelection(2.5, 1)
    with pytest.raises(ValueError, match="'capacity'"):
        TileSelection(3, 4, capacity=35)
    with pytest.raises(ValueError, match="'slack'"):
        TileSelection(3, 1, slack=[1.0, -1.0, 0.0])
    with pytest.raises(TypeError, match="'dtype'"):
        TileSelection(3, 1, dtype=np.int32)
    with pytest.raises(ValueError, match="backend"):
        TileSelection(3, 1, backend="gpu")
    sel = TileSelection(3, 2, dtype="float64", backend="numpy")
    with pytest.raises(ValueError, match="'tile'"):
        sel.update(np.zeros((3, 4), np.float32), 0)
    with pytest.raises(ValueError, match="'columns'"):
        sel.update(np.zeros((3, 4)), -1)
    sel.update(np.zeros((3, 1)), 0)
    with pytest.raises(ValueError, match="fewer than k"):
        sel.rerank(np.zeros((3, 2)), np.zeros((5, 2)))
    with pytest.raises(ValueError, match="'X'"):
        sel.rerank(np.zeros((2, 2)), np.zeros((5, 2)))
    X, Y, cells = np.zeros((4, 3)), np.zeros((6, 3)), [[0, 3], [3, 6]]
    good = dict(query_starts=[0, 4], pair_starts=[0, 2], pair_cells=[0, 1])
    for bad, match in (({"query_starts": [0, 3]}, "'query_starts'"),
                       ({"pair_starts": [0, 3]}, "'pair_starts'"),
                       ({"pair_cells": [0, 2]}, "'pair_cells'")):
        with pytest.raises(ValueError, match=match):
            block_sparse_knn(X, Y, 2, cells=cells, **{**good, **bad})
    with pytest.raises(ValueError, match="'cells'"):
        block_sparse_knn(X, Y, 2, cells=[[0, 7]], **good)
    with pytest.raises(ValueError, match="'lo' and 'hi'"):
        block_sparse_knn(X, Y, 2, cells=cells, lo=np.zeros((2, 2)), hi=np.zeros((2, 2)),
                         **good)
    with pytest.raises(ValueError, match="'rows'"):
        block_sparse_knn(X, Y, 2, cells=cells, rows=[0, 0, 1, 2], **good)
    with pytest.raises(ValueError, match="'X' and 'Y'"):
        block_sparse_knn(X, Y[:, :2], 2, cells=cells, **good)
    monkeypatch.setattr(_cpu_select, "compiled", lambda dtype: None)  # no compiler
    with pytest.raises(BackendUnavailableError, match="backend='cpu'"):
        TileSelection(3, 1, backend="cpu")
    assert TileSelection(3, 1, backend="auto")._lib is None  # NumPy then
