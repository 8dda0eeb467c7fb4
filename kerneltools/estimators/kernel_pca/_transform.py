"""KernelPCA's projection of new points, one path for NumPy and device arrays.

KernelPCA fits on the host (NumPy); :meth:`KernelPCA.transform
<kerneltools.estimators.KernelPCA>` projects X where it is
(:mod:`kerneltools._utils._array_api` decides): NumPy arrays (and host
Array API arrays, read through a zero-copy NumPy view) on the host, CuPy
arrays (and with ``array_api_dispatch`` device arrays) on their device, in
their namespace. :func:`project` is the one projection, written with the
space's namespace: ``K(X, X_fit_) [A, 1/n]`` (or ``K(X, Z) C`` for the
Nystroem fit) and the centring of the product. The fitted arrays it needs
are the estimator's on the host, and on a device copies made on the first
call and kept, per fit, in a table keyed on the estimator (never pickled
with it). Only the kernel product differs by place: on the host a BLAS
product of a dense block below ``_DENSE_TRANSFORM_MAX`` entries (on
translated data), else a reduction; on a device always a reduction on
device arrays.
"""

from __future__ import annotations

import weakref

import numpy as np

from ...linalg import KernelOperator, translated
from ..._utils._array_api import HOST, host_array, validate_on_device

__all__ = ["project", "transform"]

#: Dense transform (one BLAS product) below this many kernel entries (host).
_DENSE_TRANSFORM_MAX = 4_000_000

#: estimator -> (the fit's token, its arrays on the device)
_copies: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def transform(est, X, place):
    """``est.transform(X)`` for a non-NumPy ``X`` computed as ``place`` says."""
    sp = place.space
    if not sp.on_device:  # a NumPy view (or a host copy): the NumPy transform
        return place.to_output(est.transform(host_array(X)))
    X, _ = validate_on_device(est, place.to_space(X), reset=False, space=sp)
    out = project(est, X, _device_arrays(est, sp), sp, place.backend)
    return place.to_output(out)


def project(est, X, arrays, sp=HOST, backend=None):
    """The projection of the validated rows ``X`` of the space ``sp`` with
    the fitted ``arrays`` (:func:`fitted_arrays`, in ``sp``), in the
    eigenvectors' dtype."""
    xp = sp.xp
    kernel = est._kernel()
    if "Z" in arrays:  # Nystroem: through the landmarks only
        X = xp.astype(X, xp.float64)
        if "centre" in arrays:  # the fit's translation of data far from 0
            X = X - arrays["centre"]
        out = _times(kernel, X, arrays["Z"], arrays["coef"], sp, backend)
        out = out - arrays["offset"]
    else:
        Xf, B = arrays["X_fit"], arrays["B"]
        KB = _times(kernel, xp.astype(X, Xf.dtype, copy=False), Xf, B, sp, backend)
        k = B.shape[1] - 1
        KA, means = KB[:, :k], KB[:, k:]
        out = KA - arrays["row_means_A"][None, :] \
            - (means - est._grand_mean) * arrays["colsum"]
    return xp.astype(out, sp.dtype(est.eigenvectors_.dtype), copy=False)


def _times(kernel, X, Y, B, sp, backend):
    """``K(X, Y) B`` in float64 arrays of ``sp``: on the host one BLAS product
    below ``_DENSE_TRANSFORM_MAX`` kernel entries (scikit-learn's dense
    kernels exist there only), else one reduction."""
    if sp.on_device:
        K = kernel.lazy(sp.engine(X), sp.engine(Y))
        return sp.from_engine(K.matmul(sp.engine(B), backend=backend))
    if len(X) * len(Y) <= _DENSE_TRANSFORM_MAX:
        X, Y = translated(kernel, X, reference=Y), translated(kernel, Y)
        return np.asarray(kernel(X, Y) @ B, np.float64)
    K = KernelOperator(kernel, X, Y, backend=backend)
    return np.asarray(K.matmat(B), np.float64)


def fitted_arrays(est) -> dict:
    """The fitted arrays of the projection, on the host."""
    if "_landmarks" in est.__dict__:
        host = {"Z": np.asarray(est._landmarks["Z"], np.float64),
                "coef": est._landmark_coef, "offset": est._landmark_offset}
        if "centre" in est._landmarks:
            host["centre"] = est._landmarks["centre"]
        return host
    A = est._scaled_eigenvectors()
    n_fit = len(est.X_fit_)
    # one product K [A, 1/n]: the projections and the new rows' means
    return {"X_fit": est.X_fit_,
            "B": np.hstack([A.astype(np.float64), np.full((n_fit, 1), 1.0 / n_fit)]),
            "colsum": A.sum(axis=0, dtype=np.float64),
            "row_means_A": est._row_means @ A}


def _device_arrays(est, sp) -> dict:
    """:func:`fitted_arrays` on the device: copied once per fit."""
    # the fit's own arrays, compared by identity (and held, so that a later
    # fit's arrays cannot take their addresses): a refit makes new ones
    token = (est.eigenvectors_, est.X_fit_, sp.kind, repr(sp.device))
    kept = _copies.get(est)
    if kept is not None and all(a is b for a, b in zip(kept[0][:2], token[:2])) \
            and kept[0][2:] == token[2:]:
        return kept[1]
    arrays = {k: sp.put(np.asarray(v)) for k, v in fitted_arrays(est).items()}
    _copies[est] = (token, arrays)
    return arrays
