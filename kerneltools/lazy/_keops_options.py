"""pykeops' reduction keywords, read for both bindings (issue 21).

pykeops' reductions (``K.sum(axis=1, ...)``, ``K @ b``, ``Genred`` calls) take
keywords that name its own machinery. kerneltools accepts every one of them
so that pykeops code runs unchanged, and each one either does what it asks
or is refused; none silently changes the numbers:

``backend``
    pykeops' ``"CPU"`` is our ``"cpu"``; ``"GPU"``, ``"GPU_1D"`` and
    ``"GPU_2D"`` are ``"cuda"`` (our CUDA kernels choose their own launch
    layout); ``"auto"`` and our own names pass through.
``dtype_acc`` / ``use_double_acc``
    ``"float64"`` (or ``use_double_acc=True``) on float32 data computes the
    whole reduction in float64 (the formula too, not only the accumulator:
    at least as accurate as asked) and returns float32, as pykeops does.
    ``"auto"``, and the data's own dtype, change nothing. ``"float32"`` on
    float64 data and ``"float16"`` are refused, as in pykeops.
``sum_scheme``
    ``"auto"``, ``"block_sum"`` and ``"direct_sum"`` run the engine's own
    summation order (the same numbers up to rounding).
    ``"kahan_scheme"`` (compensated float32 sums) computes float32 data in
    float64, which is more accurate; on float64 data it is refused (the
    engine has no compensated float64 sum).
``enable_chunks``, ``use_fast_math``
    Accepted (booleans) and without effect: chunked modes are a pykeops GPU
    layout choice, and kerneltools never compiles with fast math (IEEE
    results, NaN and infinity kept).
``device_id``
    The GPU of a CUDA reduction of host (NumPy) data (``cupy.cuda.Device``);
    CuPy inputs run where they are; without a GPU, or on a host backend,
    nothing to choose.
``optional_flags``
    pykeops' extra compiler flags: refused unless empty (the engine's flags
    are part of its kernel cache's key).

``ranges`` and our ``tiles`` pass through; ``out``, ``keepdim`` and
``call`` are the bindings' (:func:`take_output_options`).
"""

from __future__ import annotations

import contextlib

import numpy as np

__all__ = ["PYKEOPS_KEYWORDS", "engine_backend", "engine_options", "finish",
           "take_output_options"]

_BACKENDS = {"CPU": "cpu", "GPU": "cuda", "GPU_1D": "cuda", "GPU_2D": "cuda"}
_SCHEMES = ("auto", "block_sum", "direct_sum", "kahan_scheme")

#: The pykeops keywords that :func:`engine_options` reads.
PYKEOPS_KEYWORDS = ("dtype_acc", "use_double_acc", "sum_scheme", "enable_chunks",
                    "use_fast_math", "device_id", "optional_flags")


def engine_backend(backend):
    """``backend`` in the engine's names (pykeops' ``"CPU"``, ``"GPU"``,
    ``"GPU_1D"``, ``"GPU_2D"`` mapped); other values are left for the
    engine to check."""
    if isinstance(backend, str) and backend in _BACKENDS:  # pykeops' exact spellings
        return _BACKENDS[backend]
    return backend


def _flag(options, name):
    v = options.pop(name, None)
    if v is not None and not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"the reduction option '{name}' must be True or False, got {v!r}")
    return v


def engine_options(options: dict, dtype) -> tuple[dict, np.dtype | None, object]:
    """Read and remove pykeops' keywords from ``options`` (a copy is made).

    Returns ``(options, compute_dtype, device)``: the options left for the
    engine, the dtype to compute in when it is not the data's (None: the
    data's) and a context manager selecting the GPU (``device_id``)."""
    options = dict(options)
    dtype = np.dtype(dtype)
    acc = options.pop("dtype_acc", None)
    double = _flag(options, "use_double_acc")
    scheme = options.pop("sum_scheme", None)
    _flag(options, "enable_chunks")
    _flag(options, "use_fast_math")
    flags = options.pop("optional_flags", None)
    if flags:
        raise ValueError(
            f"the reduction option 'optional_flags' ({flags!r}) is not supported: "
            "kerneltools compiles with its own flags (part of its kernel cache's key)")
    want = _acc_dtype(acc, double, dtype)
    if scheme is not None:
        if scheme not in _SCHEMES:
            raise ValueError(f"the reduction option 'sum_scheme' must be one of "
                             f"{', '.join(map(repr, _SCHEMES))}; got {scheme!r}")
        if scheme == "kahan_scheme":
            if dtype == np.float64:
                raise ValueError(
                    "sum_scheme='kahan_scheme' on float64 data is not supported: the "
                    "engine has no compensated float64 sum; on float32 data it "
                    "computes in float64 instead")
            want = np.dtype(np.float64)
    compute = want if want is not None and want != dtype else None
    return options, compute, _device(options.pop("device_id", None))


