"""Inputs of the optimal-transport functions and estimator (private).

:data:`TRANSPORT_CONSTRAINTS` holds the constraints of their parameters
(checked by :func:`kerneltools._utils._param_validation.validate_arguments`
and ``validate_params``, with scikit-learn's wording); the functions below
check the data, the point clouds and their masses, and build the
:class:`._sinkhorn.Problem` that the solver takes. :func:`inputs_in` puts the
data where a call computes them (:mod:`kerneltools._utils._array_api`): arrays
of a device's namespace are checked there, with the host's messages, by Array
API functions (only booleans and scalars cross to the host).
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np

from ..dask import check_rows, is_dask_array, to_numpy

from .._utils._array_api import HOST, Placement, Space, host_array
from .._utils._param_validation import Interval, Options
from ._sinkhorn import Problem, epsilon_schedule, max_diameter

__all__ = [
    "TRANSPORT_CONSTRAINTS",
    "check_points",
    "check_problem",
    "check_weights",
    "compute_dtype",
    "inputs_in",
]

#: The parameters of :func:`sinkhorn_divergence`, :func:`sinkhorn_potentials`,
#: :func:`transport_plan` and :class:`SinkhornTransport`, by name. The cost is
#: GeomLoss's ``|x - y|^p / p``, for p = 1 or 2.
TRANSPORT_CONSTRAINTS = {
    "p": [Options(Real, (1, 2))],
    "blur": [Interval(Real, 0, None, closed="neither")],
    "reach": [Interval(Real, 0, None, closed="neither"), None],
    "scaling": [Interval(Real, 0, 1, closed="neither")],
    "debias": ["boolean"],
    "return_grad": ["boolean"],
    "tol": [Interval(Real, 0, None, closed="neither"), None],
    "max_iter": [Interval(Integral, 1, None, closed="left")],
    "backend": ["backend"],
    "verbose": ["verbose"],
    "multiscale": ["boolean"],
    "truncate": [Interval(Real, 0, None, closed="neither"), None],
    "cluster_scale": [Interval(Real, 0, None, closed="neither"), None],
}


def inputs_in(place: Placement, *arrays):
    """``arrays`` (None stays None) where ``place`` computes them: arrays of
    its device space (moved there: the masses follow the points), else host
    arrays (zero-copy NumPy views of host Array API arrays; NumPy, Dask
    arrays and lists as they are, for the checks below)."""
    if place.space.on_device:
        return [place.to_space(a) for a in arrays]
    return [host_array(a) for a in arrays]


def _check_points_array(shape, dtype, name: str, caller: str) -> None:
    """The checks of :func:`check_points` that read only ``X``'s shape and
    (NumPy) dtype."""
    if dtype.kind not in "biuf":
        raise TypeError(
            f"{caller}: '{name}' must be a real numeric array (float32, float64 or "
            f"int); got dtype {dtype}"
        )
    if len(shape) != 2:
        raise ValueError(
            f"{caller}: '{name}' must be a 2-D array of shape (n_points, "
            f"n_features); got shape {shape}. Reshape 1-D data with "
            f"{name}.reshape(-1, 1)"
        )
    if 0 in shape:
        raise ValueError(
            f"{caller}: '{name}' is empty (shape {shape}); it needs at least "
            "one point and one feature"
        )


def _all_finite(arr, space: Space) -> bool:
    if not space.on_device:
        return bool(np.isfinite(arr).all())
    return bool(space.xp.all(space.xp.isfinite(arr)))


def check_points(X, name: str, caller: str, space: Space = HOST) -> np.ndarray:
    """A finite, non-empty 2-D numeric array (its own dtype kept). A Dask
    array stays one, persisted on the workers: the potentials (one value per
    point) then live here and every softmin is a distributed reduction. An
    array of a device ``space`` is checked there."""
    if is_dask_array(X):
        return check_rows(X, name, caller)
    if space.on_device:
        arr = X
    else:
        try:
            arr = np.asarray(X)
        except (TypeError, ValueError) as exc:  # ragged lists and the like
            raise TypeError(
                f"{caller}: '{name}' must be a numeric array; {exc}") from None
    _check_points_array(tuple(arr.shape), space.np_dtype(arr), name, caller)
    if not _all_finite(arr, space):
        raise ValueError(f"{caller}: '{name}' contains NaN or infinity")
    return arr


def compute_dtype(*arrays) -> np.dtype:
    """NumPy promotion of the inputs; integers become float64, float16 float32."""
    dt = np.result_type(*arrays)
    if dt.kind in "biu":
        return np.dtype(np.float64)
    return np.dtype(np.float32) if dt.itemsize < 4 else dt


def check_weights(w, n: int, name: str, points: str, caller: str, dtype,
                  space: Space = HOST) -> np.ndarray:
    """Weights of a measure: None (uniform, 1 / n) or n finite values >= 0
    (arrays of ``space``)."""
    xp = space.xp
    if w is None:
        if not space.on_device:
            return np.full(n, 1.0 / n, dtype=dtype)
        return xp.full((n,), 1.0 / n, dtype=space.dtype(dtype), device=space.device)
    arr = w if space.on_device else np.asarray(to_numpy(w))
    kind = space.np_dtype(arr)
    if kind.kind not in "biuf":
        raise TypeError(
            f"{caller}: '{name}' must be real numbers, one per point of "
            f"'{points}'; got dtype {kind}"
        )
    if tuple(arr.shape) not in ((n,), (n, 1)):
        raise ValueError(
            f"{caller}: '{name}' must have shape ({n},), one weight per point of "
            f"'{points}'; got shape {tuple(arr.shape)}"
        )
    if space.on_device:
        arr = xp.astype(xp.reshape(arr, (n,)), space.dtype(dtype))
    else:
        arr = arr.reshape(n).astype(dtype)
    if not _all_finite(arr, space):
        raise ValueError(f"{caller}: '{name}' contains NaN or infinity")
    if bool(xp.any(arr < 0)):
        low = float(xp.min(arr)) if space.on_device else arr.min()
        raise ValueError(
            f"{caller}: '{name}' must be >= 0 (the masses of a measure); got a "
            f"minimum of {low}"
        )
    if not float(xp.sum(arr)) > 0:
        raise ValueError(f"{caller}: '{name}' sums to 0; a measure needs some mass")
    return arr


def check_problem(
    x,
    y,
    a,
    b,
    *,
    p,
    blur,
    reach,
    scaling,
    caller,
    names=("x", "y", "a", "b"),
    dtype=None,
    space: Space = HOST,
) -> Problem:
    """Validate the data before any computation; the problem to solve.

    ``p``, ``blur``, ``reach`` and ``scaling`` have been validated against
    :data:`TRANSPORT_CONSTRAINTS` by the caller. ``space``: where the data
    are (:func:`inputs_in`), and where the problem's arrays stay."""
    nx, ny, na, nb = names
    x = check_points(x, nx, caller, space)
    y = check_points(y, ny, caller, space)
    if x.shape[1] != y.shape[1]:
        raise ValueError(
            f"{caller}: '{nx}' and '{ny}' must have the same number of features; "
            f"got {x.shape[1]} and {y.shape[1]}"
        )
    p, blur, scaling = int(p), float(blur), float(scaling)
    reach = None if reach is None else float(reach)
    if space.on_device:
        dt = (compute_dtype(space.np_dtype(x), space.np_dtype(y)) if dtype is None
              else np.dtype(dtype))
        x, y = space.astype(x, dt), space.astype(y, dt)
    else:
        dt = compute_dtype(x, y) if dtype is None else np.dtype(dtype)
        x, y = (c.astype(dt) if is_dask_array(c) else np.ascontiguousarray(c, dtype=dt)
                for c in (x, y))
    a = check_weights(a, x.shape[0], na, nx, caller, dt, space)
    b = check_weights(b, y.shape[0], nb, ny, caller, dt, space)
    if reach is None:
        ma, mb = (float(space.xp.sum(space.astype(w, np.float64))) for w in (a, b))
        if abs(ma - mb) > 1e-5 * max(ma, mb):
            raise ValueError(
                f"{caller}: balanced transport needs '{na}' and '{nb}' of the same "
                f"total mass; got {ma:.6g} and {mb:.6g}. Normalise them, or pass "
                "reach= for unbalanced transport"
            )
    diameter = max_diameter(x, y, space)
    if not diameter > 0:  # every point at the same place: no scale to anneal from
        diameter = blur
    return Problem(
        x=x,
        y=y,
        a=a,
        b=b,
        p=p,
        eps=blur**p,
        rho=None if reach is None else reach**p,
        eps_list=epsilon_schedule(p, diameter, blur, scaling),
        diameter=diameter,
        space=space,
    )
