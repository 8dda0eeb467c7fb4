"""The scaffolding that the C and CUDA kernels share around the renderer.

:mod:`._render_c` turns formulas into straight-line statements; a kernel also
needs its skeleton (``templates/``: one ``string.Template`` file per kernel,
``cpu_kernel.h``, ``ranges_kernel.h``, ``cuda_kernel.cu``, each opening with
the common ``kt_preamble.h``: real type, ``PI_R``, ``KT_LT``), the reads of
its variables, the nodes hoisted out of the pair loop because they depend on
j only, its array arguments and the reduction's state, init and final code.
Those pieces are built here, once for both targets; what is left in
``_cpu_codegen`` and ``_cuda_codegen`` is what really differs: how each
target tiles the reduced index (packed tiles per block of rows and OpenMP,
or shared memory per thread block) and the target's own spellings.
"""

from __future__ import annotations

from pathlib import Path
from string import Template

import numpy as np

from ._ir import topo_order
from ._ops import OPS
from ._plan import Plan
from ._render_c import c_literal

__all__ = ["MAX_COMPONENTS", "TEMPLATES", "template_text", "skeleton", "c_real", "title",
           "defines", "indent", "red_subs", "red_form", "width", "jonly_nodes",
           "var_reader", "row_major", "array_args", "unsupported", "sign_conditions",
           "WIDE_MIN_DIM", "wide_sums", "feature_loop"]

#: The kernels' C text (string.Template slots; .h and .cu, which the package
#: data ships).
TEMPLATES = Path(__file__).parent / "templates"

#: Most scalar temporaries a formula may render to before a plan is declined:
#: scalar rendering of huge dimensions would compile for minutes.
MAX_COMPONENTS = 20000


def template_text(name: str) -> str:
    """A template file's text, without its final newline."""
    return (TEMPLATES / name).read_text().removesuffix("\n")


#: Included by every skeleton; ``${defines}``: the target's constants.
_PREAMBLE = template_text("kt_preamble.h")
#: Included by the two C skeletons: exp, the state struct, the entry points.
_C_RUNTIME = template_text("kt_c_runtime.h")


def skeleton(name: str) -> Template:
    """The kernel skeleton ``templates/<name>``, its ``${preamble}`` (and, in
    the C kernels, ``${c_runtime}``) replaced by the shared files: one
    Template, whose slots are the skeleton's and theirs."""
    text = (TEMPLATES / name).read_text()
    text = text.replace("${preamble}", _PREAMBLE).replace("${c_runtime}", _C_RUNTIME)
    return Template(text)


def c_real(plan: Plan) -> str:
    """The C type of the plan's reals (float32 and float64 only)."""
    return "float" if plan.dtype == np.float32 else "double"


def title(plan: Plan) -> str:
    """The generated source's first line: reduction, type, arguments."""
    args = ", ".join(f"{c}{k}[{d}]" for k, (c, d) in enumerate(zip(plan.arg_cats,
                                                                    plan.arg_dims)))
    return f"{plan.red.name}, {c_real(plan)}, {args}"


def defines(**values) -> str:
    """``#define NAME value`` lines, in the order given."""
    return "\n".join(f"#define {name} {value}" for name, value in values.items())


def indent(code: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + line if line else line for line in code.splitlines())


def red_subs(formulas, K: int) -> dict:
    """The slots of a reduction's C and CUDA forms: output dims and K."""
    return {"E": formulas[0].dim, "E1": formulas[-1].dim, "K": K}


def red_form(form: dict, part: str, subs: dict, **extra) -> str:
    """One part (state, init, final, ...) of a reduction's C or CUDA form,
    its slots filled (``extra``: more slots, e.g. CUDA's row prefix ``S``;
    slots not given are left as they are)."""
    return Template(form.get(part, "")).safe_substitute(subs, **extra)


def width(plan: Plan) -> int:
    """Scalar temporaries of the plan's formulas: the relative cost of a pair."""
    return sum(n.dim for n in topo_order(list(plan.formulas)))


