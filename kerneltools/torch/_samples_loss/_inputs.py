"""The parameters and inputs of :class:`~kerneltools.torch.SamplesLoss`,
checked before any computation (private).

What GeomLoss accepts is accepted, with its meaning:

- Numeric parameters (``blur``, ``reach``, ``diameter``, ``scaling``,
  ``truncate``, ``cluster_scale``) may be Python or NumPy numbers or
  one-element tensors (GeomLoss's examples pass ``torch.tensor(...)``); they
  are read once, as floats: no gradient flows to them.
- Points: float32 and float64 are computed in their dtype; float16 and
  bfloat16 in float32 (NumPy has no bfloat16, and half precision cannot
  resolve a Sinkhorn loop's potentials), the loss returned in the input's
  dtype; integer and boolean points are cast to float64 (the project's rule
  for integer input), as is a mix of integer and float points to the float's
  dtype.
- Weights of a half dtype are masses up to their own rounding: their totals
  are reconciled for balanced transport (:func:`reconcile_masses`).

Everything else (wrong ranks, mismatched dimensions, NaN, empty clouds,
weights of the wrong shape, negative or summing to 0) raises a ``TypeError``
or ``ValueError`` that names the argument and ``SamplesLoss``.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import NamedTuple

import numpy as np
import torch

__all__ = ["Inputs", "check_inputs", "number", "reconcile_masses"]

WHO = "SamplesLoss"

#: Dtypes computed in float32 (the loss comes back in the input's dtype).
HALF_DTYPES = (torch.float16, torch.bfloat16)


# -- numeric parameters --------------------------------------------------------------


def _as_float(value, name: str) -> float:
    """``value`` as a Python float: a real number or a one-element real tensor
    or array; a ``TypeError`` or ``ValueError`` naming ``name`` otherwise."""
    if isinstance(value, (torch.Tensor, np.ndarray)):
        if isinstance(value, torch.Tensor):
            real = not (value.is_complex() or value.dtype == torch.bool)
        else:
            real = value.dtype.kind in "iuf"
        if not real:
            raise TypeError(f"The '{name}' parameter of {WHO} must be a real number; "
                            f"got a tensor of dtype {value.dtype}")
        if math.prod(value.shape) != 1:
            raise ValueError(f"The '{name}' parameter of {WHO} must be one number (a "
                             f"float or a 0-d tensor); got shape {tuple(value.shape)}")
        return float(value.reshape(()).item())
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Real):
        raise TypeError(f"The '{name}' parameter of {WHO} must be a number; "
                        f"got {type(value).__name__} {value!r}")
    return float(value)


def number(value, name: str, *, low: float = 0.0, low_open: bool = True,
           high: float | None = None, optional: bool = False) -> float | None:
    """The parameter ``name`` as a finite float in ``(low, high)`` (``[low,
    high)`` when not ``low_open``); None stays None when ``optional``."""
    if value is None and optional:
        return None
    v = _as_float(value, name)
    above = v > low if low_open else v >= low
    if not (math.isfinite(v) and above and (high is None or v < high)):
        bound = f"{'>' if low_open else '>='} {low:g}"
        if high is not None:
            bound = f"in ({low:g}, {high:g})"
        raise ValueError(f"The '{name}' parameter of {WHO} must be a finite float "
                         f"{bound}; got {value!r}")
    return v


# -- points and weights ----------------------------------------------------------------


class Inputs(NamedTuple):
    """A call's inputs, validated, with a batch axis, in the compute dtype."""

    a: torch.Tensor  # (B, N) masses
    x: torch.Tensor  # (B, N, D)
    b: torch.Tensor  # (B, M)
    y: torch.Tensor  # (B, M, D)
    batched: bool  # the call had a batch axis
    dtype: torch.dtype  # the dtype of the loss returned
    weight_unit: float  # the rounding unit of the weights as given (0: exact)


