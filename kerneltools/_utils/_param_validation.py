"""Parameter constraints of the estimators, checked with scikit-learn's wording.

Every estimator declares, as scikit-learn's do, a class attribute
``_parameter_constraints``: a dict from each constructor parameter to the
list of constraints its value may satisfy (any one of them), and calls
:func:`validate_params` at the start of ``fit``. Functions with keyword
parameters declare such a dict too and call :func:`validate_arguments`.
scikit-learn's machinery is private (``sklearn.utils._param_validation``), so
this is a small one of our own, with the same constraint spellings and the
same error message::

    The 'alpha' parameter of KernelRidge must be a float in the range
    [0.0, inf) or an array-like. Got -1 instead.

A constraint is one of:

- ``Interval(Integral or Real, left, right, closed=...)``: numbers in a
  range; a bound of None is infinite, and ``closed`` ("left", "right",
  "both" or "neither") says which bounds belong to it, infinite ones
  included (``[0.0, inf)`` excludes inf, ``[0.0, inf]`` takes it). NaN never
  does. Unlike scikit-learn's, a bool is not a number here.
- ``StrOptions({...})``: one of these strings; ``Options(type, {...})``: one
  of these values of that type; ``Dtypes({...})``: a dtype of these names.
- a type: an instance of it (``dict``, a scikit-learn ``Kernel``; never a
  bool for ``numbers.Integral`` or ``numbers.Real``).
- ``None``, and the built-in ``callable`` (any callable).
- the names ``"array-like"``, ``"boolean"`` (bool or ``numpy.bool``),
  ``"verbose"`` (an int >= 0 or a boolean), ``"random_state"`` (an int in
  ``[0, 2**32 - 1]``, a ``RandomState`` or None) and ``"backend"`` (one of
  :data:`BACKEND_NAMES` or None, for the configured default).

``"no_validation"`` in place of the list leaves a parameter unchecked.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

# The names every estimator's ``backend`` accepts (with None, the configured
# default): the engine's own list, public as kerneltools.config.BACKEND_NAMES.
from ..config import BACKEND_NAMES

__all__ = [
    "BACKEND_NAMES",
    "Dtypes",
    "Interval",
    "InvalidParameterError",
    "Options",
    "StrOptions",
    "validate_arguments",
    "validate_params",
]


class InvalidParameterError(ValueError, TypeError):
    """A parameter of the wrong type or value, as scikit-learn's: both a
    ``ValueError`` and a ``TypeError``, so that either ``except`` catches it."""


def _is_bool(v) -> bool:
    return isinstance(v, (bool, np.bool_))


def _type_name(t: type) -> str:
    """scikit-learn's name of a type in messages ('int', 'numpy.bool', ...)."""
    if t is numbers.Integral:
        return "int"
    if t is numbers.Real:
        return "float"
    if t.__module__ == "builtins":
        return t.__qualname__
    return f"{t.__module__}.{t.__qualname__}"


def _sorted(values) -> list:
    """A set's values in a fixed order (scikit-learn prints its sets in their
    iteration order, which varies between runs)."""
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=repr)


@dataclass(frozen=True)
class Interval:
    """Numbers of ``kind`` (``numbers.Integral`` or ``numbers.Real``) in a range."""

    kind: type
    left: float | None
    right: float | None
    closed: str = "left"

    def __post_init__(self):
        if self.kind not in (numbers.Integral, numbers.Real):
            raise ValueError(f"Interval: kind must be Integral or Real: {self.kind}")
        if self.closed not in ("left", "right", "both", "neither"):
            raise ValueError(f"Interval: unknown closed={self.closed!r}")

    def is_satisfied_by(self, v) -> bool:
        if _is_bool(v) or not isinstance(v, self.kind):
            return False
        lo = -np.inf if self.left is None else self.left
        hi = np.inf if self.right is None else self.right
        above = v >= lo if self.closed in ("left", "both") else v > lo
        below = v <= hi if self.closed in ("right", "both") else v < hi
        return bool(above and below)  # False for NaN: both comparisons fail

    def __str__(self):
        real = self.kind is numbers.Real

        def bound(b, inf):
            if b is None:
                return inf
            return str(float(b)) if real else str(b)

        lb = "[" if self.closed in ("left", "both") else "("
        rb = "]" if self.closed in ("right", "both") else ")"
        return (f"{'a float' if real else 'an int'} in the range "
                f"{lb}{bound(self.left, '-inf')}, {bound(self.right, 'inf')}{rb}")


