"""The K smallest values and their indices: ``Kmin``, ``argKmin``, both in one pass.

One monoid serves the three: per component, a sorted list of K (value,
index) pairs; empty slots (index -1) rank after every value, NaN included
(NaN sorts last, as in ``numpy.sort``); equal values keep index order.
"""

from __future__ import annotations

import numpy as np

from .. import _ops
from .._ir import index
from ._spec import TEMPLATES, dim0, register


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


def _state_of_block(outs, j0, K):
    """The state from a block's KMin_ArgKMin (a block of fewer than K points:
    its empty slots come last)."""
    val, idx = outs
    val = val.astype(np.float64)
    idx = np.where(idx >= 0, idx + j0, -1)
    if val.shape[1] < K:
        pad = K - val.shape[1]
        val = np.concatenate([val, np.full(val.shape[:1] + (pad,) + val.shape[2:], np.inf)], 1)
        idx = np.concatenate([idx, np.full(idx.shape[:1] + (pad,) + idx.shape[2:], -1)], 1)
    return val, idx


_C = dict(
    state="real_t kv[$E][$K]; int64_t ki[$E][$K];",
    init=(
        "for (int e = 0; e < $E; e++) for (int k = 0; k < $K; k++) { S->kv[e][k] = INFINITY; S->ki[e][k] = -1; }"
    ),
    # The candidates of 32 values at a time: a vectorised test against the
    # K-th kept value gives a bit mask (kt_below32; every value while the
    # list is not full), and only its set bits are visited, each checked
    # again against the K-th value as it is then (it drops as values are
    # inserted), then inserted without data-dependent branches: slot k takes
    # slot k - 1's entry, the candidate or its own (K - 1 selects).
    # With AVX-512 and K <= 16, kt_kmin_fold (kt_c_runtime.h) does the same
    # with the list in vector registers.
    tile=(
        "for (int e = 0; e < $E; e++) {\n"
        "  const real_t *b = buf0 + e * TJ;\n"
        "  real_t *kv = S->kv[e];\n"
        "  int64_t *ki = S->ki[e];\n"
        "#if KT_KMIN_VEC >= $K\n"
        "  kt_kmin_fold(b, nj, j0, kv, ki, $K);\n"
        "#else\n"
        "  for (int64_t jc = 0; jc < nj; jc += 32) {\n"
        "    const int64_t nc = nj - jc < 32 ? nj - jc : 32;\n"
        "    uint32_t mask = nc < 32 ? (UINT32_C(1) << nc) - 1 : ~UINT32_C(0);\n"
        "    if (ki[$K - 1] >= 0) mask &= kt_below32(b + jc, kv[$K - 1]);\n"
        "    while (mask) {\n"
        "      const int l = __builtin_ctz(mask);\n"
        "      mask &= mask - 1;\n"
        "      const real_t v = b[jc + l];\n"
        "      if (ki[$K - 1] >= 0 && !KT_LT(v, kv[$K - 1])) continue;\n"
        "      /* sorted insertion; equal values keep index order */\n"
        "      const int64_t jv = j0 + jc + l;\n"
        "      int at = 1; /* v ranks before entry k (k = K - 1: tested above) */\n"
        "      for (int k = $K - 1; k > 0; k--) {\n"
        "        const int up = ki[k - 1] < 0 || KT_LT(v, kv[k - 1]);\n"
        "        kv[k] = up ? kv[k - 1] : (at ? v : kv[k]);\n"
        "        ki[k] = up ? ki[k - 1] : (at ? jv : ki[k]);\n"
        "        at = up;\n"
        "      }\n"
        "      if (at) { kv[0] = v; ki[0] = jv; }\n"
        "    }\n"
        "  }\n"
        "#endif\n"
        "}"
    ),
    # Block-sparse: the caller's index (jmap); the fold keeps the K-th (value,
    # index) in registers and visits only the candidates that a vectorised
    # test lets through (with few candidates per row, that test is most of
    # the work); for a scalar formula the test rides along the loop that
    # computes the tile, and most tiles end there.
    ranges_tile=(TEMPLATES / "ranges_kmin_fold.h").read_text().rstrip("\n"),
    ranges_scalar_tile=(TEMPLATES / "ranges_kmin_tile.h").read_text().rstrip("\n"),
    # Dense, scalar F: a tile whose every value is >= the K-th kept value
    # (with a full list) changes nothing; NaN (list not full, or a NaN kept)
    # folds every tile.
    tile_skip="($S.ki[0][$K - 1] >= 0 ? $S.kv[0][$K - 1] : (real_t)NAN)",
)
_C_VAL = "for (int k = 0; k < $K; k++) for (int e = 0; e < $E; e++) outf[(i * $K + k) * $E + e] = S->kv[e][k];"
_C_ARG = "for (int k = 0; k < $K; k++) for (int e = 0; e < $E; e++) outi[(i * $K + k) * $E + e] = S->ki[e][k];"

