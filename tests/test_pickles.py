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

#: Every class defined in a moved module, by its old module path: an old
#: pickle of any object holding one names it there (data from d23a8ae).
DEFINED_IN_MOVED: dict[str, list[str]] = {'kerneltools._complex': ['ComplexMethods'],
 'kerneltools._complex_torch': ['ComplexTorchMethods'],
 'kerneltools._deferred': ['DeferredReduction', 'DeferredSolve', '_Deferred'],
 'kerneltools._eigen_operators': ['CenteredOperator', 'NormalizedAffinityOperator',
                                  'OffDiagonalKernel', '_SymmetricOperator'],
 'kerneltools._eigensolvers': ['_Basis', '_Progress'],
 'kerneltools._gp_kernels': ['StationaryForm', '_LazyLeaves', '_Translated'],
 'kerneltools._kernel': ['Kernel', '_SourceDense'],
 'kerneltools._lazy_keops': ['FeatureDim', 'KeopsMethods'],
 'kerneltools._lazy_math': ['MathMethods'],
 'kerneltools._lazy_solve': ['LinearSystem'],
 'kerneltools._operators': ['KernelOperator', '_Adjoint'],
 'kerneltools._reducing': ['_DaskPlan'],
 'kerneltools._samples_loss': ['SamplesLoss', '_KernelConv'],
 'kerneltools._samples_loss_device': ['Solution', 'TensorPlace', '_LossValue'],
 'kerneltools._samples_loss_inputs': ['Inputs'],
 'kerneltools._symbolic': ['Binding'],
 'kerneltools._torch_autograd': ['Reduce', 'ReduceSpec', 'Solve', 'SolveSpec',
                                 '_GradientContext'],
 'kerneltools.backend._cache': ['_State'],
 'kerneltools.backend._compiler': ['Compiler'],
 'kerneltools.backend._cpu_backend': ['CpuBackend'],
 'kerneltools.backend._cpu_codegen': ['_Wide'],
 'kerneltools.backend._cpu_factor': ['Factored'],
 'kerneltools.backend._cpu_near': ['Near'],
 'kerneltools.backend._cpu_select': ['TileState'],
 'kerneltools.backend._cuda_backend': ['CudaBackend'],
 'kerneltools.backend._cuda_codegen': ['Launch'],
 'kerneltools.backend._cuda_tcore': ['TcoreLaunch', 'TcoreMatch'],
 'kerneltools.backend._nvrtc': ['CheckResult', '_Nvrtc'],
 'kerneltools.estimators._array_api': ['DeviceCopies', 'DeviceScore', 'Placement',
                                       'Space'],
 'kerneltools.estimators._fallback': ['FallbackMixin'],
 'kerneltools.estimators._gp_arrays': ['GPPlacement'],
 'kerneltools.estimators._gp_device': ['DeviceGP', 'DeviceNystroem', '_Operator'],
 'kerneltools.estimators._gp_fit': ['HyperparameterFit'],
 'kerneltools.estimators._gp_iterative': ['IterativeGP', 'StoredNystroem'],
 'kerneltools.estimators._gp_optimize': ['_StallWatch', '_Stalled'],
 'kerneltools.estimators._handover': ['HandOver'],
 'kerneltools.estimators._krr_device': ['_HostRows', '_Preconditioner',
                                        '_Products'],
 'kerneltools.estimators._multiscale': ['_Clusters'],
 'kerneltools.estimators._neighbors_base': ['KNeighborsQueries', 'NeighborsBase',
                                            'RadiusQueries', 'SupervisedFit'],
 'kerneltools.estimators._neighbors_blas': ['BlasSearch', '_TilePlan'],
 'kerneltools.estimators._neighbors_cells': ['CellSearch'],
 'kerneltools.estimators._neighbors_device': ['DevicePlacement', 'DeviceSearch',
                                              'HostSearch'],
 'kerneltools.estimators._neighbors_gemm': ['GemmSearch'],
 'kerneltools.estimators._neighbors_graph': ['KNeighborsTransformer',
                                             'RadiusNeighborsTransformer',
                                             '_GraphTransformer'],
 'kerneltools.estimators._neighbors_metrics': ['Metric'],
 'kerneltools.estimators._neighbors_pruned': ['Cells', 'Grid', 'PrunedSearch'],
 'kerneltools.estimators._neighbors_radius': ['RadiusNeighborsClassifier',
                                              'RadiusNeighborsRegressor',
                                              '_RadiusSupervised'],
 'kerneltools.estimators._neighbors_search': ['ExpandedSearch', 'FormulaSearch'],
 'kerneltools.estimators._nystroem_landmarks': ['_Seeding'],
 'kerneltools.estimators._param_validation': ['Dtypes', 'Interval',
                                              'InvalidParameterError', 'Options',
                                              'StrOptions', '_Described',
                                              '_InstanceOf'],
 'kerneltools.estimators._sinkhorn': ['CostMatrix', 'Costs', 'Potentials',
                                      'Problem'],
 'kerneltools.estimators._sinkhorn_limit': ['Expansion', 'Regime'],
 'kerneltools.estimators._transport_estimator': ['SinkhornTransport']}

