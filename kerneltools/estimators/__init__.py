"""scikit-learn-compatible estimators built on kerneltools' reductions."""

from .gaussian_process import GaussianProcessRegressor
from .density import KernelDensity
from .kernel_ridge import KernelRidge
from .mean_shift import MeanShift, estimate_bandwidth
from .neighbors import KNeighborsClassifier, KNeighborsRegressor, NearestNeighbors
from .nystroem import Nystroem
from .outliers import LocalOutlierFactor
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
    "Nystroem",
    "SinkhornTransport",
    "sinkhorn_divergence",
    "sinkhorn_potentials",
    "transport_plan",
    "KernelDensity",
    "LocalOutlierFactor",
    "MeanShift",
    "estimate_bandwidth",
]
