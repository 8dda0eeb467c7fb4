"""The CUDA backend: generated kernels compiled by NVRTC through CuPy.

A plan becomes one ``extern "C" __global__`` function, the formula rendered
by the same scalar renderer as the C backend (:mod:`._render_c`, target
``"cuda"``) inside the skeleton below:

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

When one point's reduced variables do not fit shared memory (very large D),
the kernel reads them from global memory instead ("global" scheme); large
output dimensions simply live in local memory. Nothing depends on N or M.

float32 ``exp`` is the hardware ``ex2.approx`` (relative error about
2 ulp + |x| 2^-24, the same order as KeOps' fast-math exp); the generator
rewrites ``exp(c x)`` with a parameter ``c`` as ``exp2((c log2 e) x)`` so
that the scaling is paid once per thread. float64 uses CUDA's correctly
rounded-to-1-ulp ``exp``. Everything else is compiled without fast math, so
NaN and inf propagate as in the other backends.

Detection never touches CUDA at import: :func:`gpu_status` runs on first use
and is cached. Kernels are compiled by CuPy's ``RawModule`` (NVRTC, cached on
disk by CuPy per architecture) and kept in memory per device.
:func:`nvrtc_compile` compiles the same source with NVRTC directly, without a
GPU, for ``python -m kerneltools check --backend cuda --compile-only``.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import hashlib
import os
import re
import sys
import threading
from dataclasses import dataclass
from string import Template

import numpy as np

from ._errors import CompileError
from ._ir import intcst, topo_order
from ._ops import make, substitute
from ._plan import Plan
from ._progress import compiling
from ._render_c import node_levels, render_formulas

__all__ = [
    "CudaBackend", "gpu_status", "generate_cuda_source", "nvrtc_compile",
    "NVRTC_OPTIONS", "TUNING",
]

#: Options passed to NVRTC, by CuPy on a GPU and by the compile-only check.
#: Warning 177 ("declared but never referenced") is expected: the renderer
#: writes every component of a vector even where only some are read, and the
#: compiler drops the others.
NVRTC_OPTIONS = ("-std=c++17", "--diag-suppress=177")

#: Launch shape. ``block``: threads per block (by itemsize: float32,
#: float64); ``rows``: output rows per thread when the state is small
#: (``max_state`` values at most); ``unroll``: the inner loop's unroll factor;
#: ``by_reduction``, if given: (block, rows) by reduction name and itemsize,
#: in place of the reductions' own ``cuda["launch"]`` (the shapes that
#: measured faster for them). Benchmarks may change these; the generated
#: source (and so the cache key) follows. Measured on an H200 (asv_bench/
#: cuda_compare.py --sweep): log-sum-exp and argKmin are fastest at 256 x 2.
TUNING = {"block": {4: 256, 8: 128}, "rows": 2, "max_state": 8, "unroll": 4}


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

_SKELETON = Template(
    r"""/* kerneltools generated CUDA kernel: ${title}
 * key ${key}; ${scheme} scheme, ${rows} row(s) per thread, tile ${tj}
 */
typedef ${real} real_t;
typedef ${acc} acc_t;
#define PI_R ((real_t)3.141592653589793238462643383279502884)
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#define KT_LT(a, b) ((a) < (b) || ((b) != (b) && (a) == (a)))
#define KT_FINITE(x) ((x) - (x) == 0)
#define KT_FOR(v, n) _Pragma("unroll") for (int v = 0; v < (n); v++)
${exp_defs}
${red_defs}
#define TJ ${tj}
#define NC ${nc}

