"""CUDA code generation: the kernel source and its launch shape.

A plan becomes one ``extern "C" __global__`` function, the formula rendered
by the same scalar renderer as the C backend (:mod:`._render_c`, target
``"cuda"``) inside ``templates/cuda_kernel.cu``, with the scaffolding that
both targets share from :mod:`._codegen`:

* one thread per output row (or ``rows`` rows per thread, rendered twice, so
  that each value read from shared memory serves several rows);
* the reduced index walked in tiles of ``TJ`` points; the block loads a tile
  cooperatively into shared memory, structure by point (``NC`` values per
  point, padded so that one point is one vector load), and computes there,
  once per point, every node that depends on j only;
* the reduction's state in registers, updated per pair with the CUDA form of
  its monoid (``Reduction.cuda``); Sum and the log-sum-exp family add a
  tile's terms in ``real_t`` and fold them into ``acc_t`` (double) once per
  tile, as the C backend does;
* threads past the last row compute on a clamped row and write nothing.

The block-sparse variant (``ranges=``, ``templates/cuda_ranges_kernel.cu``)
takes the C backend's format (sorted data, output blocks and their intervals
of the reduced index, see :mod:`._ranges`) in one launch: one thread block
per task (at most a block's worth of rows of one output block,
:func:`ranges_tasks`), walking that block's intervals tile by tile as the
dense kernel walks the whole axis; arg-reductions record the caller's index
and break ties by it.

When one point's reduced variables do not fit shared memory (very large D),
the kernel reads them from global memory instead ("global" scheme); large
output dimensions simply live in local memory. Nothing depends on N or M.

float32 ``exp`` is the hardware ``ex2.approx`` (relative error about
2 ulp + |x| 2^-24, the same order as KeOps' fast-math exp); the generator
rewrites ``exp(c x)`` with a parameter ``c`` as ``exp2((c log2 e) x)`` so
that the scaling is paid once per thread. float64 uses CUDA's correctly
rounded-to-1-ulp ``exp``. Everything else is compiled without fast math, so
NaN and inf propagate as in the other backends.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from string import Template

import numpy as np

from .._codegen import (
    array_args, c_real, indent, jonly_nodes, red_form, red_subs, row_major, skeleton, title,
    var_reader, width,
)
from .._ir import intcst, topo_order
from .._ops import make, substitute
from .._plan import Plan
from .._render_c import node_levels, render_formulas

__all__ = ["generate_cuda_source", "launch_shape", "choose_shape", "Launch", "TUNING",
           "ranges_shape", "ranges_tasks", "ranges_unsupported"]

#: Launch shape. ``block``: threads per block (by itemsize: float32,
#: float64); ``rows``: output rows per thread when the state is small
#: (``max_state`` values at most); ``unroll``: the inner loop's unroll factor;
#: ``by_reduction``, if given: (block, rows) by reduction name and itemsize,
#: in place of the reductions' own ``cuda["launch"]`` (the shapes that
#: measured faster for them). Benchmarks may change these; the generated
#: source (and so the cache key) follows. Measured on an H200 (asv_bench/
#: cuda_compare.py --sweep): log-sum-exp and argKmin are fastest at 256 x 2.
#: ``exp_poly_rows``: in float32, how many of a thread's ``rows`` compute
#: their pair-level ``exp2`` by a polynomial on the FMA pipes instead of the
#: exp unit (MUFU, 16 per clock per SM on an H200 against 128 FMAs), the
#: share of the exps moved off the unit that bounds the Gaussian product at
#: small D. 0 (all on the exp unit) until measured: ``cuda_compare.py
#: --sweep`` times the variants.
TUNING = {"block": {4: 256, 8: 128}, "rows": 2, "max_state": 8, "unroll": 4,
          "exp_poly_rows": 0}


def _default_shape(plan: Plan, tuning) -> tuple[int, int]:
    itemsize = np.dtype(plan.dtype).itemsize
    if "by_reduction" in tuning:
        special = tuning["by_reduction"].get(plan.reduction, {}).get(itemsize)
    else:
        special = plan.red.cuda.get("launch", {}).get(itemsize)
    return special or (tuning["block"][itemsize], tuning["rows"])

#: Shared memory a block may use without opting in (bytes).
SMEM_LIMIT = 48 * 1024

#: i-variables wider than this are read from global memory where used instead
#: of being held in registers for the whole loop.
MAX_REGISTER_DIM = 32

_SKELETON = skeleton("cuda_kernel.cu")
#: The block-sparse variant (see :func:`generate_cuda_source`).
_RANGES_SKELETON = skeleton("cuda_ranges_kernel.cu")

#: CUDA headers lack INFINITY under NVRTC: the preamble's ${defines}.
_DEFINES = "#ifndef INFINITY\n#define INFINITY __int_as_float(0x7f800000)\n#endif"

_LOAD = Template(
    r"""    __syncthreads();
    for (int t = threadIdx.x; t < nj; t += ${block}) {
      const long long j = j0 + t;
${code}
    }
    __syncthreads();"""
)

_EXP_DEFS = {
    "float": (
        "__device__ __forceinline__ float kt_exp2f(float x) {\n"
        "  float y;\n"
        "  asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(y) : \"f\"(x));\n"
        "  return y;\n"
        "}\n"
        "#define KT_EXP(x) kt_exp2f((x) * 1.44269504088896341f)\n"
        "#define KT_EXP2(x) kt_exp2f(x)"
    ),
    # 2^x on the FMA pipes, for the rows that offload the exp unit
    # (``TUNING["exp_poly_rows"]``): x = k + f with k an integer and
    # |f| <= 1/2, 2^f by a degree-5 polynomial (relative error 2.3e-7 in
    # float32 Horner, about ex2.approx's), 2^k as two exact power-of-two
    # factors so that overflow gives inf and underflow 0; NaN stays NaN (the
    # clamps are comparisons, false for NaN).
    "float_poly": (
        "__device__ __forceinline__ float kt_exp2f_poly(float x) {\n"
        "  x = x < -160.0f ? -160.0f : x;\n"
        "  x = x > 129.0f ? 129.0f : x;\n"
        "  const float t = x + 12582912.0f; /* 1.5 * 2^23: x rounded to an integer */\n"
        "  const float f = x - (t - 12582912.0f);\n"
        "  float p = 1.327647129073739e-03f;\n"
        "  p = fmaf(p, f, 9.675540961325169e-03f);\n"
        "  p = fmaf(p, f, 5.550713092088699e-02f);\n"
        "  p = fmaf(p, f, 2.4022120237350464e-01f);\n"
        "  p = fmaf(p, f, 6.931469440460205e-01f);\n"
        "  p = fmaf(p, f, 1.0000001192092896f);\n"
        "  const int k = __float_as_int(t) - 0x4B400000;\n"
        "  const int h = k >> 1;\n"
        "  return p * __int_as_float((h + 127) << 23) * __int_as_float((k - h + 127) << 23);\n"
        "}\n"
        "#define KT_EXP2P(x) kt_exp2f_poly(x)\n"
        "#define KT_EXPRP(x) kt_exp2f_poly(x)"
    ),
    "double": "#define KT_EXP(x) exp(x)\n#define KT_EXP2(x) exp2(x)",
}
#: The base of the log-sum-exp reductions' exp: 2 in float32 (F log2 e is
#: computed by the formula), e in float64.
_RED_DEFS = {
    "float": ("#define KT_REAL_MAX 3.402823466e38f\n#define KT_EXPR(x) KT_EXP2(x)\n"
              "#define KT_LOGR(x) log2(x)\n#define KT_RSCALE 0.693147180559945309417"),
    "double": ("#define KT_REAL_MAX 1.7976931348623157e308\n#define KT_EXPR(x) KT_EXP(x)\n"
               "#define KT_LOGR(x) log(x)\n#define KT_RSCALE 1.0"),
}


@dataclass(frozen=True)
class Launch:
    """How a generated kernel is launched (all fixed by the plan)."""

    block: int
    rows: int  # output rows per thread
    tj: int  # reduced points per tile
    nc: int  # values per point in shared memory (0: global scheme)
    smem: int  # dynamic shared memory, bytes

    @property
    def rows_per_block(self) -> int:
        return self.block * self.rows


def _split_scale(z, levels):
    """(sign, factor, rest) with z = sign * factor * rest, factor the product of
    z's scalar parameter-level factors (None when there are none). A loop
    down the chain of products and quotients (no recursion limit)."""
    sign, found = 1, []  # (kind, node): "mul" p, or "div" by p
    while True:
        if z.op == "Neg":
            sign, z = -sign, z.children[0]
            continue
        if z.op == "Mul":
            a, b = z.children
            hit = next(((p, other) for p, other in ((a, b), (b, a))
                        if levels.get(p) == "p" and p.dim == 1), None)
            if hit is not None:
                found.append(("mul", hit[0]))
                z = hit[1]
                continue
        if z.op == "Div":
            a, b = z.children
            if levels.get(b) == "p" and b.dim == 1:
                found.append(("div", b))
                z = a
                continue
        break
    factor = None
    for kind, p in reversed(found):  # built from the innermost factor out
        if kind == "mul":
            factor = p if factor is None else make("Mul", p, factor)
        else:
            inv = make("Inv", p)
            factor = inv if factor is None else make("Mul", factor, inv)
    return sign, factor, z


def _times_log2e(z, levels):
    """``z log2 e``, the constant folded into z's parameter-level factor."""
    log2e = make("Inv", make("Log", intcst(2)))
    s, c, rest = _split_scale(z, levels)
    scale = log2e if c is None else make("Mul", c, log2e)
    return make("Mul", make("Neg", scale) if s < 0 else scale, rest)


