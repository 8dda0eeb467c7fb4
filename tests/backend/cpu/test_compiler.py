"""Choosing the C compiler (``_compiler.py``): the system's, else ``zig cc``
of the ziglang package; the sources each takes; OpenMP only where no other
family of runtime is loaded (``_openmp.py``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from kerneltools.backend.cpu import _compiler, _openmp
from kerneltools.backend.cpu._codegen import generate_source
from kerneltools.backend.cpu._compiler import find_compiler
from kerneltools.backend.cpu._zig import zig_binary

ZIG = zig_binary()[0]
needs_zig = pytest.mark.skipif(ZIG is None, reason=zig_binary()[1])


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """find_compiler() chooses again (and once more after the test), in a new cache."""
    monkeypatch.setenv("KERNELTOOLS_CACHE_DIR", str(tmp_path / "cache"))
    find_compiler.cache_clear()
    yield
    find_compiler.cache_clear()


def test_adapt_drops_the_pragmas_before_definitions_only():
    source = (
        "#pragma omp declare simd notinbranch\ndouble (exp)(double);\n"
        "#pragma omp declare simd notinbranch\nstatic inline float f(float x) {\n"
        "  return x;\n}\n"
    )
    clang = _compiler.Compiler(ok=True, simd_definitions=False)
    assert clang.adapt(source) == (
        "#pragma omp declare simd notinbranch\n"
        "double (exp)(double);\nstatic inline float f(float x) {\n"
        "  return x;\n}\n"
    )
    gcc = _compiler.Compiler(ok=True, simd_definitions=True)
    assert gcc.adapt(source) is source  # gcc's sources are the golden ones


def test_an_unknown_choice_is_refused_naming_the_choices(fresh, monkeypatch):
    monkeypatch.setenv("KERNELTOOLS_COMPILER", "tcc")
    comp = find_compiler()
    assert not comp.ok
    assert "KERNELTOOLS_COMPILER" in comp.reason and "zig" in comp.reason


@pytest.mark.parametrize(
    "name, family",
    [
        ("/x/scikit_learn.libs/libgomp-e985bcbb.so.1.0.0", "libgomp"),
        ("/usr/lib/libgomp.so.1", "libgomp"),
        ("/opt/lib/libomp.dylib", "libomp"),
        ("/opt/intel/libiomp5.so", "libiomp5"),
        ("/usr/lib/libgompx.so", None),
        ("/usr/lib/libm.so.6", None),
    ],
)
def test_openmp_runtimes_are_told_by_file_name(name, family):
    assert _openmp._family(name) == family


def test_the_runtime_family_follows_the_compiler():
    assert _openmp.runtime_family("cc (Debian 12.2.0-14) 12.2.0") == "libgomp"
    assert _openmp.runtime_family("Apple clang version 15.0.0") == "libomp"
    assert _openmp.runtime_family("Intel(R) oneAPI DPC++/C++ Compiler") == "libiomp5"


def test_no_second_family_of_openmp_runtime_is_loaded(fresh, monkeypatch):
    """Another family's runtime in the process: the kernels are built without
    OpenMP (on Python threads); the same family's: with it."""
    if not find_compiler().openmp:
        pytest.skip("the compiler has no OpenMP")
    mine = _openmp.runtime_family(find_compiler().version)
    other = "libomp" if mine != "libomp" else "libgomp"
    monkeypatch.setattr(_openmp, "loaded_families", lambda: {other: f"/x/{other}.so"})
    find_compiler.cache_clear()
    comp = find_compiler()
    assert (
        not comp.openmp
        and "-fopenmp" not in comp.flags
        and "-fopenmp-simd" in comp.flags
    )
    assert f"/x/{other}.so" in comp.openmp_note and comp.threads.startswith("Python")
    monkeypatch.setattr(_openmp, "loaded_families", lambda: {mine: f"/x/{mine}.so"})
    find_compiler.cache_clear()
    assert find_compiler().openmp


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc/self/maps"
)
def test_the_loaded_runtime_is_found_after_an_openmp_kernel_ran(tmp_path, monkeypatch):
    import kerneltools as kt

    if not find_compiler().openmp:
        pytest.skip("the compiler has no OpenMP")
    x = np.random.default_rng(0).random((50, 2))
    kt.Vi(x).sqdist(kt.Vj(x)).sum(axis=1, backend="cpu")
    assert _openmp.runtime_family(find_compiler().version) in _openmp.loaded_families()


