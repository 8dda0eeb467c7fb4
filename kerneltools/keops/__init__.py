"""pykeops compatibility: ``kerneltools.keops.numpy`` and ``kerneltools.keops.torch``
mirror ``pykeops.numpy`` and ``pykeops.torch`` (``Genred``, ``KernelSolve``,
``LazyTensor``, ``Vi``, ``Vj``, ``Pm``, ``generic_sum``, ...), so that pykeops
code runs after changing only the import. Formula strings are read by a
parser (:func:`parse_formula`), never by ``eval``.
"""

from ._parser import FormulaSyntaxError, parse_alias, parse_formula

__all__ = ["FormulaSyntaxError", "parse_alias", "parse_formula"]
