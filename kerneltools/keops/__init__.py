"""pykeops compatibility: ``kerneltools.keops.numpy`` and ``kerneltools.keops.torch``
mirror ``pykeops.numpy`` and ``pykeops.torch`` (``Genred``, ``KernelSolve``,
``LazyTensor``, ``Vi``, ``Vj``, ``Pm``, ``generic_sum``, ...), so that pykeops
code runs after changing only the import. Formula strings are read by a
parser (:func:`parse_formula`, in :mod:`kerneltools.lazy._formula_strings`,
which :mod:`kerneltools.torch` uses too), never by ``eval``.

What lives here: ``Genred`` and ``KernelSolve`` (:mod:`._genred`),
clustering helpers and pykeops' dtype rules, and the two drop-in packages
:mod:`.numpy` and :mod:`.torch`. What it may import: the public API
(:mod:`kerneltools.lazy`, :mod:`kerneltools.torch`, :mod:`kerneltools.linalg`,
:mod:`kerneltools.ranges`) and the engine.
"""

from ..lazy._formula_strings import FormulaSyntaxError, parse_alias, parse_formula

__all__ = ["FormulaSyntaxError", "parse_alias", "parse_formula"]
