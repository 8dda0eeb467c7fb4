"""Log-sum-exp and soft-max weights: ``log sum_j exp(F_ij) (W_ij)`` and
``sum_j exp(F_ij) W_ij / sum_j exp(F_ij)``.

Their states hold a shift (the running maximum of F, kept finite) and sums
of ``exp(F - shift)``; a new maximum rescales the sums.

* NumPy: per tile, the shift and the shifted sums; ``merge`` rescales both
  sides to the larger shift.
* C: per tile, the maximum m (NaN ignored), the shift (m if finite, -inf if
  every value is -inf, else 0) and the sums of exp(F - shift), folded into a
  running (shift, sums) state in acc_t, as the NumPy monoid does. NaN
  reaches the sums through exp. The dense kernel (``online``) computes, in
  the loop that evaluates F, the tile's maximum and its sums against the
  state's shift, with the exp of an argument <= 0; they are added as they
  are when the tile's maximum is no new maximum (the common case), else
  the fold above runs on the buffered tile.
* CUDA, online: m is the running maximum of F (initially the most negative
  finite number), the sums are relative to it (a tile's part in real_t,
  folded into acc_t at the tile's end) and a new maximum rescales them. The
  common case is one comparison, one exp and one add: -inf adds exp(-inf) =
  0 and NaN propagates through the sums by itself; only +inf, on the rare
  new-maximum path, goes to "bad", which then gives inf (or NaN), as the
  NumPy monoid's zero shift does. KT_EXPR / KT_LOGR / KT_RSCALE are the exp
  and log of the kernel's base: float32 kernels get F in base 2 (F log2 e,
  the scale folded into the formula, ``exp_of_f``) and use the hardware exp2.
* Partial states (Dask): a block runs LogSumExp (and, weighted,
  SumSoftMaxWeight), whose outputs give back the shift and the sums.
"""

from __future__ import annotations

import numpy as np

from .. import _ops
from ._spec import dim0, dim1, exp_shifted, finite_shift, register

_BLOCK_WEIGHTED = (("LogSumExp", False), ("SumSoftMaxWeight", True))


def _lse_merge(a, b):
    shift = np.maximum(a[0], b[0])
    return shift, a[1] * exp_shifted(a[0], shift) + b[1] * exp_shifted(b[0], shift)


def _block_sums(outs):
    """(shift, sum_j exp(F - shift), the soft-max weight or None) of a block,
    from its LogSumExp (and SumSoftMaxWeight) outputs; inf and NaN kept."""
    lse = outs[0].astype(np.float64)
    shift = finite_shift(lse)
    scale = exp_shifted(lse, shift)
    if len(outs) == 1:
        return shift, scale, None
    return shift, scale, np.where(scale[:, :1] == 0, 0.0, outs[1].astype(np.float64))


# C: a tile's shift (SH: the state's entry), then its exp(F - shift) in place.
_C_TILE_SHIFT = (
    "  real_t m = -INFINITY;\n"
    "  #pragma omp simd reduction(max:m)\n"
    "  for (int64_t jj = 0; jj < nj; jj++) m = b[jj] > m ? b[jj] : m;\n"
    "  const real_t sh = isfinite(m) ? m : (m == -INFINITY ? -INFINITY : (real_t)0);\n"
    "  const real_t shc = sh == -INFINITY ? (real_t)0 : sh;\n"
    "  #pragma omp simd\n"
    "  for (int64_t jj = 0; jj < nj; jj++) b[jj] = KT_EXP(b[jj] - shc);\n"
    "  const acc_t nw = S->lm[SH] > (acc_t)sh ? S->lm[SH] : (acc_t)sh;\n"
    "  const acc_t ca = S->lm[SH] == -INFINITY ? 0 : exp(S->lm[SH] - nw);\n"
    "  const acc_t cb = sh == -INFINITY ? 0 : exp((acc_t)sh - nw);\n"
    "  S->lm[SH] = nw;\n"
)


def _rescaled_add(acc: str, tile_sum: str) -> str:
    """C: fold a tile's sum into a running sum, both rescaled to the new shift
    (0 * x keeps a NaN of an empty side, as the NumPy monoid does)."""
    return (
        f"{acc} = (ca == 0 ? 0 * {acc} : {acc} * ca)"
        f" + (cb == 0 ? 0 * (acc_t){tile_sum} : (acc_t){tile_sum} * cb);"
    )


