"""DBSCAN's eps test as formulas: exact in float64, bracketed in float32.

:class:`Near` gives the 0/1 formula ``[d(x_i, x_j) <= eps]`` of two sets of
points in float64 (the metric's rdist against eps converted once; the sets
are scikit-learn's). For the euclidean metric it also gives a bracket in
float32 (for the neighbour counts, a ``Sum``: half the cost of a float64
pass on the CPU, measured at 3e4 x 9): the pair of tests
``[d <= eps - m]`` and ``[d <= eps + m]`` on centred float32 points, ``m``
a bound of the float32 error of a distance near eps. A reduction over the
bracket gives, for each point, a result over a subset and one over a
superset of its true neighbours; where they agree the answer is exact, and
only the other points are reduced again in float64.

The bound: centred coordinates rounded to float32 err by ``u |x_k|``
(``u = 2^-24``), so a difference by ``u (|x_k| + |y_k|) + u |x_k - y_k|``
and a distance by at most ``u (|x| + |y| + d)`` from them, plus ``(D + 2) u
d / 2`` from the squares and the sum: ``m = 8 u (R + (D + 3) eps)`` with
``R`` the largest norm of a centred point (a factor 2 of slack for the
float64 rounding and the thresholds' own).
"""

from __future__ import annotations

import numpy as np

from ...lazy import Vi, Vj

__all__ = ["Near"]

#: Fewest points for which the float32 bracket is used (below, the float64
#: passes take milliseconds).
BRACKET_MIN_POINTS = 4096


class Near:
    """``near(rows_i, rows_j)``: the float64 eps test of two sets of points;
    :meth:`bracket`: its float32 bracket, or None where none is made."""

    def __init__(self, X: np.ndarray, metric, thr: float, *, name: str, eps: float,
                 dtype=None):
        self.metric, self.thr = metric, float(thr)
        self.name = name
        self.dtype = np.dtype(dtype or np.float64)
        if len(X) > 2**24:  # labels are exact in the formula's floats
            self.dtype = np.dtype(np.float64)
        self.P = np.ascontiguousarray(metric.prepare(X.astype(self.dtype,
                                                               copy=False)))
        self._bracket = None
        if name == "euclidean" and dtype is None and len(X) >= BRACKET_MIN_POINTS:
            self._bracket = self._make_bracket(X, eps)

    def __call__(self, rows_i, rows_j):
        return self.metric.rdist(Vi(self.P[rows_i]), Vj(self.P[rows_j])) <= self.thr

    @staticmethod
    def _make_bracket(X: np.ndarray, eps: float):
        C = X.astype(np.float64) - X.mean(axis=0)
        R = float(np.sqrt((C * C).sum(1)).max())
        m = 8 * 2.0**-24 * (R + (X.shape[1] + 3) * eps)
        if not m < eps / 4:  # too coarse to decide most pairs
            return None
        return np.ascontiguousarray(C, dtype=np.float32), (eps - m) ** 2, (eps + m) ** 2

    def bracket(self, rows_i, rows_j):
        """The float32 formula ``([d <= eps - m], [d <= eps + m])``, or None."""
        if self._bracket is None:
            return None
        C, lo, hi = self._bracket
        d2 = Vi(C[rows_i]).sqdist(Vj(C[rows_j]))
        return (d2 <= lo).concat(d2 <= hi)

    def certain(self, rows_i, rows_j):
        """The float32 formula ``[d <= eps - m]`` (pairs the exact test keeps
        too), or None."""
        if self._bracket is None:
            return None
        C, lo, _ = self._bracket
        return Vi(C[rows_i]).sqdist(Vj(C[rows_j])) <= lo
