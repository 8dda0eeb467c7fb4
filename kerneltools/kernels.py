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
"""

from __future__ import annotations

import numbers
from collections.abc import Callable

import numpy as np

from ._dask import is_dask_array
from .lazy import LazyTensor, Vi, Vj

__all__ = ["PAIRWISE_KERNELS", "Kernel", "from_sklearn", "make_kernel"]

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


class Kernel:
    """A kernel ``k(x, y)`` written as a formula over LazyTensors.

    Parameters
    ----------
    build : callable
        ``build(x_i, y_j, params) -> LazyTensor`` (a scalar formula) or None
        for the zero kernel. ``params`` maps each hyperparameter name to a
        LazyTensor parameter (or a Python float).
    params : dict, optional
        Hyperparameter values by name: floats or 1-D arrays.
    white : sequence of tuples of names, optional
        A diagonal term ``sum_t prod_{h in t} params[h]`` added to ``k(X, X)``
        (never to ``k(X, Y)``), as scikit-learn's ``WhiteKernel``.
    prepare : callable, optional
        Applied to each data array before it enters the formula (the cosine
        kernel normalises rows there, so that zero rows stay zero).
    name : str
        Shown in ``repr`` and in error messages.
    free : sequence of str, optional
        The hyperparameters that :attr:`theta` holds, in its order (default:
        all of ``params``).
    dense : callable, optional
        ``dense(X, Y) -> array``, a faster dense evaluation of the same kernel
        (the named kernels use scikit-learn's BLAS-based pairwise kernels).
    """

    def __init__(self, build, *, params=None, white=(), prepare=None, name="custom",
                 free=None, dense=None):
        self.dense = dense
        self.build = build
        self.params = dict(params or {})
        self.white = tuple(tuple(t) for t in white)
        self.prepare = prepare
        self.name = name
        self.free = tuple(self.params if free is None else free)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={_short(v)}" for k, v in self.params.items())
        return f"Kernel({self.name}{', ' if shown else ''}{shown})"

    # -- formulas ---------------------------------------------------------
    def _data(self, X):
        if not is_dask_array(X):  # Dask arrays stay lazy (reductions over chunks)
            X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"{self.name} kernel: X must be 2-D, got shape {X.shape}")
        return self.prepare(X) if self.prepare is not None else X

    def _param_tensors(self) -> dict:
        return {k: _as_param(v) for k, v in self.params.items()}

    def formula(self, x_i: LazyTensor, y_j: LazyTensor, params=None):
        """The formula ``k(x_i, y_j)`` (None for a kernel that is only white noise)."""
        return self.build(x_i, y_j, self._param_tensors() if params is None else params)

    def lazy(self, X, Y=None) -> LazyTensor:
        """``k(X, Y)`` (or ``k(X, X)`` without its white-noise diagonal) as a
        LazyTensor of shape (len(X), len(Y), 1): reduce it, never store it."""
        X = self._data(X)
        Y = X if Y is None else self._data(Y)
        x_i, y_j = Vi(X), Vj(Y)
        f = self.formula(x_i, y_j)
        return _full(f, x_i, y_j)

    def white_level(self) -> float:
        """The diagonal that ``k(X, X)`` adds to ``k(X, Y=X)`` (white noise)."""
        return float(sum(np.prod([_scalar(self.params[h]) for h in t]) for t in self.white))

    # -- dense evaluation, as scikit-learn's kernels ----------------------
    def __call__(self, X, Y=None, eval_gradient: bool = False):
        """The dense matrix ``k(X, Y)``; with ``eval_gradient`` (Y None), also
        its gradient with respect to ``log`` of each hyperparameter in
        :attr:`hyperparameter_names` order, shape (n, n, n_theta)."""
        if eval_gradient and Y is not None:
            raise ValueError("eval_gradient is only supported when Y is None")
        if self.dense is not None and not eval_gradient:
            return self.dense(np.asarray(X), None if Y is None else np.asarray(Y))
        Xp = self._data(X)
        Yp = Xp if Y is None else self._data(Y)
        x_i, y_j = Vi(Xp), Vj(Yp)
        tensors = self._param_tensors()
        f = self.formula(x_i, y_j, tensors)
        if f is None:
            K = np.zeros((len(Xp), len(Yp)), dtype=_dtype(Xp, Yp, f))
        else:
            K = np.ascontiguousarray(_full(f, x_i, y_j).to_dense()[..., 0])
        if Y is None and self.white:
            K[np.diag_indices_from(K)] += self.white_level()
        if not eval_gradient:
            return K
        grads = [self._dense_gradient(name, f, tensors, x_i, y_j) for name in self.hyperparameter_names]
        G = np.concatenate(grads, axis=2) if grads else np.empty(K.shape + (0,))
        return K, G

    def log_gradient(self, x_i: LazyTensor, y_j: LazyTensor):
        """Formulas of ``d k(x_i, y_j) / d log h`` for each free hyperparameter h.

        Returns a list, in :attr:`hyperparameter_names` order, of formulas of
        dimension ``size(h)`` (None where ``k``'s formula does not involve h),
        from the symbolic gradient rules: ``h * dk/dh``.
        """
        tensors = self._param_tensors()
        f = self.formula(x_i, y_j, tensors)
        out = []
        for name in self.hyperparameter_names:
            if f is None or not _depends_on(f, tensors[name]):
                out.append(None)
                continue
            value = self.params[name]
            scale = float(value) if np.ndim(value) == 0 else LazyTensor(
                np.asarray(value, dtype=np.float64))
            out.append(f.grad(tensors[name], 1.0) * scale)
        return out

    def white_log_gradient(self) -> np.ndarray:
        """``d (white-noise level) / d log theta``, flattened like :attr:`theta`."""
        parts = []
        for name in self.hyperparameter_names:
            g = np.zeros(np.size(self.params[name]))
            for term in self.white:
                if name in term:
                    g += np.prod([_scalar(self.params[h]) for h in term]) * term.count(name)
            parts.append(g)
        return np.concatenate(parts) if parts else np.empty(0)

    def _dense_gradient(self, name, f, tensors, x_i, y_j) -> np.ndarray:
        value = np.atleast_1d(np.asarray(self.params[name], dtype=np.float64))
        n = x_i.shape[0]
        G = np.zeros((n, n, value.size))
        if f is not None and _depends_on(f, tensors[name]):
            # d k / d log(h) = h * d k / d h, from the symbolic gradient rules.
            G += _full(f.grad(tensors[name], 1.0), x_i, y_j).to_dense() * value
        for term in self.white:
            if name in term:
                level = np.prod([_scalar(self.params[h]) for h in term])
                G[np.arange(n), np.arange(n)] += level * term.count(name)
        return G

    def diag(self, X) -> np.ndarray:
        """``k(x, x)`` for every row of X, including the white-noise level."""
        Xp = self._data(X)
        f = self.formula(Vi(Xp), Vi(Xp))
        d = np.zeros(len(Xp))
        if f is not None:
            d = d + np.broadcast_to(f.to_dense()[:, 0, 0], (len(Xp),))
        return d + self.white_level()

    # -- hyperparameters ---------------------------------------------------
    @property
    def hyperparameter_names(self) -> list[str]:
        """Names of the free hyperparameters, in the order of :attr:`theta`."""
        return list(self.free)

    @property
    def theta(self) -> np.ndarray:
        """``log`` of the free hyperparameters, flattened (scikit-learn's theta)."""
        vals = [np.atleast_1d(np.asarray(self.params[h], float)) for h in self.hyperparameter_names]
        return np.log(np.concatenate(vals)) if vals else np.empty(0)

    def with_theta(self, theta) -> Kernel:
        """A copy whose free hyperparameters are ``exp(theta)``."""
        theta = np.asarray(theta, dtype=np.float64).ravel()
        params, pos = dict(self.params), 0
        for h in self.hyperparameter_names:
            size = np.size(params[h])
            new = np.exp(theta[pos : pos + size])
            params[h] = float(new[0]) if np.ndim(self.params[h]) == 0 else new
            pos += size
        if pos != theta.size:
            raise ValueError(f"theta has {theta.size} values; this kernel has {pos}")
        return Kernel(self.build, params=params, white=self.white, prepare=self.prepare,
                      name=self.name, free=self.free, dense=self.dense)


# ---------------------------------------------------------------------------
# scikit-learn's pairwise kernels (sklearn.metrics.pairwise conventions)
# ---------------------------------------------------------------------------
def _gamma(P, x_i):
    g = P.get("gamma")
    return 1.0 / x_i.shape[2] if g is None else g


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


# Gaussian-process kernels come from a sibling module (kept apart for size).
from ._gp_kernels import _is_sklearn_kernel, from_sklearn


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------
def _as_param(v):
    if v is None:
        return None
    if isinstance(v, numbers.Real) and not isinstance(v, np.ndarray):
        return LazyTensor(float(v))  # weakly typed: float32 data stays float32
    return LazyTensor(np.atleast_1d(np.asarray(v, dtype=np.float64)))


def _scalar(v) -> float:
    return float(np.asarray(v).ravel()[0])


def _short(v):
    return f"{v:.4g}" if isinstance(v, float) else repr(v)


def _full(f, x_i, y_j):
    """``f`` with both an i and a j axis (a formula of the parameters only, such
    as a constant kernel, is broadcast over the pairs)."""
    if f is None:
        f = 0.0 * (x_i - y_j).sum(-1)
    missing = []
    if f.ni is None:
        missing.append(x_i)
    if f.nj is None:
        missing.append(y_j)
    for v in missing:
        f = f + 0.0 * v.sum(-1)
    return f


def _depends_on(f, p) -> bool:
    return isinstance(p, LazyTensor) and p.formula in f._bindings


def _dtype(X, Y, f):
    if f is not None:
        return f.dtype
    return np.result_type(X.dtype, Y.dtype, np.float32)
