"""Fixtures of the CPU backend's tests: a kernel cache of a test's own, or of
its module's own."""

import pytest

from kerneltools.backend.cpu import _backend as _cpu_backend
from kerneltools.backend.cpu import _library


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh, empty kernel cache and no kernels loaded in memory."""
    monkeypatch.setenv("KERNELTOOLS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_library, "_loaded", {})
    monkeypatch.setattr(_cpu_backend, "_functions", {})
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def _module_cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("module-cache") / "cache"


@pytest.fixture
def shared_cache(_module_cache_dir, monkeypatch):
    """A kernel cache of this module's own, kept from test to test (so that
    tests and parametrizations that build the same kernel compile it once;
    for tests of results, not of the cache), and no kernels loaded in
    memory."""
    monkeypatch.setenv("KERNELTOOLS_CACHE_DIR", str(_module_cache_dir))
    monkeypatch.setattr(_library, "_loaded", {})
    monkeypatch.setattr(_cpu_backend, "_functions", {})
    return _module_cache_dir
