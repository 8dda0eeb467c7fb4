"""pykeops' formula strings (kerneltools.keops): the parser and every operation.

The parser's precedence is checked against Python's own (``ast``), since
pykeops reads the same strings with ``eval``; each operation of the formula
language against a dense NumPy evaluation, and against the LazyTensor formula
that it stands for; syntax errors name their position.
"""

from __future__ import annotations

import ast
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kerneltools as kt
from kerneltools.backend.cuda import _backend as _cuda_backend
from kerneltools.backend._dispatch import run_plan
from kerneltools.keops import FormulaSyntaxError, parse_alias, parse_formula
from kerneltools.lazy._formula_strings._operations import OPERATIONS
from kerneltools.lazy._formula_strings._parser import BinOp, Call, ListLit, Name, Neg, Num
from kerneltools.keops.numpy import Genred

import _cuda_shim
from _helpers import assert_close


# -- the parser ------------------------------------------------------------------
def _from_python(node):
    """Our syntax tree's shape from Python's ``ast`` of the same string."""
    if isinstance(node, ast.Expression):
        return _from_python(node.body)
    if isinstance(node, ast.BinOp):
        op = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.BitOr: "|",
              ast.Pow: "**"}[type(node.op)]
        return (op, _from_python(node.left), _from_python(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return ("neg", _from_python(node.operand))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd):
        return _from_python(node.operand)
    if isinstance(node, ast.Call):
        return (node.func.id, *map(_from_python, node.args))
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant):
        return node.value
    raise AssertionError(f"unexpected {node!r}")


def _ours(node):
    if isinstance(node, BinOp):
        return (node.op, _ours(node.left), _ours(node.right))
    if isinstance(node, Neg):
        return ("neg", _ours(node.operand))
    if isinstance(node, Call):
        return (node.func, *map(_ours, node.args))
    if isinstance(node, Name):
        return node.id
    if isinstance(node, Num):
        return node.value
    raise AssertionError(f"unexpected {node!r}")


@pytest.mark.parametrize("text", [
    "Exp(-SqDist(x,y)) * b", "a - b - c", "a / b * c", "a + b * c", "-a ** 2",
    "a ** b ** c", "2 ** -1", "a | b + c", "(a | b) * c", "-(a + b) / -c",
    "x*y|z", "Pow(x, 3) + Powf(x, y) * 1.5e-3", "Grad(Exp(-x), x, e)", "+a - -b",
    "a*-b", "F(G(H(x)), 2, .5)",
])
def test_precedence_matches_python(text):
    assert _ours(parse_formula(text)) == _from_python(ast.parse(text, mode="eval"))


_ATOMS = st.sampled_from(["x", "y", "b2", "3", "0.5", "1e-3", "Exp(x)", "Sum(x, y)"])


def _expressions():
    """Random expression strings of pykeops' grammar (spacing varied)."""
    def extend(inner):
        binary = st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "|", "**"]), inner,
                           st.sampled_from(["", " "])).map(
            lambda t: f"{t[0]}{t[3]}{t[1]}{t[3]}{t[2]}")
        return st.one_of(binary, inner.map(lambda e: f"-{e}"), inner.map(lambda e: f"({e})"),
                         st.tuples(inner, inner).map(lambda t: f"SqDist({t[0]}, {t[1]})"))
    return st.recursive(_ATOMS, extend, max_leaves=12)


@given(_expressions())
def test_random_expressions_parse_as_python_reads_them(text):
    assert _ours(parse_formula(text)) == _from_python(ast.parse(text, mode="eval"))


def test_number_literals_ints_exact_floats_float():
    tree = parse_formula("2 * x + 0.5 + 3e2 + 7.")
    nums = []
    stack = [tree]
    while stack:
        n = stack.pop()
        if isinstance(n, BinOp):
            stack += [n.left, n.right]
        elif isinstance(n, Num):
            nums.append(n.value)
    assert sorted(nums, key=float) == [0.5, 2, 7.0, 300.0]
    assert [type(v) for v in sorted(nums, key=float)] == [float, int, float, float]


def test_list_literal():
    tree = parse_formula("TensorDot(a, b, [2, 3], [3], [1], [0])")
    assert isinstance(tree.args[2], ListLit) and len(tree.args[2].items) == 2
    assert tree.args[4].items[0].value == 1


