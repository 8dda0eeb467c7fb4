"""The kernel cache on real file systems: full and read-only disks, interrupted compiles.

A warm cache whose folder cannot be written (a read-only mount, a full disk)
is used as it is: its kernels are verified as always and loaded without a
write; a new kernel that cannot be stored there goes to a private temporary
cache with one :class:`~kerneltools.exceptions.CacheWarning` naming the
folder, the reason and the fix; where nothing can be stored, ``auto`` runs
on NumPy. A compile killed or interrupted leaves no partial kernel.

Each state is made twice: for real (a tmpfs, a read-only bind mount: tests
run as root; skipped, with the reason, where ``mount`` is not permitted) and
simulated (``os.open`` and friends fail with ``EROFS``, or create files whose
writes fail with ``ENOSPC``, under the cache folder), which always runs.
Compiler runs are counted by a ``$CC`` wrapper that logs its arguments.
"""

import errno
import io
import os
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import kerneltools as kt
from kerneltools import exceptions
from kerneltools.backend.cpu import _cache, _compiler, _backend as _cpu_backend, _dlopen
from kerneltools.backend.cpu import _library
from kerneltools.backend import _dispatch
from kerneltools.backend.cpu._compiler import find_compiler

pytestmark = pytest.mark.skipif(
    not find_compiler().ok or not sys.platform.startswith("linux"),
    reason="needs a C compiler and Linux",
)

#: A child process: the Gaussian product of ``_gauss`` for each D given, checked
#: against NumPy; prints the kernels it compiled.
_CHILD = textwrap.dedent(
    """
    import sys, numpy as np, kerneltools as kt
    from kerneltools.backend.cpu._backend import compile_count
    for d in map(int, sys.argv[1:]):
        rng = np.random.default_rng(0)
        x, y, b = rng.random((40, d)), rng.random((30, d)), rng.random((30, 1))
        F = (-kt.Vi(x).sqdist(kt.Vj(y)) * 0.7).exp() * kt.Vj(b)
        ref = np.exp(-0.7 * ((x[:, None] - y[None]) ** 2).sum(-1)) @ b
        assert np.allclose(F.sum(axis=1, backend="cpu"), ref, rtol=1e-12), "wrong"
    print("ok", f"compiled={compile_count()}")
    """
)


def _gauss(d=3):
    rng = np.random.default_rng(0)
    x, y, b = rng.random((40, d)), rng.random((30, d)), rng.random((30, 1))
    F = (-kt.Vi(x).sqdist(kt.Vj(y)) * 0.7).exp() * kt.Vj(b)
    return F, np.exp(-0.7 * ((x[:, None] - y[None]) ** 2).sum(-1)) @ b


def _forget_process_state(monkeypatch):
    """No kernel in memory, no cache folder prepared, no plan declined or
    dispatched yet (restored after the test)."""
    monkeypatch.setattr(_library, "_loaded", {})
    monkeypatch.setattr(_cpu_backend, "_functions", {})
    monkeypatch.setattr(_cpu_backend, "_by_signature", {})
    monkeypatch.setattr(_cpu_backend, "_unstorable", {}, raising=False)
    monkeypatch.setattr(_dispatch, "_resolved", {})
    for name, value in (("_prepared", {}), ("_fallback", []), ("_warned", set()),
                        ("_unwritable", {})):
        monkeypatch.setattr(_cache, name, value, raising=False)
    monkeypatch.setattr(_dlopen, "_no_copy", set(), raising=False)


