"""C code generation for the CPU backend (C + OpenMP).

A plan becomes one C function ``kt_kernel(r0, r1, ny, args, outs)``: the
formula, rendered as straight-line scalar statements by :mod:`._render_c`, is
wrapped in ``templates/cpu_kernel.h`` (one ``string.Template``; the
block-sparse variant: ``templates/ranges_kernel.h``), with the scaffolding
that both targets share from :mod:`._codegen`. OpenMP splits the output rows,
in blocks of ``IB``, between threads; the reduced index is walked in tiles of
``TJ`` points, packed structure-of-arrays by tile so that the inner loop
``#pragma omp simd`` vectorises across j with contiguous loads. Per tile,
values that depend on j only are computed once for the block's rows, and large
dot products (and squared distances) between an i- and a j-variable come from
a register-blocked matrix-product micro-kernel (blocks of up to 64 rows when
the dimension is large, so that a y tile serves many rows). Sum accumulates
inside the vectorised loop in ``real_t`` per tile and in double across tiles
(block-wise summation: a float32 sum of 10^6 terms keeps a relative error
near 1e-7), ``RB`` rows per loop for narrow formulas (register blocking: the
rows share each j-vector's loads and j-level values); a Sum of a product
sums only its factors that depend on j and multiplies the others in per
tile (:mod:`._cpu_factor`: the gradient's ``-2 g e_i``). Every other reduction
writes each row's values of the tile to small buffers and folds them with the
C form of its monoid (``Reduction.c``), RB rows per loop as well; the
log-sum-exp family accumulates inside the loop against the state's shift and
K-min tests the K-th kept value there, so that most tiles need no fold
(:mod:`._cpu_rows`). ``exp`` is an inline polynomial
(``templates/kt_exp.h``) that vectorises without slow paths; where the
formula proves its argument <= 0 (``sign_conditions``: e.g.
``exp(-g |x - y|^2)`` when the parameter g >= 0, tested once per call, both
loops generated) it needs no overflow branch, and ``exp(-a g)`` becomes
``2^(a k)`` with ``k = -g log2(e)`` computed once; in float64 sums the
loop is written with explicit AVX-512 vectors and a table exp where it
qualifies (:mod:`._cpu_vec`), and ``|x - y|^2`` in ``2^(|x - y|^2 k)`` takes
the expanded form where its rounding is bounded (:mod:`._cpu_near`, tested
per group of rows). A sum over the features of
an element-wise formula of dimension >= ``WIDE_MIN_DIM`` is one loop over
the features (``feature_loop``), so that compile time hardly depends on D
(in the dense and the block-sparse kernel).
"""

from __future__ import annotations

from dataclasses import replace
from string import Template

import numpy as np

from .._codegen import (
    WIDE_MIN_DIM, array_args, c_real, defines, indent, jonly_nodes, red_form, red_subs,
    row_major, feature_loop, sign_conditions, skeleton, template_text, title,
    var_reader, wide_sums,
)
from ._compiler import VECMATH_DECL
from ._dots import dot_kernel, norm_given, norm_pointers
from ._factor import factor_out
from ._gemm import GROUP_ROWS, column_width, gemm_tile, many_columns, padded_columns
from ._kmin import (
    prefilter_block, prefilter_helper, prefilter_pointers, prefilter_tile, prefilter_vars,
)
from ._layout import IB, _rewrite_dots, block_rows, row_block, tile_free_args, tile_size
from ._near import near_rows
from ._rows import row_block_reduction, tile_loop
from .._plan import Plan
from .._render_c import node_levels, render_formulas

__all__ = ["generate_source"]

#: The vectorisable exp shared by the C kernels (see the file's comment):
#: vector library exps fall back to slow scalar code when an argument
#: underflows, which Gaussian kernels with a small bandwidth do on most pairs.
_KT_EXP_H = template_text("kt_exp.h") + "\n"

_SKELETON = skeleton("cpu_kernel.h")