#: Functions that a ``__reduce__`` of the release before returns (old path).
REDUCE_TARGETS = ["kerneltools.backend._ir:_unflatten"]


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
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("name", sorted(CASES))
def test_old_pickle_loads_and_gives_what_a_new_fit_gives(name):
    with open(FOLDER / f"{name}.pkl", "rb") as f:
        old = pickle.load(f)
    new, method, args = CASES[name]()
    assert type(old) is type(new)
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
    assert "kerneltools.estimators._transport_estimator:SinkhornTransport" in named
    assert "kerneltools._symbolic:Binding" in named
    for pair in sorted(p for p in named if p.startswith("kerneltools")):
        module, attr = pair.split(":")
        assert getattr(importlib.import_module(module), attr) is not None, pair


def _in_torch_binding(module: str) -> bool:
    """Whether ``module`` (an old or a new name) is a module of the torch binding."""
    new = MOVED.get(module.removeprefix("kerneltools."), module)
    return "torch" in new.split(".") or "torch" in module.split(".")


def _resolve(module: str, name: str):
    if _in_torch_binding(module) and importlib.util.find_spec("torch") is None:
        pytest.skip(f"{module} is part of the torch binding; torch is not installed")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("module", sorted(DEFINED_IN_MOVED))
def test_classes_of_moved_modules_resolve_by_their_old_path(module):
    for name in DEFINED_IN_MOVED[module]:
        cls = _resolve(module, name)
        assert isinstance(cls, type) and cls.__name__ == name, f"{module}.{name}"
        # It pickles under its new path, which resolves to the same class.
        assert getattr(importlib.import_module(cls.__module__), name) is cls


def test_reduce_targets_resolve_by_their_old_path():
    for path in REDUCE_TARGETS:
        assert callable(_resolve(*path.split(":"))), path


def test_every_old_name_is_the_new_module():
    for old, new in sorted(MOVED.items()):
        if _in_torch_binding(old) and importlib.util.find_spec("torch") is None:
            continue  # the torch binding's modules need torch, not installed here
        module = importlib.import_module(f"kerneltools.{old}")
        assert module is importlib.import_module(f"kerneltools.{new}"), old
        assert module.__name__ == module.__spec__.name == f"kerneltools.{new}"


def test_old_names_are_not_files_and_unknown_names_still_fail():
    """An alias never shadows a real module; a name that never existed is
    still a ModuleNotFoundError."""
    root = Path(importlib.import_module("kerneltools").__file__).parent
    for old in MOVED:
        base = root.joinpath(*old.split("."))
        assert not base.with_suffix(".py").exists() and not base.is_dir(), old
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("kerneltools._no_such_module")
