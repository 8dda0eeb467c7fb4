"""Kernel reductions: kerneltools against dense NumPy and pykeops.

The problems (shared with ``asv_bench/compare.py``, which imports this module):

- ``matvec``  a_i = sum_j exp(-g |x_i - y_j|^2) b_j, g = 1 / (2 s^2), s = 0.25 sqrt(D/3)
- ``lse``     a_i = log sum_j exp(-|x_i - y_j|^2 / eps + h_j), eps = 0.05^2
- ``argkmin`` the K = 10 nearest y_j of each x_i (indices, nearest first)
- ``grad``    the gradient with respect to x_i of
              sum_i e_i sum_j exp(-g |x_i - y_j|^2) b_j

x, y ~ U[0, 1]^D, b, e ~ N(0, 1), h ~ N(0, 0.1^2); the same conventions as
``/work/shared/research/anchor_numbers.md`` so that the numbers can be set
side by side with the anchors.

Every ``*_callable`` function returns a zero-argument function that computes
the full result (an ``(N, E)`` array); building the symbolic formula is not
timed, the reduction call is (for kerneltools that includes the per-call
input conversion). Each asv ``setup`` makes one call first: the first call
of a formula compiles it (kerneltools: about a second; pykeops: 5-10 s) and
must not be timed.

asv conventions (see ``_common.py``): ``NotImplementedError`` raised in
``setup`` skips a parameter combination (numpy backend at the large size, no
GPU for "cuda", pykeops missing, dense NumPy whose N x M array would be too
large, ...). On "cuda" the inputs are CuPy arrays made in ``setup`` and each
timed call waits for the device: the kernel is timed, not the copies.
"""

from __future__ import annotations

import math
import os

import numpy as np

from ._common import (
    BACKENDS,
    DTYPES,
    _Timed,
    require_backend,
    require_small,
    synchronized,
    to_device,
)

TASKS = ("matvec", "lse", "argkmin", "grad")
K_NN = 10
LSE_EPS = 0.05**2

# -- problems ------------------------------------------------------------------


def gamma(d: int) -> float:
    """The Gaussian kernel's exp(-g |x - y|^2) factor g for dimension d."""
    s = 0.25 * math.sqrt(d / 3)
    return 1.0 / (2.0 * s * s)


