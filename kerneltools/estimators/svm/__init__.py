"""Support vector machines (libsvm's five) on the engine.

What lives here: :class:`SVC`, :class:`NuSVC`, :class:`SVR`, :class:`NuSVR`
and :class:`OneClassSVM` (:mod:`._classes`; the classifiers' one-vs-one
machinery in :mod:`._classifiers`, the shared estimator code in
:mod:`._base`), libsvm's formulations as dual problems (:mod:`._problems`),
the dual solver, libsvm's SMO inside a large-working-set decomposition
(:mod:`._solver`), the kernel as the solver uses it, dense blocks and
one reduction per gradient update (:mod:`._kernel_ops`), and libsvm's
probability outputs, Platt scaling on scikit-learn's folds
(:mod:`._platt`). What it may import: the public API (:mod:`kerneltools.lazy`, :mod:`kerneltools.kernels`),
:mod:`kerneltools._utils` and :mod:`.._shared`; never the engine.
"""

from ._classes import SVC, SVR, NuSVC, NuSVR, OneClassSVM

__all__ = ["SVC", "SVR", "NuSVC", "NuSVR", "OneClassSVM"]