extern "C" __global__ void kt_kernel(const long long nx, const long long ny${params}) {
  extern __shared__ __align__(16) unsigned char kt_smem[];
  real_t *sj = (real_t *)kt_smem;
  const long long i_first = (long long)blockIdx.x * ${rows_block} + threadIdx.x;
${rows_setup}
${p_code}
${i_code}
${init}
  for (long long j0 = 0; j0 < ny; j0 += TJ) {
    const int nj = (int)(ny - j0 < TJ ? ny - j0 : TJ);
${load}
    #pragma unroll ${unroll}
    for (int jj = 0; jj < nj; jj++) {
${j_decl}${ij_code}
    }
${tile_end}
  }
${final}
}
"""
)

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


# -- detection ------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def gpu_status() -> tuple[bool, str]:
    """(usable, reason): CuPy importable, a device present, NVRTC loadable.

    Never raises and never warns; called on first use, not at import.
    """
    if os.environ.get("KERNELTOOLS_DISABLE_CUDA"):
        return False, "disabled by the environment variable KERNELTOOLS_DISABLE_CUDA"
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken install
        return False, (f"CuPy is not importable ({type(exc).__name__}: {exc}); "
                       "install it with pip install 'kerneltools[cuda]'")
    try:
        ok = cupy.is_available()
    except Exception:
        ok = False
    if not ok:
        try:
            n = cupy.cuda.runtime.getDeviceCount()
            why = "no CUDA device" if n == 0 else "the device is not usable"
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}"
        return False, f"CuPy {cupy.__version__} is installed but sees no usable GPU ({why})"
    try:
        major, minor = cupy.cuda.nvrtc.getVersion()
    except Exception as exc:
        return False, (f"a GPU is present but NVRTC cannot be loaded ({type(exc).__name__}); "
                       "pip install nvidia-cuda-nvrtc (same CUDA major version as CuPy)")
    try:
        name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        name = "a CUDA device"
    return True, f"{name}, CuPy {cupy.__version__}, NVRTC {major}.{minor}"


def is_cupy_array(a) -> bool:
    """True for a CuPy ndarray, without importing CuPy."""
    mod = type(a).__module__
    return mod.startswith("cupy") and hasattr(a, "__cuda_array_interface__")


# -- code generation --------------------------------------------------------------
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
    z's scalar parameter-level factors (None when there are none)."""
    if z.op == "Neg":
        s, c, r = _split_scale(z.children[0], levels)
        return -s, c, r
    if z.op == "Mul":
        a, b = z.children
        for p, other in ((a, b), (b, a)):
            if levels.get(p) == "p" and p.dim == 1:
                s, c, r = _split_scale(other, levels)
                return s, (p if c is None else make("Mul", p, c)), r
    if z.op == "Div":
        a, b = z.children
        if levels.get(b) == "p" and b.dim == 1:
            s, c, r = _split_scale(a, levels)
            inv = make("Inv", b)
            return s, (inv if c is None else make("Mul", c, inv)), r
    return 1, None, z


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


def _width(plan: Plan) -> int:
    return sum(n.dim for n in topo_order(list(plan.formulas)))


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
    if _state_size(plan) > tuning["max_state"] or _width(plan) > WIDE_FORMULA:
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
    parents: dict = {}
    for n in levels:
        for c in n.children:
            parents.setdefault(c, []).append(n)
    jonly = [
        n for n, lv in levels.items()
        if lv == "j" and n.op not in ("Var", "Index", "Int", "Pi")
        and (n in formulas or any(levels.get(p) == "ij" for p in parents.get(n, ())))
    ]
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


