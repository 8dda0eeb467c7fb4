"""Hand a call the engine does not serve to scikit-learn's own estimator.

Each estimator decides, in one place per estimator (its ``_engine_refuses``
method), whether the generated reductions serve a ``fit`` with these
parameters and this input (dense float arrays, a metric or kernel we render
as a formula, ...). When they do not (sparse input, ``"precomputed"``, a
Python callable on arrays, a ``DistanceMetric`` object, a tree as ``X``, a GP
kernel the translator does not know), :meth:`FallbackMixin._fit_fallback`
fits scikit-learn's class of the same name with the same parameters, copies
its fitted attributes onto ours and keeps it in ``fallback_``; every later
method call goes to it, so results, attributes, warnings and errors are
scikit-learn's own. Each hand-over is said once per fit at ``verbose`` and
logged at DEBUG on the ``"kerneltools"`` logger.

The check runs once per ``fit`` on the parameters and the input's type, never
on its values: it costs microseconds when the engine serves the call (a
callable kernel adds one symbolic call, about 0.1 ms, to tell a formula from
a function of arrays: :func:`formula_callable_refusal`).

Usage, in an estimator::

    class KernelRidge(FallbackMixin, ...):
        _sklearn_class = "sklearn.kernel_ridge.KernelRidge"

        def _engine_refuses(self, X, y=None):
            if self.kernel == "precomputed":
                return "kernel='precomputed'"
            return None

        def fit(self, X, y, sample_weight=None):
            reason = self._engine_refuses(X, y)
            if reason:
                return self._fit_fallback(reason, X, y, sample_weight=sample_weight)
            self._drop_fallback()
            ...

        def predict(self, X):
            if self._delegating():
                return self.fallback_.predict(X)
            ...
"""

from __future__ import annotations

import copy
import logging
import sys

import numpy as np
import scipy.sparse

from ..._utils._originals import original

__all__ = ["FallbackMixin", "gp_kernel_refusal", "is_sparse", "kernel_refusal"]

logger = logging.getLogger("kerneltools")


def is_sparse(X) -> bool:
    """Whether ``X`` is a SciPy sparse matrix or array."""
    return scipy.sparse.issparse(X)


def gp_kernel_refusal(kernel) -> str | None:
    """Why the ``sklearn.gaussian_process.kernels`` object ``kernel`` has no
    formula here (a user ``Kernel`` subclass, Matern with another ``nu``, ...),
    or None when :func:`kerneltools.kernels.from_sklearn` translates it.

    Translation builds closures only (no data is touched): microseconds.
    """
    from ...kernels import from_sklearn  # noqa: PLC0415 - kernels imports scikit-learn's

    try:
        from_sklearn(kernel)
    except (TypeError, ValueError) as exc:
        return f"the kernel {kernel!r}, which has no formula here ({exc})"
    return None


def formula_callable_refusal(kernel, n_features: int, kernel_params) -> str | None:
    """Whether a callable ``kernel`` writes a formula or is scikit-learn's kind.

    kerneltools' callable kernels are ``f(x_i, y_j, **kernel_params)`` on two
    symbolic :class:`~kerneltools.LazyTensor` variables, returning a scalar
    formula; scikit-learn's are functions of two 1-D arrays (two rows)
    returning a number. They cannot be told apart by their signature, so
    ``kernel`` is called once on two symbolic variables of ``n_features``
    dimensions (placeholders of one point, on the NumPy reference backend, so
    that nothing is compiled: about 0.1 ms), with copies of the values of
    ``kernel_params`` (NumPy arrays excepted), so that state passed through
    them (a call log, a counter) does not see the probe; state reached
    otherwise (a global, a closure) does see one call. A scalar LazyTensor
    back means a formula (None is returned); anything else, or an exception
    (NumPy functions refuse LazyTensors), means a callable of arrays, and the
    reason is returned. A function that computes the same thing either way (``x * y``
    with one feature) gives the same kernel on both paths.
    """
    from ...config import config_context  # noqa: PLC0415
    from ...lazy import LazyTensor, Vi, Vj  # noqa: PLC0415

    point = np.zeros((1, max(int(n_features), 1)))
    name = getattr(kernel, "__name__", repr(kernel))
    try:
        with config_context(backend="numpy"):
            out = kernel(Vi(point), Vj(point), **_copied(kernel_params))
    except Exception as exc:  # noqa: BLE001 - any failure: not a formula callable
        return (f"the callable kernel {name!r} (a function of arrays: on LazyTensors "
                f"it raised {type(exc).__name__}: {str(exc)[:80]})")
    if isinstance(out, LazyTensor) and out.dim == 1:
        return None
    return (f"the callable kernel {name!r} (a function of arrays: on LazyTensors it "
            f"returned {type(out).__name__}, not a scalar formula)")


