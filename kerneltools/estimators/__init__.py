"""scikit-learn-compatible estimators built on kerneltools' reductions."""

from .gaussian_process import GaussianProcessRegressor
from .kernel_pca import KernelPCA
from .kernel_ridge import KernelRidge
from .neighbors import KNeighborsClassifier, KNeighborsRegressor, NearestNeighbors
from .nystroem import Nystroem
from .spectral import SpectralClustering, SpectralEmbedding
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
    "KernelPCA",
    "SpectralEmbedding",
    "SpectralClustering",
]
