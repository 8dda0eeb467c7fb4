"""The expanded squared distance inside float64 Gaussian-type sums.

``exp(-g |x_i - y_j|^2)`` reaches the dense kernel as ``KT_EXP2N(d * k)``,
``d = |x_i - y_j|^2`` computed directly (D subtractions, D multiply-adds)
and ``k = -g log2(e)``. With ``c`` a centre (the mean of y), ``u = x_i - c``
and ``v = y_j - c``, the same argument is

    z = k |u|^2 + k |v|^2 + <-2 k u, v>

whose first term is computed once per tile and row, the second (with v)
once per call into a buffer packed as the tiles, the third D multiply-adds:
per row and vector of 8 points, D + 1 operations instead of 2 D + 1 (float64
Gaussian K b at D = 3: 1.17x, one thread, one process,
``asv_bench/exp_ab.py --near``; with v and k |v|^2 computed in the loop
instead, shared by its 4 rows, 1.03x). In the explicit vector loop
(:mod:`._cpu_vec`) the row's term leaves the loop too (``FOLD``): 2^z =
2^(k |u|^2) 2^z', and 2^(k |u|^2) multiplies the 16 entries of that row's
exp table once per block (``KT_EXP2T``), so that z' = k |v|^2 + <-2 k u, v>
is D multiply-adds, and z' in [-2 NEAR_LIMIT, NEAR_LIMIT] needs no test in
the exp (1.085x more, ``--fold``; 16 vector operations per row and vector
of 8 pairs against 27 with the direct form and kt_exp2_nonpos). The scalar
loop (a tile's last points) adds k |u|^2 to z' instead.

Its rounding error is not the direct form's: about eps (|k| |u|^2 +
|k| |v|^2) per term instead of eps |z|, i.e. it grows with the points'
distance to the centre in units of the bandwidth. So the kernel uses it only
where that is bounded: for a loop's rows, ``k (max_r |u_r|^2 + max_j
|v_j|^2) >= -NEAR_LIMIT`` (tested once per tile and group of rows; the
second maximum once per call), which bounds the absolute error of z by about
6 eps NEAR_LIMIT (= 1.6e-14), the relative error of a term by 1.1e-14 (the
float64 Gaussian K b of the benchmarks, uniform points in the unit cube,
g = 8: 1.4e-15 relative to the largest output, as with the direct form);
elsewhere, where any coordinate is inf or NaN (the test is then false) or
the buffer cannot be allocated, the direct form runs as before. Only where
x_i - y_j is read by nothing else (the gradient's (x_i - y_j) factor keeps
the direct differences: there the form measured 0.97x), in
float64 sums (``Sum``) at D < WIDE_MIN_DIM (above, the micro-kernel of
_cpu_dots computes the expanded form already).
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from .._codegen import WIDE_MIN_DIM

__all__ = ["NEAR_LIMIT", "NEAR_MIN_ROWS", "Near", "near_rows"]

#: The bound on |k| (|u|^2 + |v|^2) (base-2 exponent units) under which the
#: expanded form is used.
NEAR_LIMIT = 24


def _sqdist_vars(node):
    """(x_i, y_j) where ``node`` is |x_i - y_j|^2 (or |y_j - x_i|^2) of two
    variables of dimension < WIDE_MIN_DIM, else None."""
    if node.op != "SumFeat" or node.children[0].op != "Square":
        return None
    diff = node.children[0].children[0]
    if diff.op != "Sub":
        return None
    u, v = diff.children
    if not (u.op == "Var" and v.op == "Var" and u.dim == v.dim < WIDE_MIN_DIM):
        return None
    if (u.cat, v.cat) == ("j", "i"):
        u, v = v, u
    return (u, v) if (u.cat, v.cat) == ("i", "j") else None


class Near(NamedTuple):
    """The code of :func:`near_rows`: lines once per call (``p``), per block
    of rows (``block``), per group of rows (``i``), after the loops
    (``tail``); the rows; the name of the per-group test."""

    rows: list
    p: list
    block: list
    i: list
    test: str
    tail: list


#: Calls of fewer rows take the direct form: the per-call pass over y would
#: cost about what the rows gain (float64 Gaussian K b, M = 3e4, one thread,
#: one process, near / direct: 0.97x at 128 rows, 1.04x at 256, 1.19x at
#: 1024; M = 4e5, 1024 rows: 1.02x, the blocks' passes over y then bound by
#: memory).
NEAR_MIN_ROWS = 256

#: Multiply each row's factor 2^(k |u|^2) into its exp's table (once per
#: block) rather than add k |u|^2 into z (once per pair and row).
FOLD = True


def near_rows(rows, exps) -> Near | None:
    """The rows with each ``KT_EXP2N(d * k)`` of a squared distance in the
    expanded form (:class:`Near`), or None where no exp qualifies. ``rows``:
    the renderings of _cpu_codegen._nonpos_exps; ``exps``: its exp nodes ->
    (a, k)."""
    # x_i - y_j read elsewhere too (the gradient's (x_i - y_j) factor): the
    # direct form's differences stay, and the expanded form measured slower
    # (grad 0.86x with v and k |v|^2 computed in the loop; 0.97x with them
    # from the buffer and the rows' factors in the tables)
    readers = {}
    for n in rows[0].levels:
        for c in n.children:
            readers.setdefault(c, set()).add(n)
    found = [(n, _sqdist_vars(ak[0]), ak[1]) for n, ak in exps.items() if ak is not None]
    found = [(n, xy, k) for n, xy, k in found if xy is not None
             and len(readers.get(exps[n][0].children[0].children[0], ())) == 1]
    if not found:
        return None
    p_lines, p_tail, i_lines, j_lines, tests, block = [], [], [], [], [], []
    new = [{} for _ in rows]
    for q, (node, (x, y), k) in enumerate(found):
        d, a = x.dim, y.attrs[1]
        cen = [f"kcen{q}_{c}" for c in range(d)]
        # once per call of NEAR_MIN_ROWS rows or more: the centre (the mean
        # of y), the points' v = y_j - c and k |v|^2 in a buffer packed as
        # the tiles (D + 1 rows of TJ per tile), and max_j |v_j|^2 (NaN where
        # a coordinate is inf or NaN, or there is no buffer: every test below
        # then fails)
        at = f"a{a}[jq / TJ * ({d} * TJ) + jq % TJ + {{c}} * TJ]"
        p_lines += [f"  real_t {', '.join(f'{n} = 0' for n in cen)}, kym{q} = 0;",
                    (f"  real_t *kyq{q} = r1 - r0 < {NEAR_MIN_ROWS} ? NULL : (real_t *)malloc("
                     f"sizeof(real_t) * {d + 1} * (size_t)((ny + TJ - 1) / TJ * TJ));"),
                    "  {",
                    f"    double {', '.join(f'm{c} = 0' for c in range(d))};",
                    f"    for (int64_t jq = 0; kyq{q} && jq < ny; jq++) {{",
                    *[f"      m{c} += {at.format(c=c)};" for c in range(d)],
                    "    }",
                    *[f"    {cen[c]} = (real_t)(m{c} / (double)(ny > 0 ? ny : 1));"
                      for c in range(d)],
                    "    for (int64_t jq = 0; kyq{q} && jq < ny; jq++) {".replace("{q}", str(q)),
                    *[f"      const real_t v{c} = {at.format(c=c)} - {cen[c]};"
                      for c in range(d)],
                    f"      const real_t s = {' + '.join(f'v{c} * v{c}' for c in range(d))};",
                    f"      if (s > kym{q} || s != s) kym{q} = s;",
                    f"      real_t *w = kyq{q} + jq / TJ * ({d + 1} * TJ) + jq % TJ;",
                    *[f"      w[{c} * TJ] = v{c};" for c in range(d)],
                    f"      w[{d} * TJ] = s * {k};",
                    "    }",
                    f"    if (!kyq{q}) kym{q} = NAN;",
                    "  }",
                    f"  const real_t kbm{q} = {k} * kym{q}, km2{q} = -2 * {k};"]
        p_tail.append(f"  free(kyq{q});")
        j_lines += [f"const real_t kv{q}_{c} = kyq{q}[j0 * {d + 1} + {c} * TJ + jj];"
                    for c in range(d)]
        j_lines.append(f"const real_t kb{q} = kyq{q}[j0 * {d + 1} + {d} * TJ + jj];")
        if FOLD:
            # per block: each row's table, 2^(k/16) times 2^(k |u|^2) (the
            # vector loop's exp, KT_EXP2T; the scalar one adds k |u|^2 to z)
            w = [f"a{x.attrs[1]}[i_w * {d} + {c}] - {cen[c]}" for c in range(d)]
            block += ["#if defined(KT_VEC_F64)",
                      f"kt_vtab kft{q}[IB];",
                      "for (int r = 0; r < IB; r++) {",
                      "  const int64_t i_w = r < ni ? i0 + r : i0 + ni - 1;",
                      *[f"  const real_t w{c} = {w[c]};" for c in range(d)],
                      f"  kft{q}[r] = kt_exp2v_table(exp2(("
                      + " + ".join(f"w{c} * w{c}" for c in range(d)) + f") * {k}));",
                      "}",
                      "#endif"]
        for r, row in enumerate(rows):
            xs, u = row.names[x], [f"ku{q}_{r}_{c}" for c in range(d)]
            i_lines += [f"const real_t {u[c]} = {xs[c]} - {cen[c]};" for c in range(d)]
            i_lines.append(f"const real_t ka{q}_{r} = "
                           f"({' + '.join(f'{n} * {n}' for n in u)}) * {k};")
            i_lines += [f"const real_t kx{q}_{r}_{c} = {u[c]} * km2{q};" for c in range(d)]
            tests.append(f"ka{q}_{r} + kbm{q} >= -{NEAR_LIMIT}")
            if FOLD:
                z = " + ".join([f"kb{q}"] + [f"kx{q}_{r}_{c} * kv{q}_{c}" for c in range(d)])
                new[r][row.names[node][0]] = (f"KT_EXP2T({z}, ka{q}_{r}, "
                                              f"kft{q}[ii + {r}])")
                continue
            z = " + ".join([f"(kb{q} + ka{q}_{r})"]
                           + [f"kx{q}_{r}_{c} * kv{q}_{c}" for c in range(d)])
            new[r][row.names[node][0]] = f"KT_EXP2N({z})"
    i_lines.append(f"const int kt_near = {' && '.join(tests)};")
    out = []
    for r, row in enumerate(rows):
        ij = []
        for s in row.statements["ij"]:
            name = s.split(" = ", 1)[0].removeprefix("const real_t ")
            ij.append(f"const real_t {name} = {new[r][name]};" if name in new[r] else s)
        j = row.statements["j"] + (j_lines if r == 0 else [])
        out.append(replace(row, statements={**row.statements, "ij": ij, "j": j}))
    return Near(out, p_lines, block, i_lines, "kt_near", p_tail)