def _check_points(t, name: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{WHO}: '{name}' must be a torch tensor; got {type(t).__name__}")
    if t.is_complex():
        raise TypeError(f"{WHO}: '{name}' must be real numbers; got {t.dtype}")
    if t.dim() not in (2, 3) or t.numel() == 0:
        raise ValueError(
            f"{WHO}: '{name}' must be a non-empty (N, D) or (B, N, D) tensor; "
            f"got shape {tuple(t.shape)}"
        )
    return t


def _dtypes(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.dtype, torch.dtype]:
    """``(compute dtype, output dtype)`` of points ``x`` and ``y``."""
    floats = [t.dtype for t in (x, y) if t.is_floating_point()]
    if not floats:
        return torch.float64, torch.float64
    if len(floats) == 2 and floats[0] != floats[1]:
        raise TypeError(f"{WHO}: 'x' and 'y' must have the same dtype; "
                        f"got {x.dtype} and {y.dtype}")
    out = floats[0]
    return (torch.float32 if out in HALF_DTYPES else out), out


def check_inputs(args) -> Inputs:
    """The :class:`Inputs` of a call ``L(x, y)`` or ``L(a, x, b, y)``."""
    if len(args) == 2:
        x, y = args
        a = b = None
    elif len(args) == 4:
        a, x, b, y = args
    else:
        raise TypeError(
            f"{WHO} is called as L(x, y) or L(a, x, b, y); got {len(args)} arguments"
        )
    x, y = _check_points(x, "x"), _check_points(y, "y")
    if x.dim() != y.dim() or x.shape[-1] != y.shape[-1] or (
        x.dim() == 3 and x.shape[0] != y.shape[0]
    ):
        raise ValueError(
            f"{WHO}: 'x' and 'y' must have the same batch size and number of "
            f"features; got shapes {tuple(x.shape)} and {tuple(y.shape)}"
        )
    compute, out = _dtypes(x, y)
    x, y = x.to(compute), y.to(compute)
    for name, t in (("x", x), ("y", y)):
        if not torch.isfinite(t.detach()).all():
            raise ValueError(f"{WHO}: '{name}' contains NaN or infinity")
    batched = x.dim() == 3
    if not batched:
        x, y = x[None], y[None]
    units = [_unit(w) for w in (a, b) if isinstance(w, torch.Tensor)]
    a = _check_weights(a, x, "a", "x", batched)
    b = _check_weights(b, y, "b", "y", batched)
    return Inputs(a, x, b, y, batched, out, max(units, default=0.0))


def _unit(w: torch.Tensor) -> float:
    """The rounding unit of weights given in a half dtype (0 otherwise)."""
    return float(torch.finfo(w.dtype).eps) if w.dtype in HALF_DTYPES else 0.0


def _check_weights(w, pts: torch.Tensor, name: str, points: str, batched: bool):
    B, N = pts.shape[:2]
    if w is None:
        return torch.full((B, N), 1.0 / N, dtype=pts.dtype, device=pts.device)
    if not isinstance(w, torch.Tensor):
        raise TypeError(f"{WHO}: '{name}' must be a torch tensor; got {type(w).__name__}")
    if w.is_complex():
        raise TypeError(f"{WHO}: '{name}' must be real numbers (masses); got {w.dtype}")
    want = (B, N) if batched else (N,)
    if tuple(w.shape) not in (want, want + (1,)):
        raise ValueError(
            f"{WHO}: '{name}' must have shape {want}, one weight per point of "
            f"'{points}'; got {tuple(w.shape)}"
        )
    w = w.reshape(B, N).to(pts.dtype)
    if not torch.isfinite(w.detach()).all() or (w.detach() < 0).any():
        raise ValueError(f"{WHO}: '{name}' must be finite and >= 0 (masses)")
    return w


def require_mass(inputs: Inputs, loss: str) -> None:
    """Sinkhorn and Hausdorff need measures of positive mass (their
    log-weights); a ``ValueError`` naming the weights otherwise."""
    for name, w in (("a", inputs.a), ("b", inputs.b)):
        if not (w.detach().sum(-1) > 0).all():
            raise ValueError(f"{WHO}: '{name}' sums to 0; loss={loss!r} needs a measure "
                             "with some mass")


def reconcile_masses(inputs: Inputs) -> Inputs:
    """Balanced transport's masses when the weights came in a half dtype.

    Weights normalised in float16 (bfloat16) sum to 1 only up to its
    rounding: where the totals of ``a`` and ``b`` differ by less than that
    unit (relative), ``b`` is rescaled to ``a``'s total, so that the mass
    check of balanced transport sees equal masses. Other weights are left
    as they are (and checked as given).
    """
    if inputs.weight_unit == 0.0:
        return inputs
    ma, mb = inputs.a.sum(-1, keepdim=True), inputs.b.sum(-1, keepdim=True)
    gap = ((ma - mb).abs() / torch.maximum(ma, mb)).detach()
    if not (gap <= inputs.weight_unit).all():
        return inputs
    return inputs._replace(b=inputs.b * (ma / mb).detach())
