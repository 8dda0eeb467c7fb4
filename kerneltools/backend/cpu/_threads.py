"""How a kernel's call uses the cores: OpenMP's team, or Python threads.

Kernels built with OpenMP split their rows across OpenMP's threads inside
the C call. Where the compiler has no OpenMP (zig's clang, Apple's clang) or
where it must not be loaded (another family of OpenMP runtime is already in
the process: :func:`._compiler.openmp_conflict`), the kernels are built
without it, and :func:`run_pieces` splits each call into one piece per core
(:func:`split_rows`, :func:`split_weighted`) run on a pool of Python
threads: ctypes releases the GIL while a C function runs, so the pieces run
in parallel as OpenMP's team would. Each piece writes only its own rows, so
results do not depend on the number of threads either way.

The calling thread runs the first piece itself, then waits for the others;
the pool's workers never wait, so calls from several threads at once cannot
deadlock, and a call made from a pool worker runs whole on it. An
interrupted caller still waits for its pieces before it returns (they write
into its arrays). The pool is made on first use, and again in a child made
by ``fork``, where the parent's threads do not exist. Pure Python: the same
on Linux, macOS and Windows, but tested on Linux only (macOS and Windows
have no ``sched_getaffinity``: :func:`cores` counts every CPU there).

GNU OpenMP's team does not survive ``fork`` either: a child that enters a
parallel region after its parent used one waits forever. Such a child runs
its OpenMP kernels on one thread (:func:`before_call`).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait

__all__ = [
    "PARALLEL_PAIRS",
    "cores",
    "before_call",
    "openmp_ran",
    "run_pieces",
    "split_rows",
    "split_weighted",
]

#: Below this many pairs one thread does a call (the kernels' KT_PARALLEL_PAIRS,
#: about a millisecond of work: waking a team costs more on a busy machine).
PARALLEL_PAIRS = 1 << 20

#: [whether an OpenMP kernel ran in this process, whether this process must
#: run them serially (forked after one ran)]
_omp_state = [False, False]
_pool: list = [None, -1, 0]  # [the executor, the pid that made it, its workers]
_pool_lock = threading.Lock()
_local = threading.local()


def _after_fork_in_child() -> None:
    if _omp_state[0]:
        _omp_state[1] = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def openmp_ran() -> None:
    """Record that an OpenMP team may run in this process (a child forked
    after it runs its OpenMP kernels on one thread)."""
    _omp_state[0] = True


def before_call(fn) -> None:
    """Call before an OpenMP kernel ``fn`` runs (its library: ``fn._kt_lib``):
    in a child forked after OpenMP ran, the kernel is set to one thread."""
    if _omp_state[1] and not getattr(fn, "_kt_serial", False):
        fn._kt_lib.kt_set_parallel(0)
        fn._kt_serial = True
    openmp_ran()


def cores() -> int:
    """The threads a call may use: one in a child forked after OpenMP ran;
    else ``OMP_NUM_THREADS`` where set (OpenMP honours it, and so do the
    Python threads), else the CPUs this process may run on."""
    if _omp_state[1]:
        return 1
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    if hasattr(os, "sched_getaffinity"):  # Linux; elsewhere every CPU
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _executor(workers: int) -> ThreadPoolExecutor:
    with _pool_lock:
        pool, pid, size = _pool
        if pool is None or pid != os.getpid() or size < workers:
            # (a pool inherited through fork has no threads: dropped, not shut down)
            size = max(workers, cores() - 1)
            _pool[:] = [
                ThreadPoolExecutor(size, thread_name_prefix="kerneltools"),
                os.getpid(),
                size,
            ]
        return _pool[0]


def _as_worker(call, piece) -> None:
    _local.worker = True
    call(*piece)


def run_pieces(call, pieces) -> None:
    """``call(*piece)`` for each of ``pieces``, in parallel (see the module
    docstring); the first exception of a piece is raised once all are done."""
    pieces = list(pieces)
    if len(pieces) <= 1 or getattr(_local, "worker", False):
        for piece in pieces:
            call(*piece)
        return
    pool = _executor(len(pieces) - 1)
    futures = [pool.submit(_as_worker, call, piece) for piece in pieces[1:]]
    try:
        call(*pieces[0])
    finally:
        wait(futures)  # they write into the caller's arrays
    for future in futures:
        future.result()


def split_rows(r0: int, r1: int, parts: int, align: int = 1) -> list[tuple[int, int]]:
    """``[r0, r1)`` cut into at most ``parts`` ranges of whole ``align``-row
    blocks (the last may be shorter), as OpenMP's static schedule does."""
    blocks = -(-(r1 - r0) // align)
    parts = max(1, min(parts, blocks))
    edges = [min(r1, r0 + (blocks * k // parts) * align) for k in range(parts + 1)]
    return [(a, b) for a, b in zip(edges, edges[1:]) if b > a]


def split_weighted(weights, parts: int) -> list[tuple[int, int]]:
    """Ranges ``[a, b)`` of the items, at most ``parts``, of about equal
    total ``weights`` (the pairs of each output block, say: the block-sparse
    kernels' split, whose blocks differ in size)."""
    n = len(weights)
    if n == 0:
        return []
    total = float(sum(weights))
    parts = max(1, min(parts, n))
    edges, acc = [0], 0.0
    for i, w in enumerate(weights[:-1]):
        acc += float(w)
        if len(edges) < parts and acc >= total * len(edges) / parts:
            edges.append(i + 1)
    edges.append(n)
    return [(a, b) for a, b in zip(edges, edges[1:]) if b > a]
