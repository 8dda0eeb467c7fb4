"""The docstrings of ``kerneltools.jax``'s constructors and functions.

Kept apart from ``jax/__init__.py`` as in ``kerneltools.lazy`` and
``kerneltools.torch``; ``__init__`` assigns each to its function's
``__doc__`` (the API reference, ``help()`` and the doctests read them from
there); the sections they share with ``kerneltools.lazy`` are its
templates.
"""

import numpy as _np

from ..lazy._docs import (
    Front,
    extremum_docs,
    lazy_tensor_examples,
    parameter_doc,
    variable_docs,
)

JAX = Front("kerneltools.jax", "import jax.numpy as jnp", "jnp.arange", "jnp.array",
            "axis", "print({})", lambda v: str(_np.array(v)))


VI, VJ = variable_docs("""A variable indexed by {i} from an ({N}, D) or ({N},) array.

With leading batch axes, (B..., {N}, D), each batch is reduced on its own
(as ``jax.vmap`` would). Reductions are differentiable with respect to the
array (``jax.grad``).

Parameters
----------
x : jax.Array or array-like of shape ({N}, D), ({N},) or (B..., {N}, D)
    The data.
""", JAX)

PM = parameter_doc("""A parameter, shared by every pair (i, j), from a 1-D array or a number.

A Python number is a constant, not differentiated; a ``jax.Array`` is.

Parameters
----------
p : jax.Array of shape (D,) or float
    The value.
""", """Examples
--------
>>> import jax
>>> import jax.numpy as jnp
>>> from kerneltools.jax import Vi, Vj, Pm
>>> x = jnp.arange(6.0).reshape(3, 2)
>>> def total(s):
...     K = (-Pm(s) * ((Vi(x) - Vj(x)) ** 2).sum()).exp()
...     return K.sum(axis=1).sum()
>>> print(jnp.round(jax.grad(total)(jnp.array([0.5])), 3))
[-0.586]
""")

MINIMUM, MAXIMUM = extremum_docs(JAX)

KERNEL = """A kernel of :mod:`kerneltools.kernels` on JAX arrays, as a LazyTensor.

``k(X_i, Y_j)``, with ``params`` overriding the kernel's hyperparameters
(``gamma=``, ``length_scale=``, ...); given as JAX arrays, they are
differentiable (a GP's marginal likelihood by ``jax.grad``).

Parameters
----------
k : str, Kernel or scikit-learn GP kernel
    A name such as ``"rbf"``, a :class:`~kerneltools.kernels.Kernel`, or a
    ``sklearn.gaussian_process.kernels`` object.
X : jax.Array of shape (N, D)
    The points indexed by i.
Y : jax.Array of shape (M, D), default=None
    The points indexed by j (None: X).
**params : dict
    Hyperparameter values by name (numbers or JAX arrays).

Returns
-------
LazyTensor
    The kernel matrix, of shape (N, M), unevaluated.

Examples
--------
>>> import jax.numpy as jnp
>>> from kerneltools.jax import kernel
>>> x = jnp.arange(6.0).reshape(3, 2)
>>> print(jnp.round(kernel("rbf", x, gamma=0.5).sum(axis=1).ravel(), 2))
[1.02 1.04 1.02]
"""

LAZY_TENSOR = """A symbolic ``(N, M, D)`` formula over JAX arrays (see the module).

Parameters
----------
x : jax.Array, array-like or number
    As for :class:`kerneltools.LazyTensor`, with ``jax.Array`` s (or NumPy
    arrays and numbers) as data.
axis : {0, 1}, optional
    Only for 2-D data: indexed by i (0) or by j (1).

""" + lazy_tensor_examples(JAX)