def _copied(params) -> dict:
    """``params`` with each value copied (arrays kept: large, and read-only in
    any sensible kernel); a value that cannot be copied is passed as it is."""
    out = {}
    for key, value in dict(params or {}).items():
        try:
            out[key] = value if isinstance(value, np.ndarray) else copy.copy(value)
        except Exception:  # noqa: BLE001 - uncopyable: the original
            out[key] = value
    return out


def kernel_refusal(kernel, X, kernel_params=None) -> str | None:
    """Why the engine cannot fit ``kernel`` (a KernelRidge or Nystroem
    ``kernel`` parameter) on ``X``, or None when it can: sparse ``X``,
    ``"precomputed"``, a GP kernel object without a formula, a callable of
    arrays (see :func:`formula_callable_refusal`). Looks at types only."""
    if is_sparse(X):
        return "sparse X"
    if isinstance(kernel, str):
        return "kernel='precomputed'" if kernel == "precomputed" else None
    from ...kernels import Kernel  # noqa: PLC0415

    if isinstance(kernel, Kernel):
        return None
    if gp_kernel_object(kernel):
        return gp_kernel_refusal(kernel)
    if callable(kernel):
        return formula_callable_refusal(kernel, _n_features(X), kernel_params)
    return None


def _n_features(X) -> int:
    """Columns of a 2-D ``X`` (1 for anything else: validation rejects it later)."""
    try:
        shape = X.shape if hasattr(X, "shape") else np.shape(X)
    except ValueError:  # a ragged list
        return 1
    return int(shape[1]) if len(shape) == 2 else 1


def gp_kernel_object(obj) -> bool:
    """Whether ``obj`` is a ``sklearn.gaussian_process.kernels`` object."""
    from sklearn.gaussian_process.kernels import Kernel  # noqa: PLC0415

    return isinstance(obj, Kernel)


def sklearn_class(path: str) -> type:
    """scikit-learn's own class at ``path``, whether ``kerneltools.accel`` is
    installed or not."""
    return original(path)


class FallbackMixin:
    """Delegation of the calls the engine does not serve to scikit-learn.

    Subclasses set ``_sklearn_class`` (the public dotted path of the
    scikit-learn class they replace) and implement ``_engine_refuses``.
    """

    _sklearn_class: str = ""

    def _engine_refuses(self, X, y=None) -> str | None:
        """Why the engine cannot serve ``fit(X, y)`` with these parameters
        (a short phrase for messages), or None when it can."""
        return None

    def _sklearn_params(self) -> dict:
        """Our parameters that scikit-learn's class also has."""
        cls = sklearn_class(self._sklearn_class)
        names = set(cls._get_param_names())
        return {k: v for k, v in self.get_params(deep=False).items() if k in names}

    def _fit_fallback(self, reason: str, *args, **kwargs):
        """Fit scikit-learn's estimator instead of ours; copy its fitted state."""
        self._drop_fallback()
        cls = sklearn_class(self._sklearn_class)
        msg = (f"{type(self).__name__}: {reason} is not served by the kerneltools "
               f"engine; fitting scikit-learn's {self._sklearn_class} instead")
        logger.debug(msg)
        if getattr(self, "verbose", 0):
            print(f"kerneltools: {msg}", file=sys.stderr, flush=True)
        est = cls(**self._sklearn_params())
        est.fit(*args, **kwargs)
        names = [n for n in vars(est) if n.endswith("_") and not n.startswith("__")
                 # a property of ours (GP's L_) reads fallback_ itself
                 and not isinstance(getattr(type(self), n, None), property)]
        for name in names:
            setattr(self, name, getattr(est, name))
        self.fallback_ = est
        self._fallback_names = names
        return self

    def _drop_fallback(self) -> None:
        """Forget a previous fit's hand-over (a refit on served input)."""
        for name in self.__dict__.pop("_fallback_names", ()):
            self.__dict__.pop(name, None)
        self.__dict__.pop("fallback_", None)

    def _delegating(self) -> bool:
        """Whether the last ``fit`` was handed to scikit-learn."""
        return "fallback_" in self.__dict__

    # Pickling: ``fallback_`` is an instance of scikit-learn's own class; while
    # kerneltools.accel is installed, that class's import path names ours, so
    # pickle cannot find it by name. It is stored as (tag, public path, state)
    # and rebuilt from scikit-learn's class (sklearn_class) on load.

    def __getstate__(self):
        state = super().__getstate__()
        est = state.get("fallback_")
        if est is not None:
            state = dict(state, fallback_=(_PICKLED_FALLBACK, self._sklearn_class,
                                           est.__getstate__()))
        return state

    def __setstate__(self, state):
        est = state.get("fallback_")
        if isinstance(est, tuple) and len(est) == 3 and est[0] == _PICKLED_FALLBACK:
            cls = sklearn_class(est[1])
            obj = cls.__new__(cls)
            obj.__setstate__(est[2])
            state = dict(state, fallback_=obj)
        super().__setstate__(state)


_PICKLED_FALLBACK = "kerneltools-fallback"
