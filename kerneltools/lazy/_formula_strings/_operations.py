"""pykeops' formula language, as LazyTensor operations.

:data:`OPERATIONS` lists each operation of pykeops' formula strings with its
arguments (``f``: a formula, ``i``: an integer literal) and what it is in
terms of LazyTensor methods; :func:`check` verifies a syntax tree of
:mod:`._parser` against it (names declared, operations known, the right
number and kinds of arguments) when a ``Genred`` is made, and
:func:`evaluate` builds the LazyTensor formula when it is called. The
LazyTensor class (NumPy's or torch's) is the caller's: both have the same
methods, so one table serves ``kerneltools.keops.numpy`` and ``.torch``.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ...backend._errors import FormulaSyntaxError
from ...backend._limits import MAX_DECIMALS, MAX_DIM, MAX_EXPONENT, check_int
from ._parser import BinOp, Call, ListLit, Name, Neg, Num, variable_of

__all__ = ["OPERATIONS", "INT_KINDS", "check", "evaluate", "variables_of"]


def _dim(x) -> int:
    """The feature dimension of a formula (of the IR node: stable across bindings)."""
    return x.formula.dim


def _feature_fold(x, pick):
    """Fold ``pick(best, k, x_k)`` over the features of ``x``."""
    best = x.elem(0)
    for k in range(1, _dim(x)):
        best = pick(best, k, x.elem(k))
    return best


def _feature_min(lib, x):
    return x if _dim(x) == 1 else _feature_fold(x, lambda b, k, v: lib.minimum(b, v))


def _feature_max(lib, x):
    return x if _dim(x) == 1 else _feature_fold(x, lambda b, k, v: lib.maximum(b, v))


def _feature_arg(lib, x, smaller: bool):
    """Index of the first smallest (largest) feature of ``x``."""
    if _dim(x) == 1:
        return 0 * x
    best, idx = x.elem(0), 0 * x.elem(0)
    for k in range(1, _dim(x)):
        v = x.elem(k)
        better = (v < best) if smaller else (v > best)
        idx = idx + better * (k - idx)
        best = lib.minimum(best, v) if smaller else lib.maximum(best, v)
    return idx


def _bilinear(lib, a, b, W):
    """``out_k = sum_{p, q} W[k, p, q] a_p b_q`` for a constant 0/1 tensor ``W``:
    the entries that TensorDot and Kron pick from the outer product of a and b."""
    da, db = W.shape[1:]
    if (_dim(a), _dim(b)) != (da, db):
        raise ValueError(f"the shapes give dimensions {da} and {db}; the operands have "
                         f"{_dim(a)} and {_dim(b)}")
    out = None
    for k in range(W.shape[0]):
        term = None
        for p, q in zip(*np.nonzero(W[k])):
            t = a.elem(int(p)) * b.elem(int(q))
            term = t if term is None else term + t
        term = 0 * a.elem(0) if term is None else term
        out = term if out is None else out.concat(term)
    return out


def _tensordot_weights(dims_a, dims_b, cont_a, cont_b, permute=None):
    """W of :func:`_bilinear` for numpy.tensordot of a (shape dims_a) and b
    (dims_b) over the axes cont_a / cont_b, its free axes then permuted as
    pykeops does: free axis ``k`` becomes axis ``permute[k]`` of the result
    (numpy.transpose(., argsort(permute))); everything row-major."""
    da, db = int(np.prod(dims_a)), int(np.prod(dims_b))
    if len(cont_a) != len(cont_b):
        raise ValueError(f"the contracted axes {list(cont_a)} and {list(cont_b)} differ "
                         "in number")
    Ia = np.eye(da).reshape(tuple(dims_a) + (da,))
    Ib = np.eye(db).reshape(tuple(dims_b) + (db,))
    T = np.tensordot(Ia, Ib, axes=(list(cont_a), list(cont_b)))
    na = len(dims_a) - len(cont_a)  # free axes of a, then da, then b's, then db
    T = np.moveaxis(T, [na, T.ndim - 1], [T.ndim - 2, T.ndim - 1])
    free = T.ndim - 2
    if permute is not None:
        if sorted(permute) != list(range(free)):
            raise ValueError(f"permute {list(permute)} is not a permutation of the "
                             f"{free} free axes")
        T = np.transpose(T, [int(k) for k in np.argsort(permute)] + [free, free + 1])
    return T.reshape(-1, da, db)


def _tensordot(lib, a, b, dims_a, dims_b, cont_a, cont_b, permute=None):
    # the shapes must give the operands' dimensions before any array of
    # those sizes is made
    for which, dims, x in (("first", dims_a, a), ("second", dims_b, b)):
        if any(k < 1 for k in dims) or math.prod(dims) != _dim(x):
            raise ValueError(f"the shape {list(dims)} of the {which} operand does not "
                             f"give its dimension {_dim(x)}")
    return _bilinear(lib, a, b, _tensordot_weights(dims_a, dims_b, cont_a, cont_b, permute))


def _kron(lib, a, b, dims_a, dims_b):
    """numpy.kron of a (shape dims_a) and b (dims_b), flattened."""
    if len(dims_a) != len(dims_b):
        raise ValueError(f"Kron needs shapes of the same rank, got {list(dims_a)} and "
                         f"{list(dims_b)}")
    n = len(dims_a)
    # axis k of a is axis 2k of the result, axis k of b is axis 2k + 1
    interleave = [2 * k for k in range(n)] + [2 * k + 1 for k in range(n)]
    return _tensordot(lib, a, b, dims_a, dims_b, [], [], interleave)


def _repeat(x, d: int):
    """A scalar formula ``x`` repeated ``d`` times, by doubling: O(log d)
    distinct nodes (the IR shares repeated ones, and folds constants)."""
    out, power = None, x
    while True:
        if d & 1:
            out = power if out is None else out.concat(power)
        d >>= 1
        if not d:
            return out
        power = power.concat(power)


def _zeros(lib, d: int):
    """The constant 0 vector of dimension d."""
    return _repeat(lib.LazyTensor(0), d)


def _place(lib, x, start: int, d: int):
    """A vector of dimension d: x from component ``start`` on, 0 elsewhere
    (keopscore's ExtractT; ElemT for a scalar x)."""
    n = _dim(x)
    if start < 0 or start + n > d:
        raise ValueError(f"a vector of dimension {n} does not fit at {start} in dimension {d}")
    parts = ([_zeros(lib, start)] if start else []) + [x] + (
        [_zeros(lib, d - start - n)] if start + n < d else [])
    out = parts[0]
    for p in parts[1:]:
        out = out.concat(p)
    return out


def _sum_t(lib, x, d: int):
    """Scalar x repeated d times (keopscore's SumT, the adjoint of Sum)."""
    if _dim(x) != 1:
        raise ValueError(f"SumT takes a scalar formula, got dimension {_dim(x)}")
    if d < 1:
        raise ValueError(f"SumT needs a dimension d >= 1, got {d}")
    return _repeat(x, d)


def _grad_matrix(lib, F, v):
    """[Grad(F, v, e_k)]_k concatenated: the Jacobian of F (dim n) w.r.t. v, row by row."""
    n = _dim(F)
    out = None
    for k in range(n):
        e = lib.LazyTensor(k).one_hot(n) if n > 1 else lib.LazyTensor(1)
        g = F.grad(v, e)
        out = g if out is None else out.concat(g)
    return out


def _divergence(lib, F, v):
    """sum_k d F_k / d v_k, F and v of the same dimension."""
    if _dim(F) != _dim(v):
        raise ValueError(f"Divergence needs F and v of the same dimension, got {_dim(F)} "
                         f"and {_dim(v)}")
    n = _dim(F)
    out = None
    for k in range(n):
        e = lib.LazyTensor(k).one_hot(n) if n > 1 else lib.LazyTensor(1)
        term = F.grad(v, e).elem(k)
        out = term if out is None else out + term
    return out


def _unary(method: str):
    return "f", lambda lib, x: getattr(x, method)()


#: pykeops' operations: name -> (argument kinds, function(lib, *args)). The
#: kinds: ``f`` a formula, ``l`` a list of integers, and integer literals:
#: ``i`` any, ``n`` an exponent, ``d`` a dimension, ``k`` a component index,
#: ``r`` a number of decimals (each bounded, see :data:`INT_KINDS`); ``?``:
#: the arguments after it are optional.
OPERATIONS: dict = {
    # arithmetic, as functions (keopscore's class names)
    "Add": ("ff", lambda lib, a, b: a + b),
    "Subtract": ("ff", lambda lib, a, b: a - b),
    "Mult": ("ff", lambda lib, a, b: a * b),
    "Divide": ("ff", lambda lib, a, b: a / b),
    "Minus": ("f", lambda lib, a: -a),
    "Scalprod": ("ff", lambda lib, a, b: a | b),
    "IntCst": ("i", lambda lib, n: lib.LazyTensor(n)),
    "IntInv": ("i", lambda lib, n: lib.LazyTensor(1) / n),
    "Pow": ("fn", lambda lib, x, n: x ** n),
    "Powf": ("ff", lambda lib, x, y: x ** y),
    "Square": _unary("square"),
    "Sqrt": _unary("sqrt"),
    "Rsqrt": _unary("rsqrt"),
    "Inv": _unary("inv"),
    "Exp": _unary("exp"),
    "Log": _unary("log"),
    "XLogX": _unary("xlogx"),
    "Sin": _unary("sin"),
    "Cos": _unary("cos"),
    "Asin": _unary("asin"),
    "Acos": _unary("acos"),
    "Atan": _unary("atan"),
    "Atan2": ("ff", lambda lib, y, x: y.atan2(x)),
    "Sinc": _unary("sinc"),
    "SinXDivX": ("f", lambda lib, x: (x / math.pi).sinc()),
    "Abs": _unary("abs"),
    "Sign": _unary("sign"),
    "Step": _unary("step"),
    "ReLU": _unary("relu"),
    "Clamp": ("fff", lambda lib, x, a, b: x.clamp(a, b)),
    "ClampInt": ("fii", lambda lib, x, a, b: x.clamp(a, b)),
    "IfElse": ("fff", lambda lib, c, a, b: c.ifelse(a, b)),
    "Mod": ("fff", lambda lib, x, m, off: x.mod(m, off)),
    "Round": ("fr", lambda lib, x, d: x.round(d)),
    # vectors
    "Sum": _unary("sum"),
    "Min": ("f", _feature_min),
    "Max": ("f", _feature_max),
    "ArgMin": ("f", lambda lib, x: _feature_arg(lib, x, True)),
    "ArgMax": ("f", lambda lib, x: _feature_arg(lib, x, False)),
    "SqNorm2": _unary("sqnorm2"),
    "Norm2": _unary("norm2"),
    "Normalize": _unary("normalize"),
    "SqDist": ("ff", lambda lib, x, y: x.sqdist(y)),
    "WeightedSqNorm": ("ff", lambda lib, s, x: x.weightedsqnorm(s)),
    "WeightedSqDist": ("fff", lambda lib, s, x, y: x.weightedsqdist(y, s)),
    "Elem": ("fk", lambda lib, x, k: x.elem(k)),
    "Extract": ("fkd", lambda lib, x, start, d: x.extract(start, d)),
    "Concat": ("ff", lambda lib, a, b: a.concat(b)),
    "OneHot": ("fd", lambda lib, x, d: x.one_hot(d)),
    "MatVecMult": ("ff", lambda lib, A, v: A.matvecmult(v)),
    "VecMatMult": ("ff", lambda lib, v, A: v.vecmatmult(A)),
    "TensorProd": ("ff", lambda lib, a, b: a.tensorprod(b)),
    "TensorDot": ("ffllll?l", _tensordot),
    "Kron": ("ffll", _kron),
    "Floor": _unary("floor"),
    "Equal": ("ff", lambda lib, a, b: a == b),
    "NotEqual": ("ff", lambda lib, a, b: a != b),
    "LessThan": ("ff", lambda lib, a, b: a < b),
    "LessOrEqual": ("ff", lambda lib, a, b: a <= b),
    "SqNormIso": ("ff", lambda lib, s, x: x.weightedsqnorm(s)),
    "SqNormDiag": ("ff", lambda lib, s, x: x.weightedsqnorm(s)),
    "SymSqNorm": ("ff", lambda lib, A, x: x.weightedsqnorm(A)),
    "SumT": ("fd", _sum_t),
    "ElemT": ("fdk", lambda lib, x, n, m: _place(lib, x, m, n)),
    "ExtractT": ("fkd", lambda lib, x, start, d: _place(lib, x, start, d)),
    # calculus
    "Grad": ("fff", lambda lib, F, v, e: F.grad(v, e)),
    "GradMatrix": ("ff", _grad_matrix),
    "Divergence": ("ff", _divergence),
    "Laplacian": ("ff", lambda lib, F, v: _divergence(lib, F.grad(v, lib.LazyTensor(1)), v)),
}

_VARIABLES = ("Var", "Vi", "Vj", "Pm")

#: The integer kinds of :data:`OPERATIONS`: what the literal is, and its
#: smallest and largest values (None: any literal).
INT_KINDS = {"i": None, "n": ("exponent", -MAX_EXPONENT, MAX_EXPONENT),
             "d": ("dimension", 1, MAX_DIM), "k": ("index", -MAX_DIM, MAX_DIM - 1),
             "r": ("number of decimals", -MAX_DECIMALS, MAX_DECIMALS)}


def variables_of(tree, text: str) -> list[tuple]:
    """The inline variables of a tree, ``(cat, index, dim, pos)`` for each
    ``Var(index, dim, cat)``, ``Vi(index, dim)``, ... in it."""
    out = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Call):
            if node.func in _VARIABLES:
                cat, index, dim = variable_of(node, text)
                if index is None:
                    raise FormulaSyntaxError(
                        f"an inline {node.func}(...) needs an index, as in "
                        f"{node.func}(0, {dim})", text, node.pos)
                out.append((cat, index, dim, node.pos))
                continue
            stack.extend(node.args)
        elif isinstance(node, BinOp):
            stack.extend((node.left, node.right))
        elif isinstance(node, Neg):
            stack.append(node.operand)
    return out


