"""Metrics and searches behind the k-NN estimators of :mod:`.neighbors`.

A metric is reduced in its *reduced distance* form (``rdist``): a formula
that orders the points as the distance does and is cheaper to compute, such
as the squared distance for ``euclidean``; the search keeps the K smallest
``rdist`` of each query with a ``Kmin_argKmin`` reduction and converts only
those to distances. Queries go through the reduction in blocks, so memory
stays linear in the number of points whatever their number.

Euclidean searches in 20 or more features take a faster exact route,
:class:`ExpandedSearch`: candidates from the expanded form
``|y|^2 - 2 <x, y>`` (which the backends reduce with a matrix-product
micro-kernel), re-ranked by their exact distances, each row certified by a
rounding-error bound or else searched again in the direct form.

A scikit-learn-style callable metric (two 1-D arrays in, a float out) has no
formula: :class:`DenseSearch` evaluates it pair by pair on blocks of queries,
as scikit-learn's brute force does.

This module also holds the constructor-parameter constraints of the
estimators (the checks behind ``_parameter_constraints``), written after
scikit-learn's, whose constraint classes are not public.
"""

from __future__ import annotations

import functools
import numbers
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np

import kerneltools as kt
from kerneltools import LazyTensor, Vi, Vj
from kerneltools import ranges as kr

#: Rows x K of one query block: the block's outputs stay near 32 MB.
QUERY_BLOCK_ENTRIES = 2**21
#: Rows x fitted points of one block of dense distances (callable metrics).
DENSE_BLOCK_ENTRIES = 2**22
#: Rows x candidates x features of one re-ranking block: 1 MB of float64
#: differences, which stay in cache (2x faster than 32 MB blocks).
RERANK_BLOCK_ENTRIES = 2**17

_CANONICAL = {
    "euclidean": "euclidean",
    "l2": "euclidean",
    "sqeuclidean": "sqeuclidean",
    "manhattan": "manhattan",
    "cityblock": "manhattan",
    "l1": "manhattan",
    "chebyshev": "chebyshev",
    "infinity": "chebyshev",
    "minkowski": "minkowski",
    "cosine": "cosine",
}
#: The metric names accepted (scikit-learn's spellings).
VALID_METRICS = tuple(sorted(_CANONICAL))
_METRIC_PARAMS = {"minkowski": ("p", "w")}
_P_ALIASES = {1: "manhattan", 2: "euclidean", np.inf: "chebyshev"}


# -- metrics as formulas --------------------------------------------------------


def _sqeuclidean(x_i, y_j, params):
    # The direct form is exact up to rounding: no |x|^2 - 2 x.y + |y|^2
    # cancellation, which for nearby points far from the origin loses every
    # digit of their distance and reorders near neighbours. (ExpandedSearch
    # takes the expanded form for candidates only, under a certificate.)
    return ((x_i - y_j) ** 2).sum(-1)


def _manhattan(x_i, y_j, params):
    return (x_i - y_j).abs().sum(-1)


def _max_over_features(v: LazyTensor) -> LazyTensor:
    """The largest component of ``v``, by halving: log2(D) element-wise maxima."""
    while v.dim > 1:
        h = v.dim // 2
        m = kt.maximum(v[:h], v[h : 2 * h])
        v = m if v.dim % 2 == 0 else m.concat(v[2 * h :])
    return v


def _chebyshev(x_i, y_j, params):
    return _max_over_features((x_i - y_j).abs())


def _minkowski(x_i, y_j, params):
    p = float(params["p"])
    terms = (x_i - y_j).abs() ** p  # an integral p is an exact power
    if params.get("w") is not None:
        terms = kt.Pm(np.asarray(params["w"], dtype=x_i.dtype)) * terms
    return terms.sum(-1)


def _cosine(x_i, y_j, params):
    return 1 - (x_i | y_j)  # on unit vectors (see _unit_rows)


def _unit_rows(a: np.ndarray) -> np.ndarray:
    """Rows scaled to norm 1; zero rows stay zero (scikit-learn's ``normalize``)."""
    norms = np.sqrt(np.einsum("ij,ij->i", a, a, dtype=np.float64))
    norms[norms == 0] = 1
    return (a / norms[:, None]).astype(a.dtype, copy=False)


@dataclass(frozen=True)
class Metric:
    """A metric as a formula: ``rdist`` orders points as the distance does."""

    rdist: Callable[[LazyTensor, LazyTensor], LazyTensor]
    to_dist: Callable[[np.ndarray], np.ndarray]  # rdist values -> distances
    to_rdist: Callable[[float], float]  # a radius -> the rdist threshold
    prepare: Callable[[np.ndarray], np.ndarray] = lambda a: a
    squared_l2: bool = False  # rdist is |x - y|^2: ExpandedSearch applies


def _identity(v):
    return v


def _square(r):
    return r * r


def make_metric(name_or_fn, params: dict) -> Metric:
    """The :class:`Metric` of a validated metric name, or of a LazyTensor callable."""
    if callable(name_or_fn):
        return Metric(lambda x, y: name_or_fn(x, y, **params), _identity, _identity)
    name = _CANONICAL[name_or_fn]
    if name in ("euclidean", "sqeuclidean"):
        conv = (np.sqrt, _square) if name == "euclidean" else (_identity, _identity)
        return Metric(lambda x, y: _sqeuclidean(x, y, params), *conv, squared_l2=True)
    if name == "minkowski":
        p = float(params["p"])
        return Metric(
            lambda x, y: _minkowski(x, y, params),
            lambda v: v ** (1.0 / p),
            lambda r: r**p,
        )
    if name == "cosine":
        return Metric(
            lambda x, y: _cosine(x, y, params),
            lambda v: np.clip(v, 0, 2),
            _identity,
            _unit_rows,
        )
    fn = _manhattan if name == "manhattan" else _chebyshev
    return Metric(lambda x, y: fn(x, y, params), _identity, _identity)


