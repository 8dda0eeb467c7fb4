"""A parser for pykeops' formula strings: tokenizer and Pratt parser, no ``eval``.

pykeops writes a reduction's formula as text, ``"Exp(-SqDist(x, y)) * b"``,
with its variables declared by aliases, ``"x = Vi(3)"``, ``"y = Vj(1, 3)"``,
``"g = Pm(1)"``, or inline as ``Var(index, dim, category)``. pykeops hands
such strings to Python's ``eval``; here they are read by a tokenizer and a
precedence-climbing (Pratt) parser into a small syntax tree of
:class:`Num`, :class:`Name`, :class:`Call`, :class:`BinOp` and
:class:`Neg` nodes, which :mod:`kerneltools.keops._formulas` turns into
LazyTensor formulas. Nothing in a formula string is ever executed.

The grammar is the part of Python's expression grammar that pykeops'
formulas use, with Python's precedence (lowest first)::

    expr    := expr "|" expr            (dot product, pykeops' Scalprod)
             | expr ("+" | "-") expr
             | expr ("*" | "/") expr
             | "-" expr | "+" expr
             | atom "**" expr           (right-associative)
    atom    := NUMBER | NAME | NAME "(" [expr ("," expr)*] ")" | "(" expr ")"
             | "[" [expr ("," expr)*] "]"  (a list of integers)

A syntax error is a :class:`FormulaSyntaxError` (a ``ValueError``) naming
the position, with the string and a caret under the offending character.
"""

from __future__ import annotations

import re
from typing import NamedTuple, Union

__all__ = ["Alias", "BinOp", "Call", "FormulaSyntaxError", "ListLit", "Name", "Neg", "Num",
           "parse_alias", "parse_formula"]


class FormulaSyntaxError(ValueError):
    """A formula or alias string that does not parse.

    Attributes
    ----------
    text : str
        The string.
    pos : int
        The 0-based position of the offending character.
    """

    def __init__(self, message: str, text: str, pos: int):
        self.text, self.pos, self.reason = text, pos, message
        super().__init__(f"{message} at position {pos}:\n    {text}\n    {' ' * pos}^")


class Num(NamedTuple):
    """A number literal: an int (exact, pykeops' ``IntCst``) or a float."""

    value: Union[int, float]
    pos: int


class Name(NamedTuple):
    """A name: an alias of a variable."""

    id: str
    pos: int


class Call(NamedTuple):
    """``func(args...)``: an operation, ``Var(...)``, ``Vi(...)``, ..."""

    func: str
    args: tuple
    pos: int


class BinOp(NamedTuple):
    """``left op right`` with op one of ``+ - * / | **``."""

    op: str
    left: object
    right: object
    pos: int


class Neg(NamedTuple):
    """``-operand``."""

    operand: object
    pos: int


class ListLit(NamedTuple):
    """``[a, b, ...]``: a list of integers (the shapes of ``TensorDot``, ``Kron``)."""

    items: tuple
    pos: int


class Alias(NamedTuple):
    """A declared variable: ``name = Vi(dim)`` and the like.

    ``cat`` is 0 (indexed by i), 1 (by j) or 2 (a parameter); ``index`` the
    position of its argument in the call, None where the alias does not say
    (the position in the list of aliases is used then).
    """

    name: str
    cat: int
    index: Union[int, None]
    dim: int


_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<num>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?)
  | (?P<name>[A-Za-z_][A-Za-z_0-9]*)
  | (?P<op>\*\*|[-+*/|(),=\[\]])
