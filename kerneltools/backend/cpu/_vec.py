"""Explicit AVX-512 loops for the dense kernel's float64 sums (Sum, and the
log-sum-exp family's in-loop sums).

The vectorised loop over a tile is scalar C under ``#pragma omp simd``: the
compiler widens it, and each ``KT_EXP2N`` becomes the inlined polynomial of
``kt_exp2_nonpos`` (19 vector operations of the ~27 a float64 Gaussian pair
costs per row and 8 pairs, all on the two FMA ports). A table lookup
shortens that exp (``kt_exp2v_nonpos`` in ``templates/kt_exp.h``: 13
operations; ``kt_exp2v_tab``, for _cpu_near's bounded arguments: 12), but
only as a register permute (``vpermi2pd``), which the compiler never emits
from scalar code (an indexed array became a gather, slower than the
polynomial). So where the loop's statements are plain arithmetic, loads,
stores to the tile's buffers, the log-sum-exp clamp ``c < z ? c : z``
(``vminpd``) and ``KT_EXP2N`` (or ``KT_EXP2T``), and its only reductions
are sums, this module writes the same statements over
GCC vector types (``kt_vd``: 8 doubles; a scalar operand is broadcast), with
the exps as ``kt_exp2v_nonpos`` (``kt_exp2v_tab``), for the tile's whole
vectors; the scalar loop then runs from there to the tile's end (its last
``nj % 8`` points, and all of them where ``KT_VEC_F64`` is not defined: no
AVX-512, or ``KT_NO_VEC``). The sums' order is that of the simd loop (eight
lanes, then across lanes). One thread, one process (``asv_bench/exp_ab.py
--vector``, N = M = 1e4): float64 Gaussian K b 1.20x, its gradient 1.29x,
log-sum-exp 1.22x.

Float64 only: the float32 exp is short already (a degree-5 polynomial).
"""

from __future__ import annotations

import re

__all__ = ["vector_sum_loop"]

_STATEMENT = re.compile(r"^(\s*)const real_t (\w+) = (.*);$")
_WRITE = re.compile(r"^(\s*)(\w+) \+= (.*);$")
#: a store of the loop's value to a tile buffer (the folding reductions')
_STORE = re.compile(r"^(\s*)(\w+(?:\[[^\[\]]*\])+) = (.*);$")
#: a read of a tile array at the loop's index: becomes an 8-wide load
_LOAD = re.compile(r"\b(\w+)\[([^\[\]]*\bjj\b[^\[\]]*)\]")
#: a literal cast to real_t (a scalar operand as it is)
_LITERAL_CAST = re.compile(r"\(real_t\)(?=[\d.])")
#: ``c < v ? c : v``, c a number: the log-sum-exp sums' clamp, vminpd
#: (which returns its second operand, v, where either is NaN, as the test)
_CLAMP = re.compile(r"([\d.]+) < (\w+) \? \1 : \2")
#: what an expression may hold once its loads and calls are renamed
_ALLOWED = re.compile(r"^[\w\s.,+\-*/()\[\]&]*$")
_CALL = re.compile(r"\b(\w+)\s*\(")
_CALLS = {"KT_VLOAD", "KT_VMIN", "kt_exp2v_nonpos", "kt_exp2v_tab"}
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
#: names that are not per-pair values of a vector loop: the pair's index j
#: (one per lane), casts (of a vector they are no-ops GCC rejects)
_FORBIDDEN = re.compile(r"\b(j|real_t|acc_t|int64_t|int)\b")


def _vector_expr(expr: str):
    """``expr`` over ``kt_vd`` values, or None where it holds anything but
    arithmetic, names, numbers, tile reads, the clamp and KT_EXP2N/T."""
    out = _LOAD.sub(r"KT_VLOAD(&\1[\2])", _LITERAL_CAST.sub("", expr))
    out = _CLAMP.sub(r"KT_VMIN(\1, \2)", out)
    out = out.replace("KT_EXP2N(", "kt_exp2v_nonpos(").replace("KT_EXP2T(", "kt_exp2v_tab(")
    if not _ALLOWED.match(out) or _FORBIDDEN.search(out):
        return None
    if any(name not in _CALLS for name in _CALL.findall(out)):
        return None
    return out


def vector_sum_loop(code: str, writes, sums) -> list | None:
    """The lines of the vector loop, with ``jv0`` (where the scalar loop
    starts) declared, for a tile whose only reductions are sums: ``code``
    the loop's statements, ``writes`` its ``s += value;`` lines (and stores
    to tile buffers, statements), ``sums`` the accumulators (declared before,
    added to here); None where a line does not qualify or no ``KT_EXP2N``
    is called (plain arithmetic the compiler widens as well). A statement
    that reads no load and no vector value stays scalar (broadcast where
    used)."""
    lines = [x for x in code.split("\n") if x.strip()] + list(writes)
    if not any("KT_EXP2N(" in x or "KT_EXP2T(" in x for x in lines):
        return None
    body, vectors = [], set()

    def vector(expr):
        return "KT_VLOAD(" in expr or any(n in vectors for n in _NAME.findall(expr))

    for line in lines:
        m = _STATEMENT.match(line)
        w = None if m else _WRITE.match(line)
        st = None if m or w else _STORE.match(line)
        expr = _vector_expr((m or w or st).group(3)) if (m or w or st) else None
        if expr is None:
            return None
        if m and vector(expr):
            vectors.add(m.group(2))
            body.append(f"    const kt_vd {m.group(2)} = {expr};")
        elif m:
            body.append("  " + line)
        elif w and w.group(2) in sums:
            body.append(f"    v{w.group(2)} += {expr};")
        elif st and "jj" in st.group(2):
            value = f"(__m512d)({expr})" if vector(expr) else f"_mm512_set1_pd({expr})"
            body.append(f"    _mm512_storeu_pd(&{st.group(2)}, {value});")
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
