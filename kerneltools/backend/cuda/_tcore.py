"""Tensor cores on CUDA: the Gaussian ``K @ B`` at D >= 32 by ``mma`` (opt-in).

The kernel (``templates/cuda_tcore_kernel.cu``) computes

    out_i = sum_j exp(c |x_i - y_j|^2) b_j

for ``K = exp(c d2)``, ``c`` any product of scalar parameters (the Gaussian:
``c = -gamma``), in the expanded form ``d2 = |x_i|^2 + |y_j|^2 - 2 <x_i, y_j>``
clamped at 0: the norms summed in double once per call (by the caller,
:func:`tcore_arguments`), the products ``<x_i, y_j>`` by
``mma.sync.aligned.m16n8k8`` in TF32 with the 3xTF32 split (``a = a_hi +
a_lo``, both TF32; ``a_lo b_hi + a_hi b_lo + a_hi b_hi`` accumulated in
float32; :func:`dot_3xtf32` is its NumPy model), then ``exp2`` on the exp
unit, then the product with B: by ``mma`` (3xTF32 again) when B has
``MMA_PRODUCT_MIN`` columns or more, else on the FMA units; a tile's terms
in float32, folded into double once per tile, as the SIMT kernel does.
Plain TF32 (one product, 10-bit mantissas) errs by ~1e-4 on such sums at
D = 64: the split is what keeps the float32 contract (1e-5).

Not chosen by default: nothing has been measured on a GPU yet, and the
kernel has run only on the CPU shim with ``mma`` emulated (the tests'
``_tcore_shim``: fragment layouts, split, tails), never on tensor cores.
``KERNELTOOLS_CUDA_TENSOR_CORES=1`` in the environment makes the CUDA
backend run the plans that :func:`tcore_unsupported` accepts on this kernel.
What it does not handle (other formulas, float64, D < 32, rows too wide for
shared memory, other reductions) runs on the generic CUDA kernel.

The expanded form errs by ``eps (|x|^2 + |y|^2)`` on ``d2``: on data far
from the origin that swamps ``|x - y|^2``, so :func:`tcore_arguments`
translates x and y by the mean of a sample of y's rows when that is far
next to their spread (the C backend's rule, ``_cpu_dots.centred``; the
formula reads them only through ``x - y``). An infinite feature would give
NaN (``inf - inf`` in the split and the expansion) where the direct form
gives ``exp(-inf) = 0`` (and an infinite b: ``inf_hi + NaN_lo``):
non-finite x, y or b go to the generic kernel
(:func:`tcore_arguments` returns None).

First version, not tuned. Next, on a GPU: run ``tests/backend/cuda/test_cuda_tcore.py
-m gpu`` and ``asv_bench/tcore_compare.py``; then split X into TF32 halves
once per block (it is re-split for every tile now), keep Y's halves in
shared memory, load fragments with ``ldmatrix`` and tiles with ``cp.async``
(double-buffered), and measure the thresholds (D, columns of B, N) past
which this kernel beats the SIMT one, to choose it by default there.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
import numpy as np

from .._codegen import skeleton, title
from ..cpu._dots import _CENTRE_SAMPLE
from .._ir import topo_order
from .._numpy_backend import evaluate_formula_tile
from .._plan import Plan

__all__ = ["tcore_enabled", "tcore_unsupported", "tcore_arguments", "generate_tcore_source",
           "TcoreLaunch", "launch_for", "tcore_match", "tcore_coefficient", "tf32_round",
           "dot_3xtf32", "dot_tf32", "ENV", "MIN_DIM", "MMA_PRODUCT_MIN", "SMEM_MAX"]

#: The opt-in environment variable ("1": on).
ENV = "KERNELTOOLS_CUDA_TENSOR_CORES"
#: Fewest features for which the kernel is used (the issue's D >= 32; the
#: threshold for a default is to be measured).
MIN_DIM = 32
#: Fewest columns of B for which the product with B is done by ``mma``.
MMA_PRODUCT_MIN = 16
#: Dynamic shared memory a block may use (bytes): sm_86/89's opt-in limit,
#: under sm_80's (163 KB) and sm_90's (227 KB).
SMEM_MAX = 99 * 1024
#: Reduced points per tile (a multiple of the mma's k = n = 8).
TILE = 32

_SKELETON = skeleton("cuda_tcore_kernel.cu")


def tcore_enabled() -> bool:
    """Whether the opt-in environment variable asks for tensor cores."""
    return os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on")


# -- which plans ------------------------------------------------------------------
@dataclass(frozen=True)
class TcoreMatch:
    """Argument positions of a matched plan and the exponent's factor."""

    x: int  # the i-variable (N, D)
    y: int  # the j-variable (M, D)
    b: int  # the right-hand side (M, E)
    sign: int
    factor: object  # a formula of scalar parameters, or None (factor 1)
    d: int
    e: int