def _cu_update(q: str, new: str, add: str, bad: str) -> str:
    """CUDA: fold the pair's F (entry ``q``): ``new`` rescales on a new
    maximum, ``add`` adds x = exp(F - m), ``bad`` takes a +inf."""
    return (
        "  const real_t v = ${S}v0[" + q + "];\n"
        "  if (v > ${S}m[" + q + "]) {\n"
        "    if (KT_FINITE(v)) {\n"
        "      const real_t c = KT_EXPR(${S}m[" + q + "] - v);\n"
        f"      {new}\n"
        "      ${S}m[" + q + "] = v;\n"
        f"    }} else {{ {bad} }}\n"
        "  } else {\n"
        "    const real_t x = KT_EXPR(v - ${S}m[" + q + "]);\n"
        f"    {add}\n"
        "  }"
    )


_CU_OUT = "(real_t)(((acc_t)${S}m[M] + KT_LOGR(S_)) * KT_RSCALE)"


# -- LogSumExp -------------------------------------------------------------------
def _lse_tile(v, j0, K):
    F = v[0].astype(np.float64)
    shift = finite_shift(F.max(axis=1))  # (ti, E): running maximum, kept finite
    return shift, exp_shifted(F, shift[:, None, :]).sum(axis=1)


register(
    name="LogSumExp", doc="log sum_j exp(F_ij), stable (running maximum)",
    methods=("logsumexp", "lse"), n_formulas=1, out_dim=dim0, int_outputs=(False,),
    init=lambda n, dims, K: (np.full((n, dims[0]), -np.inf), np.zeros((n, dims[0]))),
    tile=_lse_tile, merge=_lse_merge,
    finalize=lambda s, K: (s[0] + np.log(s[1]),),
    c=dict(
        state="acc_t lm[$E], ls[$E];",
        init="for (int e = 0; e < $E; e++) { S->lm[e] = -INFINITY; S->ls[e] = 0; }",
        tile=(
            "for (int e = 0; e < $E; e++) {\n"
            "  real_t *b = buf0 + e * TJ;\n"
            + _C_TILE_SHIFT.replace("SH", "e") +
            "  real_t s = 0;\n"
            "  #pragma omp simd reduction(+:s)\n"
            "  for (int64_t jj = 0; jj < nj; jj++) s += b[jj];\n"
            "  " + _rescaled_add("S->ls[e]", "s") + "\n"
            "}"
        ),
        final="for (int e = 0; e < $E; e++) outf[i * $E + e] = (real_t)(S->lm[e] + log(S->ls[e]));",
        online=(("ls", "F"),),
    ),
    cuda=dict(
        state="real_t ${S}m[$E], ${S}ts[$E], ${S}bad[$E]; acc_t ${S}s[$E];",
        init="KT_FOR(e, $E) { ${S}m[e] = -KT_REAL_MAX; ${S}ts[e] = 0; ${S}bad[e] = 0; ${S}s[e] = 0; }",
        update="KT_FOR(e, $E) {\n" + _cu_update(
            "e",
            "${S}ts[e] = ${S}ts[e] * c + (real_t)1; ${S}s[e] *= (acc_t)c;",
            "${S}ts[e] += x;",
            "${S}bad[e] += v;",
        ) + "\n}",
        tile_end="KT_FOR(e, $E) { ${S}s[e] += (acc_t)${S}ts[e]; ${S}ts[e] = 0; }",
        final=(
            "KT_FOR(e, $E) outf[i * $E + e] = ${S}bad[e] != 0 ? (real_t)log(${S}bad[e] + ${S}s[e])\n"
            "    : " + _CU_OUT.replace("[M]", "[e]").replace("S_", "${S}s[e]") + ";"
        ),
        exp_of_f=True,
    ),
    surrogate=lambda F, W, outs, gin: _ops.dot(
        gin, _ops.make("Exp", _ops.make("Sub", F, outs[0]))
    ),
    smooth=True,
    block=(("LogSumExp", False),),
    state_of_block=lambda outs, j0, K: _block_sums(outs)[:2],
)


