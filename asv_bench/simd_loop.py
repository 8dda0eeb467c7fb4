"""The plain OpenMP loop that anyone would write by hand: the "simd-loop" system.

``asv_bench/compare.py`` sets it beside kerneltools as the bar the generated
kernels must clear (issue 23): for each output row, one ``#pragma omp simd``
loop over j, compiled with ``-O3 -march=native -ffast-math -fopenmp`` (so
glibc's vectorised ``expf``/``exp`` from libmvec), rows split between
threads by ``#pragma omp parallel for``; D is a compile-time constant (the
compiler unrolls the feature loop), which only helps the hand loop.

Tasks as in ``benchmarks/reductions.py``: ``matvec`` (Gaussian K b), ``lse``
(LogSumExp, max then sum in two passes over a row buffer), ``argkmin``
(distances of a tile into a buffer, then insertion into a sorted list of K)
and ``grad`` (the gradient of e . (K b) with respect to x).

The shared libraries are built once per (task, D, dtype) into a temporary
folder; building needs ``cc`` (or ``$CC``) with OpenMP.
"""

from __future__ import annotations

import ctypes
import functools
import os
import subprocess
import tempfile

import numpy as np

__all__ = ["simd_loop_callable", "FLAGS"]

FLAGS = ["-O3", "-march=native", "-ffast-math", "-fopenmp", "-shared", "-fPIC"]

_HEAD = r"""
#include <math.h>
#include <stdint.h>
typedef REAL real;
#define EXP EXPF
#define LOG LOGF
#define TJ 512
"""

_SRC = {
    "matvec": r"""
void run(int64_t n, int64_t m, const real *x, const real *y, const real *b,
         real g, real *out, const real *unused) {
  #pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i++) {
    real s = 0;
    #pragma omp simd reduction(+:s)
    for (int64_t j = 0; j < m; j++) {
      real d2 = 0;
      for (int c = 0; c < D; c++) { real t = x[i * D + c] - y[j * D + c]; d2 += t * t; }
      s += EXP(-g * d2) * b[j];
    }
    out[i] = s;
  }
}
""",
    "lse": r"""
#include <stdlib.h>
void run(int64_t n, int64_t m, const real *x, const real *y, const real *h,
         real g, real *out, const real *unused) {
  #pragma omp parallel
  {
    real *buf = malloc(sizeof(real) * m);
    #pragma omp for schedule(static)
    for (int64_t i = 0; i < n; i++) {
      real mx = -INFINITY;
      #pragma omp simd reduction(max:mx)
      for (int64_t j = 0; j < m; j++) {
        real d2 = 0;
        for (int c = 0; c < D; c++) { real t = x[i * D + c] - y[j * D + c]; d2 += t * t; }
        real v = -g * d2 + h[j];
        buf[j] = v;
        mx = v > mx ? v : mx;
      }
      real s = 0;
      #pragma omp simd reduction(+:s)
      for (int64_t j = 0; j < m; j++) s += EXP(buf[j] - mx);
      out[i] = mx + LOG(s);
    }
    free(buf);
  }
}
""",
    "argkmin": r"""
void run(int64_t n, int64_t m, const real *x, const real *y, const real *unused1,
         real g, real *out, const real *unused2) {
  int64_t *idx = (int64_t *)out;
  #pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i++) {
    real kv[K]; int64_t ki[K];
    for (int k = 0; k < K; k++) { kv[k] = INFINITY; ki[k] = -1; }
    real buf[TJ];
    for (int64_t j0 = 0; j0 < m; j0 += TJ) {
      const int64_t nj = m - j0 < TJ ? m - j0 : TJ;
      #pragma omp simd
      for (int64_t jj = 0; jj < nj; jj++) {
        real d2 = 0;
        for (int c = 0; c < D; c++) {
          real t = x[i * D + c] - y[(j0 + jj) * D + c]; d2 += t * t;
        }
        buf[jj] = d2;
      }
      for (int64_t jj = 0; jj < nj; jj++) {
        const real v = buf[jj];
        if (!(v < kv[K - 1])) continue;
        int p = K - 1;
        while (p > 0 && v < kv[p - 1]) { kv[p] = kv[p - 1]; ki[p] = ki[p - 1]; p--; }
        kv[p] = v; ki[p] = j0 + jj;
      }
    }
    for (int k = 0; k < K; k++) idx[i * K + k] = ki[k];
  }
}
""",
    "grad": r"""
void run(int64_t n, int64_t m, const real *x, const real *y, const real *b,
         real g, real *out, const real *e) {
  #pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i++) {
    real s[D];
    for (int c = 0; c < D; c++) s[c] = 0;
    for (int c = 0; c < D; c++) {
      /* one simd loop per component: what a hand writer gets vectorised */
      real sc = 0;
      #pragma omp simd reduction(+:sc)
      for (int64_t j = 0; j < m; j++) {
        real d2 = 0;
        for (int k = 0; k < D; k++) { real t = x[i * D + k] - y[j * D + k]; d2 += t * t; }
        sc += EXP(-g * d2) * b[j] * (x[i * D + c] - y[j * D + c]);
      }
      s[c] = sc;
    }
    for (int c = 0; c < D; c++) out[i * D + c] = -2 * g * e[i] * s[c];
  }
}
""",
}


@functools.lru_cache(maxsize=None)
def _library(task: str, d: int, dtype: str, k: int):
    real = "float" if dtype == "float32" else "double"
    f = "f" if real == "float" else ""
    src = (_HEAD.replace("REAL", real).replace("EXPF", "exp" + f)
           .replace("LOGF", "log" + f) + _SRC[task])
    folder = tempfile.mkdtemp(prefix="kt-simd-loop-")
    c_path, so_path = os.path.join(folder, "loop.c"), os.path.join(folder, "loop.so")
    with open(c_path, "w") as f:
        f.write(src)
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, *FLAGS, f"-DD={d}", f"-DK={k}", c_path, "-o", so_path, "-lm"],
                   check=True, capture_output=True, text=True)
    lib = ctypes.CDLL(so_path)
    ct = ctypes.c_float if real == "float" else ctypes.c_double
    ptr = ctypes.c_void_p
    lib.run.argtypes = [ctypes.c_int64, ctypes.c_int64, ptr, ptr, ptr, ct, ptr, ptr]
    lib.run.restype = None
    return lib


def simd_loop_callable(data: dict, *, gamma, lse_eps: float, k_nn: int):
    """The task of ``data`` (``benchmarks/reductions.make_data``) as the hand loop.

    ``gamma``: the matvec/grad kernel's factor as a function of D.
    """
    task, d = data["task"], data["d"]
    x = np.ascontiguousarray(data["x"])
    y = np.ascontiguousarray(data["y"])
    dtype = x.dtype
    n, m = len(x), len(y)
    lib = _library(task, d, dtype.name, k_nn)
    g = 1.0 / lse_eps if task == "lse" else gamma(d)
    extra = {"matvec": "b", "grad": "b", "lse": "h"}.get(task)
    w = np.ascontiguousarray(data[extra][:, 0]) if extra else x
    e = np.ascontiguousarray(data["e"][:, 0]) if task == "grad" else x
    shape, kind = {"matvec": ((n, 1), dtype), "lse": ((n, 1), dtype),
                   "argkmin": ((n, k_nn), np.int64), "grad": ((n, d), dtype)}[task]

    def run():
        out = np.empty(shape, kind)
        lib.run(n, m, x.ctypes.data, y.ctypes.data, w.ctypes.data, g,
                out.ctypes.data, e.ctypes.data)
        return out

    return run
