"""kerneltools.jax on a GPU: the CUDA custom call (kerneltools/jax/_cuda.py,
backend/cuda/_xla.py, templates/xla_ffi_cuda.h).

Without a GPU: the handler compiles against jaxlib's FFI header; the kernel
that the JAX front end asks for compiles with NVRTC; and the whole path runs
under XLA on the CPU platform, the handler registered there with a stand-in
for ``cuLaunchKernel`` that runs the generated CUDA source through the C++
shim (tests/_support/_cuda_shim.py): the custom call's attributes, the
kernel's parameter block, the output order (float then index outputs, int64
indices as int32 pairs without x64), the batch loop of ``jax.vmap`` (one
launch per batch entry), launch errors, and gradients, all checked against
the NumPy backend. What the stand-in cannot check: the real driver call,
XLA's stream and the primary context (the gpu-marked test at the end, run
by asv_bench/gpu_session.sh when a GPU is lent).
"""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="the XLA custom call needs JAX (optional extra)")

import _cuda_shim
import jax.numpy as jnp

import kerneltools as kt
from kerneltools.backend.cpu import _xla
from kerneltools.backend.cuda._backend import generate_cuda_source
from kerneltools.backend.cuda._xla import CudaEntry
from kerneltools.jax import Vi, Vj, _cuda
from kerneltools.jax import _reduce as _jreduce

_HEADER = jax.ffi.include_dir() + "/xla/ffi/api/c_api.h"

#: A stand-in for cuLaunchKernel: ``f`` points at {shim's kt_launch, number
#: of buffers}; it checks the launch's shape and runs the shimmed kernel.
_FAKE = r"""
#include <stddef.h>
typedef void kt_launch_fn(long long, int, long long, long long, long long, void **);
typedef struct { kt_launch_fn *launch; long long nbuf; } kt_fake_fn;
long long kt_fake_launches = 0, kt_fake_streams = 0;
int kt_fake_launch(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                   unsigned by, unsigned bz, unsigned smem, void *stream,
                   void **params, void **extra) {
  kt_fake_fn *fn = (kt_fake_fn *)f;
  if (gy != 1 || gz != 1 || by != 1 || bz != 1 || extra != NULL) return 1;
  if (fn->nbuf < 0) return 999;  /* a launch that fails */
  if (stream != NULL) kt_fake_streams++;
  void *ptrs[64];
  for (long long k = 0; k < fn->nbuf; k++) ptrs[k] = *(void **)params[k + 2];
  fn->launch(gx, (int)bx, smem, *(long long *)params[0], *(long long *)params[1], ptrs);
  kt_fake_launches++;
  return 0;
}
"""


class _Fake(ctypes.Structure):
    _fields_ = [("launch", ctypes.c_void_p), ("nbuf", ctypes.c_longlong)]


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    ok, why = _cuda_shim.available()
    if not ok:
        pytest.skip(why)
    workdir = tmp_path_factory.mktemp("jax-cuda-shim")
    src, so = workdir / "fake.c", workdir / "libfake.so"
    src.write_text(_FAKE)
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", str(src), "-o", str(so)],
                   check=True, capture_output=True)
    return workdir, ctypes.CDLL(str(so))


