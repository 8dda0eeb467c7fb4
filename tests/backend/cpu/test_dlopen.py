"""A kernel cache that cannot map code (a ``noexec`` mount) still runs the
compiled kernels: loaded from memory, else from a private temporary folder,
with one warning (``_dlopen.py``). Made for real where ``mount`` is
permitted (root), and with a loader that refuses the folder everywhere."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import kerneltools as kt
from kerneltools.backend.cpu import _backend, _dlopen, _library
from kerneltools.backend.cpu._compiler import find_compiler
from kerneltools.exceptions import CacheWarning

pytestmark = pytest.mark.skipif(
    not find_compiler().ok, reason=f"no C compiler: {find_compiler().reason}"
)


@pytest.fixture
def noexec_cache(tmp_path, monkeypatch):
    """A fresh cache whose folder the loader refuses, as on a noexec mount."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("KERNELTOOLS_CACHE_DIR", str(cache))
    for module, name, empty in (
        (_library, "_loaded", {}),
        (_backend, "_functions", {}),
        (_backend, "_by_signature", {}),
        (_dlopen, "_no_copy", set()),
        (_dlopen, "_private", []),
    ):
        monkeypatch.setattr(module, name, empty)
    real = ctypes.CDLL

    def cdll(path, *args, **kwargs):
        if str(path).startswith(str(cache)):
            raise OSError(f"{path}: failed to map segment from shared object")
        return real(path, *args, **kwargs)

    class Loader:  # the ctypes of _dlopen, but for a CDLL that refuses the cache
        CDLL = staticmethod(cdll)

    monkeypatch.setattr(_dlopen, "ctypes", Loader)
    return cache


def _gauss(d: int, n=300):
    rng = np.random.default_rng(d)
    x, b = rng.random((n, d)), rng.random((n, 1))
    ref = np.exp(-0.5 * ((x[:, None] - x[None]) ** 2).sum(-1)) @ b
    return (-kt.Vi(x).sqdist(kt.Vj(x)) * 0.5).exp() @ b, ref


def _noexec_warnings(caught, cache):
    found = [w for w in caught if issubclass(w.category, CacheWarning)]
    assert all(
        str(cache) in str(w.message) and "noexec" in str(w.message) for w in found
    )
    return found


def test_noexec_cache_loads_from_memory_with_one_warning(noexec_cache):
    if not hasattr(os, "memfd_create"):
        pytest.skip("no memory files on this platform (the next test covers it)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for d in (2, 3):  # two kernels: one warning
            got, ref = _gauss(d)
            np.testing.assert_allclose(got, ref, rtol=1e-12)
    (warning,) = _noexec_warnings(caught, noexec_cache)
    assert "memory" in str(warning.message) and "KERNELTOOLS_CACHE_DIR" in str(
        warning.message
    )
    compiles = _library.compile_count()
    _library._loaded.clear()
    _backend._functions.clear()  # the warm cache, loaded again: no compile, no warning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got, ref = _gauss(3)
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    assert _library.compile_count() == compiles and not _noexec_warnings(
        caught, noexec_cache
    )


def test_noexec_cache_without_memory_files_loads_from_a_temporary_folder(
    noexec_cache, monkeypatch
):
    monkeypatch.delattr(os, "memfd_create", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got, ref = _gauss(2)
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    (warning,) = _noexec_warnings(caught, noexec_cache)
    assert "temporary folder" in str(warning.message)
    (folder,) = _dlopen._private
    assert not os.listdir(folder)  # the copies are unlinked once loaded (POSIX)


_CHILD = textwrap.dedent(
    """
    import numpy as np, kerneltools as kt
    from kerneltools.backend.cpu._library import compile_count
    rng = np.random.default_rng(0)
    x, b = rng.random((200, 3)), rng.random((200, 1))
    ref = np.exp(-0.5 * ((x[:, None] - x[None]) ** 2).sum(-1)) @ b
    got = (-kt.Vi(x).sqdist(kt.Vj(x)) * 0.5).exp() @ b
    assert np.allclose(got, ref, rtol=1e-12), "wrong"
    print("ok", f"compiled={compile_count()}")
    """
)


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="mounts a tmpfs (Linux)"
)
def test_noexec_mount_for_real(tmp_path):
    """The cache and the temporary folder on a tmpfs mounted noexec: the
    probe and the kernels load from memory; one warning per process."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    out = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "noexec,size=64m,mode=0700", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        pytest.skip(f"mount is not permitted here: {out.stderr.strip()}")
    try:
        (mnt / "tmp").mkdir(mode=0o700)
        env = dict(
            os.environ,
            KERNELTOOLS_CACHE_DIR=str(mnt / "cache"),
            TMPDIR=str(mnt / "tmp"),
            KERNELTOOLS_BACKEND="cpu",
        )
        for compiled in (True, False):  # a cold cache, then the warm one
            run = subprocess.run(
                [sys.executable, "-W", "always", "-c", _CHILD],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert run.returncode == 0, run.stderr[-3000:]
            assert run.stdout.startswith("ok")
            assert ("compiled=0" not in run.stdout) == compiled
            assert run.stderr.count("CacheWarning") == 1, run.stderr
            assert "noexec" in run.stderr and str(mnt / "cache") in run.stderr
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, check=False)
