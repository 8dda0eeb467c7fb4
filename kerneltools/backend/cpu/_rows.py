"""The dense C kernel's reduction code for ``RB`` rows per vectorised loop.

:mod:`._cpu_codegen` renders the formulas for the rows ``i_0 .. i_<RB-1>`` of
one loop over a tile's points (they share each j-vector's loads and j-level
values); this module wraps those statements in the loop and folds the values
into the rows' states:

* Sum (``{"fused": True}``): one accumulator per row and component inside
  the loop (``real_t`` per tile, ``acc_t`` across tiles).
* Every other reduction: the loop writes each row's values to its buffers
  ``tb<b>[r]`` (the fold reads them as ``buf<b>``), then the reduction's C
  fold (``Reduction.c["tile"]``) runs row by row. Two forms ride along the
  loop and spare most tiles that fold:

  - ``online`` (log-sum-exp family): the tile's sums of ``exp(F - shift)``,
    ``shift`` the state's; where the state has a finite shift and the tile's
    unweighted sum stays below 2^20 (:data:`LSE_SUM_LOG2`: each term is
    clamped there, so none was) the sums are added as they are, else the
    fold runs on the buffered tile, exactly as without this form. Where the
    family has no unweighted sum (LogSumExpWeight) or has weights in float32
    (2^20 |w| terms could overflow a float32 sum), the loop keeps the tile's
    maximum instead and tests that it is no new maximum (:data:`LSE_SLACK`).
  - ``tile_skip`` (K-min of a scalar): the value below which a candidate
    must be folded (the K-th kept value); a tile whose minimum is not below
    it is skipped.

In float64, loops whose only reductions are sums (Sum, the ``online`` sums)
and that call the exp run by explicit AVX-512 vectors first
(:mod:`._cpu_vec`), the scalar loop taking a tile's last points.
"""

from __future__ import annotations

import re
from string import Template

import numpy as np

from .._codegen import indent, red_form, red_subs
from ._vec import vector_sum_loop
from .._plan import Plan

__all__ = ["tile_loop", "row_block_reduction", "sum_tested"]

#: The vectorised loop over a tile's points (``bound``: nj, or njv in the
#: block-sparse kernel); ``clauses``: the simd pragma's, e.g. a reduction.
_TILE_LOOP = Template(
    r"""#pragma omp simd${clauses}
for (int64_t jj = ${start}; jj < ${bound}; jj++) {
  const int64_t j = j0 + jj;
${code}
${writes}
}"""
)


def tile_loop(bound: str, code: str, writes, clauses: str = "", start: str = "0") -> str:
    """The vectorised loop over a tile: ``code`` then the ``writes`` lines
    (``start``: the first index, 0 unless an explicit vector loop ran)."""
    return _TILE_LOOP.substitute(bound=bound, code=code, writes="\n".join(writes),
                                 clauses=clauses, start=start)


def _clauses(op: str, names) -> str:
    return f" reduction({op}:{', '.join(names)})" if names else ""


def row_block_reduction(plan: Plan, formulas, rows, block_setup, factored=False):
    """(tile, state, init, final) of the dense kernel for ``len(rows)`` rows
    per vectorised loop (``rows``: their renderings; a folding reduction's
    buffers are appended to ``block_setup``). ``factored``: a Sum whose rows
    render (inner, outer) of :func:`._cpu_factor.factor_out`."""
    red, rb = plan.red, len(rows)
    code = "\n".join(x for x in [rows[0].code("j", "  ")]
                      + [row.code("ij", "  ") for row in rows] if x)
    if red.c.get("fused"):
        return _fused_sum(formulas[0].dim, rows, code, factored,
                          np.dtype(plan.dtype) == np.float64)
    subs = red_subs(formulas, plan.K)
    writes = [f"  tb{b}[{r}][{e} * TJ + jj] = {x};" for r, row in enumerate(rows)
              for b, outs in enumerate(row.outputs) for e, x in enumerate(outs)]
    block_setup += [f"real_t tb{b}[RB][{f.dim} * TJ];" for b, f in enumerate(formulas[:2])]
    fold = red_form(red.c, "tile", subs)
    pre, post, tests = [], "", [None] * rb
    if "online" in red.c:
        pre, post, tests = _online(red.c["online"], formulas, rows, writes, plan.dtype)
    elif "tile_skip" in red.c and formulas[0].dim == 1:
        pre, post, tests = _skip(red.c["tile_skip"], subs, rows, writes)
    sums = re.findall(r"reduction\(\+:([^)]*)\)", post)
    vector = None
    if np.dtype(plan.dtype) == np.float64 and post.count("reduction(") == len(sums):
        # float64 log-sum-exp sums: the explicit vector loop (_cpu_vec)
        vector = vector_sum_loop(code, writes, [n.strip() for g in sums for n in g.split(",")])
    tile = pre + (vector or []) + [tile_loop("nj", code, writes, clauses=post,
                                             start="jv0" if vector else "0")]
    for r in range(rb):
        body = [f"const int64_t i = i_{r};", f"kt_state *S = &st[ii + {r}];" if r
                else "kt_state *S = &st[ii];"]
        body += [f"real_t *const buf{b} = tb{b}[{r}];" for b in range(len(formulas[:2]))]
        body.append(fold if tests[r] is None else tests[r].replace("$fold", indent(fold, 2)))
        guard = f"if (ii + {r} < ni) {{" if r else "{"
        tile += [guard, indent("\n".join(body), 2), "}"]
    return ("\n".join(tile),
            *(red_form(red.c, part, subs) for part in ("state", "init", "final")))


