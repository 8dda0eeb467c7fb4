"""Old module paths of moved private modules, for pickles of older releases.

Issue 38 moved modules into packages (``kerneltools._symbolic`` became
``kerneltools.lazy._symbolic``, ``kerneltools.estimators._transport_estimator``
became ``kerneltools.estimators.optimal_transport._estimator``, ...). A pickle
names the module that defines each class (and each function a ``__reduce__``
returns), so an object pickled by the release before the moves names old
paths. ``import kerneltools`` puts :class:`MovedModules` on ``sys.meta_path``:
importing an old name (as ``pickle`` does) gives the module that now holds the
code, the same module object, with no file per old name. Public modules did
not move (``kerneltools.estimators.kernel_ridge`` is now a package of that
name), so they need no entry.

This module imports nothing of kerneltools: an old name is resolved only when
something imports it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys

__all__ = ["MOVED", "MovedModules", "install"]

#: Old name -> new name, both below ``kerneltools.`` (the renames of the moves
#: commit, ``git diff -M d23a8ae 3fb99a1 --name-status``).
MOVED: dict[str, str] = {
    "_complex": "lazy._complex",
    "_complex_torch": "torch._complex",
    "_deferred": "lazy._deferred",
    "_eigen_methods": "linalg._eigsh",
    "_eigen_operators": "linalg._spectral_operators",
    "_eigensolvers": "linalg._lanczos",
    "_gp_kernels": "kernels._gp",
    "_keops_options": "lazy._keops_options",
    "_kernel": "kernels._kernel",
    "_kernel_blocks": "stats._blocks",
    "_lazy_args": "lazy._args",
    "_lazy_keops": "lazy._keops",
    "_lazy_math": "lazy._math",
    "_lazy_solve": "lazy._solve",
    "_leaves": "lazy._leaves",
    "_operators": "linalg._operators",
    "_reducing": "lazy._reducing",
    "_reduction_methods": "lazy._methods",
    "_samples_loss": "torch._samples_loss",
    "_samples_loss_device": "torch._samples_loss._device",
    "_samples_loss_inputs": "torch._samples_loss._inputs",
    "_stats_inputs": "stats._inputs",
    "_symbolic": "lazy._symbolic",
    "_torch_autograd": "torch._autograd",
    "backend._cache": "backend.cpu._cache",
    "backend._compiler": "backend.cpu._compiler",
    "backend._cpu_backend": "backend.cpu._backend",
    "backend._cpu_codegen": "backend.cpu._codegen",
    "backend._cpu_dots": "backend.cpu._dots",
    "backend._cpu_factor": "backend.cpu._factor",
    "backend._cpu_gemm": "backend.cpu._gemm",
    "backend._cpu_kmin": "backend.cpu._kmin",
    "backend._cpu_near": "backend.cpu._near",
    "backend._cpu_rows": "backend.cpu._rows",
    "backend._cpu_select": "backend.cpu._select",
    "backend._cpu_vec": "backend.cpu._vec",
    "backend._cuda_backend": "backend.cuda._backend",
    "backend._cuda_codegen": "backend.cuda._codegen",
    "backend._cuda_tcore": "backend.cuda._tcore",
    "backend._dlopen": "backend.cpu._dlopen",
    "backend._nvrtc": "backend.cuda._nvrtc",
    "backend._radius": "backend.cpu._radius",
    "estimators._array_api": "_utils._array_api",
    "estimators._cg_escalation": "estimators._shared._cg_escalation",
    "estimators._compact": "estimators._shared._compact",
    "estimators._fallback": "estimators._shared._fallback",
    "estimators._gp_arrays": "estimators.gaussian_process._arrays",
    "estimators._gp_control": "estimators.gaussian_process._control",
    "estimators._gp_device": "estimators.gaussian_process._device",
    "estimators._gp_exact": "estimators.gaussian_process._exact",
    "estimators._gp_fit": "estimators.gaussian_process._fit",
    "estimators._gp_iterative": "estimators.gaussian_process._iterative",
    "estimators._gp_optimize": "estimators.gaussian_process._optimize",
    "estimators._handover": "estimators._shared._handover",
    # the device twins merged into one path: the modules that hold their code
    "estimators._kpca_device": "estimators.kernel_pca._transform",
    "estimators._krr_device": "estimators.kernel_ridge._cg",
    "estimators._krr_solvers": "estimators.kernel_ridge._solvers",
    "estimators._krr_warm": "estimators.kernel_ridge._warm",
    "estimators._multiscale": "ot._multiscale",
    "estimators._neighbors_base": "estimators.neighbors._base",
    "estimators._neighbors_blas": "estimators.neighbors.search._blas",
    "estimators._neighbors_cells": "estimators.neighbors.search._cells",
    "estimators._neighbors_device": "estimators.neighbors._device",
    "estimators._neighbors_docs": "estimators.neighbors._docs",
    "estimators._neighbors_gemm": "estimators.neighbors.search._gemm",
    "estimators._neighbors_graph": "estimators.neighbors._graph",
    "estimators._neighbors_metrics": "estimators.neighbors._metrics",
    "estimators._neighbors_pruned": "estimators.neighbors.search._pruned",
    "estimators._neighbors_radius": "estimators.neighbors._radius",
    "estimators._neighbors_search": "estimators.neighbors.search._formula",
    "estimators._neighbors_targets": "estimators.neighbors._targets",
    "estimators._nystroem_landmarks": "estimators.nystroem._landmarks",
    "estimators._param_validation": "_utils._param_validation",
    "estimators._sinkhorn": "ot._sinkhorn",
    "estimators._sinkhorn_limit": "ot._large_blur",
    "estimators._transport_estimator": "estimators.optimal_transport._estimator",
    "estimators._transport_inputs": "ot._inputs",
    "estimators._transport_solve": "ot._solve",
    "estimators._validation": "_utils._validation",
    "estimators._xp_kernels": "estimators._shared._xp_kernels",
    # below both front ends that read formula strings (keops and torch)
    "keops._formulas": "lazy._formula_strings._operations",
    "keops._parser": "lazy._formula_strings._parser",
}


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old module name of :data:`MOVED` and loads it as the new one.

    The loader's ``exec_module`` replaces the placeholder module in
    ``sys.modules`` by the real module, which the import system then returns
    (as a module that replaces itself in ``sys.modules`` would): the real
    module keeps its own ``__name__`` and ``__spec__``, so its classes keep
    pickling under their new paths.
    """

    def find_spec(self, fullname, path=None, target=None):
        """A spec for an old name of :data:`MOVED`; None for any other."""
        if not fullname.startswith("kerneltools.") or fullname[12:] not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        """The default placeholder module (replaced in :meth:`exec_module`)."""
        return None

    def exec_module(self, module):
        """Import the new module and put it in ``sys.modules`` under the old name."""
        name = module.__spec__.name
        sys.modules[name] = importlib.import_module("kerneltools." + MOVED[name[12:]])


def install() -> None:
    """Put one :class:`MovedModules` at the end of ``sys.meta_path`` (once)."""
    if not any(isinstance(f, MovedModules) for f in sys.meta_path):
        sys.meta_path.append(MovedModules())