def effective_metric(metric, p, metric_params) -> tuple:
    """(effective_metric_, effective_metric_params_), as scikit-learn sets them.

    Minkowski with p = 1, 2 or inf and no weights becomes manhattan,
    euclidean or chebyshev; a ``p`` in ``metric_params`` wins over ``p``.
    """
    params = dict(metric_params or {})
    if "p" in params and p is not None:
        warnings.warn(
            "Parameter p is found in metric_params. The corresponding parameter "
            "from __init__ is ignored.",
            SyntaxWarning,
            stacklevel=4,
        )
    if metric != "minkowski":
        return metric, params
    p = params.pop("p", p)
    p = 2 if p is None else p
    if not Interval(numbers.Real, 0, None, closed="right")(p):
        raise ValueError(f"metric_params['p'] must be a float > 0; got {p!r}")
    w = params.pop("w", None)
    if w is None and p in _P_ALIASES:
        return _P_ALIASES[p], params
    if p < 1:
        warnings.warn(
            "Mind that for 0 < p < 1, Minkowski metrics are not distance "
            "metrics. Continuing the execution with `algorithm='brute'`.",
            stacklevel=4,
        )
    return "minkowski", {**params, "p": p, "w": w}


def check_metric_params(metric, params: dict, n_features: int) -> None:
    """Reject metric parameters that the metric does not take."""
    if callable(metric):
        return
    allowed = _METRIC_PARAMS.get(_CANONICAL[metric], ())
    extra = sorted(set(params) - set(allowed))
    if extra:
        raise ValueError(
            f"metric_params {extra} are not parameters of metric {metric!r}; "
            f"it takes {list(allowed) or 'none'}"
        )
    w = params.get("w")
    if w is not None:
        w = np.asarray(w)
        if w.shape != (n_features,) or not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError(
                "the minkowski weights metric_params['w'] must be a 1-D array of "
                f"{n_features} finite non-negative numbers (one per feature); "
                f"got shape {w.shape}"
            )


def is_lazy_callable(fn, params: dict, X: np.ndarray) -> bool:
    """Whether ``fn`` builds a formula from LazyTensors (else: two 1-D arrays).

    A callable is first called on LazyTensors ``(x_i, y_j)``; returning a
    scalar LazyTensor makes it a formula. Anything else (an exception, a
    number) makes it a scikit-learn-style metric of two 1-D arrays, which must
    then return a number.
    """
    try:
        out = fn(Vi(X[:1]), Vj(X[:1]), **params)
    except Exception as exc:  # noqa: BLE001 (the array convention is tried next)
        lazy_error = exc
    else:
        if isinstance(out, LazyTensor):
            if out.dim != 1:
                raise ValueError(
                    "a callable metric must return a scalar formula (dimension 1);"
                    f" it returned a formula of dimension {out.dim}"
                )
            return True
        lazy_error = None
    try:
        value = fn(X[0], X[0], **params)
        float(value)
    except Exception as exc:  # noqa: BLE001 (reported with both attempts)
        raise TypeError(
            "the callable metric must take LazyTensors (x_i, y_j) and return a "
            "scalar formula, or take two 1-D arrays and return a number; it "
            f"does neither (with arrays: {type(exc).__name__}: {exc})"
        ) from (lazy_error or exc)
    return False


# -- searches ------------------------------------------------------------------


