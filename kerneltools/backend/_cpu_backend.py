"""The CPU backend: generated C + OpenMP kernels, compiled at run time.

A plan becomes one C function ``kt_kernel(nx, ny, args, outs)``: the formula,
rendered as straight-line scalar statements by :mod:`._render_c`, is wrapped in
the skeleton below (one ``string.Template``). OpenMP splits the output rows
between threads; the reduced index is walked in tiles of ``TJ`` whose inner
loop ``#pragma omp simd`` vectorises across j, reading the j-variables in a
structure-of-arrays layout. Sum accumulates inside the vectorised loop in
``real_t`` per tile and in double across tiles (block-wise summation, so a
float32 sum of 10^6 terms keeps a relative error near 1e-7). Every other
reduction writes the tile's values to a small buffer and folds it with the C
form of its monoid (``Reduction.c``).

Compiled libraries live in the kernel cache (:mod:`._cache`), keyed by the
plan's key, the compiler's identity and flags and the template version;
written to a temporary name and renamed; checked on load (``kt_key``) and
rebuilt when truncated or foreign.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import tempfile
import threading
from pathlib import Path
from string import Template

import numpy as np

from ._cache import atomic_write, cache_dir
from ._compiler import VECMATH_DECL, find_compiler
from ._errors import CompileError
from ._plan import Plan
from ._render_c import render_formulas

__all__ = ["CpuBackend", "generate_source", "compile_count"]

TEMPLATE_VERSION = "cpu-1"

#: Most scalar temporaries a formula may render to before the plan is declined.
MAX_COMPONENTS = 20000

_SKELETON = Template(
    r"""/* kerneltools generated kernel: ${title}
 * key ${key}
 */
#include <tgmath.h>
#include <stdint.h>

typedef ${real} real_t;
typedef double acc_t;
#define PI_R ((real_t)3.141592653589793238462643383279502884)
#define TJ ${tj}
#define KT_LT(a, b) ((a) < (b) || ((b) != (b) && (a) == (a)))
${vecmath}

const char *kt_key(void) { return "${key}"; }

void kt_kernel(int64_t nx, int64_t ny, void **args, void **outs) {
${pointers}
${p_code}
  #pragma omp parallel for schedule(static) if (nx * ny > 32768)
  for (int64_t i = 0; i < nx; i++) {
${i_code}
${acc}
    for (int64_t j0 = 0; j0 < ny; j0 += TJ) {
      const int64_t nj = (ny - j0 < TJ) ? ny - j0 : TJ;
${tile}
    }
${final}
  }
}
"""
)

_FUSED_TILE = Template(
    r"""      real_t ${tile_sums};
      #pragma omp simd reduction(+:${sum_names})
      for (int64_t jj = 0; jj < nj; jj++) {
        const int64_t j = j0 + jj;
${j_code}
${sum_updates}
      }
${acc_updates}"""
)

_BUFFERED_TILE = Template(
    r"""      #pragma omp simd
      for (int64_t jj = 0; jj < nj; jj++) {
        const int64_t j = j0 + jj;
${j_code}
${buf_writes}
      }
