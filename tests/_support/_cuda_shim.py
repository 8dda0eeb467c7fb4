"""Run generated CUDA kernels on the CPU, to test their tile and index logic.

A small C++ shim (one OS thread per CUDA thread, ``std::barrier`` for
``__syncthreads``, blocks run one after the other) compiled with g++ around
the exact source the CUDA backend generates. The only rewrites: the dynamic
shared-memory declaration becomes a pointer to a host buffer, and the
``ex2.approx`` instruction becomes ``exp2f``. Not a GPU: no warps, no memory
model beyond the barrier; it checks indices, tiles, tails and the reductions'
updates, which are most of what can go wrong. Helper module (no ``test_``
prefix): tests import it.

Compilation cost: the threads and the barrier (``<thread>``, ``<barrier>``,
slow to compile) live in a small runtime library built once per work
directory; each kernel's translation unit needs only ``<math.h>`` and is
built at ``-O0`` (the shim runs a few thousand points; ``-O1`` took 5 s per
kernel on the 800-wide unrolled formulas, ``-O0`` under 1 s), with the
prelude's C++ headers precompiled once (``_header``: 0.05 CPU s a kernel
instead of 0.2 for the small ones).
"""

from __future__ import annotations

import ctypes
import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from kerneltools.backend.cuda._backend import generate_cuda_source, ranges_tasks

#: The runtime: one OS thread per CUDA thread of a block, blocks one after
#: the other, ``kt_sync`` for ``__syncthreads``. Built once per work directory.
_RUNTIME = r"""
#include <barrier>
#include <thread>
#include <vector>
static std::barrier<> *kt_barrier;
extern "C" void kt_sync(void) { kt_barrier->arrive_and_wait(); }
extern "C" void kt_run(long long grid, int block,
                       void (*body)(unsigned, unsigned, void *), void *ctx) {
  for (long long b = 0; b < grid; b++) {
    std::barrier<> bar(block);
    kt_barrier = &bar;
    std::vector<std::thread> threads;
    for (int t = 0; t < block; t++)
      threads.emplace_back([&, t] {
        body((unsigned)b, (unsigned)t, ctx);
        bar.arrive_and_drop();
      });
    for (auto &th : threads) th.join();
  }
}
"""

_PRELUDE = r"""#include <math.h>
#include <stdlib.h>
#include <string.h>
#define __global__
#define __device__
#define __forceinline__ inline
#define __align__(n) alignas(n)
struct dim3 { unsigned x = 1, y = 1, z = 1; };
static thread_local dim3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
static unsigned char *kt_dyn_smem;
extern "C" void kt_sync(void);
extern "C" void kt_run(long long, int, void (*)(unsigned, unsigned, void *), void *);
static inline void __syncthreads() { kt_sync(); }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
static inline float rsqrt(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
"""

_LAUNCHER = r"""
struct kt_call { long long nx, ny; void **args; };
static void kt_body(unsigned b, unsigned t, void *ctx) {
  const kt_call *c = (const kt_call *)ctx;
  void **args = c->args;
  blockIdx.x = b;
  threadIdx.x = t;
  kt_kernel(${head}${args});
}
extern "C" void kt_launch(long long grid, int block, long long smem, long long nx,
                          long long ny, void **args) {
  unsigned char *buffer = (unsigned char *)malloc(smem + 64);
  kt_dyn_smem = buffer + (64 - ((size_t)buffer % 64)) % 64;
  blockDim.x = block;
  gridDim.x = (unsigned)grid;
  kt_call call = {nx, ny, args};
  kt_run(grid, block, kt_body, &call);
  free(buffer);
}
"""
#: The kernels' leading arguments: sizes (dense), or the block-sparse
#: kernel's tasks, intervals and index maps (the first four of ``args``).
_HEADS = {
    False: "c->nx, c->ny, ",
    True: "(const long long *)args[0], (const long long *)args[1], "
          "(const long long *)args[2], (const long long *)args[3], ",
}


