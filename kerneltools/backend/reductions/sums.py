"""Sums: ``sum_j F_ij`` and ``sum_j F_ij^2``."""

from __future__ import annotations

import numpy as np

from .. import _ops
from ._spec import dim0, register


def _output_is_state(outs, j0, K):
    """A sum's partial state is the block's output itself."""
    return (outs[0].astype(np.float64),)


# -- Sum -----------------------------------------------------------------------
register(
    name="Sum", doc="sum_j F_ij", methods=("sum",), feature_op="SumFeat",
    n_formulas=1, out_dim=dim0, int_outputs=(False,),
    init=lambda n, dims, K: (np.zeros((n, dims[0])),),
    tile=lambda v, j0, K: (v[0].sum(axis=1, dtype=np.float64),),
    merge=lambda a, b: (a[0] + b[0],),
    finalize=lambda s, K: (s[0],),
    # the C templates accumulate a Sum inside the vectorised loop
    c=dict(fused=True),
    cuda=dict(
        state="acc_t ${S}acc[$E]; real_t ${S}tacc[$E];",
        init="KT_FOR(e, $E) { ${S}acc[e] = 0; ${S}tacc[e] = 0; }",
        update="KT_FOR(e, $E) ${S}tacc[e] += ${S}v0[e];",
        tile_end="KT_FOR(e, $E) { ${S}acc[e] += (acc_t)${S}tacc[e]; ${S}tacc[e] = 0; }",
        final="KT_FOR(e, $E) outf[i * $E + e] = (real_t)${S}acc[e];",
        # H200, a Gaussian sum at N = M = 10^6: 0.37 s with 128 x 4, 0.40 s
        # with 256 x 2 (asv_bench/cuda_compare.py --sweep)
        launch={4: (128, 4)},
    ),
    surrogate=lambda F, W, outs, gin: _ops.dot(gin, F),
    smooth=True,
    block=(("Sum", False),), state_of_block=_output_is_state,
)


# -- SumSquares ------------------------------------------------------------------
register(
    name="SumSquares", doc="sum_j F_ij^2, per component", methods=("sumsquares",),
    n_formulas=1, out_dim=dim0, int_outputs=(False,),
    init=lambda n, dims, K: (np.zeros((n, dims[0])),),
    tile=lambda v, j0, K: (np.square(v[0], dtype=np.float64).sum(axis=1),),
    merge=lambda a, b: (a[0] + b[0],),
    finalize=lambda s, K: (s[0],),
    c=dict(
        state="acc_t A[$E];",
        init="for (int e = 0; e < $E; e++) S->A[e] = 0;",
        tile=(
            "for (int e = 0; e < $E; e++) {\n"
            "  const real_t *b = buf0 + e * TJ;\n"
            "  real_t s = 0;\n"
            "  #pragma omp simd reduction(+:s)\n"
            "  for (int64_t jj = 0; jj < nj; jj++) s += b[jj] * b[jj];\n"
            "  S->A[e] += s;\n"
            "}"
        ),
        final="for (int e = 0; e < $E; e++) outf[i * $E + e] = (real_t)S->A[e];",
    ),
    cuda=dict(
        state="acc_t ${S}acc[$E]; real_t ${S}tacc[$E];",
        init="KT_FOR(e, $E) { ${S}acc[e] = 0; ${S}tacc[e] = 0; }",
        update="KT_FOR(e, $E) ${S}tacc[e] += ${S}v0[e] * ${S}v0[e];",
        tile_end="KT_FOR(e, $E) { ${S}acc[e] += (acc_t)${S}tacc[e]; ${S}tacc[e] = 0; }",
        final="KT_FOR(e, $E) outf[i * $E + e] = (real_t)${S}acc[e];",
    ),
    # d out = sum_j 2 F dF: the differential of S = <gin, F^2>
    surrogate=lambda F, W, outs, gin: _ops.dot(gin, _ops.make("Square", F)),
    smooth=True,
    block=(("SumSquares", False),), state_of_block=_output_is_state,
)