def _int_literal(node) -> int | None:
    if isinstance(node, Num) and isinstance(node.value, int):
        return node.value
    if isinstance(node, Neg) and isinstance(node.operand, Num):
        v = node.operand.value
        return -v if isinstance(v, int) else None
    return None


def _int_list(node) -> list | None:
    if not isinstance(node, ListLit):
        return None
    items = [_int_literal(v) for v in node.items]
    return None if None in items else items


def check(tree, names, text: str) -> None:
    """A FormulaSyntaxError at the first undeclared name, unknown operation, or
    call with the wrong number or kinds of arguments in ``tree``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, Name):
            if node.id not in names:
                known = ", ".join(sorted(names)) or "none"
                raise FormulaSyntaxError(
                    f"unknown name {node.id!r} (the aliases declare: {known})",
                    text, node.pos)
        elif isinstance(node, BinOp):
            if node.op == "**":
                _check_int_kind("n", node.right, "**", text)
            stack.extend((node.left, node.right))
        elif isinstance(node, Neg):
            stack.append(node.operand)
        elif isinstance(node, ListLit) and node is tree:
            raise FormulaSyntaxError("a list is not a formula", text, node.pos)
        elif isinstance(node, Call) and node.func not in _VARIABLES:
            spec = OPERATIONS.get(node.func)
            if spec is None:
                raise FormulaSyntaxError(
                    f"unknown operation {node.func!r}; the operations are "
                    f"{', '.join(sorted(OPERATIONS))}", text, node.pos)
            required, full = spec[0].split("?")[0], spec[0].replace("?", "")
            if not len(required) <= len(node.args) <= len(full):
                n = (str(len(full)) if required == full
                     else f"{len(required)} to {len(full)}")
                raise FormulaSyntaxError(
                    f"{node.func} takes {n} argument(s), got {len(node.args)}",
                    text, node.pos)
            for kind, arg in zip(full, node.args):
                pos = getattr(arg, "pos", node.pos)
                if kind in INT_KINDS:
                    if _int_literal(arg) is None:
                        raise FormulaSyntaxError(
                            f"this argument of {node.func} must be an integer literal",
                            text, pos)
                    _check_int_kind(kind, arg, node.func, text)
                if kind == "l" and _int_list(arg) is None:
                    raise FormulaSyntaxError(
                        f"this argument of {node.func} must be a list of integers, as "
                        "[2, 3]", text, pos)
                if kind == "f":
                    if isinstance(arg, ListLit):
                        raise FormulaSyntaxError(
                            f"a list is not a formula (argument of {node.func})", text, pos)
                    stack.append(arg)


def _check_int_kind(kind: str, arg, func: str, text: str) -> None:
    """A FormulaSyntaxError at ``arg``, an integer literal (or not: then
    nothing to check) of the kind ``kind``, beyond its limit."""
    value, limit = _int_literal(arg), INT_KINDS[kind]
    if value is None or limit is None:
        return
    why = check_int(value, limit[1], limit[2], limit[0])
    if why is not None:
        raise FormulaSyntaxError(f"{why} (in {func})", text, arg.pos)


def evaluate(tree, env: dict, var, lib, text: str):
    """The LazyTensor of ``tree``: ``env`` maps alias names to LazyTensors,
    ``var(index)`` gives the variable of an argument, ``lib`` is the binding
    (its ``LazyTensor``, ``minimum`` and ``maximum``). Errors of the formula's
    dimensions are ValueErrors naming the position."""
    memo: dict = {}  # id of a syntax node -> its value (the tree outlives the loop)
    stack = [(tree, False)]
    while stack:  # children first, with an explicit stack: no recursion limit
        node, ready = stack.pop()
        if id(node) in memo:
            continue
        if not ready:
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(_formula_children(node)))
            continue
        memo[id(node)] = _value(node, memo, env, var, lib, text)
    return _formula(memo[id(tree)], lib)


def _formula_children(node) -> tuple:
    """The syntax nodes whose values ``node``'s value is made of."""
    if isinstance(node, Neg):
        return (node.operand,)
    if isinstance(node, BinOp):
        return (node.left, node.right)
    if isinstance(node, Call) and node.func not in _VARIABLES:
        kinds = OPERATIONS[node.func][0].replace("?", "")
        return tuple(a for k, a in zip(kinds, node.args) if k == "f")
    return ()


