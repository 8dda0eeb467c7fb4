"""The CPU backend: generated C + OpenMP kernels, compiled at run time.

A plan becomes one C function ``kt_kernel(r0, r1, ny, args, outs)``: the formula,
rendered as straight-line scalar statements by :mod:`._render_c`, is wrapped in
the skeleton below (one ``string.Template``). OpenMP splits the output rows,
in blocks of ``IB``, between threads; the reduced index is walked in tiles of
``TJ`` points, packed structure-of-arrays by tile so that the inner loop
``#pragma omp simd`` vectorises across j with contiguous loads. Per tile,
values that depend on j only are computed once for the block's rows, and large
dot products (and squared distances) between an i- and a j-variable come from
a register-blocked matrix-product micro-kernel. Sum accumulates inside the
vectorised loop in ``real_t`` per tile and in double across tiles (block-wise
summation: a float32 sum of 10^6 terms keeps a relative error near 1e-7).
Every other reduction writes the tile's values to a small buffer and folds it
with the C form of its monoid (``Reduction.c``). ``exp`` is an inline
polynomial (``templates/kt_exp.h``) that vectorises without slow paths.

Compiled libraries live in the kernel cache (:mod:`._cache`), keyed by the
generated source and the compiler's identity and flags, written to a
temporary name and renamed; only a library whose folder, owner and recorded
SHA-256 check out is loaded, anything else is rebuilt (see ``_cache.py``).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
import threading
from pathlib import Path
from string import Template

import numpy as np

from . import _ops
from ._cache import atomic_write, kernel_folder, load_verified_library, store_library
from ._compiler import VECMATH_DECL, find_compiler
from ._errors import CompileError
from ._ir import intcst, topo_order
from ._ops import make, substitute
from ._plan import Plan
from ._progress import chunks, compiling
from ._render_c import render_formulas

__all__ = ["CpuBackend", "generate_source", "compile_count"]

#: C text read at import: kt_exp.h and the block-sparse kernel's skeleton and
#: folds (string.Template slots; .h, which the package data ships).
_TEMPLATES = Path(__file__).parent / "templates"
#: The vectorisable exp shared by the C templates (see the file's comment):
#: vector library exps fall back to slow scalar code when an argument
#: underflows, which Gaussian kernels with a small bandwidth do on most pairs.
_KT_EXP_H = (_TEMPLATES / "kt_exp.h").read_text()

#: Most scalar temporaries a formula may render to before the plan is declined.
MAX_COMPONENTS = 20000

#: Dot products and squared distances of at least this dimension between an
#: i-variable and a j-variable are computed by a register-blocked
#: matrix-product micro-kernel (IB rows x VL columns per step) instead of
#: pair by pair; the squared distance then takes the expanded form
#: |x|^2 + |y|^2 - 2 <x, y>, clamped at 0, as BLAS-based codes do.
DOT_MIN_DIM = 16

#: Output rows per block: the j-tiles are reused from cache by IB rows.
IB = 8

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
#define IB ${ib}
#define VL ${vl}
#define KT_LT(a, b) ((a) < (b) || ((b) != (b) && (a) == (a)))
/* Below this many pairs (about a millisecond of work) one thread does it all:
   waking a team costs more, and far more when another process holds a core. */
#define KT_PARALLEL_PAIRS 1048576
${vecmath}
${kt_exp}
#define KT_EXP(x) ${exp_fn}(x)
#define KT_EXP2(x) exp2(x)

typedef struct { ${state} } kt_state;

const char *kt_key(void) { return "${key}"; }
int64_t kt_state_size(void) { return (int64_t)sizeof(kt_state); }
/* 0 in a process forked after OpenMP started: its thread pool is gone there. */
static int kt_parallel = 1;
void kt_set_parallel(int on) { kt_parallel = on; }

/* Reduces rows [r0, r1) over j in [0, ny) (the caller runs long reductions
 * by chunks of rows). i-variables are row-major (n, d);
 * j-variables are packed by tiles: tile t holds d x TJ values, component c of
 * point t * TJ + jj at [t * d * TJ + c * TJ + jj], zero-padded to whole tiles. */
void kt_kernel(int64_t r0, int64_t r1, int64_t ny, void **args, void **outs) {
${pointers}
  kt_state *restrict states = (kt_state *)outs[${n_outs}];
${p_code}
  const int64_t nblocks = (r1 - r0 + IB - 1) / IB;
  #pragma omp parallel for schedule(static) if (kt_parallel && (r1 - r0) * ny > KT_PARALLEL_PAIRS)
  for (int64_t ib = 0; ib < nblocks; ib++) {
    const int64_t i0 = r0 + ib * IB;
    const int64_t ni = (r1 - i0 < IB) ? r1 - i0 : IB;
    kt_state *st = states + i0; /* per-row states live in the caller's scratch */
    for (int64_t ii = 0; ii < ni; ii++) {
      kt_state *S = &st[ii];
${init}
    }
${block_setup}
    for (int64_t j0 = 0; j0 < ny; j0 += TJ) {
      const int64_t nj = (ny - j0 < TJ) ? ny - j0 : TJ;
${tile_setup}
      for (int64_t ii = 0; ii < ni; ii++) {
        const int64_t i = i0 + ii;
        kt_state *S = &st[ii];
${i_code}
${tile}
      }
    }
    for (int64_t ii = 0; ii < ni; ii++) {
      const int64_t i = i0 + ii;
      kt_state *S = &st[ii];
${final}
    }
  }
}
"""
)

