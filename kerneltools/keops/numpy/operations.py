"""``pykeops.numpy.operations``: :class:`KernelSolve`."""

from . import KernelSolve

__all__ = ["KernelSolve"]
