"""scikit-learn-compatible estimators built on kerneltools' reductions."""

from .gaussian_process import GaussianProcessRegressor
from .kernel_ridge import KernelRidge
from .neighbors import (
    KNeighborsClassifier,
    KNeighborsRegressor,
    KNeighborsTransformer,
    NearestNeighbors,
    RadiusNeighborsClassifier,
    RadiusNeighborsRegressor,
    RadiusNeighborsTransformer,
)
from .nystroem import Nystroem
from .optimal_transport import (
    SinkhornTransport,
    sinkhorn_divergence,
    sinkhorn_potentials,
    transport_plan,
)

__all__ = [
    "KernelRidge",
    "GaussianProcessRegressor",
    "NearestNeighbors",
    "KNeighborsClassifier",
    "KNeighborsRegressor",
    "RadiusNeighborsClassifier",
    "RadiusNeighborsRegressor",
    "KNeighborsTransformer",
    "RadiusNeighborsTransformer",
    "Nystroem",
    "SinkhornTransport",
    "sinkhorn_divergence",
    "sinkhorn_potentials",
    "transport_plan",
]
