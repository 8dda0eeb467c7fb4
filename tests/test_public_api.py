"""Every public import path of the release before issue 38 works unchanged.

The data below is the output of ``tests/_support/list_public_api.py`` run on
the tree before the moves (commit d23a8ae), not computed from the code under
test: each public module (no underscored component; the engine,
``kerneltools.backend``, is private), the names of its ``__all__`` (with the
estimators and modules that the root loads on first use, and
``kerneltools.torch.SamplesLoss``), and the names that were one object in
several places, which must still be one object.
"""

from __future__ import annotations

import importlib
import importlib.util
import types

import pytest

HAS_TORCH = importlib.util.find_spec("torch") is not None


#: Each public module and its public names (release before issue 38).
PUBLIC: dict[str, list[str]] = {
    "kerneltools": [
        "BackendUnavailableError", "CompileError", "ComplexLazyTensor",
        "ConvergenceWarning", "GaussianProcessRegressor",
        "DBSCAN", "HDBSCAN", "KNNImputer",
        "SVC", "NuSVC", "SVR", "NuSVR", "OneClassSVM",
        "KNeighborsClassifier", "KNeighborsRegressor", "KNeighborsTransformer",
        "KernelDensity", "KernelPCA", "KernelRidge", "KernelToolsError",
        "LazyTensor", "LocalOutlierFactor", "MeanShift", "NearestNeighbors",
        "Nystroem", "Pm", "RadiusNeighborsClassifier",
        "RadiusNeighborsRegressor", "RadiusNeighborsTransformer",
        "SinkhornTransport", "SpectralClustering", "SpectralEmbedding", "Vi",
        "Vj", "__version__", "cache_dir", "clear_cache", "config_context",
        "estimate_bandwidth", "get_config", "info", "maximum", "minimum",
        "ranges", "selection", "set_config", "sinkhorn_divergence",
        "sinkhorn_potentials", "stats", "transport_plan",
    ],
    "kerneltools.accel": [
        "PATCHES", "install", "is_installed", "original", "originals",
        "replacements", "uninstall",
    ],
    "kerneltools.config": [
        "BACKEND_NAMES", "check_backend", "config_context", "get_config",
        "set_config",
    ],
    "kerneltools.dask": [
        "Rows", "check_rows", "is_dask_array", "map_rows", "rows_method",
        "to_numpy",
    ],
    "kerneltools.estimators": [
        "DBSCAN", "HDBSCAN", "KNNImputer",
        "SVC", "NuSVC", "SVR", "NuSVR", "OneClassSVM",
        "GaussianProcessRegressor", "KNeighborsClassifier",
        "KNeighborsRegressor", "KNeighborsTransformer", "KernelDensity",
        "KernelPCA", "KernelRidge", "LocalOutlierFactor", "MeanShift",
        "NearestNeighbors", "Nystroem", "RadiusNeighborsClassifier",
        "RadiusNeighborsRegressor", "RadiusNeighborsTransformer",
        "SinkhornTransport", "SpectralClustering", "SpectralEmbedding",
        "estimate_bandwidth", "sinkhorn_divergence", "sinkhorn_potentials",
        "transport_plan",
    ],
    "kerneltools.estimators.cluster": [
        "DBSCAN", "HDBSCAN",
    ],
    "kerneltools.estimators.impute": [
        "KNNImputer",
    ],
    "kerneltools.estimators.density": [
        "KernelDensity", "VALID_KERNELS", "log_kernel_norm",
    ],
    "kerneltools.estimators.gaussian_process": [
        "GaussianProcessRegressor",
    ],
    "kerneltools.estimators.kernel_pca": [
        "DENSE_MAX_SAMPLES", "KernelPCA", "LANCZOS_TOL",
    ],
    "kerneltools.estimators.kernel_ridge": [
        "KernelRidge",
    ],
    "kerneltools.estimators.mean_shift": [
        "MeanShift", "estimate_bandwidth", "get_bin_seeds",
    ],
    "kerneltools.estimators.neighbors": [
        "KNeighborsClassifier", "KNeighborsRegressor", "KNeighborsTransformer",
        "NearestNeighbors", "RadiusNeighborsClassifier",
        "RadiusNeighborsRegressor", "RadiusNeighborsTransformer",
    ],
    "kerneltools.estimators.nystroem": [
        "LANDMARK_METHODS", "Nystroem", "kmeans_plusplus",
        "ridge_leverage_sample",
    ],
    "kerneltools.estimators.optimal_transport": [
        "SinkhornTransport", "sinkhorn_divergence", "sinkhorn_potentials",
        "transport_plan",
    ],
    "kerneltools.estimators.outliers": [
        "LocalOutlierFactor",
    ],
    "kerneltools.estimators.gaussian_process._classifier": [
        "GaussianProcessClassifier",
    ],
    "kerneltools.estimators.semi_supervised": [
        "LabelPropagation", "LabelSpreading",
    ],
    "kerneltools.estimators.spectral": [
        "DENSE_MAX_SAMPLES", "SpectralClustering", "SpectralEmbedding",
        "cluster_qr", "discretize",
    ],
    "kerneltools.estimators.svm": [
        "NuSVC", "NuSVR", "OneClassSVM", "SVC", "SVR",
    ],
    "kerneltools.exceptions": [
        "BackendFallbackWarning", "BackendUnavailableError", "CacheError",
        "CacheWarning", "CompileError", "ConvergenceError",
        "ConvergenceWarning", "FormulaSyntaxError", "KernelToolsError",
        "NotPositiveDefiniteError",
    ],
    "kerneltools.keops": [
        "FormulaSyntaxError", "parse_alias", "parse_formula",
    ],
    "kerneltools.keops.numpy": [
        "ComplexLazyTensor", "FormulaSyntaxError", "Genred", "KernelSolve",
        "LazyTensor", "Pm", "Vi", "Vj", "generic_argkmin", "generic_argmin",
        "generic_logsumexp", "generic_sum",
    ],
    "kerneltools.keops.numpy.cluster": [
        "cluster_centroids", "cluster_ranges", "cluster_ranges_centroids",
        "from_matrix", "grid_cluster", "sort_clusters", "swap_axes",
    ],
    "kerneltools.keops.numpy.operations": [
        "KernelSolve",
    ],
    "kerneltools.keops.numpy.utils": [
        "WarmUpGpu",
    ],
    "kerneltools.keops.torch": [
        "ComplexLazyTensor", "FormulaSyntaxError", "Genred", "KernelSolve",
        "LazyTensor", "Pm", "Vi", "Vj", "generic_argkmin", "generic_argmin",
        "generic_logsumexp", "generic_sum",
    ],
    "kerneltools.keops.torch.cluster": [
        "cluster_centroids", "cluster_ranges", "cluster_ranges_centroids",
        "from_matrix", "grid_cluster", "sort_clusters", "swap_axes",
    ],
    "kerneltools.keops.torch.operations": [
        "KernelSolve",
    ],
    "kerneltools.kernels": [
        "Kernel", "PAIRWISE_KERNELS", "from_sklearn", "make_kernel",
        "stationary_form",
    ],
    "kerneltools.lazy": [
        "ComplexLazyTensor", "LazyTensor", "Pm", "Vi", "Vj", "maximum",
        "minimum",
    ],
    "kerneltools.linalg": [
        "CenteredOperator", "DENSE_MAX", "EIGEN_METHODS", "KernelOperator",
        "LaplacianPreconditioner", "NormalizedAffinityOperator",
        "NystroemPreconditioner", "OffDiagonalKernel", "START_LANDMARKS",
        "block_lanczos", "conjugate_gradient", "eigsh", "landmark_sums",
        "lobpcg", "nystroem_eigh", "nystroem_start", "randomized_eigsh",
        "robust_cholesky", "select_landmarks", "smo_block", "smo_block_numpy",
        "smo_native_available", "solve_with_logdet", "translated", "translation",
    ],
    "kerneltools.ranges": [
        "BlockSparsity", "block_sparsity", "cluster_centroids",
        "cluster_counts", "cluster_radii", "cluster_ranges", "distance_mask",
        "from_sorted", "grid_cluster", "kmeans_cluster", "knn_mask",
        "radius_csr", "sort_clusters",
    ],
    "kerneltools.selection": [
        "TileSelection", "block_sparse_knn", "box_pairs",
    ],
    "kerneltools.stats": [
        "PermutationTestResult", "TestResult", "energy_distance", "energy_test",
        "hsic", "hsic_test", "linear_mmd_test", "median_bandwidth", "mmd2",
        "mmd_test",
    ],
    "kerneltools.jax": ["LazyTensor", "Pm", "Vi", "Vj", "maximum", "minimum"],
    "kerneltools.torch": [
        "ComplexLazyTensor", "LazyTensor", "Pm", "SamplesLoss", "Vi", "Vj",
        "maximum", "minimum",
    ],
}