@pytest.mark.parametrize("text, pos, reason", [
    ("Exp(-SqDist(x,y)) * * b", 20, "expected a number"),
    ("Exp(x", 5, "expected ',' or ')'"),
    ("x + ", 4, "expected a number"),
    ("Exp(x))", 6, "expected an operator or the end"),
    ("x $ y", 2, "unexpected character '$'"),
    ("", 0, "the formula is empty"),
    ("Sum(x y)", 6, "expected ',' or ')'"),
    ("[1, 2", 5, "expected ',' or ']'"),
])
def test_syntax_errors_name_the_position(text, pos, reason):
    with pytest.raises(FormulaSyntaxError) as info:
        parse_formula(text)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.pos == pos and reason in err.reason
    # the message shows the string and a caret under the offending character
    lines = str(err).splitlines()
    assert f"at position {pos}" in lines[0]
    assert lines[1].strip() == text.strip() and lines[2].index("^") - 4 == pos


@pytest.mark.parametrize("text, expected", [
    ("x = Vi(3)", ("x", 0, 7, 3)), ("y=Vj(1,3)", ("y", 1, 1, 3)),
    ("g = Pm(1)", ("g", 2, 7, 1)), ("z = Var(4, 2, 1)", ("z", 1, 4, 2)),
    ("  b =Vj( 0 , 5 ) ", ("b", 1, 0, 5)),
])
def test_aliases(text, expected):
    a = parse_alias(text, default_index=7)
    assert (a.name, a.cat, a.index, a.dim) == expected


@pytest.mark.parametrize("text, pos, reason", [
    ("x Vi(3)", 2, "expected '='"),
    ("x = Vk(3)", 4, "expected Vi(...), Vj(...), Pm(...) or Var(...)"),
    ("x = Vi(3.5)", 7, "must be integers"),
    ("x = Var(0, 3)", 4, "Var takes (index, dim, category)"),
    ("x = Vi(0)", 4, "must be >= 1"),
    ("3 = Vi(1)", 0, "an alias starts with a name"),
    ("x = Vi(1) + 2", 10, "expected the end of the alias"),
])
def test_alias_errors(text, pos, reason):
    with pytest.raises(FormulaSyntaxError) as info:
        parse_alias(text)
    assert info.value.pos == pos and reason in info.value.reason


@pytest.mark.parametrize("formula, aliases, pos, reason", [
    ("Exp(-SqDis(x,y))", ["x=Vi(3)", "y=Vj(3)"], 5, "unknown operation 'SqDis'"),
    ("Exp(-SqDist(x,z))", ["x=Vi(3)", "y=Vj(3)"], 14, "unknown name 'z'"),
    ("Exp(x, y)", ["x=Vi(3)", "y=Vj(3)"], 0, "Exp takes 1 argument(s), got 2"),
    ("Elem(x, y)", ["x=Vi(3)", "y=Vj(3)"], 8, "must be an integer literal"),
    ("x + Var(0, 2, 0)", ["x=Vi(3)"], 4, "argument 0 is declared as Vi(3)"),
    ("x + Var(1, 2)", ["x=Vi(3)"], 4, "Var takes (index, dim, category)"),
    ("x + Vj(2)", ["x=Vi(3)"], 4, "needs an index"),
    ("Kron(x, y, 2, [2])", ["x=Vi(3)", "y=Vj(3)"], 11, "must be a list of integers"),
])
def test_formula_errors_at_construction(formula, aliases, pos, reason):
    with pytest.raises(FormulaSyntaxError) as info:
        Genred(formula, aliases, axis=1)
    assert info.value.pos == pos and reason in info.value.reason


def test_dimension_error_names_the_position():
    g = Genred("x + SqDist(x, y) * Concat(x, y)", ["x=Vi(3)", "y=Vj(2)"], axis=1)
    with pytest.raises(ValueError, match=r"in SqDist of the formula at position 4:\n.*\n {8}\^$"):
        g(np.ones((4, 3)), np.ones((5, 2)))


