"""Entropic optimal transport as a scikit-learn transformer.

What lives here: :class:`SinkhornTransport` (after POT's
``ot.da.SinkhornTransport``, in :mod:`._estimator`), and, for the imports
that name this module, the functions :func:`sinkhorn_divergence`,
:func:`sinkhorn_potentials` and :func:`transport_plan`, which are
:mod:`kerneltools.ot`'s (the same objects). The solvers, their conventions
(GeomLoss's costs and temperatures, POT's) and the placement of device arrays
are described in :mod:`kerneltools.ot`. What it may import: the public API,
:mod:`kerneltools.ot` and its private modules, :mod:`kerneltools._utils`.
"""

from ...ot import sinkhorn_divergence, sinkhorn_potentials, transport_plan
from ._estimator import SinkhornTransport

__all__ = [
    "SinkhornTransport",
    "sinkhorn_divergence",
    "sinkhorn_potentials",
    "transport_plan",
]