def _scale(z):
    """(sign, factor, rest), z = sign * factor * rest, factor a product of
    scalar parameters and their inverses (None: 1): ``("Mul", p, factor)``
    chains, ``("Inv", p)`` for a divisor. A loop down the chain of products
    (a formula with 1,000 factors is 1,000 deep)."""
    sign, found = 1, []
    while True:
        if z.op == "Neg":
            sign, z = -sign, z.children[0]
            continue
        if z.op in ("Mul", "Div"):
            a, b = z.children
            pairs = ((b, a),) if z.op == "Div" else ((a, b), (b, a))
            hit = next(((p, other) for p, other in pairs if _is_param_scalar(p)), None)
            if hit is not None:
                found.append(("Inv", hit[0]) if z.op == "Div" else hit[0])
                z = hit[1]
                continue
        break
    factor = None
    for p in reversed(found):  # the innermost factor last in the chain
        factor = p if factor is None else ("Mul", p, factor)
    return sign, factor, z


def _is_param_scalar(n) -> bool:
    return n.dim == 1 and all(v.op != "Var" or v.attrs[0] == "p" for v in topo_order([n]))


def tcore_match(plan: Plan):
    """The :class:`TcoreMatch` of ``exp(c |x_i - y_j|^2) * b_j`` summed over
    j, or the reason the plan is not of that shape (a string)."""
    if plan.reduction != "Sum" or len(plan.formulas) != 1:
        return "not a Sum of one formula"
    f = plan.formulas[0]
    if f.op != "Mul":
        return "not a product K * b_j"
    for k, b in ((0, 1), (1, 0)):
        ex, bv = f.children[k], f.children[b]
        if ex.op == "Exp" and ex.dim == 1 and bv.op == "Var" and bv.attrs[0] == "j":
            break
    else:
        return "not exp(...) * b_j"
    sign, factor, rest = _scale(ex.children[0])
    sq = rest.children[0] if rest.op == "SumFeat" else None
    sub = sq.children[0] if sq is not None and sq.op == "Square" else None
    if sub is None or sub.op != "Sub" or any(v.op != "Var" for v in sub.children):
        return "the exponent is not a scalar times |x_i - y_j|^2"
    cats = {v.attrs[0]: v for v in sub.children}
    if set(cats) != {"i", "j"}:
        return "the squared distance is not between an i- and a j-variable"
    x, y = cats["i"], cats["j"]
    return TcoreMatch(x=x.attrs[1], y=y.attrs[1], b=bv.attrs[1], sign=sign, factor=factor,
                      d=x.dim, e=bv.dim)


def tcore_unsupported(plan: Plan) -> str | None:
    """Why the tensor-core kernel does not run ``plan`` (None: it does)."""
    # float32 only: the 3xTF32 split gives float32's accuracy, not float64's
    if np.dtype(plan.dtype) != np.float32:
        return "the tensor-core kernel is float32 only"
    m = tcore_match(plan)
    if isinstance(m, str):
        return m
    # below 32 features the products are too short for the mma to pay
    if m.d < MIN_DIM:
        return f"D = {m.d} < {MIN_DIM}"
    # one block's rows and tile must fit shared memory
    if launch_for(m.d, m.e) is None:
        return f"D = {m.d}, E = {m.e}: one block's tiles exceed {SMEM_MAX} bytes of shared memory"
    return None


def tcore_coefficient(match: TcoreMatch, args) -> float:
    """``c log2 e`` of ``K = exp(c d2)`` from the parameters' values
    (``args``: the plan's arguments, the parameters as host arrays)."""

    def value(f):  # f: a parameter, ("Inv", f) or a chain ("Mul", f, rest)
        out = 1.0
        while f is not None:
            head, f = (f[1], f[2]) if isinstance(f, tuple) and f[0] == "Mul" else (f, None)
            if isinstance(head, tuple):  # ("Inv", p)
                out *= 1.0 / float(_numpy_scalar(head[1], args))
            else:
                out *= float(_numpy_scalar(head, args))
        return out

    c = match.sign * (1.0 if match.factor is None else value(match.factor))
    return c * math.log2(math.e)


def _numpy_scalar(node, args):
    """The value of a scalar formula of parameters, by the NumPy evaluator."""
    (val,) = evaluate_formula_tile(topo_order([node]), [node], args, 0, 1, 0, 1, np.float64)
    return val.reshape(-1)[0]