def test_no_eval():
    """A formula string is never executed: Python code is a syntax error."""
    for text in ("__import__('os').getcwd()", "x.exp()", "lambda: 0", "x[0]"):
        with pytest.raises(FormulaSyntaxError):
            Genred(text, ["x=Vi(3)"], axis=1)


# -- every operation, against dense NumPy -------------------------------------------
def _sq(a):
    return np.sum(a * a, -1, keepdims=True)


def _tensordot_ref(a, b):  # TensorDot(a, b, [2, 2], [2, 2], [1], [0], [1, 0]) per pair
    A, B = a.reshape(a.shape[:-1] + (2, 2)), b.reshape(b.shape[:-1] + (2, 2))
    T = np.einsum("...ik,...kj->...ij", A, B)
    return np.swapaxes(T, -1, -2).reshape(T.shape[:-2] + (4,))


def _kron_ref(a, b):  # Kron(a, b, [2, 2], [2, 2]) per pair
    A, B = a.reshape(a.shape[:-1] + (2, 2)), b.reshape(b.shape[:-1] + (2, 2))
    K = np.einsum("...ij,...kl->...ikjl", A, B)
    return K.reshape(K.shape[:-4] + (16,))


def _mat(a):  # a 4-vector as a row-major 2 x 2 matrix
    return a.reshape(a.shape[:-1] + (2, 2))


