"""The XLA custom call of the CPU backend (``_xla``), through kerneltools.jax:
which plans it serves, and kernels built without OpenMP, whose rows the
handler splits over threads of its own (results equal to the reference)."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the XLA custom call needs JAX (optional extra)")

import jax.numpy as jnp

import kerneltools as kt
from kerneltools.backend._plan import make_plan
from kerneltools.backend.cpu import _backend, _library, _xla
from kerneltools.backend.cpu._compiler import find_compiler
from kerneltools.jax import Vi, Vj


def _plan(formula, d):
    x = np.zeros((10, d), np.float32)
    F = formula(kt.Vi(x), kt.Vj(x))
    return make_plan([F.formula], "Sum", 1, 1, lambda n: x, np.float32, 10, 10)[0]


def test_plain_layout_only():
    """Narrow formulas are served; the dot-product micro-kernel's (D >= 16)
    and the many-column Sum's layouts are not (those run another way)."""
    assert _xla.plain_layout(_plan(lambda x, y: (-x.sqdist(y)).exp(), 3))
    assert not _xla.plain_layout(_plan(lambda x, y: (-x.sqdist(y)).exp(), 32))
    entry = _xla.kernel_entry(_plan(lambda x, y: (-x.sqdist(y)).exp(), 3))
    assert entry.address and entry.tj >= 32 and entry.state_size > 0


def test_wide_formulas_run_through_the_callback_and_agree():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((50, 32)), rng.standard_normal((40, 32))
    ref = (-kt.Vi(x).sqdist(kt.Vj(y)) / 32).exp().sum(axis=1, backend="numpy")
    with jax.enable_x64(True):
        got = (-Vi(jnp.asarray(x)).sqdist(Vj(jnp.asarray(y))) / 32).exp().sum(axis=1)
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-12)


def test_without_openmp_the_handler_splits_rows(tmp_path, monkeypatch):
    comp = find_compiler()
    if not comp.openmp:
        pytest.skip("the compiler has no OpenMP: the kernels are built without it anyway")
    plain = comp.without_openmp("a test")
    monkeypatch.setenv("KERNELTOOLS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    for module in (_backend, _library, _xla):
        monkeypatch.setattr(module, "find_compiler", lambda: plain)
    for module, name in ((_library, "_loaded"), (_backend, "_functions"),
                         (_backend, "_by_signature")):
        monkeypatch.setattr(module, name, {})
    entry = _xla.kernel_entry(_plan(lambda x, y: (-x.sqdist(y)).exp(), 3))
    assert entry.threads == 3
    rng = np.random.default_rng(1)
    x, y = rng.random((2_003, 3)), rng.random((1_001, 3))  # > 2^20 pairs, odd rows
    b = rng.standard_normal((1_001, 2))
    with jax.enable_x64(True):
        got = (-Vi(jnp.asarray(x)).sqdist(Vj(jnp.asarray(y)))).exp() @ jnp.asarray(b)
    ref = np.exp(-((x[:, None] - y[None]) ** 2).sum(-1)) @ b
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-10)
