"""scikit-learn-compatible estimators built on kerneltools' reductions."""

from .kernel_ridge import KernelRidge
from .neighbors import KNeighborsClassifier, KNeighborsRegressor, NearestNeighbors
from .optimal_transport import (
    SinkhornTransport,
    sinkhorn_divergence,
    sinkhorn_potentials,
    transport_plan,
)

__all__ = [
    "KernelRidge",
    "NearestNeighbors",
    "KNeighborsClassifier",
    "KNeighborsRegressor",
    "SinkhornTransport",
    "sinkhorn_divergence",
    "sinkhorn_potentials",
    "transport_plan",
]