#: "module:name" paths that were one object (classes, functions, modules).
SAME_OBJECT: list[list[str]] = [
    ["kerneltools.config:config_context", "kerneltools:config_context"],
    ["kerneltools.config:get_config", "kerneltools:get_config"],
    ["kerneltools.config:set_config", "kerneltools:set_config"],
    [
        "kerneltools.estimators.density:KernelDensity",
        "kerneltools.estimators:KernelDensity",
        "kerneltools:KernelDensity",
    ],
    [
        "kerneltools.estimators.gaussian_process:GaussianProcessRegressor",
        "kerneltools.estimators:GaussianProcessRegressor",
        "kerneltools:GaussianProcessRegressor",
    ],
    [
        "kerneltools.estimators.kernel_pca:KernelPCA",
        "kerneltools.estimators:KernelPCA",
        "kerneltools:KernelPCA",
    ],
    [
        "kerneltools.estimators.kernel_ridge:KernelRidge",
        "kerneltools.estimators:KernelRidge",
        "kerneltools:KernelRidge",
    ],
    [
        "kerneltools.estimators.mean_shift:MeanShift",
        "kerneltools.estimators:MeanShift",
        "kerneltools:MeanShift",
    ],
    *[
        [f"kerneltools.estimators.svm:{name}", f"kerneltools.estimators:{name}",
         f"kerneltools:{name}"]
        for name in ("SVC", "NuSVC", "SVR", "NuSVR", "OneClassSVM")
    ],
    [
        "kerneltools.estimators.cluster:DBSCAN",
        "kerneltools.estimators:DBSCAN",
        "kerneltools:DBSCAN",
    ],
    [
        "kerneltools.estimators.cluster:HDBSCAN",
        "kerneltools.estimators:HDBSCAN",
        "kerneltools:HDBSCAN",
    ],
    [
        "kerneltools.estimators.impute:KNNImputer",
        "kerneltools.estimators:KNNImputer",
        "kerneltools:KNNImputer",
    ],
    [
        "kerneltools.estimators.mean_shift:estimate_bandwidth",
        "kerneltools.estimators:estimate_bandwidth",
        "kerneltools:estimate_bandwidth",
    ],
    [
        "kerneltools.estimators.neighbors:KNeighborsClassifier",
        "kerneltools.estimators:KNeighborsClassifier",
        "kerneltools:KNeighborsClassifier",
    ],
    [
        "kerneltools.estimators.neighbors:KNeighborsRegressor",
        "kerneltools.estimators:KNeighborsRegressor",
        "kerneltools:KNeighborsRegressor",
    ],
    [
        "kerneltools.estimators.neighbors:KNeighborsTransformer",
        "kerneltools.estimators:KNeighborsTransformer",
        "kerneltools:KNeighborsTransformer",
    ],
    [
        "kerneltools.estimators.neighbors:NearestNeighbors",
        "kerneltools.estimators:NearestNeighbors",
        "kerneltools:NearestNeighbors",
    ],
    [
        "kerneltools.estimators.neighbors:RadiusNeighborsClassifier",
        "kerneltools.estimators:RadiusNeighborsClassifier",
        "kerneltools:RadiusNeighborsClassifier",
    ],
    [
        "kerneltools.estimators.neighbors:RadiusNeighborsRegressor",
        "kerneltools.estimators:RadiusNeighborsRegressor",
        "kerneltools:RadiusNeighborsRegressor",
    ],
    [
        "kerneltools.estimators.neighbors:RadiusNeighborsTransformer",
        "kerneltools.estimators:RadiusNeighborsTransformer",
        "kerneltools:RadiusNeighborsTransformer",
    ],
    [
        "kerneltools.estimators.nystroem:Nystroem",
        "kerneltools.estimators:Nystroem",
        "kerneltools:Nystroem",
    ],
    [
        "kerneltools.estimators.optimal_transport:SinkhornTransport",
        "kerneltools.estimators:SinkhornTransport",
        "kerneltools:SinkhornTransport",
    ],
    [
        "kerneltools.estimators.optimal_transport:sinkhorn_divergence",
        "kerneltools.estimators:sinkhorn_divergence",
        "kerneltools:sinkhorn_divergence",
    ],
    [
        "kerneltools.estimators.optimal_transport:sinkhorn_potentials",
        "kerneltools.estimators:sinkhorn_potentials",
        "kerneltools:sinkhorn_potentials",
    ],
    [
        "kerneltools.estimators.optimal_transport:transport_plan",
        "kerneltools.estimators:transport_plan",
        "kerneltools:transport_plan",
    ],
    [
        "kerneltools.estimators.outliers:LocalOutlierFactor",
        "kerneltools.estimators:LocalOutlierFactor",
        "kerneltools:LocalOutlierFactor",
    ],
    [
        "kerneltools.estimators.spectral:SpectralClustering",
        "kerneltools.estimators:SpectralClustering",
        "kerneltools:SpectralClustering",
    ],
    [
        "kerneltools.estimators.spectral:SpectralEmbedding",
        "kerneltools.estimators:SpectralEmbedding",
        "kerneltools:SpectralEmbedding",
    ],
    [
        "kerneltools.exceptions:BackendUnavailableError",
        "kerneltools:BackendUnavailableError",
    ],
    ["kerneltools.exceptions:CompileError", "kerneltools:CompileError"],
    ["kerneltools.exceptions:ConvergenceWarning", "kerneltools:ConvergenceWarning"],
    [
        "kerneltools.exceptions:FormulaSyntaxError",
        "kerneltools.keops.numpy:FormulaSyntaxError",
        "kerneltools.keops.torch:FormulaSyntaxError",
        "kerneltools.keops:FormulaSyntaxError",
    ],
    ["kerneltools.exceptions:KernelToolsError", "kerneltools:KernelToolsError"],
    [
        "kerneltools.keops.numpy.operations:KernelSolve",
        "kerneltools.keops.numpy:KernelSolve",
    ],
    [
        "kerneltools.keops.numpy:ComplexLazyTensor",
        "kerneltools.lazy:ComplexLazyTensor",
        "kerneltools:ComplexLazyTensor",
    ],
    [
        "kerneltools.keops.torch.operations:KernelSolve",
        "kerneltools.keops.torch:KernelSolve",
    ],
    [
        "kerneltools.keops.torch:ComplexLazyTensor",
        "kerneltools.torch:ComplexLazyTensor",
    ],
    ["kerneltools.lazy:LazyTensor", "kerneltools:LazyTensor"],
    ["kerneltools.lazy:Pm", "kerneltools:Pm"],
    ["kerneltools.lazy:Vi", "kerneltools:Vi"],
    ["kerneltools.lazy:Vj", "kerneltools:Vj"],
    ["kerneltools.lazy:maximum", "kerneltools:maximum"],
    ["kerneltools.lazy:minimum", "kerneltools:minimum"],
    [
        "kerneltools.estimators.semi_supervised:LabelSpreading",
        "kerneltools.estimators:LabelSpreading",
        "kerneltools:LabelSpreading",
    ],
    [
        "kerneltools.estimators.semi_supervised:LabelPropagation",
        "kerneltools.estimators:LabelPropagation",
        "kerneltools:LabelPropagation",
    ],
    [
        "kerneltools.estimators.gaussian_process:GaussianProcessClassifier",
        "kerneltools.estimators:GaussianProcessClassifier",
        "kerneltools:GaussianProcessClassifier",
    ],
]


