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
on its values: it costs microseconds when the engine serves the call.

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

import logging
import sys

import scipy.sparse

__all__ = ["FallbackMixin", "is_sparse"]

logger = logging.getLogger("kerneltools")


def is_sparse(X) -> bool:
    """Whether ``X`` is a SciPy sparse matrix or array."""
    return scipy.sparse.issparse(X)


def sklearn_class(path: str) -> type:
    """scikit-learn's own class at ``path``, whether ``kerneltools.accel`` is
    installed or not."""
    from .. import accel  # noqa: PLC0415 - accel imports the estimators on install

    return accel.original(path)


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
        for name, value in vars(est).items():
            if name.endswith("_") and not name.startswith("__"):
                setattr(self, name, value)
        self.fallback_ = est
        self._fallback_names = [n for n in vars(est) if n.endswith("_")]
        return self

    def _drop_fallback(self) -> None:
        """Forget a previous fit's hand-over (a refit on served input)."""
        for name in self.__dict__.pop("_fallback_names", ()):
            self.__dict__.pop(name, None)
        self.__dict__.pop("fallback_", None)

    def _delegating(self) -> bool:
        """Whether the last ``fit`` was handed to scikit-learn."""
        return "fallback_" in self.__dict__
