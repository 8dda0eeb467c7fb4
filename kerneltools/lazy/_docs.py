"""The docstrings of ``kerneltools.lazy``'s constructors and functions.

Kept here so that ``lazy/__init__.py`` stays within the layout's line limit;
``__init__`` assigns each to its function's ``__doc__`` (the API reference,
``help()`` and the doctests read them from there). The sections and
examples that ``kerneltools.torch`` and ``kerneltools.jax`` share with it are
templates here, filled by :func:`variable_docs`, :func:`parameter_doc`,
:func:`extremum_docs` and :func:`lazy_tensor_examples` with a :class:`Front`
(the front end's module, array library and way of showing a result).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np


class Front(NamedTuple):
    """How a front end's doctests look."""

    module: str  #: kerneltools.lazy, kerneltools.torch, ...
    imports: str  #: the import line of the array library
    arange: str  #: its ``arange``
    array: str  #: its array constructor
    axis: str  #: the reduction's axis keyword
    show: str  #: the last line of an example, ``{}`` the expression
    result: Callable  #: the printed result of a list of numbers


NUMPY = Front("kerneltools.lazy", "import numpy as np", "np.arange", "np.array", "axis",
              "{}", lambda v: repr(np.array(v)))


_VARIABLE_TAIL = """
Returns
-------
LazyTensor
    The symbolic variable, of dimension D, indexed by {i}.

See Also
--------
{other} : The variable indexed by {o}.
Pm : A parameter shared by every pair.

Examples
--------
>>> {f.imports}
>>> from {f.module} import Vi, Vj
>>> x = {f.arange}(6.0).reshape(3, 2)
>>> y = {f.arange}(4.0).reshape(2, 2)
>>> D = ((Vi(x) - Vj(y)) ** 2).sum()
>>> D.shape
(3, 2)
>>> {show}
{result}
"""


def variable_docs(body: str, front: Front) -> tuple[str, str]:
    """The docstrings of ``Vi`` and ``Vj``: ``body`` (summary to Parameters,
    ``{i}``, ``{N}``, ``{name}`` filled) and the shared sections."""
    out = []
    for i, N, name, other, o, axis, result in (
            ("i", "N", "Vi", "Vj", "j", 1, [8.0, 8.0, 40.0]),
            ("j", "M", "Vj", "Vi", "i", 0, [40.0, 16.0])):
        show = front.show.format(f"D.sum({front.axis}={axis}).ravel()")
        out.append(body.format(i=i, N=N, name=name) + _VARIABLE_TAIL.format(
            i=i, other=other, o=o, f=front, show=show, result=front.result(result)))
    return out[0], out[1]


_VARIABLE = """A variable indexed by {i} from an ({N}, D) or ({N},) array.

With leading batch axes, (B..., {N}, D), each batch is reduced on its own.
``{name}(k, D)`` (an integer and a dimension) is pykeops' symbolic variable
of index k, its data given when the reduction is called (see
:mod:`kerneltools.lazy._deferred`).

Parameters
----------
x : array-like of shape ({N}, D), ({N},) or (B..., {N}, D), or int
    The data (float32 or float64, or complex), or the index k of a
    symbolic variable.
dim : int, default=None
    The dimension D of a symbolic variable (with an integer ``x``); None
    for data.
"""

VI, VJ = variable_docs(_VARIABLE, NUMPY)

_PARAMETER_RETURNS = """
Returns
-------
LazyTensor
    The parameter, of dimension D (1 for a number).

See Also
--------
Vi : A variable indexed by i.
Vj : A variable indexed by j.

"""


def parameter_doc(body: str, examples: str) -> str:
    """The docstring of ``Pm``: ``body`` (summary to Parameters), the shared
    Returns and See Also, ``examples``."""
    return body + _PARAMETER_RETURNS + examples


PM = parameter_doc("""A parameter, shared by every pair (i, j), from a scalar or a (D,) array.

A Python number is weakly typed, as in NumPy: it does not turn float32
data into float64. ``Pm(k, D)`` is a symbolic parameter of index k (see
:func:`Vi`).

Parameters
----------
p : float, array-like of shape (D,), or int
    The value, or the index k of a symbolic parameter.
dim : int, default=None
    The dimension D of a symbolic parameter (with an integer ``p``); None
    for a value.
""", """Examples
--------
>>> import numpy as np
>>> from kerneltools.lazy import Vi, Vj, Pm
>>> x = np.arange(6.0).reshape(3, 2)
>>> K = (-Pm(0.5) * ((Vi(x) - Vj(x)) ** 2).sum()).exp()
>>> np.round(K.sum(axis=1).ravel(), 2)
array([1.02, 1.04, 1.02])
""")

_EXTREMUM = """Element-wise {what} of two formulas (NaN propagates).

Parameters
----------
a, b : LazyTensor or float
    The formulas (a number is a constant); of one dimension, or one of
    dimension 1 (broadcast).

Returns
-------
LazyTensor
    The formula of the element-wise {what}.

See Also
--------
{other} : The element-wise {other}.

Examples
--------
>>> {f.imports}
>>> from {f.module} import Vi, Vj, {what}
>>> x = {f.array}([[0.0], [3.0]])
>>> y = {f.array}([[1.0], [2.0]])
>>> {show}
{result}
"""


def extremum_docs(front: Front) -> tuple[str, str]:
    """The docstrings of ``minimum`` and ``maximum``."""
    return tuple(_EXTREMUM.format(
        what=what, other=other, f=front, result=front.result(result),
        show=front.show.format(f"{what}(Vi(x), Vj(y)).sum({front.axis}=1).ravel()"))
        for what, other, result in (("minimum", "maximum", [0.0, 3.0]),
                                    ("maximum", "minimum", [3.0, 6.0])))


MINIMUM, MAXIMUM = extremum_docs(NUMPY)

_LAZY_TENSOR_EXAMPLES = """Examples
--------
>>> {f.imports}
>>> from {f.module} import LazyTensor
>>> x = {f.arange}(6.0).reshape(3, 2)
>>> x_i, y_j = LazyTensor(x[:, None, :]), LazyTensor(x[None, :, :])
>>> D_ij = ((x_i - y_j) ** 2).sum(-1)
>>> D_ij.shape
(3, 3)
>>> {show}
{result}
"""


def lazy_tensor_examples(front: Front, indent: str = "") -> str:
    """The Examples section of a LazyTensor class, indented by ``indent``."""
    text = _LAZY_TENSOR_EXAMPLES.format(
        f=front, show=front.show.format(f"D_ij.sum({front.axis}=1).ravel()"),
        result=front.result([40.0, 16.0, 40.0]))
    return "".join(indent + line if line.strip() else line
                   for line in text.splitlines(True))


LAZY_TENSOR_EXAMPLES = "\n" + lazy_tensor_examples(NUMPY, "    ") + "    "
