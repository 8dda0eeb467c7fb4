"""Formulas as values: stable keys, interning, simplification, pickling.

And random small formulas drawn from the registry (hypothesis): their values
and gradients against the independent references and finite differences.
"""

from __future__ import annotations

import inspect
import math
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from _helpers import assert_close, fd_gradient, grid_operand, sides
from _reference import REFERENCE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kerneltools as kt
from kerneltools.backend._autodiff import grad
from kerneltools.backend._ir import Node, intcst, topo_order, var
from kerneltools.backend._ops import OPS, make


# ---------------------------------------------------------------------------
# Keys: stable across rebuilds and processes, blind to parameter values
# ---------------------------------------------------------------------------
def gaussian_plan(gamma, n=50, m=40, dtype=np.float64, reduction="Sum", K=1):
    """The plan of a Gaussian kernel reduction on fresh data."""
    rng = np.random.default_rng(n)
    x = rng.normal(size=(n, 3)).astype(dtype)
    y = rng.normal(size=(m, 3)).astype(dtype)
    b = rng.normal(size=(m, 2)).astype(dtype)
    K_ij = (-kt.Pm(gamma) * kt.Vi(x).sqdist(kt.Vj(y))).exp()
    F = K_ij * kt.Vj(b) if reduction == "Sum" else K_ij
    plan, _ = F._plan(reduction, 1, K=K)
    return plan


# The same function, run in a fresh interpreter.
_KEY_SCRIPT = (
    "import numpy as np\nimport kerneltools as kt\n\n"
    + inspect.getsource(gaussian_plan)
    + "\np = gaussian_plan(1.25)\nprint(p.key)\nprint(p.formulas[0].key)\n"
)


def test_plan_key_is_stable_when_rebuilt():
    a, b = gaussian_plan(0.5), gaussian_plan(0.5)
    assert a.formulas[0] is b.formulas[0]  # canonical and interned
    assert a.key == b.key
    assert len(a.key) == 64 and int(a.key, 16) >= 0  # a SHA-256 in hex
    assert a.formulas[0].key == b.formulas[0].key


def test_plan_key_ignores_parameter_values_and_sizes():
    ref = gaussian_plan(0.5)
    assert gaussian_plan(2.0).key == ref.key  # gamma is a run-time parameter
    assert gaussian_plan(0.5, n=7, m=300).key == ref.key  # N and M are not code


def test_float_hyperparameters_are_parameters():
    x, y = np.ones((3, 2)), np.ones((4, 2))
    keys = set()
    for gamma in (0.1, 0.7, 3.0):
        F = (-gamma * kt.Vi(x).sqdist(kt.Vj(y))).exp()
        keys.add(F._plan("Sum", 1)[0].key)
    assert len(keys) == 1


def test_plan_key_changes_with_what_shapes_the_code():
    ref = gaussian_plan(0.5)
    others = {
        "dtype": gaussian_plan(0.5, dtype=np.float32),
        "reduction": gaussian_plan(0.5, reduction="LogSumExp"),
        "K": gaussian_plan(0.5, reduction="KMin", K=2),
        "K'": gaussian_plan(0.5, reduction="KMin", K=3),
    }
    keys = {name: p.key for name, p in others.items()}
    assert ref.key not in keys.values()
    assert len(set(keys.values())) == len(keys)
    x = np.ones((3, 2))
    # The variables' dimensions and the formula's structure.
    k2 = (kt.Vi(x) - kt.Vj(x)).sum(-1)._plan("Sum", 1)[0].key
    k3 = (
        (kt.Vi(np.ones((3, 3))) - kt.Vj(np.ones((3, 3)))).sum(-1)._plan("Sum", 1)[0].key
    )
    k_add = (kt.Vi(x) + kt.Vj(x)).sum(-1)._plan("Sum", 1)[0].key
    assert len({k2, k3, k_add}) == 3