""", re.VERBOSE)


class _Token(NamedTuple):
    kind: str  # "num", "name", "op", "end"
    text: str
    pos: int


def tokenize(text: str) -> list[_Token]:
    """The tokens of ``text``, ending with an "end" token."""
    if not isinstance(text, str):
        raise TypeError(f"a formula must be a string, got {type(text).__name__}")
    out, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise FormulaSyntaxError(f"unexpected character {text[pos]!r}", text, pos)
        if m.lastgroup != "space":
            out.append(_Token(m.lastgroup, m.group(), pos))
        pos = m.end()
    out.append(_Token("end", "", len(text)))
    return out


#: Binding power of the binary operators (Python's precedence).
_INFIX = {"|": 10, "+": 20, "-": 20, "*": 30, "/": 30, "**": 50}
_PREFIX_POWER = 40  # unary minus: below ** (-x**2 is -(x**2)), above * and /


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = tokenize(text)
        self.k = 0

    @property
    def tok(self) -> _Token:
        return self.tokens[self.k]

    def advance(self) -> _Token:
        t = self.tokens[self.k]
        self.k += 1
        return t

    def fail(self, message: str, tok: _Token | None = None):
        tok = tok or self.tok
        got = "the end of the string" if tok.kind == "end" else repr(tok.text)
        raise FormulaSyntaxError(f"{message}, got {got}", self.text, tok.pos)

    def expect(self, text: str) -> _Token:
        if self.tok.text != text or self.tok.kind != "op":
            self.fail(f"expected {text!r}")
        return self.advance()

    def expression(self, power: int = 0):
        """Pratt's loop: a prefix term, then infix operators binding tighter than ``power``."""
        left = self.prefix()
        while self.tok.kind == "op" and _INFIX.get(self.tok.text, 0) > power:
            op = self.advance()
            p = _INFIX[op.text]
            # ** is right-associative and its right side may be signed (2**-1)
            right = self.expression(p - 1) if op.text == "**" else self.expression(p)
            left = BinOp(op.text, left, right, op.pos)
        return left

    def prefix(self):
        t = self.tok
        if t.kind == "op" and t.text in "-+":
            self.advance()
            operand = self.expression(_PREFIX_POWER)
            return Neg(operand, t.pos) if t.text == "-" else operand
        if t.kind == "op" and t.text == "(":
            self.advance()
            inner = self.expression()
            self.expect(")")
            return inner
        if t.kind == "op" and t.text == "[":
            return self.list_literal()
        if t.kind == "num":
            self.advance()
            is_int = re.fullmatch(r"\d+", t.text) is not None
            return Num(int(t.text) if is_int else float(t.text), t.pos)
        if t.kind == "name":
            self.advance()
            if self.tok.kind == "op" and self.tok.text == "(":
                return self.call(t)
            return Name(t.text, t.pos)
        self.fail("expected a number, a name, '-' or '('")

    def at(self, text: str) -> bool:
        """Whether the current token is the operator ``text``."""
        return self.tok.kind == "op" and self.tok.text == text

    def items(self, close: str, where: str) -> tuple:
        """Comma-separated expressions up to the ``close`` token (consumed)."""
        out = []
        if not self.at(close):
            out.append(self.expression())
            while self.at(","):
                self.advance()
                out.append(self.expression())
        if not self.at(close):
            self.fail(f"expected ',' or {close!r} {where}")
        self.advance()
        return tuple(out)

    def call(self, name: _Token) -> Call:
        self.expect("(")
        return Call(name.text, self.items(")", f"in the arguments of {name.text}"), name.pos)

    def list_literal(self) -> ListLit:
        start = self.expect("[")
        return ListLit(self.items("]", "in a list"), start.pos)

    def finish(self):
        if self.tok.kind != "end":
            self.fail("expected an operator or the end of the formula")


def parse_formula(text: str):
    """The syntax tree of the formula string ``text``.

    Raises
    ------
    FormulaSyntaxError
        With the position of the first character that does not fit.
    """
    p = _Parser(text)
    if p.tok.kind == "end":
        raise FormulaSyntaxError("the formula is empty", text, 0)
    tree = p.expression()
    p.finish()
    return tree


#: pykeops' variable constructors: category, and whether the first of two
#: arguments is the index.
_CATEGORIES = {"Vi": 0, "Vj": 1, "Pm": 2}


def variable_of(call: Call, text: str, default_index=None) -> tuple[int, int | None, int]:
    """(category, index, dim) of ``Vi(dim)``, ``Vi(index, dim)``, ``Var(index, dim, cat)``
    (and ``Vj``, ``Pm``); a FormulaSyntaxError where the arguments are not that."""
    args = call.args
    for a in args:
        if not isinstance(a, Num) or not isinstance(a.value, int):
            raise FormulaSyntaxError(f"the arguments of {call.func} must be integers",
                                     text, getattr(a, "pos", call.pos))
    values = [a.value for a in args]
    if call.func == "Var":
        if len(values) != 3 or values[2] not in (0, 1, 2):
            raise FormulaSyntaxError(
                "Var takes (index, dim, category) with category 0 (i), 1 (j) or 2 "
                f"(parameter); got {len(values)} argument(s)", text, call.pos)
        index, dim, cat = values
    elif call.func in _CATEGORIES:
        if len(values) not in (1, 2):
            raise FormulaSyntaxError(
                f"{call.func} takes (dim) or (index, dim); got {len(values)} argument(s)",
                text, call.pos)
        cat = _CATEGORIES[call.func]
        index, dim = (default_index, values[0]) if len(values) == 1 else values
    else:
        raise FormulaSyntaxError(
            f"expected Vi(...), Vj(...), Pm(...) or Var(...), got {call.func}",
            text, call.pos)
    if dim < 1:
        raise FormulaSyntaxError(f"the dimension of {call.func} must be >= 1, got {dim}",
                                 text, call.pos)
    return cat, index, dim


def parse_alias(text: str, default_index: int | None = None) -> Alias:
    """An alias string, ``"x = Vi(3)"``, ``"y=Vj(1,3)"``, ``"p = Pm(2, 1)"``,
    ``"z = Var(3, 2, 0)"``; ``default_index`` is the index of a variable
    whose alias does not give one."""
    p = _Parser(text)
    if p.tok.kind != "name":
        p.fail("an alias starts with a name, as in 'x = Vi(3)'")
    name = p.advance().text
    p.expect("=")
    if p.tok.kind != "name":
        p.fail("expected Vi(...), Vj(...), Pm(...) or Var(...)")
    func = p.advance()
    call = p.call(func)
    if p.tok.kind != "end":
        p.fail("expected the end of the alias")
    cat, index, dim = variable_of(call, text, default_index)
    return Alias(name, cat, index, dim)
