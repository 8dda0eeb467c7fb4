"""Utilities below the estimators, shared by every front end.

What lives here: the Array API layer (:mod:`._array_api`: where an input
lives, where the work runs, device copies, scores of device arrays),
scikit-learn's parameter constraints with its messages
(:mod:`._param_validation`) and input validation cast to the engine's floats
(:mod:`._validation`), and the record of the scikit-learn classes that
:mod:`kerneltools.accel` replaces (:mod:`._originals`, read by the
estimators' fallback). What it may import: :mod:`kerneltools.config`,
:mod:`kerneltools.dask`, :mod:`kerneltools.exceptions` and the engine's array
helpers; never :mod:`kerneltools.lazy` or anything above it, so that
:mod:`kerneltools.ot`, :mod:`kerneltools.torch` and the estimators can all use
it.
"""