#: operation -> (formula over x (Vi(4)), y (Vj(4)) and s (Pm(1)); its dense reference,
#: a function of x and y broadcast to (N, M, 4) and s; the LazyTensor formula it
#: stands for, of x_i, y_j and s).
CASES = {
    "Add": ("Add(x, y)", lambda x, y, s: x + y, lambda x, y, s: x + y),
    "Subtract": ("Subtract(x, y)", lambda x, y, s: x - y, lambda x, y, s: x - y),
    "Mult": ("Mult(x, y)", lambda x, y, s: x * y, lambda x, y, s: x * y),
    "Divide": ("Divide(x, y + 2)", lambda x, y, s: x / (y + 2), lambda x, y, s: x / (y + 2)),
    "Minus": ("Minus(x)", lambda x, y, s: -x + 0 * y, lambda x, y, s: -x + 0 * y),
    "Scalprod": ("Scalprod(x, y)", lambda x, y, s: np.sum(x * y, -1, keepdims=True),
                 lambda x, y, s: x | y),
    "IntCst": ("IntCst(3) * y", lambda x, y, s: 3 * y + 0 * x, lambda x, y, s: 3 * y + 0 * x),
    "IntInv": ("IntInv(4) * y", lambda x, y, s: y / 4 + 0 * x, lambda x, y, s: y / 4 + 0 * x),
    "Pow": ("Pow(x - y, 3)", lambda x, y, s: (x - y) ** 3, lambda x, y, s: (x - y) ** 3),
    "Powf": ("Powf(Abs(x) + 1, y)", lambda x, y, s: (np.abs(x) + 1) ** y,
             lambda x, y, s: (abs(x) + 1) ** y),
    "Square": ("Square(x - y)", lambda x, y, s: (x - y) ** 2,
               lambda x, y, s: (x - y).square()),
    "Sqrt": ("Sqrt(Abs(x*y))", lambda x, y, s: np.sqrt(np.abs(x * y)),
             lambda x, y, s: abs(x * y).sqrt()),
    "Rsqrt": ("Rsqrt(Abs(x*y) + 1)", lambda x, y, s: 1 / np.sqrt(np.abs(x * y) + 1),
              lambda x, y, s: (abs(x * y) + 1).rsqrt()),
    "Inv": ("Inv(Abs(x) + y * y + 1)", lambda x, y, s: 1 / (np.abs(x) + y * y + 1),
            lambda x, y, s: (abs(x) + y * y + 1).inv()),
    "Exp": ("Exp(-SqDist(x, y)) * s", lambda x, y, s: np.exp(-_sq(x - y)) * s,
            lambda x, y, s: (-x.sqdist(y)).exp() * s),
    "Log": ("Log(Abs(x - y) + 1)", lambda x, y, s: np.log(np.abs(x - y) + 1),
            lambda x, y, s: (abs(x - y) + 1).log()),
    "XLogX": ("XLogX(Abs(x - y))", lambda x, y, s: np.abs(x - y) * np.log(np.abs(x - y)),
              lambda x, y, s: abs(x - y).xlogx()),
    "Sin": ("Sin(x + y)", lambda x, y, s: np.sin(x + y), lambda x, y, s: (x + y).sin()),
    "Cos": ("Cos(x * y)", lambda x, y, s: np.cos(x * y), lambda x, y, s: (x * y).cos()),
    "Asin": ("Asin((x - y) / 3)", lambda x, y, s: np.arcsin((x - y) / 3),
             lambda x, y, s: ((x - y) / 3).asin()),
    "Acos": ("Acos((x - y) / 3)", lambda x, y, s: np.arccos((x - y) / 3),
             lambda x, y, s: ((x - y) / 3).acos()),
    "Atan": ("Atan(x * y)", lambda x, y, s: np.arctan(x * y), lambda x, y, s: (x * y).atan()),
    "Atan2": ("Atan2(x, y)", lambda x, y, s: np.arctan2(x, y), lambda x, y, s: x.atan2(y)),
    "Sinc": ("Sinc(x - y)", lambda x, y, s: np.sinc(x - y), lambda x, y, s: (x - y).sinc()),
    "SinXDivX": ("SinXDivX(x - y)", lambda x, y, s: np.sin(x - y) / (x - y),
                 lambda x, y, s: ((x - y) / math.pi).sinc()),
    "Abs": ("Abs(x - y)", lambda x, y, s: np.abs(x - y), lambda x, y, s: abs(x - y)),
    "Sign": ("Sign(x - y)", lambda x, y, s: np.sign(x - y), lambda x, y, s: (x - y).sign()),
    "Step": ("Step(x - y)", lambda x, y, s: (x >= y) * 1.0, lambda x, y, s: (x - y).step()),
    "ReLU": ("ReLU(x - y)", lambda x, y, s: np.maximum(x - y, 0),
             lambda x, y, s: (x - y).relu()),
    "Clamp": ("Clamp(x, y - 1, y + s)", lambda x, y, s: np.clip(x, y - 1, y + s),
              lambda x, y, s: x.clamp(y - 1, y + s)),
    "ClampInt": ("ClampInt(x * y, -1, 1)", lambda x, y, s: np.clip(x * y, -1, 1),
                 lambda x, y, s: (x * y).clamp(-1, 1)),
    "IfElse": ("IfElse(x - y, x, y * s)", lambda x, y, s: np.where(x >= y, x, y * s),
               lambda x, y, s: (x - y).ifelse(x, y * s)),
    "Mod": ("Mod(x * y * 5, s + 1, s)",
            lambda x, y, s: x * y * 5 - (s + 1) * np.floor((x * y * 5 - s) / (s + 1)),
            lambda x, y, s: (x * y * 5).mod(s + 1, s)),
    "Round": ("Round(x * y * 10, 1)", lambda x, y, s: np.round(x * y * 10, 1),
              lambda x, y, s: (x * y * 10).round(1)),
    "Sum": ("Sum(x * y)", lambda x, y, s: np.sum(x * y, -1, keepdims=True),
            lambda x, y, s: (x * y).sum(-1)),
    "Min": ("Min(x - y)", lambda x, y, s: np.min(x - y, -1, keepdims=True),
            lambda x, y, s: kt.minimum(kt.minimum((x - y)[0], (x - y)[1]),
                                       kt.minimum((x - y)[2], (x - y)[3]))),
    "Max": ("Max(x - y)", lambda x, y, s: np.max(x - y, -1, keepdims=True),
            lambda x, y, s: kt.maximum(kt.maximum((x - y)[0], (x - y)[1]),
                                       kt.maximum((x - y)[2], (x - y)[3]))),
    "ArgMin": ("ArgMin(x - y)", lambda x, y, s: np.argmin(x - y, -1)[..., None] * 1.0, None),
    "ArgMax": ("ArgMax(x - y)", lambda x, y, s: np.argmax(x - y, -1)[..., None] * 1.0, None),
    "SqNorm2": ("SqNorm2(x - y)", lambda x, y, s: _sq(x - y),
                lambda x, y, s: (x - y).sqnorm2()),
    "Norm2": ("Norm2(x - y)", lambda x, y, s: np.sqrt(_sq(x - y)),
              lambda x, y, s: (x - y).norm2()),
    "Normalize": ("Normalize(x - y)", lambda x, y, s: (x - y) / np.sqrt(_sq(x - y)),
                  lambda x, y, s: (x - y).normalize()),
    "SqDist": ("SqDist(x, y)", lambda x, y, s: _sq(x - y), lambda x, y, s: x.sqdist(y)),
    "WeightedSqNorm": ("WeightedSqNorm(s, x - y)", lambda x, y, s: s * _sq(x - y),
                       lambda x, y, s: (x - y).weightedsqnorm(s)),
    "WeightedSqDist": ("WeightedSqDist(Abs(y), x, y)",
                       lambda x, y, s: np.sum(np.abs(y) * (x - y) ** 2, -1, keepdims=True),
                       lambda x, y, s: x.weightedsqdist(y, abs(y))),
    "Elem": ("Elem(x, 2) * y", lambda x, y, s: x[..., 2:3] * y,
             lambda x, y, s: x[2] * y),
    "Extract": ("Extract(x * y, 1, 2)", lambda x, y, s: (x * y)[..., 1:3],
                lambda x, y, s: (x * y)[1:3]),
    "Concat": ("Concat(x, Elem(y, 0))",
               lambda x, y, s: np.concatenate([x, y[..., :1]], -1),
               lambda x, y, s: x.concat(y[0])),
    "OneHot": ("OneHot(Abs(Elem(x - y, 0)) * 2, 3)",
               lambda x, y, s: (np.round(np.abs(x - y)[..., :1] * 2)
                                == np.arange(3)) * 1.0,
               lambda x, y, s: (abs((x - y)[0]) * 2).one_hot(3)),
    "MatVecMult": ("MatVecMult(x, Extract(y, 0, 2))",
                   lambda x, y, s: np.einsum("...ij,...j->...i", _mat(x), y[..., :2]),
                   lambda x, y, s: x.matvecmult(y[0:2])),
    "VecMatMult": ("VecMatMult(Extract(y, 0, 2), x)",
                   lambda x, y, s: np.einsum("...i,...ij->...j", y[..., :2], _mat(x)),
                   lambda x, y, s: y[0:2].vecmatmult(x)),
    "TensorProd": ("TensorProd(Extract(x, 0, 2), y)",
                   lambda x, y, s: (x[..., :2, None] * y[..., None, :]).reshape(
                       x.shape[:-1] + (8,)),
                   lambda x, y, s: x[0:2].tensorprod(y)),
    "TensorDot": ("TensorDot(x, y, [2, 2], [2, 2], [1], [0], [1, 0])",
                  lambda x, y, s: _tensordot_ref(x, y), None),
    "Kron": ("Kron(x, y, [2, 2], [2, 2])", lambda x, y, s: _kron_ref(x, y), None),
    "Floor": ("Floor(x * y * 3)", lambda x, y, s: np.floor(x * y * 3),
              lambda x, y, s: (x * y * 3).floor()),
    "Equal": ("Equal(Round(x * 2, 0), Round(y * 2, 0))",
              lambda x, y, s: (np.round(x * 2) == np.round(y * 2)) * 1.0,
              lambda x, y, s: (x * 2).round(0) == (y * 2).round(0)),
    "NotEqual": ("NotEqual(Round(x * 2, 0), Round(y * 2, 0))",
                 lambda x, y, s: (np.round(x * 2) != np.round(y * 2)) * 1.0,
                 lambda x, y, s: (x * 2).round(0) != (y * 2).round(0)),
    "LessThan": ("LessThan(x, y)", lambda x, y, s: (x < y) * 1.0, lambda x, y, s: x < y),
    "LessOrEqual": ("LessOrEqual(x, y)", lambda x, y, s: (x <= y) * 1.0,
                    lambda x, y, s: x <= y),
    "SqNormIso": ("SqNormIso(s, x - y)", lambda x, y, s: s * _sq(x - y),
                  lambda x, y, s: (x - y).weightedsqnorm(s)),
    "SqNormDiag": ("SqNormDiag(Abs(y), x)",
                   lambda x, y, s: np.sum(np.abs(y) * x * x, -1, keepdims=True),
                   lambda x, y, s: x.weightedsqnorm(abs(y))),
    # A = x y^T (row-major): x^T A x = |x|^2 (y|x)
    "SymSqNorm": ("SymSqNorm(TensorProd(x, y), x)",
                  lambda x, y, s: _sq(x) * np.sum(x * y, -1, keepdims=True),
                  lambda x, y, s: x.weightedsqnorm(x.tensorprod(y))),
    "SumT": ("SumT(Sum(x * y), 3)",
             lambda x, y, s: np.repeat(np.sum(x * y, -1, keepdims=True), 3, -1), None),
    "ElemT": ("ElemT(Elem(x, 1) * Elem(y, 2), 5, 3)",
              lambda x, y, s: np.eye(5)[3] * (x[..., 1:2] * y[..., 2:3]), None),
    "ExtractT": ("ExtractT(x * y, 1, 6)",
                 lambda x, y, s: np.concatenate([0 * x[..., :1], x * y, 0 * x[..., :1]], -1),
                 None),
    # F_k = x_0 y_k: row k of the Jacobian w.r.t. x is y_k e_0
    "GradMatrix": ("GradMatrix(Elem(x, 0) * y, x)",
                   lambda x, y, s: (y[..., :, None] * np.eye(4)[0]).reshape(
                       y.shape[:-1] + (16,)), None),
    "Divergence": ("Divergence(x * y, x)", lambda x, y, s: np.sum(y, -1, keepdims=True),
                   None),
    # the Laplacian of exp(-|x - y|^2) in dimension 4: (4 |x - y|^2 - 8) exp(-|x - y|^2)
    "Laplacian": ("Laplacian(Exp(-SqDist(x, y)), x)",
                  lambda x, y, s: (4 * _sq(x - y) - 8) * np.exp(-_sq(x - y)), None),
    # the gradient of F = exp(-|x - y|^2) s w.r.t. x, applied to e = y: -2 (x - y) F (e|1)
    "Grad": ("Grad(Exp(-SqDist(x, y)) * s, x, Elem(y, 0))",
             lambda x, y, s: -2 * (x - y) * np.exp(-_sq(x - y)) * s * y[..., :1],
             lambda x, y, s: ((-x.sqdist(y)).exp() * s).grad(x, y[0])),
}

