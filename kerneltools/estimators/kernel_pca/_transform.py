"""KernelPCA's transform of CuPy and Array API arrays (a NumPy fit).

KernelPCA fits on the host (NumPy); :meth:`KernelPCA.transform
<kerneltools.estimators.KernelPCA>` of a CuPy array, or with
``array_api_dispatch`` of any Array API array, projects where X is and
returns X's namespace and device (:mod:`._array_api` decides where it is
computed). Host arrays (CPU torch tensors ...) are read through a zero-copy
NumPy view and transformed as NumPy's. On a device, the projection is one
reduction ``K(X, X_fit_) [A, 1/n]`` on device arrays (or ``K(X, Z) C`` for
the Nystroem fit), its centring element-wise there; the fitted arrays it
needs are copied to the device on the first call and kept, per fit, in a
table keyed on the estimator (never pickled with it).
"""

from __future__ import annotations

import weakref

import numpy as np

from ..._utils._array_api import host_array, validate_on_device

__all__ = ["transform"]

#: estimator -> (the fit's token, its arrays on the device)
_copies: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def transform(est, X, place):
    """``est.transform(X)`` for a non-NumPy ``X`` computed as ``place`` says."""
    sp = place.space
    if not sp.on_device:  # a NumPy view (or a host copy): the NumPy transform
        return place.to_output(est.transform(host_array(X)))
    X, _ = validate_on_device(est, place.to_space(X), reset=False, space=sp)
    kernel = est._kernel()
    arrays = _device_arrays(est, sp)
    if "Z" in arrays:  # Nystroem: through the landmarks only
        X = sp.astype(X, np.float64)
        if "centre" in arrays:  # the fit's translation of data far from 0
            X = X - arrays["centre"]
        K = kernel.lazy(sp.engine(X), sp.engine(arrays["Z"]))
        out = sp.from_engine(K.matmul(sp.engine(arrays["coef"]), backend=place.backend))
        out = out - arrays["offset"]
    else:
        Xf = arrays["X_fit"]
        K = kernel.lazy(sp.engine(sp.astype(X, sp.np_dtype(Xf))), sp.engine(Xf))
        KB = sp.from_engine(K.matmul(sp.engine(arrays["B"]), backend=place.backend))
        k = arrays["B"].shape[1] - 1
        KA, means = KB[:, :k], KB[:, k:]
        out = KA - arrays["row_means_A"][None, :] - (means - est._grand_mean) * arrays["colsum"]
    return place.to_output(sp.astype(out, est.eigenvectors_.dtype))


def _device_arrays(est, sp) -> dict:
    """The fitted arrays of the projection, on the device: made once per fit."""
    # the fit's own arrays, compared by identity (and held, so that a later
    # fit's arrays cannot take their addresses): a refit makes new ones
    token = (est.eigenvectors_, est.X_fit_, sp.kind, repr(sp.device))
    kept = _copies.get(est)
    if kept is not None and all(a is b for a, b in zip(kept[0][:2], token[:2])) \
            and kept[0][2:] == token[2:]:
        return kept[1]
    if "_landmarks" in est.__dict__:
        host = {"Z": np.asarray(est._landmarks["Z"], np.float64),
                "coef": est._landmark_coef, "offset": est._landmark_offset}
        if "centre" in est._landmarks:
            host["centre"] = est._landmarks["centre"]
    else:
        A = est._scaled_eigenvectors()
        n_fit = len(est.X_fit_)
        host = {"X_fit": est.X_fit_,
                "B": np.hstack([A.astype(np.float64), np.full((n_fit, 1), 1.0 / n_fit)]),
                "colsum": A.sum(axis=0, dtype=np.float64),
                "row_means_A": est._row_means @ A}
    arrays = {k: sp.put(np.asarray(v)) for k, v in host.items()}
    _copies[est] = (token, arrays)
    return arrays