#: The block-sparse variant (``ranges=``): data sorted so that blocks and
#: intervals are contiguous; ``blk`` holds, per output block, its rows
#: ``[r0, r1)`` and its intervals ``red[v0:v1]`` of the reduced index; one
#: call for every block, OpenMP over blocks (dynamic: their work differs).
#: j-variables are structure-of-arrays over the whole axis (component c of
#: point j at ``c * js + j``), so that an interval may start anywhere;
#: ``jmap`` gives each reduced position's index in the caller's order, which
#: the arg-reductions record and break ties by (as the dense kernel, whose
#: order is the caller's).
_RANGES_SKELETON = Template((_TEMPLATES / "ranges_kernel.h").read_text())

_FUSED_TILE = Template(
    r"""real_t ${tile_sums};
#pragma omp simd reduction(+:${sum_names})
for (int64_t jj = 0; jj < ${bound}; jj++) {
  const int64_t j = j0 + jj;
${ij_code}
${sum_updates}
}
${acc_updates}"""
)

_BUFFERED_TILE = Template(
    r"""#pragma omp simd
for (int64_t jj = 0; jj < ${bound}; jj++) {
  const int64_t j = j0 + jj;
${ij_code}
${buf_writes}
}
${fold}"""
)

_JONLY_PASS = Template(
    r"""#pragma omp simd
for (int64_t jj = 0; jj < ${bound}; jj++) {
  const int64_t j = j0 + jj;
${j_code}
${writes}
}"""
)

_DOT_KERNEL = Template(
    r"""/* <x_i, y_j> for the block's rows and the tile: IB x 2 VL accumulators
   (two vectors per row, so that each broadcast x feeds two FMAs). yq holds y
   in chunks of VL points, each chunk d x VL contiguous. */
for (int64_t jc = 0; jc < nj; jc += 2 * VL) {
  real_t acc[IB][2 * VL];
  for (int r = 0; r < IB; r++) for (int l = 0; l < 2 * VL; l++) acc[r][l] = 0;
  const real_t *y0 = yq${q} + (j0 + jc) * ${d};
  const real_t *y1 = y0 + ${d} * VL;
  for (int c = 0; c < ${d}; c++) {
    for (int r = 0; r < IB; r++) {
      const real_t xv = xs${q}[r * ${d} + c];
      #pragma omp simd
      for (int l = 0; l < VL; l++) {
        acc[r][l] += xv * y0[c * VL + l];
        acc[r][VL + l] += xv * y1[c * VL + l];
      }
    }
  }
  for (int r = 0; r < IB; r++) for (int l = 0; l < 2 * VL; l++) dq${q}[r * TJ + jc + l] = acc[r][l];
}"""
)


