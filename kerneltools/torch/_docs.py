"""The docstrings of ``kerneltools.torch``'s constructors and functions.

Kept here so that ``torch/__init__.py`` stays within the layout's line
limit; ``__init__`` assigns each to its function's ``__doc__`` (the API
reference, ``help()`` and the doctests read them from there).
"""

_VARIABLE = """A variable indexed by {i} from an ({N}, D) or ({N},) tensor.

With leading batch axes, (B..., {N}, D), each batch is reduced on its own.
``{name}(k, D)`` (an integer and a dimension) is pykeops' symbolic variable
of index k, its tensor given when the reduction is called. Reductions are
differentiable with respect to the tensor (torch autograd).

Parameters
----------
x : torch.Tensor of shape ({N}, D), ({N},) or (B..., {N}, D), or int
    The data (converted with ``torch.as_tensor``), or the index k of a
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
>>> import torch
>>> from kerneltools.torch import Vi, Vj
>>> x = torch.arange(6.0).reshape(3, 2)
>>> y = torch.arange(4.0).reshape(2, 2)
>>> D = ((Vi(x) - Vj(y)) ** 2).sum()
>>> D.sum(dim={axis}).ravel()
{result}
"""

VI = _VARIABLE.format(i="i", N="N", name="Vi", other="Vj", o="j", axis=1,
                      result="tensor([ 8.,  8., 40.])")
VJ = _VARIABLE.format(i="j", N="M", name="Vj", other="Vi", o="i", axis=0,
                      result="tensor([40., 16.])")

PM = """A parameter, shared by every pair (i, j), from a 1-D tensor or a number.

``Pm(k, D)`` is a symbolic parameter of index k (see :func:`Vi`).

Parameters
----------
p : float, torch.Tensor of shape (D,), or int
    The value, or the index k of a symbolic parameter.
dim : int, default=None
    The dimension D of a symbolic parameter (with an integer ``p``); None
    for a value.

Returns
-------
LazyTensor
    The parameter, of dimension D (1 for a number).

See Also
--------
Vi : A variable indexed by i.
Vj : A variable indexed by j.

Examples
--------
>>> import torch
>>> from kerneltools.torch import Vi, Vj, Pm
>>> x = torch.arange(6.0).reshape(3, 2).requires_grad_()
>>> K = (-Pm(0.5) * ((Vi(x) - Vj(x)) ** 2).sum()).exp()
>>> s = K.sum(dim=1)
>>> torch.round(s.detach().ravel(), decimals=2)
tensor([1.0200, 1.0400, 1.0200])
>>> torch.autograd.grad(s.sum(), x)[0].shape
torch.Size([3, 2])
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
{other} : The element-wise {other}.

Examples
--------
>>> import torch
>>> from kerneltools.torch import Vi, Vj, {what}
>>> x = torch.tensor([[0.0], [3.0]])
>>> y = torch.tensor([[1.0], [2.0]])
>>> {what}(Vi(x), Vj(y)).sum(dim=1).ravel()
{result}
"""

MINIMUM = _EXTREMUM.format(what="minimum", other="maximum", result="tensor([0., 3.])")
MAXIMUM = _EXTREMUM.format(what="maximum", other="minimum", result="tensor([3., 6.])")
