"""kerneltools.accel: scikit-learn's import paths give ours, its internals keep its own."""

from __future__ import annotations

import importlib
import logging
import os
import re
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

import kerneltools.accel as accel
import kerneltools.estimators as ours

NAMES = {
    "sklearn.kernel_ridge": ["KernelRidge"],
    "sklearn.gaussian_process": ["GaussianProcessRegressor"],
    "sklearn.gaussian_process._gpr": ["GaussianProcessRegressor"],
    "sklearn.neighbors": ["NearestNeighbors", "KNeighborsClassifier", "KNeighborsRegressor"],
    "sklearn.neighbors._unsupervised": ["NearestNeighbors"],
    "sklearn.neighbors._classification": ["KNeighborsClassifier"],
    "sklearn.neighbors._regression": ["KNeighborsRegressor"],
    "sklearn.kernel_approximation": ["Nystroem"],
}


#: The hand-written list that accel held before each estimator declared the
#: class it replaces (issue 38): the derived list must stay this one.
PATCHES_BEFORE_DERIVATION = {
    ("sklearn.kernel_ridge", "sklearn.kernel_ridge", "KernelRidge",
     "kerneltools.estimators.kernel_ridge"),
    ("sklearn.gaussian_process", "sklearn.gaussian_process._gpr",
     "GaussianProcessRegressor", "kerneltools.estimators.gaussian_process"),
    ("sklearn.neighbors", "sklearn.neighbors._unsupervised", "NearestNeighbors",
     "kerneltools.estimators.neighbors"),
    ("sklearn.neighbors", "sklearn.neighbors._classification", "KNeighborsClassifier",
     "kerneltools.estimators.neighbors"),
    ("sklearn.neighbors", "sklearn.neighbors._regression", "KNeighborsRegressor",
     "kerneltools.estimators.neighbors"),
    ("sklearn.kernel_approximation", "sklearn.kernel_approximation", "Nystroem",
     "kerneltools.estimators.nystroem"),
    ("sklearn.decomposition", "sklearn.decomposition._kernel_pca", "KernelPCA",
     "kerneltools.estimators.kernel_pca"),
    ("sklearn.manifold", "sklearn.manifold._spectral_embedding", "SpectralEmbedding",
     "kerneltools.estimators.spectral"),
    ("sklearn.cluster", "sklearn.cluster._spectral", "SpectralClustering",
     "kerneltools.estimators.spectral"),
    ("sklearn.neighbors", "sklearn.neighbors._kde", "KernelDensity",
     "kerneltools.estimators.density"),
    ("sklearn.neighbors", "sklearn.neighbors._lof", "LocalOutlierFactor",
     "kerneltools.estimators.outliers"),
    ("sklearn.cluster", "sklearn.cluster._mean_shift", "MeanShift",
     "kerneltools.estimators.mean_shift"),
    ("sklearn.neighbors", "sklearn.neighbors._classification",
     "RadiusNeighborsClassifier", "kerneltools.estimators.neighbors"),
    ("sklearn.neighbors", "sklearn.neighbors._regression", "RadiusNeighborsRegressor",
     "kerneltools.estimators.neighbors"),
    ("sklearn.neighbors", "sklearn.neighbors._graph", "KNeighborsTransformer",
     "kerneltools.estimators.neighbors"),
    ("sklearn.neighbors", "sklearn.neighbors._graph", "RadiusNeighborsTransformer",
     "kerneltools.estimators.neighbors"),
}


#: The families added since, each declaring the classes it replaces.
PATCHES_ADDED = {
    ("sklearn.svm", "sklearn.svm._classes", name, "kerneltools.estimators.svm")
    for name in ("SVC", "NuSVC", "SVR", "NuSVR", "OneClassSVM")
} | {
    ("sklearn.cluster", "sklearn.cluster._dbscan", "DBSCAN",
     "kerneltools.estimators.cluster"),
    ("sklearn.impute", "sklearn.impute._knn", "KNNImputer",
     "kerneltools.estimators.impute"),
    ("sklearn.cluster", "sklearn.cluster._hdbscan.hdbscan", "HDBSCAN",
     "kerneltools.estimators.cluster"),
    ("sklearn.semi_supervised", "sklearn.semi_supervised._label_propagation",
     "LabelSpreading", "kerneltools.estimators.semi_supervised"),
    ("sklearn.semi_supervised", "sklearn.semi_supervised._label_propagation",
     "LabelPropagation", "kerneltools.estimators.semi_supervised"),
    ("sklearn.gaussian_process", "sklearn.gaussian_process._gpc",
     "GaussianProcessClassifier", "kerneltools.estimators.gaussian_process"),
}


def test_the_derived_patch_list_is_the_hand_written_one():
    patches = accel.PATCHES
    assert all(isinstance(p, accel.Patch) for p in patches)
    assert len(patches) == len(set(patches))
    assert set(patches) == PATCHES_BEFORE_DERIVATION | PATCHES_ADDED
    assert accel._derive_patches() == patches  # derived again: the same, in order


