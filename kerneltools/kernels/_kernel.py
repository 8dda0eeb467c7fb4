"""The :class:`Kernel` type: a kernel ``k(x, y)`` written as a formula.

Its own module so that both the named kernels (:mod:`kerneltools.kernels`)
and the scikit-learn Gaussian-process kernels (:mod:`._gp_kernels`) build on
it without importing each other. Public as ``kerneltools.kernels.Kernel``.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..backend._arrays import is_cupy_array
from ..backend._dask import is_dask_array
from ..lazy import LazyTensor, Vi, Vj

__all__ = ["Kernel"]


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
    source : scikit-learn GP kernel, optional
        The ``sklearn.gaussian_process.kernels`` object this kernel translates,
        with the same ``theta``. Its own (vectorised NumPy) evaluation is the
        dense one, gradient included, and :meth:`with_theta` carries it: on a
        few hundred points, building and evaluating the formula costs several
        times scikit-learn's whole fit. The formula remains what
        :meth:`lazy` reduces, for the problems too large for a dense matrix.

    See Also
    --------
    make_kernel : The named kernels of scikit-learn as Kernels.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.kernels import Kernel
    >>> k = Kernel(lambda x, y, p: (-p["a"] * x.sqdist(y)).exp(),
    ...            params={"a": 0.5}, name="gauss")
    >>> k
    Kernel(gauss, a=0.5)
    >>> X = np.array([[0.0], [1.0]])
    >>> np.round(k.lazy(X).sum(axis=1).ravel(), 3)
    array([1.607, 1.607])
    """

    def __init__(self, build, *, params=None, white=(), prepare=None, name="custom",
                 free=None, dense=None, source=None):
        self.source = source
        if dense is None and source is not None:
            dense = _SourceDense(source)
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
        # Dask arrays stay lazy (reductions over chunks), CuPy arrays on the GPU
        if not (is_dask_array(X) or is_cupy_array(X)):
            X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"{self.name} kernel: X must be 2-D, got shape {X.shape}")
        return self.prepare(X) if self.prepare is not None else X

    def _param_tensors(self) -> dict:
        return {k: _as_param(v) for k, v in self.params.items()}

    def formula(self, x_i: LazyTensor, y_j: LazyTensor, params=None):
        """The formula ``k(x_i, y_j)`` (None for a kernel that is only white noise).

        Parameters
        ----------
        x_i : LazyTensor
            The i-variable (``Vi(X)``).
        y_j : LazyTensor
            The j-variable (``Vj(Y)``).
        params : dict, optional
            The hyperparameters by name, as LazyTensor parameters or floats
            (None: this kernel's ``params``).

        Returns
        -------
        LazyTensor or None
            The scalar formula, or None for a kernel that is only white noise.
        """
        return self.build(x_i, y_j, self._param_tensors() if params is None else params)

    def lazy(self, X, Y=None) -> LazyTensor:
        """``k(X, Y)`` (or ``k(X, X)`` without its white-noise diagonal) as a
        LazyTensor of shape (len(X), len(Y), 1): reduce it, never store it.

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features)
            The i-points (NumPy, CuPy or Dask arrays stay as they are).
        Y : array-like of shape (n_samples_Y, n_features), optional
            The j-points (None: ``X``).

        Returns
        -------
        LazyTensor
            The kernel matrix, symbolic, of shape (len(X), len(Y), 1).
        """
        X = self._data(X)
        Y = X if Y is None else self._data(Y)
        x_i, y_j = Vi(X), Vj(Y)
        f = self.formula(x_i, y_j)
        return _full(f, x_i, y_j)

    def without_white(self) -> Kernel:
        """This kernel without its white-noise diagonal.

        scikit-learn's pairwise kernels (``KernelRidge``, ``Nystroem``) call a
        GP kernel object as ``k(X, Y=X)``, where ``WhiteKernel`` adds nothing:
        ``KernelRidge(kernel=RBF() + WhiteKernel())`` regularises with
        ``alpha`` only. The result keeps the dense evaluation (called so).

        Returns
        -------
        Kernel
            ``self`` where there is no white noise, else a copy without it.
        """
        if not self.white:
            return self
        dense = self.dense
        if isinstance(dense, _SourceDense):
            dense = _SourceDense(dense.kernel, white=False)
        return Kernel(self.build, params=self.params, prepare=self.prepare,
                      name=self.name, free=self.free, dense=dense)

    def white_level(self) -> float:
        """The diagonal that ``k(X, X)`` adds to ``k(X, Y=X)`` (white noise).

        Returns
        -------
        float
            The white-noise level (0.0 for a kernel without white noise).
        """
        return float(sum(np.prod([_scalar(self.params[h]) for h in t]) for t in self.white))

    # -- dense evaluation, as scikit-learn's kernels ----------------------
    def __call__(self, X, Y=None, eval_gradient: bool = False):
        """The dense matrix ``k(X, Y)``; with ``eval_gradient`` (Y None), also
        its gradient with respect to ``log`` of each hyperparameter in
        :attr:`hyperparameter_names` order, shape (n, n, n_theta).

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features)
            The first points.
        Y : array-like of shape (n_samples_Y, n_features), optional
            The second points (None: ``X``, and the white noise is added to
            the diagonal).
        eval_gradient : bool, default=False
            Whether to return the gradient too (only with ``Y`` None).

        Returns
        -------
        K : ndarray of shape (n_samples_X, n_samples_Y)
            The kernel matrix.
        K_gradient : ndarray of shape (n_samples_X, n_samples_X, n_theta), optional
            Its gradient with respect to ``theta``, with ``eval_gradient`` only.
        """
        if eval_gradient and Y is not None:
            raise ValueError("eval_gradient is only supported when Y is None")
        if self.dense is not None and not eval_gradient:
            return self.dense(np.asarray(X), None if Y is None else np.asarray(Y))
        if self.source is not None and isinstance(self.dense, _SourceDense):
            return self.dense(np.asarray(X), None, eval_gradient=True)
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

        Parameters
        ----------
        x_i : LazyTensor
            The i-variable (``Vi(X)``).
        y_j : LazyTensor
            The j-variable (``Vj(Y)``).

        Returns
        -------
        list of LazyTensor or None
            One formula (or None) per free hyperparameter.
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
        """``d (white-noise level) / d log theta``, flattened like :attr:`theta`.

        Returns
        -------
        ndarray of shape (n_theta,)
            The derivative for each entry of :attr:`theta`.
        """
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
        """``k(x, x)`` for every row of X, including the white-noise level.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The points.

        Returns
        -------
        ndarray of shape (n_samples,)
            The diagonal of ``k(X, X)``.
        """
        if self.source is not None:
            return np.asarray(self.source.diag(np.asarray(X)), dtype=np.float64)
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
        """A copy whose free hyperparameters are ``exp(theta)``.

        Parameters
        ----------
        theta : array-like of shape (n_theta,)
            The ``log`` of the free hyperparameters, in :attr:`theta`'s order.

        Returns
        -------
        Kernel
            The new kernel (``self`` is unchanged).
        """
        theta = np.asarray(theta, dtype=np.float64).ravel()
        params, pos = dict(self.params), 0
        for h in self.hyperparameter_names:
            size = np.size(params[h])
            new = np.exp(theta[pos : pos + size])
            params[h] = float(new[0]) if np.ndim(self.params[h]) == 0 else new
            pos += size
        if pos != theta.size:
            raise ValueError(f"theta has {theta.size} values; this kernel has {pos}")
        if self.source is not None:  # its dense evaluation follows theta
            return Kernel(self.build, params=params, white=self.white,
                          prepare=self.prepare, name=self.name, free=self.free,
                          source=self.source.clone_with_theta(theta))
        return Kernel(self.build, params=params, white=self.white, prepare=self.prepare,
                      name=self.name, free=self.free, dense=self.dense)


class _SourceDense:
    """The dense evaluation of a scikit-learn GP kernel object: ``k(X, Y)`` in
    the dtype the formula would give (float32 data stay float32)."""

    def __init__(self, kernel, white=True):
        self.kernel = kernel
        self.white = white  # False: k(X) as k(X, X), without the white noise

    def __call__(self, X, Y=None, eval_gradient=False):
        dtype = np.result_type(X.dtype, (X if Y is None else Y).dtype, np.float32)
        if Y is None and not self.white:
            Y = X
        if eval_gradient:
            K, G = self.kernel(X, eval_gradient=True)
            return K.astype(dtype, copy=False), G
        return np.asarray(self.kernel(X, Y), dtype=dtype)


# ---------------------------------------------------------------------------
# scikit-learn's pairwise kernels (sklearn.metrics.pairwise conventions)
# ---------------------------------------------------------------------------


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
