"""pykeops' formula strings, read into LazyTensor formulas.

What lives here: the tokenizer and parser of formula strings
(:mod:`._parser`: ``"Exp(-SqDist(x, y)) * b"``, aliases ``"x = Vi(3)"``, no
``eval``) and the table of pykeops' operations as LazyTensor methods
(:mod:`._operations`: :func:`check` a syntax tree, :func:`evaluate` it with
the caller's LazyTensor module). Both front ends read formula strings:
:mod:`kerneltools.keops` (``Genred``, ``generic_sum``) and
:mod:`kerneltools.torch` (``SamplesLoss(cost="...")``), so the parser lives
below them both. What it may import: the engine's errors and limits
(:mod:`kerneltools.backend._errors`, :mod:`kerneltools.backend._limits`) and
NumPy; the LazyTensor class is the caller's argument, never imported here.
(Before issue 38 these were ``kerneltools.keops._parser`` and
``kerneltools.keops._formulas``; :mod:`kerneltools._moved` keeps those names.)
"""

from ._operations import OPERATIONS, check, evaluate, variables_of
from ._parser import Alias, FormulaSyntaxError, parse_alias, parse_formula

__all__ = ["OPERATIONS", "Alias", "FormulaSyntaxError", "check", "evaluate",
           "parse_alias", "parse_formula", "variables_of"]