def _value(node, memo, env, var, lib, text):
    """The value of ``node``, its children's values in ``memo``."""
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Name):
        return env[node.id]
    if isinstance(node, Neg):
        return -memo[id(node.operand)]
    if isinstance(node, BinOp):
        a, b = memo[id(node.left)], memo[id(node.right)]
        return _positioned(_binary, text, node.pos, f"'{node.op}'", node.op, a, b, lib)
    if node.func in _VARIABLES:
        return var(variable_of(node, text)[1])
    kinds, fn = OPERATIONS[node.func]
    args = [_int_literal(a) if k in INT_KINDS else _int_list(a) if k == "l"
            else _formula(memo[id(a)], lib)
            for k, a in zip(kinds.replace("?", ""), node.args)]
    return _positioned(fn, text, node.pos, node.func, lib, *args)


def _formula(v, lib):
    """A number as a LazyTensor constant (ints exact), formulas as they are."""
    if isinstance(v, numbers.Number):
        return lib.LazyTensor(int(v) if isinstance(v, int) else float(v))
    return v


def _binary(op, a, b, lib):
    if isinstance(a, numbers.Number) and isinstance(b, numbers.Number):
        a = _formula(a, lib)  # constant folding is the engine's business
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a / b
    if op == "|":
        return _formula(a, lib) | b
    return _formula(a, lib) ** b  # "**"


def _positioned(fn, text, pos, what, *args):
    try:
        return fn(*args)
    except (ValueError, TypeError) as exc:
        if isinstance(exc, FormulaSyntaxError) or "of the formula at position" in str(exc):
            raise
        raise type(exc)(f"{exc}\nin {what} of the formula at position {pos}:\n    {text}\n"
                        f"    {' ' * pos}^") from None
