"""Processes and signals: fork after a parallel reduction, Ctrl-C, progress.

The scenarios that could hang run in a subprocess with a timeout, so a
regression fails the test instead of stopping the suite.
"""

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import kerneltools as kt
from kerneltools.backend.cpu import _backend as _cpu_backend
from kerneltools.backend.cpu import _library
from kerneltools.backend import _progress
from kerneltools.backend.cpu._compiler import find_compiler

pytestmark = pytest.mark.skipif(
    not find_compiler().ok or sys.platform != "linux",
    reason="needs the C backend (OpenMP) and Linux's fork and signals",
)


def _python(script: str, *, timeout: float, env=None):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_forked_children_run_reductions_after_a_parallel_one():
    """Linux's default start method (and torch DataLoader workers): 4 children
    forked at once after the parent ran a multi-threaded reduction each run
    one and get the parent's numbers (they hung in the OpenMP runtime)."""
    script = """
        import multiprocessing as mp
        import numpy as np
        import kerneltools as kt

        x = np.random.default_rng(0).random((3000, 3))
        b = np.ones((3000, 1))

        def reduce(scale):
            return (-kt.Vi(x).sqdist(kt.Vj(x)) * scale).exp() @ b

        def child(k, q):
            q.put((k, reduce(1.0 + k)))

        if __name__ == "__main__":
            parent = [reduce(1.0 + k) for k in range(4)]  # 9e6 pairs: threads
            ctx = mp.get_context("fork")
            q = ctx.Queue()
            procs = [ctx.Process(target=child, args=(k, q)) for k in range(4)]
            for p in procs:
                p.start()
            got = dict(q.get(timeout=60) for _ in procs)
            for p in procs:
                p.join()
            assert [p.exitcode for p in procs] == [0] * 4
            for k in range(4):
                np.testing.assert_allclose(got[k], parent[k], rtol=1e-12)
            print("ok")
    """
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"kt_fork_{os.getpid()}.py")
    with open(path, "w") as fh:  # multiprocessing wants a real __main__ module
        fh.write(textwrap.dedent(script))
    try:
        proc = subprocess.run([sys.executable, path], capture_output=True, text=True,
                              timeout=120)
    finally:
        os.unlink(path)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]


def _interrupt_after_ready(script: str, cache, delay: float, env=None):
    """Run ``script`` in its own session, send SIGINT to its process group
    (as a terminal's Ctrl-C does) ``delay`` s after it prints 'ready';
    return (seconds from the signal to the exit, stderr).

    The script first installs Python's SIGINT handler itself: a pytest
    started in the background by a non-interactive shell (``pytest ... &``)
    ignores SIGINT, its children inherit that, and Python then never raises
    KeyboardInterrupt (the test failed, whatever kerneltools did)."""
    script = ("import signal\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
              + textwrap.dedent(script))
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "KERNELTOOLS_CACHE_DIR": str(cache), **(env or {})},
    )
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        time.sleep(delay)
        t0 = time.perf_counter()
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("the process was still running 30 s after Ctrl-C")
        return time.perf_counter() - t0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_ctrl_c_stops_a_long_reduction_within_a_second(tmp_path):
    """A Gaussian K @ b over 3e5 x 3e5 points (a minute or more on 2 cores):
    SIGINT raises KeyboardInterrupt within about a second, and the kernel,
    already in the cache, loads in the next process without a compile."""
    cache = tmp_path / "cache"
    script = """
        import numpy as np
        import kerneltools as kt

        def K(x):
            return (-kt.Vi(x).sqdist(kt.Vj(x)) * 0.5).exp()

        K(np.random.rand(100, 3).astype(np.float32)) @ np.ones((100, 1), np.float32)
        x = np.random.rand(300_000, 3).astype(np.float32)
        print("ready", flush=True)
        K(x) @ np.ones((300_000, 1), np.float32)
        print("finished")
    """
    waited, err = _interrupt_after_ready(script, cache, delay=0.5)
    assert "KeyboardInterrupt" in err, err[-2000:]
    assert waited < 2.5, f"Ctrl-C took {waited:.1f} s to stop the reduction"
    after = _python("""
        import numpy as np
        import kerneltools as kt
        from kerneltools.backend.cpu import _backend as _cpu_backend
        x = np.random.default_rng(1).random((100, 3)).astype(np.float32)
        a = (-kt.Vi(x).sqdist(kt.Vj(x)) * 0.5).exp() @ np.ones((100, 1), np.float32)
        ref = np.exp(-0.5 * ((x[:, None].astype(float) - x[None]) ** 2).sum(-1)).sum(1)
        np.testing.assert_allclose(a[:, 0], ref, rtol=1e-5)
        print(_cpu_backend.compile_count())
    """, timeout=120, env={"KERNELTOOLS_CACHE_DIR": str(cache)})
    assert after.returncode == 0, after.stderr[-2000:]
    assert after.stdout.strip() == "0", "the interrupted process left no usable kernel"


