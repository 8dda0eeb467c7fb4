"""Wide dot products in the dense C kernel: the j-variables' squared norms.

A squared distance ``|x_i - y_j|^2`` of dimension >= ``DOT_MIN_DIM`` is
computed in the expanded form ``|x_i|^2 + |y_j|^2 - 2 <x_i, y_j>`` (see
:func:`._layout._rewrite_dots`), the products by the register-blocked
micro-kernel. Left to the generic code, ``|y_j|^2`` is a j-only node: every
block of rows recomputes it for every tile, a loop over the D features whose
one accumulator chains each FMA to the previous one (about a third of the
run time of ``K @ B`` at D = 79, half of the products' time at D = 2,000).

Here the norms are computed once per call, in double (by chunks of rows, so
that no double copy of ``y`` is made), rounded to the plan's dtype and
passed to the kernel as one more array (``yn<q>``, one value per point,
read as ``yn<q>[j]``). A j-variable then read only through the products
and the norms (``tile_free``) is not packed by tiles at all: one copy of
``y`` (the micro-kernel's chunks) instead of two. NaN and inf propagate as in the kernel's own sum (a
NaN feature gives a NaN norm, an infinite one inf); the expanded form's
handling of an infinite norm and its clamp at 0 are unchanged.

The expanded form errs by about ``eps (|x|^2 + |y|^2)``: on points far from
the origin (data at an offset of 1000, unit spread: ``eps |x|^2`` ~ 1 in
float32) that swamps ``|x - y|^2``. Where the formulas read the products'
variables only through differences of two of them (squared distances,
``x_i - y_j`` in their gradients), the result does not change when all of
them move by one vector ``c``: :func:`centring` finds those plans, and
:func:`centred` translates the arrays by the mean of (a sample of) the
j-variable's rows, in double, before the call when that is far from the
origin next to the points' spread. The error is then
``eps (|x - c|^2 + |y - c|^2)``, that of the points' spread, at the cost of
one translated copy of each such array.

Near 0 the expanded form leaves a point's squared distance to itself at
~eps |x|^2, which an operation steep at 0 (a root, a log, a test of d2 = 0:
:func:`steep_arguments`) turns into a large error (exp(-|x - y|) on x = y:
sqrt(eps) relative). Below ``WIDE_MIN_DIM`` features such distances keep
the direct form; from there the micro-kernel computes them
(:func:`exact_distance`, :func:`dot_kernel`): its store writes the expanded
value and, where a vector of lanes holds one at or below ``NEAR_FACTOR * D
* eps`` times the norms' sum (near-duplicates: the diagonal of K(X, X)),
recomputes those lanes directly (in the input precision: the differences
of near-equal features are exact). Elsewhere that costs a compare per pair
and a branch not taken.
"""

from __future__ import annotations

from string import Template

import numpy as np

from .. import _ops
from .._ir import topo_order

__all__ = ["centred", "centring", "dot_kernel", "exact_distance", "norm_given",
           "norm_pointers", "row_sqnorms", "steep_arguments", "tile_free", "NEAR_FACTOR"]

_DOT_KERNEL = Template(
    r"""/* <x_i, y_j> for the block's rows and the tile, MR rows at a time: MR x 2 VL
   accumulators (two vectors per row, so that each broadcast x feeds two
   FMAs), each chunk of y reused by the block's IB / MR row groups from cache.
   yq holds y in chunks of VL points, each chunk d x VL contiguous. */
for (int64_t jc = 0; jc < nj; jc += 2 * VL) {
  const real_t *y0 = yq${q} + (j0 + jc) * ${d};
  const real_t *y1 = y0 + ${d} * VL;
  for (int r8 = 0; r8 < ni; r8 += MR) {
    real_t acc[MR][2 * VL];
    for (int r = 0; r < MR; r++) for (int l = 0; l < 2 * VL; l++) acc[r][l] = 0;
    const real_t *xr = xs${q} + r8 * ${d};
    for (int c = 0; c < ${d}; c++) {
      KT_ROWS_LOOP
      for (int r = 0; r < MR; r++) {
        const real_t xv = xr[r * ${d} + c];
        #pragma omp simd
        for (int l = 0; l < VL; l++) {
          acc[r][l] += xv * y0[c * VL + l];
          acc[r][VL + l] += xv * y1[c * VL + l];
        }
      }
    }
${store}
  }
}"""
)

#: The products' store: dq<q> holds <x_i, y_j> for the block's rows.
_DOT_STORE = """    for (int r = 0; r < MR; r++) for (int l = 0; l < 2 * VL; l++)
      dq${q}[(r8 + r) * TJ + jc + l] = acc[r][l];"""

