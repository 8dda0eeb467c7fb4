"""The engine: formula IR, operations, reductions, autodiff and backends.

Private to kerneltools; the estimators use the public API only.

What lives here: the formula IR (:mod:`._ir`), the operations, one block
each (:mod:`._ops`, :mod:`._ops_keops`, composites in :mod:`._composites`,
what an operation is in :mod:`._make`), the reductions (:mod:`.reductions`),
autodiff (:mod:`._autodiff`), plans (:mod:`._plan`) and their dispatch
(:mod:`._dispatch`), the NumPy reference backend (:mod:`._numpy_backend`),
the C rendering both targets share (:mod:`._render_c`, :mod:`._codegen`,
``templates/``), block sparsity (:mod:`._ranges`), Dask graphs
(:mod:`._dask`) and CG (:mod:`._cg`); the targets in :mod:`.cpu` and
:mod:`.cuda`. What it may import: nothing of kerneltools outside it.
"""