def _acc_dtype(acc, double, dtype: np.dtype):
    if acc is not None and acc != "auto":
        if acc not in ("float16", "float32", "float64"):
            raise ValueError("the reduction option 'dtype_acc' must be 'auto', "
                             f"'float16', 'float32' or 'float64'; got {acc!r}")
        if double and acc != "float64":
            raise ValueError(f"use_double_acc=True and dtype_acc={acc!r} disagree; "
                             "give one of them")
        acc = np.dtype(acc)
        if acc < dtype or acc == np.float16:
            raise ValueError(
                f"dtype_acc='{acc}' is not allowed for {dtype} data: the accumulator "
                "must be at least as precise as the data, and float16 is not supported")
        return acc
    return np.dtype(np.float64) if double else None


def _device(device_id):
    if device_id is None or isinstance(device_id, (bool, np.bool_)) or not isinstance(
            device_id, (int, np.integer)):
        if device_id is None:
            return contextlib.nullcontext()
        raise TypeError(f"the reduction option 'device_id' must be an integer, got "
                        f"{device_id!r}")
    if device_id < 0:
        return contextlib.nullcontext()  # pykeops' -1: the default GPU
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() == 0:
            raise RuntimeError
    except Exception:  # no CuPy or no GPU: no device to choose
        return contextlib.nullcontext()
    return cupy.cuda.Device(int(device_id))


def take_output_options(options: dict) -> tuple[dict, object, bool]:
    """Remove the bindings' keywords ``out`` and ``keepdim`` from ``options``
    (in place); returns ``(options, out, keepdim)``."""
    out = options.pop("out", None)
    keepdim = options.pop("keepdim", False)
    if not isinstance(keepdim, (bool, np.bool_)):
        raise TypeError(f"'keepdim' must be True or False, got {keepdim!r}")
    return options, out, bool(keepdim)


def keep_dims(result, axis: int, nbatch: int, k_outputs: bool, reshape):
    """``result`` (one output of a reduction over ``axis``, 0: i, 1: j) with
    the reduced axis kept, of size 1 (``keepdim=True``), as a reduction of
    the dense array would give: (N, 1, E) over j, (1, M, E) over i; (N, 1)
    and (1, M) when E is 1 (a scalar formula's shape is (N, M)).
    ``reshape(array, shape)`` does it for the array's kind."""
    if k_outputs:
        raise ValueError("keepdim=True has no meaning for a K-reduction (its outputs "
                         "hold K values per point)")
    s = tuple(result.shape)
    batch, n, e = s[:nbatch], s[nbatch], s[nbatch + 1:]
    kept = (n, 1) if axis == 1 else (1, n)
    return reshape(result, batch + kept + (() if e == (1,) else e))


def write_out(out, result, copy):
    """Copy ``result`` into the user's ``out`` array (pykeops' ``out=``)
    after checking its shape and dtype; returns ``out``."""
    if tuple(out.shape) != tuple(result.shape):
        raise ValueError(f"'out' has shape {tuple(out.shape)}; the reduction's output "
                         f"has shape {tuple(result.shape)}")
    if str(out.dtype) != str(result.dtype):
        raise TypeError(f"'out' has dtype {out.dtype}; the reduction's output has "
                        f"dtype {result.dtype}")
    copy(out, result)
    return out


def finish(res, k_outputs: bool, axis: int, nbatch: int, out, keepdim: bool, copy):
    """A reduction's result (an array or a tuple of them, of any kind that
    reshapes) with ``keepdim`` and ``out`` applied; ``copy(out, result)``
    writes into ``out``. Shared by both bindings."""
    if keepdim:
        def shaped(r):
            return keep_dims(r, axis, nbatch, k_outputs, lambda a, s: a.reshape(s))

        res = tuple(map(shaped, res)) if isinstance(res, tuple) else shaped(res)
    if out is None:
        return res
    if isinstance(res, tuple):
        raise TypeError(f"'out' is for reductions with one output; this one has {len(res)}")
    return write_out(out, res, copy)
