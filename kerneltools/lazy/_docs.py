"""The docstrings of ``kerneltools.lazy``'s constructors and functions.

Kept here so that ``lazy/__init__.py`` stays within the layout's line limit;
``__init__`` assigns each to its function's ``__doc__`` (the API reference,
``help()`` and the doctests read them from there).
"""

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
>>> import numpy as np
>>> from kerneltools.lazy import Vi, Vj
>>> x = np.arange(6.0).reshape(3, 2)
>>> y = np.arange(4.0).reshape(2, 2)
>>> D = ((Vi(x) - Vj(y)) ** 2).sum()
>>> D.shape
(3, 2)
>>> D.sum(axis={axis}).ravel()
{result}
"""

VI = _VARIABLE.format(i="i", N="N", name="Vi", other="Vj", o="j", axis=1,
                      result="array([ 8.,  8., 40.])")
VJ = _VARIABLE.format(i="j", N="M", name="Vj", other="Vi", o="i", axis=0,
                      result="array([40., 16.])")

PM = """A parameter, shared by every pair (i, j), from a scalar or a (D,) array.

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

Returns
-------
LazyTensor
    The parameter, of dimension D (1 for a scalar).

See Also
--------
Vi : A variable indexed by i.
Vj : A variable indexed by j.

Examples
--------
>>> import numpy as np
>>> from kerneltools.lazy import Vi, Vj, Pm
>>> x = np.arange(6.0).reshape(3, 2)
>>> K = (-Pm(0.5) * ((Vi(x) - Vj(x)) ** 2).sum()).exp()
>>> np.round(K.sum(axis=1).ravel(), 2)
array([1.02, 1.04, 1.02])
"""

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
{other} : The element-wise {other_what}.

Examples
--------
>>> import numpy as np
>>> from kerneltools.lazy import Vi, Vj, {name}
>>> x = np.array([[0.0], [3.0]])
>>> y = np.array([[1.0], [2.0]])
>>> {name}(Vi(x), Vj(y)).sum(axis=1).ravel()
{result}
"""

MINIMUM = _EXTREMUM.format(what="minimum", other="maximum", other_what="maximum",
                           name="minimum", result="array([0., 3.])")
MAXIMUM = _EXTREMUM.format(what="maximum", other="minimum", other_what="minimum",
                           name="maximum", result="array([3., 6.])")

LAZY_TENSOR_EXAMPLES = """
    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.lazy import LazyTensor
    >>> x = np.arange(6.0).reshape(3, 2)
    >>> x_i, y_j = LazyTensor(x[:, None, :]), LazyTensor(x[None, :, :])
    >>> D_ij = ((x_i - y_j) ** 2).sum(-1)
    >>> D_ij.shape, D_ij.sum(axis=1).ravel()
    ((3, 3), array([40., 16., 40.]))
    """