def _needs_torch(module: str) -> bool:
    return "torch" in module.split(".")


def _module(module: str) -> types.ModuleType:
    if _needs_torch(module) and not HAS_TORCH:
        pytest.skip(f"{module} is the torch binding and torch is not installed")
    if module.split(".")[1:2] == ["jax"] and importlib.util.find_spec("jax") is None:
        pytest.skip(f"{module} is the JAX binding and JAX is not installed")
    return importlib.import_module(module)


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_public_module_gives_its_names(module):
    mod = _module(module)
    missing = [n for n in PUBLIC[module] if not hasattr(mod, n)]
    assert not missing, f"{module} lost the public names {missing}"
    for name in PUBLIC[module]:
        value = getattr(mod, name)
        if isinstance(value, types.ModuleType):
            assert value is importlib.import_module(f"{module}.{name}"), name
    unknown = [n for n in getattr(mod, "__all__", ()) if not hasattr(mod, n)]
    assert not unknown, f"{module}.__all__ names {unknown}, which it lacks"


@pytest.mark.parametrize("group", SAME_OBJECT, ids=lambda g: g[0])
def test_names_that_were_one_object_still_are(group):
    objects = []
    for path in group:
        module, name = path.split(":")
        objects.append(getattr(_module(module), name))
    for path, obj in zip(group[1:], objects[1:]):
        assert obj is objects[0], f"{path} is not {group[0]}"


def test_estimators_are_one_object_from_every_path():
    """The brief's example, spelled out (and a check that the data is read)."""
    import kerneltools
    import kerneltools.estimators
    from kerneltools.estimators import kernel_ridge

    assert kerneltools.estimators.KernelRidge is kernel_ridge.KernelRidge
    assert kerneltools.KernelRidge is kernel_ridge.KernelRidge
    assert len(PUBLIC) >= 25 and len(SAME_OBJECT) >= 30


@pytest.mark.parametrize("module", ["kerneltools", "kerneltools.accel"])
def test_command_lines_still_run_as_modules(module):
    """``python -m kerneltools`` and ``python -m kerneltools.accel``."""
    assert importlib.util.find_spec(f"{module}.__main__") is not None