def nvrtc_status() -> tuple[bool, str]:
    """(whether NVRTC loads here, why not): CUDA sources compile without a GPU."""
    from kerneltools.backend.cuda import _backend as _cuda_backend

    try:
        _cuda_backend.nvrtc()
        return True, ""
    except OSError as exc:
        return False, str(exc)


def available() -> tuple[bool, str]:
    gxx = shutil.which("g++")
    if gxx is None:
        return False, "g++ not found (the CPU shim for CUDA kernels needs a C++20 compiler)"
    return True, gxx


def _shim_source(source: str, n_args: int, outs: list[str], ranges: bool = False) -> str:
    body = source.replace(
        "extern __shared__ __align__(16) unsigned char kt_smem[];",
        "unsigned char *kt_smem = kt_dyn_smem;",
    ).replace(
        'asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));', "y = exp2f(x);"
    ).replace('extern "C" __global__', "static")
    first = 4 if ranges else 0
    args = [f"(const real_t *)args[{first + k}]" for k in range(n_args)]
    args += [f"({t} *)args[{first + n_args + k}]" for k, t in enumerate(outs)]
    return _PRELUDE + body + _LAUNCHER.replace("${head}", _HEADS[ranges]).replace(
        "${args}", ", ".join(args))


#: g++ flags of the runtime and of every kernel.
_FLAGS = ["-std=c++20", "-O0", "-shared", "-fPIC", "-pthread", "-Wno-unknown-pragmas"]

_built: dict = {}


#: The runtime library this process built first (in the work directory of
#: the module that needed it first: pytest keeps it for the session), shared
#: by every later work directory: a C++20 ``<thread>``/``<barrier>`` build
#: per module cost 0.8 CPU s eleven times in the suite.
_runtime_built: list[Path] = []


def _runtime(workdir: Path) -> Path:
    """``libkt_shim_rt.so``: this process's, else built in ``workdir``."""
    if _runtime_built and _runtime_built[0].exists():
        return _runtime_built[0]
    lib = workdir / "libkt_shim_rt.so"
    if not lib.exists():
        src = workdir / "kt_shim_rt.cpp"
        src.write_text(_RUNTIME)
        tmp = workdir / "libkt_shim_rt.so.tmp"
        proc = subprocess.run(["g++", *_FLAGS, str(src), "-o", str(tmp)],
                              capture_output=True, text=True)
        if proc.returncode:
            raise AssertionError(f"g++ failed on the shim's runtime:\n{proc.stderr[-4000:]}")
        tmp.rename(lib)
    _runtime_built[:] = [lib]
    return lib


#: The prelude's headers, precompiled (``<math.h>`` in C++ is most of a
#: kernel's build at -O0: 0.15 of 0.2 CPU s), once per process as the runtime.
#: Each kernel's build includes it first (``-include``); its own ``#include``
#: lines then add nothing. Where g++ cannot use the precompiled file it reads
#: the header itself: the same source either way.
_HEADERS = "#include <math.h>\n#include <stdlib.h>\n#include <string.h>\n"
_header_built: list[Path] = []


def _header(workdir: Path) -> Path:
    """``kt_shim_pre.hpp`` (with its ``.gch``): this process's, else made in
    ``workdir``."""
    if _header_built and _header_built[0].exists():
        return _header_built[0]
    header = workdir / "kt_shim_pre.hpp"
    header.write_text(_HEADERS)
    tmp = workdir / "kt_shim_pre.hpp.gch.tmp"
    flags = [f for f in _FLAGS if f != "-shared"]
    proc = subprocess.run(
        ["g++", *flags, "-x", "c++-header", str(header), "-o", str(tmp)],
        capture_output=True, text=True, check=False,
    )
    if proc.returncode == 0:
        tmp.rename(workdir / "kt_shim_pre.hpp.gch")
    _header_built[:] = [header]
    return header


