"""Choosing a backend and running a plan on it.

Each backend says whether it can run here (``available``) and whether it can
run a given plan (``supports``, with every eligibility rule in one place,
and ``unsupported``, the reason when it cannot); ``run_plan`` picks one and
calls it. A backend that declines a plan is named with its reason in the
error (an explicit ``backend=``) or the fallback warning (``"auto"``);
``python -m kerneltools info`` shows why a backend cannot run at all.

This module is the bindings' one door to the backends: ``kerneltools.lazy``
runs plans with :func:`run_plan` and evaluates dense matrices
(``LazyTensor.to_dense``) with :func:`evaluate_dense` (the NumPy reference
evaluator's), so that it need not import a backend module.

``backend=None`` (every reduction's default) means this thread's configured
backend (``kerneltools.set_config`` / ``config_context``, kept here so that the
one place that dispatches a plan reads it), else the process default
``KERNELTOOLS_BACKEND``, else ``"auto"``.
"""

from __future__ import annotations

import os
import threading
import warnings

import numpy as np

from . import _numpy_backend
from ._arrays import is_cupy_array
from .cpu._backend import CpuBackend
from .cuda._backend import CudaBackend
from ._errors import BackendFallbackWarning, BackendUnavailableError, KernelStoreError
from ._numpy_backend import evaluate_dense  # re-exported for LazyTensor.to_dense
from ._plan import Plan

__all__ = [
    "BACKEND_NAMES",
    "BACKENDS",
    "backend_status",
    "check_available",
    "check_backend_name",
    "configure_backend",
    "configured_backend",
    "evaluate_dense",
    "resolve_backend",
    "run_plan",
]


class NumpyBackend:
    name = "numpy"

    def available(self) -> tuple[bool, str]:
        return True, "pure NumPy, always available (slow: the reference)"

    def supports(self, plan: Plan) -> bool:
        return True

    def run(self, plan: Plan, args, *, tiles=None):
        return _numpy_backend.evaluate_reduction(
            list(plan.formulas), plan.red, args, plan.nx, plan.ny,
            K=plan.K, dtype=plan.dtype, tiles=tiles,
        )


class _Missing:
    """A backend that is not part of this build (said plainly, never faked)."""

    def __init__(self, name: str, reason: str):
        self.name = name
        self.reason = reason

    def available(self) -> tuple[bool, str]:
        return False, self.reason

    def supports(self, plan: Plan) -> bool:
        return False


BACKENDS: dict = {
    "numpy": NumpyBackend(),
    "cpu": CpuBackend(),
    "cuda": CudaBackend(),
}

#: The names ``backend=`` accepts, everywhere: "auto" and the registered
#: backends (the one spelling of this list; the errors quote it).
BACKEND_NAMES = ("auto", *sorted(BACKENDS))

#: This thread's configuration (``kerneltools.set_config``): a new thread
#: starts unconfigured, from the process default, as in scikit-learn.
_local = threading.local()

_warned_fallback = False


def register_backend(backend) -> None:
    """Install a backend object (used by the CPU and CUDA backend modules)."""
    global BACKEND_NAMES
    BACKENDS[backend.name] = backend
    BACKEND_NAMES = ("auto", *sorted(BACKENDS))


def configured_backend() -> str | None:
    """This thread's configured backend name; None when none is set."""
    return getattr(_local, "backend", None)


def configure_backend(backend) -> None:
    """Set this thread's backend (a valid name, or None to unset)."""
    _local.backend = None if backend is None else check_backend_name(
        backend, "kerneltools.set_config: 'backend'")


def check_backend_name(backend, source: str = "the 'backend' argument") -> str:
    """``backend`` as a valid name; None: the configured backend, else
    ``KERNELTOOLS_BACKEND``, else "auto". Raises ``ValueError`` listing the
    valid names."""
    if backend in BACKEND_NAMES:
        return backend
    if backend is None:
        backend = getattr(_local, "backend", None)
        if backend is not None:  # checked when it was set
            return backend
        backend = os.environ.get("KERNELTOOLS_BACKEND", "auto") or "auto"
        source = "the environment variable KERNELTOOLS_BACKEND"
    if not isinstance(backend, str) or backend.lower() not in BACKEND_NAMES:
        raise ValueError(
            f"{source} must be one of {', '.join(map(repr, BACKEND_NAMES))}; "
            f"got {backend!r}"
        )
    return backend.lower()


def check_available(backend=None) -> str:
    """The name ``backend`` stands for (see :func:`check_backend_name`);
    raises :class:`BackendUnavailableError`, saying why, when it names a
    backend that cannot run here ("auto" always can)."""
    name = check_backend_name(backend)
    if name != "auto":
        _resolve(name, None)
    return name


_resolved: dict = {}  # (name, plan signature) -> backend: the warm path


def resolve_backend(backend, plan: Plan | None = None, *, warn: bool = True):
    """The backend object to use for ``plan`` (``backend`` None: the default;
    ``warn=False``: no fallback warning, for a report that says it itself)."""
    name = check_backend_name(backend)
    if plan is None:
        return _resolve(name, None, warn=warn)
    memo_key = (name, plan.signature)
    b = _resolved.get(memo_key)
    if b is None:
        b = _resolve(name, plan)
        if len(_resolved) > 1024:
            _resolved.clear()
        _resolved[memo_key] = b
    return b


