"""The CPU target: generated C + OpenMP kernels, compiled at run time.

What lives here: the backend (:mod:`._backend`: plans to compiled calls),
the C code generation that fills the CPU templates (:mod:`._codegen`, with
the dense kernel's specialisations :mod:`._dots`, :mod:`._factor`,
:mod:`._gemm`, :mod:`._kmin`, :mod:`._near`, :mod:`._rows`, :mod:`._vec`),
the K-min over BLAS tiles (:mod:`._select`) and radius searches
(:mod:`._radius`), finding the compiler (:mod:`._compiler`), the on-disk
kernel cache (:mod:`._cache`) and loading verified libraries
(:mod:`._dlopen`). What it may import: the rest of :mod:`kerneltools.backend`
(IR, operations, reductions, the shared code generation, the templates) and
:mod:`kerneltools.exceptions`; nothing above the engine, and not
:mod:`.cuda`.
"""
