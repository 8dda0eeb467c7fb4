"""The k-NN searches of queries that live on a device (issue 24).

:class:`DeviceSearch` keeps the fitted points on the device and reduces
blocks of queries with one ``Kmin_argKmin`` each, fed device arrays (CuPy,
or the NumPy views of the simulated device): distances and indices stay
there. It always uses the direct form ``sum (x - y)^2`` (exact up to
rounding); the expanded-form candidates with a float64 re-ranking and the
float32 BLAS tiles of the host (:mod:`._formula`, :mod:`._gemm`) are
host-only.

:class:`HostSearch` is the pruned low-D route of a device fit: the host's
cell search (:class:`~._cells.CellSearch`) on a host copy of the fitted
points (made once per fit, at the first query) and of the queries (one copy
per call), its results copied back to the device. The engine's block-sparse
reductions take device arrays, but the cells, the pairs of cells and the
certificate are computed on the host from the points' coordinates: for
D <= 3 the copies are 12-24 bytes per point each way, besides the K-wide
results.
"""

from __future__ import annotations

import numpy as np

from ....lazy import Vi, Vj
from ...._utils._array_api import Space
from ._cells import CellSearch
from ._formula import QUERY_BLOCK_ENTRIES

__all__ = ["DeviceSearch", "HostSearch"]


class DeviceSearch:
    """Brute-force K-min of a metric's rdist over fitted points on a device.

    ``Y`` is an array of the device space ``sp``; :meth:`kmin` takes and
    returns arrays of it.

    Parameters
    ----------
    metric : Metric
        The metric's formula (its ``rdist`` is reduced).
    Y : array of shape (n_samples, n_features)
        The fitted points, an array of ``sp``.
    sp : Space
        The device's array namespace and the transfers to the engine.
    backend : str or None
        Where the reductions run (as ``backend=`` of a reduction).

    Examples
    --------
    It serves queries on a device (``place``) of a fit without pruning;
    host queries go to another strategy:

    >>> import numpy as np
    >>> from kerneltools.estimators.neighbors._metrics import make_metric
    >>> from kerneltools.estimators.neighbors.search import DeviceSearch, SearchCase
    >>> rng = np.random.default_rng(0)
    >>> def case(n_features, pruned=False):
    ...     Y = rng.random((300, n_features))
    ...     return SearchCase(make_metric("euclidean", {}), Y,
    ...                       np.dtype(np.float64), "numpy", pruned=pruned)
    >>> [DeviceSearch.is_usable_for(case(d)) for d in (3, 32)]
    [False, False]
    """

    def __init__(self, metric, Y, sp: Space, backend):
        self.metric, self.sp, self.backend = metric, sp, backend
        self.Y = Y
        self._y_j = Vj(sp.engine(Y))

    @staticmethod
    def is_usable_for(case) -> bool:
        """Queries on a device (``case.place``), the fit not pruned: the
        pruned route needs the cells, built on the host (:class:`HostSearch`)."""
        return case.on_device and not case.pruned

    @classmethod
    def build(cls, case) -> DeviceSearch:
        return cls(case.metric, case.device_points(), case.place.space, case.backend)

    def kmin(self, X, k: int):
        """(rdist, indices), both (n, k), increasing; ties by index."""
        # A twin of FormulaSearch._kmin, kept: the blocks go to the engine as
        # its arrays (sp.engine) and come back as the space's
        # (sp.from_engine), and are concatenated, where the host writes them
        # into preallocated NumPy outputs (the Array API has no out=).
        sp, xp = self.sp, self.sp.xp
        n = X.shape[0]
        rows = max(1, QUERY_BLOCK_ENTRIES // k)
        vals, idx = [], []
        for s in range(0, n, rows):
            x_i = Vi(sp.engine(X[s:min(n, s + rows), :]))
            v, i = self.metric.rdist(x_i, self._y_j).Kmin_argKmin(
                k, axis=1, backend=self.backend)
            vals.append(xp.reshape(sp.from_engine(v), (-1, k)))
            idx.append(xp.reshape(sp.from_engine(i), (-1, k)))
        if len(vals) == 1:
            return vals[0], idx[0]
        return xp.concat(vals, axis=0), xp.concat(idx, axis=0)


class HostSearch:
    """A host search (pruned cells) behind the device interface: the queries
    copied to the host per call, the results back to the device.

    Parameters
    ----------
    search : CellSearch
        The pruned search on the host copies of the fitted points.
    sp : Space
        The device's array namespace (copies to and from the host).

    Examples
    --------
    Only queries on a device of a pruned fit use it; on the host, the same
    pruned fit gets :class:`CellSearch` itself:

    >>> import numpy as np
    >>> from kerneltools.estimators.neighbors._metrics import make_metric
    >>> from kerneltools.estimators.neighbors.search import HostSearch, SearchCase, choose
    >>> rng = np.random.default_rng(0)
    >>> def case(n_features, pruned=False):
    ...     Y = rng.random((300, n_features))
    ...     return SearchCase(make_metric("euclidean", {}), Y,
    ...                       np.dtype(np.float64), "numpy", pruned=pruned)
    >>> HostSearch.is_usable_for(case(3, pruned=True))
    False
    >>> choose(case(3, pruned=True)).__name__
    'CellSearch'
    """

    def __init__(self, search, sp: Space):
        self.search, self.sp = search, sp

    @staticmethod
    def is_usable_for(case) -> bool:
        """Queries on a device of a pruned fit: the cells and their
        certificate are computed on the host (the module's docstring)."""
        return case.on_device and case.pruned

    @classmethod
    def build(cls, case) -> HostSearch:
        # the pruned fit's search as on the host (the queries copied there)
        return cls(CellSearch.build(case.on_host()), case.place.space)

    @property
    def metric(self):
        return self.search.metric

    def kmin(self, X, k: int):
        sp = self.sp
        X = np.ascontiguousarray(sp.host(X), self.search.Y.dtype)
        v, i = self.search.kmin(X, k)
        return sp.put(v), sp.put(i)