class Options:
    """One of a set of values of type ``kind``."""

    def __init__(self, kind: type, options):
        self.kind = kind
        # listed in the order given, or sorted if given as a set
        given = _sorted(options) if isinstance(options, (set, frozenset)) else options
        self.options = tuple(dict.fromkeys(given))

    def is_satisfied_by(self, v) -> bool:
        if _is_bool(v) and self.kind is not bool:
            return False
        return isinstance(v, self.kind) and v in self.options

    def __str__(self):
        listed = ", ".join(repr(o) for o in self.options)
        return f"a {_type_name(self.kind)} among {{{listed}}}"


class StrOptions(Options):
    """One of a set of strings."""

    def __init__(self, options):
        super().__init__(str, options)


class Dtypes:
    """A dtype (a NumPy type, a ``np.dtype`` or its name) among ``names``."""

    def __init__(self, names):
        self.names = tuple(_sorted(set(names)))

    def is_satisfied_by(self, v) -> bool:
        if v is None:
            return False
        try:
            return np.dtype(v).name in self.names
        except TypeError:
            return False

    def __str__(self):
        return f"a dtype among {{{', '.join(map(repr, self.names))}}}"


class _InstanceOf:
    def __init__(self, kind: type):
        self.kind = kind

    def is_satisfied_by(self, v) -> bool:
        if _is_bool(v) and self.kind in (numbers.Integral, numbers.Real):
            return False
        return isinstance(v, self.kind)

    def __str__(self):
        return f"an instance of {_type_name(self.kind)!r}"


class _Described:
    """A constraint given by a predicate and its description."""

    def __init__(self, test, text: str):
        self.test, self.text = test, text

    def is_satisfied_by(self, v) -> bool:
        return bool(self.test(v))

    def __str__(self):
        return self.text


def _is_array_like(v) -> bool:
    """scikit-learn's array-like: a sequence or an array, not a scalar or str."""
    has = hasattr(v, "__len__") or hasattr(v, "shape") or hasattr(v, "__array__")
    return has and not np.isscalar(v)


_NONE = _Described(lambda v: v is None, "None")
_BOOLEANS = [_InstanceOf(bool), _InstanceOf(np.bool_)]
#: The names that stand for constraints (some for several).
_NAMED = {
    "array-like": [_Described(_is_array_like, "an array-like")],
    "boolean": _BOOLEANS,
    "verbose": [Interval(numbers.Integral, 0, None, closed="left"), *_BOOLEANS],
    "random_state": [
        Interval(numbers.Integral, 0, 2**32 - 1, closed="both"),
        _InstanceOf(np.random.RandomState),
        _NONE,
    ],
    "backend": [StrOptions(BACKEND_NAMES), _NONE],
}


def _expand(constraint) -> list:
    """The constraint objects that ``constraint`` (as written in a table) means."""
    if constraint is None:
        return [_NONE]
    if constraint is callable:
        return [_Described(callable, "a callable")]
    if isinstance(constraint, str):
        if constraint not in _NAMED:
            raise ValueError(f"unknown parameter constraint {constraint!r}")
        return _NAMED[constraint]
    if isinstance(constraint, type):
        return [_InstanceOf(constraint)]
    if not hasattr(constraint, "is_satisfied_by"):
        raise TypeError(f"not a parameter constraint: {constraint!r}")
    return [constraint]


def _check(name: str, value, constraints, owner: str) -> None:
    if isinstance(constraints, str) and constraints == "no_validation":
        return
    expanded = [c for spelled in constraints for c in _expand(spelled)]
    if any(c.is_satisfied_by(value) for c in expanded):
        return
    texts = [str(c) for c in expanded]
    allowed = texts[0] if len(texts) == 1 else f"{', '.join(texts[:-1])} or {texts[-1]}"
    raise InvalidParameterError(
        f"The {name!r} parameter of {owner} must be {allowed}. Got {value!r} instead."
    )


def validate_params(estimator) -> None:
    """Check the constructor parameters of ``estimator`` (at ``fit``) against
    its class's ``_parameter_constraints``; raise :class:`InvalidParameterError`
    for the first one that satisfies none of its constraints."""
    owner = type(estimator).__name__
    for name, constraints in type(estimator)._parameter_constraints.items():
        _check(name, getattr(estimator, name), constraints, owner)


def validate_arguments(constraints: dict, caller: str, /, **values) -> None:
    """Check keyword arguments of the function ``caller`` against
    ``constraints`` (a dict as ``_parameter_constraints``)."""
    for name, value in values.items():
        _check(name, value, constraints[name], caller)
