"""scikit-learn-compatible estimators built on kerneltools' reductions."""

from .kernel_ridge import KernelRidge

__all__ = ["KernelRidge"]