#: The block-sparse variant (``ranges=``): data sorted so that blocks and
#: intervals are contiguous; ``blk`` holds, per output block, its rows
#: ``[r0, r1)`` and its intervals ``red[v0:v1]`` of the reduced index; one
#: call for every block, OpenMP over blocks (dynamic: their work differs).
#: j-variables are structure-of-arrays over the whole axis (component c of
#: point j at ``c * js + j``), so that an interval may start anywhere;
#: ``jmap`` gives each reduced position's index in the caller's order, which
#: the arg-reductions record and break ties by (as the dense kernel, whose
#: order is the caller's).
_RANGES_SKELETON = skeleton("ranges_kernel.h")
#: ... and of the many-column Sum (:func:`_ranges_gemm_source`).
_RANGES_GEMM_SKELETON = skeleton("ranges_gemm_kernel.h")

def generate_source(plan: Plan, *, vector_math: bool = True, key: str | None = None,
                    ranges: bool = False, prefilter: bool | None = None) -> str:
    """The C source of ``plan``'s kernel (deterministic: golden-tested).

    ``key`` is what ``kt_key()`` returns (default: the plan's key); the cache
    stores the kernel key there and checks it when loading. ``ranges``: the
    block-sparse variant (``_RANGES_SKELETON``), which reads the j-variables
    pair by pair (no dot-product micro-kernel: it is meant for low
    dimension); its many-column Sum takes the GEMM form
    (``_RANGES_GEMM_SKELETON``). ``prefilter=False``: a K-min of a squared distance without
    the prefilter of :mod:`._cpu_kmin` (the kernel of small calls).
    """
    if ranges:
        if many_columns(plan):
            return _ranges_gemm_source(plan, vector_math, key)
        return _ranges_source(plan, vector_math, key)
    gemm = many_columns(plan)
    # many-column Sum K_ij * B_j: the kernel renders K only (see _cpu_gemm)
    formulas, dots = _rewrite_dots([gemm[0]] if gemm else plan.formulas, plan.red.smooth)
    rb = row_block(plan)
    # K-min of a squared distance: the prefilter (_cpu_kmin) unless asked not to
    prefilter = (not gemm and prefilter_vars(plan) is not None
                 and (prefilter is None or prefilter))
    # a Sum of (not j-dependent) x (j-dependent): the loop sums the latter
    split = None if gemm or not plan.red.c.get("fused") else factor_out(formulas[0])
    every = formulas + ([split.inner, split.outer] if split else [])
    block_setup, tile_setup = _dot_setup(plan, dots, False)
    var_expr = var_reader(row_major("i_0"), lambda n, c: f"y{n.attrs[1]}[{c} * TJ + jj]")
    given = {node: ([f"dq{q}[ii * TJ + jj]"], 3) for q, (node, _, _) in enumerate(dots)}
    given.update(norm_given(dots))  # |y_j|^2 once per call (_cpu_dots)
    wide = _wide_code(every, given, rb, block_setup)
    given.update(wide.given(0))
    # j-only nodes (other than variables and the index) are computed once per
    # tile into buffers jb*, shared by the block's rows.
    jonly = jonly_nodes(every, node_levels(every, given))
    p_jonly = _jonly_pass(jonly, var_expr, given, "nj", block_setup, tile_setup, wide.j)
    jb_given = {n: ([f"jb{k}_{c}[jj]" for c in range(n.dim)], 2) for k, n in enumerate(jonly)}
    written = _render_rows(formulas, dots, jb_given, rb, wide)
    rows = written if split is None else _render_rows(
        [split.inner, split.outer], dots, jb_given, rb, wide, tag="f")
    tail, extra, factored = "", {}, split is not None
    if gemm:
        e, ep = plan.formulas[0].dim, padded_columns(plan)
        tile, tail, setup, state, init, final = gemm_tile(rows, e, ep)
        block_setup += setup
        extra = {"CW": column_width(plan)}
    else:
        tile, state, init, final = row_block_reduction(plan, formulas, rows, block_setup,
                                                       factored)
        if prefilter:  # K-min of a squared distance (_cpu_kmin)
            # (value, caller's index) order: the kernel scans y in its own
            fold = red_form(plan.red.c, "ranges_tile", red_subs(formulas, plan.K))
            tile = prefilter_tile(plan, rows, tile, fold)
            block_setup += prefilter_block(plan)
    fast_rows, conds, p_fold, exps = _nonpos_exps(rows)
    p_code = ["\n".join("  " + x for x in wide.p), rows[0].code("p", "  "), p_jonly, *p_fold]
    i_code = [f"const int64_t i_{r} = ii + {r} < ni ? i0 + ii + {r} : i0 + ni - 1;"
              if r else "const int64_t i_0 = i0 + ii;" for r in range(rb)]
    i_code += [line for row in rows for line in row.statements["i"]]
    slow, tests, p_tail = tile, [], []  # the loop run where a test below fails
    if fast_rows is not None:
        # exp of arguments proven <= 0 (under conditions on the parameters,
        # tested once per call): the exp without overflow branch
        tile = (gemm_tile(fast_rows, e, ep) if gemm else
                row_block_reduction(plan, formulas, fast_rows, [], factored))[0]
        near = (near_rows(fast_rows, exps) if not gemm and plan.red.c.get("fused")
                and np.dtype(plan.dtype) == np.float64 else None)
        if near is not None:
            # float64 sums: the squared distance in expanded form where its
            # rounding is bounded (tested per group of rows: _cpu_near)
            near_tile = row_block_reduction(plan, formulas, near.rows, [], factored)[0]
            p_code += near.p
            block_setup += near.block
            i_code += near.i
            p_tail += near.tail
            tile = "\n".join([f"if ({near.test}) {{", indent(near_tile, 2), "} else {",
                               indent(tile, 2), "}"])
        if conds:
            p_code.append(f"  const int kt_nonpos = {' && '.join(conds)};")
            tests.append("kt_nonpos")
    if split is not None and split.guarded:
        # a non-finite outer factor (tested per block of rows): the formula as
        # written, pair by pair (inf * 0 = NaN where the sum is taken first)
        p_code.append(written[0].code("p", "  "))
        i_code += [line for row in written for line in row.statements["i"]]
        i_code.append("const int kt_fin = " + " && ".join(
            f"isfinite({c})" for row in rows for c in row.outputs[1]) + ";")
        slow = row_block_reduction(plan, formulas, written, block_setup)[0]
        tests.append("kt_fin")
    if tests:
        tile = "\n".join([f"if ({' && '.join(tests)}) {{", indent(tile, 2), "} else {",
                          indent(slow, 2), "}"])
    return _SKELETON.substitute(
        title=title(plan), key=key or plan.key, real=c_real(plan), state=state,
        defines=defines(TJ=tile_size(plan), IB=block_rows(plan), MR=min(IB, block_rows(plan)),
                        RB=rb, VL=_vector_length(plan), **extra)
        + ("\n" + GROUP_ROWS if gemm else ""),
        n_outs=len(plan.red.int_outputs), kt_exp=_KT_EXP_H,
        exp_fn="kt_expf" if plan.dtype == np.float32 else "kt_exp",
        exp2_fn="kt_exp2f" if plan.dtype == np.float32 else "kt_exp2",
        vecmath=VECMATH_DECL if vector_math else "",
        pointers="\n".join(_pointers(plan, dots, bool(gemm), prefilter)),
        helpers="\n" + prefilter_helper(plan) if prefilter else "",
        p_code="\n".join(x for x in p_code if x),
        init=indent(init, 6),
        block_setup=indent("\n".join(block_setup), 4),
        tile_setup=indent("\n".join(tile_setup), 6),
        i_code=indent("\n".join(i_code), 8),
        tile=indent(tile, 8),
        block_tail=tail,
        final=indent(final, 6),
        p_tail="".join(x + "\n" for x in p_tail),
    )


