"""The tensor-core kernel on the CPU: ``_cuda_shim`` plus an emulated ``mma``.

The CPU shim runs one OS thread per CUDA thread; a warp's ``mma.sync`` is a
collective of its 32 lanes, each holding a piece (fragment) of A, B and C.
Here ``kt_mma`` is replaced by an emulation built on the block barrier:
every lane publishes its fragments, the block synchronises, each lane
computes its C entries from the whole tiles (read back through the PTX ISA's
m16n8k8 TF32 fragment layout), and the block synchronises again before the
scratch is reused. That is valid because every ``kt_mma`` call of the
kernel is block-uniform (all loops are over tiles, not lanes).
``cvt.rna.tf32.f32`` becomes its bit-level equivalent, ``__syncwarp`` the
block barrier. So the fragment layouts, the split, the padding and the
tails are checked on the CPU; the tensor cores' own rounding is not (the
emulation sums in float32 in order). Helper module (no ``test_`` prefix).
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np

import _cuda_shim
from kerneltools.backend.cuda._tcore import generate_tcore_source, tcore_arguments, tcore_match

_EMULATION = r"""
typedef float real_t;
#define __launch_bounds__(n)
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline unsigned kt_cvt_rna_tf32(float x) {
  unsigned u; memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
  return u;
}
static inline void __syncwarp() { kt_sync(); }
static unsigned kt_frag_a[1024][4], kt_frag_b[1024][2];
static float kt_frag_c[1024][4];
/* mma.m16n8k8 TF32 (row.col) across the warp: a_r (r = 0..3) of lane
   4 g + t holds A[g + 8 (r & 1)][t + 4 (r >> 1)], b_r holds B[t + 4 r][g],
   c_r holds C[g + 8 (r >> 1)][2 t + (r & 1)]. */
static void kt_mma_emulated(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  const int tid = threadIdx.x, base = tid & ~31, lane = tid & 31, g = lane >> 2, t = lane & 3;
  for (int r = 0; r < 4; r++) kt_frag_a[tid][r] = a[r];
  for (int r = 0; r < 2; r++) kt_frag_b[tid][r] = b[r];
  kt_sync();
  for (int q = 0; q < 4; q++) {
    const int row = g + 8 * (q >> 1), col = 2 * t + (q & 1);
    float s = c[q];
    for (int k = 0; k < 8; k++) {
      const float av = __uint_as_float(kt_frag_a[base + 4 * (row & 7) + (k & 3)]
                                                [(row >> 3) + 2 * (k >> 2)]);
      const float bv = __uint_as_float(kt_frag_b[base + 4 * col + (k & 3)][k >> 2]);
      s += av * bv;
    }
    c[q] = s;
  }
  kt_sync();
}
"""


def _shimmed(source: str) -> str:
    """The tensor-core source with the emulation in place of the PTX."""
    source = source.replace(
        'asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));', "r = kt_cvt_rna_tf32(x);")
    source, n = re.subn(r"asm volatile\(\s*\"mma\.sync.*?\);", "kt_mma_emulated(c, a, b);",
                        source, flags=re.S)
    assert n == 1, "the mma's inline PTX was not found"
    return _EMULATION + source


def run(plan, args, workdir):
    """``plan``'s output computed on the CPU by its tensor-core kernel, from
    the arguments the backend passes (:func:`tcore_arguments`)."""
    source, launch = generate_tcore_source(plan, key="shim")
    # the launcher passes (c2, x, y, b, xn, yn) as six input pointers, one output
    six = SimpleNamespace(arg_cats=("p",) * 6, red=plan.red)
    fn = _cuda_shim._kernel(six, workdir, _shimmed(source).replace(
        "const float c2,", "const float *c2p,").replace(
        "const long long i0 = (long long)blockIdx.x * BM;",
        "const long long i0 = (long long)blockIdx.x * BM;\n  const float c2 = *c2p;"))
    m = tcore_match(plan)
    prepared = tcore_arguments(plan, args, np)
    assert prepared is not None, "non-finite data: the backend runs the generic kernel"
    c2, *arrays = prepared
    arrays = [np.array([c2], np.float32), *arrays]
    out = np.full((plan.nx, m.e), -7, dtype=np.float32)
    grid = -(-plan.nx // launch.rows_per_block)
    fn(grid, launch.block, launch.smem, plan.nx, plan.ny, _cuda_shim._pointers(arrays + [out]))
    return out
