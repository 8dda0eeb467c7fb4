"""scikit-learn-compatible estimators built on kerneltools' reductions.

What lives here: one package per family (:mod:`.neighbors`,
:mod:`.gaussian_process`, :mod:`.kernel_ridge`, :mod:`.kernel_pca`,
:mod:`.nystroem`, :mod:`.optimal_transport`, ...), one module for a family
that fits in one (:mod:`.density`, :mod:`.outliers`, :mod:`.mean_shift`),
and the helpers several families share (:mod:`._shared`). A new estimator
goes in its family's package and is exported here. What it may import: the
public API (:mod:`kerneltools.lazy`, :mod:`kerneltools.kernels`,
:mod:`kerneltools.linalg`, :mod:`kerneltools.ranges`,
:mod:`kerneltools.dask`, :mod:`kerneltools.config`,
:mod:`kerneltools.exceptions`), :mod:`kerneltools._utils` and
:mod:`kerneltools.ot`; never the engine (:mod:`kerneltools.backend`).
"""

from .cluster import DBSCAN, HDBSCAN
from .density import KernelDensity
from .gaussian_process import GaussianProcessRegressor
from .impute import KNNImputer
from .gaussian_process import GaussianProcessClassifier, GaussianProcessRegressor
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
from .semi_supervised import LabelPropagation, LabelSpreading
from .spectral import SpectralClustering, SpectralEmbedding
from .svm import SVC, SVR, NuSVC, NuSVR, OneClassSVM

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
    "SVC",
    "NuSVC",
    "SVR",
    "NuSVR",
    "OneClassSVM",
    "DBSCAN",
    "KNNImputer",
    "HDBSCAN",
    "LabelSpreading",
    "LabelPropagation",
    "GaussianProcessClassifier",
]
