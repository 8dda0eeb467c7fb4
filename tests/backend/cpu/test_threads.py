"""Kernels built without OpenMP run on Python threads (``_threads.py``), with
the results of the OpenMP build, bit for bit (the same flags but
``-fopenmp-simd`` for ``-fopenmp``)."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

import kerneltools as kt
from kerneltools import ranges as kr
from kerneltools.backend.cpu import _backend, _library, _radius, _select, _threads
from kerneltools.backend.cpu._compiler import find_compiler

needs_compiler = pytest.mark.skipif(
    not find_compiler().ok, reason=f"no C compiler: {find_compiler().reason}"
)


# -- the splits and the pool ------------------------------------------------------


@pytest.mark.parametrize(
    "r0, r1, parts, align",
    [
        (0, 1000, 2, 16),
        (5, 1000, 3, 16),
        (0, 10, 4, 16),
        (0, 33, 8, 1),
        (7, 8, 2, 16),
    ],
)
def test_split_rows_covers_the_range_in_aligned_pieces(r0, r1, parts, align):
    pieces = _threads.split_rows(r0, r1, parts, align)
    assert pieces[0][0] == r0 and pieces[-1][1] == r1
    assert all(b == c for (_, b), (c, _) in zip(pieces, pieces[1:]))
    assert len(pieces) <= parts
    assert all((a - r0) % align == 0 for a, _ in pieces)
    sizes = [b - a for a, b in pieces]
    assert max(sizes) - min(sizes) <= align or len(pieces) == 1


def test_split_weighted_balances_the_weights():
    weights = np.array([100, 1, 1, 1, 50, 50, 1, 1, 97, 3])
    pieces = _threads.split_weighted(weights, 2)
    assert pieces[0][0] == 0 and pieces[-1][1] == len(weights) and len(pieces) == 2
    sums = [weights[a:b].sum() for a, b in pieces]
    assert max(sums) <= 0.7 * weights.sum()
    assert _threads.split_weighted([], 2) == []
    assert _threads.split_weighted([5], 3) == [(0, 1)]


def test_pieces_run_on_several_threads_and_errors_wait_for_all():
    seen, done = set(), []

    def call(k):
        seen.add(threading.get_ident())
        time.sleep(0.02)
        done.append(k)

    _threads.run_pieces(call, [(k,) for k in range(4)])
    assert sorted(done) == [0, 1, 2, 3] and len(seen) >= 2

    done.clear()

    def failing(k):
        time.sleep(0.01 * k)
        done.append(k)
        if k == 0:
            raise ValueError("piece 0")

    with pytest.raises(ValueError, match="piece 0"):
        _threads.run_pieces(failing, [(k,) for k in range(3)])
    assert sorted(done) == [0, 1, 2]  # every piece finished before the raise


def test_a_pool_worker_runs_its_own_pieces_whole():
    """A call made from a pool worker runs serially: no worker ever waits."""
    inner = []

    def outer(k):
        _threads.run_pieces(
            lambda j: inner.append((k, threading.get_ident())), [(j,) for j in range(3)]
        )

    _threads.run_pieces(outer, [(k,) for k in range(2)])
    assert len(inner) == 6


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_the_pool_is_made_again_in_a_forked_child():
    _threads.run_pieces(lambda k: None, [(0,), (1,)])  # the parent's pool exists
    pid = os.fork()
    if pid == 0:  # the child: exit 0 once its pieces ran (a dead pool would hang)
        out = []
        try:
            _threads.run_pieces(out.append, [(0,), (1,)])
        finally:
            os._exit(0 if sorted(out) == [0, 1] else 1)
    deadline = time.time() + 60
    while time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    pytest.fail("the forked child's kernel call hung")


def test_cores_follows_omp_num_threads(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert _threads.cores() == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "junk")
    assert _threads.cores() >= 1


# -- the kernels, built without OpenMP ---------------------------------------------


@pytest.fixture
def no_openmp(tmp_path, monkeypatch):
    """The system compiler without OpenMP, everywhere the backend builds (a
    fresh cache); yields the thread ids that ran pieces of kernel calls."""
    comp = find_compiler()
    if not comp.openmp:
        pytest.skip("the compiler has no OpenMP: the other tests cover this road")
    plain = comp.without_openmp("a test")
    monkeypatch.setenv("KERNELTOOLS_CACHE_DIR", str(tmp_path / "cache"))
    for module in (_backend, _library, _radius, _select):
        monkeypatch.setattr(module, "find_compiler", lambda: plain)
    for module, name in (
        (_library, "_loaded"),
        (_backend, "_functions"),
        (_backend, "_by_signature"),
        (_radius, "_loaded"),
        (_select, "_libs"),
    ):
        monkeypatch.setattr(module, name, {})
    seen = set()

    def spy(call, pieces):
        def traced(*piece):
            seen.add(threading.get_ident())
            call(*piece)

        _threads.run_pieces(traced, pieces)

    monkeypatch.setattr(_backend, "run_pieces", spy)
    monkeypatch.setattr(_radius, "run_pieces", spy)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    return seen


def _blocks(x, y, radius, size=0.1):
    lab_x, lab_y = kr.grid_cluster(x, size), kr.grid_cluster(y, size)
    cx, cy = kr.cluster_centroids(x, lab_x), kr.cluster_centroids(y, lab_y)
    rx, ry = kr.cluster_radii(x, lab_x, cx), kr.cluster_radii(y, lab_y, cy)
    keep = kr.distance_mask(cx, rx, cy, ry, radius, pairs=True)
    return kr.block_sparsity(lab_x, lab_y, keep)


def _results():
    """Results of every kind of C kernel call, large enough to be split."""
    rng = np.random.default_rng(0)
    x = rng.random((3001, 3), dtype=np.float32)
    y = rng.random((6000, 3))
    K = (-kt.Vi(x).sqdist(kt.Vj(x)) * 4.0).exp()
    D = kt.Vi(y).sqdist(kt.Vj(y))
    bs = _blocks(y, y, 0.3)
    r2 = np.full(len(y), 0.003)
    return [
        K.sum(axis=1, backend="cpu"),
        K.argKmin(5, axis=1, backend="cpu"),
        K.logsumexp(axis=0, backend="cpu"),
        D.argKmin(7, axis=1, backend="cpu"),
        (-D * 3.0).exp().sum(axis=1, ranges=bs, backend="cpu"),
        *kr.radius_csr(y, y, r2, _blocks(y, y, np.sqrt(0.003)), sort="distance"),
    ]


@needs_compiler
def test_kernels_without_openmp_match_the_openmp_build_bit_for_bit(
    no_openmp, monkeypatch
):
    monkeypatch.setattr(_radius, "PARALLEL_PAIRS", 0)  # the radius search split too
    plain = _results()
    assert len(no_openmp) >= 2, "the calls were not split across threads"
    monkeypatch.undo()
    for a, b in zip(plain, _results()):
        np.testing.assert_array_equal(a, b)
