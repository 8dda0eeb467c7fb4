"""Each row's K smallest values over tiles computed elsewhere, and exact re-ranking.

The K-min reductions of :mod:`kerneltools.lazy` compute their values and
select them in one pass. When the values come faster from another routine
(a BLAS matrix product of a tile of queries by a tile of points, for the
expanded squared distances ``|y|^2 - 2 <x, y>``), :class:`TileSelection`
does the selection alone: the tiles of a block of rows come in column by
column, and each row keeps the columns whose value is at most its K-th
smallest value seen so far plus a slack (a bound on the tiles' rounding
errors), in a few slots. Memory: ``capacity`` slots per row; time: one
vector comparison per 16 values, the rare survivors appended, a
compaction (a bisection by vector counts) when a row's slots fill.

:meth:`TileSelection.rerank` ranks each row's candidates by their exact
squared distances (float64 direct differences, ties by index): with a
slack of twice the bound on ``|computed - exact|``, that is the exact K
nearest neighbours.

>>> import numpy as np
>>> from kerneltools.selection import TileSelection
>>> rng = np.random.default_rng(0)
>>> X, Y = rng.normal(size=(5, 20)), rng.normal(size=(1000, 20))
>>> sel = TileSelection(5, 3, slack=1e-3, dtype="float64")
>>> for c0 in range(0, 1000, 256):
...     y = Y[c0:c0 + 256]
...     sel.update((y ** 2).sum(1) - 2 * X @ y.T, c0)  # columns c0, c0 + 1, ...
>>> d, ind = sel.rerank(X, Y)
>>> exact = ((X[:, None] - Y[None]) ** 2).sum(-1)
>>> bool((ind == np.argsort(exact, axis=1)[:, :3]).all())
True
"""

from __future__ import annotations

import numbers

import numpy as np

from .backend.cpu import _select as _sel
from .config import check_backend
from .exceptions import BackendUnavailableError

__all__ = ["TileSelection", "block_sparse_knn", "box_pairs"]


def _integer(value, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"'{name}' must be an integer >= {low}, got {value!r}")
    if value < low:
        raise ValueError(f"'{name}' must be an integer >= {low}, got {value}")
    return int(value)


