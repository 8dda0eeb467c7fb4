"""k-means cells of the points: the cut that block-sparse pruning starts from.

DBSCAN (:mod:`kerneltools.estimators.cluster`) and the RBF label graph
(:mod:`kerneltools.estimators.semi_supervised`) both cut the points into
k-means cells and then keep, each by its own test, the cell pairs their
reductions visit (:func:`kerneltools.ranges.block_sparsity`).
:func:`kmeans_labels` makes the cells: centres fitted on a sample, every
point then assigned to its nearest centre by one ``ArgMin`` reduction, the
cells numbered ``0 .. C - 1`` with none empty. :func:`on_cpu` says whether
a backend reduces on this host, where the cells pay (a GPU reduces one block
per call: the cells would cost more than they save).
"""

from __future__ import annotations

import numpy as np

from ... import ranges as kr
from ...config import check_backend
from ...lazy import Vi, Vj

__all__ = ["kmeans_labels", "on_cpu"]


def on_cpu(backend, who: str = "the k-means cells") -> bool:
    """Whether the reductions of ``backend`` run on this host (``who`` names
    the caller in the error of an invalid backend)."""
    name = check_backend(backend, who)
    if name in ("cpu", "numpy"):
        return True
    if name != "auto":
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() == 0
    except Exception:  # noqa: BLE001 (no CuPy, no driver: the CPU)
        return True


def kmeans_labels(X: np.ndarray, *, cell_points: int, max_cells: int,
                  sample_per_cell: int, backend=None) -> np.ndarray:
    """The cell of each point (int64, cells numbered from 0, none empty).

    ``clip(n // cell_points, 1, max_cells)`` centres are fitted (seed 0) on a
    sample of ``sample_per_cell`` points per centre, or on all the points
    where there are fewer; each point goes to its nearest centre.
    """
    X = np.asarray(X, dtype=np.float64)
    n = len(X)
    C = int(np.clip(n // cell_points, 1, max_cells))
    rng = np.random.default_rng(0)
    k = sample_per_cell * C
    sample = X if n <= k else X[rng.choice(n, k, replace=False)]
    _, centres = kr.kmeans_cluster(sample, C, random_state=0, backend=backend)
    lab = Vi(X).sqdist(Vj(centres)).argmin(axis=1, backend=backend)
    _, labels = np.unique(np.asarray(lab).ravel(), return_inverse=True)
    return labels.astype(np.int64).ravel()
