"""``python -m kerneltools check --backend cuda --compile-only``.

Generates the CUDA source of a representative set of plans (every operation,
every reduction over both axes, both dtypes, wide formulas that take the
global-memory scheme, the block-sparse kernel of every reduction, the
opt-in tensor-core kernel) and compiles each with NVRTC, with the options the
backend uses, for each target architecture, on a machine without a GPU.
Fails on any compiler error or warning, printing the log and the numbered
source; reports registers and spills (``-Xptxas -v``).
"""

from __future__ import annotations

import functools
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .backend._autodiff import grad
from .backend.cuda._codegen import generate_cuda_source, ranges_unsupported
from .backend.cuda._tcore import generate_tcore_source
from .backend._ir import topo_order, var
from .backend.cuda._nvrtc import log_warnings, numbered, nvrtc, nvrtc_compile
from .backend._ops import OPS, make, sqdist
from .backend._plan import make_plan
from .backend.reductions import REDUCTIONS

__all__ = ["representative_plans", "check_cuda"]


def _plan(formulas, reduction, axis=1, K=1, dtype=np.float32):
    order = topo_order(list(formulas))
    nodes = [n for n in order if n.op == "Var"]
    arrays = {n: np.zeros((4, n.dim) if n.attrs[0] != "p" else (n.dim,)) for n in nodes}
    plan, _ = make_plan(list(formulas), reduction, axis, K, arrays.__getitem__, dtype, 4, 4)
    return plan


def _op_formula(name):
    """One formula applying operation ``name`` to i-, j- and parameter variables."""
    op = OPS[name]
    if op.examples:
        dims, attrs = op.examples[0]
    else:
        dims, attrs = (3,) * op.arity, ()
    cats = ("i", "j", "p")
    children = [var(cats[k % 3], f"{name}{k}", d) for k, d in enumerate(dims)]
    if op.arity == 1:  # let a unary operation see a pair-level operand
        children = [make("Sub", children[0], var("j", f"{name}y", dims[0]))]
    return make(name, *children, attrs=tuple(attrs))


#: Operations per kernel of the check. The generated source and NVRTC's time
#: grow faster than the number of operations: all 47 in one kernel are 178 kB
#: of CUDA and 6.4 to 8.0 s of NVRTC (sm_90, float32); 8 to a kernel, six
#: kernels of 70 kB in all and 3.6 s (a loaded 2-core machine).
OPS_PER_KERNEL = 8


def representative_plans():
    """(label, plan) pairs covering the generator's paths."""
    plans = []
    x, y = var("i", "x", 3), var("j", "y", 3)
    d2 = sqdist(x, y)
    w = var("j", "w", 3)
    for dtype in (np.float32, np.float64):
        dn = np.dtype(dtype).name
        # Every operation, OPS_PER_KERNEL to a kernel: the concatenation of
        # their outputs.
        names = list(OPS)
        for k in range(0, len(names), OPS_PER_KERNEL):
            group = names[k : k + OPS_PER_KERNEL]
            ops = functools.reduce(lambda a, b: make("Concat", a, b),
                                   [_op_formula(name) for name in group])
            plans.append((f"operations {group[0]}..{group[-1]} {dn}",
                          _plan([ops], "Sum", dtype=dtype)))
        gauss = make("Exp", make("Neg", make("Mul", var("p", "g", 1), d2)))
        for red in REDUCTIONS.values():
            if red.n_formulas == 2:
                formulas = [make("Neg", d2), w]
            elif red.name == "Sum":
                formulas = [make("Mul", gauss, w)]
            else:
                l1 = make("SumFeat", make("Abs", make("Sub", x, y)))
                formulas = [make("Concat", d2, l1)]  # two components
            K = 5 if red.uses_k else 1
            for axis in (1, 0):
                plans.append((f"{red.name} axis={axis} {dn}",
                              _plan(formulas, red.name, axis=axis, K=K, dtype=dtype)))
        g = grad(gauss, x, var("i", "e", 1))
        plans.append((f"gradient of a Gaussian {dn}", _plan([make("Mul", g, var("j", "b", 1))],
                                                            "Sum", dtype=dtype)))
        plans.append((f"output E=32 {dn}", _plan(
            [make("Mul", gauss, var("j", "B", 32))], "Sum", dtype=dtype)))
    wide_x, wide_y = var("i", "X", 200), var("j", "Y", 200)
    plans.append(("D=200 (i-variables read in place) float32",
                  _plan([make("Exp", make("Neg", sqdist(wide_x, wide_y)))], "Sum")))
    huge_x, huge_y = var("i", "X", 800), var("j", "Y", 800)
    plans.append(("D=800 (global scheme) ArgKMin float64",
                  _plan([sqdist(huge_x, huge_y)], "ArgKMin", K=3, dtype=np.float64)))
    return plans