def _listing(root: Path) -> dict:
    """{relative path: (size, mtime)} of every file under ``root``."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def _cc_wrapper(tmp_path: Path, *, pause_on_kernels: bool = False) -> tuple[Path, Path]:
    """A ``$CC`` that logs each run's arguments (and, with ``pause_on_kernels``,
    touches ``started`` and sleeps before compiling a kernel), then runs the
    compiler in use (``zig cc`` where there is no system one): (wrapper, log)."""
    log, started = tmp_path / "cc.log", tmp_path / "started"
    pause = (f'case "$*" in *"/cpu/"*) touch {started}; sleep 60;; esac\n'
             if pause_on_kernels else "")
    wrapper = tmp_path / "cc-logging"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {log}\n{pause}'
                       f'exec {shlex.join(find_compiler().argv)} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper, log


def _compiles(log: Path) -> list[str]:
    """The logged compiler runs other than ``--version`` (probes and kernels).
    Not counted either: ``zig cc`` asking ``$CC`` (this wrapper) for the
    system's include folders, ``-E -Wp,-v -xc /dev/null``, as it does on its
    own when run."""
    if not log.exists():
        return []
    own = ("--version", "-E -Wp,-v -xc /dev/null")
    return [line for line in log.read_text().splitlines() if line not in own]


def _run(code_args, env, timeout=180):
    return subprocess.run([sys.executable, "-c", _CHILD, *map(str, code_args)], env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def _mount(*args):
    """Run ``mount`` (skip the test, saying why, where it is not permitted)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs or a read-only bind needs root and mount(8)")
    out = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        pytest.skip(f"mount {' '.join(args)} is not permitted here: {out.stderr.strip()}")


@pytest.fixture
def mounts():
    """Mount points to unmount after the test (innermost first)."""
    points: list[Path] = []
    yield points
    for point in reversed(points):
        subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)


# -- simulated file-system states ------------------------------------------------
def _simulate(monkeypatch, root: Path, code: int):
    """Under ``root``: with ``EROFS``, every creation, write, rename, removal
    and mode change fails; with ``ENOSPC``, files are created but their
    writes fail (the descriptor is /dev/full's), as on a full disk."""
    if code == errno.ENOSPC and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here to simulate a full disk with")
    inside = str(root) + os.sep

    def under(path) -> bool:
        return isinstance(path, (str, os.PathLike)) and os.path.abspath(
            os.fsdecode(path)).startswith(inside)

    real_open = os.open
    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

    def fake_open(path, flags, mode=0o777, *, dir_fd=None):
        if dir_fd is None and under(path) and flags & writing:
            if code == errno.EROFS:
                raise OSError(code, os.strerror(code), os.fsdecode(path))
            os.close(real_open(path, flags, mode))
            return real_open("/dev/full", os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", fake_open)
    read_only = ["replace", "rename", "unlink", "chmod", "utime", "rmdir", "mkdir"]
    failing = read_only if code == errno.EROFS else []
    for name in failing:
        real = getattr(os, name)

        def fake(path, *args, _real=real, **kwargs):
            if under(path) and not kwargs.get("dir_fd"):
                raise OSError(code, os.strerror(code), os.fsdecode(path))
            return _real(path, *args, **kwargs)

        monkeypatch.setattr(os, name, fake)
    real_fchmod = os.fchmod

    def fake_fchmod(fd, mode):
        if code == errno.EROFS and under(os.readlink(f"/proc/self/fd/{fd}")):
            raise OSError(code, os.strerror(code))
        return real_fchmod(fd, mode)

    monkeypatch.setattr(os, "fchmod", fake_fchmod)


#: The kernels of the warm cache (the Gaussian product at these D).
WARM = (3, 5)


@pytest.fixture(scope="module")
def warm_template(tmp_path_factory):
    """A cache folder holding the kernels of ``_gauss(d)`` for d in WARM and
    the compiler's record, built once for the module (each test gets a copy)."""
    root = tmp_path_factory.mktemp("warm-template") / "warm"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELTOOLS_CACHE_DIR", str(root))
        _forget_process_state(mp)
        find_compiler.cache_clear()  # its record too
        try:
            for d in WARM:
                F, ref = _gauss(d)
                np.testing.assert_allclose(F.sum(axis=1, backend="cpu"), ref,
                                           rtol=1e-12)
        finally:
            find_compiler.cache_clear()
    assert len(list((root / "cpu").glob("*.so"))) == len(WARM)
    assert list(root.glob("compiler-*.json"))
    return root


@pytest.fixture
def warm(warm_template, tmp_path, monkeypatch):
    """A copy of ``warm_template`` (folders and files with their modes, the
    same owner: a cache as its process left it), and a process that has not
    seen it yet."""
    root = tmp_path / "warm"
    shutil.copytree(warm_template, root)
    monkeypatch.setenv("KERNELTOOLS_CACHE_DIR", str(root))
    _forget_process_state(monkeypatch)
    find_compiler.cache_clear()
    yield root
    find_compiler.cache_clear()


def _cache_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught
            if issubclass(w.category, exceptions.CacheWarning)]