def _fused_sum(E: int, rows, code, factored: bool, double: bool = False):
    """Sum: accumulators in the loop, added to the rows' states per tile
    (``factored``: the loop sums the inner factor, each row's tile sum is
    multiplied by its outer factor as it is added). ``double``: float64,
    whose loops with a KT_EXP2N run by explicit vectors where they qualify
    (:mod:`._cpu_vec`), the scalar loop taking the rest of the tile."""
    rb = len(rows)
    inner = len(rows[0].outputs[0])  # E, or 1 for a scalar inner factor
    names = [[f"s{r}_{e}" for e in range(inner)] for r in range(rb)]
    flat = [n for row in names for n in row]
    writes = [f"  {names[r][e]} += {rows[r].outputs[0][e]};"
              for r in range(rb) for e in range(inner)]
    vector = vector_sum_loop(code, writes, flat) if double else None
    sums = tile_loop("nj", code, writes, clauses=_clauses("+", flat),
                     start="jv0" if vector else "0")
    if vector:
        sums = "\n".join(vector + [sums])

    def term(r, e):
        s = names[r][e if inner > 1 else 0]
        if not factored:
            return s
        c = rows[r].outputs[1]
        return f"(acc_t){c[e if len(c) > 1 else 0]} * (acc_t){s}"

    adds = [f"st[ii].A[{e}] += {term(0, e)};" for e in range(E)]
    for r in range(1, rb):
        adds.append(f"if (ii + {r} < ni) {{ "
                    + " ".join(f"st[ii + {r}].A[{e}] += {term(r, e)};" for e in range(E))
                    + " }")
    tile = "\n".join([f"real_t {', '.join(f'{n} = 0' for n in flat)};", sums] + adds)
    return (tile, f"acc_t A[{E}];", f"for (int e = 0; e < {E}; e++) S->A[e] = 0;",
            f"for (int e = 0; e < {E}; e++) outf[i * {E} + e] = (real_t)S->A[e];")


def _state(r: int) -> str:
    """Row r's state, clamped to the block's last row (rows past ni repeat it)."""
    return f"st[ii + {r} < ni ? ii + {r} : ni - 1]" if r else "st[ii]"


#: How far (in nats) a tile's maximum may exceed the state's shift and its
#: in-loop sums still be kept (terms up to e^8 ~ 3e3 relative to the shift),
#: where the loop tracks the maximum (see :func:`sum_tested`):
#: a row's maximum seldom grows by more after its first tile, so that the
#: buffered fold runs about once per row (with no slack, about ln(M / TJ)
#: times: the tiles holding a new maximum).
LSE_SLACK = 8

#: Elsewhere the loop tracks no maximum: each term 2^z, z = (F - shift)
#: log2 e, is clamped at 2^LSE_SUM_LOG2 and the tile's unweighted sum kept
#: when it is below that (so no term was clamped, every term is below it;
#: a clamped term alone makes the sum reach it, sums of non-negative terms
#: never rounding below one of them), else the buffered fold runs. 2^20 ~
#: 1e6 = e^13.9 bounds the terms about as e^8 and the TJ = 512 terms of a
#: tile did.
LSE_SUM_LOG2 = 20


def _slack(online, dtype) -> str:
    """The slack of :data:`LSE_SLACK` as C, 0 for float32 weighted sums: a
    float32 tile sum of w e^8 terms would overflow for |w| above ~1e32."""
    weighted = any(kind == "W" for _, kind in online)
    single = np.dtype(dtype) == np.float32
    return "(real_t)0" if weighted and single else f"(real_t){LSE_SLACK}"