def _resolve(name: str, plan: Plan | None, *, warn: bool = True):
    global _warned_fallback
    if name != "auto":
        b = BACKENDS[name]
        ok, why = b.available()
        if not ok:
            raise BackendUnavailableError(f"backend={name!r} cannot run here: {why}")
        if plan is not None and not b.supports(plan):
            why = _unsupported(b, plan)
            raise BackendUnavailableError(
                f"backend={name!r} does not support this reduction ({plan.reduction}, "
                f"{np.dtype(plan.dtype).name}){': ' + why if why else ''}; use "
                "backend='auto' or 'numpy'"
            )
        return b
    reasons, declined = [], False
    for candidate in ("cuda", "cpu"):
        b = BACKENDS[candidate]
        ok, why = b.available()
        if ok and (plan is None or b.supports(plan)):
            return b
        declined |= ok
        reasons.append(f"{candidate}: {_unsupported(b, plan) if ok else why}")
    if declined:  # a backend that runs here declined this plan: said for each plan
        warnings.warn(
            f"kerneltools runs this reduction on its slow NumPy backend "
            f"({'; '.join(reasons)})",
            BackendFallbackWarning,
            stacklevel=4,
        )
    elif warn and not _warned_fallback and not all(
        isinstance(BACKENDS[c], _Missing) for c in ("cuda", "cpu")
    ):
        _warned_fallback = True
        reasons = "; ".join(f"{c}: {BACKENDS[c].available()[1]}" for c in ("cuda", "cpu"))
        warnings.warn(
            f"kerneltools is using its slow NumPy backend ({reasons})",
            BackendFallbackWarning,
            stacklevel=4,
        )
    return BACKENDS["numpy"]


def _unsupported(b, plan) -> str:
    """Why backend ``b`` declines ``plan``, as it says (or a generic reason)."""
    why = getattr(b, "unsupported", None)
    return (why(plan) if why is not None else None) or "it does not support this plan"


#: Options a reduction accepts besides ``backend`` (``tiles``: the NumPy
#: backend's tile sizes, for tests; the compiled backends choose their own;
#: ``ranges``: a block-sparsity description, see :mod:`._ranges`).
REDUCTION_OPTIONS = ("tiles", "ranges")


def run_plan(plan: Plan, args, backend=None, **options):
    try:
        return _run_plan(plan, args, backend, **options)
    except KernelStoreError:
        # Nowhere to store its new kernel (full or read-only disks): the
        # backend declines this plan from now on, and "auto" chooses again.
        name = check_backend_name(backend)
        if name != "auto":
            raise
        _resolved.pop((name, plan.signature), None)
        return _run_plan(plan, args, backend, **options)


def _run_plan(plan: Plan, args, backend=None, **options):
    unknown = sorted(set(options) - set(REDUCTION_OPTIONS))
    if unknown:
        raise TypeError(
            f"unexpected keyword argument(s) {', '.join(map(repr, unknown))} for a "
            f"reduction; accepted: 'backend', {', '.join(map(repr, REDUCTION_OPTIONS))}"
        )
    ranges = options.pop("ranges", None)
    b = resolve_backend(backend, plan)
    if options and b.name != "numpy":
        options = {}
    if ranges is not None:
        from ._ranges import SortedSide, describe, run_blocks, run_native

        n_i, n_j = (plan.nx, plan.ny) if plan.axis == 1 else (plan.ny, plan.nx)
        side = describe(ranges, plan.axis, n_i, n_j)
        gpu_in = any(is_cupy_array(a) for a in args)
        if b.name == "cpu" and not gpu_in and isinstance(side, SortedSide):
            # one call of the C backend's block-sparse kernel
            return run_native(plan, args, side, b.run_ranges)
        if (b.name == "cuda" and isinstance(side, SortedSide)
                and b.ranges_unsupported(plan) is None):
            # one launch of the CUDA backend's block-sparse kernel
            return run_native(plan, args, side, b.run_ranges)
        blocks = side.blocks() if isinstance(side, SortedSide) else side
        if b.name == "cuda" or gpu_in:
            import cupy as xp

            args = [xp.asarray(a) for a in args]
        else:
            xp = np
        outs = run_blocks(plan, args, blocks,
                          lambda p, a: run_plan(p, a, b.name, **options), xp=xp)
        if xp is not np and not gpu_in:  # NumPy in, NumPy out
            outs = tuple(xp.asnumpy(o) for o in outs)
        return outs
    if b.name != "cuda" and any(is_cupy_array(a) for a in args):
        # CuPy in, CuPy out, also when a host backend was asked for.
        import cupy

        outs = b.run(plan, [cupy.asnumpy(a) if is_cupy_array(a) else a for a in args],
                     **options)
        return tuple(cupy.asarray(o) for o in outs)
    return b.run(plan, args, **options)


def backend_status() -> list[tuple[str, bool, str]]:
    return [(name, *BACKENDS[name].available()) for name in ("numpy", "cpu", "cuda")]