@pytest.mark.parametrize("code", [errno.EROFS, errno.ENOSPC], ids=["read-only", "full"])
def test_warm_cache_that_cannot_be_written_is_used_as_it_is(warm, monkeypatch, code):
    """Simulated read-only or full disk: the cached kernels and the compiler's
    record are used (no compile, no probe, no warning), nothing is written;
    the two kernels, loaded from memory, are told apart."""
    before = _listing(warm)
    _simulate(monkeypatch, warm, code)
    compiles, probes = _cpu_backend.compile_count(), _compiler.probe_count()
    from_memory = len(_dlopen._memfds)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for d in WARM:
            F, ref = _gauss(d)
            np.testing.assert_allclose(F.sum(axis=1, backend="cpu"), ref, rtol=1e-12)
    assert _cpu_backend.compile_count() == compiles, "a cached kernel was rebuilt"
    assert len(_dlopen._memfds) == from_memory + len(WARM)
    assert _compiler.probe_count() == probes, "the compiler's record was not read"
    assert not _cache_warnings(caught)
    monkeypatch.undo()
    assert _listing(warm) == before


@pytest.mark.parametrize("code", [errno.EROFS, errno.ENOSPC], ids=["read-only", "full"])
def test_new_kernel_that_cannot_be_stored_goes_to_a_private_cache(warm, monkeypatch,
                                                                  code):
    """Simulated: two new kernels compile into a private temporary folder with
    one warning naming the folder, the reason and the fix; no file is left
    half-written in the folder; the warm kernel is still loaded from it."""
    before = _listing(warm)
    _simulate(monkeypatch, warm, code)
    compiles = _cpu_backend.compile_count()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for d in (2, 4, 3):
            F, ref = _gauss(d)
            np.testing.assert_allclose(F.sum(axis=1, backend="cpu"), ref, rtol=1e-12)
    assert _cpu_backend.compile_count() == compiles + 2
    (message,) = _cache_warnings(caught)
    assert str(warm) in message and os.strerror(code) in message
    assert "KERNELTOOLS_CACHE_DIR" in message
    # said at the user's line, not at a line of kerneltools
    assert {w.filename for w in caught} == {__file__}
    private = kt.cache_dir()
    assert private != warm and len(list((private / "cpu").glob("*.so"))) == 2
    monkeypatch.undo()
    assert _listing(warm) == before, "a file was left in the unwritable folder"


def test_compile_refused_by_a_nearly_full_disk_goes_to_the_private_cache(
        warm, monkeypatch):
    """The source fits but the compiler's output does not (its message is
    strerror's): the kernel is compiled again in the private cache, with one
    warning; no CompileError, nothing partial left in the folder."""
    real = _compiler.Compiler.compile

    def compile_(self, source_path, output_path, **kwargs):
        if str(warm) in source_path:
            return subprocess.CompletedProcess(
                [], 1, "", "/usr/bin/ld: final link failed: No space left on device\n")
        return real(self, source_path, output_path, **kwargs)

    monkeypatch.setattr(_compiler.Compiler, "compile", compile_)
    compiles = _cpu_backend.compile_count()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        F, ref = _gauss(2)
        np.testing.assert_allclose(F.sum(axis=1, backend="cpu"), ref, rtol=1e-12)
    assert _cpu_backend.compile_count() == compiles + 2
    (message,) = _cache_warnings(caught)
    assert str(warm) in message and "No space left on device" in message
    assert not [p.name for p in (warm / "cpu").iterdir() if p.name.startswith(".tmp-")]