#: The reductions whose block-sparse CUDA kernel the check compiles.
_RANGES_CHECKED = ("Sum", "Min_ArgMin", "Max_ArgMax", "KMin_ArgKMin", "LogSumExp",
                   "LogSumExpWeight", "SumSoftMaxWeight")


def check_cuda(archs=("sm_80", "sm_90"), *, ops_archs=("sm_90",), workers=2,
               verbose=True, file=None) -> int:
    """Compile every representative plan; returns the number of failures."""
    out = (lambda s: print(s, file=file, flush=True)) if verbose else (lambda s: None)
    lib = nvrtc()
    out(f"NVRTC {'.'.join(map(str, lib.version()))} from {lib.path}")
    jobs = []
    for label, plan in representative_plans():
        source, launch = generate_cuda_source(plan, key="check")
        # axis=0 and the wide formulas (slow to compile) on the last arch only
        for arch in (ops_archs if "axis=0" in label or "D=" in label else archs):
            jobs.append((label, arch, source, launch))
        # the block-sparse kernel (the axis is swapped away in the plan:
        # axis=1 is enough) of one member per family (the others share its
        # update and differ in their final writes only), last arch only
        if ("axis=1" in label and plan.reduction in _RANGES_CHECKED
                and ranges_unsupported(plan) is None):
            source, launch = generate_cuda_source(plan, key="check", ranges=True)
            jobs += [(f"{label} ranges", arch, source, launch) for arch in ops_archs]
    # the tensor-core kernel (opt-in): its mma and its SIMT product with B
    for d, e in ((64, 64), (256, 1)):
        exponent = make("Mul", var("p", "g", 1), sqdist(var("i", "X", d), var("j", "Y", d)))
        plan = _plan([make("Mul", make("Exp", make("Neg", exponent)), var("j", "B", e))], "Sum")
        source, launch = generate_tcore_source(plan, key="check")
        jobs += [(f"tensor cores D={d} E={e} float32", arch, source, launch) for arch in archs]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(lambda job: nvrtc_compile(job[2], job[1]), jobs))
    failures = 0
    out(f"{'plan':<48} {'arch':<6} {'regs':>5} {'spill':>6} {'smem':>6}  scheme")
    for (label, arch, source, launch), res in zip(jobs, results):
        warnings = log_warnings(res.log) if res.ok else []
        bad = not res.ok or warnings
        scheme = (f"tensor cores, {launch.warps} warps" if hasattr(launch, "warps") else
                  f"shared tj={launch.tj}" if launch.nc else "global")
        out(f"{label:<48} {arch:<6} {res.registers or 0:>5} "
            f"{(res.spill_stores or 0):>6} {launch.smem:>6}  {scheme}"
            + ("  FAILED" if bad else ""))
        if bad:
            failures += 1
            out(f"--- NVRTC log ({arch}) ---\n{res.log}\n--- source ---\n{numbered(source)}")
    out(f"{len(jobs)} compilations in {time.perf_counter() - t0:.1f} s, {failures} failed")
    return failures