ALIASES = ["x = Vi(4)", "y = Vj(4)", "s = Pm(1)"]


def test_every_operation_has_a_case():
    assert set(CASES) == set(OPERATIONS)


def _data(dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (5, 4)).astype(dtype)
    y = rng.uniform(-1, 1, (6, 4)).astype(dtype)
    s = np.array([0.7], dtype=dtype)
    return x, y, s


def _grid(x, y):
    """x_i and y_j as dense (N, M, 4) float64 arrays."""
    return np.broadcast_arrays(x.astype(np.float64)[:, None, :],
                               y.astype(np.float64)[None, :, :])


@pytest.mark.parametrize("op", sorted(CASES))
def test_operation_against_numpy(op, dtype, rtol):
    formula, ref, _ = CASES[op]
    x, y, s = _data(dtype)
    dense = ref(*_grid(x, y), s.astype(np.float64))
    got = Genred(formula, ALIASES, axis=1)(x, y, s, backend="numpy")
    assert got.dtype == dtype
    scale = np.abs(dense).sum(1) + 1
    assert_close(got, dense.sum(1), 10 * rtol, scale=scale, err_msg=op)


@pytest.mark.parametrize("op", sorted(k for k, v in CASES.items() if v[2] is not None))
def test_operation_is_the_lazytensor_formula(op):
    """The parsed formula is the same formula as the LazyTensor expression:
    the same numbers, bit for bit, on the reference backend."""
    formula, _, lazy = CASES[op]
    x, y, s = _data(np.float64, seed=1)
    got = Genred(formula, ALIASES, axis=1)(x, y, s, backend="numpy")
    want = lazy(kt.Vi(x), kt.Vj(y), kt.Pm(s)).sum(axis=1, backend="numpy")
    np.testing.assert_array_equal(got, want)