# -- the zig road ------------------------------------------------------------------

#: A child process: the README example's product and the compare set's kinds
#: of reductions, saved for the parent to compare; prints the compiler it used.
_CHILD = textwrap.dedent(
    """
    import sys, numpy as np, kerneltools as kt
    from kerneltools.backend.cpu._compiler import find_compiler
    from kerneltools.backend.cpu import _library
    rng = np.random.default_rng(0)
    out = {}
    for dt in (np.float32, np.float64):
        x = rng.random((3001, 3)).astype(dt)
        b = rng.standard_normal((3001, 2)).astype(dt)
        K = (-kt.Vi(x).sqdist(kt.Vj(x)) * 4.0).exp()
        out["mv" + dt.__name__] = K @ b
        out["lse" + dt.__name__] = K.log().logsumexp(axis=0, backend="cpu")
        out["knn" + dt.__name__] = kt.Vi(x).sqdist(kt.Vj(x)).argKmin(5, axis=1)
        xw = rng.random((400, 40)).astype(dt)
        out["wide" + dt.__name__] = (-kt.Vi(xw).sqdist(kt.Vj(xw)) * 0.1).exp().sum(1)
    np.savez(sys.argv[1], **out)
    comp = find_compiler()
    print(comp.argv[-1], comp.openmp, _library.compile_count())
    """
)


def _run(code_args, env, timeout=600):
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, *code_args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out


def _hidden_env(tmp_path) -> dict:
    """The environment of a machine without a C compiler: PATH holds only
    Python's folder, CC is unset."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CC", "KERNELTOOLS_COMPILER", "KERNELTOOLS_BACKEND")
    }
    env["PATH"] = str(Path(sys.executable).parent)
    env["KERNELTOOLS_CACHE_DIR"] = str(tmp_path / "zig-cache")
    return env


@needs_zig
def test_without_a_system_compiler_zig_builds_the_kernels(tmp_path):
    """The same results as the system compiler's, within the documented
    tolerance (normwise 1e-5 in float32, 1e-13 in float64; the K nearest
    equal), and the C backend, not NumPy, ran."""
    env = _hidden_env(tmp_path)
    out = _run([str(tmp_path / "zig.npz")], env)
    name, openmp, compiled = out.stdout.split()
    assert name == "cc" and openmp == "False" and int(compiled) > 0
    info = subprocess.run(
        [sys.executable, "-m", "kerneltools", "info"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "zig cc" in info and "cc: not found" in info and "gcc: not found" in info
    assert "Python threads" in info and "default backend: cpu" in info
    if not any(shutil.which(cc) for cc in ("cc", "gcc", "clang")):
        return  # (.ci/nocc: no system compiler to compare with)
    sysenv = dict(
        env,
        PATH=os.environ["PATH"],
        KERNELTOOLS_COMPILER="system",
        KERNELTOOLS_CACHE_DIR=str(tmp_path / "system-cache"),
    )
    assert int(_run([str(tmp_path / "system.npz")], sysenv).stdout.split()[-1]) > 0
    zig, system = np.load(tmp_path / "zig.npz"), np.load(tmp_path / "system.npz")
    for key in system.files:
        a, b = zig[key], system[key]
        if a.dtype.kind == "i":
            np.testing.assert_array_equal(a, b)
        else:
            tol = 1e-5 if a.dtype == np.float32 else 1e-13
            assert np.abs(a - b).max() <= tol * np.abs(b).max(), key


@needs_zig
def test_zig_takes_the_sources_without_simd_definitions(fresh, monkeypatch):
    monkeypatch.setenv("KERNELTOOLS_COMPILER", "zig")
    comp = find_compiler()
    assert comp.ok and comp.command == (ZIG, "cc") and not comp.openmp
    assert not comp.simd_definitions  # (clang rejects them: see _compiler.py)
    record = json.loads(
        next(
            Path(os.environ["KERNELTOOLS_CACHE_DIR"]).glob("compiler-*.json")
        ).read_text()
    )
    assert record["path"] == ZIG and record["simd_definitions"] is False
    import kerneltools as kt

    x = np.random.default_rng(0).random((5, 3))
    plan = (-kt.Vi(x).sqdist(kt.Vj(x))).exp()._plan("Sum", 1)[0]
    source = generate_source(plan, key="k")
    assert "declare simd" in source
    assert "declare simd notinbranch\nstatic inline" not in comp.adapt(source)
