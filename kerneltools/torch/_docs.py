"""The docstrings of ``kerneltools.torch``'s constructors and functions.

Kept here so that ``torch/__init__.py`` stays within the layout's line
limit; ``__init__`` assigns each to its function's ``__doc__`` (the API
reference, ``help()`` and the doctests read them from there); the sections
they share with ``kerneltools.lazy`` are its templates.
"""

import numpy as _np

from ..lazy._docs import (
    Front,
    extremum_docs,
    lazy_tensor_examples,
    parameter_doc,
    variable_docs,
)

TORCH = Front("kerneltools.torch", "import torch", "torch.arange", "torch.tensor", "dim",
              "{}", lambda v: repr(_np.array(v)).replace("array", "tensor"))


VI, VJ = variable_docs("""A variable indexed by {i} from an ({N}, D) or ({N},) tensor.

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
""", TORCH)

PM = parameter_doc("""A parameter, shared by every pair (i, j), from a 1-D tensor or a number.

``Pm(k, D)`` is a symbolic parameter of index k (see :func:`Vi`).

Parameters
----------
p : float, torch.Tensor of shape (D,), or int
    The value, or the index k of a symbolic parameter.
dim : int, default=None
    The dimension D of a symbolic parameter (with an integer ``p``); None
    for a value.
""", """Examples
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
""")

MINIMUM, MAXIMUM = extremum_docs(TORCH)

LAZY_TENSOR_EXAMPLES = lazy_tensor_examples(TORCH, "    ")
