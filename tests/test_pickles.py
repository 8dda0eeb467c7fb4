"""Objects pickled by the release before issue 38 load and work.

``tests/_support/pickles/*.pkl`` are ours, written by
``tests/_support/pickles/write_pickles.py`` with the tree before the moves
(commit d23a8ae): a fitted estimator of every family and a LazyTensor
formula. Each must unpickle with the code under test and give what the same
object made now gives. The pickles name old private module paths
(``kerneltools.estimators._transport_estimator``, ``kerneltools._symbolic``),
which ``kerneltools._moved`` maps to the modules that hold the code now.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import pickle
import pickletools
import re
from pathlib import Path

import numpy as np
import pytest

from kerneltools._moved import MOVED

FOLDER = Path(__file__).resolve().parent / "_support" / "pickles"


def _writer():
    """``write_pickles.py``, whose cases the test makes again."""
    spec = importlib.util.spec_from_file_location(
        "_write_pickles", FOLDER / "write_pickles.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CASES = _writer().CASES

#: Results known only up to the sign of each column (eigenvectors).
SIGN_FREE = {"kernel_pca", "spectral_embedding"}

#: Every ``module:name`` of ours that a pickle of the release before names,
#: found with ``pickletools`` on pickles of fitted estimators (every class;
#: the iterative GP; KernelRidge's three solvers with three kernels; every
#: Nystroem landmark method; KDE's kernels; k-NN metrics) and of formulas:
#: the estimator classes, where they were defined (five in private modules),
#: and what the ``__reduce__`` methods of the release return (``_unflatten``
#: for formula nodes, ``FeatureDim``, read from the code). Fitted estimators
#: hold no other object of ours. The files here hold most of them.
PICKLED_NAMES = [
    "kerneltools._lazy_keops:FeatureDim",
    "kerneltools._symbolic:Binding",
    "kerneltools.backend._ir:_unflatten",
    "kerneltools.estimators._neighbors_graph:KNeighborsTransformer",
    "kerneltools.estimators._neighbors_graph:RadiusNeighborsTransformer",
    "kerneltools.estimators._neighbors_radius:RadiusNeighborsClassifier",
    "kerneltools.estimators._neighbors_radius:RadiusNeighborsRegressor",
    "kerneltools.estimators._transport_estimator:SinkhornTransport",
    "kerneltools.estimators.density:KernelDensity",
    "kerneltools.estimators.gaussian_process:GaussianProcessRegressor",
    "kerneltools.estimators.kernel_pca:KernelPCA",
    "kerneltools.estimators.kernel_ridge:KernelRidge",
    "kerneltools.estimators.mean_shift:MeanShift",
    "kerneltools.estimators.neighbors:KNeighborsClassifier",
    "kerneltools.estimators.neighbors:KNeighborsRegressor",
    "kerneltools.estimators.neighbors:NearestNeighbors",
    "kerneltools.estimators.nystroem:Nystroem",
    "kerneltools.estimators.outliers:LocalOutlierFactor",
    "kerneltools.estimators.spectral:SpectralClustering",
    "kerneltools.estimators.spectral:SpectralEmbedding",
    "kerneltools.lazy:LazyTensor",
]


def _globals_named(data: bytes) -> set[str]:
    """The ``module:name`` pairs a pickle imports (read from its opcodes)."""
    out, strings = io.StringIO(), []
    pickletools.dis(data, out=out)
    found = set()
    for line in out.getvalue().splitlines():
        text = re.search(r"UNICODE\s+'([^']*)'", line)
        if text:
            strings.append(text.group(1))
        elif "STACK_GLOBAL" in line:
            found.add(f"{strings[-2]}:{strings[-1]}")
        elif (glob := re.search(r"\bGLOBAL\s+'(\S+) (\S+)'", line)):
            found.add(f"{glob.group(1)}:{glob.group(2)}")
    return found


def _aligned(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a`` with each column's sign flipped to agree with ``b``'s."""
    signs = np.sign(np.sum(a * b, axis=0))
    signs[signs == 0] = 1
    return a * signs