@pytest.fixture
def on_shim(shim, monkeypatch):
    """The CUDA path of kerneltools.jax, its handler on the CPU platform and
    its kernels run by the shim; yields the launch counter."""
    workdir, fake = shim
    kept = []

    def entry(plan, device, fail=False):
        source, launch = generate_cuda_source(plan, key="shim",
                                              tuning=_cuda_shim.SHIM_TUNING)
        fn = _cuda_shim._kernel(plan, workdir, source)
        nbuf = -1 if fail else len(plan.arg_cats) + plan.red.n_outputs
        block = _Fake(ctypes.cast(fn, ctypes.c_void_p).value, nbuf)
        kept.append(block)
        return CudaEntry(ctypes.addressof(block),
                         ctypes.cast(fake.kt_fake_launch, ctypes.c_void_p).value,
                         launch.block, -(-plan.nx // launch.rows_per_block), launch.smem,
                         stream=False)

    monkeypatch.setattr(_cuda, "kernel_entry", entry)
    monkeypatch.setattr(_cuda, "register", lambda: _REGISTER("cpu"))
    monkeypatch.setattr(_jreduce, "cuda_device", lambda arrays: 0)
    monkeypatch.setattr(_jreduce, "_callback", _no_callback)
    counter = ctypes.c_longlong.in_dll(fake, "kt_fake_launches")
    counter.value = 0
    with jax.default_device(jax.devices("cpu")[0]):  # (a GPU machine too)
        yield counter, entry


_REGISTER = _cuda.register  # the real one, for the CPU platform here


def _no_callback(*args, **kwargs):
    raise AssertionError("the reduction went through jax.pure_callback")


def _data(n=45, m=71, d=3, e=2, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return (rng.random((n, d)).astype(dtype), rng.random((m, d)).astype(dtype),
            rng.random((m, e)).astype(dtype))


def test_cuda_handler_compiles_against_the_ffi_header():
    """The CUDA handler is host C: the CPU backend's compiler builds it
    against jaxlib's c_api.h; it exports the XLA_FFI_Handler symbol."""
    handler = _xla.ffi_handler(_HEADER, "cuda")
    assert ctypes.cast(handler, ctypes.c_void_p).value
    assert handler is _xla.ffi_handler(_HEADER, "cuda")  # built once
    assert handler is not _xla.ffi_handler(_HEADER, "cpu")


def test_the_kernel_jax_launches_compiles_with_nvrtc(monkeypatch):
    """The plan that the JAX front end hands the CUDA path compiles with
    NVRTC (as the backend compiles it on a GPU), without a GPU."""
    ok, why = _cuda_shim.nvrtc_status()
    if not ok:
        pytest.skip(why)
    from kerneltools.backend.cuda._nvrtc import nvrtc_compile

    plans = []

    def entry(plan, device):
        plans.append(plan)  # (and None: traced only, nothing runs)

    monkeypatch.setattr(_cuda, "kernel_entry", entry)
    monkeypatch.setattr(_jreduce, "cuda_device", lambda arrays: 0)
    x, y, b = (jnp.asarray(a) for a in _data())
    jax.eval_shape(lambda x, y, b: (-Vi(x).sqdist(Vj(y))).exp().matmul(
        b, backend="cuda"), x, y, b)
    assert len(plans) == 1
    source, _ = generate_cuda_source(plans[0], key="jax")
    result = nvrtc_compile(source, "sm_90")
    assert result.ok, result.log


def test_cuda_path_matches_numpy_on_the_cpu_stand_in(on_shim):
    """Gaussian K @ b, eager and jitted, through the CUDA custom call (the
    shim standing in for the GPU), against the NumPy backend."""
    counter, _ = on_shim
    x, y, b = _data()
    ref = (-kt.Vi(x).sqdist(kt.Vj(y))).exp().matmul(b, backend="numpy")

    def f(x, y, b):
        return (-Vi(x).sqdist(Vj(y))).exp().matmul(b, backend="cuda")

    out = f(jnp.asarray(x), jnp.asarray(y), jnp.asarray(b))
    np.testing.assert_allclose(np.asarray(out), ref, rtol=2e-5)
    assert counter.value == 1
    jitted = jax.jit(f)(jnp.asarray(x), jnp.asarray(y), jnp.asarray(b))
    np.testing.assert_array_equal(np.asarray(jitted), np.asarray(out))


def test_cuda_path_index_outputs_and_order(on_shim):
    """Min_ArgMin (a float and an index output, int64 in the kernel): both
    back in the reduction's order, the indices as int32 pairs without x64."""
    x, y, _ = _data(seed=1)
    D = kt.Vi(x).sqdist(kt.Vj(y))
    ref_min, ref_arg = D.min_argmin(axis=1, backend="numpy")
    got_min, got_arg = Vi(jnp.asarray(x)).sqdist(Vj(jnp.asarray(y))).min_argmin(
        axis=1, backend="cuda")
    np.testing.assert_allclose(np.asarray(got_min), ref_min, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(got_arg), ref_arg)
    assert np.asarray(got_arg).dtype == np.int32  # x64 off


def test_cuda_path_vmap_is_one_launch_per_batch_entry(on_shim):
    """jax.vmap maps onto the handler's batch loop: one launch per entry, an
    unmapped operand broadcast."""
    counter, _ = on_shim
    xs = np.stack([_data(seed=s)[0] for s in range(3)])
    _, y, b = _data()

    def f(x):
        return (-Vi(x).sqdist(Vj(jnp.asarray(y)))).exp().matmul(jnp.asarray(b),
                                                                  backend="cuda")

    out = jax.vmap(f)(jnp.asarray(xs))
    for s in range(3):
        ref = (-kt.Vi(xs[s]).sqdist(kt.Vj(y))).exp().matmul(b, backend="numpy")
        np.testing.assert_allclose(np.asarray(out[s]), ref, rtol=2e-5)
    assert counter.value == 3


def test_cuda_path_gradient(on_shim):
    """jax.grad through the CUDA path (the gradient reductions are CUDA
    custom calls too) against the dense jax.numpy gradient."""
    x, y, b = _data(n=20, m=30)

    def loss(x, dense=False):
        if dense:
            K = jnp.exp(-jnp.sum((x[:, None] - y[None]) ** 2, -1))
            return jnp.sum((K @ b) ** 2)
        K = (-Vi(x).sqdist(Vj(jnp.asarray(y)))).exp()
        return jnp.sum(K.matmul(jnp.asarray(b), backend="cuda") ** 2)

    got = jax.grad(loss)(jnp.asarray(x))
    want = jax.grad(lambda x: loss(x, dense=True))(jnp.asarray(x))
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4,
                               atol=1e-5)


def test_failed_launch_is_an_xla_error(on_shim, monkeypatch):
    """A launcher's error code comes back as an error of the call, with the
    CUresult, not a crash or a silent zero."""
    _, entry = on_shim
    monkeypatch.setattr(_cuda, "kernel_entry", lambda p, d: entry(p, d, fail=True))
    x, y, b = _data(seed=2)
    with pytest.raises(Exception, match="cuLaunchKernel failed \\(CUresult 999\\)"):
        out = (-Vi(jnp.asarray(x)).sqdist(Vj(jnp.asarray(y)))).exp().matmul(
            jnp.asarray(b), backend="cuda")
        np.asarray(out)


# ---------------------------------------------------------------------------
# On a GPU (asv_bench/gpu_session.sh)
# ---------------------------------------------------------------------------
def _jax_gpu() -> bool:
    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:
        return False


@pytest.mark.gpu
@pytest.mark.skipif(not _jax_gpu(), reason="no GPU device in JAX (jax[cuda] and a GPU)")
def test_gpu_arrays_run_the_cuda_custom_call(monkeypatch):
    """GPU arrays: the reduction, its gradient and vmap are CUDA custom
    calls on XLA's stream (no pure_callback), equal to the NumPy backend."""
    monkeypatch.setattr(_jreduce, "_callback", _no_callback)
    x, y, b = _data(n=3000, m=2000)
    dev = jax.devices("gpu")[0]
    xg, yg, bg = (jax.device_put(jnp.asarray(a), dev) for a in (x, y, b))
    ref = (-kt.Vi(x).sqdist(kt.Vj(y))).exp().matmul(b, backend="numpy")

    def f(x, y, b):
        return (-Vi(x).sqdist(Vj(y))).exp() @ b

    out = jax.jit(f)(xg, yg, bg)
    assert next(iter(out.devices())).platform == "gpu"
    np.testing.assert_allclose(np.asarray(out), ref, rtol=1e-4)
    np.testing.assert_allclose(np.asarray(f(xg, yg, bg)), ref, rtol=1e-4)
    g = jax.grad(lambda x: jnp.sum(f(x, yg, bg) ** 2))(xg)

    def dense(x):
        K = jnp.exp(-jnp.sum((x[:, None] - yg[None]) ** 2, -1))
        return jnp.sum((K @ bg) ** 2)

    np.testing.assert_allclose(np.asarray(g), np.asarray(jax.grad(dense)(xg)),
                               rtol=2e-3, atol=1e-3)
    outs = jax.vmap(lambda x: f(x, yg, bg))(jnp.stack([xg, xg + 1]))
    np.testing.assert_allclose(np.asarray(outs[0]), ref, rtol=1e-4)
