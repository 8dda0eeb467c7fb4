"""scikit-learn-compatible estimators built on kerneltools' reductions."""

from .density import KernelDensity
from .gaussian_process import GaussianProcessRegressor
from .kernel_pca import KernelPCA
from .kernel_ridge import KernelRidge
from .mean_shift import MeanShift, estimate_bandwidth
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
from .outliers import LocalOutlierFactor
from .spectral import SpectralClustering, SpectralEmbedding

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
    "KernelPCA",
    "SpectralEmbedding",
    "SpectralClustering",
    "KernelDensity",
    "LocalOutlierFactor",
    "MeanShift",
    "estimate_bandwidth",
]