def generate_cuda_source(plan: Plan, *, key: str | None = None, tuning=None, shape=None):
    """(source, Launch) of ``plan``'s CUDA kernel (deterministic: golden-tested)."""
    red = plan.red
    if red.cuda is None:
        raise NotImplementedError(f"{red.name} has no CUDA form")
    launch = launch_shape(plan, tuning, shape)
    tuning = tuning or TUNING
    real = "float" if plan.dtype == np.float32 else "double"
    formulas, jonly, jvars = _prepare(plan)
    shared = launch.nc > 0

    # Shared-memory slots: j-only nodes, then the j-variables still needed.
    offsets, off = {}, 0
    for n in (*jonly, *jvars):
        if shared:
            offsets[n] = off
            off += n.dim

    def var_expr_for(row: int):
        def var_expr(node, c):
            cat, k = node.attrs
            if cat == "i":
                return f"a{k}[i{row} * {node.dim} + {c}]"
            if cat == "j":
                if shared:
                    return f"sj[jj * NC + {offsets[node] + c}]"
                return f"a{k}[j * {node.dim} + {c}]"
            return f"a{k}[{c}]"
        return var_expr

    # Wide i-variables: read where used (cached loads), not held in registers.
    def wide_given(row):
        return {
            n: ([f"a{n.attrs[1]}[i{row} * {n.dim} + {c}]" for c in range(n.dim)], 3)
            for n in topo_order(list(formulas))
            if n.op == "Var" and n.attrs[0] == "i" and n.dim > MAX_REGISTER_DIM
        }

    base_given = {}
    if shared:
        base_given = {
            n: ([f"sj[jj * NC + {offsets[n] + c}]" for c in range(n.dim)], 2) for n in jonly
        }
    rows = launch.rows
    renders = []
    for r in range(rows):
        given = dict(base_given)
        given.update(wide_given(r))
        if r:  # rows > 0 share row 0's parameter- and j-level values
            given.update({
                n: (renders[0].names[n], 0 if lv == "p" else 2)
                for n, lv in renders[0].levels.items() if lv in ("p", "j") and n not in given
            })
        renders.append(render_formulas(formulas, var_expr_for(r), {"i": f"i{r}", "j": "j"},
                                       target="cuda", given=given, prefix=f"r{r}t"))

    E = formulas[0].dim
    subs = {"E": E, "E1": formulas[-1].dim, "K": plan.K}

    def per_row(template: str, r: int) -> str:
        return Template(template).safe_substitute(subs, S=f"r{r}")

    params = []
    for k, (cat, d) in enumerate(zip(plan.arg_cats, plan.arg_dims)):
        params.append(f", const real_t *__restrict__ a{k}")
    if any(not x for x in red.int_outputs):
        params.append(", real_t *__restrict__ outf")
    if any(red.int_outputs):
        params.append(", long long *__restrict__ outi")

    rows_setup = []
    for r in range(rows):
        rows_setup += [
            f"  const long long i{r}_raw = i_first + {r * launch.block};",
            f"  const long long i{r} = i{r}_raw < nx ? i{r}_raw : nx - 1;",
        ]
    i_code = "\n".join(rd.code("i", "  ") for rd in renders)
    init = "\n".join(
        "  " + per_row(red.cuda["state"], r) + "\n" + _indent(per_row(red.cuda["init"], r), 2)
        for r in range(rows)
    )

    load = ""
    if shared:
        # j-variables are read from global memory (row-major) while loading.
        def gvar(node, c):
            cat, k = node.attrs
            if cat == "j":
                return f"a{k}[j * {node.dim} + {c}]"
            return var_expr_for(0)(node, c)
        lr = render_formulas(list(jonly), gvar, {"i": "i0", "j": "j"}, target="cuda",
                             prefix="u")
        lines = [lr.code("p", "      "), lr.code("j", "      ")]
        for n, outs in zip(jonly, lr.outputs):
            lines += [f"      sj[t * NC + {offsets[n] + c}] = {x};" for c, x in enumerate(outs)]
        for v in jvars:
            k = v.attrs[1]
            lines += [f"      sj[t * NC + {offsets[v] + c}] = a{k}[j * {v.dim} + {c}];"
                      for c in range(v.dim)]
        load = _LOAD.substitute(block=launch.block, code="\n".join(x for x in lines if x))

    ij = [renders[0].code("j", "      ")]
    for r, rd in enumerate(renders):
        ij.append(rd.code("ij", "      "))
        for b, outs in enumerate(rd.outputs):
            ij.append(f"      const real_t r{r}v{b}[{len(outs)}] = {{{', '.join(outs)}}};")
        ij.append(_indent(per_row(red.cuda["update"], r), 6))
    tile_end = "\n".join(
        _indent(per_row(red.cuda.get("tile_end", ""), r), 4) for r in range(rows)
    )
    final = "\n".join(
        f"  if (i{r}_raw < nx) {{\n    const long long i = i{r};\n"
        + _indent(per_row(red.cuda["final"], r), 4) + "\n  }"
        for r in range(rows)
    )
    ij_code = "\n".join(x for x in ij if x)
    j_decl = "      const long long j = j0 + jj;\n" if re.search(r"\bj\b", ij_code) else ""
    source = _SKELETON.substitute(
        title=f"{red.name}, {real}, " + ", ".join(
            f"{c}{k}[{d}]" for k, (c, d) in enumerate(zip(plan.arg_cats, plan.arg_dims))
        ),
        key=key or plan.key,
        scheme="shared" if shared else "global",
        real=real,
        acc="double",
        exp_defs=_EXP_DEFS[real],
        red_defs=_RED_DEFS[real],
        tj=launch.tj,
        nc=max(launch.nc, 1),
        block=launch.block,
        rows=rows,
        rows_block=launch.rows_per_block,
        params="".join(params),
        rows_setup="\n".join(rows_setup),
        p_code=renders[0].code("p", "  "),
        i_code=i_code,
        init=init,
        load=load,
        unroll=tuning["unroll"],
        ij_code=ij_code,
        j_decl=j_decl,
        tile_end=tile_end,
        final=final,
    )
    return source, launch