def test_tampered_entry_of_a_read_only_cache_is_not_loaded(warm, monkeypatch):
    """Read-only is no licence to trust: bytes that do not match the recorded
    digest are rebuilt (into the private cache), never loaded."""
    for so in (warm / "cpu").glob("*.so"):
        data = bytearray(so.read_bytes())
        data[-1] ^= 0xFF
        so.write_bytes(bytes(data))
    _simulate(monkeypatch, warm, errno.EROFS)
    compiles = _cpu_backend.compile_count()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        F, ref = _gauss()
        np.testing.assert_allclose(F.sum(axis=1, backend="cpu"), ref, rtol=1e-12)
    assert _cpu_backend.compile_count() == compiles + 1
    assert len(_cache_warnings(caught)) == 1


def test_nothing_can_be_stored_anywhere(warm, monkeypatch, tmp_path):
    """The folder full and no private folder possible (the temporary folder
    is full too): ``auto`` runs a new kernel's reduction on NumPy, with a
    warning that says why; ``backend='cpu'`` raises, naming the folder and the
    fix; the warm kernel still runs compiled."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    _simulate(monkeypatch, warm, errno.ENOSPC)
    monkeypatch.setattr(os, "mkdir", _failing(os.mkdir, scratch, errno.ENOSPC))
    compiles = _cpu_backend.compile_count()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        F, ref = _gauss(2)
        np.testing.assert_allclose(F.sum(axis=1), ref, rtol=1e-12)
        F, ref = _gauss(3)
        np.testing.assert_allclose(F.sum(axis=1, backend="cpu"), ref, rtol=1e-12)
        with pytest.raises(exceptions.BackendUnavailableError) as info:
            _gauss(6)[0].sum(axis=1, backend="cpu")
    assert _cpu_backend.compile_count() == compiles
    assert str(warm) in str(info.value) and "KERNELTOOLS_CACHE_DIR" in str(info.value)
    fallback = [str(w.message) for w in caught
                if issubclass(w.category, exceptions.BackendFallbackWarning)]
    assert fallback and "NumPy" in fallback[0] and str(warm) in fallback[0]


def test_radius_search_runs_on_numpy_where_its_kernel_cannot_be_stored(
        warm, monkeypatch, tmp_path):
    """``radius_csr`` (auto) gives NumPy's answer where its kernel can be
    stored nowhere; ``backend='cpu'`` raises, saying why."""
    from kerneltools import ranges as kr
    from kerneltools.backend.cpu import _radius

    monkeypatch.setattr(_radius, "_loaded", {})
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    _simulate(monkeypatch, warm, errno.ENOSPC)
    monkeypatch.setattr(os, "mkdir", _failing(os.mkdir, scratch, errno.ENOSPC))
    rng = np.random.default_rng(1)
    x, y = rng.random((50, 2)), rng.random((60, 2))
    lab_x, lab_y = kr.grid_cluster(x, 0.3), kr.grid_cluster(y, 0.3)
    cx, cy = kr.cluster_centroids(x, lab_x), kr.cluster_centroids(y, lab_y)
    rx, ry = kr.cluster_radii(x, lab_x, cx), kr.cluster_radii(y, lab_y, cy)
    bs = kr.block_sparsity(lab_x, lab_y, kr.distance_mask(cx, rx, cy, ry, 0.2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", exceptions.CacheWarning)
        got = kr.radius_csr(x, y, 0.04, bs, backend="auto")
        with pytest.raises(exceptions.BackendUnavailableError, match="KERNELTOOLS_CACHE"):
            kr.radius_csr(x, y, 0.04, bs, backend="cpu")
    ref = kr.radius_csr(x, y, 0.04, bs, backend="numpy")
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(a, b)


def _failing(real, root: Path, code: int):
    def fake(path, *args, **kwargs):
        if os.path.abspath(os.fsdecode(path)).startswith(str(root)):
            raise OSError(code, os.strerror(code), os.fsdecode(path))
        return real(path, *args, **kwargs)

    return fake


def test_compiler_probe_that_cannot_write_says_where_and_how_to_fix(
        tmp_path, monkeypatch):
    """A probe (no record in the cache) in a read-only temporary folder: no
    bare OSError, but no compiler, with the folder, the reason and the fix
    (so that ``auto`` runs on NumPy)."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("KERNELTOOLS_CACHE_DIR", str(tmp_path / "empty-cache"))
    _forget_process_state(monkeypatch)
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    _simulate(monkeypatch, scratch, errno.EROFS)
    find_compiler.cache_clear()
    try:
        comp = find_compiler()
    finally:
        find_compiler.cache_clear()
    assert not comp.ok
    assert str(scratch) in comp.reason and os.strerror(errno.EROFS) in comp.reason
    assert "TMPDIR" in comp.reason


