"""GaussianProcessRegressor on Array API arrays: where its fitted arrays
live, which solver runs where, and the way back (:mod:`._array_api`'s rules).

A mixin of :class:`~kerneltools.estimators.GaussianProcessRegressor`. The fit
keeps its arrays in the compute space (``_X_fit``, ``_y_fit``, ``_alpha_fit``,
``_L``: NumPy on the host, device arrays on a GPU) and publishes them in the
input's namespace and device (``X_train_``, ``y_train_``, ``alpha_``,
``L_``: the same objects on the NumPy path). ``_space`` (the compute space)
and the device copies are dropped when pickled and rebuilt from ``X_train_``.
"""

from __future__ import annotations

import numpy as np

from ...kernels import make_kernel
from . import _device as device
from . import _iterative as it
from ..._utils._array_api import (
    HOST,
    Placement,
    check_same_place,
    fitted_placement,
    placement,
)

__all__ = ["GPPlacement", "copy_in"]


def copy_in(a, sp):
    """A copy of ``a`` in its space (``copy_X_train``)."""
    return np.copy(a) if not sp.on_device else sp.xp.asarray(a, copy=True)


def _stored(name: str, doc: str) -> property:
    """An attribute kept in the estimator's ``_fit_arrays`` dict, not in its
    ``__dict__``: the fit's working arrays (NumPy views, host numbers of a
    device fit) are no fitted attributes, and scikit-learn's Array API checks
    (``check_array_api_input``) take every array in ``vars(est)`` for one."""

    def get(self):
        try:
            return self.__dict__["_fit_arrays"][name]
        except KeyError:
            raise AttributeError(name) from None

    def put(self, value):
        self.__dict__.setdefault("_fit_arrays", {})[name] = value

    return property(get, put, doc=doc)


class GPPlacement:
    """The Array API plumbing of GaussianProcessRegressor (module docstring)."""

    _X_fit = _stored("_X_fit", "The training points, in the compute space.")
    _y_fit = _stored("_y_fit", "The normalised targets, in the compute space.")
    _alpha_fit = _stored("_alpha_fit", "``(K + alpha I)^-1 y``, in the compute space.")
    _L = _stored("_L", "The Cholesky factor (host), or None (iterative).")
    _alpha = _stored("_alpha", "The diagonal shift: a float or an n-vector (host).")
    _landmarks = _stored("_landmarks", "The preconditioner's landmark rows (host).")
    _y_train_mean = _stored("_y_train_mean", "Per-target means (host).")
    _y_train_std = _stored("_y_train_std", "Per-target scales (host).")

    def _device_serves(self) -> bool:
        """Whether the device path serves this kernel (the iterative solver's
        device half evaluates dense blocks of ``c * RBF`` / ``c * Matern``)."""
        return self.kernel is None or device.serves(self.kernel)  # None: C() * RBF()

    def _publish(self, place: Placement):
        """The fitted arrays in the input's namespace and device (the same
        objects on the NumPy path)."""
        self.X_train_ = place.to_output(self._X_fit)
        self.y_train_ = place.to_output(self._y_fit)
        self.alpha_ = place.to_output(self._alpha_fit)
        keep = self._L is not None and not place.trivial
        self._L_out = place.to_output(self._L) if keep else None

    def _drop_device_state(self):
        for name in ("_device_arrays", "_host_copies", "_iter", "_L_out", "_space"):
            self.__dict__.pop(name, None)

    def _compute_space(self):
        """Where the fitted arrays ``_X_fit`` ... are: the fit's space, or
        (after unpickling) the placement of ``X_train_``."""
        sp = self.__dict__.get("_space")
        if sp is None:
            sp = HOST if getattr(self, "_L", None) is not None else fitted_placement(
                self, "X_train_", who="GaussianProcessRegressor",
                device_ok=self._device_serves()).space
            self._space = sp
        return sp

    def _solver_at(self, kernel):
        """The iterative solver at the scikit-learn kernel ``kernel``, on the host
        or on the device (:mod:`._device`)."""
        sp = self._compute_space()
        if sp.on_device:
            return device.DeviceGP(self, make_kernel(kernel), kernel, sp)
        return it.IterativeGP(self, make_kernel(kernel), kernel)

    def _host_inputs(self):
        """``(X, y)`` of the fit on the host: the exact objective's (the
        iterative fit's polish on a device copies them once per fit)."""
        sp = self._compute_space()
        if not sp.on_device:
            return self._X_fit, self._y_fit
        copies = self.__dict__.get("_host_copies")
        if copies is None or copies[0] is not self._X_fit:
            copies = self._host_copies = (self._X_fit, sp.host(self._X_fit),
                                          sp.host(self._y_fit))
        return copies[1], copies[2]

    def _place_of(self, X, method):
        """Where ``method``'s input X is computed: the fit's placement (after
        checking that X is in its namespace and on its device), or for an
        unfitted model's prior, X's own, on the host."""
        who = f"GaussianProcessRegressor.{method}"
        if not hasattr(self, "X_train_"):
            return placement(X, backend=self.backend, who=who, device_ok=False)
        fitted = fitted_placement(self, "X_train_", who=who,
                                  device_ok=self._device_serves() and self._L is None)
        return check_same_place(self, X, fitted, method)
