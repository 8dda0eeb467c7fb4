"""The registry of reductions: each one a monoid, defined once.

A reduction turns the values ``F_ij`` (and, for some, a second formula
``W_ij``) into one output row per ``i``. Every reduction is a monoid over a
small *state* per output row:

* ``init(n, dims, K)``    -- the identity state of ``n`` rows;
* ``tile(values, j0, K)`` -- the state of one tile of values, shape (ti, tj, E),
  whose reduced index starts at ``j0`` (the NumPy form of repeated updates);
* ``merge(a, b)``         -- associative combination, ``a`` before ``b`` in j;
* ``finalize(state, K)``  -- the outputs.

Tiling and threads need nothing more. Float states are kept in float64 by the
NumPy evaluator, which makes it a sound reference in float32 as well. The C
snippets for the generated kernels live in the same block (see ``c``), and
``surrogate`` gives the gradient rule: a scalar formula ``S_ij`` whose
differential, with the forward outputs and the incoming gradient held fixed,
equals ``<gin_i, d out_i>`` summed over j. The gradient of the reduction with
respect to any variable is then a Sum reduction of the symbolic gradient of
``S``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from . import _ops
from ._ir import Node, index

__all__ = ["Reduction", "REDUCTIONS"]


@dataclass(frozen=True)
class Reduction:
    name: str
    n_formulas: int  # 1, or 2 when a weight formula is reduced along with F
    init: Callable
    tile: Callable
    merge: Callable
    finalize: Callable
    out_dim: Callable  # (formula dims) -> E of the output (per K entry)
    int_outputs: tuple  # which outputs are int64 indices
    uses_k: bool = False
    surrogate: Callable | None = None  # (F, W, outs, gin) -> scalar Node
    needs_lse: bool = False  # surrogate needs the log-sum-exp of F
    doc: str = ""
    # C form (string.Template over $E, $E1, $K) for the generated kernels:
    # state (the fields of one row's state struct), init (the identity, through
    # the pointer S), tile (fold the buffered tile buf0[e*TJ + jj] (and buf1),
    # jj < nj, into S; the reduced index is j0 + jj), final (write outf / outi
    # of row i). "fused" marks Sum, which the templates accumulate inside the
    # vectorised loop instead.
    c: dict | None = None
    # CUDA form (string.Template over $E, $E1, $K and $S, the prefix of one
    # output row's names): state (register declarations), init, update (fold
    # the pair's values ${S}v0[e] (and ${S}v1) at reduced index j into the
    # state), tile_end (optional: once per tile), final (write outf / outi of
    # row i). KT_FOR(e, n) is an unrolled loop, so the state stays in registers.
    cuda: dict | None = None

    @property
    def n_outputs(self) -> int:
        return len(self.int_outputs)


REDUCTIONS: dict[str, Reduction] = {}


def _register(**kwargs) -> Reduction:
    red = Reduction(**kwargs)
    REDUCTIONS[red.name] = red
    return red


def _finite_shift(m):
    """The shift of a log-sum-exp state: the maximum when finite, -inf when every
    value is -inf, else 0 (+inf or NaN present: exp then gives inf or NaN)."""
    return np.where(np.isfinite(m), m, np.where(m == -np.inf, -np.inf, 0.0))


def _exp_shifted(v, shift):
    """exp(v - shift), with exp(. - (-inf)) taken as 0 (an all -inf state)."""
    return np.where(shift == -np.inf, 0.0, np.exp(v - np.where(shift == -np.inf, 0.0, shift)))


# -- Sum ---------------------------------------------------------------------
_register(
    name="Sum", n_formulas=1,
    init=lambda n, dims, K: (np.zeros((n, dims[0])),),
    tile=lambda v, j0, K: (v[0].sum(axis=1, dtype=np.float64),),
    merge=lambda a, b: (a[0] + b[0],),
    finalize=lambda s, K: (s[0],),
    out_dim=lambda dims: dims[0], int_outputs=(False,),
    surrogate=lambda F, W, outs, gin: _ops.dot(gin, F),
    doc="sum_j F_ij",
)


# -- Min / Max and their arguments ------------------------------------------
def _argmin_tile(v, j0):
    idx = np.argmin(v, axis=1)
    val = np.take_along_axis(v, idx[:, None, :], axis=1)[:, 0, :]
    return val.astype(np.float64), idx.astype(np.int64) + j0


def _argmin_merge(a, b):
    take_b = (a[1] < 0) | (b[0] < a[0]) | (np.isnan(b[0]) & ~np.isnan(a[0]))
    return np.where(take_b, b[0], a[0]), np.where(take_b, b[1], a[1])


def _minmax(sign: int):
    """Min (sign=1) and Max (sign=-1) share one monoid on sign * F."""
    return dict(
        init=lambda n, dims, K: (np.full((n, dims[0]), np.inf), np.full((n, dims[0]), -1)),
        tile=lambda v, j0, K: _argmin_tile(sign * v[0], j0),
        merge=_argmin_merge,
    )


def _arg_surrogate(F, W, outs, gin):
    # Gradient flows to the selected j only: S = sum_k gin_k F_k [j == arg_k].
    hit = _ops.make("Equal", index("j"), outs[-1])
    return _ops.make("SumFeat", _ops.make("Mul", gin, _ops.make("Mul", hit, F)))


for _sign, _lo, _up in ((1, "Min", "min"), (-1, "Max", "max")):
    _register(
        name=_lo, n_formulas=1, **_minmax(_sign),
        finalize=(lambda sg: lambda s, K: (sg * s[0],))(_sign),
        out_dim=lambda dims: dims[0], int_outputs=(False,),
        surrogate=_arg_surrogate, doc=f"{_up}_j F_ij",
    )
    _register(
        name=f"Arg{_lo}", n_formulas=1, **_minmax(_sign),
        finalize=lambda s, K: (s[1],),
        out_dim=lambda dims: dims[0], int_outputs=(True,),
        surrogate=None, doc=f"arg{_up}_j F_ij (first one on ties)",
    )
    _register(
        name=f"{_lo}_Arg{_lo}", n_formulas=1, **_minmax(_sign),
        finalize=(lambda sg: lambda s, K: (sg * s[0], s[1]))(_sign),
        out_dim=lambda dims: dims[0], int_outputs=(False, True),
        surrogate=_arg_surrogate, doc=f"({_up}_j F_ij, arg{_up}_j F_ij)",
    )


# -- K smallest values ----------------------------------------------------------
def _kmin_init(n, dims, K):
    return np.full((n, K, dims[0]), np.inf), np.full((n, K, dims[0]), -1, dtype=np.int64)


def _kmin_tile(v, j0, K):
    v = v[0].astype(np.float64)
    idx = np.broadcast_to(np.arange(j0, j0 + v.shape[1])[None, :, None], v.shape)
    return _kmin_keep(v, idx, K)


def _kmin_keep(v, idx, K):
    # Stable sort on (placeholder, value): the identity's (inf, -1) entries come
    # after every real value, NaN included (NaN sorts last, as in numpy.sort);
    # on ties the smaller index (earlier in j) comes first.
    order = np.lexsort((v, idx < 0), axis=1)[:, :K]
    return np.take_along_axis(v, order, axis=1), np.take_along_axis(idx, order, axis=1)


def _kmin_merge(a, b):
    K = a[0].shape[1]
    return _kmin_keep(
        np.concatenate([a[0], b[0]], axis=1), np.concatenate([a[1], b[1]], axis=1), K
    )


def _kmin_surrogate(F, W, outs, gin):
    if F.dim != 1:
        raise NotImplementedError("gradients of KMin need a scalar formula")
    hit = _ops.make("Equal", index("j"), outs[-1])
    return _ops.make("Mul", F, _ops.make("SumFeat", _ops.make("Mul", gin, hit)))


for _name, _fin, _ints, _sur in (
    ("KMin", lambda s, K: (s[0],), (False,), _kmin_surrogate),
    ("ArgKMin", lambda s, K: (s[1],), (True,), None),
    ("KMin_ArgKMin", lambda s, K: (s[0], s[1]), (False, True), _kmin_surrogate),
):
    _register(
        name=_name, n_formulas=1, init=_kmin_init, tile=_kmin_tile, merge=_kmin_merge,
        finalize=_fin, out_dim=lambda dims: dims[0], int_outputs=_ints, uses_k=True,
        surrogate=_sur, doc="the K smallest values of F_ij over j, in increasing order",
    )


# -- Log-sum-exp and soft-max weights -----------------------------------------
def _lse_tile(v, j0, K):
    F = v[0].astype(np.float64)
    shift = _finite_shift(F.max(axis=1))  # (ti, E): running maximum, kept finite
    return shift, _exp_shifted(F, shift[:, None, :]).sum(axis=1)


def _lse_merge(a, b):
    shift = np.maximum(a[0], b[0])
    return shift, a[1] * _exp_shifted(a[0], shift) + b[1] * _exp_shifted(b[0], shift)


_register(
    name="LogSumExp", n_formulas=1,
    init=lambda n, dims, K: (np.full((n, dims[0]), -np.inf), np.zeros((n, dims[0]))),
    tile=_lse_tile, merge=_lse_merge,
    finalize=lambda s, K: (s[0] + np.log(s[1]),),
    out_dim=lambda dims: dims[0], int_outputs=(False,),
    surrogate=lambda F, W, outs, gin: _ops.dot(
        gin, _ops.make("Exp", _ops.make("Sub", F, outs[0]))
    ),
    doc="log sum_j exp(F_ij), stable (running maximum)",
)


def _lsew_tile(v, j0, K):
    F = v[0].astype(np.float64)  # (ti, tj, 1)
    shift = _finite_shift(F.max(axis=1))  # (ti, 1)
    return shift, (_exp_shifted(F, shift[:, None, :]) * v[1]).sum(axis=1)


_register(
    name="LogSumExpWeight", n_formulas=2,
    init=lambda n, dims, K: (np.full((n, 1), -np.inf), np.zeros((n, dims[1]))),
    tile=_lsew_tile, merge=_lse_merge,
    finalize=lambda s, K: (s[0] + np.log(s[1]),),
    out_dim=lambda dims: dims[1], int_outputs=(False,),
    surrogate=lambda F, W, outs, gin: _ops.make(
        "SumFeat",
        _ops.make("Mul", gin, _ops.make("Mul", W, _ops.make("Exp", _ops.make("Sub", F, outs[0])))),
    ),
    doc="log sum_j exp(F_ij) W_ij, F scalar",
)


def _ssmw_tile(v, j0, K):
    F = v[0].astype(np.float64)
    shift = _finite_shift(F.max(axis=1))
    e = _exp_shifted(F, shift[:, None, :])
    return shift, e.sum(axis=1), (e * v[1]).sum(axis=1)


def _ssmw_merge(a, b):
    shift = np.maximum(a[0], b[0])
    ca, cb = _exp_shifted(a[0], shift), _exp_shifted(b[0], shift)
    return shift, a[1] * ca + b[1] * cb, a[2] * ca + b[2] * cb


_register(
    name="SumSoftMaxWeight", n_formulas=2,
    init=lambda n, dims, K: (np.full((n, 1), -np.inf), np.zeros((n, 1)), np.zeros((n, dims[1]))),
    tile=_ssmw_tile, merge=_ssmw_merge,
    finalize=lambda s, K: (s[2] / s[1],),
    out_dim=lambda dims: dims[1], int_outputs=(False,),
    # d out = sum_j e^(F - L) [(V - out) dF + dV]; L = logsumexp_j F held fixed.
    surrogate=lambda F, W, outs, gin: _ops.make(
        "Mul",
        _ops.make("Exp", _ops.make("Sub", F, outs[1])),
        _ops.dot(gin, _ops.make("Sub", W, outs[0])),
    ),
    needs_lse=True,
    doc="sum_j exp(F_ij) W_ij / sum_j exp(F_ij), F scalar",
)


# ---------------------------------------------------------------------------
# C forms of the monoids (used by the CPU and CUDA templates): the state of
# one output row is a struct (fields in "state") reached through S.
# ---------------------------------------------------------------------------
_C_MIN = dict(
    state="real_t mv[$E]; int64_t mi[$E];",
    init="for (int e = 0; e < $E; e++) { S->mv[e] = $INIT; S->mi[e] = -1; }",
    tile=(
        "for (int e = 0; e < $E; e++) {\n"
        "  const real_t *b = buf0 + e * TJ;\n"
        "  for (int64_t jj = 0; jj < nj; jj++) {\n"
        "    const real_t v = b[jj];\n"
        "    /* first index wins ties; a NaN wins and stays, as numpy.argmin */\n"
        "    if (S->mi[e] < 0 || v $CMP S->mv[e] || (v != v && S->mv[e] == S->mv[e])) { S->mv[e] = v; S->mi[e] = j0 + jj; }\n"
        "  }\n"
        "}"
    ),
)
_C_MIN_FINAL = {
    "val": "for (int e = 0; e < $E; e++) outf[i * $E + e] = S->mv[e];",
    "arg": "for (int e = 0; e < $E; e++) outi[i * $E + e] = S->mi[e];",
}
for _lo, _init, _cmp in (("Min", "INFINITY", "<"), ("Max", "-INFINITY", ">")):
    _base = {k: v.replace("$INIT", _init).replace("$CMP", _cmp) for k, v in _C_MIN.items()}
    for _name, _final in (
        (_lo, _C_MIN_FINAL["val"]),
        (f"Arg{_lo}", _C_MIN_FINAL["arg"]),
        (f"{_lo}_Arg{_lo}", _C_MIN_FINAL["val"] + "\n" + _C_MIN_FINAL["arg"]),
    ):
        REDUCTIONS[_name] = replace(REDUCTIONS[_name], c=dict(_base, final=_final))

_C_KMIN = dict(
    state="real_t kv[$E][$K]; int64_t ki[$E][$K];",
    init=(
        "for (int e = 0; e < $E; e++) for (int k = 0; k < $K; k++) { S->kv[e][k] = INFINITY; S->ki[e][k] = -1; }"
    ),
    tile=(
        "for (int e = 0; e < $E; e++) {\n"
        "  const real_t *b = buf0 + e * TJ;\n"
        "  for (int64_t jc = 0; jc < nj; jc += 16) {\n"
        "    const int64_t je = jc + 16 < nj ? jc + 16 : nj;\n"
        "    /* threshold test, vectorised over 16 candidates: most chunks hold\n"
        "       nothing below the current K-th value and are skipped whole */\n"
        "    if (S->ki[e][$K - 1] >= 0) {\n"
        "      const real_t thr = S->kv[e][$K - 1];\n"
        "      int any = 0;\n"
        "      #pragma omp simd reduction(|:any)\n"
        "      for (int64_t jj = jc; jj < je; jj++) any |= KT_LT(b[jj], thr);\n"
        "      if (!any) continue;\n"
        "    }\n"
        "    for (int64_t jj = jc; jj < je; jj++) {\n"
        "      const real_t v = b[jj];\n"
        "      if (S->ki[e][$K - 1] >= 0 && !KT_LT(v, S->kv[e][$K - 1])) continue;\n"
        "      /* insertion into the sorted list; equal values keep index order */\n"
        "      int p = $K - 1;\n"
        "      while (p > 0 && (S->ki[e][p - 1] < 0 || KT_LT(v, S->kv[e][p - 1]))) {\n"
        "        S->kv[e][p] = S->kv[e][p - 1]; S->ki[e][p] = S->ki[e][p - 1]; p--;\n"
        "      }\n"
        "      S->kv[e][p] = v; S->ki[e][p] = j0 + jj;\n"
        "    }\n"
        "  }\n"
        "}"
    ),
)
_C_KMIN_FINAL = {
    "val": "for (int k = 0; k < $K; k++) for (int e = 0; e < $E; e++) outf[(i * $K + k) * $E + e] = S->kv[e][k];",
    "arg": "for (int k = 0; k < $K; k++) for (int e = 0; e < $E; e++) outi[(i * $K + k) * $E + e] = S->ki[e][k];",
}
for _name, _final in (
    ("KMin", _C_KMIN_FINAL["val"]),
    ("ArgKMin", _C_KMIN_FINAL["arg"]),
    ("KMin_ArgKMin", _C_KMIN_FINAL["val"] + "\n" + _C_KMIN_FINAL["arg"]),
):
    REDUCTIONS[_name] = replace(REDUCTIONS[_name], c=dict(_C_KMIN, final=_final))

# Log-sum-exp family: per tile, the maximum m (NaN ignored), the shift
# (m if finite, -inf if every value is -inf, else 0) and the sums of
# exp(F - shift); folded into a running (shift, sums) state in acc_t, as the
# NumPy monoid does. NaN reaches the sums through exp.
_C_LSE_TILE_SHIFT = (
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


REDUCTIONS["LogSumExp"] = replace(REDUCTIONS["LogSumExp"], c=dict(
    state="acc_t lm[$E], ls[$E];",
    init="for (int e = 0; e < $E; e++) { S->lm[e] = -INFINITY; S->ls[e] = 0; }",
    tile=(
        "for (int e = 0; e < $E; e++) {\n"
        "  real_t *b = buf0 + e * TJ;\n"
        + _C_LSE_TILE_SHIFT.replace("SH", "e") +
        "  real_t s = 0;\n"
        "  #pragma omp simd reduction(+:s)\n"
        "  for (int64_t jj = 0; jj < nj; jj++) s += b[jj];\n"
        "  " + _rescaled_add("S->ls[e]", "s") + "\n"
        "}"
    ),
    final="for (int e = 0; e < $E; e++) outf[i * $E + e] = (real_t)(S->lm[e] + log(S->ls[e]));",
))
REDUCTIONS["LogSumExpWeight"] = replace(REDUCTIONS["LogSumExpWeight"], c=dict(
    state="acc_t lm[1], ls[$E1];",
    init="S->lm[0] = -INFINITY; for (int e = 0; e < $E1; e++) S->ls[e] = 0;",
    tile=(
        "{\n"
        "  real_t *b = buf0;\n"
        + _C_LSE_TILE_SHIFT.replace("SH", "0") +
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
))
REDUCTIONS["SumSoftMaxWeight"] = replace(REDUCTIONS["SumSoftMaxWeight"], c=dict(
    state="acc_t lm[1], ls[1], lv[$E1];",
    init="S->lm[0] = -INFINITY; S->ls[0] = 0; for (int e = 0; e < $E1; e++) S->lv[e] = 0;",
    tile=(
        "{\n"
        "  real_t *b = buf0;\n"
        + _C_LSE_TILE_SHIFT.replace("SH", "0") +
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
))
REDUCTIONS["Sum"] = replace(REDUCTIONS["Sum"], c=dict(fused=True))


def check_formulas(red: Reduction, formulas: list[Node]) -> None:
    """Validate the formula dimensions for ``red`` (ValueError naming them)."""
    if len(formulas) != red.n_formulas:
        raise ValueError(f"{red.name} reduces {red.n_formulas} formula(s), got {len(formulas)}")
    if red.n_formulas == 2 and formulas[0].dim != 1:
        raise ValueError(
            f"{red.name}: the formula must be scalar (dimension 1) when a weight is "
            f"given, got dimension {formulas[0].dim}"
        )


# ---------------------------------------------------------------------------
# CUDA forms: per-pair updates of a state held in registers (see ``cuda``).
# ---------------------------------------------------------------------------
_CU_SUM = dict(
    state="acc_t ${S}acc[$E]; real_t ${S}tacc[$E];",
    init="KT_FOR(e, $E) { ${S}acc[e] = 0; ${S}tacc[e] = 0; }",
    update="KT_FOR(e, $E) ${S}tacc[e] += ${S}v0[e];",
    tile_end="KT_FOR(e, $E) { ${S}acc[e] += (acc_t)${S}tacc[e]; ${S}tacc[e] = 0; }",
    final="KT_FOR(e, $E) outf[i * $E + e] = (real_t)${S}acc[e];",
)
REDUCTIONS["Sum"] = replace(REDUCTIONS["Sum"], cuda=_CU_SUM)

for _lo, _init, _cmp in (("Min", "INFINITY", "<"), ("Max", "-INFINITY", ">")):
    _cu = dict(
        state="real_t ${S}mv[$E]; long long ${S}mi[$E];",
        init=f"KT_FOR(e, $E) {{ ${{S}}mv[e] = {_init}; ${{S}}mi[e] = -1; }}",
        # first index wins ties; a NaN wins and stays, as numpy.argmin
        update=(
            "KT_FOR(e, $E) {\n"
            "  const real_t v = ${S}v0[e];\n"
            f"  if (${{S}}mi[e] < 0 || v {_cmp} ${{S}}mv[e] || (v != v && ${{S}}mv[e] == ${{S}}mv[e])) "
            "{ ${S}mv[e] = v; ${S}mi[e] = j; }\n"
            "}"
        ),
    )
    _val = "KT_FOR(e, $E) outf[i * $E + e] = ${S}mv[e];"
    _arg = "KT_FOR(e, $E) outi[i * $E + e] = ${S}mi[e];"
    for _name, _final in ((_lo, _val), (f"Arg{_lo}", _arg), (f"{_lo}_Arg{_lo}", _val + "\n" + _arg)):
        REDUCTIONS[_name] = replace(REDUCTIONS[_name], cuda=dict(_cu, final=_final))

_CU_KMIN = dict(
    state="real_t ${S}kv[$E][$K]; long long ${S}ki[$E][$K];",
    init="KT_FOR(e, $E) KT_FOR(k, $K) { ${S}kv[e][k] = INFINITY; ${S}ki[e][k] = -1; }",
    # A sorted list in registers: the candidate replaces the last entry and
    # moves up by compare-and-swap (unrolled: constant indices); empty slots
    # (index -1) rank after everything; equal values keep index order.
    update=(
        "KT_FOR(e, $E) {\n"
        "  const real_t v = ${S}v0[e];\n"
        "  if (${S}ki[e][$K - 1] < 0 || KT_LT(v, ${S}kv[e][$K - 1])) {\n"
        "    ${S}kv[e][$K - 1] = v; ${S}ki[e][$K - 1] = j;\n"
        "    _Pragma(\"unroll\") for (int k = $K - 1; k > 0; k--) {\n"
        "      if (${S}ki[e][k - 1] < 0 || KT_LT(${S}kv[e][k], ${S}kv[e][k - 1])) {\n"
        "        const real_t tv = ${S}kv[e][k]; ${S}kv[e][k] = ${S}kv[e][k - 1]; ${S}kv[e][k - 1] = tv;\n"
        "        const long long ti = ${S}ki[e][k]; ${S}ki[e][k] = ${S}ki[e][k - 1]; ${S}ki[e][k - 1] = ti;\n"
        "      }\n"
        "    }\n"
        "  }\n"
        "}"
    ),
)
_kv = "KT_FOR(k, $K) KT_FOR(e, $E) outf[(i * $K + k) * $E + e] = ${S}kv[e][k];"
_ki = "KT_FOR(k, $K) KT_FOR(e, $E) outi[(i * $K + k) * $E + e] = ${S}ki[e][k];"
for _name, _final in (("KMin", _kv), ("ArgKMin", _ki), ("KMin_ArgKMin", _kv + "\n" + _ki)):
    REDUCTIONS[_name] = replace(REDUCTIONS[_name], cuda=dict(_CU_KMIN, final=_final))

# Log-sum-exp family, online: m is the running maximum of F (initially the
# most negative finite number), the sums are relative to it (a tile's part in
# real_t, folded into acc_t at the tile's end) and a new maximum rescales them.
# The common case is one comparison, one exp and one add: -inf adds exp(-inf)
# = 0 and NaN propagates through the sums by itself; only +inf, on the rare
# new-maximum path, goes to "bad", which then gives inf (or NaN), as the NumPy
# monoid's zero shift does. KT_EXPR / KT_LOGR / KT_RSCALE are the exp and log
# of the kernel's base: float32 kernels get F in base 2 (F log2 e, the scale
# folded into the formula) and use the hardware exp2.
def _cu_lse_update(q: str, new: str, add: str, bad: str) -> str:
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


_LSE_OUT = "(real_t)(((acc_t)${S}m[M] + KT_LOGR(S_)) * KT_RSCALE)"

REDUCTIONS["LogSumExp"] = replace(REDUCTIONS["LogSumExp"], cuda=dict(
    state="real_t ${S}m[$E], ${S}ts[$E], ${S}bad[$E]; acc_t ${S}s[$E];",
    init="KT_FOR(e, $E) { ${S}m[e] = -KT_REAL_MAX; ${S}ts[e] = 0; ${S}bad[e] = 0; ${S}s[e] = 0; }",
    update="KT_FOR(e, $E) {\n" + _cu_lse_update(
        "e",
        "${S}ts[e] = ${S}ts[e] * c + (real_t)1; ${S}s[e] *= (acc_t)c;",
        "${S}ts[e] += x;",
        "${S}bad[e] += v;",
    ) + "\n}",
    tile_end="KT_FOR(e, $E) { ${S}s[e] += (acc_t)${S}ts[e]; ${S}ts[e] = 0; }",
    final=(
        "KT_FOR(e, $E) outf[i * $E + e] = ${S}bad[e] != 0 ? (real_t)log(${S}bad[e] + ${S}s[e])\n"
        "    : " + _LSE_OUT.replace("[M]", "[e]").replace("S_", "${S}s[e]") + ";"
    ),
))
REDUCTIONS["LogSumExpWeight"] = replace(REDUCTIONS["LogSumExpWeight"], cuda=dict(
    state="real_t ${S}m[1], ${S}ts[$E1], ${S}bad[$E1]; bool ${S}nf; acc_t ${S}s[$E1];",
    init=("${S}m[0] = -KT_REAL_MAX; ${S}nf = false;\n"
          "KT_FOR(e, $E1) { ${S}ts[e] = 0; ${S}bad[e] = 0; ${S}s[e] = 0; }"),
    update="{\n" + _cu_lse_update(
        "0",
        "KT_FOR(e, $E1) { ${S}ts[e] = ${S}ts[e] * c + ${S}v1[e]; ${S}s[e] *= (acc_t)c; }",
        "KT_FOR(e, $E1) ${S}ts[e] += x * ${S}v1[e];",
        "${S}nf = true; KT_FOR(e, $E1) ${S}bad[e] += v * ${S}v1[e];",
    ) + "\n}",
    tile_end="KT_FOR(e, $E1) { ${S}s[e] += (acc_t)${S}ts[e]; ${S}ts[e] = 0; }",
    # +inf in F: inf * w (+-inf, or NaN where w = 0), as with a zero shift
    final=(
        "KT_FOR(e, $E1) outf[i * $E1 + e] = ${S}nf ? (real_t)log(${S}bad[e] + ${S}s[e])\n"
        "    : " + _LSE_OUT.replace("[M]", "[0]").replace("S_", "${S}s[e]") + ";"
    ),
))
REDUCTIONS["SumSoftMaxWeight"] = replace(REDUCTIONS["SumSoftMaxWeight"], cuda=dict(
    state="real_t ${S}m[1], ${S}ts, ${S}tv[$E1], ${S}bad[1]; acc_t ${S}s, ${S}sv[$E1];",
    init=("${S}m[0] = -KT_REAL_MAX; ${S}bad[0] = 0; ${S}ts = 0; ${S}s = 0;\n"
          "KT_FOR(e, $E1) { ${S}tv[e] = 0; ${S}sv[e] = 0; }"),
    update="{\n" + _cu_lse_update(
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
))

#: Reductions whose CUDA form applies exp to F itself (float32: F in base 2).
CUDA_EXP_OF_F = ("LogSumExp", "LogSumExpWeight", "SumSoftMaxWeight")