def test_all_operations_on_every_backend(backend, dtype, rtol):
    """Every operation in one formula (so one compiled kernel per backend and
    dtype): the compiled backends agree with dense NumPy."""
    parts = [CASES[op][0] for op in sorted(CASES)]
    formula = parts[0]
    for p in parts[1:]:
        formula = f"Concat({formula}, {p})"
    x, y, s = _data(dtype, seed=2)
    X, Y = _grid(x, y)
    dense = np.concatenate([CASES[op][1](X, Y, s.astype(np.float64))
                            for op in sorted(CASES)], -1)
    got = Genred(formula, ALIASES, axis=0)(x, y, s, backend=backend)
    assert got.shape == (6, dense.shape[-1])
    assert_close(got, dense.sum(0), 10 * rtol, scale=np.abs(dense).sum(0) + 1)


@pytest.mark.parametrize("permute", [[2, 0, 1], [1, 2, 0], [0, 2, 1]])
def test_tensordot_permutes_as_pykeops(permute):
    """pykeops' ``permute``: free axis k of the contraction becomes axis
    permute[k] (torch's ``.permute`` of the inverse permutation)."""
    rng = np.random.default_rng(5)
    a, b = rng.random((3, 12)), rng.random((4, 4))
    f = Genred(f"TensorDot(a, b, [2, 3, 2], [2, 2], [2], [0], {permute})",
               ["a = Vi(12)", "b = Vj(4)"], axis=1)
    T = np.einsum("nijk,mkl->nmijl", a.reshape(3, 2, 3, 2), b.reshape(4, 2, 2))
    T = np.transpose(T, [0, 1] + [2 + int(k) for k in np.argsort(permute)])
    assert_close(f(a, b, backend="numpy"), T.reshape(3, 4, 12).sum(1), 1e-12)