def sum_tested(online, dtype) -> bool:
    """Whether the tile's own unweighted sum decides (no maximum in the loop):
    the family has one (``F``: per component, ``1``: SumSoftMaxWeight's), and
    a weighted float32 sum is not at stake (terms up to 2^20 |w| could
    overflow it; those keep the maximum with no slack)."""
    kinds = {kind for _, kind in online}
    single = np.dtype(dtype) == np.float32
    return bool(kinds & {"F", "1"}) and not ("W" in kinds and single)


def _online(online, formulas, rows, writes, dtype):
    """The log-sum-exp family's in-loop sums (see the module docstring):
    (lines before the loop, its reduction clauses, each row's fold test)."""
    per_component = all(kind == "F" for _, kind in online)
    shifts = formulas[0].dim if per_component else 1
    by_sum = sum_tested(online, dtype)
    plain = next((a for a, kind in online if kind in ("F", "1")), None)  # unweighted sums
    slack, log2e = _slack(online, dtype), "(real_t)1.4426950408889634074"
    zmax = f"(real_t){LSE_SUM_LOG2}"
    pre, tests, maxes, sums = [], [], [], []
    for r, row in enumerate(rows):
        ok, adds = [], []
        for e in range(shifts):
            M, m, d, z = f"M{r}_{e}", f"m{r}_{e}", f"d{r}_{e}", f"z{r}_{e}"
            pre.append(f"const real_t {M} = (real_t){_state(r)}.lm[{e}];")
            v = row.outputs[0][e]
            if by_sum:
                # zmax < z ? zmax : z keeps a NaN z (its sum is NaN: folded)
                # z = (v - M) log2 e as one FMA, v log2 e - M log2 e (M log2 e
                # once per tile): one operation less per pair (float64
                # log-sum-exp 1.02-1.05x in one process). The rounding of
                # M log2 e shifts the tile's z by up to |M| 2^-p: about an ulp
                # of the result M + log(sum), the size of v's own rounding
                # (where it flushes a tile's terms, |M| > 2^30 in float32, the
                # result's ulp is far above the log of the tile count)
                pre.append(f"const real_t {M}l = {M} * {log2e};")
                writes += [f"  const real_t {z} = {v} * {log2e} - {M}l;",
                           f"  const real_t x{r}_{e} = KT_EXP2N({zmax} < {z} ? {zmax} : {z});"]
                q = f"q{r}_{plain}{e}"
                ok.append(f"{M} > -INFINITY && {q} < (real_t){2 ** LSE_SUM_LOG2}")
                continue
            pre.append(f"real_t {m} = -INFINITY;")
            writes += [f"  {m} = {v} > {m} ? {v} : {m};",
                       f"  const real_t {d} = {v} - {M};",
                       f"  const real_t x{r}_{e} = KT_EXP2N(({d} > {slack} ? {slack}"
                       f" : {d}) * {log2e});"]
            maxes.append(m)
            ok.append(f"{M} > -INFINITY && !({m} > {M} + {slack})")
        for array, kind in online:
            comps = range(formulas[-1].dim if kind == "W" else
                          (shifts if kind == "F" else 1))
            for e in comps:
                q = f"q{r}_{array}{e}"
                x = f"x{r}_{e if kind == 'F' else 0}"
                term = f"{x} * {row.outputs[1][e]}" if kind == "W" else x
                pre.append(f"real_t {q} = 0;")
                writes.append(f"  {q} += {term};")
                sums.append(q)
                adds.append(f"S->{array}[{e}] += (acc_t){q};")
        # a finite shift, and no new maximum or a sum below 2^20: the sums
        # are the tile's part
        tests.append("\n".join([f"if ({' && '.join(ok)}) {{", indent("\n".join(adds), 2),
                                "} else {", "$fold", "}"]))
    return pre, _clauses("max", maxes) + _clauses("+", sums), tests


def _skip(threshold: str, subs: dict, rows, writes):
    """K-min's in-loop test (see the module docstring): (lines before the
    loop, its reduction clause, each row's fold test). The loop keeps the
    tile's minimum (one min per vector; a NaN value is passed over: it
    cannot enter a full list); the tile is folded when that minimum is below
    the K-th kept value, or that value is NaN (a list not full: every tile)."""
    pre, tests, mins = [], [], []
    for r, row in enumerate(rows):
        thr = Template(threshold).substitute(subs, S=_state(r))
        v = row.outputs[0][0]
        pre += [f"const real_t thr{r} = {thr};", f"real_t mn{r} = INFINITY;"]
        writes.append(f"  mn{r} = {v} < mn{r} ? {v} : mn{r};")
        mins.append(f"mn{r}")
        # !(mn >= thr): mn below thr, or thr NaN
        tests.append(f"if (!(mn{r} >= thr{r})) {{\n$fold\n}}")
    return pre, _clauses("min", mins), tests
