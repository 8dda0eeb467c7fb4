"""Pickling of an estimator whose fit was handed to scikit-learn.

``fallback_`` holds an instance of scikit-learn's own class; while
:mod:`kerneltools.accel` is installed, that class's import path names ours,
so :mod:`pickle` cannot find it by name. :class:`PicklableFallback` stores
the fallback as ``(public path, state)`` and rebuilds it from
:func:`kerneltools.accel.original` on load. (It belongs with
``FallbackMixin``; kept apart here until the two are merged.)
"""

from __future__ import annotations

__all__ = ["PicklableFallback"]


class PicklableFallback:
    """Mixed in before ``FallbackMixin``: ``fallback_`` survives pickling with
    or without :mod:`kerneltools.accel` installed."""

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
