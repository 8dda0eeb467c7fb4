"""Inputs of the optimal-transport functions and estimator (private).

:data:`TRANSPORT_CONSTRAINTS` holds the constraints of their parameters
(checked by :func:`._param_validation.validate_arguments` and
``validate_params``, with scikit-learn's wording); the functions below check
the data, the point clouds and their masses, and build the
:class:`._sinkhorn.Problem` that the solver takes.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np

from ..dask import check_rows, is_dask_array, to_numpy

from ._param_validation import Interval, Options
from ._sinkhorn import Problem, epsilon_schedule, max_diameter

__all__ = [
    "TRANSPORT_CONSTRAINTS",
    "check_points",
    "check_problem",
    "check_weights",
    "compute_dtype",
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


def check_points(X, name: str, caller: str) -> np.ndarray:
    """A finite, non-empty 2-D numeric array (its own dtype kept). A Dask
    array stays one, persisted on the workers: the potentials (one value per
    point) then live here and every softmin is a distributed reduction."""
    if is_dask_array(X):
        return check_rows(X, name, caller)
    try:
        arr = np.asarray(X)
    except (TypeError, ValueError) as exc:  # ragged lists and the like
        raise TypeError(f"{caller}: '{name}' must be a numeric array; {exc}") from None
    if arr.dtype.kind not in "biuf":
        raise TypeError(
            f"{caller}: '{name}' must be a real numeric array (float32, float64 or "
            f"int); got dtype {arr.dtype}"
        )
    if arr.ndim != 2:
        raise ValueError(
            f"{caller}: '{name}' must be a 2-D array of shape (n_points, "
            f"n_features); got shape {arr.shape}. Reshape 1-D data with "
            f"{name}.reshape(-1, 1)"
        )
    if arr.size == 0:
        raise ValueError(
            f"{caller}: '{name}' is empty (shape {arr.shape}); it needs at least "
            "one point and one feature"
        )
    if not np.isfinite(arr).all():
        raise ValueError(f"{caller}: '{name}' contains NaN or infinity")
    return arr


def compute_dtype(*arrays) -> np.dtype:
    """NumPy promotion of the inputs; integers become float64, float16 float32."""
    dt = np.result_type(*arrays)
    if dt.kind in "biu":
        return np.dtype(np.float64)
    return np.dtype(np.float32) if dt.itemsize < 4 else dt


def check_weights(w, n: int, name: str, points: str, caller: str, dtype) -> np.ndarray:
    """Weights of a measure: None (uniform, 1 / n) or n finite values >= 0."""
    if w is None:
        return np.full(n, 1.0 / n, dtype=dtype)
    arr = np.asarray(to_numpy(w))
    if arr.dtype.kind not in "biuf":
        raise TypeError(
            f"{caller}: '{name}' must be real numbers, one per point of "
            f"'{points}'; got dtype {arr.dtype}"
        )
    if arr.shape not in ((n,), (n, 1)):
        raise ValueError(
            f"{caller}: '{name}' must have shape ({n},), one weight per point of "
            f"'{points}'; got shape {arr.shape}"
        )
    arr = arr.reshape(n).astype(dtype)
    if not np.isfinite(arr).all():
        raise ValueError(f"{caller}: '{name}' contains NaN or infinity")
    if (arr < 0).any():
        raise ValueError(
            f"{caller}: '{name}' must be >= 0 (the masses of a measure); got a "
            f"minimum of {arr.min()}"
        )
    if not arr.sum() > 0:
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
) -> Problem:
    """Validate the data before any computation; the problem to solve.

    ``p``, ``blur``, ``reach`` and ``scaling`` have been validated against
    :data:`TRANSPORT_CONSTRAINTS` by the caller."""
    nx, ny, na, nb = names
    x = check_points(x, nx, caller)
    y = check_points(y, ny, caller)
    if x.shape[1] != y.shape[1]:
        raise ValueError(
            f"{caller}: '{nx}' and '{ny}' must have the same number of features; "
            f"got {x.shape[1]} and {y.shape[1]}"
        )
    p, blur, scaling = int(p), float(blur), float(scaling)
    reach = None if reach is None else float(reach)
    dt = compute_dtype(x, y) if dtype is None else np.dtype(dtype)
    x, y = (c.astype(dt) if is_dask_array(c) else np.ascontiguousarray(c, dtype=dt)
            for c in (x, y))
    a = check_weights(a, len(x), na, nx, caller, dt)
    b = check_weights(b, len(y), nb, ny, caller, dt)
    if reach is None:
        ma, mb = float(a.sum(dtype=np.float64)), float(b.sum(dtype=np.float64))
        if abs(ma - mb) > 1e-5 * max(ma, mb):
            raise ValueError(
                f"{caller}: balanced transport needs '{na}' and '{nb}' of the same "
                f"total mass; got {ma:.6g} and {mb:.6g}. Normalise them, or pass "
                "reach= for unbalanced transport"
            )
    diameter = max_diameter(x, y)
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
    )
