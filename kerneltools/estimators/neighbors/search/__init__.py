"""The searches behind the k-NN estimators, and the one place that picks one.

Each search strategy is a class that finds, for blocks of queries, the K
smallest ``rdist`` values of a metric (:mod:`.._metrics`) over the fitted
points, exactly, in linear memory (the radius queries run on the same
objects: :func:`._formula.radius_search`). The strategies differ in how:

- :class:`HostSearch`: a pruned fit queried on a device: the cell search
  on host copies (:mod:`._device`);
- :class:`DeviceSearch`: queries on a device: brute-force K-min there;
- :class:`CellSearch`: low dimension: only the nearby cells, the K-min in C
  on the CPU (:mod:`._cells`, :mod:`._pruned`);
- :class:`GemmSearch`: euclidean, 16+ features, reductions on the CPU:
  float32 BLAS tiles, exact re-ranking (:mod:`._gemm`, :mod:`._blas`);
- :class:`ExpandedSearch`: euclidean, 20+ features: expanded-form
  candidates, exact re-ranking (:mod:`._formula`);
- :class:`FormulaSearch`: any metric: its formula, brute force.

:func:`choose` returns the first strategy of :data:`STRATEGIES` whose
``is_usable_for(case)`` holds for a :class:`SearchCase` (what the choice
depends on: the metric, the number of features, the backend, whether the
fit enabled pruning, where the queries live); ``FormulaSearch``, last,
serves every case. An estimator asks :func:`new_search`, never a strategy by
name. Pruning itself is decided once, at fit (:func:`._pruned.prunes`, which
sets scikit-learn's ``_fit_method``); a strategy may still run its parent's
brute force for a query too small to pay for its set-up (the ``MIN_PAIRS``
and ``MIN_K`` thresholds of its module, measured there).

To add a strategy: write its class (in a module of this package) with

- ``is_usable_for(case) -> bool``, a staticmethod holding every rule of
  eligibility, each with a comment saying why (scikit-learn's
  ``ArgKmin.is_usable_for``);
- ``build(case)``, a classmethod that makes it from the case (the fitted
  points: ``case.host_points()`` or ``case.device_points()``);
- ``kmin(X, k)`` (``(rdist, indices)``, increasing, ties by index) and
  ``metric``; ``count`` and ``within`` for the radius queries on the host;

then insert it in :data:`STRATEGIES` before the strategies it must take
precedence over (the faster and narrower first), and add a case that picks
it to ``tests/estimators/neighbors/search/test_choose.py`` (which checks
that every listed strategy is reachable).

This package imports the engine through its public surface only (LazyTensor,
:mod:`kerneltools.ranges`, :mod:`kerneltools.selection`, the configuration),
the array layer of :mod:`kerneltools._utils` and the family's
:mod:`.._metrics`; nothing of the estimators above it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ...._utils._array_api import Placement, host_array
from .._metrics import Metric
from ._cells import CellSearch
from ._device import DeviceSearch, HostSearch
from ._formula import ExpandedSearch, FormulaSearch
from ._gemm import GemmSearch
from ._protocol_docs import document
from ._pruned import Grid

__all__ = ["STRATEGIES", "CellSearch", "DeviceSearch", "ExpandedSearch",
           "FormulaSearch", "GemmSearch", "HostSearch", "SearchCase", "choose",
           "new_search"]

#: The search strategies, in the order :func:`choose` tries them: the first
#: that applies is built. The last one applies to every case.
STRATEGIES = (HostSearch, DeviceSearch, CellSearch, GemmSearch, ExpandedSearch,
              FormulaSearch)


@dataclass(frozen=True)
class SearchCase:
    """What the choice of a search depends on, and the fitted points to build
    it on.

    Parameters
    ----------
    metric : Metric
        The metric's formula (its ``rdist``, whether it is ``|x - y|^2``).
    points : array
        The fitted points as the estimator keeps them (any namespace).
    dtype : numpy.dtype
        The dtype of the search (of the queries and the fitted points).
    backend : str or None
        Where the reductions run (as ``backend=`` of a reduction).
    pruned : bool, default=False
        Whether the fit enabled pruning (scikit-learn's ``_fit_method`` is
        ``"block_sparse"``: low dimension, enough fitted points).
    grid : Grid or None, default=None
        The fit's cells (pruned fits on the host; else built at the first
        search from ``points``).
    place : Placement or None, default=None
        Where queries on a device are computed; None for host queries.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators.neighbors._metrics import make_metric
    >>> from kerneltools.estimators.neighbors.search import SearchCase
    >>> Y = np.random.default_rng(0).random((300, 32))
    >>> case = SearchCase(make_metric("euclidean", {}), Y, np.dtype(np.float32), None)
    >>> case.n_features, case.on_device, case.host_points().dtype
    (32, False, dtype('float32'))
    """

    metric: Metric
    points: Any
    dtype: np.dtype
    backend: Any
    pruned: bool = False
    grid: Grid | None = None
    place: Placement | None = None

    @property
    def n_features(self) -> int:
        return int(self.points.shape[1])

    @property
    def on_device(self) -> bool:
        return self.place is not None

    def on_host(self) -> SearchCase:
        """The same case with the queries on the host."""
        return replace(self, place=None)

    def host_points(self) -> np.ndarray:
        """The fitted points as a C-contiguous NumPy array of the dtype."""
        return np.ascontiguousarray(host_array(self.points), dtype=self.dtype)

    def device_points(self):
        """The fitted points in the device space of ``place``, of the dtype."""
        sp = self.place.space
        return sp.astype(self.place.to_space(self.points), self.dtype)

    def cells(self, Y: np.ndarray) -> Grid:
        """The fit's cells, or those of the host points ``Y``."""
        return self.grid if self.grid is not None else Grid.fit(Y)


