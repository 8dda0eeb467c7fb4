"""The dense C kernel's many-column Sum: ``sum_j K_ij B_j`` as a small GEMM.

A Sum whose formula is ``K_ij * B_j`` (K a scalar, B a j-variable of
``E >= MANY_COLUMNS_MIN`` columns) is rendered, by default, as one formula of
dimension E: every pair computes E products in straight-line code, which
compiles in time growing with E and spills registers at E >= 32. Here the
kernel instead

1. computes the scalar K for the block's rows and the tile into a buffer
   ``kb[IB][TJ]`` (the usual vectorised loop over j, RB rows at a time, with
   the dot-product micro-kernel and the exp range facts), then
2. multiplies that (IB x nj) buffer by the tile's (nj x E) block of B with a
   register-blocked loop (``GR`` rows x ``CW`` columns of accumulators,
   vectorised over the columns), looping over E: the source does not grow
   with E.

B is passed once more, row-major with its columns zero-padded to a multiple
of CW (``bq``, :func:`pack_rows`), so that the micro-kernel has no remainder
loop. The block-sparse kernel (``ranges=``) takes the same form over its
blocks' tiles (``templates/ranges_gemm_kernel.h``, B sorted, ``bq`` over
the whole reduced axis). Precision as the fused Sum: each tile's partial sums in ``real_t``,
added to the ``acc_t`` (double for float32) state per tile.
"""

from __future__ import annotations

from string import Template

import numpy as np

from ._rows import tile_loop
from .._ir import topo_order
from .._plan import Plan

__all__ = ["MANY_COLUMNS", "MANY_COLUMNS_MIN", "many_columns", "padded_columns",
           "column_width", "GROUP_ROWS", "gemm_tile", "pack_rows", "GEMM_BLOCK_BYTES",
           "matmul_block"]

#: The switch: False renders every Sum as one formula of dimension E.
MANY_COLUMNS = True

#: Columns of B from which the GEMM form is used.
MANY_COLUMNS_MIN = 8

_GEMM = Template(
    r"""
      /* (IB x nj) buffer of K times the tile's (nj x ${ep}) block of B: GR rows
         x CW columns of accumulators, each CW-chunk of B reused by the block's
         row groups from cache; rows past ni are computed (kb holds zeros or
         copies there) but not stored */
      {
        const real_t *restrict bt = bq + j0 * ${ep};
        for (int e0 = 0; e0 < ${ep}; e0 += CW) {
          for (int r4 = 0; r4 < ni; r4 += GR) {
            real_t acc[GR][CW];
            for (int r = 0; r < GR; r++) for (int l = 0; l < CW; l++) acc[r][l] = 0;
            const real_t *restrict k0 = kb + r4 * TJ;
            for (int64_t jj = 0; jj < nj; jj++) {
              const real_t *restrict bv = bt + jj * ${ep} + e0;
              KT_ROWS_LOOP
              for (int r = 0; r < GR; r++) {
                const real_t kv = k0[r * TJ + jj];
                #pragma omp simd
                for (int l = 0; l < CW; l++) acc[r][l] += kv * bv[l];
              }
            }
            for (int r = 0; r < GR && r4 + r < ni; r++) {
              acc_t *restrict A = st[r4 + r].A;
              const int ne = ${e} - e0 < CW ? ${e} - e0 : CW;
              for (int l = 0; l < ne; l++) A[e0 + l] += (acc_t)acc[r][l];
            }
          }
        }
      }"""
)


def many_columns(plan: Plan):
    """``(K, B)`` when ``plan`` is a Sum of ``K_ij * B_j`` (K of dimension 1, B
    a j-variable of at least MANY_COLUMNS_MIN columns that K does not read:
    B stays in its row layout, unpacked), else None."""
    if not MANY_COLUMNS or plan.reduction != "Sum" or len(plan.formulas) != 1:
        return None
    f = plan.formulas[0]
    if f.op != "Mul":
        return None
    for k, b in (f.children, f.children[::-1]):
        if (b.op == "Var" and b.cat == "j" and b.dim >= MANY_COLUMNS_MIN
                and k.dim == 1 and b not in topo_order([k])):
            return k, b
    return None