def test_plan_key_is_the_same_in_another_process():
    here = gaussian_plan(0.5)
    env = dict(os.environ, PYTHONHASHSEED="12345")  # a different str hash
    out = subprocess.run(
        [sys.executable, "-c", _KEY_SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    ).stdout.split()
    assert out == [here.key, here.formulas[0].key]


def test_canonical_text_names_variables_by_position():
    plan = gaussian_plan(0.5)
    text = plan.formulas[0].text()
    assert "Var(p,0,1)" in text and "Var(i,1,3)" in text and "Var(j,2,3)" in text
    assert plan.arg_cats == ("p", "i", "j", "j")  # gamma, x, y, b
    assert plan.arg_dims == (1, 3, 3, 2)
    assert "Sum" in repr(plan) and plan.key[:16] in repr(plan)


def test_reduction_over_i_swaps_categories():
    x, y = np.ones((3, 2)), np.ones((5, 2))
    plan, args = (kt.Vi(x) - kt.Vj(y)).sqnorm2()._plan("Sum", 0)
    assert plan.nx == 5 and plan.ny == 3  # outputs over j, reduced over i
    assert plan.arg_cats == ("j", "i")
    assert [a.shape for a in args] == [(3, 2), (5, 2)]


# ---------------------------------------------------------------------------
# Interning and immutability
# ---------------------------------------------------------------------------
def test_same_formula_built_twice_is_the_same_object():
    x, y = var("i", "x", 3), var("j", "y", 3)
    assert var("i", "x", 3) is x
    a = make("Exp", make("Neg", make("SumFeat", make("Square", make("Sub", x, y)))))
    b = make("Exp", make("Neg", make("SumFeat", make("Square", make("Sub", x, y)))))
    assert a is b and hash(a) == hash(b)
    assert a == b and a != make(
        "Exp", make("SumFeat", make("Square", make("Sub", x, y)))
    )
    assert intcst(4, 2) is intcst(4, 2) and intcst(4, 2) is not intcst(4, 3)


def test_lazytensor_formulas_are_shared():
    x_i, y_j = kt.Vi(np.ones((3, 2))), kt.Vj(np.ones((4, 2)))
    assert ((x_i - y_j) ** 2).formula is ((x_i - y_j) ** 2).formula
    D = (x_i - y_j).sqnorm2()
    F = D.exp() + D.sin()  # D's nodes appear once in the DAG
    assert F.formula.size() == D.formula.size() + 3


def test_nodes_are_immutable():
    n = make("Exp", var("i", "imm", 1))
    for attr, value in [("op", "Log"), ("dim", 2), ("children", ()), ("attrs", (1,))]:
        with pytest.raises(AttributeError):
            setattr(n, attr, value)
    assert n.op == "Exp"


# ---------------------------------------------------------------------------
# Simplifications
# ---------------------------------------------------------------------------
x3 = var("i", "s", 3)
x1 = var("j", "t", 1)
zero, one, two = intcst(0), intcst(1), intcst(2)

SIMPLIFICATIONS = [
    ("x * 0", lambda: make("Mul", x3, zero), intcst(0, 3)),
    ("0 * x", lambda: make("Mul", zero, x3), intcst(0, 3)),
    ("x * 1", lambda: make("Mul", x3, one), x3),
    ("1 * x", lambda: make("Mul", one, x3), x3),
    ("x + 0", lambda: make("Add", x3, zero), x3),
    ("0 + x", lambda: make("Add", zero, x3), x3),
    ("x - 0", lambda: make("Sub", x3, zero), x3),
    ("0 - x", lambda: make("Sub", zero, x3), make("Neg", x3)),
    ("--x", lambda: make("Neg", make("Neg", x3)), x3),
    ("x - x", lambda: make("Sub", x3, x3), intcst(0, 3)),
    ("x + x", lambda: make("Add", x3, x3), make("Mul", two, x3)),
    ("x * x", lambda: make("Mul", x3, x3), make("Square", x3)),
    ("x + (-y)", lambda: make("Add", x3, make("Neg", x1)), make("Sub", x3, x1)),
    ("x / 1", lambda: make("Div", x3, one), x3),
    ("0 / x", lambda: make("Div", zero, x3), intcst(0, 3)),
    ("2 + 3", lambda: make("Add", two, intcst(3)), intcst(5)),
    (
        "2 * 3 - 7",
        lambda: make("Sub", make("Mul", two, intcst(3)), intcst(7)),
        intcst(-1),
    ),
    ("-(4)", lambda: make("Neg", intcst(4, 2)), intcst(-4, 2)),
    ("square(3)", lambda: make("Square", intcst(3)), intcst(9)),
    (
        "2 * (3 * x)",
        lambda: make("Mul", two, make("Mul", intcst(3), x3)),
        make("Mul", intcst(6), x3),
    ),
    ("x * 2 (constant first)", lambda: make("Mul", x3, two), make("Mul", two, x3)),
    ("exp(0)", lambda: make("Exp", zero), one),
    ("log(1)", lambda: make("Log", one), zero),
    ("x ** 1", lambda: make("Pow", x3, attrs=(1,)), x3),
    ("x ** 0", lambda: make("Pow", x3, attrs=(0,)), intcst(1, 3)),
    ("x ** 2", lambda: make("Pow", x3, attrs=(2,)), make("Square", x3)),
    ("x ** -1", lambda: make("Pow", x3, attrs=(-1,)), make("Inv", x3)),
    ("sum of a scalar", lambda: make("SumFeat", x1), x1),
    ("sum of a constant", lambda: make("SumFeat", intcst(2, 3)), intcst(6)),
    ("ifelse(c, a, a)", lambda: make("IfElse", x1, x3, x3), x3),
    ("extract everything", lambda: make("Extract", x3, attrs=(0, 3)), x3),
]


@pytest.mark.parametrize(
    "label,build,expected", SIMPLIFICATIONS, ids=[s[0] for s in SIMPLIFICATIONS]
)
def test_simplification(label, build, expected):
    assert build() is expected


def test_simplifications_keep_the_dimension():
    # x (dim 1) + 0 (dim 3) is a dimension-3 vector, not x.
    n = make("Add", x1, intcst(0, 3))
    assert n.dim == 3 and n is not x1
    assert make("Mul", x1, intcst(1, 3)).dim == 3
    assert make("Mul", x1, intcst(0, 3)) is intcst(0, 3)
    assert make("IfElse", x3, x1, x1) is not x1  # broadcast to the condition's dim
    assert make("IfElse", x3, x1, x1).dim == 3


def test_simplified_formulas_evaluate_like_the_originals(backend):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(4, 3))
    y = rng.normal(size=(5, 1))
    x_i, y_j = kt.Vi(x), kt.Vj(y)
    minus_minus_x = -(-x_i)  # noqa: B002
    out = (x_i * 0 + (y_j - y_j) + x_i * 1 - minus_minus_x).sum(axis=1, backend=backend)
    assert_close(out, np.zeros((4, 3)), 0.0)
    out = ((x_i + x_i) * (y_j * y_j) + 2 * 3 - 7).sum(axis=1, backend=backend)
    assert_close(out, (2 * x[:, None] * y[None] ** 2 - 1).sum(axis=1), 1e-12)


