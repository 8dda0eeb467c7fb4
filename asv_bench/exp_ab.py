#!/usr/bin/env python
"""A variant of the kernels' float64 2^z against the current one, in one process.

``VARIANT`` is a C file defining ``kt_exp2_nonpos`` (e.g.
``exp_variants/table2.h``); it replaces the current float64 ``kt_exp2_nonpos``
of ``templates/kt_exp.h`` where the compiler targets AVX-512 (the current
function stays the portable one). Two measurements:

- ``--ulp``: the largest error, in ulp of the result, of both functions
  against ``np.exp2`` in longdouble over several argument ranges (built
  as a small shared library with the kernels' compiler flags);
- the tasks of ``benchmarks/reductions.py`` (default the float64 ones
  that call ``kt_exp2_nonpos``, plus argkmin, which does not: a control that
  should read 1.00), one thread, both kernels in the same process, calls
  alternating A B B A A B ..., CPU seconds per call: a process started
  after another can run several per cent slower or faster on a shared VM, so
  that two processes' numbers cannot resolve a few per cent; one process can.

``--near`` (no ``VARIANT``): the kernels with the expanded squared distance
of ``_cpu_near`` against those without (both with the current header);
``--fold``: with its row factors in the exp's table against added to z.

``--vector`` (no ``VARIANT``): the same two measurements for the AVX-512
``kt_exp2v_nonpos`` and the explicit vector loops of ``_cpu_vec`` against
the kernels built with ``KT_NO_VEC`` (the scalar ``#pragma omp simd`` loops
only); its ulp errors over a dense sweep of each range (normal results;
below 2^-1022 both give 0).

Examples::

    OMP_NUM_THREADS=1 python asv_bench/exp_ab.py asv_bench/exp_variants/table2.h --ulp
    OMP_NUM_THREADS=1 python asv_bench/exp_ab.py --vector --ulp --tasks matvec,grad
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def variant_header(current: str, variant: str) -> str:
    """``current`` (kt_exp.h) with ``variant`` as its AVX-512 kt_exp2_nonpos."""
    start = current.index("#pragma omp declare simd notinbranch\nstatic inline double "
                          "kt_exp2_nonpos")
    end = current.index("\n}\n", start) + 3
    avx512 = "#if defined(__AVX512F__)\n" + variant.rstrip() + "\n#else\n"
    return current[:start] + avx512 + current[start:end] + "#endif\n" + current[end:]


_HARNESS = r"""
#include <stdint.h>
#include <math.h>
%s
void ev(const double *z, double *out, int64_t n) {
  #pragma omp simd
  for (int64_t i = 0; i < n; i++) out[i] = kt_exp2_nonpos(z[i]);
}
"""

RANGES = [(-0.25, 0.25), (-1000.0, 0.0), (-1022.0, -1000.0), (0.0, 20.0)]

_VECTOR_HARNESS = r"""
#include <stdint.h>
#include <math.h>
%s
void ev(const double *z, double *out, int64_t n) {
#if defined(KT_VEC_F64)
  for (int64_t i = 0; i + 8 <= n; i += 8)
    _mm512_storeu_pd(out + i, (__m512d)kt_exp2v_nonpos(KT_VLOAD(z + i)));
#else
  for (int64_t i = 0; i < n; i++) out[i] = 0.0 / 0.0;
#endif
}
"""


def ulp_errors(header: str, n: int = 2_000_000, harness: str = _HARNESS,
               dense: bool = False) -> list[float]:
    """Max error in ulp over each of RANGES (normal results only): ``n``
    uniform random points, or (``dense``) ``n`` evenly spaced ones."""
    from kerneltools.backend.cpu._compiler import find_compiler

    comp = find_compiler()
    with tempfile.TemporaryDirectory() as tmp:
        src, lib = os.path.join(tmp, "h.c"), os.path.join(tmp, "h.so")
        with open(src, "w") as f:
            f.write(harness % header)
        subprocess.run([comp.path, *comp.flags, src, "-o", lib, *comp.libs], check=True)
        fn = ctypes.CDLL(lib).ev
        rng = np.random.default_rng(0)
        out = []
        for lo, hi in RANGES:
            z = np.linspace(lo, hi, n) if dense else rng.uniform(lo, hi, n)
            y = np.empty_like(z)
            fn(z.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.c_void_p),
               ctypes.c_int64(n))
            ref = np.exp2(z.astype(np.longdouble))
            ok = ref >= np.longdouble(2.0**-1022)
            ulp = np.spacing(ref[ok].astype(np.float64)).astype(np.longdouble)
            err = np.abs(y[ok].astype(np.longdouble) - ref[ok]) / ulp
            out.append(float(err.max()))
        return out


def ab(headers: dict, tasks, n: int, rounds: int, near=None, fold=None) -> None:
    """Interleaved calls of each task's kernel built from both headers
    (``near``: {name: whether the expanded squared distance of _cpu_near is
    used}, default both; ``fold``: {name: _cpu_near.FOLD}, default as set)."""
    from benchmarks import reductions as R
    from kerneltools.backend.cpu import _backend as _cpu_backend, _codegen as _cpu_codegen, _near as _cpu_near

    near_rows = _cpu_codegen.near_rows

    print("| task | current median | variant median | current / variant "
          "(paired median) | max rel. difference |\n|---|---|---|---|---|")
    for task in tasks:
        call = R.kerneltools_callable(R.make_data(task, n, n, 3, "float64"), "cpu")
        times, result = {k: [] for k in headers}, {}
        for r in range(rounds):
            for name in (list(headers) if r % 2 == 0 else list(headers)[::-1]):
                # the source, hence the kernel key, follows the header
                _cpu_codegen._KT_EXP_H = headers[name]
                _cpu_codegen.near_rows = (near_rows if near is None or near[name]
                                          else (lambda *args: None))
                if fold is not None:
                    _cpu_near.FOLD = fold[name]
                _cpu_backend._by_signature.clear()
                if r == 0:
                    result[name] = np.asarray(call(), dtype=float)  # compile, warm
                t0 = time.process_time()
                call()
                times[name].append(time.process_time() - t0)
        a, b = times["current"], times["variant"]
        diff = np.max(np.abs(result["current"] - result["variant"]))
        diff /= max(np.max(np.abs(result["current"])), 1e-300)
        paired = statistics.median(x / y for x, y in zip(a, b))
        print(f"| {task} | {statistics.median(a) * 1e3:.1f} ms | "
              f"{statistics.median(b) * 1e3:.1f} ms | {paired:.3f}x | {diff:.1e} |",
              flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("variant", nargs="?", help="C file defining kt_exp2_nonpos")
    p.add_argument("--vector", action="store_true",
                   help="kt_exp2v_nonpos and the vector loops against KT_NO_VEC")
    p.add_argument("--near", action="store_true",
                   help="the expanded squared distance (_cpu_near) against the direct one")
    p.add_argument("--fold", action="store_true",
                   help="_cpu_near's row factors in the exp's table against added to z")
    p.add_argument("--tasks", default="argkmin,matvec,lse,grad")
    p.add_argument("--n", type=float, default=2e4, help="N = M (default 2e4)")
    p.add_argument("--rounds", type=int, default=8, help="calls per kernel (default 8)")
    p.add_argument("--ulp", action="store_true", help="also the max ulp errors")
    args = p.parse_args(argv)
    from kerneltools.backend.cpu import _codegen as _cpu_codegen

    current = _cpu_codegen._KT_EXP_H
    if args.near or args.fold:
        headers = {"current": current, "variant": current}
        ab(headers, args.tasks.split(","), int(args.n), args.rounds,
           near=None if args.fold else {"current": False, "variant": True},
           fold={"current": False, "variant": True} if args.fold else None)
        return 0
    if args.vector:
        headers = {"current": "#define KT_NO_VEC 1\n" + current, "variant": current}
        if args.ulp:
            n = 16_000_000
            print(f"| function ({n:,} evenly spaced points per range) | "
                  + " | ".join(f"[{lo:g}, {hi:g}]" for lo, hi in RANGES)
                  + " |\n|---|" + "---|" * len(RANGES))
            for name, h, harness in (("kt_exp2_nonpos", current, _HARNESS),
                                     ("kt_exp2v_nonpos", current, _VECTOR_HARNESS)):
                errs = ulp_errors(h, n, harness, dense=True)
                print(f"| {name} | " + " | ".join(f"{e:.3f} ulp" for e in errs) + " |")
        ab(headers, args.tasks.split(","), int(args.n), args.rounds)
        return 0
    if args.variant is None:
        p.error("give a VARIANT file, or --vector")
    with open(args.variant) as f:
        headers = {"current": current, "variant": variant_header(current, f.read())}
    if args.ulp:
        print("| function | " + " | ".join(f"[{lo:g}, {hi:g}]" for lo, hi in RANGES)
              + " |\n|---|" + "---|" * len(RANGES))
        for name, h in headers.items():
            errs = ulp_errors(h)
            print(f"| {name} | " + " | ".join(f"{e:.3f} ulp" for e in errs) + " |")
    ab(headers, args.tasks.split(","), int(args.n), args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