#: Bytes of one row of B's block that ``K @ B`` gives one many-column kernel
#: (128 float32 or 64 float64 columns). The generic split (``block``, 32
#: columns) serves formulas whose columns are code; here they are a loop
#: bound, and each block recomputes K: at D = 79, E = 128 float32 four
#: blocks spent 4x the dot products (0.18 s against 0.097 s for one). Wider
#: blocks than this were slower (single thread, D = 79, E = 256: float32 0.20
#: s for one block of 256 against 0.16 for two of 128; float64 1.2 s for one,
#: 0.76 for two of 128, 0.55 for four of 64: the tile shrinks as B widens).
#: Widths are rounded up to a multiple of ``block`` (zero columns).
GEMM_BLOCK_BYTES = 512


def matmul_block(k_dim: int, n_cols: int, backend_name: str, block: int,
                 itemsize: int) -> int:
    """Columns per kernel of ``K @ B`` (B of ``n_cols`` columns of
    ``itemsize`` bytes, K of dimension ``k_dim``, run by the backend named
    ``backend_name``): ``block`` (the generic split), or for a scalar K on
    the C backend (the many-column form) ``n_cols`` rounded up to a multiple
    of ``block``, at most GEMM_BLOCK_BYTES of a row."""
    if not MANY_COLUMNS or k_dim != 1 or n_cols <= block or backend_name != "cpu":
        return block
    widest = max(block, GEMM_BLOCK_BYTES // itemsize // block * block)
    return min(widest, -(-n_cols // block) * block)


def column_width(plan: Plan) -> int:
    """Columns per accumulator row: VL (64 bytes, one AVX-512 vector), half
    that when B has at most so many columns (no half-empty vectors at E = 8),
    2 VL from E >= 2 VL (two independent FMA chains per broadcast)."""
    vl, e = max(1, 64 // np.dtype(plan.dtype).itemsize), plan.formulas[0].dim
    return vl // 2 if e <= vl // 2 else (vl if e < 2 * vl else 2 * vl)


#: Rows per micro-kernel step (``GR``, a divisor of every block size): 8
#: rows of 2 VL columns are 16 of AVX-512's 32 vector registers, enough
#: independent FMA chains to cover their latency; without AVX-512 (16
#: registers of 32 bytes) 4 rows of at most VL columns (8 registers).
GROUP_ROWS = """#define GR 8
#if !defined(__AVX512F__)
#undef GR
#define GR 4
#endif"""


def padded_columns(plan: Plan) -> int:
    """E rounded up to a multiple of the column width."""
    cw = column_width(plan)
    return -(-plan.formulas[0].dim // cw) * cw


def gemm_tile(rows, e: int, ep: int, bound: str = "nj"):
    """(tile, block tail, block setup lines, state, init, final) for the rows'
    renderings of K: the tile writes K to ``kb`` (its loop up to ``bound``:
    the block-sparse kernel's whole vectors, ``njv``), the block tail
    multiplies (the tile's ``nj`` columns)."""
    code = "\n".join(x for x in [rows[0].code("j", "  ")]
                      + [row.code("ij", "  ") for row in rows] if x)
    writes = [f"  kb[(ii + {r}) * TJ + jj] = {row.outputs[0][0]};"
              for r, row in enumerate(rows)]
    tile = tile_loop(bound, code, writes)
    setup = ["/* K for the block's rows and the tile (rows never written stay 0) */",
             "real_t kb[IB * TJ];",
             "for (int64_t q = 0; q < IB * TJ; q++) kb[q] = 0;"]
    return (tile, _GEMM.substitute(e=e, ep=ep), setup, f"acc_t A[{e}];",
            f"for (int e = 0; e < {e}; e++) S->A[e] = 0;",
            f"for (int e = 0; e < {e}; e++) outf[i * {e} + e] = (real_t)S->A[e];")


def pack_rows(a: np.ndarray, tj: int, ep: int) -> np.ndarray:
    """(ny, E) -> (ny rounded up to whole tiles, ep) row-major, zero-padded."""
    ny, e = a.shape
    out = np.zeros((-(-ny // tj) * tj, ep), dtype=a.dtype)
    out[:ny, :e] = a
    return out
