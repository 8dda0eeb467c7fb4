"""kerneltools on Dask arrays, against the in-memory results on the same data.

A real ``dask.distributed`` LocalCluster of two worker processes runs every
test here (one per module), so the graphs are pickled, shipped and run in
other processes as on a cluster.
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

da = pytest.importorskip("dask.array", reason="Dask is the optional 'dask' extra")
distributed = pytest.importorskip("distributed", reason="Dask is the optional 'dask' extra")

import dask  # noqa: E402

import kerneltools as kt  # noqa: E402
from kerneltools.backend._dask import SPLIT_EVERY, is_dask_array  # noqa: E402
from kerneltools.estimators import (  # noqa: E402
    KernelRidge,
    KNeighborsClassifier,
    KNeighborsRegressor,
    NearestNeighbors,
    Nystroem,
)
from kerneltools.estimators.optimal_transport import sinkhorn_divergence  # noqa: E402

from _helpers import assert_close, sides  # noqa: E402

@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
        memory_limit="2GiB",
    )
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def _data(dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((500, 3)).astype(dtype)
    y = rng.random((350, 3)).astype(dtype)
    a = rng.standard_normal((500, 2)).astype(dtype)  # i-weights (signed)
    b = rng.standard_normal((350, 2)).astype(dtype)  # j-weights (signed)
    return x, y, a, b


#: (name, reduction of the formula F = |x_i - y_j|^2 with weights w on the
#: reduced side) on each axis, with a backend.
def _cases(axis, be):
    kw = dict(axis=axis, backend=be)
    return {
        "sum": lambda F, w: ((-F).exp() * w).sum(**kw),
        "sumsquares": lambda F, w: ((-F).exp() * w).sumsquares(**kw),
        "lse": lambda F, w: (-4 * F).logsumexp(**kw),
        "lse_weight": lambda F, w: (-4 * F).logsumexp(weight=w.abs() + 0.1, **kw),
        "lse_signed_weight": lambda F, w: (-4 * F).logsumexp(weight=w.elem(0) + 2.0, **kw),
        "softmax_weight": lambda F, w: (-4 * F).sumsoftmaxweight(w, **kw),
        "min": lambda F, w: F.min(**kw),
        "max": lambda F, w: F.max(**kw),
        "argmin": lambda F, w: F.argmin(**kw),
        "argmax": lambda F, w: F.argmax(**kw),
        "min_argmin": lambda F, w: F.min_argmin(**kw),
        "kmin": lambda F, w: F.Kmin(7, **kw),
        "argkmin": lambda F, w: F.argKmin(7, **kw),
        "kmin_argkmin": lambda F, w: F.Kmin_argKmin(7, **kw),
    }


CHUNKS = {  # rows per chunk of x (500) and y (350)
    "uneven": ((150, 225, 125), (50, 125, 25, 150)),
    "one-chunk": ((500,), (350,)),
    "many": (100, 45),  # y in 8 chunks: three levels of merges two by two (below)
}


def _compute(out):
    if isinstance(out, tuple):
        assert all(is_dask_array(o) for o in out)
        return dask.compute(*out)
    assert is_dask_array(out), type(out)
    return (out.compute(),)


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def _check_same(got, ref, rtol):
    for g, r in zip(got, ref):
        assert g.shape == r.shape and g.dtype == r.dtype, (g.shape, r.shape, g.dtype, r.dtype)
        if r.dtype.kind == "i":
            np.testing.assert_array_equal(g, r)
        else:
            # signed sums cancel: relative to the largest output
            finite = np.abs(r[np.isfinite(r)])
            assert_close(g, r, rtol, scale=finite.max() if finite.size else 1.0)


@pytest.mark.parametrize("axis", [1, 0])
@pytest.mark.parametrize("case", list(_cases(1, None)))
def test_reductions_equal_in_memory(client, axis, case, monkeypatch):
    """Every chunking (uneven, one chunk, a merge tree of three levels), on the
    CPU backend, and the NumPy backend on uneven chunks. Reduced over the
    points of y (and weighted by b) on both axes: for axis=0 y and b are the
    i-variables, so that both axes run the same compiled kernels (a reduction
    over i is the one over j with i and j exchanged).

    The one-chunk graph is computed first and alone: its single partial task
    compiles the partial-state kernels in one worker, and the other graphs,
    computed together, find them in the kernel cache (all in one compute,
    both workers compiled each of them)."""
    import kerneltools.backend._dask as kd

    monkeypatch.setattr(kd, "SPLIT_EVERY", 2)
    x, y, _, b = _data()
    kept, reduced = sides(axis)
    runs = [("one-chunk", "cpu"), ("uneven", "cpu"), ("many", "cpu"), ("uneven", "numpy")]
    assert {c for c, _ in runs} == set(CHUNKS)
    refs, lazies = [], []
    for chunks, backend in runs:
        fn = _cases(axis, backend)[case]

        def build(x, y, b, fn=fn):
            return fn(kept(x).sqdist(reduced(y)), reduced(b))

        cx, cy = CHUNKS[chunks]
        refs.append(_as_tuple(build(x, y, b)))
        out = _as_tuple(build(da.from_array(x, chunks=(cx, 3)), da.from_array(y, chunks=(cy, 3)),
                              da.from_array(b, chunks=(cy, 2))))
        assert all(is_dask_array(o) for o in out)
        lazies.append(out)
    results = dask.compute(*lazies[:1]) + dask.compute(*lazies[1:])
    for got, ref in zip(results, refs, strict=True):
        # float64 throughout; the partial states merge in another order than one pass
        _check_same(got, ref, 1e-12)


def test_params_numpy_sides_and_dtypes(client):
    """A NumPy array on either side (one shared key), a Dask parameter, and
    float32 (the in-memory dtype and results within float32 rounding)."""
    x, y, a, b = _data(np.float32)
    dx = da.from_array(x, chunks=120)
    s = np.array([3.0], dtype=np.float32)
    ds = da.from_array(s, chunks=1)

    def gauss(x, y, s):
        return (-kt.Pm(s) * kt.Vi(x).sqdist(kt.Vj(y))).exp() @ b

    ref = gauss(x, y, s)
    for lazy in (gauss(dx, y, s), gauss(x, da.from_array(y, chunks=100), s), gauss(dx, y, ds)):
        assert is_dask_array(lazy) and lazy.dtype == np.float32
        got = lazy.compute()
        assert got.dtype == ref.dtype and got.shape == ref.shape
        assert_close(got, ref, 1e-5, scale=np.abs(ref).max())


def test_nothing_runs_until_computed_and_graph_is_linear(client):
    """Building a reduction computes nothing; its graph has one task per
    (x chunk, y chunk) pair plus the merges, each depending on one chunk of
    each side (no task sees all the points), and no N x M array anywhere."""
    calls = []

    def spy(block):
        calls.append(len(block))
        return block

    x, y, _, b = _data()
    dx = da.from_array(x, chunks=100).map_blocks(spy)  # 5 chunks
    dy = da.from_array(y, chunks=50)  # 7 chunks
    calls.clear()  # map_blocks ran spy on its meta (empty) arrays
    out = kt.Vi(dx).sqdist(kt.Vj(dy)).argKmin(3, axis=1)
    assert calls == [] and out.shape == (500, 3)
    graph = dict(out.__dask_graph__())
    partial = [k for k in graph if isinstance(k, tuple) and k[0].startswith("kt-partial")]
    assert len(partial) == 5 * 7
    x_keys = {k for k in graph if isinstance(k, tuple) and k[0] == dx.name}
    y_keys = {k for k in graph if isinstance(k, tuple) and k[0] == dy.name}
    for key in partial:
        deps = _task_dependencies(graph[key])
        assert len(deps & x_keys) == 1 and len(deps & y_keys) == 1
    for key, task in graph.items():
        if isinstance(key, tuple) and key[0].startswith("kt-merge"):
            assert len(_task_dependencies(task)) <= SPLIT_EVERY
    np.testing.assert_array_equal(out.compute(), kt.Vi(x).sqdist(kt.Vj(y)).argKmin(3, axis=1))


def _task_dependencies(task):
    deps = getattr(task, "dependencies", None)
    if deps is not None:  # dask's task spec
        return set(deps)
    found = set()

    def walk(t):
        if isinstance(t, tuple) and t and isinstance(t[0], str):
            found.add(t)
        elif isinstance(t, (tuple, list)):
            for u in t:
                walk(u)

    walk(task)
    return found


def test_large_problem_in_small_workers(client):
    """3e4 x 3e4 points through workers limited to 2 GiB each: neither the
    N x M kernel matrix (7.2 GB in float64) nor one chunk's rows of it
    (15,000 x 30,000: 3.6 GB) is ever formed."""
    rng = np.random.default_rng(1)
    n = 30_000
    x = da.from_array(rng.random((n, 3)), chunks=15_000)
    b = rng.random((n, 1))
    out = (-10 * kt.Vi(x).sqdist(kt.Vj(x))).exp() @ b
    got = out.compute()
    # spot check of 20 rows against dense NumPy
    xs = x[:20].compute()
    xa = x.compute()
    ref = np.exp(-10 * ((xs[:, None, :] - xa[None, :, :]) ** 2).sum(-1)) @ b
    assert_close(got[:20], ref, 1e-10, scale=np.abs(ref).max())


def test_worker_killed_mid_reduction_is_retried(client):
    """SIGKILL a worker that is running partial reductions: the nanny restarts
    it, the scheduler reruns the lost tasks, and the result is still exact.
    (The NumPy backend makes each of the 16 partial reductions take about
    0.1 s: the worker is killed at the first stored result, with most of
    them still to run.)"""
    rng = np.random.default_rng(2)
    x = rng.random((4_800, 3))
    y = rng.random((3_000, 3))
    dx = da.from_array(x, chunks=600)
    dy = da.from_array(y, chunks=1_500)
    lazy = kt.Vi(dx).sqdist(kt.Vj(dy)).Kmin_argKmin(5, axis=1, backend="numpy")
    futures = client.compute(list(lazy))
    pids = client.run(os.getpid)
    deadline = time.time() + 60
    victim = None
    while victim is None and time.time() < deadline:  # a worker busy with partials
        stored = sum(len(v) for v in client.has_what().values())
        busy = [w for w, tasks in client.processing().items() if tasks]
        if stored and busy:
            victim = busy[0]
        time.sleep(0.02)
    assert victim is not None
    os.kill(pids[victim], signal.SIGKILL)
    assert not all(f.done() for f in futures)  # killed in the middle
    vals, idx = client.gather(futures)
    ref_v, ref_i = kt.Vi(x).sqdist(kt.Vj(y)).Kmin_argKmin(5, axis=1)
    np.testing.assert_array_equal(idx, ref_i)
    assert_close(vals, ref_v, 1e-12, scale=1.0)
    client.wait_for_workers(2, timeout=60)


# -- estimators --------------------------------------------------------------
def _queries(n=900, d=4, seed=3):
    rng = np.random.default_rng(seed)
    return rng.random((n, d))


def test_neighbors_estimators(client):
    rng = np.random.default_rng(4)
    X = rng.random((2000, 4))
    y = (X[:, 0] + X[:, 1] > 1).astype(int)
    Q = _queries()
    dQ = da.from_array(Q, chunks=(200, 2))  # features split too: rechunked
    clf = KNeighborsClassifier(7, weights="distance").fit(X, y)
    reg = KNeighborsRegressor(5).fit(X, X[:, 2])
    nn = NearestNeighbors(n_neighbors=4).fit(X)
    lazy = {
        "predict": clf.predict(dQ), "proba": clf.predict_proba(dQ),
        "reg": reg.predict(dQ), "kn": nn.kneighbors(dQ), "kn_ind": nn.kneighbors(dQ, 6, False),
    }
    assert is_dask_array(lazy["predict"]) and isinstance(lazy["kn"], tuple)
    got = dask.compute(lazy)[0]
    np.testing.assert_array_equal(got["predict"], clf.predict(Q))
    np.testing.assert_array_equal(got["proba"], clf.predict_proba(Q))
    np.testing.assert_array_equal(got["reg"], reg.predict(Q))
    for g, r in zip(got["kn"], nn.kneighbors(Q)):
        np.testing.assert_array_equal(g, r)
    np.testing.assert_array_equal(got["kn_ind"], nn.kneighbors(Q, 6, False))
    # the fitted estimator is scattered once and reused by later calls
    def estimator_key(lazy):
        tasks = [t for k, t in dict(lazy.__dask_graph__()).items() if "kt-rows" in str(k)]
        (future,) = {t[2] for t in tasks}  # (_call_rows, name, estimator, block, ...)
        assert isinstance(future, distributed.Future)
        return future.key

    assert estimator_key(nn.kneighbors(dQ)[0]) == estimator_key(nn.kneighbors(dQ)[0])
    assert estimator_key(nn.kneighbors(dQ)[0]) != estimator_key(clf.kneighbors(dQ)[0])


def test_kernel_ridge_and_nystroem_transform(client):
    rng = np.random.default_rng(5)
    X = rng.random((1500, 4))
    y = np.sin(3 * X[:, 0]) + X[:, 1]
    Q = _queries()
    dQ = da.from_array(Q, chunks=250)
    krr = KernelRidge(alpha=0.1, kernel="rbf", gamma=2.0, solver="cg").fit(X, y)
    ny = Nystroem(n_components=60, random_state=0).fit(X)
    p, t = dask.compute(krr.predict(dQ), ny.transform(dQ))
    np.testing.assert_allclose(p, krr.predict(Q), rtol=0, atol=1e-12)
    np.testing.assert_allclose(t, ny.transform(Q), rtol=0, atol=1e-12)


@pytest.mark.parametrize("landmarks", ["uniform", "rpcholesky"])
def test_kernel_ridge_falkon_fit_on_dask(client, landmarks):
    """Falkon on Dask arrays: the same landmarks and model as in memory.

    Each iteration is a Dask computation (about 0.15 CPU s of graph and
    scheduling here): 150 landmarks and alpha = 0.1 converge in 18 iterations
    with either landmark rule, where 60 landmarks and alpha = 1e-3 took 71
    and 46 (the same code on every iteration)."""
    rng = np.random.default_rng(6)
    X = rng.random((2000, 3))
    y = np.sin(4 * X[:, 0]) + X[:, 1] ** 2 + 0.05 * rng.standard_normal(len(X))
    kw = dict(alpha=0.1, kernel="rbf", gamma=2.0, n_components=150, random_state=0,
              landmarks=landmarks)
    ref = KernelRidge(solver="falkon", **kw).fit(X, y)
    dX, dy = da.from_array(X, chunks=700), da.from_array(y, chunks=700)  # 700, 700, 600
    got = KernelRidge(solver="auto", **kw).fit(dX, dy)
    assert got.solver_ == "falkon" and got.n_features_in_ == 3
    np.testing.assert_array_equal(got.X_fit_, ref.X_fit_)
    Q = _queries(500, 3)
    # the normal equations are ill-conditioned: compare the models' outputs
    np.testing.assert_allclose(got.predict(Q), ref.predict(Q), atol=1e-5)
    with pytest.raises(ValueError, match="solver='cholesky'.*Dask.*'falkon'.*'cg'"):
        KernelRidge(solver="cholesky").fit(dX, dy)
    bad = da.from_array(np.where(X > 0.99, np.nan, X), chunks=700)
    with pytest.raises(ValueError, match="'X' contains NaN"):
        KernelRidge(solver="falkon").fit(bad, dy)


def test_kernel_ridge_cg_fit_on_dask(client):
    """CG on Dask arrays (every product K v and the preconditioner's blocks on
    the workers): the same coefficients as in memory; X_fit_ stays a Dask
    array and predictions reduce over its chunks (NumPy in, NumPy out; Dask
    in, Dask out); sample weights too."""
    rng = np.random.default_rng(10)
    X = rng.random((2000, 3))
    y = np.sin(4 * X[:, 0]) + X[:, 1] ** 2 + 0.05 * rng.standard_normal(len(X))
    w = rng.random(len(X))
    w[:10] = 0
    kw = dict(alpha=1e-2, kernel="rbf", gamma=2.0, solver="cg", n_components=80,
              random_state=0, landmarks="rpcholesky")
    # 700, 700, 600 rows: 9 tasks per product K v (chunks of 450 made 25 of
    # the same code: 8.5 CPU s of Dask for the two fits, against 4.9)
    dX, dy = da.from_array(X, chunks=700), da.from_array(y, chunks=700)
    Q = _queries(300, 3)
    for weights in (None, w):
        ref = KernelRidge(**kw).fit(X, y, sample_weight=weights)
        got = KernelRidge(**kw).fit(dX, dy, sample_weight=weights)
        assert is_dask_array(got.X_fit_) and got.n_iter_ == ref.n_iter_
        np.testing.assert_allclose(got.dual_coef_, ref.dual_coef_, rtol=0,
                                   atol=1e-8 * np.abs(ref.dual_coef_).max())
        pred = got.predict(Q)
        assert isinstance(pred, np.ndarray)
        np.testing.assert_allclose(pred, ref.predict(Q), rtol=0, atol=1e-9)
    lazy = got.predict(da.from_array(Q, chunks=100))
    assert is_dask_array(lazy)
    np.testing.assert_allclose(lazy.compute(), ref.predict(Q), rtol=0, atol=1e-9)


def test_sinkhorn_divergence_on_dask(client):
    rng = np.random.default_rng(7)
    x = rng.random((1200, 2))
    y = rng.random((900, 2)) + 0.3
    ref, gx, gy = sinkhorn_divergence(x, y, blur=0.05, return_grad=True)
    # uneven chunks on both sides: 700 + 500 and 500 + 400 points
    val, dgx, dgy = sinkhorn_divergence(da.from_array(x, chunks=700), da.from_array(y, chunks=500),
                                        blur=0.05, return_grad=True)
    assert isinstance(val, float) and is_dask_array(dgx) and is_dask_array(dgy)
    assert abs(val - ref) <= 1e-12 * abs(ref)
    gx2, gy2 = dask.compute(dgx, dgy)
    np.testing.assert_allclose(gx2, gx, rtol=0, atol=1e-14)
    np.testing.assert_allclose(gy2, gy, rtol=0, atol=1e-14)


def test_bad_dask_input():
    x = da.from_array(np.ones((10, 3)), chunks=5)
    unknown = x[x[:, 0] > 0]  # unknown chunk sizes
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        kt.Vi(unknown)
    with pytest.raises(ValueError, match="ranges="):
        kt.Vi(x).sqdist(kt.Vj(x)).sum(axis=1, ranges=((0,),))


def test_large_numpy_operand_is_scattered_once(client, monkeypatch):
    """A NumPy array beside Dask ones travels to the workers once (scattered,
    broadcast), not inside the graph; the results do not change."""
    import pickle

    import kerneltools.backend._dask as kd

    rng = np.random.default_rng(8)
    x = rng.random((2000, 3))
    y = rng.random((30_000, 3))  # 720 kB
    dx = da.from_array(x, chunks=500)
    ref = kt.Vi(x).sqdist(kt.Vj(y)).min(axis=1)
    monkeypatch.setattr(kd, "SCATTER_BYTES", 1 << 16)
    lazy = kt.Vi(dx).sqdist(kt.Vj(y)).min(axis=1)
    def key_name(k):
        return k[0] if isinstance(k, tuple) else k

    def graph_bytes(lazy):  # everything but x's own chunks
        graph = dict(lazy.__dask_graph__())
        return len(pickle.dumps({k: v for k, v in graph.items()
                                 if not key_name(k).startswith(dx.name)}))

    assert graph_bytes(lazy) < y.nbytes / 10
    np.testing.assert_array_equal(lazy.compute(), ref)
    monkeypatch.setattr(kd, "SCATTER_BYTES", 1 << 30)  # the check sees an embedded y
    assert graph_bytes(kt.Vi(dx).sqdist(kt.Vj(y)).min(axis=1)) > y.nbytes


@pytest.mark.parametrize("solver", ["cholesky", "iterative"])
def test_gaussian_process_predict(client, solver):
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel

    from kerneltools.estimators import GaussianProcessRegressor

    rng = np.random.default_rng(9)
    X = rng.random((300, 2))
    y = np.sin(5 * X[:, 0]) + 0.1 * rng.standard_normal(len(X))
    gp = GaussianProcessRegressor(RBF(0.3) + WhiteKernel(0.01), optimizer=None,
                                  solver=solver).fit(X, y)
    Q = _queries(120, 2)
    dQ = da.from_array(Q, chunks=50)
    mean, std = gp.predict(dQ, return_std=True)
    assert is_dask_array(mean) and is_dask_array(std)
    mean, std, mean_only = dask.compute(mean, std, gp.predict(dQ))
    ref_mean, ref_std = gp.predict(Q, return_std=True)
    np.testing.assert_allclose(mean, ref_mean, rtol=0, atol=1e-10)
    np.testing.assert_allclose(mean_only, ref_mean, rtol=0, atol=1e-10)
    np.testing.assert_allclose(std, ref_std, rtol=1e-6, atol=1e-8)
    with pytest.raises(ValueError, match="return_cov=True.*Dask"):
        gp.predict(dQ, return_cov=True)
