"""The part that the array-library front ends share (``kerneltools.torch``,
``kerneltools.jax``): a LazyTensor over another library's arrays.

Such a LazyTensor holds the NumPy-level LazyTensor of its formula (``_lt``,
whose bindings hold placeholders or views) and the library's arrays by
formula node (its data dict, whose attribute the subclass names in
``_DATA``: ``"_tensors"`` for torch, ``"_arrays"`` for JAX, so that pickles
keep their fields). :class:`FrontEnd` forwards every symbolic method to the
NumPy LazyTensor, unwrapping the operands and merging their data
(:meth:`FrontEnd._call`); :func:`install_forwarding` puts the reduction
methods, the NumPy LazyTensor's public methods and properties and the
operators on a subclass (so that unbound calls work, as in pykeops:
``LazyTensor.exp(x)``). A subclass sets ``_DATA``, ``_LIBRARY`` (its array
type), ``_PREFIX`` (for ``repr``) and ``_root`` (the class that wraps a bare
array), and provides ``_reduce``, ``_as_data`` (an operand of ``K @ b`` as
one of its arrays), ``_concat`` (columns side by side) and ``_Vj``.
"""

from __future__ import annotations

import inspect

from . import LazyTensor as _NumpyLazyTensor
from . import maximum, minimum
from ._methods import reduction_methods
from ._symbolic import (
    MATMUL_BLOCK,
    apply,
    bindings_of,
    check_ranges,
    compose,
    lift,
    ranges_of,
)

__all__ = ["FrontEnd", "binary_fn", "install_forwarding"]

BINARY = ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
          "__truediv__", "__rtruediv__", "__pow__", "__rpow__", "__lt__", "__le__",
          "__gt__", "__ge__", "__or__", "__ror__", "__eq__", "__ne__")
UNARY = ("__neg__", "__pos__", "__abs__")


class FrontEnd:
    """A symbolic formula over a library's arrays; see the module docstring."""

    _DATA = "_tensors"
    _LIBRARY: type = type(None)
    _PREFIX = "kerneltools"
    __array_ufunc__ = None  # NumPy arrays on the left defer to our operators
    __hash__ = object.__hash__  # ``==`` builds a formula: hashing by identity

    @property
    def _data(self) -> dict:
        """The library's arrays by formula node."""
        return self.__dict__[self._DATA]

    @classmethod
    def _wrap(cls, lt, data) -> FrontEnd:
        obj = object.__new__(cls)
        obj._lt = lt
        setattr(obj, cls._DATA, {n: t for n, t in data.items()
                                 if n in bindings_of(lt)})
        return obj

    @classmethod
    def _unwrap(cls, x):
        """(NumPy-level operand, its arrays) of an operand."""
        if isinstance(x, FrontEnd):
            return x._lt, x._data
        if isinstance(x, cls._LIBRARY):
            p = cls._root(x)
            return p._lt, p._data
        return x, {}

    def _call(self, method: str, *args, **kwargs):
        data = dict(self._data)
        unwrapped = []
        for a in args:
            u, t = self._unwrap(a)
            unwrapped.append(u)
            data.update(t)
        for k, v in list(kwargs.items()):
            kwargs[k], t = self._unwrap(v)
            data.update(t)
        out = getattr(self._lt, method)(*unwrapped, **kwargs)
        return self._wrap(out, data) if isinstance(out, _NumpyLazyTensor) else out

    # Symbolic methods and properties: those of the NumPy LazyTensor.
    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        attr = getattr(self._lt, name)
        if not callable(attr):
            return attr
        return lambda *args, **kwargs: self._call(name, *args, **kwargs)

    @property
    def ranges(self):
        """The block-sparsity that reductions (and their gradients) use when not
        given ``ranges=``; see :attr:`kerneltools.LazyTensor.ranges`."""
        return ranges_of(self._lt)

    @ranges.setter
    def ranges(self, value):
        self._lt = self._lt.with_ranges(check_ranges(value))

    def __repr__(self) -> str:
        return f"{self._PREFIX}.{self._lt!r}"

    def __bool__(self):
        raise TypeError("the truth value of a LazyTensor is undefined")

    def __getitem__(self, k):
        return self._call("__getitem__", k)

    def t(self) -> FrontEnd:
        """Swap the roles of i and j (the same arrays, so gradients flow).

        Returns
        -------
        LazyTensor
            The formula with i and j swapped, of this front end's type.
        """
        out = self._lt.t()
        # t() makes new variables bound to the same Binding objects
        old = {id(b): n for n, b in bindings_of(self._lt).items()}
        data = {new: self._data[old[id(b)]] for new, b in bindings_of(out).items()
                if old.get(id(b)) in self._data}
        return self._wrap(out, data)

    @property
    def T(self) -> FrontEnd:
        return self.t()

    def _apply(self, op: str) -> FrontEnd:
        return self._wrap(apply(self._lt, op), self._data)

    def _compose(self, fn, *others) -> FrontEnd:
        """A composite (a function of formula nodes) of ``self`` and ``others``."""
        data, parts = dict(self._data), []
        for o in others:
            u, t = self._unwrap(o)
            parts.append(u)
            data.update(t)
        return self._wrap(compose(self._lt, fn, *parts), data)

    def __matmul__(self, b, **options):
        """``K @ b``: ``sum_j K_ij b_j`` for a scalar formula K and an array b
        (M,), (M, E) or batched (B..., M, E); ``K.__matmul__(b, **options)``
        takes the reductions' keywords, as in pykeops."""
        return self.matmul(b, **options)

    def matmul(self, b, *, backend=None, **options):
        """``K @ b`` on ``backend``, with the reductions' keywords.

        Parameters
        ----------
        b : array_like
            The right operand, (M,), (M, E) or batched (B..., M, E), an array
            of this front end (a tensor or a ``jax.Array``).
        backend : str, optional
            The backend (``None``: the configured one).
        **options : dict
            The reduction's options (``ranges=``, ``dtype_acc=``, ...).

        Returns
        -------
        Tensor or jax.Array
            ``K @ b``: (N,), (N, E) or (B..., N, E), differentiable.
        """
        if self.dim != 1:
            raise ValueError(f"K @ b needs a scalar formula K, got dimension {self.dim}")
        b = self._as_data(b)
        if b.ndim >= 3 or self.batch:  # batched: (B..., M, E) or (M, E)
            bj = b if b.ndim >= 2 else b[:, None]
            out = (self * self._Vj(bj))._reduce("Sum", 1, backend=backend, **options)
            return out[..., 0] if b.ndim == 1 else out
        b2 = b.reshape(b.shape[0], -1)
        cols = [(self * self._Vj(b2[:, c0:c0 + MATMUL_BLOCK]))._reduce(
            "Sum", 1, backend=backend, **options)
            for c0 in range(0, b2.shape[1], MATMUL_BLOCK)]
        out = cols[0] if len(cols) == 1 else self._concat(cols)
        return out[:, 0] if b.ndim == 1 else out

    def _weight_and_data(self, weight, options):
        """The weight of a reduction as a front-end LazyTensor (or None) and
        the arrays of ``self`` and the weight; ``options`` get the formula's
        own ``ranges`` where the call gives none."""
        W, data = None, dict(self._data)
        if weight is not None:
            u, t = self._unwrap(weight)
            W = self._root._wrap(lift(_NumpyLazyTensor, u), t)
            data.update(W._data)
        if options.get("ranges") is None:
            options.pop("ranges", None)
            if ranges_of(self._lt) is not None:
                options["ranges"] = ranges_of(self._lt)
        return W, data