def choose(case: SearchCase) -> type:
    """The first strategy of :data:`STRATEGIES` usable for ``case``.

    Parameters
    ----------
    case : SearchCase
        The metric, the fitted points, the dtype, the backend, pruning and
        where the queries live.

    Returns
    -------
    type
        The strategy class (``FormulaSearch`` when no other applies).

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators.neighbors._metrics import make_metric
    >>> from kerneltools.estimators.neighbors.search import SearchCase, choose
    >>> rng = np.random.default_rng(0)
    >>> def case(n_features, pruned=False):
    ...     Y = rng.random((300, n_features))
    ...     return SearchCase(make_metric("euclidean", {}), Y,
    ...                       np.dtype(np.float64), "numpy", pruned=pruned)
    >>> [choose(case(d, p)).__name__ for d, p in [(3, True), (3, False), (32, False)]]
    ['CellSearch', 'FormulaSearch', 'GemmSearch']
    """
    return next(s for s in STRATEGIES if s.is_usable_for(case))


def new_search(case: SearchCase):
    """The search of ``case``: :func:`choose`'s strategy, built.

    Parameters
    ----------
    case : SearchCase
        What the choice depends on, and the fitted points.

    Returns
    -------
    object
        An instance of the strategy (:class:`CellSearch`, :class:`GemmSearch`,
        ...); its ``kmin(X, k)`` gives ``(rdist, indices)``.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators.neighbors._metrics import make_metric
    >>> from kerneltools.estimators.neighbors.search import SearchCase, new_search
    >>> rng = np.random.default_rng(0)
    >>> Y, X = rng.random((300, 3)), rng.random((4, 3))
    >>> case = SearchCase(make_metric("euclidean", {}), Y, np.dtype(np.float64),
    ...                   "numpy", pruned=True)
    >>> rdist, ind = new_search(case).kmin(X, 2)
    >>> d2 = ((X[:, None] - Y[None]) ** 2).sum(-1)  # dense NumPy
    >>> bool((ind == d2.argsort(1)[:, :2]).all())
    True
    """
    return choose(case).build(case)


document((*STRATEGIES, SearchCase))  # the protocol's Parameters and Returns
