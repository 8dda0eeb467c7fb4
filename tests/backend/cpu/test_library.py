"""Building the generated C: compiled once and found again (in memory, in
the kernel cache, by another process), the cache's directory, a damaged
entry rebuilt, a compiler that fails or is missing
(``kerneltools.backend.cpu._library``: one function returns a verified,
loaded library for a source, compiling it if needed)."""

import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import kerneltools as kt
from kerneltools.backend.cpu import _backend as _cpu_backend
from kerneltools.backend.cpu._compiler import find_compiler
from kerneltools.exceptions import CompileError

pytestmark = pytest.mark.skipif(
    not find_compiler().ok, reason=f"no C compiler: {find_compiler().reason}"
)


def _gauss(n=50, m=40, d=3, dtype=np.float64, gamma=0.5, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, d)).astype(dtype)
    y = rng.random((m, d)).astype(dtype)
    b = rng.random((m, 2)).astype(dtype)
    K = (-kt.Vi(x).sqdist(kt.Vj(y)) * gamma).exp()
    dense = np.exp(-gamma * ((x[:, None].astype(float) - y[None]) ** 2).sum(-1)) @ b
    return K, b, dense


_CHILD = textwrap.dedent(
    """
    import sys, numpy as np, kerneltools as kt
    x = np.linspace(0, 1, 300).reshape(100, 3)
    K = (-kt.Vi(x).sqdist(kt.Vj(x)) * 1.7).exp().cos()
    out = K.sum(axis=1, backend="cpu")
    dense = np.cos(np.exp(-1.7 * ((x[:, None] - x[None]) ** 2).sum(-1))).sum(1)
    assert np.allclose(out[:, 0], dense, rtol=1e-12), "wrong result"
    from kerneltools.backend.cpu._backend import compile_count
    print("ok", f"compiled={compile_count()}")
    """
)


def test_float_parameter_change_reuses_the_kernel(cache):
    K1, b, dense1 = _gauss(gamma=0.5)
    np.testing.assert_allclose(K1.__matmul__(b), dense1, rtol=1e-12)
    before = _cpu_backend.compile_count()
    K2, b, dense2 = _gauss(gamma=3.0)
    np.testing.assert_allclose(K2 @ b, dense2, rtol=1e-12)
    assert _cpu_backend.compile_count() == before
    # A new structure does compile.
    K3 = (-kt.Vi(np.ones((3, 3))).sqdist(kt.Vj(np.ones((4, 3))))).exp().sin()
    K3.sum(axis=1, backend="cpu")
    assert _cpu_backend.compile_count() == before + 1


def test_cache_directory_is_private_and_reused(cache):
    K, b, dense = _gauss()
    np.testing.assert_allclose(K.sum(axis=1, backend="cpu"), K.sum(axis=1, backend="numpy"))
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    libs = list((cache / "cpu").glob("*.so"))
    assert len(libs) == 1
    assert not list((cache / "cpu").glob(".tmp-*"))
    n, size = kt.backend.cpu._cache.cache_size()
    assert n >= 2 and size > 0
    kt.clear_cache()
    assert not list((cache / "cpu").glob("*.so")) if (cache / "cpu").exists() else True


@pytest.fixture(scope="module")
def built_by_a_process(tmp_path_factory):
    """A cache folder in which a first process built the kernel of ``_CHILD``
    (once for the module: each test damages a copy)."""
    folder = tmp_path_factory.mktemp("built") / "cache"
    env = dict(os.environ, KERNELTOOLS_CACHE_DIR=str(folder))
    first = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                           text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["ok", "compiled=1"]
    return folder


@pytest.mark.parametrize("damage", ["truncate", "half", "garbage", "foreign"])
def test_damaged_cache_entry_is_rebuilt(cache, damage, built_by_a_process):
    """A later process finds a damaged entry, rebuilds it and computes right."""
    env = dict(os.environ, KERNELTOOLS_CACHE_DIR=str(cache))
    shutil.copytree(built_by_a_process, cache)  # modes kept: a trusted entry
    (so,) = (cache / "cpu").glob("*.so")
    if damage == "truncate":
        data = so.read_bytes()[:100]
    elif damage == "half":  # headers intact, segments cut: loading it would SIGBUS
        data = so.read_bytes()[: so.stat().st_size // 2]
    elif damage == "garbage":
        data = b"not a shared library" * 10
    else:  # a valid library of another formula under this name
        (-kt.Vi(np.ones((3, 2))).sqdist(kt.Vj(np.ones((4, 2))))).sum(axis=1, backend="cpu")
        foreign = [p for p in (cache / "cpu").glob("*.so") if p != so][0]
        data = foreign.read_bytes()
    so.write_bytes(data)
    second = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                            text=True, timeout=120)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split() == ["ok", "compiled=1"]
    assert len(list((cache / "cpu").glob("*.so"))) == (2 if damage == "foreign" else 1)


def test_two_processes_compiling_the_same_kernel(cache):
    env = dict(os.environ, KERNELTOOLS_CACHE_DIR=str(cache))
    procs = [
        subprocess.Popen([sys.executable, "-c", _CHILD], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out.split()[0] == "ok"
    assert len(list((cache / "cpu").glob("*.so"))) == 1
    assert not list((cache / "cpu").glob(".tmp-*"))


def test_compile_failure_raises_compile_error(cache, monkeypatch):
    comp = find_compiler()
    broken = type(comp)(**{**comp.__dict__, "flags": comp.flags + ["-DKT_BROKEN=("]})
    broken.flags.append("-include")
    broken.flags.append(str(cache.parent / "broken.h"))
    (cache.parent / "broken.h").write_text("this is not C;\n")
    monkeypatch.setattr(_cpu_backend, "find_compiler", lambda: broken)
    K, b, _ = _gauss()
    with pytest.raises(CompileError) as info:
        K.sum(axis=1, backend="cpu")
    assert info.value.log
    assert info.value.source_path and Path(info.value.source_path).exists()
    assert info.value.source_path in str(info.value)
    # Nothing half-written is left in the cache.
    assert not list((cache / "cpu").glob("*.so"))
    assert not list((cache / "cpu").glob(".tmp-*"))


def test_no_compiler(tmp_path):
    """CC pointing at a broken compiler: 'cpu' raises, 'auto' falls back once."""
    code = textwrap.dedent(
        """
        import warnings, numpy as np, kerneltools as kt
        from kerneltools.exceptions import BackendUnavailableError, BackendFallbackWarning
        x = np.random.rand(20, 2)
        K = kt.Vi(x).sqdist(kt.Vj(x))
        try:
            K.sum(axis=1, backend="cpu")
        except BackendUnavailableError as e:
            assert "compiler" in str(e) and "install" in str(e), str(e)
        else:
            raise AssertionError("no error")
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            a = K.sum(axis=1)
            K.sum(axis=1)
        assert sum(issubclass(x.category, BackendFallbackWarning) for x in w) == 1, w
        assert np.allclose(a[:, 0], ((x[:, None] - x[None]) ** 2).sum((1, 2)))
        print("ok")
        """
    )
    env = dict(os.environ, CC=str(tmp_path / "no-such-compiler"),
               KERNELTOOLS_CACHE_DIR=str(tmp_path / "c"), KERNELTOOLS_COMPILER="system")
    env.pop("KERNELTOOLS_BACKEND", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