#: The exact squared distance's store (:func:`exact_distance`): the expanded
#: value, clamped at 0; where a vector of lanes holds one at or below
#: ``near`` times the norms' sum (or NaN: a non-finite norm), the direct
#: form of all its lanes, from the copied x rows and the y chunks, replaces
#: those lanes' values (vectorised over the lanes: near-duplicates come in
#: runs of j when rows repeat). In the input precision: the features of
#: near-equal points are within a factor 2 of each other, so their
#: differences are exact (Sterbenz) and the sum of their squares, without
#: cancellation, has a relative error <= D u, that of the direct form below
#: WIDE_MIN_DIM. (Where 2.5% of the pairs are duplicates, scattered over j,
#: float32, D = 64, single thread: 1.85x the time of ec9fa72's expanded form
#: in float32, 3.6x in double; 0.97x when the copies are consecutive.)
_DISTANCE_STORE = Template("""    for (int r = 0; r < MR; r++) {
      const real_t xn = xn${q}[r8 + r];
      int near = 0;
      #pragma omp simd reduction(|:near)
      for (int l = 0; l < 2 * VL; l++) {
        const real_t nrm = xn + yn${q}[j0 + jc + l];
        const real_t v = nrm - 2 * acc[r][l];
        const real_t d2 = v > 0 ? v : (real_t)0;
        dq${q}[(r8 + r) * TJ + jc + l] = d2;
        near |= !(d2 > (real_t)${near} * nrm);
      }
      if (near) { /* near-duplicates (the diagonal of K(X, X)): rarely taken */
        real_t e[2 * VL];
        for (int l = 0; l < 2 * VL; l++) e[l] = 0;
        for (int c = 0; c < ${d}; c++) {
          const real_t xv = xr[r * ${d} + c];
          #pragma omp simd
          for (int l = 0; l < VL; l++) {
            const real_t t0 = xv - y0[c * VL + l], t1 = xv - y1[c * VL + l];
            e[l] += t0 * t0;
            e[VL + l] += t1 * t1;
          }
        }
        for (int l = 0; l < 2 * VL; l++) {
          const real_t nrm = xn + yn${q}[j0 + jc + l];
          if (!(dq${q}[(r8 + r) * TJ + jc + l] > (real_t)${near} * nrm))
            dq${q}[(r8 + r) * TJ + jc + l] = e[l];
        }
      }
    }""")

#: ``c`` of the exact squared distance's threshold ``c D eps (|x|^2 +
#: |y|^2)``. The expanded value errs by at most about ``(D + 2) u (|x|^2 +
#: |y|^2)`` (u = eps / 2: D products summed, |2 x.y| <= |x|^2 + |y|^2, the
#: rounded norms, the subtraction), so c = 2 recomputes every pair whose
#: value may be rounding alone with a 4x margin (a true distance of 0 always
#: is), and leaves only pairs whose true d2 exceeds 3 times that worst case.
NEAR_FACTOR = 2


def exact_distance(node) -> bool:
    """Whether dot product ``node`` of the C kernel is a squared distance
    ``SumFeat(Square(Sub(x_i, y_j)))``: its micro-kernel stores the expanded
    value, recomputing pairs near 0 (:data:`_DISTANCE_STORE`), instead of the
    product."""
    return node.children[0].op == "Square"


def dot_kernel(q: int, node, x, dtype) -> tuple:
    """(block setup lines, tile setup code) of dot product ``q``: the block's x
    rows copied (and their squared norms, in double, for a distance), the
    micro-kernel per tile."""
    d, kx = x.dim, x.attrs[1]
    block = [
        f"real_t xs{q}[IB * {d}];",
        f"for (int r = 0; r < IB; r++) for (int c = 0; c < {d}; c++)",
        f"  xs{q}[r * {d} + c] = r < ni ? a{kx}[(i0 + r) * {d} + c] : (real_t)0;",
        f"real_t dq{q}[IB * TJ];",
    ]
    store = Template(_DOT_STORE).substitute(q=q)
    if exact_distance(node):
        block += [f"real_t xn{q}[IB];", "for (int r = 0; r < IB; r++) {", "  double s = 0;",
                  f"  for (int c = 0; c < {d}; c++) s += (double)xs{q}[r * {d} + c]"
                  f" * xs{q}[r * {d} + c];", f"  xn{q}[r] = (real_t)s;", "}"]
        near = NEAR_FACTOR * d * float(np.finfo(dtype).eps)
        store = _DISTANCE_STORE.substitute(q=q, d=d, near=f"{near:.9g}")
    return block, _DOT_KERNEL.substitute(d=d, q=q, store=store)


#: Bytes of one chunk of the norms' double-precision pass (bounds its copy:
#: rows of 4096 would be 65 MB at D = 2,000).
_CHUNK_BYTES = 1 << 22
#: Rows of the j-variable whose mean is the centre of :func:`centred`.
_CENTRE_SAMPLE = 1024


def norm_given(dots) -> dict:
    """``given`` entries of the renderer for the dot products' j-norms:
    ``|y|^2`` of dot product q read from ``yn<q>[j]`` (a j-level value)."""
    return {_ops.sqnorm2(y): ([f"yn{q}[j]"], 2) for q, (_, _, y) in enumerate(dots)}