def _kernel(plan, workdir: Path, source: str, ranges: bool = False):
    """The shimmed ``source`` of ``plan``, built with g++ (cached per source)."""
    red = plan.red
    out_types = ["real_t"] * sum(not x for x in red.int_outputs)
    out_types += ["long long"] * sum(bool(x) for x in red.int_outputs)
    code = _shim_source(source, len(plan.arg_cats), out_types, ranges)
    key = hashlib.sha256(code.encode()).hexdigest()[:24]
    fn = _built.get(key)
    if fn is None:
        src = workdir / f"{key}.cpp"
        so = workdir / f"{key}.so"
        src.write_text(code)
        runtime = _runtime(workdir)
        proc = subprocess.run(
            ["g++", *_FLAGS, "-include", str(_header(workdir)), str(src), "-o", str(so),
             str(runtime),
             f"-Wl,-rpath,{runtime.parent}"],
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
    return fn


def _outputs(plan):
    """(outputs in the caller's layout, the same in the kernel's order: float
    outputs first), filled with a sentinel that no kernel writes."""
    red = plan.red
    E = red.out_dim([f.dim for f in plan.formulas])
    shape = (plan.nx, plan.K, E) if red.uses_k else (plan.nx, E)
    outs = [np.full(shape, -7, dtype=np.int64 if x else plan.dtype) for x in red.int_outputs]
    ordered = [o for o, x in zip(outs, red.int_outputs) if not x]
    ordered += [o for o, x in zip(outs, red.int_outputs) if x]
    return outs, ordered


def _pointers(arrays):
    return (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])


def run(plan, args, tuning, workdir: Path):
    """Outputs of ``plan`` on ``args``, computed by its CUDA kernel on the CPU."""
    source, launch = generate_cuda_source(plan, key="shim", tuning=tuning)
    fn = _kernel(plan, workdir, source)
    arrays = [np.ascontiguousarray(a, dtype=plan.dtype) for a in args]
    outs, ordered = _outputs(plan)
    grid = -(-plan.nx // launch.rows_per_block)
    fn(grid, launch.block, launch.smem, plan.nx, plan.ny, _pointers(arrays + ordered))
    return tuple(outs)


def run_ranges(plan, args, blk, red, jmap, imap, tuning, workdir: Path, shape=None):
    """Outputs of ``plan`` on sorted ``args`` restricted to the blocks ``blk``
    and intervals ``red`` (what :func:`kerneltools.backend._ranges.run_native`
    passes), computed by the block-sparse CUDA kernel on the CPU, launched as
    the CUDA backend launches it (:func:`ranges_tasks`)."""
    source, launch = generate_cuda_source(plan, key="shim", tuning=tuning, shape=shape,
                                          ranges=True)
    fn = _kernel(plan, workdir, source, ranges=True)
    tasks = ranges_tasks(blk, launch.rows_per_block)
    ints = [tasks, np.ascontiguousarray(red, dtype=np.int64).reshape(-1, 2),
            np.ascontiguousarray(jmap, dtype=np.int64),
            np.ascontiguousarray(imap, dtype=np.int64)]
    arrays = [np.ascontiguousarray(a, dtype=plan.dtype) for a in args]
    outs, ordered = _outputs(plan)
    if len(tasks):
        fn(len(tasks), launch.block, launch.smem, plan.nx, plan.ny,
           _pointers(ints + arrays + ordered))
    return tuple(outs)


def scratch_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="kt-cuda-shim-"))


#: Small blocks keep the shim's thread count low; tiles of 16 points and
#: 2 rows per thread make tails on both axes with N = 45, M = 71.
SHIM_TUNING = {"block": {4: 16, 8: 16}, "rows": 2, "max_state": 8, "unroll": 4,
               "by_reduction": {"Sum": {4: (8, 4)}}}