def _estimators_with(*classes):
    """A stand-in for kerneltools.estimators that exports ``classes`` too."""
    names = list(ours.__all__)
    module = types.ModuleType("fake_estimators")
    for name in names:
        setattr(module, name, getattr(ours, name))
    for cls in classes:
        setattr(module, cls.__name__, cls)
    module.__all__ = names + [cls.__name__ for cls in classes]
    return module


def test_a_new_estimator_is_patched_from_its_declaration_alone():
    """What a new family adds (a public class that names the scikit-learn
    class it replaces) is all accel needs; a subclass that declares nothing
    replaces nothing."""
    from sklearn.linear_model import _ridge as _classes

    svc = type("Ridge", (), {"_sklearn_class": "sklearn.linear_model.Ridge",
                             "__module__": "kerneltools.estimators.kernel_ridge"})
    undeclared = type("KernelRidgeCV", (ours.KernelRidge,), {})
    import kerneltools.estimators.kernel_ridge as home

    home.Ridge = svc  # exported by its public module, as a family's class is
    try:
        patches = accel._derive_patches(_estimators_with(svc, undeclared))
    finally:
        del home.Ridge
    assert patches[: len(accel.PATCHES)] == accel.PATCHES
    added = accel.Patch("sklearn.linear_model", _classes.__name__, "Ridge",
                        "kerneltools.estimators.kernel_ridge")
    assert patches[len(accel.PATCHES):] == (added,)


def test_a_declaration_that_names_another_class_is_refused():
    wrong = type("KernelRidge2", (),
                 {"_sklearn_class": "sklearn.kernel_ridge.KernelRidge"})
    with pytest.raises(TypeError, match="must have the name of the class it replaces"):
        accel._derive_patches(_estimators_with(wrong))


@pytest.fixture
def installed():
    accel.install()
    try:
        yield
    finally:
        accel.uninstall()


def test_install_patches_public_and_defining_modules(installed):
    for module, names in NAMES.items():
        for name in names:
            assert getattr(importlib.import_module(module), name) is getattr(ours, name)


def test_install_is_idempotent_and_uninstall_restores(caplog):
    with caplog.at_level(logging.INFO, logger="kerneltools"):
        accel.install()
        accel.install()
    try:
        assert accel.is_installed()
        assert sum("KernelRidge" in r.message for r in caplog.records) == 1
        finders = [f for f in sys.meta_path if type(f).__name__ == "_InternalsFinder"]
        assert len(finders) == 1
    finally:
        accel.uninstall()
    accel.uninstall()
    assert not accel.is_installed()
    for module, names in NAMES.items():
        for name in names:
            cls = getattr(importlib.import_module(module), name)
            assert cls.__module__.startswith("sklearn.")
            assert accel.original(f"{module.split('._')[0]}.{name}") is cls


def test_internals_and_originals_keep_scikit_learns(installed):
    from sklearn.neighbors import KNeighborsTransformer, _graph

    original = accel.original("sklearn.neighbors.NearestNeighbors")
    assert original.__module__ == "sklearn.neighbors._unsupervised"
    assert accel.originals["sklearn.neighbors.NearestNeighbors"] is original
    assert _graph.NearestNeighbors is original  # kneighbors_graph's
    assert not issubclass(KNeighborsTransformer, ours.NearestNeighbors)
    with pytest.raises(ValueError, match="not a patched class"):
        accel.original("sklearn.linear_model.Ridge")


def test_command_line_runs_a_script_as_main(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import sys
        from sklearn.kernel_ridge import KernelRidge
        from sklearn.neighbors._classification import KNeighborsClassifier
        import sklearn.manifold._isomap as isomap  # imported after install
        print(__name__, sys.argv[1:], KernelRidge.__module__,
              KNeighborsClassifier.__module__, isomap.NearestNeighbors.__module__)
    """))
    out = subprocess.run([sys.executable, "-m", "kerneltools.accel", "-v", str(script),
                          "a", "--flag"], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [
        "__main__", "['a',", "'--flag']", "kerneltools.estimators.kernel_ridge",
        "kerneltools.estimators.neighbors", "sklearn.neighbors._unsupervised"]
    assert "sklearn.kernel_ridge.KernelRidge -> kerneltools" in out.stderr


def test_plain_scikit_learn_example_runs_under_accel(tmp_path):
    """examples/accel_kernel_ridge.py imports scikit-learn only: under
    ``python -m kerneltools.accel`` it fits ours, to the same R^2 as the plain
    run (tests/test_examples.py) up to the iterative solver's tolerance."""
    root = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, "-m", "kerneltools.accel", "examples/accel_kernel_ridge.py",
           "--quick", "--out", str(tmp_path)]
    out = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=True,
                         timeout=120, env=dict(os.environ, MPLBACKEND="Agg"))
    assert "estimator: kerneltools.estimators.kernel_ridge.KernelRidge" in out.stdout
    r2 = float(re.search(r"held-out R\^2 = ([-0-9.]+)", out.stdout).group(1))
    best = float(re.search(r"noise-free curve scores ([-0-9.]+)", out.stdout).group(1))
    assert best - 0.02 < r2 <= best + 0.02, out.stdout