def test_float_literals_are_weak_and_pi_is_a_number():
    x, y, s = _data(np.float32)
    out = Genred(f"x * {math.pi} + 0.5", ALIASES, axis=1)(x, y, s, backend="numpy")
    assert out.dtype == np.float32
    assert_close(out, (x.astype(np.float64) * math.pi + 0.5) * 6, 1e-5)


# -- the CUDA kernel of the formula language (no GPU needed) ------------------------
def _all_operations_formula():
    formula = CASES[sorted(CASES)[0]][0]
    for op in sorted(CASES)[1:]:
        formula = f"Concat({formula}, {CASES[op][0]})"
    return formula


@pytest.mark.skipif(not _cuda_shim.available()[0], reason=_cuda_shim.available()[1])
def test_all_operations_cuda_kernel_runs_on_the_cpu_shim(tmp_path):
    """The CUDA source generated for every operation at once, compiled by g++
    around the CPU shim of ``tests/_cuda_shim.py`` and run, against NumPy."""
    x, y, s = _data(np.float32, seed=3)
    F = Genred(_all_operations_formula(), ALIASES, axis=1)._lazy((x, y, s))[0]
    plan, args = F._plan("Sum", 1)
    tuning = {"block": {4: 16, 8: 16}, "rows": 2, "max_state": 8, "unroll": 4,
              "by_reduction": {"Sum": {4: (8, 4)}}}
    (got,) = _cuda_shim.run(plan, args, tuning, tmp_path)
    (ref,) = run_plan(plan, args, "numpy")
    assert_close(got, ref, 1e-4, scale=np.abs(ref) + 1)


@pytest.mark.skipif(not _cuda_shim.nvrtc_status()[0],
                    reason=f"NVRTC: {_cuda_shim.nvrtc_status()[1]}")
def test_a_parsed_formula_compiles_with_nvrtc():
    """A Genred formula's CUDA source compiles for sm_90 (the CPU shim above runs
    the source of every operation; NVRTC on that one takes ~20 s here)."""
    x, y, s = _data(np.float32, seed=3)
    formula = "(Exp(-s * SqDist(x, y)) * Kron(x, y, [2, 2], [2, 2]) + Max(x - y)) * (x | y)"
    F = Genred(formula, ALIASES, axis=1)._lazy((x, y, s))[0]
    source, _ = _cuda_backend.generate_cuda_source(F._plan("Sum", 1)[0])
    res = _cuda_backend.nvrtc_compile(source, "sm_90")
    assert res.ok, res.log