# -- LogSumExpWeight -----------------------------------------------------------
def _lsew_tile(v, j0, K):
    F = v[0].astype(np.float64)  # (ti, tj, 1)
    shift = finite_shift(F.max(axis=1))  # (ti, 1)
    return shift, (exp_shifted(F, shift[:, None, :]) * v[1]).sum(axis=1)


def _lsew_state_of_block(outs, j0, K):
    # sum_j exp(F - shift) W = SSMW * sum_j exp(F - shift)
    shift, scale, ssmw = _block_sums(outs)
    return shift, ssmw * scale


register(
    name="LogSumExpWeight", doc="log sum_j exp(F_ij) W_ij, F scalar",
    methods=("logsumexp", "lse"), n_formulas=2, out_dim=dim1, int_outputs=(False,),
    init=lambda n, dims, K: (np.full((n, 1), -np.inf), np.zeros((n, dims[1]))),
    tile=_lsew_tile, merge=_lse_merge,
    finalize=lambda s, K: (s[0] + np.log(s[1]),),
    c=dict(
        state="acc_t lm[1], ls[$E1];",
        init="S->lm[0] = -INFINITY; for (int e = 0; e < $E1; e++) S->ls[e] = 0;",
        tile=(
            "{\n"
            "  real_t *b = buf0;\n"
            + _C_TILE_SHIFT.replace("SH", "0") +
            "  for (int e = 0; e < $E1; e++) {\n"
            "    const real_t *w = buf1 + e * TJ;\n"
            "    real_t s = 0;\n"
            "    #pragma omp simd reduction(+:s)\n"
            "    for (int64_t jj = 0; jj < nj; jj++) s += b[jj] * w[jj];\n"
            "    " + _rescaled_add("S->ls[e]", "s") + "\n"
            "  }\n"
            "}"
        ),
        final="for (int e = 0; e < $E1; e++) outf[i * $E1 + e] = (real_t)(S->lm[0] + log(S->ls[e]));",
        online=(("ls", "W"),),
    ),
    cuda=dict(
        state="real_t ${S}m[1], ${S}ts[$E1], ${S}bad[$E1]; bool ${S}nf; acc_t ${S}s[$E1];",
        init=("${S}m[0] = -KT_REAL_MAX; ${S}nf = false;\n"
              "KT_FOR(e, $E1) { ${S}ts[e] = 0; ${S}bad[e] = 0; ${S}s[e] = 0; }"),
        update="{\n" + _cu_update(
            "0",
            "KT_FOR(e, $E1) { ${S}ts[e] = ${S}ts[e] * c + ${S}v1[e]; ${S}s[e] *= (acc_t)c; }",
            "KT_FOR(e, $E1) ${S}ts[e] += x * ${S}v1[e];",
            "${S}nf = true; KT_FOR(e, $E1) ${S}bad[e] += v * ${S}v1[e];",
        ) + "\n}",
        tile_end="KT_FOR(e, $E1) { ${S}s[e] += (acc_t)${S}ts[e]; ${S}ts[e] = 0; }",
        # +inf in F: inf * w (+-inf, or NaN where w = 0), as with a zero shift
        final=(
            "KT_FOR(e, $E1) outf[i * $E1 + e] = ${S}nf ? (real_t)log(${S}bad[e] + ${S}s[e])\n"
            "    : " + _CU_OUT.replace("[M]", "[0]").replace("S_", "${S}s[e]") + ";"
        ),
        exp_of_f=True,
    ),
    surrogate=lambda F, W, outs, gin: _ops.make(
        "SumFeat",
        _ops.make("Mul", gin, _ops.make("Mul", W, _ops.make("Exp", _ops.make("Sub", F, outs[0])))),
    ),
    smooth=True, block=_BLOCK_WEIGHTED, state_of_block=_lsew_state_of_block,
)


# -- SumSoftMaxWeight ------------------------------------------------------------
def _ssmw_tile(v, j0, K):
    F = v[0].astype(np.float64)
    shift = finite_shift(F.max(axis=1))
    e = exp_shifted(F, shift[:, None, :])
    return shift, e.sum(axis=1), (e * v[1]).sum(axis=1)