# -- real file systems -----------------------------------------------------------
def test_warm_cache_on_a_read_only_mount(tmp_path, mounts):
    """A cache warmed by one process, then mounted read-only (an image layer,
    a shared cache): a new process loads it with no compiler run but
    ``--version`` and no warning; a new kernel goes to a private cache with
    one warning."""
    wrapper, log = _cc_wrapper(tmp_path)
    folder = tmp_path / "cache"
    env = dict(os.environ, CC=str(wrapper), KERNELTOOLS_CACHE_DIR=str(folder))
    first = _run([3], env)
    assert first.stdout.split() == ["ok", "compiled=1"], first.stderr
    assert _compiles(log)
    _mount("--bind", str(folder), str(folder))
    mounts.append(folder)
    _mount("-o", "remount,ro,bind", str(folder))
    log.unlink()
    second = _run([3], env)
    assert second.stdout.split() == ["ok", "compiled=0"], second.stderr
    assert _compiles(log) == [] and "Warning" not in second.stderr
    third = _run([3, 2], env)
    assert third.stdout.split() == ["ok", "compiled=1"], third.stderr
    assert third.stderr.count("CacheWarning") == 1
    assert str(folder) in third.stderr and os.strerror(errno.EROFS) in third.stderr


def test_warm_cache_on_a_full_disk(tmp_path, mounts):
    """A tmpfs of 4 MB holding a warm cache, then filled: the cached kernel
    runs (no compile, no error); a new one goes to a private cache with one
    warning; nothing is left behind in the full folder."""
    disk = tmp_path / "disk"
    disk.mkdir()
    _mount("-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(disk))
    mounts.append(disk)
    wrapper, log = _cc_wrapper(tmp_path)
    folder = disk / "cache"
    env = dict(os.environ, CC=str(wrapper), KERNELTOOLS_CACHE_DIR=str(folder))
    first = _run([3], env)
    assert first.stdout.split() == ["ok", "compiled=1"], first.stderr
    with open(disk / "filler", "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    before = _listing(folder)
    log.unlink()
    second = _run([3], env)
    assert second.stdout.split() == ["ok", "compiled=0"], second.stderr
    assert _compiles(log) == [] and "Warning" not in second.stderr
    third = _run([3, 2], env)
    assert third.stdout.split() == ["ok", "compiled=1"], third.stderr
    assert third.stderr.count("CacheWarning") == 1
    assert str(folder) in third.stderr and os.strerror(errno.ENOSPC) in third.stderr
    assert _listing(folder) == before


# -- interrupted compiles ----------------------------------------------------------
@pytest.mark.parametrize("how", ["kill -9", "Ctrl-C"])
def test_interrupted_compile_leaves_the_cache_usable(tmp_path, how):
    """A process killed (SIGKILL to its whole group) or interrupted (SIGINT)
    while its kernel compiles: no kernel file is left under its final name;
    after Ctrl-C not even a temporary one; the next process compiles once
    and computes right."""
    wrapper, _ = _cc_wrapper(tmp_path, pause_on_kernels=True)
    folder = tmp_path / "cache"
    env = dict(os.environ, CC=str(wrapper), KERNELTOOLS_CACHE_DIR=str(folder))
    # The child installs Python's SIGINT handler itself: a pytest run in the
    # background by a non-interactive shell (``.ci/run ... &``) ignores SIGINT,
    # and its children inherit that (as in tests/test_processes.py).
    handler = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)"
    child = subprocess.Popen([sys.executable, "-c", handler + _CHILD, "3"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "started").exists():
            assert child.poll() is None, child.communicate()[1].decode()
            assert time.monotonic() < deadline, "the compile never started"
            time.sleep(0.05)
        if how == "kill -9":
            os.killpg(child.pid, signal.SIGKILL)
        else:
            os.kill(child.pid, signal.SIGINT)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        try:  # the wrapper's sleep, orphaned
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if how == "Ctrl-C":
        assert b"KeyboardInterrupt" in err, err.decode()
    names = [p.name for p in (folder / "cpu").iterdir()]
    final = [n for n in names if not n.startswith(".tmp-")]
    assert not [n for n in final if n.endswith((".so", ".sha256"))], names
    if how == "Ctrl-C":
        assert not [n for n in names if n.startswith(".tmp-")], names
    env["CC"] = str(_cc_wrapper(tmp_path)[0])  # (the same, without the pause)
    again = _run([3], env)
    assert again.stdout.split() == ["ok", "compiled=1"], again.stderr


# -- the CUDA backend: CuPy's disk cache ---------------------------------------------
def test_cuda_kernels_compile_in_memory_where_cupys_cache_refuses_them(monkeypatch):
    """A stand-in for CuPy whose disk cache is full: the CUDA backend compiles
    its kernels in memory (``CUPY_CACHE_IN_MEMORY`` for its compiles only),
    with one warning naming CuPy's folder, the reason and the fix."""
    import types

    from kerneltools.backend.cuda import _backend as _cuda_backend

    compiled = []

    class RawModule:
        def __init__(self, code, options):
            if os.environ.get("CUPY_CACHE_IN_MEMORY") != "1":
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self.code = code

        def get_function(self, name):
            compiled.append(self.code)
            return (name, self.code)

    compiler = types.SimpleNamespace(CompileException=type("CompileException",
                                                           (Exception,), {}),
                                     get_cache_dir=lambda: "/cupy/kernel_cache")
    fake = types.SimpleNamespace(RawModule=RawModule,
                                 cuda=types.SimpleNamespace(compiler=compiler))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(_cuda_backend, "_kernels", {})
    monkeypatch.setattr(_cuda_backend, "_in_memory", [False], raising=False)
    monkeypatch.delenv("CUPY_CACHE_IN_MEMORY", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for key in ("a" * 40, "b" * 40):
            assert _cuda_backend._compiled(0, key, f"// {key}") == ("kt_kernel",
                                                                    f"// {key}")
    assert len(compiled) == 2 and "CUPY_CACHE_IN_MEMORY" not in os.environ
    (message,) = _cache_warnings(caught)
    assert "/cupy/kernel_cache" in message and os.strerror(errno.ENOSPC) in message
    assert "CUPY_CACHE_DIR" in message


# -- the command line on a read-only cache -------------------------------------------
def test_clear_cache_on_a_read_only_folder_says_so(warm, monkeypatch, capsys):
    """``clear-cache`` that can delete nothing fails (exit status 1) with a
    message naming the folder, the reason and the fix; it does not claim
    to have cleared it."""
    from kerneltools.__main__ import main

    _simulate(monkeypatch, warm, errno.EROFS)
    assert main(["clear-cache"]) == 1
    out, err = capsys.readouterr()
    assert "cleared" not in out
    assert str(warm) in err and os.strerror(errno.EROFS) in err
    assert "read-write" in err
    monkeypatch.undo()
    assert list((warm / "cpu").glob("*.so"))


def test_info_says_the_cache_folder_cannot_take_new_kernels(warm, monkeypatch):
    """``info`` reports a read-only or full file system under the folder
    (found with statvfs, without a write)."""
    from kerneltools._info import info

    real = os.statvfs

    class Full:
        def __init__(self, path):
            st = real(path)
            self.f_flag, self.f_frsize, self.f_bavail = st.f_flag, st.f_frsize, 3

    text = info(file=io.StringIO())
    assert "temporary folder" not in text
    monkeypatch.setattr(os, "statvfs", Full)
    text = info(file=io.StringIO())
    line = next(x for x in text.splitlines() if x.startswith("kernel cache:"))
    assert str(warm) in line and "disk is full" in line and "temporary folder" in line
