"""Run generated CUDA kernels on the CPU, to test their tile and index logic.

A small C++ shim (one OS thread per CUDA thread, ``std::barrier`` for
``__syncthreads``, blocks run one after the other) compiled with g++ around
the exact source the CUDA backend generates. The only rewrites: the dynamic
shared-memory declaration becomes a pointer to a host buffer, and the
``ex2.approx`` instruction becomes ``exp2f``. Not a GPU: no warps, no memory
model beyond the barrier; it checks indices, tiles, tails and the reductions'
updates, which are most of what can go wrong. Helper module (no ``test_``
prefix): tests import it.

Compilation cost: the C++20 headers (``<barrier>``, ``<thread>``) are parsed
once per work directory into a precompiled header, and kernels are built at
``-O0``: the shim runs a few thousand points, and ``-O1`` took 5 s per
kernel on the 800-wide unrolled formulas (-O0: under 1 s).
"""

from __future__ import annotations

import ctypes
import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from kerneltools.backend._cuda_backend import generate_cuda_source

#: The shim's headers, compiled once per work directory (see ``_header``).
_HEADERS = """#include <math.h>
#include <string.h>
#include <barrier>
#include <thread>
#include <vector>
"""

_PRELUDE = r"""
#define __global__
#define __device__
#define __forceinline__ inline
#define __align__(n) alignas(n)
struct dim3 { unsigned x = 1, y = 1, z = 1; };
static thread_local dim3 threadIdx;
static dim3 blockIdx, blockDim, gridDim;
static std::barrier<> *kt_barrier;
static unsigned char *kt_dyn_smem;
static inline void __syncthreads() { kt_barrier->arrive_and_wait(); }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline float rsqrt(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
"""

_LAUNCHER = r"""
extern "C" void kt_launch(long long grid, int block, long long smem, long long nx,
                          long long ny, void **args) {
  std::vector<unsigned char> buffer(smem + 64);
  kt_dyn_smem = buffer.data() + (64 - ((size_t)buffer.data() % 64)) % 64;
  blockDim.x = block;
  gridDim.x = (unsigned)grid;
  for (long long b = 0; b < grid; b++) {
    blockIdx.x = (unsigned)b;
    std::barrier<> bar(block);
    kt_barrier = &bar;
    std::vector<std::thread> threads;
    for (int t = 0; t < block; t++)
      threads.emplace_back([&, t] {
        threadIdx.x = t;
        kt_kernel(nx, ny, ${args});
        bar.arrive_and_drop();
      });
    for (auto &th : threads) th.join();
  }
}
"""


def available() -> tuple[bool, str]:
    gxx = shutil.which("g++")
    if gxx is None:
        return False, "g++ not found (the CPU shim for CUDA kernels needs a C++20 compiler)"
    return True, gxx


def _shim_source(source: str, n_args: int, outs: list[str]) -> str:
    body = source.replace(
        "extern __shared__ __align__(16) unsigned char kt_smem[];",
        "unsigned char *kt_smem = kt_dyn_smem;",
    ).replace(
        'asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));', "y = exp2f(x);"
    ).replace('extern "C" __global__', "static")
    args = [f"(const real_t *)args[{k}]" for k in range(n_args)]
    args += [f"({t} *)args[{n_args + k}]" for k, t in enumerate(outs)]
    return _PRELUDE + body + _LAUNCHER.replace("${args}", ", ".join(args))


#: g++ flags of every shim kernel (and of its precompiled header, which
#: g++ only uses when they match).
_FLAGS = ["-std=c++20", "-O0", "-shared", "-fPIC", "-pthread", "-Wno-unknown-pragmas"]

_built: dict = {}


def _header(workdir: Path) -> Path:
    """``workdir/kt_shim.h`` with the headers, precompiled beside it if g++ can.

    Without the ``.gch`` file (a failed build) g++ parses the header itself:
    slower, the same kernel."""
    header = workdir / "kt_shim.h"
    if not header.exists():
        tmp = workdir / "kt_shim.h.tmp"
        tmp.write_text(_HEADERS)
        subprocess.run(["g++", *_FLAGS, "-x", "c++-header", str(tmp), "-o",
                        str(workdir / "kt_shim.h.gch")], capture_output=True)
        tmp.rename(header)
    return header


def run(plan, args, tuning, workdir: Path):
    """Outputs of ``plan`` on ``args``, computed by its CUDA kernel on the CPU."""
    source, launch = generate_cuda_source(plan, key="shim", tuning=tuning)
    red = plan.red
    out_types = ["real_t"] * sum(not x for x in red.int_outputs)
    out_types += ["long long"] * sum(bool(x) for x in red.int_outputs)
    code = _shim_source(source, len(plan.arg_cats), out_types)
    key = hashlib.sha256(code.encode()).hexdigest()[:24]
    fn = _built.get(key)
    if fn is None:
        src = workdir / f"{key}.cpp"
        so = workdir / f"{key}.so"
        src.write_text(code)
        proc = subprocess.run(
            ["g++", *_FLAGS, "-include", str(_header(workdir)), str(src), "-o", str(so)],
            capture_output=True, text=True,
        )
        if proc.returncode:
            numbered = "\n".join(f"{k:5d} {line}" for k, line in enumerate(code.splitlines(), 1))
            raise AssertionError(f"g++ failed on the shimmed kernel:\n{proc.stderr[-4000:]}\n{numbered}")
        fn = ctypes.CDLL(str(so)).kt_launch
        fn.restype = None
        fn.argtypes = [ctypes.c_longlong, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong,
                       ctypes.c_longlong, ctypes.c_void_p]
        _built[key] = fn
    arrays = [np.ascontiguousarray(a, dtype=plan.dtype) for a in args]
    E = red.out_dim([f.dim for f in plan.formulas])
    shape = (plan.nx, plan.K, E) if red.uses_k else (plan.nx, E)
    outs = [np.full(shape, -7, dtype=np.int64 if x else plan.dtype) for x in red.int_outputs]
    ordered = [o for o, x in zip(outs, red.int_outputs) if not x]
    ordered += [o for o, x in zip(outs, red.int_outputs) if x]
    ptrs = (ctypes.c_void_p * (len(arrays) + len(ordered)))(
        *[a.ctypes.data for a in arrays], *[o.ctypes.data for o in ordered]
    )
    grid = -(-plan.nx // launch.rows_per_block)
    fn(grid, launch.block, launch.smem, plan.nx, plan.ny, ptrs)
    return tuple(outs)


def scratch_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="kt-cuda-shim-"))