def jonly_nodes(formulas, levels: dict) -> list:
    """Nodes that depend on j only (variables and the index aside) and feed
    the pair level or an output: computed once per reduced point, not once
    per pair. In the order of ``levels`` (a topological order)."""
    parents: dict = {}
    for n in levels:
        for c in n.children:
            parents.setdefault(c, []).append(n)
    return [
        n for n, lv in levels.items()
        if lv == "j" and n.op not in ("Var", "Index", "Int", "Pi")
        and (n in formulas or any(levels.get(p) == "ij" for p in parents.get(n, ())))
    ]


def row_major(index: str):
    """Reads of row ``index`` of a row-major (n, d) array ``a<k>``."""
    return lambda node, c: f"a{node.attrs[1]}[{index} * {node.dim} + {c}]"


def var_reader(i_read, j_read):
    """``var_expr(node, component)`` for the renderer: i-variables through
    ``i_read``, j-variables through ``j_read``, parameters as ``a<k>[c]``."""
    def var_expr(node, c: int) -> str:
        cat = node.attrs[0]
        if cat == "i":
            return i_read(node, c)
        if cat == "j":
            return j_read(node, c)
        return f"a{node.attrs[1]}[{c}]"
    return var_expr


def array_args(plan: Plan, int_type: str) -> list[tuple[str, str]]:
    """(C type, name) of the kernel's arrays in call order: the variables
    ``a<k>``, then the float outputs ``outf`` and the index outputs ``outi``
    (the outputs present)."""
    ints = plan.red.int_outputs
    arrays = [("const real_t", f"a{k}") for k in range(len(plan.arg_cats))]
    if not all(ints):
        arrays.append(("real_t", "outf"))
    if any(ints):
        arrays.append((int_type, "outi"))
    return arrays


def unsupported(plan: Plan, backend: str, language: str, form) -> str | None:
    """The eligibility rules that the C and CUDA backends share: why
    ``backend`` cannot run ``plan`` (None: it can)."""
    # Only float32 and float64 have a real type here.
    if plan.dtype not in (np.float32, np.float64):
        return (f"no {language} type for {np.dtype(plan.dtype).name} "
                "(float32 and float64 only)")
    # Every reduction needs its form in the target's language.
    if form is None:
        return f"the {plan.reduction} reduction has no {language} form"
    # Scalar rendering of huge dimensions would compile for minutes.
    w = width(plan)
    if w > MAX_COMPONENTS:
        return (f"too wide for the {backend} backend: {w} scalar temporaries "
                f"> limit {MAX_COMPONENTS}")
    return None


# -- range facts ----------------------------------------------------------------
#: Operations whose every value is >= 0 (or NaN).
_NONNEG = frozenset({"Square", "Exp", "Exp2", "Abs", "Sqrt", "Rsqrt", "ReLU", "Step"})


def sign_conditions(node, sign: int, p_names: dict):
    """When is every component of ``node`` of the given ``sign`` (>= 0 for +1,
    <= 0 for -1) or NaN?

    Returns the C conditions on parameter-level values (``p_names``: node ->
    component expressions, for the nodes that depend on parameters only)
    under which it is, [] when it always is, None when nothing is proven. The
    rules hold in floating point too: rounding never flips a sign, and the
    cases that escape them (inf - inf, 0 * inf) give NaN. Used to pick an exp
    that needs no overflow branch, e.g. for exp(-g |x - y|^2) when g >= 0.

    The rules of :func:`_sign_rule`, applied children first with an explicit
    stack (a 1,000-term sum is as deep as it is long).
    """
    memo: dict = {}
    stack = [(node, sign)]
    while stack:
        key = stack[-1]
        if key in memo:
            stack.pop()
            continue
        kind, data = _sign_rule(key[0], key[1], p_names)
        if kind == "done":
            memo[key] = data
            stack.pop()
            continue
        pairs = [data] if kind == "same" else [p for alt in data for p in alt]
        todo = [p for p in pairs if p not in memo]
        if todo:
            stack.extend(reversed(todo))
            continue
        stack.pop()
        memo[key] = memo[data] if kind == "same" else _first_all_of(data, memo)
    return memo[(node, sign)]