def _ssmw_merge(a, b):
    shift = np.maximum(a[0], b[0])
    ca, cb = exp_shifted(a[0], shift), exp_shifted(b[0], shift)
    return shift, a[1] * ca + b[1] * cb, a[2] * ca + b[2] * cb


def _ssmw_state_of_block(outs, j0, K):
    shift, scale, ssmw = _block_sums(outs)
    return shift, scale, ssmw * scale


register(
    name="SumSoftMaxWeight", doc="sum_j exp(F_ij) W_ij / sum_j exp(F_ij), F scalar",
    methods=("sumsoftmaxweight",), n_formulas=2, out_dim=dim1, int_outputs=(False,),
    init=lambda n, dims, K: (np.full((n, 1), -np.inf), np.zeros((n, 1)), np.zeros((n, dims[1]))),
    tile=_ssmw_tile, merge=_ssmw_merge,
    finalize=lambda s, K: (s[2] / s[1],),
    c=dict(
        state="acc_t lm[1], ls[1], lv[$E1];",
        init="S->lm[0] = -INFINITY; S->ls[0] = 0; for (int e = 0; e < $E1; e++) S->lv[e] = 0;",
        tile=(
            "{\n"
            "  real_t *b = buf0;\n"
            + _C_TILE_SHIFT.replace("SH", "0") +
            "  real_t s = 0;\n"
            "  #pragma omp simd reduction(+:s)\n"
            "  for (int64_t jj = 0; jj < nj; jj++) s += b[jj];\n"
            "  " + _rescaled_add("S->ls[0]", "s") + "\n"
            "  for (int e = 0; e < $E1; e++) {\n"
            "    const real_t *w = buf1 + e * TJ;\n"
            "    real_t sv = 0;\n"
            "    #pragma omp simd reduction(+:sv)\n"
            "    for (int64_t jj = 0; jj < nj; jj++) sv += b[jj] * w[jj];\n"
            "    " + _rescaled_add("S->lv[e]", "sv") + "\n"
            "  }\n"
            "}"
        ),
        final="for (int e = 0; e < $E1; e++) outf[i * $E1 + e] = (real_t)(S->lv[e] / S->ls[0]);",
        online=(("ls", "1"), ("lv", "W")),
    ),
    cuda=dict(
        state="real_t ${S}m[1], ${S}ts, ${S}tv[$E1], ${S}bad[1]; acc_t ${S}s, ${S}sv[$E1];",
        init=("${S}m[0] = -KT_REAL_MAX; ${S}bad[0] = 0; ${S}ts = 0; ${S}s = 0;\n"
              "KT_FOR(e, $E1) { ${S}tv[e] = 0; ${S}sv[e] = 0; }"),
        update="{\n" + _cu_update(
            "0",
            "${S}ts = ${S}ts * c + (real_t)1; ${S}s *= (acc_t)c;\n"
            "      KT_FOR(e, $E1) { ${S}tv[e] = ${S}tv[e] * c + ${S}v1[e]; ${S}sv[e] *= (acc_t)c; }",
            "${S}ts += x; KT_FOR(e, $E1) ${S}tv[e] += x * ${S}v1[e];",
            "${S}bad[0] += v;",
        ) + "\n}",
        tile_end=("${S}s += (acc_t)${S}ts; ${S}ts = 0;\n"
                  "KT_FOR(e, $E1) { ${S}sv[e] += (acc_t)${S}tv[e]; ${S}tv[e] = 0; }"),
        # +inf in F: inf / inf (or NaN), as the NumPy monoid gives
        final=("KT_FOR(e, $E1) outf[i * $E1 + e] = ${S}bad[0] != 0 ? ${S}bad[0] - ${S}bad[0]\n"
               "    : (real_t)(${S}sv[e] / ${S}s);"),
        exp_of_f=True,
    ),
    # d out = sum_j e^(F - L) [(V - out) dF + dV]; L = logsumexp_j F held fixed.
    surrogate=lambda F, W, outs, gin: _ops.make(
        "Mul",
        _ops.make("Exp", _ops.make("Sub", F, outs[1])),
        _ops.dot(gin, _ops.make("Sub", W, outs[0])),
    ),
    needs_lse=True,
    smooth=True, block=_BLOCK_WEIGHTED, state_of_block=_ssmw_state_of_block,
)
