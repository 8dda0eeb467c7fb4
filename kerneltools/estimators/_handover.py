"""The start of a ``fit`` that may go to scikit-learn, and its pickling.

:meth:`HandOver._hand_over` is the common prologue of the spectral
estimators' ``fit``: parameters and backend checked, then the one
engine-or-scikit-learn decision of ``FallbackMixin``.

Pickling: 
``fallback_`` holds an instance of scikit-learn's own class; while
:mod:`kerneltools.accel` is installed, that class's import path names ours,
so :mod:`pickle` cannot find it by name. :class:`PicklableFallback` stores
the fallback as ``(public path, state)`` and rebuilds it from
:func:`kerneltools.accel.original` on load. (It belongs with
``FallbackMixin``; kept apart here until the two are merged.)
"""

from __future__ import annotations

from ..config import check_backend
from ._param_validation import validate_params

__all__ = ["HandOver"]


class HandOver:
    """Mixed in before ``FallbackMixin``: the fit prologue, and a
    ``fallback_`` that survives pickling with or without
    :mod:`kerneltools.accel` installed."""

    def _hand_over(self, X) -> bool:
        """Check the parameters and the backend; fit scikit-learn's class
        instead when the engine refuses ``X`` (True), else forget any earlier
        hand-over (False)."""
        validate_params(self)
        check_backend(self.backend, type(self).__name__)
        reason = self._engine_refuses(X)
        if reason:
            self._fit_fallback(reason, X)
            return True
        self._drop_fallback()
        return False

    def __getstate__(self):
        state = super().__getstate__()
        est = state.get("fallback_")
        if est is not None:
            state = dict(state)
            state["fallback_"] = (_FALLBACK_TAG, self._sklearn_class, est.__getstate__())
        return state

    def __setstate__(self, state):
        est = state.get("fallback_")
        if isinstance(est, tuple) and len(est) == 3 and est[0] == _FALLBACK_TAG:
            from .. import accel  # noqa: PLC0415 - accel imports the estimators

            cls = accel.original(est[1])
            obj = cls.__new__(cls)
            obj.__setstate__(est[2])
            state = dict(state, fallback_=obj)
        super().__setstate__(state)


_FALLBACK_TAG = "kerneltools-fallback"