def _indent(code: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + line if line else line for line in code.splitlines())


def numbered(source: str) -> str:
    """The source with line numbers, for error messages."""
    return "\n".join(f"{k:5d}  {line}" for k, line in enumerate(source.splitlines(), 1))


# -- NVRTC without a GPU (the compile-only check) ----------------------------------
class _Nvrtc:
    """NVRTC through ctypes: needs libnvrtc only, no GPU and no driver."""

    def __init__(self):
        self.lib, self.path = self._load()
        for name in ("nvrtcGetErrorString",):
            getattr(self.lib, name).restype = ctypes.c_char_p

    @staticmethod
    def _candidates():
        for base in sys.path:
            for pattern in ("nvidia/cu13/lib/libnvrtc.so.*", "nvidia/cu12/lib/libnvrtc.so.*",
                            "nvidia/cuda_nvrtc/lib/libnvrtc.so.*"):
                yield from sorted(glob.glob(os.path.join(base, pattern)))
        for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                     "/usr/local/cuda"):
            if root:
                yield from sorted(glob.glob(os.path.join(root, "lib64", "libnvrtc.so*")))
        yield "libnvrtc.so"

    def _load(self):
        errors = []
        for path in self._candidates():
            if ".alt." in path or "builtins" in path:
                continue
            try:
                # Some wheels lack an RPATH to their builtins library: load it first.
                folder = os.path.dirname(path)
                for builtins in sorted(glob.glob(os.path.join(folder, "libnvrtc-builtins.so.*"))):
                    if ".alt." not in builtins:
                        ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
                return ctypes.CDLL(path), path
            except OSError as exc:
                errors.append(f"{path}: {exc}")
        raise OSError("NVRTC (libnvrtc) not found; pip install nvidia-cuda-nvrtc. "
                      + "; ".join(errors[-3:]))

    def version(self) -> tuple[int, int]:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        return major.value, minor.value

    def compile(self, source: str, options, name: str = "kt_kernel.cu"):
        """(ok, log, binary): binary is the cubin (sm_XX) or PTX (compute_XX)."""
        lib = self.lib
        prog = ctypes.c_void_p()
        rc = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(),
                                    0, None, None)
        if rc:
            raise RuntimeError(f"nvrtcCreateProgram failed: {lib.nvrtcGetErrorString(rc)}")
        try:
            opts = [o.encode() for o in options]
            argv = (ctypes.c_char_p * len(opts))(*opts)
            rc = lib.nvrtcCompileProgram(prog, len(opts), argv)
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            buf = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(prog, buf)
            log = buf.value.decode(errors="replace")
            if rc:
                return False, f"{lib.nvrtcGetErrorString(rc).decode()}\n{log}", b""
            cubin = any(o.startswith("-arch=sm_") or o.startswith("--gpu-architecture=sm_")
                        for o in options)
            get_size, get = (("nvrtcGetCUBINSize", "nvrtcGetCUBIN") if cubin
                             else ("nvrtcGetPTXSize", "nvrtcGetPTX"))
            getattr(lib, get_size)(prog, ctypes.byref(size))
            out = ctypes.create_string_buffer(size.value)
            getattr(lib, get)(prog, out)
            return True, log, out.raw
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))


@functools.lru_cache(maxsize=None)
def nvrtc() -> _Nvrtc:
    return _Nvrtc()


@dataclass
class CheckResult:
    arch: str
    ok: bool
    log: str
    registers: int | None
    spill_stores: int | None
    spill_loads: int | None
    smem_static: int | None


def nvrtc_compile(source: str, arch: str = "sm_90") -> CheckResult:
    """Compile ``source`` as the backend does (plus ``-Xptxas -v``) for ``arch``."""
    ok, log, _ = nvrtc().compile(
        source, (*NVRTC_OPTIONS, f"-arch={arch}", "--ptxas-options=-v")
    )

    def grab(pattern):
        m = re.search(pattern, log)
        return int(m.group(1)) if m else None

    return CheckResult(
        arch=arch, ok=ok, log=log,
        registers=grab(r"Used (\d+) registers"),
        spill_stores=grab(r"(\d+) bytes spill stores"),
        spill_loads=grab(r"(\d+) bytes spill loads"),
        smem_static=grab(r"(\d+) bytes smem"),
    )


