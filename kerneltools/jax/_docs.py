"""The docstrings of ``kerneltools.jax``'s constructors and functions.

Kept apart from ``jax/__init__.py`` as in ``kerneltools.lazy`` and
``kerneltools.torch``; ``__init__`` assigns each to its function's
``__doc__`` (the API reference, ``help()`` and the doctests read them from
there).
"""

_VARIABLE = """A variable indexed by {i} from an ({N}, D) or ({N},) array.

With leading batch axes, (B..., {N}, D), each batch is reduced on its own
(as ``jax.vmap`` would). Reductions are differentiable with respect to the
array (``jax.grad``).

Parameters
----------
x : jax.Array or array-like of shape ({N}, D), ({N},) or (B..., {N}, D)
    The data.

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
>>> import jax.numpy as jnp
>>> from kerneltools.jax import Vi, Vj
>>> x = jnp.arange(6.0).reshape(3, 2)
>>> y = jnp.arange(4.0).reshape(2, 2)
>>> D = ((Vi(x) - Vj(y)) ** 2).sum()
>>> print(D.sum(axis={axis}).ravel())
{result}
"""

VI = _VARIABLE.format(i="i", N="N", other="Vj", o="j", axis=1, result="[ 8.  8. 40.]")
VJ = _VARIABLE.format(i="j", N="M", other="Vi", o="i", axis=0, result="[40. 16.]")

PM = """A parameter, shared by every pair (i, j), from a 1-D array or a number.

A Python number is a constant, not differentiated; a ``jax.Array`` is.

Parameters
----------
p : jax.Array of shape (D,) or float
    The value.

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
>>> import jax
>>> import jax.numpy as jnp
>>> from kerneltools.jax import Vi, Vj, Pm
>>> x = jnp.arange(6.0).reshape(3, 2)
>>> def total(s):
...     K = (-Pm(s) * ((Vi(x) - Vj(x)) ** 2).sum()).exp()
...     return K.sum(axis=1).sum()
>>> print(jnp.round(jax.grad(total)(jnp.array([0.5])), 3))
[-0.586]
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
>>> import jax.numpy as jnp
>>> from kerneltools.jax import Vi, Vj, {what}
>>> x = jnp.array([[0.0], [3.0]])
>>> y = jnp.array([[1.0], [2.0]])
>>> print({what}(Vi(x), Vj(y)).sum(axis=1).ravel())
{result}
"""

MINIMUM = _EXTREMUM.format(what="minimum", other="maximum", result="[0. 3.]")
MAXIMUM = _EXTREMUM.format(what="maximum", other="minimum", result="[3. 6.]")

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

Examples
--------
>>> import jax.numpy as jnp
>>> from kerneltools.jax import LazyTensor
>>> x = jnp.arange(6.0).reshape(3, 2)
>>> D_ij = ((LazyTensor(x[:, None, :]) - LazyTensor(x[None, :, :])) ** 2).sum(-1)
>>> print(D_ij.sum(axis=1).ravel())
[40. 16. 40.]
"""
