"""Kernels as formulas: scikit-learn's pairwise kernels, its Gaussian-process
kernel objects, and user formulas, all behind one :class:`Kernel` type.

A :class:`Kernel` builds the symbolic formula ``k(x_i, y_j)`` of two point
clouds; its hyperparameters enter as run-time parameters, so that changing
``gamma`` or a length scale reuses the compiled kernel. It evaluates the way a
scikit-learn kernel does (``kernel(X, Y=None, eval_gradient=False)``, dense, for
small problems and exact solvers) and lazily (:meth:`Kernel.lazy`, a
:class:`~kerneltools.LazyTensor` to reduce, never an ``N x M`` matrix).

>>> import numpy as np
>>> from kerneltools.kernels import make_kernel
>>> X = np.random.default_rng(0).normal(size=(100, 3))
>>> k = make_kernel("rbf", gamma=0.5)
>>> a = k.lazy(X) @ np.ones(100)    # sum_j exp(-0.5 |x_i - x_j|^2)
>>> bool(np.allclose(a, k(X).sum(1)))
True

What lives here: the :class:`Kernel` type (:mod:`._kernel`) and
scikit-learn's Gaussian-process kernel objects as formulas (:mod:`._gp`).
What it may import: :mod:`kerneltools.lazy` and the engine's IR.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable

import numpy as np

from ._gp import _is_sklearn_kernel, from_sklearn, stationary_form
from ._kernel import Kernel
from ..lazy import LazyTensor

__all__ = ["PAIRWISE_KERNELS", "Kernel", "from_sklearn", "make_kernel", "stationary_form"]

#: The kernel names of ``sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS``
#: and the parameters each one takes.
PAIRWISE_KERNELS = {
    "additive_chi2": (),
    "chi2": ("gamma",),
    "cosine": (),
    "laplacian": ("gamma",),
    "linear": (),
    "poly": ("gamma", "degree", "coef0"),
    "polynomial": ("gamma", "degree", "coef0"),
    "rbf": ("gamma",),
    "sigmoid": ("gamma", "coef0"),
}


def _gamma(P, x_i):
    g = P.get("gamma")
    return 1.0 / x_i.dim if g is None else g


def _dot(x_i, y_j):
    return (x_i * y_j).sum(-1)


def _chi2_terms(x_i, y_j):
    # sum_k (x_k - y_k)^2 / (x_k + y_k); a term with x_k + y_k = 0 (so x_k = y_k
    # = 0, as inputs are >= 0) counts 0, as in scikit-learn: the denominator
    # becomes 1 there through the 0/1 comparison.
    s = x_i + y_j
    return ((x_i - y_j).square() / (s + s.eq(0.0))).sum(-1)


def _power(base, degree):
    if float(degree) == int(degree):
        return base ** int(degree)
    return base ** float(degree)


_BUILDERS: dict[str, Callable] = {
    "rbf": lambda x, y, P: (-_gamma(P, x) * x.sqdist(y)).exp(),
    "laplacian": lambda x, y, P: (-_gamma(P, x) * (x - y).abs().sum(-1)).exp(),
    "linear": lambda x, y, P: _dot(x, y),
    "cosine": lambda x, y, P: _dot(x, y),  # on rows normalised by `prepare`

    "sigmoid": lambda x, y, P: (_gamma(P, x) * _dot(x, y) + P["coef0"]).tanh(),
    "chi2": lambda x, y, P: (-P["gamma"] * _chi2_terms(x, y)).exp(),
    "additive_chi2": lambda x, y, P: -_chi2_terms(x, y),
}


def _poly(degree):
    return lambda x, y, P: _power(_gamma(P, x) * _dot(x, y) + P["coef0"], degree)

_DEFAULTS = {"gamma": None, "degree": 3, "coef0": 1.0}


def _normalize_rows(X):
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    return X / np.where(norms > 0, norms, 1)[:, None]


def _nonnegative(name):
    def check(X):
        if np.any(X < 0):
            raise ValueError(f"the {name!r} kernel needs X >= 0; X contains negative values")
        return X

    return check


_PREPARE = {"cosine": _normalize_rows, "chi2": _nonnegative("chi2"),
            "additive_chi2": _nonnegative("additive_chi2")}


def make_kernel(kernel="rbf", *, gamma=None, degree=None, coef0=None,
                kernel_params=None) -> Kernel:
    """A :class:`Kernel` from what scikit-learn's estimators accept.

    Parameters
    ----------
    kernel : str, callable, Kernel or scikit-learn GP kernel
        A name of :data:`PAIRWISE_KERNELS` (``gamma=None`` means
        ``1 / n_features``, except ``chi2`` whose default is 1, as in
        scikit-learn); a callable ``(x_i, y_j, **kernel_params) -> LazyTensor``
        that writes the kernel as a formula; a :class:`Kernel`; or an object of
        ``sklearn.gaussian_process.kernels`` (see :func:`from_sklearn`).
    gamma, degree, coef0 : float, optional
        The named kernels' parameters; each kernel reads only its own (see
        :data:`PAIRWISE_KERNELS`). None takes scikit-learn's default.
    kernel_params : dict, optional
        Keyword arguments of a callable kernel.

    Returns
    -------
    Kernel
        The kernel (``kernel`` itself if it is one).

    See Also
    --------
    from_sklearn : A Kernel from a scikit-learn GP kernel object.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.kernels import make_kernel
    >>> k = make_kernel("rbf", gamma=0.5)
    >>> k
    Kernel(rbf, gamma=0.5)
    >>> np.round(k(np.array([[0.0], [1.0]]), np.array([[0.0]])), 3)
    array([[1.   ],
           [0.607]])
    """
    if isinstance(kernel, Kernel):
        return kernel
    if isinstance(kernel, str):
        if kernel not in PAIRWISE_KERNELS:
            raise ValueError(
                f"unknown kernel {kernel!r}; valid names are "
                f"{', '.join(sorted(PAIRWISE_KERNELS))}, a callable, or a "
                "sklearn.gaussian_process.kernels object"
            )
        given = {"gamma": gamma, "degree": degree, "coef0": coef0}
        params = {}
        for p in PAIRWISE_KERNELS[kernel]:
            v = given[p] if given[p] is not None else _DEFAULTS[p]
            if kernel == "chi2" and p == "gamma" and v is None:
                v = 1.0
            params[p] = None if v is None else _check_param(v, p, kernel)
        dense = _sklearn_dense(kernel, dict(params))
        if kernel in ("poly", "polynomial"):  # an integer power is code, not a parameter
            build = _poly(params.pop("degree"))
        else:
            build = _BUILDERS[kernel]
        return Kernel(build, params=params, prepare=_PREPARE.get(kernel), name=kernel,
                      free=(), dense=dense)
    if _is_sklearn_kernel(kernel):
        return from_sklearn(kernel)
    if callable(kernel):
        extra = dict(kernel_params or {})

        def build(x_i, y_j, P, _f=kernel):
            out = _f(x_i, y_j, **extra)
            if not isinstance(out, LazyTensor) or out.dim != 1:
                raise TypeError(
                    "a callable kernel must return a scalar LazyTensor formula of "
                    f"(x_i, y_j); {getattr(_f, '__name__', _f)!r} returned {out!r}"
                )
            return out

        return Kernel(build, name=getattr(kernel, "__name__", "custom"), free=())
    raise TypeError(
        f"kernel must be a name ({', '.join(sorted(PAIRWISE_KERNELS))}), a callable, "
        f"or a sklearn.gaussian_process.kernels object; got {kernel!r}"
    )


def _sklearn_dense(kernel, params):
    """Dense evaluation by ``sklearn.metrics.pairwise_kernels``: the same numbers
    as scikit-learn's estimators (and BLAS speed) on the exact dense paths."""

    def dense(X, Y):
        from sklearn.metrics.pairwise import pairwise_kernels

        if kernel in _PREPARE and kernel != "cosine":
            _PREPARE[kernel](X)
            if Y is not None:
                _PREPARE[kernel](Y)
        given = {k: v for k, v in params.items() if v is not None and k != "degree"}
        if "gamma" in PAIRWISE_KERNELS[kernel] and given.get("gamma") is None:
            given["gamma"] = 1.0 if kernel == "chi2" else 1.0 / X.shape[1]
        if kernel in ("poly", "polynomial"):
            given["degree"] = degree
        dtype = np.result_type(X.dtype, X.dtype if Y is None else Y.dtype, np.float32)
        return pairwise_kernels(X, Y, metric=kernel, **given).astype(dtype, copy=False)

    degree = params.get("degree")
    return dense


#: What each named kernel parameter must be: (lower bound, open?, wording).
_PARAM_RULES = {
    # >= 0 as scikit-learn's estimators: gamma = 0 is the constant kernel
    "gamma": (0.0, False, "a float >= 0"),
    "degree": (0.0, False, "a float >= 0"),
    "coef0": (None, False, "a finite float"),
}


def _check_param(v, name, kernel):
    """``v`` as a float, or ValueError in scikit-learn's wording."""
    lo, open_, expected = _PARAM_RULES[name]
    ok = (isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))
          and bool(np.isfinite(v)))
    if ok and lo is not None:
        ok = v > lo if open_ else v >= lo
    if not ok:
        raise ValueError(f"The {name!r} parameter of make_kernel({kernel!r}) must be "
                         f"{expected}. Got {v!r} instead.")
    return float(v)