${fold}"""
)


def _indent(code: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + line if line else line for line in code.splitlines())


def _var_expr(node, c: int) -> str:
    cat, k = node.attrs
    if cat == "i":
        return f"a{k}[i * {node.dim} + {c}]"
    if cat == "j":
        return f"a{k}[{c} * ny + j]"
    return f"a{k}[{c}]"


def tile_size(plan: Plan) -> int:
    """Reduced-index tile: 512, smaller when the tile buffer would pass 64 KB."""
    width = sum(f.dim for f in plan.formulas)
    return int(max(16, min(512, 16384 // max(1, width))))


def generate_source(plan: Plan, *, vector_math: bool = True, key: str | None = None) -> str:
    """The C source of ``plan``'s kernel (deterministic: golden-tested).

    ``key`` is what ``kt_key()`` returns (default: the plan's key); the cache
    stores the kernel key there and checks it when loading.
    """
    red = plan.red
    r = render_formulas(list(plan.formulas), _var_expr, {"i": "i", "j": "j"})
    real = "float" if plan.dtype == np.float32 else "double"
    E = plan.formulas[0].dim
    pointers = [
        f"  const real_t *restrict a{k} = (const real_t *)args[{k}];"
        for k in range(len(plan.arg_cats))
    ]
    if any(red.int_outputs) and not all(red.int_outputs):
        pointers += [
            "  real_t *restrict outf = (real_t *)outs[0];",
            "  int64_t *restrict outi = (int64_t *)outs[1];",
        ]
    elif all(red.int_outputs):
        pointers.append("  int64_t *restrict outi = (int64_t *)outs[0];")
    else:
        pointers.append("  real_t *restrict outf = (real_t *)outs[0];")
    subs = {"E": E, "E1": plan.formulas[-1].dim, "K": plan.K}
    if red.c.get("fused"):
        names = [f"s{e}" for e in range(E)]
        out = r.outputs[0]
        tile = _FUSED_TILE.substitute(
            tile_sums=", ".join(f"{n} = 0" for n in names),
            sum_names=", ".join(names),
            j_code=r.code("j", "        "),
            sum_updates="\n".join(f"        {n} += {out[e]};" for e, n in enumerate(names)),
            acc_updates="\n".join(f"      A{e} += {n};" for e, n in enumerate(names)),
        )
        acc = "    acc_t " + ", ".join(f"A{e} = 0" for e in range(E)) + ";"
        final = "\n".join(f"    outf[i * {E} + {e}] = (real_t)A{e};" for e in range(E))
    else:
        writes = []
        for b, outs in enumerate(r.outputs):
            writes += [f"        buf{b}[{e} * TJ + jj] = {x};" for e, x in enumerate(outs)]
        tile = _BUFFERED_TILE.substitute(
            j_code=r.code("j", "        "),
            buf_writes="\n".join(writes),
            fold=_indent(Template(red.c["tile"]).substitute(subs), 6),
        )
        bufs = [f"    real_t buf0[{plan.formulas[0].dim} * TJ];"]
        if len(plan.formulas) > 1:
            bufs.append(f"    real_t buf1[{plan.formulas[1].dim} * TJ];")
        acc = "\n".join(bufs) + "\n" + _indent(Template(red.c["acc"]).substitute(subs), 4)
        final = _indent(Template(red.c["final"]).substitute(subs), 4)
    return _SKELETON.substitute(
        title=f"{red.name}, {real}, " + ", ".join(
            f"{c}{k}[{d}]" for k, (c, d) in enumerate(zip(plan.arg_cats, plan.arg_dims))
        ),
        key=key or plan.key,
        real=real,
        tj=tile_size(plan),
        vecmath=VECMATH_DECL if vector_math else "",
        pointers="\n".join(pointers),
        p_code=r.code("p", "  "),
        i_code=r.code("i", "    "),
        acc=acc,
        tile=tile,
        final=final,
    )


# -- compilation and the cache ------------------------------------------------
_loaded: dict[str, object] = {}
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()
_compiles = [0]


def compile_count() -> int:
    """How many kernels this process has compiled (tests count recompilations)."""
    return _compiles[0]


def _kernel_key(plan: Plan, identity: str) -> str:
    text = "\n".join([TEMPLATE_VERSION, plan.key, identity])
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def _try_load(path: Path, key: str):
    """The library at ``path`` if it loads and carries ``key``; else None."""
    try:
        lib = ctypes.CDLL(str(path))
        lib.kt_key.restype = ctypes.c_char_p
        if lib.kt_key().decode() != key:
            return None
        return lib
    except (OSError, AttributeError, UnicodeDecodeError):
        return None


def _load_fresh_copy(path: Path, key: str):
    """Load through a private copy: the dynamic loader may hold a stale handle
    for ``path`` if a foreign library with that name was loaded before."""
    with tempfile.TemporaryDirectory(prefix="kerneltools-") as tmp:
        copy = Path(tmp) / f"k{os.getpid()}.so"
        shutil.copyfile(path, copy)
        return _try_load(copy, key)


def get_kernel(plan: Plan):
    """The compiled ``kt_kernel`` of ``plan``: from memory, disk, or the compiler."""
    comp = find_compiler()
    key = _kernel_key(plan, comp.identity)
    fn = _loaded.get(key)
    if fn is not None:
        return fn
    with _locks_guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        fn = _loaded.get(key)
        if fn is not None:
            return fn
        folder = cache_dir() / "cpu"
        folder.mkdir(mode=0o700, exist_ok=True)
        so = folder / f"{key}.so"
        lib = _try_load(so, key) if so.exists() else None
        stale = so.exists() and lib is None
        if lib is None:
            if stale:  # truncated, corrupt or foreign: never trusted, rebuilt
                so.unlink(missing_ok=True)
            _build(plan, comp, folder, key, so)
            lib = _load_fresh_copy(so, key) if stale else _try_load(so, key)
            if lib is None:
                raise CompileError(
                    f"the compiled kernel {so} does not load", source_path=str(so.with_suffix(".c"))
                )
        fn = lib.kt_kernel
        fn.restype = None
        fn.argtypes = [ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]
        fn._kt_lib = lib  # keep the library alive with the function
        _loaded[key] = fn
        return fn


def _build(plan: Plan, comp, folder: Path, key: str, so: Path) -> None:
    source = generate_source(plan, vector_math=comp.vector_math, key=key)
    src = folder / f"{key}.c"
    atomic_write(src, source.encode())
    fd, tmp_so = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".so")
    os.close(fd)
    try:
        proc = comp.compile(str(src), tmp_so)
        _compiles[0] += 1
        if proc.returncode != 0:
            log = (proc.stderr or proc.stdout).strip()
            raise CompileError(
                f"the C compiler failed on the generated kernel {src}:\n{log[-4000:]}",
                log=log,
                source_path=str(src),
            )
        os.chmod(tmp_so, 0o700)
        os.replace(tmp_so, so)
    finally:
        if os.path.exists(tmp_so):
            os.unlink(tmp_so)


class CpuBackend:
    """Generated C with OpenMP; see the module docstring."""

    name = "cpu"

    def available(self) -> tuple[bool, str]:
        comp = find_compiler()
        if not comp.ok:
            return False, f"no usable C compiler: {comp.reason}"
        return True, f"generated C compiled by {comp.description}"

    def supports(self, plan: Plan) -> bool:
        # Only float32 and float64 have a C real type here.
        if plan.dtype not in (np.float32, np.float64):
            return False
        # Every reduction needs its C form.
        if plan.red.c is None:
            return False
        # Scalar rendering of huge dimensions would compile for minutes.
        from ._ir import topo_order

        return sum(n.dim for n in topo_order(list(plan.formulas))) <= MAX_COMPONENTS

    def run(self, plan: Plan, args, **options):
        fn = get_kernel(plan)
        arrays = []
        for a, cat in zip(args, plan.arg_cats):
            a = np.asarray(a, dtype=plan.dtype)
            arrays.append(np.ascontiguousarray(a.T) if cat == "j" else np.ascontiguousarray(a))
        E = plan.red.out_dim([f.dim for f in plan.formulas])
        shape = (plan.nx, plan.K, E) if plan.red.uses_k else (plan.nx, E)
        outs = [
            np.empty(shape, dtype=np.int64 if is_int else plan.dtype)
            for is_int in plan.red.int_outputs
        ]
        argv = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        outv = (ctypes.c_void_p * len(outs))(*[o.ctypes.data for o in outs])
        fn(plan.nx, plan.ny, argv, outv)
        return tuple(outs)