def _ranges_gemm_source(plan: Plan, vector_math: bool, key: str | None) -> str:
    """The block-sparse kernel of a many-column Sum ``K_ij * B_j``
    (:func:`._gemm.many_columns`): K for RB rows at a time into a buffer, as
    the dense kernel's GEMM form, then the buffer times B's rows by its
    micro-kernel (``templates/ranges_gemm_kernel.h``), instead of E products
    and sums per pair and row. Squared distances stay in the direct form (no
    dot-product micro-kernel, as the block-sparse kernel)."""
    k_formula = many_columns(plan)[0]
    formulas, rb = [k_formula], row_block(plan)
    j_read = lambda n, c: f"y{n.attrs[1]}[{c} * js + jj]"  # noqa: E731
    var_expr = var_reader(row_major("i_0"), j_read)
    block_setup, tile_setup = _dot_setup(plan, [], True, skip_gemm=True)
    wide = _wide_code(formulas, {}, rb, block_setup, j_read)
    given = wide.given(0)
    jonly = jonly_nodes(formulas, node_levels(formulas, given))
    p_jonly = _jonly_pass(jonly, var_expr, given, "nj", block_setup, tile_setup, wide.j)
    jb_given = {n: ([f"jb{k}_{c}[jj]" for c in range(n.dim)], 2) for k, n in enumerate(jonly)}
    rows = _render_rows(formulas, [], jb_given, rb, wide, j_read=j_read)
    e, ep = plan.formulas[0].dim, padded_columns(plan)
    # the K loop over whole vectors (j-variables padded; kb's columns past
    # nj never read): no scalar remainder on short intervals
    tile, tail, setup, state, init, final = gemm_tile(rows, e, ep, "njv")
    block_setup += setup
    fast_rows, conds, p_fold, _ = _nonpos_exps(rows)
    p_code = ["\n".join("  " + x for x in wide.p), rows[0].code("p", "  "), p_jonly, *p_fold]
    if fast_rows is not None and conds:  # exp of arguments <= 0: no overflow branch
        p_code.append(f"  const int kt_nonpos = {' && '.join(conds)};")
        tile = "\n".join(["if (kt_nonpos) {", indent(gemm_tile(fast_rows, e, ep, "njv")[0], 2),
                          "} else {", indent(tile, 2), "}"])
    i_code = [f"const int64_t i_{r} = ii + {r} < ni ? i0 + ii + {r} : i0 + ni - 1;"
              if r else "const int64_t i_0 = i0 + ii;" for r in range(rb)]
    i_code += [line for row in rows for line in row.statements["i"]]
    return _RANGES_GEMM_SKELETON.substitute(
        title=title(plan), key=key or plan.key, real=c_real(plan), state=state,
        defines=defines(TJ=tile_size(plan), IB=block_rows(plan), RB=rb,
                        KT_VL=_vector_length(plan), CW=column_width(plan))
        + "\n" + GROUP_ROWS,
        n_outs=len(plan.red.int_outputs), kt_exp=_KT_EXP_H,
        exp_fn="kt_expf" if plan.dtype == np.float32 else "kt_exp",
        exp2_fn="kt_exp2f" if plan.dtype == np.float32 else "kt_exp2",
        vecmath=VECMATH_DECL if vector_math else "",
        pointers="\n".join(_pointers(plan, [], True)),
        p_code="\n".join(x for x in p_code if x),
        block_setup=indent("\n".join(block_setup), 4),
        init=indent(init, 8), tile_setup=indent("\n".join(tile_setup), 10),
        i_code=indent("\n".join(i_code), 12), tile=indent(tile, 12),
        block_tail=indent(tail, 8), final=indent(final, 8),
    )