def _sign_rule(node, sign: int, p_names: dict):
    """One step of :func:`sign_conditions`: ``("done", result)``; ``("same",
    (child, sign))``: the child's result; ``("all", alternatives)``: the
    conditions of every (child, sign) of the first alternative that is
    proven (each alternative a list of pairs)."""
    op = node.op
    if op == "Int":
        return "done", ([] if node.attrs[0] * sign >= 0 else None)
    if op == "Pi":
        return "done", ([] if sign > 0 else None)
    if node in p_names:
        return "done", [f"{x} {'>=' if sign > 0 else '<='} (real_t)0" for x in p_names[node]]
    if op in _NONNEG:
        return "done", ([] if sign > 0 else None)
    kids = node.children
    if op == "Neg":
        return "same", (kids[0], -sign)
    if op in ("Add", "SumFeat"):
        return "all", [[(c, sign) for c in kids]]
    if op == "Sub":
        return "all", [[(kids[0], sign), (kids[1], -sign)]]
    if op == "IfElse":
        return "all", [[(kids[1], sign), (kids[2], sign)]]
    if op in ("Mul", "Div"):
        a, b = kids
        return "all", [[(a, sa), (b, sb)] for sa, sb in ((1, sign), (sign, 1), (-1, -sign))]
    return "done", None


def _first_all_of(alternatives, memo):
    for pairs in alternatives:
        conds: list = []
        for pair in pairs:
            c = memo[pair]
            if c is None:
                break
            conds += [x for x in c if x not in conds]
        else:
            return conds
    return None


# -- wide formulas: loops over features ---------------------------------------------
#: A sum over the features of an element-wise formula of at least this
#: dimension is rendered as a loop over the features (``feature_loop``), not
#: as one scalar temporary per feature: compile time then hardly depends on D.
WIDE_MIN_DIM = 32

_LEAVES = ("Var", "Int", "Pi", "Index")


def _elementwise(node, d: int) -> bool:
    op = OPS.get(node.op)
    return (op is not None and op.c_vec is None and op.c is not None
            and node.dim in (1, d) and all(c.dim in (1, d) for c in node.children))


def wide_sums(formulas, given) -> list:
    """``SumFeat`` nodes over an element-wise formula of dimension >=
    WIDE_MIN_DIM whose leaves are variables, constants and indices (nodes
    in ``given`` aside: the template computes those), in topological order."""
    out = []
    for node in topo_order(list(formulas)):
        if node.op != "SumFeat" or node in given:
            continue
        (inner,) = node.children
        d = inner.dim
        if d < WIDE_MIN_DIM:
            continue
        if all(n.op in _LEAVES or (n not in given and _elementwise(n, d))
               for n in topo_order([inner])):
            out.append(node)
    return out


def feature_loop(node, name: str, var_expr, index_expr: dict) -> list[str]:
    """C lines that compute the wide sum ``node`` (see ``wide_sums``) into
    ``real_t name`` by a loop over the features ``c`` (variables of dimension
    d read at component ``c``, of dimension 1 at 0; constants broadcast)."""
    (inner,) = node.children
    lines = [f"real_t {name} = 0;", f"for (int c = 0; c < {inner.dim}; c++) {{"]
    names: dict = {}
    for k, n in enumerate(topo_order([inner])):
        if n.op == "Int":
            names[n] = c_literal(n.attrs[0])
            continue
        if n.op == "Pi":
            names[n] = "PI_R"
            continue
        if n.op == "Var":
            expr = var_expr(n, "c" if n.dim > 1 else 0)
        elif n.op == "Index":
            expr = f"((real_t)({index_expr[n.cat]}))"
        else:
            attrs = {f"a{m}": a for m, a in enumerate(n.attrs)}
            expr = OPS[n.op].c.format(*[names[c] for c in n.children], **attrs)
        if n is inner and n.op in ("Mul", "Square"):
            # the last product fused into the sum explicitly (KT_FMA_ACC: one
            # rounding on every CPU, whatever the compiler vectorises)
            a, b = (names[c] for c in (n.children * 2)[:2])
            return lines + [f"  KT_FMA_ACC({name}, {a}, {b});", "}"]
        names[n] = f"{name}_{k}"
        lines.append(f"  const real_t {name}_{k} = {expr};")
    return lines + [f"  {name} += {names[inner]};", "}"]