def tcore_arguments(plan: Plan, args, xp):
    """``(c2, x, y, b, xn, yn)``, the kernel's arguments from the plan's
    (``xp``: their array module, NumPy or CuPy): ``c2`` from the parameters
    (read on the host), x and y as float32, translated by a centre when that
    helps (the C backend's rule: ``|c|^2 > 3 mean |y - c|^2``, c the mean of
    a sample of y's finite rows, in double), b as given, the squared norms
    of x's and y's rows summed in double and rounded to float32. None when
    x, y or b holds a NaN or an infinity (the generic kernel follows NumPy
    there; the split and the expanded form would turn inf into NaN)."""
    m = tcore_match(plan)
    host = [(a.get() if hasattr(a, "get") else np.asarray(a)) if cat == "p" else None
            for a, cat in zip(args, plan.arg_cats)]
    c2 = np.float32(tcore_coefficient(m, host))
    x, y, b = (xp.asarray(args[k]) for k in (m.x, m.y, m.b))
    if not all(bool(xp.isfinite(a).all()) for a in (x, y, b)):
        return None
    sample = y[:: max(1, len(y) // _CENTRE_SAMPLE)].astype(xp.float64)
    sample = sample[xp.isfinite(sample).all(axis=1)]
    if len(sample):
        c = sample.mean(axis=0)
        dev = sample - c
        c2c, spread = float(c @ c), float((dev * dev).sum(axis=1).mean())
        if np.isfinite(c2c) and np.isfinite(spread) and c2c > 3 * spread:
            x, y = x - c, y - c
    x, y, b = (xp.ascontiguousarray(a, dtype=xp.float32) for a in (x, y, b))
    return c2, x, y, b, _sqnorms(x, xp), _sqnorms(y, xp)


def _sqnorms(a, xp):
    """Squared norms of the rows of float32 ``a``, in double by chunks of
    rows (no double copy of ``a``), rounded to float32."""
    out = xp.empty(len(a), dtype=xp.float32)
    rows = max(1, (1 << 22) // (8 * max(1, a.shape[1])))
    for s in range(0, len(a), rows):
        blk = a[s:s + rows].astype(xp.float64)
        out[s:s + rows] = (blk * blk).sum(axis=1)
    return out


# -- the kernel -----------------------------------------------------------------------
@dataclass(frozen=True)
class TcoreLaunch:
    warps: int
    tj: int
    smem: int  # dynamic shared memory, bytes

    @property
    def block(self) -> int:
        return 32 * self.warps

    @property
    def rows_per_block(self) -> int:
        return 16 * self.warps


def _pad8(n: int) -> int:
    return -(-n // 8) * 8


def _smem(d: int, e: int, warps: int, tj: int) -> int:
    bm, xs, bs, ks = 16 * warps, _pad8(d) + 4, _pad8(e) + 8, tj + 4
    return 4 * (bm * xs + tj * xs + tj * bs + bm * ks + bm + tj)


def launch_for(d: int, e: int) -> TcoreLaunch | None:
    """4 warps (64 rows) per block, 2 when that does not fit; None: neither."""
    for warps in (4, 2):
        smem = _smem(d, e, warps, TILE)
        if smem <= SMEM_MAX:
            return TcoreLaunch(warps=warps, tj=TILE, smem=smem)
    return None


def generate_tcore_source(plan: Plan, *, key: str | None = None):
    """(source, TcoreLaunch) of the tensor-core kernel of ``plan``."""
    why = tcore_unsupported(plan)
    if why:
        raise NotImplementedError(why)
    m = tcore_match(plan)
    launch = launch_for(m.d, m.e)
    mma = m.e >= MMA_PRODUCT_MIN
    source = _SKELETON.substitute(
        title=title(plan), key=key or plan.key, warps=launch.warps, bn=launch.tj, d=m.d,
        dp=_pad8(m.d), e=m.e, ep=_pad8(m.e), mma_product=int(mma),
        product="mma" if mma else "SIMT",
    )
    return source, launch


# -- the numerics, in NumPy (the model the kernel follows) ---------------------------
def tf32_round(a) -> np.ndarray:
    """float32 ``a`` rounded to TF32 (10 explicit mantissa bits), to nearest
    with ties away from zero, as ``cvt.rna.tf32.f32``."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    finite = (bits & 0x7F800000) != 0x7F800000
    rounded = np.where(finite, (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000), bits)
    return rounded.astype(np.uint32).view(np.float32)


def _mma_chain(terms, k: int) -> np.ndarray:
    """Sum over the last axis of products ``terms`` (a list of (a, b) pairs
    of (n, k) and (m, k) TF32 arrays, products exact in float64), in float32
    by steps of 8 features as the mma's k = 8 chain: the accumulator rounded
    to float32 after each step and each term."""
    acc = np.zeros((terms[0][0].shape[0], terms[0][1].shape[0]), dtype=np.float32)
    for k0 in range(0, k, 8):
        for a, b in terms:
            step = a[:, k0:k0 + 8].astype(np.float64) @ b[:, k0:k0 + 8].T.astype(np.float64)
            acc = (acc.astype(np.float64) + step).astype(np.float32)
    return acc


def dot_3xtf32(x, y) -> np.ndarray:
    """``x @ y.T`` (float32 (n, k), (m, k)) as the kernel computes it: the
    3xTF32 split, small products first, float32 accumulation."""
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    xh, yh = tf32_round(x), tf32_round(y)
    xl, yl = tf32_round(x - xh), tf32_round(y - yh)
    return _mma_chain([(xl, yh), (xh, yl), (xh, yh)], x.shape[1])


def dot_tf32(x, y) -> np.ndarray:
    """``x @ y.T`` in plain TF32 (one product), for comparison."""
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    return _mma_chain([(tf32_round(x), tf32_round(y))], x.shape[1])
