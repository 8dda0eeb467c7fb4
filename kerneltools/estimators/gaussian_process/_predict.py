"""GaussianProcessRegressor's predictions: the mean, std and covariance at
new points (exact: from the Cholesky factor; iterative: by the solver of
:mod:`._iterative`, on the device where the fit was) and draws from them.

A mixin of :class:`~kerneltools.estimators.GaussianProcessRegressor`, which
holds the fit (``_X_fit``, ``_alpha_fit``, ``_L``, ...: :mod:`._arrays`).
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg
from sklearn.gaussian_process.kernels import RBF
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.utils import check_random_state

from ...dask import rows_method
from ...kernels import make_kernel
from ..._utils._array_api import host_array, validate_on_device
from ..._utils._validation import validate_numeric

__all__ = ["GPPrediction", "default_kernel"]


def default_kernel():
    """The prior of an unfitted model with ``kernel=None`` (scikit-learn's)."""
    return C(1.0, constant_value_bounds="fixed") * RBF(1.0, length_scale_bounds="fixed")


class GPPrediction:
    """``predict`` and ``sample_y`` of GaussianProcessRegressor (module docstring)."""

    @rows_method(coupled=("return_cov",))
    def predict(self, X, return_std=False, return_cov=False):
        """Predictive mean (and std or covariance) at X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std, return_cov : bool

        Returns
        -------
        y_mean : ndarray of shape (n_samples,) or (n_samples, n_targets)
        y_std : ndarray, if return_std
        y_cov : ndarray (n_samples, n_samples[, n_targets]), if return_cov
        """
        if return_std and return_cov:
            raise RuntimeError("At most one of return_std or return_cov can be requested.")
        if self._delegating():
            return self.fallback_.predict(X, return_std=return_std,
                                          return_cov=return_cov)
        place = self._place_of(X, "predict")
        sp = place.space
        if sp.on_device:
            X, _ = validate_on_device(self, place.to_space(X), reset=False, space=sp,
                                      dtype=np.float64, who="GaussianProcessRegressor")
        else:
            X = validate_numeric(self, host_array(X), reset=False, dtype=np.float64)
        if not hasattr(self, "X_train_"):  # the prior
            out = self._prior(X, return_std, return_cov)
            return tuple(map(place.to_output, out)) if isinstance(out, tuple) \
                else place.to_output(out)
        kernel = make_kernel(self.kernel_)
        if self._L is None:
            mean, var, cov = self._iterative().predict(X, kernel, return_std, return_cov)
        else:
            mean, var, cov = self._exact_predict(X, return_std, return_cov)
        xp, put = sp.xp, sp.put
        mean = put(self._y_train_std) * mean + put(self._y_train_mean)
        if mean.ndim > 1 and mean.shape[1] == 1:
            mean = xp.squeeze(mean, axis=1)
        scale = put(np.atleast_1d(self._y_train_std ** 2))  # one per target
        if return_cov:
            cov = cov[:, :, None] * scale
            cov = xp.squeeze(cov, axis=2) if cov.shape[2] == 1 else cov
            return place.to_output(mean), place.to_output(cov)
        if return_std:
            if bool(xp.any(var < 0)):
                warnings.warn("Predicted variances smaller than 0. "
                              "Setting those variances to 0.", stacklevel=2)
                var = xp.where(var < 0, 0.0, var)
            var = var[:, None] * scale
            std = xp.sqrt(xp.squeeze(var, axis=1) if var.shape[1] == 1 else var)
            return place.to_output(mean), place.to_output(std)
        return place.to_output(mean)

    def _prior(self, X, return_std, return_cov):
        """The unfitted model's predictions (host arrays)."""
        kernel = default_kernel() if self.kernel is None else self.kernel
        nt = self.n_targets if self.n_targets is not None else 1
        mean = np.zeros((X.shape[0], nt)).squeeze()
        if return_cov:
            cov = kernel(X)
            return mean, np.repeat(cov[:, :, None], nt, axis=2) if nt > 1 else cov
        if return_std:
            var = kernel.diag(X)
            return mean, np.sqrt(np.repeat(var[:, None], nt, axis=1) if nt > 1 else var)
        return mean

    def _exact_predict(self, X, return_std, return_cov):
        K_trans = self.kernel_(X, self._X_fit)
        mean = K_trans @ self._alpha_fit
        if not (return_std or return_cov):
            return mean, None, None
        V = scipy.linalg.solve_triangular(self._L, K_trans.T, lower=True, check_finite=False)
        if return_cov:
            return mean, None, self.kernel_(X) - V.T @ V
        var = self.kernel_.diag(X).copy() - np.einsum("ij,ji->i", V.T, V)
        return mean, var, None

    def sample_y(self, X, n_samples=1, random_state=0):
        """Draw samples from the Gaussian process at X.

        Parameters
        ----------
        X : array-like of shape (n_samples_X, n_features)
            In the namespace and on the device of the training data.
        n_samples : int, default=1
        random_state : int, RandomState or None, default=0

        Returns
        -------
        y_samples : array of shape (n_samples_X, n_samples) or
            (n_samples_X, n_targets, n_samples)
            In X's namespace and on its device (drawn on the host from the
            predictive mean and covariance at X: query-sized arrays).
        """
        if self._delegating():
            return self.fallback_.sample_y(X, n_samples=n_samples,
                                           random_state=random_state)
        rng = check_random_state(random_state)
        where = self._place_of(X, "sample_y").on_host()
        mean, cov = map(host_array, self.predict(X, return_cov=True))
        if mean.ndim == 1:
            return where.to_output(rng.multivariate_normal(mean, cov, n_samples).T)
        draws = [rng.multivariate_normal(mean[:, t], cov[..., t], n_samples).T[:, None]
                 for t in range(mean.shape[1])]
        return where.to_output(np.hstack(draws))