# ---------------------------------------------------------------------------
# Pickling
# ---------------------------------------------------------------------------
def _sample_formula() -> Node:
    x, y, p = var("i", 0, 3), var("j", 1, 3), var("p", 2, 1)
    D = make("SumFeat", make("Square", make("Sub", x, y)))
    return make("Add", make("Exp", make("Mul", p, D)), make("Sin", D))


def test_pickle_round_trip_gives_the_same_node():
    F = _sample_formula()
    G = pickle.loads(pickle.dumps(F))
    assert G is F
    H = grad(F, var("i", 0, 3), intcst(1))  # a formula with shared subexpressions
    assert pickle.loads(pickle.dumps(H)) is H
    nodes = topo_order([H])
    assert pickle.loads(pickle.dumps(nodes)) == nodes


def test_pickle_in_another_process_keeps_the_key():
    F = _sample_formula()
    code = (
        "import pickle, sys\n"
        "F = pickle.loads(sys.stdin.buffer.read())\n"
        "print(F.key, F.size())\n"
    )
    out = (
        subprocess.run(
            [sys.executable, "-c", code],
            input=pickle.dumps(F),
            capture_output=True,
            check=True,
            timeout=120,
        )
        .stdout.decode()
        .split()
    )
    assert out == [F.key, str(F.size())]


def test_deep_formulas_work_without_recursion():
    """A 5000-step recurrence: text, key, pickling and gradients stay iterative."""
    x = var("i", "deep", 1)
    n = x
    for _ in range(5000):
        n = make("Add", x, make("Sin", n))
    assert n.size() == 10001
    assert len(n.key) == 64
    assert pickle.loads(pickle.dumps(n)) is n
    g = grad(n, x, intcst(1))
    assert g.dim == 1 and g.size() > 5000


# ---------------------------------------------------------------------------
# Random formulas from the registry (hypothesis)
# ---------------------------------------------------------------------------
def _smooth(op) -> bool:
    """Element-wise, with a derivative rule for every operand."""
    if not op.elementwise:
        return False
    leaves = [var("i", f"h{k}", 1) for k in range(op.arity)]
    node = make(op.name, *leaves)
    return all(c is not None for c in op.grad(node, var("i", "g", 1)))


SMOOTH_OPS = sorted(name for name, op in OPS.items() if _smooth(op))
LEAVES = ("x", "y", "p")


def _extend(children):
    return st.sampled_from(SMOOTH_OPS).flatmap(
        lambda name: st.tuples(st.just(name), st.tuples(*[children] * OPS[name].arity))
    )


TREES = st.recursive(st.sampled_from(LEAVES), _extend, max_leaves=5)

