"""Min, Max and their arguments: ``min_j F_ij``, ``argmin_j F_ij``, both in one pass.

One monoid serves the six: a (value, index) pair per component on
``sign * F`` (sign = 1 for Min, -1 for Max); the first index wins ties and a
NaN wins and stays, as ``numpy.argmin``.
"""

from __future__ import annotations

import numpy as np

from .. import _ops
from .._ir import index
from ._spec import TEMPLATES, dim0, register


def _argmin_tile(v, j0):
    idx = np.argmin(v, axis=1)
    val = np.take_along_axis(v, idx[:, None, :], axis=1)[:, 0, :]
    return val.astype(np.float64), idx.astype(np.int64) + j0


def _argmin_merge(a, b):
    take_b = (a[1] < 0) | (b[0] < a[0]) | (np.isnan(b[0]) & ~np.isnan(a[0]))
    return np.where(take_b, b[0], a[0]), np.where(take_b, b[1], a[1])


def _arg_surrogate(F, W, outs, gin):
    # Gradient flows to the selected j only: S = sum_k gin_k F_k [j == arg_k].
    hit = _ops.make("Equal", index("j"), outs[-1])
    return _ops.make("SumFeat", _ops.make("Mul", gin, _ops.make("Mul", hit, F)))


# C: the tile fold over the buffered values; in the block-sparse kernel the
# index kept is the caller's (jmap), and equal values keep the smallest one,
# since sorted positions are not visited in the caller's order.
_C_TILE = (
    "for (int e = 0; e < $E; e++) {\n"
    "  const real_t *b = buf0 + e * TJ;\n"
    "  for (int64_t jj = 0; jj < nj; jj++) {\n"
    "    const real_t v = b[jj];\n"
    "    /* first index wins ties; a NaN wins and stays, as numpy.argmin */\n"
    "    if (S->mi[e] < 0 || v $CMP S->mv[e] || (v != v && S->mv[e] == S->mv[e])) { S->mv[e] = v; S->mi[e] = j0 + jj; }\n"
    "  }\n"
    "}"
)
_C_RANGES_TILE = (TEMPLATES / "ranges_min_fold.h").read_text().rstrip("\n")
_C_VAL = "for (int e = 0; e < $E; e++) outf[i * $E + e] = S->mv[e];"
_C_ARG = "for (int e = 0; e < $E; e++) outi[i * $E + e] = S->mi[e];"
_CU_VAL = "KT_FOR(e, $E) outf[i * $E + e] = ${S}mv[e];"
_CU_ARG = "KT_FOR(e, $E) outi[i * $E + e] = ${S}mi[e];"


def _forms(init: str, cmp: str, c_final: str, cu_final: str):
    """The C and CUDA forms of one member (``init``: the identity value,
    ``cmp``: '<' or '>'), writing its outputs with ``*_final``."""
    c = dict(
        state="real_t mv[$E]; int64_t mi[$E];",
        init=f"for (int e = 0; e < $E; e++) {{ S->mv[e] = {init}; S->mi[e] = -1; }}",
        tile=_C_TILE.replace("$CMP", cmp),
        ranges_tile=_C_RANGES_TILE.replace("$CMP", cmp),
        final=c_final,
    )
    cuda = dict(
        state="real_t ${S}mv[$E]; long long ${S}mi[$E];",
        init=f"KT_FOR(e, $E) {{ ${{S}}mv[e] = {init}; ${{S}}mi[e] = -1; }}",
        # first index wins ties; a NaN wins and stays, as numpy.argmin
        update=(
            "KT_FOR(e, $E) {\n"
            "  const real_t v = ${S}v0[e];\n"
            f"  if (${{S}}mi[e] < 0 || v {cmp} ${{S}}mv[e] || (v != v && ${{S}}mv[e] == ${{S}}mv[e])) "
            "{ ${S}mv[e] = v; ${S}mi[e] = j; }\n"
            "}"
        ),
        # block-sparse: the caller's index jo, and on equal values the smallest
        # (sorted positions are not visited in the caller's order)
        ranges_update=(
            "KT_FOR(e, $E) {\n"
            "  const real_t v = ${S}v0[e];\n"
            "  const real_t w = ${S}mv[e];\n"
            f"  if (${{S}}mi[e] < 0 || v {cmp} w || (v != v && w == w)\n"
            "      || ((v == w || (v != v && w != w)) && jo < ${S}mi[e])) "
            "{ ${S}mv[e] = v; ${S}mi[e] = jo; }\n"
            "}"
        ),
        final=cu_final,
    )
    return c, cuda


def _register_family(sign: int, lo: str, up: str, init: str, cmp: str) -> None:
    """Register ``lo``, ``Arg{lo}`` and ``{lo}_Arg{lo}`` (``up``: lower case)."""
    both = f"{lo}_Arg{lo}"

    def state_of_block(outs, j0, K):  # the block ran ``both``
        val, idx = outs
        return sign * val.astype(np.float64), np.where(idx >= 0, idx + j0, -1)

    common = dict(
        n_formulas=1, out_dim=dim0,
        init=lambda n, dims, K: (np.full((n, dims[0]), np.inf), np.full((n, dims[0]), -1)),
        tile=lambda v, j0, K: _argmin_tile(sign * v[0], j0),
        merge=_argmin_merge,
        smooth=False, block=((both, False),), state_of_block=state_of_block,
    )
    members = (
        # name, doc, outputs, finalize, C final, CUDA final, gradient
        (lo, f"{up}_j F_ij", (False,), lambda s, K: (sign * s[0],), _C_VAL, _CU_VAL,
         _arg_surrogate),
        (f"Arg{lo}", f"arg{up}_j F_ij (first one on ties)", (True,), lambda s, K: (s[1],),
         _C_ARG, _CU_ARG, None),
        (both, f"({up}_j F_ij, arg{up}_j F_ij)", (False, True),
         lambda s, K: (sign * s[0], s[1]), _C_VAL + "\n" + _C_ARG, _CU_VAL + "\n" + _CU_ARG,
         _arg_surrogate),
    )
    for name, doc, ints, fin, c_final, cu_final, surrogate in members:
        c, cuda = _forms(init, cmp, c_final, cu_final)
        register(
            name=name, doc=doc, methods=(name.lower(),), int_outputs=ints, finalize=fin,
            c=c, cuda=cuda, surrogate=surrogate,
            # the gradient selects the arg-index: run the pair forward
            grad_forward=both if surrogate is not None and name != both else None,
            **common,
        )


_register_family(1, "Min", "min", "INFINITY", "<")
_register_family(-1, "Max", "max", "-INFINITY", ">")