def make_data(task: str, n: int, m: int, d: int, dtype, seed: int = 0) -> dict:
    """Inputs of one problem: x (n, d), y (m, d) and the task's extra arrays."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; known: {TASKS}")
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    data = {
        "task": task,
        "d": d,
        "x": rng.random((n, d)).astype(dtype),
        "y": rng.random((m, d)).astype(dtype),
    }
    if task in ("matvec", "grad"):
        data["b"] = rng.standard_normal((m, 1)).astype(dtype)
    if task == "grad":
        data["e"] = rng.standard_normal((n, 1)).astype(dtype)
    if task == "lse":
        data["h"] = (0.1 * rng.standard_normal((m, 1))).astype(dtype)
    return data


def kerneltools_callable(data: dict, backend: str = "cpu"):
    """The task as a kerneltools reduction on ``backend``."""
    import kerneltools as kt

    task, d = data["task"], data["d"]
    x_i, y_j = kt.Vi(data["x"]), kt.Vj(data["y"])
    g = gamma(d)  # a Python float: a weak scalar, it keeps the inputs' dtype
    if task == "matvec":
        F = (-x_i.sqdist(y_j) * g).exp() * kt.Vj(data["b"])  # the same as K @ b
        return lambda: F.sum(axis=1, backend=backend)
    if task == "lse":
        F = -x_i.sqdist(y_j) * (1.0 / LSE_EPS) + kt.Vj(data["h"])
        return lambda: F.logsumexp(axis=1, backend=backend)
    if task == "argkmin":
        F = x_i.sqdist(y_j)
        return lambda: F.argKmin(K_NN, axis=1, backend=backend)
    if task == "grad":
        F = (-x_i.sqdist(y_j) * g).exp() * kt.Vj(data["b"])
        G = F.grad(x_i, kt.Vi(data["e"]))
        return lambda: G.sum(axis=1, backend=backend)
    raise ValueError(task)


def pykeops_import():
    """``pykeops.numpy.LazyTensor``; ImportError (with the reason) when unusable."""
    try:
        import pykeops

        pykeops.set_verbose(False)
        from pykeops.numpy import LazyTensor
    except Exception as exc:  # pykeops raises more than ImportError when broken
        raise ImportError(
            f"pykeops is not usable: {type(exc).__name__}: {exc}"
        ) from exc
    return LazyTensor


def pykeops_callable(data: dict):
    """The task as a pykeops (``pykeops.numpy``) reduction, backend CPU."""
    PK = pykeops_import()
    task, d = data["task"], data["d"]
    x_i, y_j = PK(data["x"][:, None, :]), PK(data["y"][None, :, :])
    g = gamma(d)
    if task == "matvec":
        F = (-x_i.sqdist(y_j) * g).exp() * PK(data["b"][None, :, :])
        return lambda: F.sum(axis=1, backend="CPU")
    if task == "lse":
        F = -x_i.sqdist(y_j) * (1.0 / LSE_EPS) + PK(data["h"][None, :, :])
        return lambda: F.logsumexp(axis=1, backend="CPU")
    if task == "argkmin":
        F = x_i.sqdist(y_j)
        return lambda: F.argKmin(K_NN, axis=1, backend="CPU")
    if task == "grad":
        F = (-x_i.sqdist(y_j) * g).exp() * PK(data["b"][None, :, :])
        G = F.grad(x_i, PK(data["e"][:, None, :]))
        return lambda: G.sum(axis=1, backend="CPU")
    raise ValueError(task)


def _sqdist_gemm(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """|x_i|^2 + |y_j|^2 - 2 x_i . y_j as one (N, M) array, in place after the GEMM."""
    D2 = x @ y.T
    D2 *= -2
    D2 += np.einsum("ij,ij->i", x, x)[:, None]
    D2 += np.einsum("ij,ij->i", y, y)[None, :]
    return D2


def numpy_dense_callable(data: dict):
    """The task in dense NumPy, strong form: one N x M array built through a GEMM."""
    task, d = data["task"], data["d"]
    x, y = data["x"], data["y"]
    g = gamma(d)

    if task == "matvec":
        b = data["b"]

        def run():
            K = _sqdist_gemm(x, y)
            K *= -g
            np.exp(K, out=K)
            return K @ b

    elif task == "lse":
        h = data["h"][:, 0]

        def run():
            F = _sqdist_gemm(x, y)
            F *= -1.0 / LSE_EPS
            F += h[None, :]
            mx = F.max(axis=1, keepdims=True)
            F -= mx
            np.exp(F, out=F)
            return np.log(F.sum(axis=1, keepdims=True)) + mx

    elif task == "argkmin":

        def run():
            D2 = _sqdist_gemm(x, y)
            idx = np.argpartition(D2, K_NN - 1, axis=1)[:, :K_NN]
            dk = np.take_along_axis(D2, idx, axis=1)
            order = np.argsort(dk, axis=1, kind="stable")
            return np.take_along_axis(idx, order, axis=1)

    elif task == "grad":
        b, e = data["b"], data["e"]
        rhs = np.hstack([b, b * y])  # (M, 1 + D)

        def run():
            # grad_i = -2 g e_i sum_j K_ij b_j (x_i - y_j)
            K = _sqdist_gemm(x, y)
            K *= -g
            np.exp(K, out=K)
            A = K @ rhs
            return (-2 * g) * e * (x * A[:, :1] - A[:, 1:])

    else:
        raise ValueError(task)
    return run


def numpy_dense_bytes(task: str, n: int, m: int, dtype) -> int:
    """Estimated working memory of :func:`numpy_dense_callable` (bytes)."""
    per = np.dtype(dtype).itemsize
    if task == "argkmin":
        per += 8  # np.argpartition returns an (N, M) int64 array
    return int(1.05 * n * m * per)


def reference_float64(data: dict, rows: np.ndarray) -> np.ndarray:
    """The exact result on ``rows`` in float64 (direct differences for small D).

    For ``argkmin`` it returns the (len(rows), M) squared distances; compare
    with :func:`error_vs_reference`.
    """
    task, d = data["task"], data["d"]
    x = data["x"][rows].astype(np.float64)
    y = data["y"].astype(np.float64)
    m = y.shape[0]
    g = gamma(d)
    chunk = max(1, int(2e7 // (m * d)))
    out = []
    for s in range(0, len(rows), chunk):
        xr = x[s : s + chunk]
        if d <= 8:
            D2 = ((xr[:, None, :] - y[None, :, :]) ** 2).sum(-1)
        else:
            D2 = np.maximum(_sqdist_gemm(xr, y), 0)
        if task == "matvec":
            out.append(np.exp(-g * D2) @ data["b"].astype(np.float64))
        elif task == "lse":
            F = -D2 / LSE_EPS + data["h"][:, 0].astype(np.float64)[None, :]
            mx = F.max(axis=1, keepdims=True)
            out.append(np.log(np.exp(F - mx).sum(axis=1, keepdims=True)) + mx)
        elif task == "argkmin":
            out.append(D2)
        elif task == "grad":
            b = data["b"].astype(np.float64)
            e = data["e"][rows].astype(np.float64)[s : s + chunk]
            K = np.exp(-g * D2)
            A = K @ np.hstack([b, b * y])
            out.append(-2 * g * e * (xr * A[:, :1] - A[:, 1:]))
    return np.concatenate(out, axis=0)


def error_vs_reference(task: str, result: np.ndarray, ref: np.ndarray, rows) -> dict:
    """Errors of ``result`` (the full output) on ``rows`` against ``reference_float64``.

    ``rel_err``: max |a - ref| / max |ref| over the rows (normwise). For
    ``argkmin``: the max over rows and ranks k of |d(found_k) - d(true_k)| / d(true_K)
    with exact float64 distances (0 when only exact ties differ), and the recall.
    """
    res = np.asarray(result)[rows]
    if task != "argkmin":
        res = res.reshape(ref.shape).astype(np.float64)
        scale = np.abs(ref).max()
        return {
            "rel_err": float(np.abs(res - ref).max() / (scale if scale > 0 else 1.0))
        }
    K = res.shape[1]
    part = np.argpartition(ref, K - 1, axis=1)[:, :K]
    order = np.argsort(np.take_along_axis(ref, part, axis=1), axis=1, kind="stable")
    true_idx = np.take_along_axis(part, order, axis=1)
    d_true = np.take_along_axis(ref, true_idx, axis=1)
    d_found = np.take_along_axis(ref, res.astype(np.int64), axis=1)
    denom = np.maximum(d_true[:, -1:], np.finfo(np.float64).tiny)
    rel = float((np.abs(d_found - d_true) / denom).max())
    hits = sum(len(set(a) & set(b)) for a, b in zip(res.tolist(), true_idx.tolist()))
    return {"rel_err": rel, "recall": hits / res.size}


# -- asv benchmarks ------------------------------------------------------------

SMALL, LARGE = 2_000, 20_000
#: Dense NumPy cases above this working memory are skipped (asv shares the machine).
DENSE_MAX_BYTES = int(float(os.environ.get("KT_BENCH_DENSE_MAX_GB", "4")) * 1e9)


class _Reduction(_Timed):
    """One task on one system; subclasses set ``task``, ``params`` and ``setup``."""

    task = "matvec"

    def _setup(self, dtype, n, d, make):
        self.data = make_data(self.task, n, n, d, dtype)
        self.run = make(self.data)
        self.run()  # compile (first call) and warm caches: never timed

    def time_reduction(self, *args):
        self.run()

    def peakmem_reduction(self, *args):
        self.run()


def _kt_setup(self, dtype, backend, n, d):
    require_small(backend, n, SMALL)
    require_backend(backend)

    def make(data):
        # On the GPU the inputs stay there (CuPy arrays): the kernel is timed,
        # not the copies; the call waits for the device.
        run = kerneltools_callable(to_device(backend, data), backend)
        return synchronized(backend, run)

    self._setup(dtype, n, d, make)


def _pk_setup(self, dtype, n, d):
    try:
        pykeops_import()
    except ImportError as exc:
        raise NotImplementedError(str(exc)) from None
    if d > 16 and n > SMALL:
        # pykeops loops over D per pair: ~10 s per call at D = 64, N = 2e4 here
        raise NotImplementedError("pykeops at D = 64 only at the small size")
    self._setup(dtype, n, d, pykeops_callable)


def _np_setup(self, dtype, n, d):
    if numpy_dense_bytes(self.task, n, n, dtype) > DENSE_MAX_BYTES:
        raise NotImplementedError("dense N x M array too large")
    self._setup(dtype, n, d, numpy_dense_callable)


# kerneltools -------------------------------------------------------------------


class GaussMatvec(_Reduction):
    """kerneltools: a = K b, Gaussian kernel, D = 3 and 64."""

    task = "matvec"
    params = (DTYPES, BACKENDS, (SMALL, LARGE), (3, 64))
    param_names = ("dtype", "backend", "N", "D")

    def setup(self, dtype, backend, n, d):
        _kt_setup(self, dtype, backend, n, d)


class LogSumExp(_Reduction):
    """kerneltools: log sum_j exp(-|x_i - y_j|^2 / eps + h_j), D = 3."""

    task = "lse"
    params = (DTYPES, BACKENDS, (SMALL, LARGE))
    param_names = ("dtype", "backend", "N")

    def setup(self, dtype, backend, n):
        _kt_setup(self, dtype, backend, n, 3)


class ArgKMin(_Reduction):
    """kerneltools: indices of the K = 10 nearest neighbours, D = 3."""

    task = "argkmin"
    params = (DTYPES, BACKENDS, (SMALL, LARGE))
    param_names = ("dtype", "backend", "N")

    def setup(self, dtype, backend, n):
        _kt_setup(self, dtype, backend, n, 3)


class GaussMatvecGradX(_Reduction):
    """kerneltools: gradient of sum_i e_i (K b)_i with respect to x, D = 3."""

    task = "grad"
    params = (DTYPES, BACKENDS, (SMALL, LARGE))
    param_names = ("dtype", "backend", "N")

    def setup(self, dtype, backend, n):
        _kt_setup(self, dtype, backend, n, 3)


# dense NumPy (GEMM form) baselines -------------------------------------------------


class DenseNumpyGaussMatvec(_Reduction):
    """Baseline: |x|^2 + |y|^2 - 2 x y^T, exp, @ b in one N x M array."""

    task = "matvec"
    params = (DTYPES, (SMALL, LARGE), (3, 64))
    param_names = ("dtype", "N", "D")

    def setup(self, dtype, n, d):
        _np_setup(self, dtype, n, d)


class DenseNumpyLogSumExp(_Reduction):
    """Baseline: the same N x M array, max-shifted exp, row sums, log."""

    task = "lse"
    params = (DTYPES, (SMALL, LARGE))
    param_names = ("dtype", "N")

    def setup(self, dtype, n):
        _np_setup(self, dtype, n, 3)


class DenseNumpyArgKMin(_Reduction):
    """Baseline: the N x M squared distances, argpartition, sort of the K."""

    task = "argkmin"
    params = (DTYPES, (SMALL, LARGE))
    param_names = ("dtype", "N")

    def setup(self, dtype, n):
        _np_setup(self, dtype, n, 3)


class DenseNumpyGaussMatvecGradX(_Reduction):
    """Baseline: dense K, then -2 g e_i (x_i (K b)_i - (K (b y))_i)."""

    task = "grad"
    params = (DTYPES, (SMALL, LARGE))
    param_names = ("dtype", "N")

    def setup(self, dtype, n):
        _np_setup(self, dtype, n, 3)


# pykeops baselines (skipped when pykeops is not importable) ------------------------


class PykeopsGaussMatvec(_Reduction):
    """Baseline: pykeops.numpy.LazyTensor, backend CPU (D = 64 only at the small N)."""

    task = "matvec"
    params = (DTYPES, (SMALL, LARGE), (3, 64))
    param_names = ("dtype", "N", "D")

    def setup(self, dtype, n, d):
        _pk_setup(self, dtype, n, d)


class PykeopsLogSumExp(_Reduction):
    """Baseline: pykeops.numpy.LazyTensor, the log-sum-exp, backend CPU."""

    task = "lse"
    params = (DTYPES, (SMALL, LARGE))
    param_names = ("dtype", "N")

    def setup(self, dtype, n):
        _pk_setup(self, dtype, n, 3)


class PykeopsArgKMin(_Reduction):
    """Baseline: pykeops.numpy.LazyTensor, argKmin(10), backend CPU."""

    task = "argkmin"
    params = (DTYPES, (SMALL, LARGE))
    param_names = ("dtype", "N")

    def setup(self, dtype, n):
        _pk_setup(self, dtype, n, 3)


class PykeopsGaussMatvecGradX(_Reduction):
    """Baseline: pykeops.numpy.LazyTensor, F.grad(x_i, e_i), backend CPU."""

    task = "grad"
    params = (DTYPES, (SMALL, LARGE))
    param_names = ("dtype", "N")

    def setup(self, dtype, n):
        _pk_setup(self, dtype, n, 3)