N_R, M_R = 5, 4
_DATA_RNG = np.random.default_rng(11)
DATA = {
    "x": ("i", _DATA_RNG.uniform(-2, 2, (N_R, 2))),
    "y": ("j", _DATA_RNG.uniform(-2, 2, (M_R, 2))),
    "p": ("p", _DATA_RNG.uniform(-2, 2, (1,))),
}


def _squash_params(lo, hi):
    # t -> mid + half * (2 / pi) atan(t) maps the reals into (lo, hi), with a
    # margin, so that every operand stays in its operation's domain.
    return (lo + hi) / 2, 0.95 * (hi - lo) / 2 * (2 / math.pi)


def build_lazy(tree, leaves, nm=(N_R, M_R)):
    """The LazyTensor of ``tree`` over ``leaves`` (name -> LazyTensor), of
    shape ``nm + (d,)``."""
    if isinstance(tree, str):
        leaf = leaves[tree]
        return kt.LazyTensor._new(leaf.formula, leaf._bindings, *nm)
    name, kids = tree
    args = []
    for k, kid in enumerate(kids):
        mid, scale = _squash_params(*OPS[name].domain[k])
        args.append(mid + scale * build_lazy(kid, leaves, nm).atan())
    bindings = {}
    for a in args:
        bindings.update(a._bindings)
    node = make(name, *(a.formula for a in args))
    return kt.LazyTensor._new(node, bindings, *nm)


def build_dense(tree, arrays):
    """The reference values of ``tree`` on the (N, M, d) grid."""
    if isinstance(tree, str):
        return grid_operand(DATA[tree][0], arrays[tree])
    name, kids = tree
    args = []
    for k, kid in enumerate(kids):
        mid, scale = _squash_params(*OPS[name].domain[k])
        args.append(mid + scale * np.arctan(build_dense(kid, arrays)))
    return REFERENCE[name]((), *args)


def _leaves(arrays, axis=1):
    """x on the side kept by a reduction over ``axis``, y on the reduced side
    (for axis=0, x is a j-variable and y an i-variable: the formula with i
    and j exchanged, whose reduction over i runs the kernel of the original's
    reduction over j)."""
    kept, reduced = sides(axis)
    return {"x": kept(arrays["x"]), "y": reduced(arrays["y"]), "p": kt.Pm(arrays["p"])}


_HYP = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@_HYP
@given(tree=TREES)
def test_random_formula_values(tree, backend):
    """Summed over the points of y on both axes (x kept, y reduced: see
    ``_leaves``): one compiled kernel per tree, run through both axes, each
    against the same dense sums over y."""
    arrays = {k: a for k, (_, a) in DATA.items()}
    for axis, nm in ((1, (N_R, M_R)), (0, (M_R, N_R))):
        F = build_lazy(tree, _leaves(arrays, axis), nm)
        ref = np.broadcast_to(build_dense(tree, arrays), (N_R, M_R, F.dim))
        got = F.sum(axis=axis, backend=backend)
        assert_close(
            got,
            ref.sum(axis=1),
            1e-10,
            scale=(np.abs(ref) + 1e-2).sum(axis=1),
            err_msg=f"{tree}, axis={axis}",
        )


@_HYP
@given(tree=TREES, wrt=st.sampled_from(LEAVES))
def test_random_formula_gradients(tree, wrt, backend):
    arrays = {k: a for k, (_, a) in DATA.items()}
    leaves = _leaves(arrays)
    F = build_lazy(tree, leaves)
    rng = np.random.default_rng(5)
    e, f = rng.uniform(-1, 1, (N_R, F.dim)), rng.uniform(-1, 1, (M_R, F.dim))
    G = F.grad(leaves[wrt], kt.Vi(e) * kt.Vj(f))
    weights = e[:, None, :] * f[None, :, :]
    cat = DATA[wrt][0]
    if cat == "i":
        got = G.sum(axis=1, backend=backend)
    elif cat == "j":
        got = G.sum(axis=0, backend=backend)
    else:
        got = G.sum(axis=1, backend=backend).sum(axis=0)

    def phi_diff(plus, minus):
        d = build_dense(tree, dict(arrays, **{wrt: plus})) - build_dense(
            tree, dict(arrays, **{wrt: minus})
        )
        return float((np.broadcast_to(d, weights.shape) * weights).sum())

    fd = fd_gradient(phi_diff, arrays[wrt])
    assert_close(
        got,
        fd,
        1e-5,
        scale=np.abs(fd) + 1e-3 * max(1.0, np.abs(fd).max()),
        err_msg=str(tree),
    )
