"""The start of a ``fit`` that may go to scikit-learn.

:meth:`HandOver._hand_over` is the common prologue of the spectral
estimators' ``fit``: parameters and backend checked, then the one
engine-or-scikit-learn decision of ``FallbackMixin``.

(Pickling a hand-over, with or without :mod:`kerneltools.accel`
installed, is ``FallbackMixin``'s.)
"""

from __future__ import annotations

from ...config import check_backend
from ..._utils._param_validation import validate_params

__all__ = ["HandOver"]


class HandOver:
    """Mixed in before ``FallbackMixin``: the fit prologue."""

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

