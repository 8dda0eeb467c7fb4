"""A parser for pykeops' formula strings: tokenizer and Pratt parser, no ``eval``.

pykeops writes a reduction's formula as text, ``"Exp(-SqDist(x, y)) * b"``,
with its variables declared by aliases, ``"x = Vi(3)"``, ``"y = Vj(1, 3)"``,
``"g = Pm(1)"``, or inline as ``Var(index, dim, category)``. pykeops hands
such strings to Python's ``eval``; here they are read by a tokenizer and a
precedence-climbing (Pratt) parser into a small syntax tree of
:class:`Num`, :class:`Name`, :class:`Call`, :class:`BinOp` and
:class:`Neg` nodes, which :mod:`._operations` turns into
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

Parsing takes time and memory linear in the string, whatever its nesting:
the parser keeps its own stack (a 10,000-deep ``Exp(Exp(...))`` parses),
numbers are ASCII digits only, a number literal has at most
``MAX_LITERAL_CHARS`` characters, and variable indices and dimensions are
bounded (``MAX_ARGUMENTS``, ``MAX_DIM``: see
:mod:`kerneltools.backend._limits`).
"""

from __future__ import annotations

import re
from typing import NamedTuple, Union

from ...backend._errors import FormulaSyntaxError
from ...backend._limits import MAX_ARGUMENTS, MAX_DIM, MAX_LITERAL_CHARS, check_int

__all__ = ["Alias", "BinOp", "Call", "FormulaSyntaxError", "ListLit", "Name", "Neg", "Num",
           "parse_alias", "parse_formula"]


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


# ASCII only: Python's \d and int() also read Arabic-Indic or full-width
# digits, which pykeops' eval refuses.
_TOKEN = re.compile(r"""
    (?P<space>[ \t\n\r\f\v]+)
  | (?P<num>(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][-+]?[0-9]+)?)
  | (?P<name>[A-Za-z_][A-Za-z_0-9]*)
  | (?P<op>\*\*|[-+*/|(),=\[\]])
""", re.VERBOSE | re.ASCII)


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
        if m.lastgroup == "num" and m.end() - pos > MAX_LITERAL_CHARS:
            raise FormulaSyntaxError(
                f"a number literal of {m.end() - pos} characters; a literal has at "
                f"most {MAX_LITERAL_CHARS}", text, pos)
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

    def at(self, text: str) -> bool:
        """Whether the current token is the operator ``text``."""
        return self.tok.kind == "op" and self.tok.text == text

    def expression(self, stack: list | None = None):
        """One expression, by Pratt's loop with an explicit stack of pending
        frames instead of recursion: the nesting depth is bounded by memory
        only, never by Python's recursion limit.

        Frames: ``("expr", power)`` is an expression taking the infix
        operators that bind tighter than ``power``; ``("bin", op, left)`` waits
        for the right operand of ``op``; ``("sign", token)``, ``("paren",)``
        wait for their operand; ``("items", close, what, token, items)``
        collects the arguments of a call or the items of a list. ``stack``:
        frames to start from (the default, one expression).
        """
        stack = [("expr", 0)] if stack is None else stack
        value = None
        while True:
            if value is None:
                value = self._operand(stack)
                if value is None:
                    continue  # a frame was opened: parse its first operand
            if not stack:
                return value
            frame = stack[-1]  # hand the finished value to the frame that waits
            kind = frame[0]
            if kind == "expr":
                p = _INFIX.get(self.tok.text, 0) if self.tok.kind == "op" else 0
                if p > frame[1]:
                    op = self.advance()
                    # ** is right-associative and its right side may be signed (2**-1)
                    stack += [("bin", op, value), ("expr", p - 1 if op.text == "**" else p)]
                    value = None
                    continue
                stack.pop()
            elif kind == "bin":
                stack.pop()
                value = BinOp(frame[1].text, frame[2], value, frame[1].pos)
            elif kind == "sign":
                stack.pop()
                value = Neg(value, frame[1].pos) if frame[1].text == "-" else value
            elif kind == "paren":
                stack.pop()
                self.expect(")")
            else:  # items
                _, close, what, start, items = frame
                items.append(value)
                if self.at(","):
                    self.advance()
                    stack.append(("expr", 0))
                    value = None
                    continue
                stack.pop()
                value = self._close_items(close, what, start, items)

    def _operand(self, stack: list):
        """A prefix term: a number, a name, or an empty call or list (returned);
        or the frame of a sign, parenthesis, call or list, pushed on ``stack``
        with the expression of its first operand (None returned)."""
        t = self.tok
        if t.kind == "op" and t.text in ("-", "+"):
            self.advance()
            # unary minus binds below ** (-x**2 is -(x**2)), above * and /
            stack += [("sign", t), ("expr", _PREFIX_POWER)]
            return None
        if t.kind == "op" and t.text == "(":
            self.advance()
            stack += [("paren",), ("expr", 0)]
            return None
        if t.kind == "op" and t.text == "[":
            self.advance()
            return self._open_items(stack, "]", "in a list", t)
        if t.kind == "num":
            self.advance()
            is_int = re.fullmatch(r"[0-9]+", t.text) is not None
            return Num(int(t.text) if is_int else float(t.text), t.pos)
        if t.kind == "name":
            self.advance()
            if self.at("("):
                self.advance()
                return self._open_items(stack, ")", f"in the arguments of {t.text}", t)
            return Name(t.text, t.pos)
        self.fail("expected a number, a name, '-' or '('")

    def _open_items(self, stack, close, what, start):
        if self.at(close):
            return self._close_items(close, what, start, [])
        stack += [("items", close, what, start, []), ("expr", 0)]
        return None

    def _close_items(self, close, what, start, items):
        if not self.at(close):
            self.fail(f"expected ',' or {close!r} {what}")
        self.advance()
        if close == "]":
            return ListLit(tuple(items), start.pos)
        return Call(start.text, tuple(items), start.pos)

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
    # the index and the dimension are the last two arguments of Vi/Vj/Pm,
    # the first two of Var
    pos = {a: args[k].pos for a, k in zip(("index", "dim"), (0, 1) if call.func == "Var"
                                           else (len(args) - 2, len(args) - 1))}
    for what, value, limit in (("index", index, MAX_ARGUMENTS - 1), ("dim", dim, MAX_DIM)):
        why = None if value is None else check_int(
            value, 0, limit, "variable index" if what == "index" else "dimension")
        if why is not None:
            raise FormulaSyntaxError(f"{why} (in {call.func})", text, pos[what])
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
    p.expect("(")
    stack: list = []
    call = p._open_items(stack, ")", f"in the arguments of {func.text}", func)
    if call is None:  # its arguments are expressions: parse them on the stack
        call = p.expression(stack)
    if p.tok.kind != "end":
        p.fail("expected the end of the alias")
    cat, index, dim = variable_of(call, text, default_index)
    return Alias(name, cat, index, dim)