def _forward_method(name):
    def method(self, *args, **kwargs):
        return self._call(name, *args, **kwargs)
    original = getattr(_NumpyLazyTensor, name)
    method.__name__, method.__doc__ = name, original.__doc__
    # help() and the API pages show the parameters the docstring describes
    method.__signature__ = inspect.signature(original)
    return method


def _forward_property(name):
    def get(self):
        v = getattr(self._lt, name)
        return self._wrap(v, self._data) if isinstance(v, _NumpyLazyTensor) else v
    return property(get, doc=getattr(_NumpyLazyTensor, name).__doc__)


def _forward_operator(name):
    if name in UNARY:
        def op(self):
            return self._call(name)
    else:
        def op(self, other):
            return self._call(name, other)
    op.__name__ = name
    return op


def install_forwarding(cls) -> None:
    """The reduction methods, the NumPy LazyTensor's other public methods and
    properties, and the operators, on the front end's class ``cls``."""
    for method, fn in reduction_methods().items():
        setattr(cls, method, fn)
    for name in dir(_NumpyLazyTensor):
        if name.startswith("_") or hasattr(cls, name):
            continue
        if isinstance(inspect.getattr_static(_NumpyLazyTensor, name), property):
            setattr(cls, name, _forward_property(name))
        elif callable(getattr(_NumpyLazyTensor, name)):
            setattr(cls, name, _forward_method(name))
    for name in BINARY + UNARY:
        setattr(cls, name, _forward_operator(name))


def binary_fn(cls, a, b, fn: str):
    """``minimum`` / ``maximum`` (``fn``) of two operands of the front end ``cls``."""
    ua, ta = cls._unwrap(a)
    ub, tb = cls._unwrap(b)
    op = {"minimum": minimum, "maximum": maximum}[fn]
    return cls._wrap(op(ua, ub), {**ta, **tb})