def _vector_length(plan: Plan) -> int:
    return max(1, 64 // np.dtype(plan.dtype).itemsize)


def _ranges_source(plan: Plan, vector_math: bool, key: str | None) -> str:
    """The block-sparse kernel: one row per vectorised loop."""
    # the block-sparse kernel's loops run over whole vectors (njv: nj rounded
    # up; the j-variables are padded), whose values past nj are never read
    # (sums: masked out): no scalar remainder loop on short intervals
    bound = "njv"
    formulas, dots = list(plan.formulas), []
    j_read = lambda n, c: f"y{n.attrs[1]}[{c} * js + jj]"  # noqa: E731
    var_expr = var_reader(row_major("i"), j_read)
    block_setup, tile_setup = _dot_setup(plan, dots, True)
    # wide sums as loops over the features, as in the dense kernel (one row
    # per loop, named i)
    wide = _wide_code(formulas, {}, 1, block_setup, j_read, lambda r: "i")
    given = wide.given(0)
    jonly = jonly_nodes(formulas, node_levels(formulas, given))
    p_jonly = _jonly_pass(jonly, var_expr, given, bound, block_setup, tile_setup, wide.j)
    jb_given = {n: ([f"jb{k}_{c}[jj]" for c in range(n.dim)], 2) for k, n in enumerate(jonly)}
    r = render_formulas(formulas, var_expr, {"i": "i", "j": "j"}, given={**given, **jb_given})
    r.statements["ij"][:0] = wide.ij.get(0, [])
    tile, state, init, final = _reduction_code(plan, formulas, r, bound, True, block_setup)
    fast, conds, p_fold, _ = _nonpos_exps([r])
    if fast is not None and conds:  # exp of arguments <= 0: no overflow branch
        fast_tile = _reduction_code(plan, formulas, fast[0], bound, True, [])[0]
        tile = "\n".join(["if (kt_nonpos) {", indent(fast_tile, 2), "} else {",
                          indent(tile, 2), "}"])
        p_fold.append(f"  const int kt_nonpos = {' && '.join(conds)};")
    else:
        p_fold = []
    deeper = 2  # the block-sparse loops nest two levels deeper
    return _RANGES_SKELETON.substitute(
        title=title(plan), key=key or plan.key, real=c_real(plan), state=state,
        defines=defines(TJ=tile_size(plan), IB=block_rows(plan), KT_VL=_vector_length(plan)),
        n_outs=len(plan.red.int_outputs), kt_exp=_KT_EXP_H,
        exp_fn="kt_expf" if plan.dtype == np.float32 else "kt_exp",
        exp2_fn="kt_exp2f" if plan.dtype == np.float32 else "kt_exp2",
        vecmath=VECMATH_DECL if vector_math else "",
        pointers="\n".join(_pointers(plan, dots)),
        p_code="\n".join(x for x in ("\n".join("  " + x for x in wide.p), r.code("p", "  "),
                                     p_jonly, *p_fold) if x),
        init=indent(init, 6 + deeper),
        block_setup=indent("\n".join(block_setup), 4 + deeper), block_tail="",
        tile_setup=indent("\n".join(tile_setup), 6 + 2 * deeper),
        i_code=r.code("i", " " * (8 + 2 * deeper)),
        tile=indent(tile, 8 + 2 * deeper),
        final=indent(final, 6 + deeper),
    )


class _Wide:
    """The wide sums of a dense kernel (``wide_sums``), each a loop over the
    features at its level: parameters (``p``: once per call), i (once per
    block, into ``wi<q>[IB]``), j (in the j-only pass, ``wj<q>``), pairs
    (inside the vectorised loop, ``w<q>_<row>``)."""

    def __init__(self):
        self.nodes, self.p, self.j, self.ij = {}, [], [], {}

    def given(self, r: int) -> dict:
        """The wide sums as ``given`` nodes of row ``r``'s rendering."""
        names = {"p": lambda q: f"wp{q}", "j": lambda q: f"wj{q}",
                 "i": lambda q: f"wi{q}[ii + {r}]" if r else f"wi{q}[ii]",
                 "ij": lambda q: f"w{q}_{r}"}
        mask = {"p": 0, "i": 1, "j": 2, "ij": 3}
        return {n: ([names[lv](q)], mask[lv]) for n, (q, lv) in self.nodes.items()}


def _wide_code(formulas, given, rb: int, block_setup, j_read=None, row=None) -> _Wide:
    """Loops over the features for the wide sums (i-level ones appended to
    ``block_setup``; pair-level ones kept per row for ``_render_rows``).
    ``j_read``: the j-variables' reads (default: the dense kernel's tiles);
    ``row(r)``: the index name of row r of a vectorised loop (default i_r)."""
    j_read = j_read or (lambda v, c: f"y{v.attrs[1]}[{c} * TJ + jj]")
    row = row or (lambda r: f"i_{r}")
    wide = _Wide()
    levels = node_levels(formulas, given)
    for q, n in enumerate(wide_sums(formulas, given)):
        lv = levels[n]
        wide.nodes[n] = (q, lv)
        if lv == "i":
            read = var_reader(row_major("i_w"), None)
            block_setup += [f"real_t wi{q}[IB];", "for (int r = 0; r < IB; r++) {",
                            "  const int64_t i_w = r < ni ? i0 + r : i0 + ni - 1;"]
            block_setup += ["  " + x for x in feature_loop(n, "acc", read, {"i": "i_w"})]
            block_setup += [f"  wi{q}[r] = acc;", "}"]
        elif lv in ("p", "j"):
            read = var_reader(None, j_read)
            getattr(wide, lv).extend(feature_loop(n, f"w{lv}{q}", read, {"j": "j"}))
        else:
            for r in range(rb):
                read = var_reader(row_major(row(r)), j_read)
                wide.ij.setdefault(r, []).extend(
                    feature_loop(n, f"w{q}_{r}", read, {"i": row(r), "j": "j"}))
    return wide


def _render_rows(formulas, dots, jb_given, rb: int, wide: _Wide, tag: str = "",
                 j_read=None) -> list:
    """The formulas rendered for the ``rb`` rows ``i_0 .. i_<rb-1>`` of one
    vectorised loop: row 0 in full; rows 1.. reuse row 0's parameter- and
    j-level values (the j-variables' loads, j-only nodes), so that only their
    i- and pair-level statements are new. Each row's pair-level statements
    open with its wide sums' feature loops. ``tag`` prefixes the
    temporaries' names, so that a second rendering shares the scope;
    ``j_read``: the j-variables' reads (default: the dense kernel's tiles)."""
    j_read = j_read or (lambda n, c: f"y{n.attrs[1]}[{c} * TJ + jj]")
    rows = []
    for r in range(rb):
        var_expr = var_reader(row_major(f"i_{r}"), j_read)
        given = {node: ([f"dq{q}[(ii + {r}) * TJ + jj]" if r else f"dq{q}[ii * TJ + jj]"], 3)
                 for q, (node, _, _) in enumerate(dots)}
        given.update(wide.given(r))
        given.update(jb_given)
        if r:
            first = rows[0]
            given.update({n: (first.names[n], {"p": 0, "j": 2}[lv])
                          for n, lv in first.levels.items()
                          if lv in ("p", "j") and n in first.names})
        row = render_formulas(formulas, var_expr, {"i": f"i_{r}", "j": "j"},
                              given=given, prefix=f"{tag}r{r}_" if r else (tag or "t"))
        row.statements["ij"][:0] = wide.ij.get(r, [])
        rows.append(row)
    return rows


def _scaled(arg, p_names):
    """``arg`` as ``sign * a * p`` or ``sign * a / p`` with ``p`` a scalar that
    depends on parameters only: (a, p, sign, op), else None."""
    sign = 1
    if arg.op == "Neg":
        sign, arg = -1, arg.children[0]
    if arg.op not in ("Mul", "Div"):
        return None
    a, p = arg.children
    if arg.op == "Mul" and a in p_names and p not in p_names:
        a, p = p, a
    if p not in p_names or p.dim != 1 or a in p_names:
        return None
    if a.op == "Neg":
        sign, a = -sign, a.children[0]
    return a, p, sign, arg.op


def _nonpos_exps(rows):
    """Rows whose pair-level ``exp`` calls of arguments provably <= 0 (or NaN)
    use the exp without overflow branch, the conditions on the parameters
    under which they may, parameter-level lines, and the exp nodes -> (a, k)
    (or None: ``KT_EXPN``) ((None, [], [], {}): no such exp). ``exp(+-a * p)`` (or ``/ p``), p a parameter-level scalar, becomes
    ``KT_EXP2N(a * k)`` with ``k = +-log2(e) * p`` computed once (in double,
    then rounded); any other such exp ``KT_EXPN``."""
    first = rows[0]
    p_names = {n: first.names[n] for n, lv in first.levels.items()
               if lv == "p" and n in first.names}
    nodes, conds, p_lines = {}, [], []
    for n, lv in first.levels.items():
        if n.op == "Exp" and lv == "ij":
            c = sign_conditions(n.children[0], -1, p_names)
            if c is None:
                continue
            conds += [x for x in c if x not in conds]
            nodes[n] = _scaled(n.children[0], p_names)
            if nodes[n] is not None:
                _, p, sign, op = nodes[n]
                k = f"kc{len(p_lines)}"
                p_lines.append(f"  const real_t {k} = (real_t)({'-' if sign < 0 else ''}"
                               f"1.4426950408889634074 {'*' if op == 'Mul' else '/'} "
                               f"(double){p_names[p][0]});")
                nodes[n] = (nodes[n][0], k)
    if not nodes:
        return None, [], [], {}
    fast = []
    for row in rows:
        new = {}
        for n, scaled in nodes.items():
            for e, t in enumerate(row.names[n]):
                if scaled is None:
                    arg = row.names[n.children[0]]
                    new[t] = f"KT_EXPN({arg[e if len(arg) > 1 else 0]})"
                else:
                    a = row.names[scaled[0]]
                    new[t] = f"KT_EXP2N({a[e if len(a) > 1 else 0]} * {scaled[1]})"
        stmts = []
        for x in row.statements["ij"]:
            name = x.split(" = ", 1)[0].removeprefix("const real_t ")
            stmts.append(f"const real_t {name} = {new[name]};" if name in new else x)
        fast.append(replace(row, statements={**row.statements, "ij": stmts}))
    return fast, conds, p_lines, nodes


def _pointers(plan: Plan, dots, gemm: bool = False, prefilter: bool = False) -> list[str]:
    """The kernel's arrays from ``args`` and ``outs``: the variables, the
    outputs, then the dot products' chunk-packed j-variables ``yq<q>`` (and
    the many-column Sum's row-major B, ``bq``; the K-min prefilter's arrays,
    _cpu_kmin)."""
    nargs = len(plan.arg_cats)
    arrays = array_args(plan, "int64_t")
    ins = arrays[:nargs] + [("const real_t", f"yq{q}") for q in range(len(dots))]
    ins += norm_pointers(dots)
    ins += [("const real_t", "bq")] if gemm else []
    ins += prefilter_pointers() if prefilter else []
    lines = [f"  {t} *restrict {n} = ({t} *)args[{k}];" for k, (t, n) in enumerate(ins)]
    lines[nargs:nargs] = [f"  {t} *restrict {n} = ({t} *)outs[{k}];"
                          for k, (t, n) in enumerate(arrays[nargs:])]
    return lines


def _dot_setup(plan: Plan, dots, ranges: bool, skip_gemm: bool = False):
    """(block setup, tile setup) lines: the j-variables' tile pointers and the
    dot products' micro-kernel (x rows copied per block, products per tile);
    the many-column Sum's B has none (read as ``bq``) in the dense kernel, and
    in the block-sparse one with ``skip_gemm``."""
    block_setup, tile_setup = [], []
    gemm = None if ranges and not skip_gemm else many_columns(plan)
    free = () if ranges else tile_free_args(plan)
    for k, (cat, d) in enumerate(zip(plan.arg_cats, plan.arg_dims)):
        if cat == "j" and not (gemm and k == gemm[1].attrs[1]) and k not in free:
            offset = "j0" if ranges else f"j0 * {d}"
            tile_setup.append(f"const real_t *restrict y{k} = a{k} + {offset};")
    for q, (node, x, _) in enumerate(dots):
        block, tile = dot_kernel(q, node, x, plan.dtype)
        block_setup += block
        tile_setup.append(tile)
    return block_setup, tile_setup


def _jonly_pass(jonly, var_expr, given, bound, block_setup, tile_setup, pre=()) -> str:
    """Buffers and the per-tile pass for the j-only nodes (appended to the
    setup lists; ``pre``: lines that open the pass's loop, the j-level wide
    sums); their parameter-level statements."""
    if not jonly:
        return ""
    for k, n in enumerate(jonly):
        block_setup += [f"real_t jb{k}_{c}[TJ];" for c in range(n.dim)]
    jr = render_formulas(jonly, var_expr, {"i": "i", "j": "j"}, given=given, prefix="u")
    writes = [f"  jb{k}_{c}[jj] = {x};" for k, outs in enumerate(jr.outputs)
              for c, x in enumerate(outs)]
    code = "\n".join(["  " + x for x in pre] + ([jr.code("j", "  ")] if jr.statements["j"] else []))
    tile_setup.append(tile_loop(bound, code, writes))
    return jr.code("p", "  ")


def _reduction_code(plan: Plan, formulas, r, bound, ranges: bool, block_setup):
    """(tile, state, init, final): Sum fused into the vectorised loop, any
    other reduction through buffers and its C fold (buffers appended to
    ``block_setup``)."""
    red, E = plan.red, formulas[0].dim
    ij_code = r.code("j", "  ") + "\n" + r.code("ij", "  ")
    if red.c.get("fused"):
        names = [f"s{e}" for e in range(E)]
        out = r.outputs[0]
        sums = tile_loop(bound, ij_code, [
            f"  {n} += (jj < nj) ? {out[e]} : (real_t)0;" if ranges else f"  {n} += {out[e]};"
            for e, n in enumerate(names)], clauses=f" reduction(+:{', '.join(names)})")
        tile = "\n".join([f"real_t {', '.join(f'{n} = 0' for n in names)};", sums]
                          + [f"S->A[{e}] += {n};" for e, n in enumerate(names)])
        return (tile, f"acc_t A[{E}];", f"for (int e = 0; e < {E}; e++) S->A[e] = 0;",
                f"for (int e = 0; e < {E}; e++) outf[i * {E} + e] = (real_t)S->A[e];")
    subs = red_subs(formulas, plan.K)
    fold = red_form(red.c, "ranges_tile" if ranges and "ranges_tile" in red.c else "tile", subs)
    if ranges and E == 1 and "ranges_scalar_tile" in red.c:
        # e.g. K-min of a scalar: the test against the K-th value rides
        # along the loop that computes the tile, and most tiles end there
        tile = Template(red.c["ranges_scalar_tile"]).substitute(
            ij_code=r.code("j", "    ") + "\n" + r.code("ij", "    "),
            value=r.outputs[0][0], K=plan.K, fold=indent(fold, 2))
    else:
        writes = [f"  buf{b}[{e} * TJ + jj] = {x};" for b, outs in enumerate(r.outputs)
                  for e, x in enumerate(outs)]
        tile = tile_loop(bound, ij_code, writes) + "\n" + fold
    block_setup += [f"real_t buf{b}[{f.dim} * TJ];" for b, f in enumerate(formulas[:2])]
    return (tile, *(red_form(red.c, part, subs) for part in ("state", "init", "final")))