def _indent(code: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + line if line else line for line in code.splitlines())


def _var_expr(node, c: int) -> str:
    cat, k = node.attrs
    if cat == "i":
        return f"a{k}[i * {node.dim} + {c}]"
    if cat == "j":
        return f"y{k}[{c} * TJ + jj]"
    return f"a{k}[{c}]"


def _var_expr_ranges(node, c: int) -> str:
    """The block-sparse kernel's reads: j-variables as (d, js) arrays."""
    if node.attrs[0] == "j":
        return f"y{node.attrs[1]}[{c} * js + jj]"
    return _var_expr(node, c)


def _rewrite_dots(formulas, smooth: bool = True):
    """Find large dot products and squared distances between an i- and a j-variable.

    Returns the formulas (squared distances rewritten in expanded form where
    the reduction is ``smooth`` in F: the expanded form's rounding error,
    eps |x|^2 as with BLAS-based codes, blurs F slightly; Min, Max and K-min
    keep the direct form, their outputs depending on the exact order of
    nearby distances) and the list of dot-product nodes
    ``SumFeat(Mul(x_i, y_j))`` to compute by blocks.
    """
    def is_pair(a, b):
        return (a.op == "Var" and b.op == "Var" and a.cat == "i" and b.cat == "j"
                and a.dim == b.dim and a.dim >= DOT_MIN_DIM)

    mapping = {}
    for node in topo_order(list(formulas)):
        if node.op != "SumFeat" or not smooth:
            continue
        (inner,) = node.children
        if inner.op == "Square" and inner.children[0].op == "Sub":
            a, b = inner.children[0].children
            if is_pair(b, a):
                a, b = b, a
            if is_pair(a, b):
                dot = make("SumFeat", make("Mul", a, b))
                norms = make("Add", _ops.sqnorm2(a), _ops.sqnorm2(b))
                expanded = make("ReLU", make("Sub", norms, make("Mul", intcst(2), dot)))
                # An infinite norm gives inf - inf = NaN above: use the norms'
                # sum there (inf, or NaN where the direct form is NaN too).
                # (norms - floor(norms) is NaN exactly when norms is inf or NaN.)
                frac = make("Sub", norms, make("Floor", norms))
                finite = make("Sub", make("Equal", frac, frac), intcst(1))
                mapping[node] = make("IfElse", finite, expanded, norms)
    if mapping:
        formulas = substitute(list(formulas), mapping)
    dots = []
    for node in topo_order(list(formulas)):
        if node.op == "SumFeat" and node.children[0].op == "Mul":
            a, b = node.children[0].children
            if is_pair(b, a):
                a, b = b, a
            if is_pair(a, b):
                dots.append((node, a, b))
    return list(formulas), dots


def tile_size(plan: Plan) -> int:
    """Reduced-index tile: at most 512, so that buffers stay near 64 KB and the
    packed j-variables of a tile near 256 KB."""
    itemsize = np.dtype(plan.dtype).itemsize
    width = sum(f.dim for f in plan.formulas) + 2 * IB
    jdims = sum(d for c, d in zip(plan.arg_cats, plan.arg_dims) if c == "j")
    tj = 512
    while tj > 32 and (width * tj * itemsize > 65536 or jdims * tj * itemsize > 262144):
        tj //= 2
    return tj


def block_rows(plan: Plan) -> int:
    """Rows per block: IB, or 1 when the per-row states are large (K-reductions)."""
    if plan.red.uses_k and plan.K * plan.formulas[0].dim > 256:
        return 1
    return IB