def test_ctrl_c_during_a_compile_leaves_no_partial_file(tmp_path):
    """Ctrl-C during a long first compile stops the compiler and leaves no
    temporary or partial library. The compiler is the real one behind a
    wrapper that first sleeps (only for kernels, not the flag probes): wide
    formulas now compile in a fraction of a second, too fast to interrupt."""
    cache = tmp_path / "cache"
    slow_cc = tmp_path / "slow-cc"
    slow_cc.write_text(
        "#!/bin/sh\n"
        'case "$*" in *probe.c*) ;; *) sleep 60 ;; esac\n'
        f'exec {find_compiler().path} "$@"\n'
    )
    slow_cc.chmod(0o755)
    script = """
        import numpy as np
        import kerneltools as kt
        x = np.random.rand(50, 3)
        print("ready", flush=True)
        (-kt.Vi(x).sqdist(kt.Vj(x))).exp() @ np.ones((50, 1))
    """
    waited, err = _interrupt_after_ready(script, cache, delay=1.0, env={"CC": str(slow_cc)})
    assert "KeyboardInterrupt" in err, err[-2000:]
    assert waited < 5
    left = [p.name for p in (cache / "cpu").iterdir()] if (cache / "cpu").is_dir() else []
    assert not [n for n in left if n.startswith(".tmp-")], left
    assert not [n for n in left if n.endswith(".so")], left


@pytest.fixture
def tiny_chunks(monkeypatch):
    """Chunks of a few rows: every reduction below runs as many calls."""
    monkeypatch.setattr(_progress, "CHUNK_WORK", 1 << 10)
    monkeypatch.setattr(_progress, "CHUNK_SECONDS", 1e-6)
    calls = []
    real = _progress.chunks

    def counting(*args, **kwargs):
        for r in real(*args, **kwargs):
            calls.append(r)
            yield r

    monkeypatch.setattr(_cpu_backend, "chunks", counting)
    return calls


@pytest.mark.parametrize("case", ["sum", "argkmin", "lse_axis0", "ranges"])
def test_chunked_reductions_equal_one_call(case, tiny_chunks):
    """Output rows (blocks) are independent: running by chunks gives the
    same bits as one call, for every kind of reduction and kernel."""
    rng = np.random.default_rng(3)
    x, y = rng.random((203, 3)), rng.random((157, 3))
    b = rng.random((157, 2))
    D = kt.Vi(x).sqdist(kt.Vj(y))

    def run():
        if case == "sum":
            return (-D).exp() @ b
        if case == "argkmin":
            return D.argKmin(5, axis=1, backend="cpu")
        if case == "lse_axis0":
            return (-D).logsumexp(axis=0, backend="cpu")
        from kerneltools import ranges as kr

        li, lj = kr.grid_cluster(x, 0.25), kr.grid_cluster(y, 0.25)
        ci, cj = kr.cluster_centroids(x, li), kr.cluster_centroids(y, lj)
        keep = kr.distance_mask(ci, kr.cluster_radii(x, li, ci), cj,
                                kr.cluster_radii(y, lj, cj), 0.5)
        ranges = kr.block_sparsity(li, lj, keep)
        assert 0 < keep.mean() < 1
        return ((-D).exp() * kt.Vj(b)).sum(axis=1, ranges=ranges, backend="cpu")

    chunked = run()
    assert len(tiny_chunks) > 3, "the reduction did not run by chunks"
    _progress_off = _progress.CHUNK_WORK
    _progress.CHUNK_WORK = 1 << 62
    try:
        tiny_chunks.clear()
        whole = run()
    finally:
        _progress.CHUNK_WORK = _progress_off
    assert len(tiny_chunks) == 1
    np.testing.assert_array_equal(chunked, whole)