def _rewrite_exp(formulas, levels):
    """float32: ``exp(z)`` -> ``exp2(z log2 e)``, the scale folded into a
    parameter-level factor of ``z`` when there is one (``z = c * x``)."""
    mapping = {
        node: make("Exp2", _times_log2e(node.children[0], levels))
        for node in topo_order(list(formulas))
        if node.op == "Exp" and levels.get(node) != "p"
    }
    return substitute(list(formulas), mapping) if mapping else list(formulas)


#: Formulas with more scalar temporaries than this get one row per thread:
#: each more row renders the whole formula again (registers, compile time).
WIDE_FORMULA = 256


def _state_size(plan: Plan) -> int:
    dims = [f.dim for f in plan.formulas]
    E = plan.red.out_dim(dims)
    return E * (plan.K if plan.red.uses_k else 1) + dims[0]


def launch_shape(plan: Plan, tuning=None, shape=None) -> Launch:
    """Block size, rows per thread, tile and shared memory of ``plan``'s kernel.

    ``shape``: (threads per block, rows per thread), default from ``tuning``.
    """
    tuning = tuning or TUNING
    itemsize = np.dtype(plan.dtype).itemsize
    block, rows = shape or _default_shape(plan, tuning)
    if _state_size(plan) > tuning["max_state"] or width(plan) > WIDE_FORMULA:
        rows = 1
    nc = _shared_layout(plan)[1]
    tj = block
    if nc and tj * nc * itemsize > SMEM_LIMIT:
        tj = SMEM_LIMIT // (nc * itemsize)
    if nc and tj < 8:  # not even 8 points fit: read j-variables from global memory
        nc, tj = 0, block
    return Launch(block=block, rows=rows, tj=tj, nc=nc, smem=tj * nc * itemsize)