class TileSelection:
    """Each row's K smallest values, and all within ``slack`` of the K-th,
    over tiles of columns.

    Parameters
    ----------
    n_rows : int
        Rows of every tile.
    k : int
        K: the smallest values each row keeps.
    slack : float or array-like of shape (n_rows,), default=0.0
        Values at most the K-th smallest plus ``slack`` (>= 0, finite) are
        kept too: the candidates that rounding errors of the tiles up to
        ``slack / 2`` could hide.
    capacity : int, default=None
        Slots per row (at least ``k + 32``); ``2 k + 64`` by default. A row
        whose band of values within the slack fills more than half of its
        free slots is given up (:attr:`overflow`).
    dtype : {"float32", "float64"}, default="float32"
        The tiles' dtype.
    backend : {"auto", "cpu", "numpy"} or None, default=None
        Where the selection runs: compiled C, or NumPy (the reference); None:
        the configured backend ("cuda" selects on the host, as "auto").

    Attributes
    ----------
    overflow : ndarray of bool, shape (n_rows,)
        The rows given up: search them another way.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.selection import TileSelection
    >>> sel = TileSelection(2, 1, dtype="float64", backend="numpy")
    >>> sel.update(np.array([[3.0, 1.0], [0.5, 2.0]]), np.array([0, 1]))
    >>> sel.update(np.array([[0.2, 4.0], [9.0, 7.0]]), np.array([2, 3]))
    >>> sel.threshold
    array([0.2, 0.5])
    """

    def __init__(self, n_rows: int, k: int, *, slack=0.0, capacity: int | None = None,
                 dtype="float32", backend: str | None = None):
        n_rows, k = _integer(n_rows, "n_rows", 1), _integer(k, "k", 1)
        cap = 2 * k + 64 if capacity is None else _integer(capacity, "capacity", k + 32)
        dtype = np.dtype(dtype)
        if dtype not in (np.float32, np.float64):
            raise TypeError(f"'dtype' must be float32 or float64, got {dtype}")
        slack = np.broadcast_to(np.asarray(slack, np.float64), (n_rows,))
        if not (np.isfinite(slack).all() and (slack >= 0).all()):
            raise ValueError(
                "'slack' must be finite and >= 0 (one value, or one per row)")
        self._lib = _library(backend, dtype)
        self._state = _sel.TileState(n_rows, k, cap, slack, dtype)

    @property
    def overflow(self) -> np.ndarray:
        return self._state.over.astype(bool)

    @property
    def threshold(self) -> np.ndarray:
        """Each row's threshold (a copy): later values above it are rejected
        (+inf until the row's slots first fill)."""
        return self._state.thr.copy()

    def update(self, tile: np.ndarray, columns, rows=None) -> None:
        """Fold in ``tile``, the values of some rows at some columns.

        Parameters
        ----------
        tile : ndarray of shape (R, C), of the selection's dtype
            ``tile[q, l]``: the value of row ``rows[q]`` at column
            ``columns[l]``.
        columns : int or array-like of C ints
            The columns' indices, or the first of C consecutive ones.
        rows : array-like of R distinct ints, default=None
            The rows (None: all ``n_rows``, in order).
        """
        s = self._state
        n = len(s.cnt) if rows is None else len(rows)
        if not (isinstance(tile, np.ndarray) and tile.dtype == s.dtype
                and tile.ndim == 2 and tile.shape[0] == n):
            raise ValueError(
                f"'tile' must be a 2-D {s.dtype} array of {n} rows, got "
                f"{getattr(tile, 'dtype', type(tile).__name__)} of shape "
                f"{np.shape(tile)}")
        if tile.strides[1] != tile.itemsize or tile.strides[0] < 0:
            tile = np.ascontiguousarray(tile)
        if np.ndim(columns):
            columns = _indices(columns, "columns", tile.shape[1], None)
        else:
            columns = _integer(columns, "columns", 0)
        if rows is not None:
            rows = _indices(rows, "rows", n, len(s.cnt))
        _sel.select_tile(s, tile, columns, rows, self._lib)

    def rerank(self, X: np.ndarray, Y: np.ndarray, labels=None):
        """The K nearest candidates of each row by exact squared euclidean
        distance (float64 direct differences; equal distances by label).

        Parameters
        ----------
        X : array-like of shape (n_rows, D)
            The rows' points.
        Y : array-like of shape (n_columns, D)
            The columns' points (column j is ``Y[j]``).
        labels : array-like of n_columns ints, default=None
            What the results call column j, and the order of ties (None: j):
            the points' indices when the columns are the points reordered.

        Returns
        -------
        sqdist : ndarray of shape (n_rows, k), float64
            Increasing; rows of :attr:`overflow` are unset.
        labels : ndarray of shape (n_rows, k), int64
        """
        s = self._state
        X, Y = np.asarray(X, np.float64), np.asarray(Y, np.float64)
        if X.ndim != 2 or Y.ndim != 2 or X.shape != (len(s.cnt), Y.shape[1]):
            raise ValueError(
                f"'X' must be ({len(s.cnt)}, D) and 'Y' (n_columns, D), got shapes "
                f"{X.shape} and {Y.shape}")
        top = s.cols[s.cnt[:, None] > np.arange(s.cap)].max(initial=-1)
        if top >= len(Y):
            raise ValueError(f"'Y' has {len(Y)} rows, but the tiles had column {top}")
        rows = np.flatnonzero(s.cnt[s.over == 0] < s.k)
        if len(rows):
            raise ValueError(f"{len(rows)} rows saw fewer than k = {s.k} values")
        if labels is not None:
            labels = _indices(labels, "labels", len(Y), None)
        return _sel.rerank(s, X, Y, labels, self._lib)