class FormulaSearch:
    """K-smallest and radius searches of a :class:`Metric` over fitted points."""

    def __init__(self, metric: Metric, Y: np.ndarray, backend):
        self.metric, self.backend = metric, backend
        self.Y = metric.prepare(Y)
        self._y_j = Vj(self.Y)

    def rdist(self, X: np.ndarray) -> LazyTensor:
        return self.metric.rdist(Vi(X), self._y_j)

    def kmin(self, X: np.ndarray, k: int):
        """(rdist, indices), both (n, k), increasing; ties by index."""
        return self._kmin(self.rdist, self.metric.prepare(X), k)

    def _kmin(self, formula, X: np.ndarray, k: int):
        """The K-min reduction of ``formula(X block)``, by blocks of queries."""
        vals = np.empty((X.shape[0], k), dtype=X.dtype)
        idx = np.empty((X.shape[0], k), dtype=np.int64)
        rows = max(1, QUERY_BLOCK_ENTRIES // k)
        for s in range(0, X.shape[0], rows):
            v, i = formula(X[s : s + rows]).Kmin_argKmin(
                k, axis=1, backend=self.backend
            )
            vals[s : s + rows], idx[s : s + rows] = v.reshape(-1, k), i.reshape(-1, k)
        return vals, idx

    def count(self, X: np.ndarray, threshold: float) -> np.ndarray:
        """Number of fitted points with rdist <= threshold (an estimate: see
        :func:`radius_search`)."""
        F = self.rdist(self.metric.prepare(X)) <= float(threshold)
        return np.rint(F.sum(axis=1, backend=self.backend)).astype(np.int64).ravel()


#: Fewest features for :class:`ExpandedSearch`. The C backend computes dot
#: products of 16 or more features with a matrix-product micro-kernel (pair by
#: pair below). Measured, NearestNeighbors(10).fit(Y).kneighbors(X), 1e4 x 1e4
#: Gaussian float32, median of 4 (load 5.5-6.6), expanded vs direct: 0.84x at
#: D = 8, 0.75x at 12, 0.99x at 16, 1.10x at 20, 1.21x at 24, 1.43x at 32 and
#: 2.99x at 64: below 20 the certificate and re-ranking eat the gain.
EXPANDED_MIN_DIM = 20
#: Most candidates per row. Measured at D = 64, 4e3 x 1e4 float32: the
#: expanded search is 1.3x faster than the direct one at K = 64, even at
#: K = 248 (K' = 256), and slower at K = 256, where the C backend keeps K-min
#: states of one row per block instead of IB: the K-min updates, not the
#: distances, take the time there (radius searches ask for such K).
EXPANDED_MAX_CANDIDATES = 256


def n_candidates(k: int, n_fit: int) -> int:
    """K' for K: 8 extra candidates, so that the certificate rarely fails.

    Measured (K = 5 and 10, float32, each point's neighbours among 1797 to
    5000): with 8 extra, at most 0.1% of the rows fall back, on digits + 100
    and on integer data in {0..3}^64 (many ties); with 4 extra, up to 6%;
    on digits, Gaussian or clustered data, none. 2K candidates cost 5-10%
    more time in the reduction than K + 8 for K = 10, and failed no fewer rows.
    """
    return min(n_fit, k + 8)


def _sqnorms(a: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", a, a, dtype=np.float64)


class ExpandedSearch(FormulaSearch):
    """Exact K-min squared euclidean distances through the expanded form.

    1. Candidates: the K' smallest ``e_j = |y_j|^2 - 2 <x, y_j>`` of each
       query, reduced by the backend's dot-product micro-kernel (``|x|^2`` is
       left out: it does not change the order within a row).
    2. Re-ranking: the exact squared distances of the candidates, direct
       differences in float64, sorted with ties by index; K are kept.
    3. Certificate: a point outside the candidates has a computed value at
       least e_max, the largest candidate's, so its squared distance is at
       least ``e_max + |x|^2 - err`` (:meth:`error_bound`). A row whose K-th
       re-ranked distance lies strictly below that is exact (ties included);
       the other rows are searched again in the direct form
       (:meth:`fallback`).
    """

    def __init__(self, metric: Metric, Y: np.ndarray, backend):
        super().__init__(metric, Y, backend)
        y2 = _sqnorms(self.Y)
        self._y2_j = Vj(y2.astype(self.Y.dtype)[:, None])
        self._y2_max = float(y2.max())

    @staticmethod
    def is_usable_for(metric: Metric, Y: np.ndarray) -> bool:
        """Squared euclidean rdist, and enough features for the micro-kernel."""
        return metric.squared_l2 and Y.shape[1] >= EXPANDED_MIN_DIM

    def expanded(self, X: np.ndarray) -> LazyTensor:
        return self._y2_j - 2 * (Vi(X) | self._y_j)

    def kmin(self, X: np.ndarray, k: int):
        kc = n_candidates(k, self.Y.shape[0])
        x2 = _sqnorms(X)
        # norms near overflow make the expanded values inf - inf: direct form
        big = max(float(x2.max()), self._y2_max) > np.finfo(X.dtype).max / 8
        if kc > EXPANDED_MAX_CANDIDATES or big:
            return super().kmin(X, k)
        e, cand = self._kmin(self.expanded, X, kc)
        d, ind = _rerank(X, self.Y, cand, k)
        lower = e.max(axis=1).astype(np.float64) + x2  # outside the candidates
        exact = d[:, -1] + self.error_bound(x2, d[:, -1]) < lower
        vals = d.astype(X.dtype)
        redo = np.flatnonzero(~exact) if kc < self.Y.shape[0] else []
        if len(redo):
            vals[redo], ind[redo] = self.fallback(X[redo], k)
        return vals, ind

    def error_bound(self, x2: np.ndarray, d_k: np.ndarray) -> np.ndarray:
        """A bound, per row, on the rounding errors that the certificate meets.

        With u the unit roundoff of the dtype (eps / 2), D features, and
        Higham's gamma_D = D u / (1 - D u) (Accuracy and Stability of
        Numerical Algorithms, 2nd ed., section 3.1), e_j is off by at most:

        - 2 u |y_j|^2 from |y_j|^2, summed in float64 and rounded once;
        - 2 gamma_D |x| |y_j| from the dot product: D products summed in any
          order, with FMA or not (the factor 2 is exact);
        - u (|y_j|^2 + 2 |x| |y_j|) (1 + O(u)) from the subtraction.

        As 2 |x| |y| <= |x|^2 + |y|^2, that is (D + 4) u (|x|^2 + |y_j|^2) to
        first order; twice it, (D + 4) eps (|x|^2 + max |y|^2), covers the
        higher-order terms while D u < 1/2. The float64 sums (|x|^2, the
        candidates' distances) err by (D + 2) u64 relative, covered by
        (D + 4) eps (|x|^2 + d_K) as eps >= eps64; underflow costs at most
        ``tiny`` per operation.
        """
        D, fi = self.Y.shape[1], np.finfo(self.Y.dtype)
        return (D + 4) * (fi.eps * (2 * x2 + self._y2_max + d_k) + fi.tiny)

    def fallback(self, X: np.ndarray, k: int):
        """The direct-form search, for the rows that failed the certificate."""
        return super().kmin(X, k)


def _rerank(X: np.ndarray, Y: np.ndarray, cand: np.ndarray, k: int):
    """The ``k`` nearest candidates by exact squared distance: (float64, index).

    Candidates are put in index order first, so that the stable sort by
    distance leaves ties in index order, as the direct reduction does.
    """
    n, kc = cand.shape
    d, ind = np.empty((n, k)), np.empty((n, k), dtype=np.int64)
    rows = max(1, RERANK_BLOCK_ENTRIES // (kc * X.shape[1]))
    for s in range(0, n, rows):
        c = np.sort(cand[s : s + rows], axis=1)
        diff = np.subtract(Y[c], X[s : s + rows, None, :], dtype=np.float64)
        dist = np.einsum("rcf,rcf->rc", diff, diff)
        order = np.argsort(dist, axis=1, kind="stable")[:, :k]
        d[s : s + rows] = np.take_along_axis(dist, order, axis=1)
        ind[s : s + rows] = np.take_along_axis(c, order, axis=1)
    return d, ind


#: Cluster pruning (``algorithm='auto'`` picks it): at most this many
#: features, at least this many fitted points. Fitted points are cut into
#: cells of ``PRUNE_CELL_POINTS`` consecutive points along a Morton
#: (Z-order) curve, queries into cells of ``PRUNE_QUERY_POINTS``: balanced
#: cells whatever the density (uniform or clustered data). Smaller cells mean
#: fewer candidate pairs and more blocks; the C backend reduces every block
#: in one call.
PRUNE_MAX_DIM = 3
PRUNE_MIN_FIT = 1_000
#: ... and a search prunes only from this many pairs (queries x fitted
#: points): below, brute force is as fast (measured, K = 10, D = 3 float32,
#: fit + query: pruned / brute 0.9 at 1e5 x 1e3, 1.3 at 5e3 x 3e3, 2.4 at
#: 1e4 x 1e4; a fit with few queries never builds the cells).
PRUNE_MIN_PAIRS = 2**24
PRUNE_CELL_POINTS = 32
PRUNE_QUERY_POINTS = 32
#: Fitted cells nearest to a query cell's centre that bound its K-th
#: neighbour distance (besides the K / PRUNE_CELL_POINTS cells needed).
PRUNE_NEAR_CELLS = 8
#: The first pass visits the cells within this times the K-th neighbour
#: distance of a query cell's centre (queries farther out: a second pass).
PRUNE_RADIUS_FACTOR = 1.3
#: Queries per pruned pass (more: chunks consecutive in Z-order, which bound
#: the temporaries; each pass also gathers the fitted points once: measured
#: at 1e6 x 1e6, chunks of 2^18 took 11-12.7 s and 364 MB, one pass 8.0 s
#: and 643 MB).
PRUNE_QUERY_CHUNK = 2**20
#: Relative slack on the pruning radii: the K-min values are rounded (float32).
_PRUNE_SLACK = 1e-4


#: Bit spreading for Z-order codes: (shift, mask) steps that put bit b of a
#: coordinate at bit d * b (the classic "part1by1" / "part1by2").
_SPREAD = {
    2: [(16, 0x0000FFFF0000FFFF), (8, 0x00FF00FF00FF00FF), (4, 0x0F0F0F0F0F0F0F0F),
        (2, 0x3333333333333333), (1, 0x5555555555555555)],
    3: [(32, 0x001F00000000FFFF), (16, 0x001F0000FF0000FF), (8, 0x100F00F00F00F00F),
        (4, 0x10C30C30C30C30C3), (2, 0x1249249249249249)],
}


def _morton(P: np.ndarray, lo: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Z-order codes of ``P`` on the grid ``(P - lo) * scale`` (clipped)."""
    d = P.shape[1]
    bits = {1: 62, 2: 31, 3: 21}[d]
    top = 2.0**bits - 1
    q = np.clip((P - lo) * scale * top, 0, top).astype(np.uint64)
    if d == 1:
        return q[:, 0]
    code = np.zeros(len(P), np.uint64)
    for c in range(d):
        x = q[:, c]
        for shift, mask in _SPREAD[d]:
            x = (x | (x << np.uint64(shift))) & np.uint64(mask)
        code |= x << np.uint64(c)
    return code


@dataclass(frozen=True)
class Cells:
    """Points cut into cells of consecutive points along a Z-order curve:
    ``order`` (sorted -> caller's index), ``labels`` (cell of each point, in
    the caller's order), ``ranges`` (C, 2) in sorted order, bounding boxes
    ``lo``, ``hi`` (float64), ``radii``: the largest distance from a box's
    centre to its points.

    A run of consecutive Z-order points may jump across the space; cells
    whose box is much larger than most are halved (a few rounds), so that
    boxes stay compact."""

    order: np.ndarray
    labels: np.ndarray
    ranges: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    radii: np.ndarray

    @classmethod
    def cut(cls, P: np.ndarray, per_cell: int, frame) -> Cells:
        order = np.argsort(_morton(P, *frame), kind="stable")
        Ps = P[order].astype(np.float64)
        starts = np.arange(0, len(P), per_cell)
        for _ in range(4):
            ends = np.append(starts[1:], len(P))
            half = _half_diagonals(Ps, starts)
            split = (half > 2 * np.median(half)) & (ends - starts > 1)
            if not split.any():
                break
            starts = np.sort(np.concatenate([starts, (starts + ends)[split] // 2]))
        ends = np.append(starts[1:], len(P))
        lo, hi = np.minimum.reduceat(Ps, starts), np.maximum.reduceat(Ps, starts)
        counts = ends - starts
        d2 = ((Ps - np.repeat((lo + hi) / 2, counts, axis=0)) ** 2).sum(1)
        labels = np.empty(len(P), np.int64)
        labels[order] = np.repeat(np.arange(len(starts)), counts)
        return cls(order, labels, np.stack([starts, ends], 1), lo, hi,
                   np.sqrt(np.maximum.reduceat(d2, starts)) * (1 + 1e-12))

    @property
    def centers(self) -> np.ndarray:
        return (self.lo + self.hi) / 2

    @property
    def counts(self) -> np.ndarray:
        return self.ranges[:, 1] - self.ranges[:, 0]


def _half_diagonals(Ps: np.ndarray, starts: np.ndarray) -> np.ndarray:
    lo, hi = np.minimum.reduceat(Ps, starts), np.maximum.reduceat(Ps, starts)
    return np.sqrt((((hi - lo) / 2) ** 2).sum(1))


#: Cells per group in the search for near cells: groups of 8 consecutive
#: cells (query side and fitted side) are paired first, through k-d trees of
#: the fitted groups' centres, then their cells box by box.
_GROUP = 8


class Grid:
    """The fitted points in Z-order cells (:class:`Cells`), the frame of
    their Z-order codes, the cells' groups (``_GROUP`` consecutive cells:
    ``first`` cell of each, bounding boxes ``glo``, ``ghi``), a k-d tree of
    the cells' centres and k-d trees of the groups' centres (scipy's, on
    n / 256 points: they find the groups near a group of query cells; the
    point pairs go through the block-sparse reduction). One tree per class
    of group radius (the smaller three quarters, the others): a search
    reaches out by the largest radius of the tree's groups.

    Built at the first pruned search (``Grid.fit`` only stores the points):
    a fit followed by a few queries stays as cheap as brute force."""

    def __init__(self, Y: np.ndarray):
        self._Y = Y

    @classmethod
    def fit(cls, Y: np.ndarray) -> Grid:
        return cls(Y)

    @functools.cached_property
    def _built(self) -> tuple:
        from scipy.spatial import cKDTree

        Y = self._Y
        lo = Y.min(axis=0).astype(np.float64)
        extent = Y.max(axis=0).astype(np.float64) - lo
        scale = 1 / np.maximum(extent.max(), 1e-300) * np.ones_like(extent)
        frame = (lo, scale)
        cells = Cells.cut(Y, PRUNE_CELL_POINTS, frame)
        first = np.arange(0, len(cells.counts) + _GROUP, _GROUP)
        first[-1] = len(cells.counts)
        first = np.unique(first)
        glo = np.minimum.reduceat(cells.lo, first[:-1])
        ghi = np.maximum.reduceat(cells.hi, first[:-1])
        radii = np.sqrt((((ghi - glo) / 2) ** 2).sum(1))
        small = radii <= np.quantile(radii, 0.75)
        trees = tuple(
            (cKDTree((glo[ids] + ghi[ids]) / 2), ids, radii[ids].max())
            for ids in (np.flatnonzero(small), np.flatnonzero(~small)) if len(ids)
        )
        self._Y = None
        return frame, cells, first, glo, ghi, trees, cKDTree((cells.lo + cells.hi) / 2)

    frame = property(lambda self: self._built[0])
    cells = property(lambda self: self._built[1])
    first = property(lambda self: self._built[2])  # first cell of each group
    glo = property(lambda self: self._built[3])  # groups' boxes
    ghi = property(lambda self: self._built[4])
    trees = property(lambda self: self._built[5])  # (tree, group ids, largest radius)
    cell_tree = property(lambda self: self._built[6])  # the cells' centres

    def nearest(self, c: np.ndarray, m: int) -> np.ndarray:
        """(len(c), m) labels of the cells of nearest centres to points ``c``."""
        m = min(m, len(self.cells.counts))
        return self.cell_tree.query(c, k=m)[1].reshape(len(c), m)


def _box_dist(a, lo_a, hi_a, b, lo_b, hi_b) -> np.ndarray:
    """Smallest distance between points of boxes ``[lo_a[a], hi_a[a]]`` and
    ``[lo_b[b], hi_b[b]]``, feature by feature (1-D gathers: 6x faster than
    gathering rows)."""
    acc = np.zeros(len(a))
    col = np.ascontiguousarray
    for f in range(lo_a.shape[1]):
        g = np.maximum(col(lo_b[:, f]).take(b) - col(hi_a[:, f]).take(a),
                       col(lo_a[:, f]).take(a) - col(hi_b[:, f]).take(b))
        np.maximum(g, 0, out=g)
        acc += g * g
    return np.sqrt(acc, out=acc)


def _group_pairs(lo, hi, radius, g: Grid):
    """(A, B): the groups of boxes ``[lo[A], hi[A]]`` and fitted groups
    ``B`` within ``radius[A]``, through k-d trees of centres (within radius
    + both radii); boxes are grouped by that reach (classes a factor sqrt(2)
    apart), so that no search reaches much farther than it needs to."""
    from scipy.spatial import cKDTree

    c = (lo + hi) / 2
    reach = radius + np.sqrt((((hi - lo) / 2) ** 2).sum(1))
    finite = np.isfinite(reach)
    cls = np.full(len(c), -1, np.int64)  # -1: no bound, every group
    if finite.any():
        base = max(reach[finite].min(), 1e-300)
        cls[finite] = np.floor(2 * np.log2(reach[finite] / base)).astype(np.int64)
    n_groups = len(g.first) - 1
    a_parts, b_parts = [], []
    for k in np.unique(cls):
        rows = np.flatnonzero(cls == k)
        if k < 0:
            a_parts.append(np.repeat(rows, n_groups))
            b_parts.append(np.tile(np.arange(n_groups), len(rows)))
            continue
        qtree = cKDTree(c[rows])
        for tree, ids, r_max in g.trees:
            m = qtree.sparse_distance_matrix(
                tree, (reach[rows].max() + r_max) * (1 + 1e-9) + 1e-300,
                output_type="ndarray")
            a_parts.append(rows[m["i"]])
            b_parts.append(ids[m["j"]])
    a, b = np.concatenate(a_parts), np.concatenate(b_parts)
    near = _box_dist(a, lo, hi, b, g.glo, g.ghi) <= radius[a]
    return a[near], b[near]


def _expand(outer, first, n_inner):
    """(outer index, inner index) of every member ``first[outer] + t``,
    ``t < n_inner`` (vectorised, for groups of varying sizes)."""
    reps = np.repeat(np.arange(len(outer)), n_inner)
    t = np.arange(len(reps)) - np.repeat(np.cumsum(n_inner) - n_inner, n_inner)
    return reps, first[reps] + t


def _near_pairs(lo, hi, radius, g: Grid):
    """(a, b): the pairs of boxes ``[lo[a], hi[a]]`` (in an order where
    neighbours follow each other: cells of a Z-order) and fitted cells ``b``
    within ``radius[a]`` box to box, grouped by a, nearest first: pairs of
    groups of ``_GROUP`` boxes first (:func:`_group_pairs`), then query
    groups and fitted cells, then cells and cells, vectorised."""
    fc = g.cells
    starts = np.arange(0, len(lo), _GROUP)
    glo, ghi = np.minimum.reduceat(lo, starts), np.maximum.reduceat(hi, starts)
    grad = np.maximum.reduceat(radius, starts)
    A, B = _group_pairs(glo, ghi, grad, g)
    # query groups x fitted cells
    k, b = _expand(B, g.first[B], g.first[B + 1] - g.first[B])
    A = A[k]
    near = _box_dist(A, glo, ghi, b, fc.lo, fc.hi) <= grad[A]
    A, b = A[near], b[near]
    # query cells x fitted cells
    k, a = _expand(A, starts[A], np.minimum(_GROUP, len(lo) - starts[A]))
    b = b[k]
    dist = _box_dist(a, lo, hi, b, fc.lo, fc.hi)
    near = dist <= radius[a]
    a, b, dist = a[near], b[near], dist[near]
    # grouped by a, by increasing distance: one sort of a float key
    order = np.argsort(a + dist / (2 * dist.max(initial=0) + 1e-300))
    return a[order], b[order]


class PrunedSearch(FormulaSearch):
    """Exact K-smallest searches that visit only the nearby cells.

    Fitted points and queries are cut into cells along a Z-order curve
    (:class:`Cells`). For each query cell a, a radius ``u_a``: the K-th
    neighbour distance of its centre among the points of the nearest fitted
    cells (a first, small block-sparse K-min), times
    ``PRUNE_RADIUS_FACTOR``. The K-min reduction then runs block-sparse on
    the pairs of cells within ``u_a`` box to box, in one call of the C
    backend, nearest cells first (the K-th value falls early and most tiles
    are skipped whole).

    The result of a query q at depth ``delta`` inside its cell's box is
    exact if its K-th distance is at most ``u_a + delta``: every point
    closer than that lies in a visited cell. The other queries (a few
    percent) are searched again, each alone, within their K-th distance
    found, which bounds the true one. Same results as the dense search
    (exact; ties by index).
    """

    def __init__(self, metric: Metric, Y: np.ndarray, backend, grid: Grid):
        super().__init__(metric, Y, backend)
        self.grid = grid

    @staticmethod
    def is_usable_for(metric: Metric, Y: np.ndarray, params: dict) -> bool:
        return (metric.squared_l2 and params.get("w") is None
                and Y.shape[1] <= PRUNE_MAX_DIM and len(Y) >= PRUNE_MIN_FIT)

    def _centre_kth(self, c: np.ndarray, k: int) -> np.ndarray:
        """The K-th neighbour distance of points ``c`` among the points of
        their nearest fitted cells (an upper bound of the true one; inf
        where these cells hold fewer than K points)."""
        fc = self.grid.cells
        near = self.grid.nearest(c, -(-k // PRUNE_CELL_POINTS) + PRUNE_NEAR_CELLS)
        m = near.shape[1]
        one = np.arange(len(c))
        bs = kr.BlockSparsity.from_pairs(
            (len(c), len(self.Y)), one, fc.order, np.repeat(one, m), near.ravel(),
            np.stack([one, one + 1], 1), fc.ranges, priority=np.arange(len(c) * m))
        kth = Vi(c.astype(self.Y.dtype)).sqdist(self._y_j).Kmin(
            k, axis=1, backend=self.backend, ranges=bs)[:, -1]
        return np.sqrt(kth.astype(np.float64))

    def _pruned(self, X, order, ranges, lo, hi, radius, k: int):
        """K-min of the queries ``X`` (cells ``ranges`` of ``X[order]`` with
        boxes ``lo``, ``hi``) over the fitted cells within ``radius`` of
        their cell, nearest cells first (the K-th value falls early, most
        tiles are skipped)."""
        a, b = _near_pairs(lo, hi, radius, self.grid)
        fc = self.grid.cells
        bs = kr.BlockSparsity.from_pairs((len(X), len(self.Y)), order, fc.order, a, b,
                                         ranges, fc.ranges, priority=np.arange(len(a)))
        v, i = self.rdist(X).Kmin_argKmin(k, axis=1, backend=self.backend, ranges=bs)
        return v.reshape(-1, k), i.reshape(-1, k)

    def kmin(self, X: np.ndarray, k: int):
        X = self.metric.prepare(X)
        if len(X) * len(self.Y) < PRUNE_MIN_PAIRS or k >= len(self.Y) // 2:
            return super().kmin(X, k)  # brute force pays here
        if len(X) <= PRUNE_QUERY_CHUNK:
            return self._kmin_chunk(X, k)
        # chunks of queries consecutive in Z-order (compact regions): the
        # temporaries of the cell pairs stay bounded
        order = np.argsort(_morton(X, *self.grid.frame), kind="stable")
        v = np.empty((len(X), k), X.dtype)
        i = np.empty((len(X), k), np.int64)
        for s in range(0, len(X), PRUNE_QUERY_CHUNK):
            rows = order[s:s + PRUNE_QUERY_CHUNK]
            v[rows], i[rows] = self._kmin_chunk(X[rows], k)
        return v, i

    def _kmin_chunk(self, X: np.ndarray, k: int):
        qc = Cells.cut(X, PRUNE_QUERY_POINTS, self.grid.frame)
        u = self._centre_kth(qc.centers, k) * PRUNE_RADIUS_FACTOR
        v, i = self._pruned(X, qc.order, qc.ranges, qc.lo, qc.hi, u, k)
        # the certificate: the K-th distance (rounded up) within u + depth
        Xd = X.astype(np.float64)
        depth = np.minimum(Xd - qc.lo[qc.labels], qc.hi[qc.labels] - Xd).min(1)
        dk = np.sqrt(v[:, -1].astype(np.float64)) * (1 + _PRUNE_SLACK) + 1e-30
        again = np.flatnonzero(~(dk <= u[qc.labels] + depth))
        if len(again):
            # (in the queries' Z-order, so that groups of them are compact)
            rank = np.empty(len(X), np.int64)
            rank[qc.order] = np.arange(len(X))
            again = again[np.argsort(rank[again])]
            P = Xd[again]
            one = np.arange(len(again))
            v[again], i[again] = self._pruned(X[again], one, np.stack([one, one + 1], 1),
                                              P, P, dk[again], k)
        return v, i


def formula_search(metric: Metric, Y: np.ndarray, backend, grid: Grid | None = None
                   ) -> FormulaSearch:
    """The search of a formula metric: :class:`PrunedSearch` on a fitted
    :class:`Grid`, else :class:`ExpandedSearch` where it applies."""
    if grid is not None:
        return PrunedSearch(metric, Y, backend, grid)
    usable = ExpandedSearch.is_usable_for(metric, Y)
    return (ExpandedSearch if usable else FormulaSearch)(metric, Y, backend)


class DenseSearch:
    """The same searches for a scikit-learn-style callable, pair by pair."""

    def __init__(self, fn, params: dict, Y: np.ndarray):
        self.fn, self.params, self.Y = fn, params, Y
        self.metric = Metric(None, _identity, _identity)  # values are distances

    def _blocks(self, X: np.ndarray):
        from sklearn.metrics import pairwise_distances

        rows = max(1, DENSE_BLOCK_ENTRIES // self.Y.shape[0])
        for s in range(0, X.shape[0], rows):
            D = pairwise_distances(
                X[s : s + rows], self.Y, metric=self.fn, **self.params
            )
            yield s, D.astype(X.dtype, copy=False)

    def kmin(self, X: np.ndarray, k: int):
        vals = np.empty((X.shape[0], k), dtype=X.dtype)
        idx = np.empty((X.shape[0], k), dtype=np.int64)
        for s, D in self._blocks(X):
            order = np.argsort(D, axis=1, kind="stable")[:, :k]
            vals[s : s + len(D)] = np.take_along_axis(D, order, axis=1)
            idx[s : s + len(D)] = order
        return vals, idx

    def count(self, X: np.ndarray, threshold: float) -> np.ndarray:
        return np.concatenate(
            [(D <= threshold).sum(axis=1) for _, D in self._blocks(X)]
        )


def radius_search(search, X: np.ndarray, threshold: float, n_fit: int):
    """Points within ``threshold`` (in rdist units) of each query, increasing.

    Counts give each row's K; ``Kmin_argKmin`` with one more than the count
    then finds the points (rows grouped by K rounded up to 16, 64, 256, ...:
    each K is a kernel to compile, once). A row whose K-th value is still
    within the threshold is searched again with a larger K: the result does
    not rely on the count being computed exactly as the K-min values are.

    Returns per-row lists ``(values, indices)`` of arrays.
    """
    n = X.shape[0]
    vals, inds = [None] * n, [None] * n
    need = np.minimum(search.count(X, threshold) + 1, n_fit)
    todo = np.arange(n)
    while todo.size:
        ks = np.minimum(_k_bucket(need[todo]), n_fit)
        again = []
        for k in np.unique(ks):
            rows = todo[ks == k]
            v, i = search.kmin(X[rows], int(k))
            within = v <= threshold  # a prefix of each row (NaN sorts last)
            more = within[:, -1] & (k < n_fit)
            need[rows[more]] = 2 * k
            again.append(rows[more])
            for r, row_v, row_i, m in zip(rows, v, i, within):
                vals[r], inds[r] = row_v[m], row_i[m]
        todo = np.concatenate(again)
    return vals, inds


def _k_bucket(need: np.ndarray) -> np.ndarray:
    """``need`` rounded up to a power of 4, at least 16."""
    bits = np.ceil(np.log2(np.maximum(need, 16))).astype(np.int64)
    return np.left_shift(1, bits + bits % 2)


# -- results -------------------------------------------------------------------


def drop_self(vals, ind):
    """Remove each fitted point from its own neighbours (scikit-learn's rule).

    When more duplicates than neighbours hide the point itself, the first
    neighbour (a duplicate) is dropped instead.
    """
    n, k = ind.shape
    keep = ind != np.arange(n)[:, None]
    keep[keep.all(axis=1), 0] = False
    return vals[keep].reshape(n, k - 1), ind[keep].reshape(n, k - 1)


def csr(data, indices, indptr, shape):
    """A CSR matrix of the sparse interface that scikit-learn is set to return."""
    from scipy.sparse import csr_array, csr_matrix
    from sklearn import get_config

    interface = get_config().get("sparse_interface", "spmatrix")
    cls = csr_array if interface == "sparray" else csr_matrix
    return cls((data, indices, indptr), shape=shape)


def object_array(parts):
    out = np.empty(len(parts), dtype=object)
    for r, a in enumerate(parts):
        out[r] = a
    return out


def check_n_neighbors(n, default) -> int:
    """K of a query: ``n``, or the constructor's ``default`` for None."""
    n = default if n is None else n
    if n is None:
        raise ValueError("n_neighbors must be given (the constructor's is None)")
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"n_neighbors must be an integer, got {n!r}")
    if n <= 0:
        raise ValueError(f"Expected n_neighbors > 0. Got {n}")
    return int(n)


def check_mode(mode) -> None:
    if mode not in ("connectivity", "distance"):
        raise ValueError(
            'Unsupported mode, must be one of "connectivity", or "distance" '
            f'but got "{mode}" instead'
        )


# -- constructor parameters -------------------------------------------------------


class InvalidParameterError(ValueError, TypeError):
    """A constructor parameter of the wrong type or value (as scikit-learn's)."""


@dataclass(frozen=True)
class Interval:
    """Numbers of ``kind`` (``numbers.Integral`` or ``numbers.Real``) in a range."""

    kind: type
    left: float | None
    right: float | None
    closed: str = "left"  # "left", "right", "both" or "neither"

    def __call__(self, v) -> bool:
        if isinstance(v, bool) or not isinstance(v, self.kind):
            return False
        lo_ok = self.left is None or (
            v >= self.left if self.closed in ("left", "both") else v > self.left
        )
        hi_ok = self.right is None or (
            v <= self.right if self.closed in ("right", "both") else v < self.right
        )
        return bool(lo_ok and hi_ok)

    def __str__(self):
        what = "an int" if self.kind is numbers.Integral else "a float"
        lb = "[" if self.closed in ("left", "both") else "("
        rb = "]" if self.closed in ("right", "both") else ")"
        lo = "-inf" if self.left is None else self.left
        hi = "inf" if self.right is None else self.right
        return f"{what} in the range {lb}{lo}, {hi}{rb}"


@dataclass(frozen=True)
class Options:
    """One of a set of values (strings, or dtypes compared with ``np.dtype``)."""

    values: tuple
    dtypes: bool = False

    def __call__(self, v) -> bool:
        if self.dtypes:
            try:
                return v is not None and np.dtype(v).name in self.values
            except TypeError:
                return False
        return isinstance(v, str) and v in self.values

    def __str__(self):
        kind = "a dtype" if self.dtypes else "a str"
        return f"{kind} among {{{', '.join(repr(v) for v in self.values)}}}"


def _describe(constraint) -> str:
    if constraint is None:
        return "None"
    if constraint is callable:
        return "a callable"
    if constraint is dict:
        return "an instance of 'dict'"
    return str(constraint)


def _satisfied(constraint, value) -> bool:
    if constraint is None:
        return value is None
    if constraint is callable:
        return callable(value)
    if isinstance(constraint, type):
        return isinstance(value, constraint)
    return constraint(value)


def validate_params(estimator) -> None:
    """Check every constructor parameter against ``_parameter_constraints``."""
    for name, constraints in estimator._parameter_constraints.items():
        value = getattr(estimator, name)
        if any(_satisfied(c, value) for c in constraints):
            continue
        descr = [_describe(c) for c in constraints]
        allowed = descr[0] if len(descr) == 1 else ", ".join(descr[:-1])
        if len(descr) > 1:
            allowed += f" or {descr[-1]}"
        raise InvalidParameterError(
            f"The {name!r} parameter of {type(estimator).__name__} must be "
            f"{allowed}. Got {value!r} instead."
        )