def _shared_layout(plan: Plan):
    """(formulas, nc): the formulas after the float32 exp rewrite, and the
    padded number of shared values per point (0 when nothing is shared)."""
    formulas, jonly, jvars = _prepare(plan)
    nc = sum(n.dim for n in jonly) + sum(v.dim for v in jvars)
    vec = 16 // np.dtype(plan.dtype).itemsize
    if nc > 1:
        nc = -(-nc // vec) * vec
    return formulas, nc


@functools.lru_cache(maxsize=256)
def _prepare_cached(signature, formulas, dtype_name, exp_of_f: bool):
    levels = node_levels(list(formulas))
    if dtype_name == "float32":
        formulas = list(_rewrite_exp(formulas, levels))
        if exp_of_f:  # the reduction works in base 2
            levels = node_levels(formulas)
            formulas[0] = _times_log2e(formulas[0], levels)
        formulas = tuple(formulas)
        levels = node_levels(list(formulas))
    # j-only nodes (besides variables) used by a pair-level node or output:
    # computed once per point into shared memory.
    jonly = jonly_nodes(formulas, levels)
    # j-variables still read at the pair level once those are given.
    given = {n: ([f"X{k}_{c}" for c in range(n.dim)], 2) for k, n in enumerate(jonly)}
    cut = node_levels(list(formulas), given)
    jvars = [n for n in cut if n.op == "Var" and n.attrs[0] == "j"]
    return formulas, tuple(jonly), tuple(jvars)


def _prepare(plan: Plan):
    return _prepare_cached(plan.signature, plan.formulas, np.dtype(plan.dtype).name,
                           bool(plan.red.cuda.get("exp_of_f")))


def choose_shape(plan: Plan, n_sm: int, tuning=None) -> tuple[int, int]:
    """(block, rows) for ``plan.nx`` output rows on a GPU of ``n_sm``
    multiprocessors: the default shape when it gives every multiprocessor
    several blocks, else smaller blocks and one row per thread, down to one
    warp, so that a few thousand rows still spread over the whole GPU."""
    tuning = tuning or TUNING
    block, rows = _default_shape(plan, tuning)
    shapes = [(block, rows)] + [(b, 1) for b in (256, 128, 64, 32) if b <= max(block, 128)]
    for b, r in shapes:
        if -(-plan.nx // (b * r)) >= 4 * n_sm:
            return b, r
    return shapes[-1]


def generate_cuda_source(plan: Plan, *, key: str | None = None, tuning=None, shape=None,
                         ranges: bool = False):
    """(source, Launch) of ``plan``'s CUDA kernel (deterministic: golden-tested).

    ``ranges``: the block-sparse variant (``templates/cuda_ranges_kernel.cu``):
    one thread block per task of :func:`ranges_tasks` (at most
    ``Launch.rows_per_block`` rows of one output block, and its intervals of
    the reduced index), tiles of an interval loaded as in the dense kernel;
    arg-reductions keep the caller's index (``jmap``) and break ties by it
    (their ``ranges_update``), outputs are written at the caller's row
    (``imap``).
    """
    red = plan.red
    if red.cuda is None:
        raise NotImplementedError(f"{red.name} has no CUDA form")
    why = ranges_unsupported(plan) if ranges else None
    if why:
        raise NotImplementedError(why)
    launch = launch_shape(plan, tuning, shape)
    tuning = tuning or TUNING
    real = c_real(plan)
    formulas, jonly, jvars = _prepare(plan)
    shared = launch.nc > 0
    # Shared-memory slots: j-only nodes, then the j-variables still needed.
    offsets, off = {}, 0
    for n in (*jonly, *jvars) if shared else ():
        offsets[n], off = off, off + n.dim
    rows = range(launch.rows)
    renders = _render_rows(formulas, jonly, offsets, launch.rows)
    subs = red_subs(formulas, plan.K)
    update = "ranges_update" if ranges and "ranges_update" in red.cuda else "update"

    def form(part: str, r: int) -> str:  # the reduction's code for row r
        return red_form(red.cuda, part, subs, S=f"r{r}")

    # float32 rows past ``first_poly`` evaluate their pair-level exp2 by the
    # polynomial (the exp unit's share offloaded to the FMA pipes).
    poly = min(tuning.get("exp_poly_rows", 0), launch.rows) if real == "float" else 0
    ij_code = _pair_code(renders, lambda r: indent(form(update, r), 6),
                         first_poly=launch.rows - poly)
    deeper = 2 if ranges else 0  # the block-sparse tile loop nests one level deeper
    pad = " " * (6 + deeper)
    j_decl = f"{pad}const long long j = j0 + jj;\n" if re.search(r"\bj\b", ij_code) else ""
    if ranges and re.search(r"\bjo\b", ij_code):  # the caller's index of point j
        j_decl += f"{pad}const long long jo = jmap[j0 + jj];\n"
    out_row = "imap[i{r}]" if ranges else "i{r}"
    source = (_RANGES_SKELETON if ranges else _SKELETON).substitute(
        title=title(plan), key=key or plan.key, scheme="shared" if shared else "global",
        real=real, defines=_DEFINES,
        exp_defs=_EXP_DEFS[real] + ("\n" + _EXP_DEFS["float_poly"] if poly else ""),
        red_defs=_RED_DEFS[real],
        tj=launch.tj, nc=max(launch.nc, 1), rows=launch.rows,
        rows_block=launch.rows_per_block,
        params="".join(f", {t} *__restrict__ {n}" for t, n in array_args(plan, "long long")),
        rows_setup="\n".join(
            f"  const long long i{r}_raw = i_first + {r * launch.block};\n"
            f"  const long long i{r} = i{r}_raw < nx ? i{r}_raw : nx - 1;" for r in rows),
        p_code=renders[0].code("p", "  "),
        i_code="\n".join(rd.code("i", "  ") for rd in renders),
        init="\n".join("  " + form("state", r) + "\n" + indent(form("init", r), 2)
                       for r in rows),
        load=indent(_load_code(jonly, jvars, offsets, launch.block), deeper) if shared else "",
        unroll=tuning["unroll"],
        ij_code=indent(ij_code, deeper),
        j_decl=j_decl,
        tile_end="\n".join(indent(form("tile_end", r), 4 + deeper) for r in rows),
        final="\n".join(f"  if (i{r}_raw < nx) {{\n    const long long i = "
                        f"{out_row.format(r=r)};\n"
                        + indent(form("final", r), 4) + "\n  }" for r in rows),
    )
    return source, launch


def ranges_unsupported(plan: Plan) -> str | None:
    """Why the block-sparse CUDA kernel cannot run ``plan`` (None: it can)."""
    red = plan.red
    if red.cuda is None:
        return f"the {plan.reduction} reduction has no CUDA form"
    # An update that records the reduced index must record the caller's
    # (sorted positions are not the caller's order) and break ties by it.
    if "ranges_update" not in red.cuda and re.search(r"\bj\b", red.cuda["update"]):
        return f"the {plan.reduction} reduction has no block-sparse CUDA update"
    return None


def ranges_shape(plan: Plan, rows_per_block, tuning=None) -> tuple[int, int]:
    """(block, rows) of the block-sparse kernel when output blocks have about
    ``rows_per_block`` rows (e.g. their median): the default shape, halved
    (rows per thread first, then threads, down to one warp) while the half
    still holds such a block: a thread block serves one output block at a
    time, and its threads past the block's rows idle."""
    tuning = tuning or TUNING
    block, rows = _default_shape(plan, tuning)
    rows = launch_shape(plan, tuning, (block, rows)).rows  # 1 for large states
    want = max(1, int(rows_per_block))
    while block * rows // 2 >= want and (rows > 1 or block > 32):
        if rows > 1:
            rows //= 2
        else:
            block //= 2
    return block, rows


def ranges_tasks(blk: np.ndarray, rows_per_block: int) -> np.ndarray:
    """(T, 4) int64 tasks of the block-sparse kernel: each output block
    ``blk[b] = (r0, r1, v0, v1)`` cut into runs of at most ``rows_per_block``
    rows with the same intervals; blocks without rows give none."""
    blk = np.asarray(blk, np.int64).reshape(-1, 4)
    counts = -(-(blk[:, 1] - blk[:, 0]) // rows_per_block)
    counts = np.maximum(counts, 0)
    owner = np.repeat(np.arange(len(blk)), counts)
    first = np.cumsum(counts) - counts
    step = np.arange(len(owner)) - np.repeat(first, counts)
    r0 = blk[owner, 0] + step * rows_per_block
    r1 = np.minimum(r0 + rows_per_block, blk[owner, 1])
    return np.ascontiguousarray(np.stack([r0, r1, blk[owner, 2], blk[owner, 3]], axis=1),
                                dtype=np.int64).reshape(-1, 4)


def _var_reads(offsets: dict, row: int):
    """The pair loop's reads for output row ``row``: j-variables from shared
    memory (global scheme: from global memory, row-major)."""
    j_read = ((lambda n, c: f"sj[jj * NC + {offsets[n] + c}]") if offsets
              else row_major("j"))
    return var_reader(row_major(f"i{row}"), j_read)


def _render_rows(formulas, jonly, offsets: dict, rows: int) -> list:
    """One rendering per output row of a thread; rows after the first share
    row 0's parameter- and j-level values."""
    base_given = {
        n: ([f"sj[jj * NC + {offsets[n] + c}]" for c in range(n.dim)], 2)
        for n in (jonly if offsets else ())
    }
    renders = []
    for r in range(rows):
        # Wide i-variables: read where used (cached loads), not held in registers.
        given = dict(base_given)
        given.update({
            n: ([f"a{n.attrs[1]}[i{r} * {n.dim} + {c}]" for c in range(n.dim)], 3)
            for n in topo_order(list(formulas))
            if n.op == "Var" and n.attrs[0] == "i" and n.dim > MAX_REGISTER_DIM
        })
        if r:
            given.update({
                n: (renders[0].names[n], 0 if lv == "p" else 2)
                for n, lv in renders[0].levels.items() if lv in ("p", "j") and n not in given
            })
        renders.append(render_formulas(formulas, _var_reads(offsets, r),
                                       {"i": f"i{r}", "j": "j"}, target="cuda",
                                       given=given, prefix=f"r{r}t"))
    return renders


def _load_code(jonly, jvars, offsets: dict, block: int) -> str:
    """The cooperative load of a tile into shared memory: the j-only nodes,
    computed from the j-variables read in global memory (row-major), then
    the j-variables still read at the pair level."""
    lr = render_formulas(list(jonly), var_reader(row_major("i0"), row_major("j")),
                         {"i": "i0", "j": "j"}, target="cuda", prefix="u")
    lines = [lr.code("p", "      "), lr.code("j", "      ")]
    for n, outs in zip(jonly, lr.outputs):
        lines += [f"      sj[t * NC + {offsets[n] + c}] = {x};" for c, x in enumerate(outs)]
    for v in jvars:
        k = v.attrs[1]
        lines += [f"      sj[t * NC + {offsets[v] + c}] = a{k}[j * {v.dim} + {c}];"
                  for c in range(v.dim)]
    return _LOAD.substitute(block=block, code="\n".join(x for x in lines if x))


def _pair_code(renders, update, first_poly=None) -> str:
    """The inner loop's body: j-level values, then per row its pair-level
    values and the reduction's ``update(row)``; rows from ``first_poly`` on
    take their exps (``KT_EXP2``, the reduction's ``KT_EXPR``) from the
    polynomial (``KT_EXP2P``, ``KT_EXPRP``)."""
    ij = [renders[0].code("j", "      ")]
    for r, rd in enumerate(renders):
        row = [rd.code("ij", "      ")]
        for b, outs in enumerate(rd.outputs):
            row.append(f"      const real_t r{r}v{b}[{len(outs)}] = {{{', '.join(outs)}}};")
        row.append(update(r))
        code = "\n".join(x for x in row if x)
        if first_poly is not None and r >= first_poly:
            code = re.sub(r"\bKT_EXP(2|R)\(", r"KT_EXP\1P(", code)
        ij.append(code)
    return "\n".join(x for x in ij if x)
