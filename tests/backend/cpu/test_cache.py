"""The kernel cache never runs code that kerneltools did not build for this user.

Loading checks the folders (owned by us, not writable by group or others),
the files (regular, owned by us, not group/other writable, opened without
following links) and the bytes (the digest recorded at build time) before
``dlopen``. ``clear-cache`` deletes only what kerneltools wrote; an unusable
folder falls back to a private temporary cache; ``info`` survives concurrent
compiles; the compiler probe is cached on disk with the same checks.

Tests run as root, so files and folders "owned by another user" are simulated
with ``os.chown`` to an unused uid.
"""

import io
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest

import kerneltools as kt
from kerneltools import exceptions
from kerneltools.backend.cpu import _cache, _compiler, _backend as _cpu_backend
from kerneltools.backend.cpu import _library
from kerneltools.backend.cpu._compiler import find_compiler

pytestmark = pytest.mark.skipif(
    not find_compiler().ok or not sys.platform.startswith("linux"),
    reason="needs a C compiler and Linux (ownership, O_NOFOLLOW, ELF)",
)

FOREIGN_UID = 12345


def _forget_process_state(monkeypatch):
    """No kernel loaded in memory, no cache folder prepared by this process."""
    monkeypatch.setattr(_library, "_loaded", {})
    monkeypatch.setattr(_cpu_backend, "_functions", {})
    monkeypatch.setattr(_cache, "_prepared", {}, raising=False)
    monkeypatch.setattr(_cache, "_fallback", [], raising=False)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh, empty kernel cache folder and a process that has seen none."""
    monkeypatch.setenv("KERNELTOOLS_CACHE_DIR", str(tmp_path / "cache"))
    _forget_process_state(monkeypatch)
    return tmp_path / "cache"


@pytest.fixture
def fresh_probe():
    """find_compiler() probes again (and once more after the test)."""
    find_compiler.cache_clear()
    yield
    find_compiler.cache_clear()


def _gauss(gamma=0.7, d=3, seed=0):
    """A Gaussian kernel product and its NumPy reference."""
    rng = np.random.default_rng(seed)
    x, y, b = rng.random((40, d)), rng.random((30, d)), rng.random((30, 1))
    F = (-kt.Vi(x).sqdist(kt.Vj(y)) * gamma).exp() * kt.Vj(b)
    ref = np.exp(-gamma * ((x[:, None] - y[None]) ** 2).sum(-1)) @ b
    return F, ref


def _check_on_cpu(F, ref):
    np.testing.assert_allclose(F.sum(axis=1, backend="cpu"), ref, rtol=1e-12)


@pytest.fixture(scope="module")
def genuine(tmp_path_factory):
    """The kernel of ``_gauss()`` built in a first cache folder: its key and folder.

    Built once for the module; tests copy its files into a *second* folder,
    whose key path is new to this process, so the dynamic loader has no
    handle for it: what a fresh process would load.
    """
    first = tmp_path_factory.mktemp("genuine") / "first"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KERNELTOOLS_CACHE_DIR", str(first))
        _forget_process_state(mp)
        _check_on_cpu(*_gauss())
    (so,) = (first / "cpu").glob("*.so")
    return so.stem, first / "cpu"


def _second_cache(tmp_path, monkeypatch, genuine=None, key=None):
    """A second cache folder (with a copy of the genuine entry's files)."""
    root = tmp_path / "second"
    (root / "cpu").mkdir(parents=True, mode=0o700)
    os.chmod(root, 0o700)
    if genuine is not None:
        for path in genuine.glob(f"{key}.*"):
            shutil.copy2(path, root / "cpu" / path.name)
    monkeypatch.setenv("KERNELTOOLS_CACHE_DIR", str(root))
    _forget_process_state(monkeypatch)
    return root / "cpu"


def _foreign_library(tmp_path, key, marker):
    """A shared library that claims ``key`` and whose constructor writes ``marker``."""
    src = tmp_path / "foreign.c"
    src.write_text(textwrap.dedent(f"""
        #include <stdio.h>
        __attribute__((constructor)) static void planted(void) {{
          FILE *f = fopen("{marker}", "w");
          if (f) {{ fputs("ran", f); fclose(f); }}
        }}
        const char *kt_key(void) {{ return "{key}"; }}
        long long kt_state_size(void) {{ return 0; }}
        void kt_kernel(void) {{}}
    """))
    out = tmp_path / "foreign.so"
    cmd = [*find_compiler().argv, "-shared", "-fPIC", str(src), "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True)
    return out


# -- 1. nothing foreign is ever loaded ----------------------------------------
@pytest.mark.parametrize("planted", ["symlink", "file"])
def test_foreign_library_at_the_key_path_never_runs(tmp_path, monkeypatch, planted,
                                                    genuine):
    """A library planted under the kernel's name (a link to it, or a copy with
    the genuine digest file beside it) is rebuilt: its constructor never runs."""
    key, genuine = genuine
    marker = tmp_path / "constructor-ran"
    foreign = _foreign_library(tmp_path, key, marker)
    folder = _second_cache(tmp_path, monkeypatch, genuine, key)
    target = folder / f"{key}.so"
    target.unlink()
    if planted == "symlink":
        target.symlink_to(foreign)
    else:
        shutil.copy2(foreign, target)
    before = _cpu_backend.compile_count()
    _check_on_cpu(*_gauss())
    assert not marker.exists(), "the planted library's constructor ran"
    assert _cpu_backend.compile_count() == before + 1
    assert not target.is_symlink() and target.stat().st_uid == os.geteuid()


@pytest.mark.parametrize(
    "damage", ["so_owner", "so_mode", "digest_owner", "digest_missing"]
)
def test_untrusted_entry_is_rebuilt(tmp_path, monkeypatch, damage, genuine):
    """Genuine bytes but another owner, group-writable, or no trusted digest:
    not loaded, rebuilt (and then loaded)."""
    key, genuine = genuine
    folder = _second_cache(tmp_path, monkeypatch, genuine, key)
    so, digest = folder / f"{key}.so", folder / f"{key}.sha256"
    if damage == "so_owner":
        os.chown(so, FOREIGN_UID, FOREIGN_UID)
    elif damage == "so_mode":
        os.chmod(so, 0o770)
    elif damage == "digest_owner":
        os.chown(digest, FOREIGN_UID, FOREIGN_UID)
    else:
        digest.unlink(missing_ok=True)
    before = _cpu_backend.compile_count()
    _check_on_cpu(*_gauss())
    assert _cpu_backend.compile_count() == before + 1
    for path in (so, digest):
        st = os.lstat(path)
        assert stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()
        assert not st.st_mode & 0o022
    # The rebuilt entry is trusted by the next lookup: no third compile.
    _forget_process_state(monkeypatch)
    _check_on_cpu(*_gauss())
    assert _cpu_backend.compile_count() == before + 1


_CHILD = textwrap.dedent(
    """
    import numpy as np, kerneltools as kt
    from kerneltools.backend.cpu._backend import compile_count
    rng = np.random.default_rng(0)
    x, y, b = rng.random((40, 3)), rng.random((30, 3)), rng.random((30, 1))
    F = (-kt.Vi(x).sqdist(kt.Vj(y)) * 0.7).exp() * kt.Vj(b)
    ref = np.exp(-0.7 * ((x[:, None] - y[None]) ** 2).sum(-1)) @ b
    assert np.allclose(F.sum(axis=1, backend="cpu"), ref, rtol=1e-12), "wrong result"
    print("ok", f"compiled={compile_count()}")
    """
)


def _text_section(data: bytes) -> tuple[int, int]:
    """(offset, size) of the .text section of a 64-bit little-endian ELF file."""

    def u(at, n):
        return int.from_bytes(data[at:at + n], "little")

    shoff, shentsize, shnum, shstrndx = u(40, 8), u(58, 2), u(60, 2), u(62, 2)
    headers = [shoff + k * shentsize for k in range(shnum)]
    names_at = u(headers[shstrndx] + 24, 8)
    for h in headers:
        name_at = names_at + u(h, 4)
        if data[name_at:name_at + 6] == b".text\0":
            return u(h + 24, 8), u(h + 32, 8)
    raise AssertionError("no .text section")


def test_corrupted_bytes_of_the_same_size_are_rebuilt(cache):
    """Code bytes overwritten with ud2 (same size, headers intact): loading
    them would die of SIGILL; the next process rebuilds and computes right."""
    env = dict(os.environ, KERNELTOOLS_CACHE_DIR=str(cache))
    first = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                           text=True, timeout=120)
    assert first.stdout.split() == ["ok", "compiled=1"], first.stderr
    (so,) = (cache / "cpu").glob("*.so")
    data = bytearray(so.read_bytes())
    offset, size = _text_section(bytes(data))
    data[offset:offset + size] = b"\x0f\x0b" * (size // 2) + b"\x90" * (size % 2)
    so.write_bytes(bytes(data))
    second = subprocess.run([sys.executable, "-c", _CHILD], env=env,
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, f"rc {second.returncode}: {second.stderr}"
    assert second.stdout.split() == ["ok", "compiled=1"]


@pytest.mark.parametrize("where", ["root", "cpu"])
def test_world_writable_cache_folder_is_refused(cache, where):
    folder = cache if where == "root" else cache / "cpu"
    folder.mkdir(parents=True)
    os.chmod(folder, 0o777)
    with pytest.raises(exceptions.CacheError) as info:
        _check_on_cpu(*_gauss())
    message = str(info.value)
    assert f"chmod 700 {folder}" in message and "KERNELTOOLS_CACHE_DIR" in message
    assert isinstance(info.value, exceptions.KernelToolsError)


def test_cache_folder_of_another_user_is_refused(cache):
    (cache / "cpu").mkdir(parents=True, mode=0o700)
    os.chown(cache / "cpu", FOREIGN_UID, FOREIGN_UID)
    with pytest.raises(exceptions.CacheError, match=str(cache / "cpu")):
        _check_on_cpu(*_gauss())


def test_default_cache_folder_is_repaired_to_owner_only(tmp_path, monkeypatch):
    """The default location (not the environment variable's) is ours to fix."""
    monkeypatch.delenv("KERNELTOOLS_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    _forget_process_state(monkeypatch)
    root = tmp_path / "xdg" / "kerneltools"
    (root / "cpu").mkdir(parents=True)
    os.chmod(root, 0o777)
    os.chmod(root / "cpu", 0o775)
    _check_on_cpu(*_gauss())
    assert kt.cache_dir() == root
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "cpu").stat().st_mode) == 0o700


def test_cache_folder_removed_while_running_is_made_again(cache, monkeypatch):
    """The folder is prepared once per process; if the user deletes it
    meanwhile, the next new kernel makes it again (owner-only, marked)."""
    _check_on_cpu(*_gauss())
    shutil.rmtree(cache)
    monkeypatch.setattr(_library, "_loaded", {})
    monkeypatch.setattr(_cpu_backend, "_functions", {})
    _check_on_cpu(*_gauss())
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert (cache / _cache.MARKER).is_file() and list((cache / "cpu").glob("*.so"))


# -- 2. clear-cache deletes only what kerneltools wrote -----------------------
def test_clear_cache_keeps_the_users_files(cache, capsys, fresh_probe):
    from kerneltools.__main__ import main

    _check_on_cpu(*_gauss())
    find_compiler()  # the probe's file too
    assert list(cache.glob("compiler-*.json"))
    (cache / "notes.txt").write_text("mine")
    (cache / "mine").mkdir()
    (cache / "mine" / "data.so").write_bytes(b"mine")
    (cache / "cpu" / "keep.so").write_bytes(b"mine")
    assert main(["clear-cache"]) == 0
    assert str(cache) in capsys.readouterr().out
    assert (cache / "notes.txt").read_text() == "mine"
    assert (cache / "mine" / "data.so").read_bytes() == b"mine"
    assert (cache / "cpu" / "keep.so").read_bytes() == b"mine"
    assert not [p for p in (cache / "cpu").iterdir() if p.name != "keep.so"]
    assert not list(cache.glob("compiler-*.json"))


def test_clear_cache_of_a_folder_kerneltools_did_not_create(tmp_path, monkeypatch):
    """No marker: only files with kerneltools' own kernel names go."""
    folder = tmp_path / "data"
    (folder / "cpu").mkdir(parents=True)
    ours = folder / "cpu" / ("0123456789abcdef" * 3)[:40]
    for suffix in (".so", ".c", ".sha256"):
        ours.with_suffix(suffix).write_bytes(b"kernel")
    for name in ("results.csv", ".tmp-draft.txt"):
        (folder / name).write_text("mine")
    (folder / "cpu" / "notes.c").write_text("mine")
    monkeypatch.setenv("KERNELTOOLS_CACHE_DIR", str(folder))
    kt.clear_cache()
    kept = sorted(p.name for p in folder.iterdir())
    assert kept == [".tmp-draft.txt", "cpu", "results.csv"]
    assert [p.name for p in (folder / "cpu").iterdir()] == ["notes.c"]


# -- 3. an unusable folder; leftovers of killed compiles ----------------------
def test_unwritable_cache_falls_back_to_a_private_temporary_cache(
    tmp_path, monkeypatch
):
    """Simulated: tests run as root, whom permission bits do not stop, so the
    configured folder is made impossible to create (it lies under a regular
    file). Two kernels, one warning naming the folder, right results."""
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("KERNELTOOLS_CACHE_DIR", str(blocker / "cache"))
    _forget_process_state(monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _check_on_cpu(*_gauss())
        _check_on_cpu(*_gauss(d=2))
    got = [w for w in caught if issubclass(w.category, exceptions.CacheWarning)]
    assert len(got) == 1, [str(w.message) for w in caught]
    assert str(blocker / "cache") in str(got[0].message)
    assert "KERNELTOOLS_CACHE_DIR" in str(got[0].message)
    assert not issubclass(exceptions.CacheWarning, exceptions.BackendFallbackWarning)
    private = kt.cache_dir()
    assert private != blocker / "cache"
    assert stat.S_IMODE(private.stat().st_mode) == 0o700
    assert len(list((private / "cpu").glob("*.so"))) == 2


def test_leftovers_of_killed_compiles_are_removed_at_first_use(cache, monkeypatch):
    """Temporary files older than ten minutes go; a fresh one may belong to a
    compile running in another process and stays."""
    kt.cache_dir()  # an earlier process made the cache
    _forget_process_state(monkeypatch)
    old = time.time() - 1200
    stale = [cache / "cpu" / ".tmp-a1b2.so", cache / "cpu" / ".tmp-c3d4.c",
             cache / ".tmp-e5f6.json"]
    for path in stale:
        path.write_bytes(b"half a kernel")
        os.utime(path, (old, old))
    fresh = cache / "cpu" / ".tmp-g7h8.so"
    fresh.write_bytes(b"being compiled")
    _check_on_cpu(*_gauss())
    assert not [p for p in stale if p.exists()]
    assert fresh.exists()


# -- 4. info while another process compiles -----------------------------------
def test_info_survives_files_vanishing_during_a_concurrent_compile(cache):
    from kerneltools._info import info

    (cache / "cpu").mkdir(parents=True, mode=0o700)
    stop = threading.Event()

    def compile_elsewhere():
        names = [cache / "cpu" / f".tmp-{k}.so" for k in range(30)]
        while not stop.is_set():
            for p in names:
                p.write_bytes(b"x" * 100)
            for p in names:
                p.unlink()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    churn = threading.Thread(target=compile_elsewhere)
    churn.start()
    try:
        for _ in range(400):
            n, size = _cache.cache_size()
            assert n >= 0 and size >= 0
        for _ in range(3):
            assert "kernel cache:" in info(file=io.StringIO())
    finally:
        stop.set()
        churn.join()
        sys.setswitchinterval(interval)


# -- 5. the compiler probe is cached on disk ----------------------------------
_PROBE_CHILD = textwrap.dedent(
    """
    import dataclasses, json
    from kerneltools.backend.cpu import _compiler
    comp = _compiler.find_compiler()
    runs = _compiler.probe_count()
    print(json.dumps({"runs": runs, "compiler": dataclasses.asdict(comp)}))
    """
)


def test_second_process_runs_no_probe_compile(cache):
    env = dict(os.environ, KERNELTOOLS_CACHE_DIR=str(cache))
    got = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", _PROBE_CHILD], env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        got.append(json.loads(out.stdout))
    assert got[0]["runs"] > 0 and got[1]["runs"] == 0
    assert got[0]["compiler"] == got[1]["compiler"]
    assert got[1]["compiler"]["ok"]


def test_probe_in_one_compile_finds_what_one_by_one_finds():
    """The one-compile probe (every feature at once) and the one-by-one probe
    agree; where every feature is present (this machine's gcc, OpenMP and
    libmvec), a new cache's first process runs one probe compile, not five."""
    command = tuple(find_compiler().argv)
    before = _compiler.probe_count()
    fast = _compiler._probe(command)
    fast_runs = _compiler.probe_count() - before
    assert fast == _compiler._probe_one_by_one(command)
    features, _ = fast
    if features["openmp"] and features["march_native"] and (
        features["vector_math"] or not _compiler._vector_math_platform()
    ):
        assert fast_runs == 1
    else:  # a compiler without one of them: the one-by-one probe ran after one try
        assert fast_runs > 1


@pytest.mark.parametrize(
    "damage", ["garbage", "other_owner", "symlink", "other_compiler"]
)
def test_damaged_probe_file_is_ignored_and_rewritten(
    cache, fresh_probe, damage, tmp_path
):
    first = find_compiler()
    (probe,) = cache.glob("compiler-*.json")
    text = probe.read_text()
    if damage == "garbage":
        probe.write_text("{ not json")
    elif damage == "other_owner":
        os.chown(probe, FOREIGN_UID, FOREIGN_UID)
    elif damage == "symlink":
        elsewhere = tmp_path / "probe.json"
        elsewhere.write_text(text)
        probe.unlink()
        probe.symlink_to(elsewhere)
    else:
        entry = json.loads(text)
        entry["key"] = "0" * len(entry["key"])
        probe.write_text(json.dumps(entry))
    find_compiler.cache_clear()
    before = _compiler.probe_count()
    assert find_compiler() == first
    assert _compiler.probe_count() > before
    st = os.lstat(probe)
    assert stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid()
    assert json.loads(probe.read_text()) == json.loads(text)


def test_folder_checks_without_posix_calls(tmp_path, monkeypatch):
    """Windows' path (no O_DIRECTORY, no owner ids), run here by hiding them:
    a folder passes, a link to one is refused unless the root's, and files
    are not judged by owner or mode."""
    from kerneltools.backend.cpu import _dlopen

    folder = tmp_path / "folder"
    folder.mkdir()
    (tmp_path / "link").symlink_to(folder)
    monkeypatch.delattr(os, "O_DIRECTORY")
    monkeypatch.delattr(os, "geteuid")
    _cache._check_folder(folder, repair=True)
    _cache._check_folder(tmp_path / "link", repair=False, follow=True)
    with pytest.raises(exceptions.CacheError, match="not a folder"):
        _cache._check_folder(tmp_path / "link", repair=False)
    assert _dlopen.problem(os.stat(folder)) is None
