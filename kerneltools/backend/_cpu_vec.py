"""Explicit AVX-512 loops for the dense kernel's float64 sums.

The vectorised loop over a tile is scalar C under ``#pragma omp simd``: the
compiler widens it, and each ``KT_EXP2N`` becomes the inlined polynomial of
``kt_exp2_nonpos`` (19 vector operations of the ~27 a float64 Gaussian pair
costs per row and 8 pairs, all on the two FMA ports). A table lookup
shortens that exp (``kt_exp2v_nonpos`` in ``templates/kt_exp.h``: 13
operations; ``kt_exp2v_tab``, for _cpu_near's bounded arguments: 12), but
only as a register permute (``vpermi2pd``), which the compiler never emits
from scalar code (an indexed array became a gather, slower than the
polynomial). So where the loop's statements are plain arithmetic, loads and
``KT_EXP2N`` (or ``KT_EXP2T``), this module writes the same statements over
GCC vector types (``kt_vd``: 8 doubles; a scalar operand is broadcast), with
the exps as ``kt_exp2v_nonpos`` (``kt_exp2v_tab``), for the tile's whole
vectors; the scalar loop then runs from there to the tile's end (its last
``nj % 8`` points, and all of them where ``KT_VEC_F64`` is not defined: no
AVX-512, or ``KT_NO_VEC``). The sums' order is that of the simd loop (eight
lanes, then across lanes).

Float64 only: the float32 exp is short already (a degree-5 polynomial).
"""

from __future__ import annotations

import re

__all__ = ["vector_sum_loop"]

_STATEMENT = re.compile(r"^(\s*)const real_t (\w+) = (.*);$")
_WRITE = re.compile(r"^(\s*)(\w+) \+= (.*);$")
#: a read of a tile array at the loop's index: becomes an 8-wide load
_LOAD = re.compile(r"\b(\w+)\[([^\[\]]*\bjj\b[^\[\]]*)\]")
#: what an expression may hold once its loads and exps are renamed
_ALLOWED = re.compile(r"^[\w\s.,+\-*/()\[\]&]*$")
_CALL = re.compile(r"\b(\w+)\s*\(")
_CALLS = {"KT_VLOAD", "kt_exp2v_nonpos", "kt_exp2v_tab"}
#: names that are not per-pair values of a vector loop: the pair's index j
#: (one per lane), casts (of a vector they are no-ops GCC rejects)
_FORBIDDEN = re.compile(r"\b(j|real_t|acc_t|int64_t|int)\b")


def _vector_expr(expr: str):
    """``expr`` over ``kt_vd`` values, or None where it holds anything but
    arithmetic, names, numbers, tile reads and KT_EXP2N."""
    out = _LOAD.sub(r"KT_VLOAD(&\1[\2])", expr).replace("KT_EXP2N(", "kt_exp2v_nonpos(")
    out = out.replace("KT_EXP2T(", "kt_exp2v_tab(")
    if not _ALLOWED.match(out) or _FORBIDDEN.search(out):
        return None
    if any(name not in _CALLS for name in _CALL.findall(out)):
        return None
    return out


def vector_sum_loop(code: str, writes, sums) -> list | None:
    """The lines of the vector loop, with ``jv0`` (where the scalar loop
    starts) declared, for a fused Sum's tile: ``code`` the loop's statements,
    ``writes`` its ``s += value;`` lines, ``sums`` the accumulators (declared
    before, added to here); None where a statement does not qualify or no
    ``KT_EXP2N`` is called (plain arithmetic the compiler widens as well)."""
    if "KT_EXP2N(" not in code and "KT_EXP2T(" not in code:
        return None
    body = []
    for line in [x for x in code.split("\n") if x.strip()] + list(writes):
        m = _STATEMENT.match(line)
        w = None if m else _WRITE.match(line)
        expr = _vector_expr((m or w).group(3)) if (m or w) else None
        if expr is None:
            return None
        if m:
            body.append(f"    const kt_vd {m.group(2)} = {expr};")
        elif w.group(2) in sums:
            body.append(f"    v{w.group(2)} += {expr};")
        else:
            return None
    zero = "{0}"
    return (["int64_t jv0 = 0; /* the scalar loop's start */",
             "#if defined(KT_VEC_F64)",
             "{",
             "  kt_vd " + ", ".join(f"v{s} = {zero}" for s in sums) + ";",
             "  jv0 = nj & ~(int64_t)7;",
             "  for (int64_t jj = 0; jj < jv0; jj += 8) {"]
            + body
            + ["  }"]
            + [f"  {s} += _mm512_reduce_add_pd((__m512d)v{s});" for s in sums]
            + ["}", "#endif"])