def _cu_update(jdx: str, before_last: str, before_prev: str) -> str:
    """The CUDA update: a sorted list in registers; the candidate (index
    ``jdx``) replaces the last entry if it ranks ``before_last``, then moves
    up by compare-and-swap while entry k ranks ``before_prev`` entry k - 1
    (unrolled: constant indices); empty slots (index -1) rank after all."""
    return (
        "KT_FOR(e, $E) {\n"
        "  const real_t v = ${S}v0[e];\n"
        f"  if (${{S}}ki[e][$K - 1] < 0 || {before_last}) {{\n"
        f"    ${{S}}kv[e][$K - 1] = v; ${{S}}ki[e][$K - 1] = {jdx};\n"
        "    _Pragma(\"unroll\") for (int k = $K - 1; k > 0; k--) {\n"
        f"      if (${{S}}ki[e][k - 1] < 0{before_prev}) {{\n"
        "        const real_t tv = ${S}kv[e][k]; ${S}kv[e][k] = ${S}kv[e][k - 1]; ${S}kv[e][k - 1] = tv;\n"
        "        const long long ti = ${S}ki[e][k]; ${S}ki[e][k] = ${S}ki[e][k - 1]; ${S}ki[e][k - 1] = ti;\n"
        "      }\n"
        "    }\n"
        "  }\n"
        "}"
    )


_CUDA = dict(
    state="real_t ${S}kv[$E][$K]; long long ${S}ki[$E][$K];",
    init="KT_FOR(e, $E) KT_FOR(k, $K) { ${S}kv[e][k] = INFINITY; ${S}ki[e][k] = -1; }",
    # equal values keep index order: j increases along the pair loop
    update=_cu_update("j", "KT_LT(v, ${S}kv[e][$K - 1])",
                      " || KT_LT(${S}kv[e][k], ${S}kv[e][k - 1])"),
    # Block-sparse: the caller's index jo, equal values in its order (sorted
    # positions are not visited in the caller's order).
    ranges_update=_cu_update(
        "jo", "KT_KLT(v, jo, ${S}kv[e][$K - 1], ${S}ki[e][$K - 1])",
        "\n          || KT_KLT(${S}kv[e][k], ${S}ki[e][k], ${S}kv[e][k - 1], ${S}ki[e][k - 1])"),
)
_CU_VAL = "KT_FOR(k, $K) KT_FOR(e, $E) outf[(i * $K + k) * $E + e] = ${S}kv[e][k];"
_CU_ARG = "KT_FOR(k, $K) KT_FOR(e, $E) outi[(i * $K + k) * $E + e] = ${S}ki[e][k];"

for _name, _method, _fin, _ints, _sur, _c_final, _cu_final in (
    ("KMin", "Kmin", lambda s, K: (s[0],), (False,), _kmin_surrogate, _C_VAL, _CU_VAL),
    ("ArgKMin", "argKmin", lambda s, K: (s[1],), (True,), None, _C_ARG, _CU_ARG),
    ("KMin_ArgKMin", "Kmin_argKmin", lambda s, K: (s[0], s[1]), (False, True),
     _kmin_surrogate, _C_VAL + "\n" + _C_ARG, _CU_VAL + "\n" + _CU_ARG),
):
    register(
        name=_name, doc="the K smallest values of F_ij over j, in increasing order",
        methods=(_method,), n_formulas=1, out_dim=dim0, int_outputs=_ints, uses_k=True,
        init=_kmin_init, tile=_kmin_tile, merge=_kmin_merge, finalize=_fin,
        c=dict(_C, final=_c_final), cuda=dict(_CUDA, final=_cu_final),
        surrogate=_sur,
        # the gradient selects the arg-indices: run the pair forward
        grad_forward="KMin_ArgKMin" if _name == "KMin" else None,
        smooth=False, block=(("KMin_ArgKMin", False),), state_of_block=_state_of_block,
    )
