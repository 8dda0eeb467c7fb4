"""The CUDA target: generated kernels compiled by NVRTC through CuPy.

What lives here: the backend (:mod:`._backend`: GPU detection, compiling
and launching), the CUDA code generation that fills the CUDA templates
(:mod:`._codegen`), the opt-in tensor-core Gaussian products
(:mod:`._tcore`) and the compile-only NVRTC check that runs without a GPU
(:mod:`._nvrtc`). What it may import: the rest of
:mod:`kerneltools.backend` (IR, operations, reductions, the shared code
generation, the templates and the kernel cache of :mod:`..cpu`) and
:mod:`kerneltools.exceptions`; nothing above the engine. CuPy is imported
only when a GPU is used.
"""
