"""The layout of a dense CPU kernel: its blocks, tiles and dot products.

How many output rows a block holds (``IB``, or up to 64 for wide dot
products), how many rows one vectorised loop serves (register blocking), the
reduced-index tile ``TJ``, and which dot products and squared distances
between an i- and a j-variable the register-blocked micro-kernel computes
(:func:`_rewrite_dots`), with what the run passes for them. Read by the code
generator (:mod:`._codegen`) and by the run (:mod:`._backend`), so that both
see one layout.
"""

from __future__ import annotations

import numpy as np

from .. import _ops
from .._codegen import WIDE_MIN_DIM, width
from .._ir import intcst, topo_order
from .._ops import make, substitute
from .._plan import Plan
from ._dots import centring, steep_arguments, tile_free
from ._gemm import many_columns, padded_columns
from ._rows import sum_tested

__all__ = ["tile_size", "block_rows", "row_block", "dot_products", "tile_free_args",
           "centring_args", "IB", "DOT_MIN_DIM"]

#: Dot products and squared distances of at least this dimension between an
#: i-variable and a j-variable are computed by a register-blocked
#: matrix-product micro-kernel (IB rows x VL columns per step) instead of
#: pair by pair; the squared distance then takes the expanded form
#: |x|^2 + |y|^2 - 2 <x, y>, clamped at 0, as BLAS-based codes do.
DOT_MIN_DIM = 16

#: Output rows per block: the j-tiles are reused from cache by IB rows.
IB = 8

def _rewrite_dots(formulas, smooth: bool = True):
    """Find large dot products and squared distances between an i- and a j-variable.

    Returns the formulas (squared distances rewritten in expanded form where
    the reduction is ``smooth`` in F: the expanded form's rounding error,
    eps |x|^2 as with BLAS-based codes, blurs F slightly; Min, Max and K-min
    keep the direct form, their outputs depending on the exact order of
    nearby distances) and the list of nodes ``(node, x_i, y_j)`` that the
    micro-kernel computes by blocks: dot products ``SumFeat(Mul(x_i, y_j))``
    and exact squared distances. A squared distance that an operation steep
    at 0 reads (:func:`._cpu_dots.steep_arguments`: a root, a log, a test of
    d2 = 0) must be exact near 0, where the expanded form leaves a point's
    distance to itself at ~eps |x|^2: below ``WIDE_MIN_DIM`` features it
    keeps the direct form (straight-line code, as fast); from
    ``WIDE_MIN_DIM`` (where the direct form's loop over the features inside
    the vectorised loop measured 20x slower: exp(-|x - y|) at D = 32, 2,000
    x 2,000 float32, 0.73 s against 0.032 s expanded) it stays a
    ``SumFeat(Square(Sub))`` node given to the micro-kernel, whose store
    recomputes directly the pairs whose expanded value is within its own
    rounding error of 0 (:func:`._cpu_dots.exact_distance`).
    """
    def is_pair(a, b):
        return (a.op == "Var" and b.op == "Var" and a.cat == "i" and b.cat == "j"
                and a.dim == b.dim and a.dim >= DOT_MIN_DIM)

    def pair(node):  # (x_i, y_j) of a large product or squared distance, else None
        inner = node.children[0] if node.op == "SumFeat" else None
        if inner is not None and inner.op == "Square" and inner.children[0].op == "Sub":
            inner = inner.children[0]
        elif inner is None or inner.op != "Mul":
            return None
        a, b = inner.children
        if is_pair(b, a):
            a, b = b, a
        return (a, b) if is_pair(a, b) else None

    mapping, exact = {}, []
    steep = steep_arguments(formulas) if smooth else set()
    for node in topo_order(list(formulas)):
        if (not smooth or node.op != "SumFeat" or node.children[0].op != "Square"
                or (ab := pair(node)) is None):
            continue
        if node in steep:
            if ab[0].dim >= WIDE_MIN_DIM:
                exact.append((node, *ab))
            continue
        a, b = ab
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
    dots = [(node, *pair(node)) for node in topo_order(list(formulas))
            if node.op == "SumFeat" and node.children[0].op == "Mul" and pair(node)]
    return list(formulas), dots + exact