def log_warnings(log: str) -> list[str]:
    """The compiler's warnings in a log (NVRTC reports them on success too)."""
    return [line for line in log.splitlines() if re.search(r"\bwarning\b", line, re.I)]


# -- running ------------------------------------------------------------------------
_kernels: dict = {}  # (device id, source key) -> cupy RawKernel
_kernel_lock = threading.Lock()
_by_signature: dict = {}  # (device id, plan signature) -> (kernel, Launch)
_compiles = [0]


def compile_count() -> int:
    return _compiles[0]


@functools.lru_cache(maxsize=None)
def _sm_count(device_id: int) -> int:
    import cupy

    return int(cupy.cuda.Device(device_id).attributes["MultiProcessorCount"])


def get_kernel(plan: Plan):
    """(RawKernel, Launch) of ``plan`` on the current device."""
    import cupy

    dev = cupy.cuda.Device().id
    shape = choose_shape(plan, _sm_count(dev))
    hit = _by_signature.get((dev, plan.signature, shape))
    if hit is not None:
        return hit
    source, launch = generate_cuda_source(plan, key="KT_KEY_PLACEHOLDER", shape=shape)
    key = hashlib.sha256(source.encode()).hexdigest()[:40]
    source = source.replace("KT_KEY_PLACEHOLDER", key)
    with _kernel_lock:
        kernel = _kernels.get((dev, key))
        if kernel is None:
            try:
                with compiling(f"the CUDA kernel {key[:12]}"):
                    module = cupy.RawModule(code=source, options=NVRTC_OPTIONS)
                    kernel = module.get_function("kt_kernel")
            except cupy.cuda.compiler.CompileException as exc:
                raise CompileError(
                    f"NVRTC failed on the generated CUDA kernel:\n{exc}\n\n"
                    f"options: {' '.join(NVRTC_OPTIONS)}\n{numbered(source)}",
                    log=str(exc),
                ) from None
            _compiles[0] += 1
            _kernels[(dev, key)] = kernel
        if len(_by_signature) > 512:
            _by_signature.clear()
        _by_signature[(dev, plan.signature, shape)] = (kernel, launch)
    return kernel, launch


class CudaBackend:
    """Generated CUDA through CuPy; see the module docstring."""

    name = "cuda"

    def available(self) -> tuple[bool, str]:
        return gpu_status()

    def supports(self, plan: Plan) -> bool:
        return self.unsupported(plan) is None

    def unsupported(self, plan: Plan) -> str | None:
        """Why this backend cannot run ``plan`` (None: it can)."""
        if plan.dtype not in (np.float32, np.float64):
            return f"no CUDA type for {np.dtype(plan.dtype).name} (float32 and float64 only)"
        if plan.red.cuda is None:
            return f"the {plan.reduction} reduction has no CUDA form"
        from ._cpu_backend import MAX_COMPONENTS

        width = sum(n.dim for n in topo_order(list(plan.formulas)))
        if width > MAX_COMPONENTS:
            return (f"too wide for the {self.name} backend: {width} scalar temporaries "
                    f"> limit {MAX_COMPONENTS}")
        return None

    def run(self, plan: Plan, args, **options):
        import cupy

        kernel, launch = get_kernel(plan)
        on_gpu = any(is_cupy_array(a) for a in args)
        arrays = [cupy.ascontiguousarray(cupy.asarray(a), dtype=plan.dtype) for a in args]
        E = plan.red.out_dim([f.dim for f in plan.formulas])
        shape = (plan.nx, plan.K, E) if plan.red.uses_k else (plan.nx, E)
        outs = [
            cupy.empty(shape, dtype=np.int64 if is_int else plan.dtype)
            for is_int in plan.red.int_outputs
        ]
        # Float outputs first, then the index outputs: the kernel's order.
        ordered = [o for o, is_int in zip(outs, plan.red.int_outputs) if not is_int]
        ordered += [o for o, is_int in zip(outs, plan.red.int_outputs) if is_int]
        grid = (-(-plan.nx // launch.rows_per_block),)
        kernel(grid, (launch.block,),
               (np.int64(plan.nx), np.int64(plan.ny), *arrays, *ordered),
               shared_mem=launch.smem)
        if on_gpu:
            return tuple(outs)
        return tuple(cupy.asnumpy(o) for o in outs)