def tile_free(formulas, dots) -> tuple:
    """Positions of the dot products' j-variables that ``formulas`` read only
    through the products and their norms: the kernel needs no tile-packed
    copy of them (the run passes a placeholder, no tile pointer is made)."""
    cut = {n for n, _, _ in dots} | set(norm_given(dots))
    seen, read, stack = set(), set(), list(formulas)
    while stack:
        n = stack.pop()
        if n in seen or n in cut:
            continue
        seen.add(n)
        if n.op == "Var" and n.cat == "j":
            read.add(n.attrs[1])
        stack.extend(n.children)
    return tuple(sorted({y.attrs[1] for _, _, y in dots} - read))


def norm_pointers(dots) -> list:
    """(C type, name) of the norm arrays, in the order the run passes them."""
    return [("const real_t", f"yn{q}") for q in range(len(dots))]


def row_sqnorms(a: np.ndarray, dtype, length: int = 0) -> np.ndarray:
    """Squared norms of the rows of ``a`` (n, d), summed in double and
    rounded to ``dtype``, zero-padded to ``length`` values (the exact
    distances' store reads whole vectors of a tile: :func:`dot_kernel`)."""
    a = np.asarray(a)
    out = np.zeros(max(len(a), length), dtype=np.float64)
    rows = _chunk_rows(a)
    for s in range(0, len(a), rows):
        blk = np.asarray(a[s:s + rows], dtype=np.float64)
        np.einsum("ij,ij->i", blk, blk, out=out[s:s + len(blk)])
    with np.errstate(over="ignore"):  # a norm past the dtype's range: inf
        return out.astype(dtype)


def centring(formulas, dots) -> tuple:
    """``(positions, centre_on)``: the positions of the dot products'
    variables, all of one dimension, when ``formulas`` (before the expanded
    rewrite) read them only as differences ``Sub(u, v)`` of two of them, and
    the position of the first j-variable (whose mean is the centre); ``()``
    otherwise (a dot product or a norm of its own, a difference with a
    parameter, variables of several dimensions: a translation would change
    the result)."""
    group = {v for _, x, y in dots for v in (x, y)}
    if not group or len({v.dim for v in group}) != 1:
        return ()
    seen, stack = set(), list(formulas)
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        if n.op == "Sub" and all(c in group for c in n.children):
            continue  # translation-invariant
        if n in group:
            return ()  # read otherwise
        stack.extend(n.children)
    return tuple(sorted(v.attrs[1] for v in group)), dots[0][2].attrs[1]


def centred(args, centring_info, dtype) -> list:
    """``args`` with the variables of ``centring_info`` (:func:`centring`)
    translated by the centre ``c``, the mean of (a sample of
    ``_CENTRE_SAMPLE``) finite rows of the j-variable, rounded to ``dtype``,
    when ``c`` is far from the origin next to their spread (``|c|^2 > 3
    mean |y - c|^2``: centring then gains more than a bit); else ``args``."""
    if not centring_info:
        return args
    positions, on = centring_info
    y = np.asarray(args[on])
    # any c is exact, one near the points is what counts: a sample of rows
    # serves (a pass over all of y measured 1.4x the time of 8 rows x 2e5)
    sample = np.asarray(y[:: max(1, len(y) // _CENTRE_SAMPLE)], dtype=np.float64)
    sample = sample[np.isfinite(sample).all(axis=1)]  # inf and NaN stay as they are
    if len(sample) == 0:
        return args
    c = sample.mean(axis=0)
    dev = sample - c
    c2, spread = float(c @ c), float(np.mean(np.einsum("ij,ij->i", dev, dev)))
    if not (np.isfinite(c2) and np.isfinite(spread)) or c2 <= 3 * spread:
        return args
    args = list(args)
    for k in positions:
        a = np.asarray(args[k])
        out = np.empty(a.shape, dtype=dtype)
        rows = _chunk_rows(a)
        for s in range(0, len(a), rows):
            np.subtract(a[s:s + rows], c, out=out[s:s + rows], casting="unsafe")
        args[k] = out
    return args


def _chunk_rows(a) -> int:
    return max(1, _CHUNK_BYTES // (8 * max(1, a.shape[1])))


#: Operations whose value or derivative is unbounded at 0, or that jump:
#: the expanded form leaves a point's squared distance to itself at ~eps
#: |x|^2, not 0; sqrt(d2) makes that a relative error of sqrt(eps) (exp(-|x -
#: y|) at D = 16: 7e-10 in float64, 1e-4 in float32), and a test of d2 = 0
#: (coincident points, radius 0) misses the point itself.
_STEEP = {"Sqrt", "Rsqrt", "Log", "Inv", "XLogX", "Step", "Sign", "Floor", "Round",
          "Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual"}


def steep_arguments(formulas) -> set:
    """The nodes inside an argument of an operation steep at 0 or
    discontinuous: those of ``_STEEP``, ``Pow`` of a negative exponent, the
    denominator of ``Div``, the condition of ``IfElse``."""
    roots = []
    for node in topo_order(list(formulas)):
        if node.op in _STEEP or (node.op == "Pow" and node.attrs[0] < 0):
            roots.extend(node.children)
        elif node.op == "Div":
            roots.append(node.children[1])
        elif node.op == "IfElse":
            roots.append(node.children[0])
    return set(topo_order(roots))