def test_a_long_reduction_says_how_long(tiny_chunks, monkeypatch, caplog):
    """Once the first chunks predict more than LONG_SECONDS, one line says
    how long the whole will take (here with thresholds lowered). The kernel
    is compiled first: on a loaded machine its compile takes over 2 s and
    says so too."""
    x = np.random.default_rng(0).random((300, 3))
    (-kt.Vi(x).sqdist(kt.Vj(x))).exp().sum(axis=1, backend="cpu")
    monkeypatch.setattr(_progress, "LONG_SECONDS", 0.0)
    monkeypatch.setattr(_progress, "ESTIMATE_AFTER", 0.0)
    caplog.set_level(logging.INFO, logger="kerneltools")
    caplog.clear()
    (-kt.Vi(x).sqdist(kt.Vj(x))).exp().sum(axis=1, backend="cpu")
    lines = [r.getMessage() for r in caplog.records if r.name == "kerneltools"]
    assert len(lines) == 1, lines
    assert "Sum reduction over 300 x 300 pairs" in lines[0] and "s in all" in lines[0]


def test_a_long_numpy_reduction_says_how_long(monkeypatch, caplog):
    """The NumPy backend (the fallback without a compiler) estimates too."""
    monkeypatch.setattr(_progress, "LONG_SECONDS", 0.0)
    monkeypatch.setattr(_progress, "ESTIMATE_AFTER", 0.0)
    caplog.set_level(logging.INFO, logger="kerneltools")
    x = np.random.default_rng(0).random((3000, 3))
    (-kt.Vi(x).sqdist(kt.Vj(x[:50]))).exp().sum(axis=1, backend="numpy")
    lines = [r.getMessage() for r in caplog.records if r.name == "kerneltools"]
    assert len(lines) == 1 and "Sum reduction over 3,000 x 50 pairs (numpy)" in lines[0]


def test_progress_goes_to_stderr_when_logging_is_not_configured():
    """A user who configured no logging still sees the line (on stderr)."""
    proc = _python("""
        import numpy as np
        import kerneltools as kt
        from kerneltools.backend import _progress
        _progress.CHUNK_WORK, _progress.CHUNK_SECONDS = 1 << 10, 1e-6
        _progress.LONG_SECONDS = _progress.ESTIMATE_AFTER = 0.0
        x = np.random.default_rng(0).random((300, 3))
        (-kt.Vi(x).sqdist(kt.Vj(x))).exp().sum(axis=1, backend="cpu")
    """, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.count("kerneltools: the Sum reduction over 300 x 300") == 1, proc.stderr


def test_slow_notice_speaks_only_when_slow(caplog):
    caplog.set_level(logging.INFO, logger="kerneltools")
    with _progress.slow_notice(10.0, "quick"):
        pass
    with _progress.slow_notice(0.01, "compiling X"):
        time.sleep(0.2)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "compiling X" and lines[1].startswith("done in "), lines
    assert len(lines) == 2


def test_a_slow_first_compile_says_so(tmp_path, monkeypatch, caplog):
    """A first compile still running after COMPILE_NOTICE_SECONDS (2 s; 0
    here) says what it compiles, then how long it took; a cached kernel
    says nothing."""
    monkeypatch.setenv("KERNELTOOLS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_library, "_loaded", {})
    monkeypatch.setattr(_cpu_backend, "_functions", {})
    monkeypatch.setattr(_cpu_backend, "_by_signature", {})
    monkeypatch.setattr(_progress, "COMPILE_NOTICE_SECONDS", 0.0)
    caplog.set_level(logging.INFO, logger="kerneltools")
    x = np.random.default_rng(0).random((20, 5))
    K = (-kt.Vi(x).sqdist(kt.Vj(x)) * 0.25).exp()
    K.sum(axis=1, backend="cpu")
    lines = [r.getMessage() for r in caplog.records if r.name == "kerneltools"]
    assert len(lines) == 2 and lines[0].startswith("compiling the C kernel "), lines
    assert lines[1].startswith("done in ")
    caplog.clear()
    monkeypatch.setattr(_library, "_loaded", {})
    monkeypatch.setattr(_cpu_backend, "_functions", {})
    monkeypatch.setattr(_cpu_backend, "_by_signature", {})
    K.sum(axis=1, backend="cpu")  # from the disk cache: no compile, no line
    assert not [r for r in caplog.records if r.name == "kerneltools"]
