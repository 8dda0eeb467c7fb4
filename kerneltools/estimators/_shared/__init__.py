"""Helpers shared by several estimator families (private).

What lives here: the hand-over of what the engine does not serve to
scikit-learn's own estimator (:mod:`._fallback`, :mod:`._handover`), what
conjugate-gradient solves do when CG stops short (:mod:`._cg_escalation`),
block-sparse pruning for compact kernels (:mod:`._compact`), the k-means
cells that DBSCAN's and the label graph's pruning start from
(:mod:`._kmeans_cells`) and dense blocks
of scikit-learn's named kernels in any Array API namespace
(:mod:`._xp_kernels`). What it may import: the public API
(:mod:`kerneltools.lazy`, :mod:`kerneltools.kernels`,
:mod:`kerneltools.linalg`, :mod:`kerneltools.ranges`,
:mod:`kerneltools.config`, :mod:`kerneltools.exceptions`) and
:mod:`kerneltools._utils`; never a family package (the families import it).
"""
