"""``pykeops.torch.operations``: :class:`KernelSolve`."""

from . import KernelSolve

__all__ = ["KernelSolve"]