def generate_source(plan: Plan, *, vector_math: bool = True, key: str | None = None,
                    ranges: bool = False) -> str:
    """The C source of ``plan``'s kernel (deterministic: golden-tested).

    ``key`` is what ``kt_key()`` returns (default: the plan's key); the cache
    stores the kernel key there and checks it when loading. ``ranges``: the
    block-sparse variant (``_RANGES_SKELETON``), which reads the j-variables
    pair by pair (no matrix-product micro-kernel: it is meant for low
    dimension).
    """
    red = plan.red
    itemsize = np.dtype(plan.dtype).itemsize
    real = "float" if plan.dtype == np.float32 else "double"
    # the block-sparse kernel's loops run over whole vectors (njv: nj rounded
    # up; the j-variables are padded), whose values past nj are never read
    # (sums: masked out): no scalar remainder loop on short intervals
    bound = "njv" if ranges else "nj"
    if ranges:
        formulas, dots, var_expr = list(plan.formulas), [], _var_expr_ranges
    else:
        formulas, dots = _rewrite_dots(plan.formulas, plan.red.smooth)
        var_expr = _var_expr
    ib = block_rows(plan)
    given = {node: ([f"dq{q}[ii * TJ + jj]"], 3) for q, (node, _, _) in enumerate(dots)}
    # j-only nodes (other than variables and the index) are computed once per
    # tile into buffers jb*, shared by the block's rows.
    pre = render_formulas(formulas, var_expr, {"i": "i", "j": "j"}, given=given)
    jonly = [
        n for n, lv in pre.levels.items()
        if lv == "j" and n.op not in ("Var", "Index") and n not in given
        and (n in formulas or any(pre.levels.get(p) == "ij" for p in _parents(n, pre.levels)))
    ]
    jb_given = {n: ([f"jb{k}_{c}[jj]" for c in range(n.dim)], 2) for k, n in enumerate(jonly)}
    r = render_formulas(formulas, var_expr, {"i": "i", "j": "j"}, given={**given, **jb_given})

    pointers = [
        f"  const real_t *restrict a{k} = (const real_t *)args[{k}];"
        for k in range(len(plan.arg_cats))
    ]
    if any(red.int_outputs) and not all(red.int_outputs):
        pointers += ["  real_t *restrict outf = (real_t *)outs[0];",
                     "  int64_t *restrict outi = (int64_t *)outs[1];"]
    elif all(red.int_outputs):
        pointers.append("  int64_t *restrict outi = (int64_t *)outs[0];")
    else:
        pointers.append("  real_t *restrict outf = (real_t *)outs[0];")

    block_setup, tile_setup = [], []
    for k, (cat, d) in enumerate(zip(plan.arg_cats, plan.arg_dims)):
        if cat == "j":
            offset = "j0" if ranges else f"j0 * {d}"
            tile_setup.append(f"const real_t *restrict y{k} = a{k} + {offset};")
    nargs = len(plan.arg_cats)
    for q, (node, x, y) in enumerate(dots):
        d, kx = x.dim, x.attrs[1]
        pointers.append(
            f"  const real_t *restrict yq{q} = (const real_t *)args[{nargs + q}];"
        )
        block_setup += [
            f"real_t xs{q}[IB * {d}];",
            f"for (int r = 0; r < IB; r++) for (int c = 0; c < {d}; c++)",
            f"  xs{q}[r * {d} + c] = r < ni ? a{kx}[(i0 + r) * {d} + c] : (real_t)0;",
            f"real_t dq{q}[IB * TJ];",
        ]
        tile_setup.append(_DOT_KERNEL.substitute(d=d, q=q))
    p_code_jonly = ""
    if jonly:
        for k, n in enumerate(jonly):
            block_setup += [f"real_t jb{k}_{c}[TJ];" for c in range(n.dim)]
        jr = render_formulas(jonly, var_expr, {"i": "i", "j": "j"}, given=given, prefix="u")
        p_code_jonly = jr.code("p", "  ")
        writes = [f"  jb{k}_{c}[jj] = {x};" for k, outs in enumerate(jr.outputs)
                  for c, x in enumerate(outs)]
        tile_setup.append(_JONLY_PASS.substitute(
            j_code=jr.code("j", "  "), writes="\n".join(writes), bound=bound))

    subs = {"E": formulas[0].dim, "E1": formulas[-1].dim, "K": plan.K}
    E = formulas[0].dim
    if red.c.get("fused"):
        names = [f"s{e}" for e in range(E)]
        out = r.outputs[0]
        tile = _FUSED_TILE.substitute(
            tile_sums=", ".join(f"{n} = 0" for n in names),
            sum_names=", ".join(names),
            ij_code=r.code("j", "  ") + "\n" + r.code("ij", "  "),
            bound=bound,
            sum_updates="\n".join(
                f"  {n} += (jj < nj) ? {out[e]} : (real_t)0;" if ranges else f"  {n} += {out[e]};"
                for e, n in enumerate(names)),
            acc_updates="\n".join(f"S->A[{e}] += {n};" for e, n in enumerate(names)),
        )
        state = f"acc_t A[{E}];"
        init = f"for (int e = 0; e < {E}; e++) S->A[e] = 0;"
        final = f"for (int e = 0; e < {E}; e++) outf[i * {E} + e] = (real_t)S->A[e];"
    else:
        writes = []
        for b, outs in enumerate(r.outputs):
            writes += [f"  buf{b}[{e} * TJ + jj] = {x};" for e, x in enumerate(outs)]
        fold = Template(red.c.get("ranges_tile", red.c["tile"]) if ranges
                        else red.c["tile"]).substitute(subs)
        if ranges and E == 1 and "ranges_scalar_tile" in red.c:
            # e.g. K-min of a scalar: the test against the K-th value rides
            # along the loop that computes the tile, and most tiles end there
            tile = Template(red.c["ranges_scalar_tile"]).substitute(
                ij_code=r.code("j", "    ") + "\n" + r.code("ij", "    "),
                value=r.outputs[0][0], K=plan.K, fold=_indent(fold, 2))
        else:
            tile = _BUFFERED_TILE.substitute(
                bound=bound,
                ij_code=r.code("j", "  ") + "\n" + r.code("ij", "  "),
                buf_writes="\n".join(writes),
                fold=fold,
            )
        block_setup.append(f"real_t buf0[{formulas[0].dim} * TJ];")
        if len(formulas) > 1:
            block_setup.append(f"real_t buf1[{formulas[1].dim} * TJ];")
        state = Template(red.c["state"]).substitute(subs)
        init = Template(red.c["init"]).substitute(subs)
        final = Template(red.c["final"]).substitute(subs)
    # i-level values are recomputed per tile (cheap loads, mostly); the j-level
    # statements left in the inner loop are the variables' loads.
    skeleton = _RANGES_SKELETON if ranges else _SKELETON
    deeper = 2 if ranges else 0  # the block-sparse loops nest two levels deeper
    return skeleton.substitute(
        title=f"{red.name}, {real}, " + ", ".join(
            f"{c}{k}[{d}]" for k, (c, d) in enumerate(zip(plan.arg_cats, plan.arg_dims))
        ),
        key=key or plan.key,
        n_outs=len(red.int_outputs),
        real=real,
        tj=tile_size(plan),
        ib=ib,
        vl=max(1, 64 // itemsize),
        kt_exp=_KT_EXP_H,
        exp_fn="kt_expf" if plan.dtype == np.float32 else "kt_exp",
        vecmath=VECMATH_DECL if vector_math else "",
        state=state,
        pointers="\n".join(pointers),
        p_code="\n".join(x for x in (r.code("p", "  "), p_code_jonly) if x),
        init=_indent(init, 6 + deeper),
        block_setup=_indent("\n".join(block_setup), 4 + deeper),
        tile_setup=_indent("\n".join(tile_setup), 6 + 2 * deeper),
        i_code=r.code("i", " " * (8 + 2 * deeper)),
        tile=_indent(tile, 8 + 2 * deeper),
        final=_indent(final, 6 + deeper),
    )


def _parents(node, levels):
    """Nodes of the rendered formula that take ``node`` as an operand."""
    return [n for n in levels if node in n.children]


# -- compilation and the cache ------------------------------------------------
_loaded: dict[str, object] = {}
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()
_compiles = [0]


def compile_count() -> int:
    """How many kernels this process has compiled (tests count recompilations)."""
    return _compiles[0]


def _carries(lib, key: str) -> bool:
    """Whether ``lib`` says it is the kernel ``key`` (a sanity check: its bytes
    were verified against the recorded digest before it was loaded)."""
    try:
        lib.kt_key.restype = ctypes.c_char_p
        return lib.kt_key().decode() == key
    except (AttributeError, UnicodeDecodeError):
        return False


_by_signature: dict = {}  # plan.signature -> (fn, tile size): the warm path


def get_kernel(plan: Plan, *, ranges: bool = False):
    """The compiled ``kt_kernel`` of ``plan``: from memory, disk, or the compiler
    (``ranges``: its block-sparse variant).

    The kernel key hashes the generated source itself (with the compiler's
    identity and flags), so a change to a template or a tile size can never
    pick up a library built from other code.
    """
    comp = find_compiler()
    source = generate_source(plan, vector_math=comp.vector_math, key="KT_KEY_PLACEHOLDER",
                             ranges=ranges)
    key = hashlib.sha256((source + "\n" + comp.identity).encode()).hexdigest()[:40]
    source = source.replace("KT_KEY_PLACEHOLDER", key)
    fn = _loaded.get(key)
    if fn is not None:
        return fn
    with _locks_guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        fn = _loaded.get(key)
        if fn is not None:
            return fn
        folder = kernel_folder("cpu")
        # Missing, foreign, a link or not the recorded bytes: rebuilt, never run.
        lib = load_verified_library(folder, key)
        if lib is None or not _carries(lib, key):
            lib = _build(source, comp, folder, key)
        fn = lib.kt_kernel
        fn.restype = None
        fn.argtypes = ([ctypes.c_int64] + [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 2
                       + [ctypes.c_void_p] * 2 if ranges else
                       [ctypes.c_int64] * 3 + [ctypes.c_void_p] * 2)
        fn._kt_lib = lib  # keep the library alive with the function
        fn._kt_key = key
        lib.kt_state_size.restype = ctypes.c_int64
        fn._kt_state_size = int(lib.kt_state_size())
        _loaded[key] = fn
        return fn


def _build(source: str, comp, folder: Path, key: str):
    """Compile ``source`` into the cache as ``key``; the loaded library."""
    src = folder / f"{key}.c"
    atomic_write(src, source.encode())
    fd, tmp_so = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".so")
    os.close(fd)
    try:
        try:
            with compiling(f"the C kernel {key[:12]}"):
                proc = comp.compile(str(src), tmp_so)
        except subprocess.TimeoutExpired as exc:
            raise CompileError(
                f"the C compiler did not finish the generated kernel {src} in "
                f"{exc.timeout:.0f} s",
                log=str(exc),
                source_path=str(src),
            ) from None
        _compiles[0] += 1
        if proc.returncode != 0:
            log = (proc.stderr or proc.stdout).strip()
            raise CompileError(
                f"the C compiler failed on the generated kernel {src}:\n{log[-4000:]}",
                log=log,
                source_path=str(src),
            )
        try:
            lib = store_library(folder, key, tmp_so)
        except OSError as exc:
            lib, why = None, str(exc)
        if lib is None or not _carries(lib, key):
            raise CompileError(f"the compiled kernel {folder / key}.so does not load"
                               f"{': ' + why if lib is None else ''}", source_path=str(src))
        return lib
    finally:
        if os.path.exists(tmp_so):
            os.unlink(tmp_so)


def _pack_tiles(a: np.ndarray, tj: int) -> np.ndarray:
    """(ny, d) -> tiles of (d, tj), zero-padded: the kernels' j-variable layout."""
    ny, d = a.shape
    nt = -(-ny // tj)
    packed = np.zeros((nt, d, tj), dtype=a.dtype)
    full = ny // tj
    if full:
        packed[:full] = a[: full * tj].reshape(full, tj, d).transpose(0, 2, 1)
    if ny % tj:
        packed[full, :, : ny % tj] = a[full * tj:].T
    return packed


def _pack_chunks(a: np.ndarray, tj: int, vl: int) -> np.ndarray:
    """(ny, d) -> chunks of (d, vl), zero-padded to whole tiles: the layout of
    the dot-product micro-kernel, which reads d consecutive vl-vectors."""
    ny, d = a.shape
    padded = -(-ny // tj) * tj
    out = np.zeros((padded // vl, d, vl), dtype=a.dtype)
    full = ny // vl
    out[:full] = a[: full * vl].reshape(full, vl, d).transpose(0, 2, 1)
    if ny % vl:
        out[full, :, : ny % vl] = a[full * vl:].T
    return out


# -- calls: fork safety and chunks ---------------------------------------------
#: [whether a kernel ran in this process, whether this process must run serial]
_omp_state = [False, False]


def _after_fork_in_child() -> None:
    """GNU OpenMP's thread pool does not survive ``fork``: a child that enters
    a parallel region after its parent used one waits forever for threads
    that only the parent has. Such a child runs its kernels on one thread."""
    if _omp_state[0]:
        _omp_state[1] = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _before_call(fn) -> None:
    if _omp_state[1] and not getattr(fn, "_kt_serial", False):
        fn._kt_lib.kt_set_parallel(0)
        fn._kt_serial = True
    _omp_state[0] = True


def _threads() -> int:
    return 1 if _omp_state[1] else max(1, len(os.sched_getaffinity(0))
                                        if hasattr(os, "sched_getaffinity")
                                        else os.cpu_count() or 1)


def _width(plan: Plan) -> int:
    """Scalar temporaries of the plan's formulas: the relative cost of a pair."""
    return sum(n.dim for n in topo_order(list(plan.formulas)))


class CpuBackend:
    """Generated C with OpenMP; see the module docstring."""

    name = "cpu"

    def available(self) -> tuple[bool, str]:
        comp = find_compiler()
        if not comp.ok:
            return False, f"no usable C compiler: {comp.reason}"
        return True, f"generated C compiled by {comp.description}"

    def supports(self, plan: Plan) -> bool:
        if plan.signature in _by_signature:
            return True
        return self.unsupported(plan) is None

    def unsupported(self, plan: Plan) -> str | None:
        """Why this backend cannot run ``plan`` (None: it can)."""
        # Only float32 and float64 have a C real type here.
        if plan.dtype not in (np.float32, np.float64):
            return f"no C type for {np.dtype(plan.dtype).name} (float32 and float64 only)"
        # Every reduction needs its C form.
        if plan.red.c is None:
            return f"the {plan.reduction} reduction has no C form"
        # Scalar rendering of huge dimensions would compile for minutes.
        width = _width(plan)
        if width > MAX_COMPONENTS:
            return (f"too wide for the {self.name} backend: {width} scalar temporaries "
                    f"> limit {MAX_COMPONENTS}")
        return None

    def run(self, plan: Plan, args, **options):
        warm = _by_signature.get(plan.signature)
        if warm is None or warm[0] is not _loaded.get(warm[2]):
            fn = get_kernel(plan)
            dot_args = tuple(
                y.attrs[1] for _, _, y in _rewrite_dots(plan.formulas, plan.red.smooth)[1]
            )
            warm = (fn, tile_size(plan), fn._kt_key, dot_args, _width(plan))
            if len(_by_signature) > 512:
                _by_signature.clear()
            _by_signature[plan.signature] = warm
        fn, tj, dot_args, width = warm[0], warm[1], warm[3], warm[4]
        arrays = [
            _pack_tiles(a, tj) if cat == "j" else np.ascontiguousarray(a, dtype=plan.dtype)
            for a, cat in zip(args, plan.arg_cats)
        ]
        vl = max(1, 64 // np.dtype(plan.dtype).itemsize)
        arrays += [_pack_chunks(np.asarray(args[k], dtype=plan.dtype), tj, vl) for k in dot_args]
        E = plan.red.out_dim([f.dim for f in plan.formulas])
        shape = (plan.nx, plan.K, E) if plan.red.uses_k else (plan.nx, E)
        outs = [
            np.empty(shape, dtype=np.int64 if is_int else plan.dtype)
            for is_int in plan.red.int_outputs
        ]
        argv = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        scratch = np.empty(plan.nx * fn._kt_state_size, dtype=np.uint8)
        outv = (ctypes.c_void_p * (len(outs) + 1))(*[o.ctypes.data for o in outs],
                                                   scratch.ctypes.data)
        _before_call(fn)
        what = f"the {plan.reduction} reduction over {plan.nx:,} x {plan.ny:,} pairs (cpu)"
        # by chunks of rows: Ctrl-C is seen between chunks (see _progress)
        for r0, r1 in chunks(plan.nx, plan.ny * width, what=what, align=IB,
                             min_items=IB * _threads()):
            fn(r0, r1, plan.ny, argv, outv)
        return tuple(outs)

    def run_ranges(self, plan: Plan, args, blk: np.ndarray, red: np.ndarray,
                   jmap: np.ndarray, imap: np.ndarray, npairs: int):
        """The block-sparse reduction of ``plan`` in one call: ``args`` sorted
        (blocks and intervals contiguous), ``blk`` (B, 4) int64 rows [r0, r1)
        and intervals ``red[v0:v1]`` of each output block, ``red`` (R, 2),
        ``jmap`` / ``imap`` the caller's index of each reduced position /
        output row. Every output row lies in one block (a block with no
        interval: the identity). Outputs in the caller's order."""
        key = (plan.signature, "ranges")
        warm = _by_signature.get(key)
        if warm is None or warm[0] is not _loaded.get(warm[2]):
            fn = get_kernel(plan, ranges=True)
            warm = (fn, None, fn._kt_key)
            if len(_by_signature) > 512:
                _by_signature.clear()
            _by_signature[key] = warm
        fn = warm[0]
        # j-variables (d, js): padded by a vector, read by the whole-vector loops
        js = plan.ny + max(1, 64 // np.dtype(plan.dtype).itemsize)
        arrays = []
        for a, cat in zip(args, plan.arg_cats):
            if cat == "j":
                a = np.asarray(a, dtype=plan.dtype)
                padded = np.zeros((a.shape[1], js), dtype=plan.dtype)
                padded[:, :plan.ny] = a.T
                arrays.append(padded)
            else:
                arrays.append(np.ascontiguousarray(a, dtype=plan.dtype))
        E = plan.red.out_dim([f.dim for f in plan.formulas])
        shape = (plan.nx, plan.K, E) if plan.red.uses_k else (plan.nx, E)
        outs = [
            np.empty(shape, dtype=np.int64 if is_int else plan.dtype)
            for is_int in plan.red.int_outputs
        ]
        blk = np.ascontiguousarray(blk, dtype=np.int64)
        red = np.ascontiguousarray(red, dtype=np.int64).reshape(-1, 2)
        jmap = np.ascontiguousarray(jmap, dtype=np.int64)
        imap = np.ascontiguousarray(imap, dtype=np.int64)
        argv = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        scratch = np.empty(plan.nx * fn._kt_state_size, dtype=np.uint8)
        outv = (ctypes.c_void_p * (len(outs) + 1))(*[o.ctypes.data for o in outs],
                                                   scratch.ctypes.data)
        _before_call(fn)
        # by chunks of output blocks (rows are written in place through imap):
        # Ctrl-C is seen between chunks; a block's pairs weigh its share
        lens = red[:, 1] - red[:, 0]
        cum = np.concatenate([[0], np.cumsum(lens)])
        pairs = (blk[:, 1] - blk[:, 0]) * (cum[blk[:, 3]] - cum[blk[:, 2]])
        what = f"the block-sparse {plan.reduction} reduction over {int(npairs):,} pairs (cpu)"
        per_block = max(1, int(npairs) // max(1, len(blk))) * _width(plan)
        for b0, b1 in chunks(len(blk), per_block, what=what, min_items=_threads()):
            sub = blk[b0:b1]
            fn(b1 - b0, sub.ctypes.data, red.ctypes.data, jmap.ctypes.data, imap.ctypes.data,
               js, int(pairs[b0:b1].sum()), argv, outv)
        return tuple(outs)