def block_sparse_knn(X, Y, k: int, query_starts, pair_starts, pair_cells, cells, *,
                     lo=None, hi=None, labels=None, rows=None,
                     backend: str | None = None):
    """The K nearest points of each query among the points of given cells,
    by exact squared euclidean distance (float64 direct differences; ties
    by label): a block-sparse K-min for low dimensions, where the distances
    cost less than the selection.

    The queries are in cells: query cell c holds ``X[query_starts[c]:
    query_starts[c + 1]]`` and visits the point cells ``pair_cells[p]``,
    ``pair_starts[c] <= p < pair_starts[c + 1]``, in that order (nearest
    first: the threshold of each query's selection falls early, later
    values mostly fail one vector comparison, and with boxes, whole cells
    are skipped by one box distance). Point cell b is ``Y[cells[b, 0]:
    cells[b, 1]]``, within the box ``lo[b]``, ``hi[b]`` if given.

    Parameters
    ----------
    X : array-like of shape (n, D)
        The queries, cell after cell.
    Y : array-like of shape (m, D)
        The points, cell after cell.
    k : int
        Neighbours per query.
    query_starts, pair_starts : array-like of C + 1 ints
        Non-decreasing, from 0 to n and to the number of pairs.
    pair_cells : array-like of ints
        The point cells each query cell visits.
    cells : array-like of shape (B, 2)
        ``[r0, r1)`` ranges of rows of Y.
    lo, hi : array-like of shape (B, D), default=None
        Bounding boxes of the point cells (each point of cell b within
        them): a query skips a cell whose box is farther than its K-th
        distance so far. None: no cell is skipped.
    labels : array-like of m ints, default=None
        What the results call row j of Y, and the order of ties (None: j).
    rows : array-like of n ints, default=None
        The row of the results for each query, a permutation of 0 to n - 1
        (None: its own).
    backend : {"auto", "cpu", "numpy"} or None, default=None
        Compiled C (one thread per core), or NumPy.

    Returns
    -------
    sqdist : ndarray of shape (n, k), float64
        Increasing; +inf where a query visited fewer than k points.
    labels : ndarray of shape (n, k), int64
        -1 where a query visited fewer than k points.

    Examples
    --------
    Two cells of two points each; one query cell visits both, nearest first:

    >>> import numpy as np
    >>> from kerneltools.selection import block_sparse_knn
    >>> Y = np.array([[0.0], [1.0], [5.0], [6.0]])
    >>> X = np.array([[0.2], [5.9]])
    >>> sqdist, labels = block_sparse_knn(X, Y, 2, [0, 2], [0, 2], [0, 1],
    ...                                   [[0, 2], [2, 4]], backend="numpy")
    >>> np.round(sqdist, 2), labels
    (array([[0.04, 0.64],
           [0.01, 0.81]]), array([[0, 1],
           [3, 2]]))
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    if X.ndim != 2 or Y.ndim != 2 or X.shape[1] != Y.shape[1]:
        raise ValueError(f"'X' and 'Y' must be 2-D with as many columns, got shapes "
                         f"{X.shape} and {Y.shape}")
    (n, D), m = X.shape, Y.shape[0]
    k = _integer(k, "k", 1)
    qs = _starts(query_starts, "query_starts", None, n)
    cells = np.ascontiguousarray(cells, dtype=np.int64).reshape(-1, 2)
    if len(cells) and (cells.min() < 0 or cells.max() > m
                       or (cells[:, 0] > cells[:, 1]).any()):
        raise ValueError(f"'cells' must be [r0, r1) with 0 <= r0 <= r1 <= {m}")
    pc = np.ascontiguousarray(pair_cells, dtype=np.int64).ravel()
    if len(pc) and (pc.min() < 0 or pc.max() >= len(cells)):
        raise ValueError(f"'pair_cells' must be cell numbers < {len(cells)}")
    ps = _starts(pair_starts, "pair_starts", len(qs), len(pc))
    if lo is None or hi is None:  # boxes that skip nothing
        lo = np.full((len(cells), D), -np.inf)
        hi = np.full((len(cells), D), np.inf)
    lo, hi = (np.ascontiguousarray(a, dtype=np.float64) for a in (lo, hi))
    if lo.shape != (len(cells), D) or hi.shape != (len(cells), D):
        raise ValueError(f"'lo' and 'hi' must be ({len(cells)}, {D}), got "
                         f"{lo.shape} and {hi.shape}")
    labels = np.arange(m) if labels is None else _indices(labels, "labels", m, None)
    rows = np.arange(n) if rows is None else _indices(rows, "rows", n, n)
    if n and (np.bincount(rows, minlength=n) != 1).any():  # O(n), no sort
        raise ValueError("'rows' must be a permutation of 0 to n - 1")
    Yt = np.ascontiguousarray(Y.T)
    return _sel.cells_kmin(X, Yt, labels, k, qs, ps, pc, cells, lo, hi, rows,
                           _library(backend, np.float64))


def box_pairs(lo, hi, radius, group_first, group_starts, candidates, cell_lo, cell_hi,
              *, backend: str | None = None):
    """The cells within each box's radius, nearest first: the pairs of a
    block-sparse search (:func:`block_sparse_knn`) from a coarser pairing.

    Box a (``lo[a]``, ``hi[a]``) belongs to group g when ``group_first[g]
    <= a < group_first[g + 1]``; the group's candidate cells are
    ``candidates[group_starts[g]:group_starts[g + 1]]`` (a superset of its
    boxes' near cells, found for the group's bounding box). Box a keeps the
    candidates whose box (``cell_lo``, ``cell_hi``) lies within ``radius[a]``
    of its own: the smallest distance between points of the two boxes, the
    per-feature gaps squared, summed in feature order (float64) and rooted.

    Parameters
    ----------
    lo, hi : array-like of shape (n, D)
        The boxes.
    radius : array-like of shape (n,)
        Each box's reach (+inf: every candidate of its group).
    group_first : array-like of G + 1 ints
        Non-decreasing, from 0 to n: the groups' first boxes.
    group_starts : array-like of G + 1 ints
        Non-decreasing, from 0 to ``len(candidates)``.
    candidates : array-like of ints
        Cell numbers, each < B.
    cell_lo, cell_hi : array-like of shape (B, D)
        The cells' boxes.
    backend : {"auto", "cpu", "numpy"} or None, default=None
        Compiled C, or NumPy (the reference; the same pairs in the same
        order).

    Returns
    -------
    starts : ndarray of n + 1 int64
        Box a's pairs are ``cells[starts[a]:starts[a + 1]]``.
    cells : ndarray of int64
        Each box's cells by increasing distance (equal distances in the
        order of the candidates).

    Examples
    --------
    Two point boxes in one group, two candidate cells, a radius of 1.5:

    >>> import numpy as np
    >>> from kerneltools.selection import box_pairs
    >>> X = np.array([[0.2], [5.9]])
    >>> starts, cells = box_pairs(X, X, [1.5, 1.5], [0, 2], [0, 2], [0, 1],
    ...                           [[0.0], [5.0]], [[1.0], [6.0]], backend="numpy")
    >>> starts, cells
    (array([0, 1, 2]), array([0, 1]))
    """
    lo, hi, cell_lo, cell_hi = (np.ascontiguousarray(a, dtype=np.float64)
                                for a in (lo, hi, cell_lo, cell_hi))
    if lo.ndim != 2 or hi.shape != lo.shape or cell_lo.ndim != 2 or (
            cell_hi.shape != cell_lo.shape or cell_lo.shape[1] != lo.shape[1]):
        raise ValueError(f"'lo', 'hi' must be (n, D) and 'cell_lo', 'cell_hi' (B, D), "
                         f"got shapes {lo.shape}, {hi.shape}, {cell_lo.shape}, "
                         f"{cell_hi.shape}")
    radius = np.ascontiguousarray(radius, dtype=np.float64)
    if radius.shape != (len(lo),) or np.isnan(radius).any():
        raise ValueError(f"'radius' must be {len(lo)} numbers, not NaN, got shape "
                         f"{radius.shape}")
    gf = _starts(group_first, "group_first", None, len(lo))
    cb = np.ascontiguousarray(candidates, dtype=np.int64).ravel()
    if len(cb) and (cb.min() < 0 or cb.max() >= len(cell_lo)):
        raise ValueError(f"'candidates' must be cell numbers < {len(cell_lo)}")
    gs = _starts(group_starts, "group_starts", len(gf), len(cb))
    return _sel.box_pairs(gf, gs, cb, lo, hi, radius, cell_lo, cell_hi,
                          _library(backend, np.float64))


def _starts(a, name: str, length, end: int) -> np.ndarray:
    """``a`` as int64 starts: non-decreasing from 0 to ``end``."""
    a = np.ascontiguousarray(a, dtype=np.int64)
    if a.ndim != 1 or len(a) < 1 or (length is not None and len(a) != length) or (
            a[0] != 0 or a[-1] != end or (np.diff(a) < 0).any()):
        raise ValueError(f"'{name}' must be non-decreasing ints from 0 to {end}"
                         + ("" if length is None else f", {length} of them"))
    return a


def _indices(a, name: str, n: int, top):
    """``a`` as int64 indices: n of them, >= 0 (and < top)."""
    a = np.ascontiguousarray(a, dtype=np.int64)
    if a.shape != (n,) or (n and (a.min() < 0 or (top is not None and a.max() >= top))):
        bound = "" if top is None else f" and < {top}"
        raise ValueError(f"'{name}' must be {n} integers >= 0{bound}, got shape "
                         f"{a.shape}")
    return a


def _library(backend, dtype):
    """The compiled selection for ``backend`` (None: NumPy)."""
    name = check_backend(backend, "TileSelection")
    if name == "numpy":
        return None
    lib = _sel.compiled(dtype)
    if lib is None and name == "cpu":
        raise BackendUnavailableError(
            "TileSelection: backend='cpu' needs a working C compiler; use "
            "backend='auto' (NumPy without one) or 'numpy'")
    return lib