def tile_size(plan: Plan) -> int:
    """Reduced-index tile: at most 512, so that buffers stay near 64 KB and the
    packed j-variables of a tile near 256 KB."""
    itemsize = np.dtype(plan.dtype).itemsize
    width = sum(f.dim for f in plan.formulas) * row_block(plan) + 2 * block_rows(plan)
    jdims = sum(d for c, d in zip(plan.arg_cats, plan.arg_dims) if c == "j")
    gemm = many_columns(plan)
    if gemm:  # buffers: K's (IB x TJ); B's tile, row-major (TJ x padded E)
        width = 3 * block_rows(plan)
        jdims += padded_columns(plan) - gemm[1].dim
    tj = 512
    while tj > 32 and (width * tj * itemsize > 65536 or jdims * tj * itemsize > 262144):
        tj //= 2
    return tj


def row_block(plan: Plan) -> int:
    """Rows per vectorised loop over a tile (register blocking): several rows
    share each j-vector's loads and j-level values and give the core
    independent chains to interleave; narrow formulas only (each row keeps its
    temporaries in registers), and a divisor of :func:`block_rows` (1 for
    K-reductions with large states). Every reduction: Sum accumulates in
    registers, the others write one buffer per row. The log-sum-exp family
    summed without a maximum (``_cpu_rows.sum_tested``) takes 8 narrow rows:
    its chain per pair (formula, exp, sum) is long and carries no
    loop-carried maximum, so more rows interleave (float64 log-sum-exp at
    D = 3: 1.10x 4 rows; 6 rows about as fast, 12 or 16 slower); a Sum of
    3 or more components 2."""
    gemm = many_columns(plan)
    # the many-column Sum renders its scalar K only
    w = sum(n.dim for n in topo_order([gemm[0]])) if gemm else width(plan)
    rb = 4 if w <= 48 else (2 if w <= 160 else 1)
    narrow = w <= 24 and sum(f.dim for f in plan.formulas) <= 2  # TJ kept
    if narrow and "online" in plan.red.c and sum_tested(plan.red.c["online"], plan.dtype):
        rb = 8
    if plan.red.c.get("fused") and not gemm:
        # at most ~8 accumulators (E per row) in registers: spilled, each
        # add waits on a store (the gradient at D = 3, E = 3: 2 rows 1.15x
        # faster than 4)
        rb = min(rb, max(2, 8 // plan.formulas[0].dim))
    return min(rb, block_rows(plan))


#: Stack bytes for a block's copied x rows (``xs``) in a wide dot product.
_XS_BYTES = 131072


def block_rows(plan: Plan) -> int:
    """Rows per block: IB, or 1 when the per-row states are large (K-reductions);
    for dot products of dimension >= 128 up to 64 (a multiple of IB, the
    copied rows within _XS_BYTES), so that each packed y tile, read from
    memory, serves many rows: the micro-kernel is bandwidth-bound otherwise."""
    if plan.red.uses_k and plan.K * plan.formulas[0].dim > 256:
        return 1
    dots = _rewrite_dots(plan.formulas, plan.red.smooth)[1]
    d = max((x.dim for _, x, _ in dots), default=0)
    if d >= 128:
        fit = _XS_BYTES // (d * np.dtype(plan.dtype).itemsize)
        return max(IB, min(64, fit // IB * IB))
    return IB


def dot_products(plan: Plan) -> tuple:
    """Positions of the j-arguments whose dot products with an i-variable the
    micro-kernel computes (the run packs them once more, by chunks)."""
    return tuple(y.attrs[1] for _, _, y in _rewrite_dots(plan.formulas, plan.red.smooth)[1])


def tile_free_args(plan: Plan) -> tuple:
    """Positions of the j-arguments read only through dot products and their
    norms (_cpu_dots): the run passes no tiles for them."""
    return tile_free(*_rewrite_dots(plan.formulas, plan.red.smooth))


def centring_args(plan: Plan) -> tuple:
    """The dot products' variables that the run may translate by one vector
    (_cpu_dots.centring): the expanded form's rounding then follows the
    points' spread, not their distance from the origin."""
    return centring(plan.formulas, _rewrite_dots(plan.formulas, plan.red.smooth)[1])