def _outputs(obj, method, args):
    out = getattr(obj, method)(*args)
    out = out if isinstance(out, tuple) else (out,)
    return [np.asarray(o.toarray() if hasattr(o, "toarray") else o) for o in out]


@pytest.mark.parametrize("name", sorted(CASES))
def test_old_pickle_loads_and_gives_what_a_new_fit_gives(name):
    with open(FOLDER / f"{name}.pkl", "rb") as f:
        old = pickle.load(f)
    new, method, args = CASES[name]()
    assert type(old) is type(new)
    if hasattr(new, "kernel_"):  # the fitted kernel objects came back too
        assert type(old.kernel_) is type(new.kernel_)
        np.testing.assert_allclose(old.kernel_.theta, new.kernel_.theta, rtol=1e-6)
    for got, want in zip(_outputs(old, method, args), _outputs(new, method, args)):
        if name in SIGN_FREE:
            got = _aligned(got, want)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9, err_msg=name)


def test_the_pickles_name_old_private_paths():
    """The files exercise the aliases (a pickle naming only public modules
    would pass without them), and every path they name resolves."""
    named = set()
    for path in sorted(FOLDER.glob("*.pkl")):
        named |= _globals_named(path.read_bytes())
    assert {p.stem for p in FOLDER.glob("*.pkl")} == set(CASES)
    ours = {p for p in named if p.startswith("kerneltools")}
    assert ours <= set(PICKLED_NAMES), sorted(ours - set(PICKLED_NAMES))
    moved = {p for p in ours if p.split(":")[0].removeprefix("kerneltools.") in MOVED}
    assert moved == {
        "kerneltools._symbolic:Binding",
        "kerneltools.estimators._neighbors_graph:KNeighborsTransformer",
        "kerneltools.estimators._neighbors_radius:RadiusNeighborsClassifier",
        "kerneltools.estimators._transport_estimator:SinkhornTransport",
    }


def _in_torch_binding(module: str) -> bool:
    """Whether ``module`` (an old or a new name) is a module of the torch binding."""
    new = MOVED.get(module.removeprefix("kerneltools."), module)
    return "torch" in new.split(".") or "torch" in module.split(".")


def _resolve(module: str, name: str):
    if _in_torch_binding(module) and importlib.util.find_spec("torch") is None:
        pytest.skip(f"{module} is part of the torch binding; torch is not installed")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("path", PICKLED_NAMES)
def test_every_name_an_old_pickle_holds_resolves(path):
    """By its old path, to the object that now pickles under its new path."""
    module, name = path.split(":")
    obj = _resolve(module, name)
    assert obj.__name__ == name
    assert getattr(importlib.import_module(obj.__module__), name) is obj


def test_every_old_name_is_the_new_module():
    for old, new in sorted(MOVED.items()):
        if _in_torch_binding(old) and importlib.util.find_spec("torch") is None:
            continue  # the torch binding's modules need torch, not installed here
        try:
            target = importlib.import_module(f"kerneltools.{new}")
        except ModuleNotFoundError:
            pytest.fail(f"kerneltools.{new}, the new home of kerneltools.{old}, is "
                        "gone: point the entry of kerneltools._moved.MOVED at the "
                        "module that now defines what old pickles name there "
                        "(PICKLED_NAMES), or drop it if they name nothing there")
        assert importlib.import_module(f"kerneltools.{old}") is target, old
        assert target.__name__ == target.__spec__.name == f"kerneltools.{new}"


def test_old_names_are_not_files_and_unknown_names_still_fail():
    """An alias never shadows a real module; a name that never existed is
    still a ModuleNotFoundError."""
    root = Path(importlib.import_module("kerneltools").__file__).parent
    for old in MOVED:
        base = root.joinpath(*old.split("."))
        assert not base.with_suffix(".py").exists() and not base.is_dir(), old
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("kerneltools._no_such_module")
