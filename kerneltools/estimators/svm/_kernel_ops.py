"""The kernel as the dual solver uses it: dense blocks and one reduction.

:class:`DataKernel` serves :class:`~._solver.KernelOps` for a
:class:`kerneltools.kernels.Kernel` on the training points: the working set's
``q x q`` block densely (scikit-learn's pairwise kernels, BLAS), and the
gradient update ``sum_k K(x_i, x_k) w_k`` over all ``n`` points as one
``Sum`` reduction of a :class:`~kerneltools.LazyTensor` formula, so that the
``n x q`` kernel tile is never stored. Small products (at most
``DENSE_MAX`` kernel entries) are dense: a reduction's launch costs more.
"""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = ["DENSE_MAX", "DataKernel", "svm_kernel"]

#: Kernel entries per chunk of an rbf block (2 MB of float64, in cache: each
#: chunk's six passes stay in L2; 64 MB chunks streamed them from memory,
#: 12-14 ns an entry against 4.6 measured).
_CHUNK = 1 << 18
#: Float32 reductions only where ``gamma`` times the points' mean squared
#: distance to their mean is at most this (``gamma="scale"``: about 1).
SINGLE_SPREAD = 4.0
#: Largest ``n x m`` product computed densely rather than by a reduction.
DENSE_MAX = 2_000_000


def svm_kernel(name: str, *, gamma: float, degree: float, coef0: float):
    """The :class:`~kerneltools.kernels.Kernel` of libsvm's kernel ``name``
    (``linear``, ``poly``, ``rbf``, ``sigmoid``) with resolved ``gamma``."""
    from ...kernels import make_kernel  # noqa: PLC0415 - imports scikit-learn's

    if name == "poly" and float(degree) == int(degree):
        degree = int(degree)
    return make_kernel(name, gamma=float(gamma), degree=degree, coef0=float(coef0))


class DataKernel:
    """``K(x_s, x_t)`` on the rows of ``X`` (float64), as the solver asks.

    Parameters
    ----------
    kernel : kerneltools.kernels.Kernel
    X : ndarray of shape (n, d), float64
    backend : str or None
        The backend of the reductions (None: the configured one).
    rbf_gamma : float or None
        The kernel is ``exp(-gamma |x - y|^2)``: blocks computed here, with
        the squared norms computed once, in scikit-learn's ``rbf_kernel``'s
        operations and order (the same values, without its checks and
        copies).
    """

    def __init__(self, kernel, X, *, backend=None, rbf_gamma=None):
        self.kernel = kernel
        self.X = X
        self.backend = backend
        self._diag = None
        self._rbf = rbf_gamma if X.dtype == np.float64 else None
        self._sq = None
        self._single = self._X32 = None

    def block(self, rows, cols, dtype=np.float64, single=False):
        """Dense ``K(X[rows], X[cols])``, computed in float64 and stored as
        ``dtype`` (float32: libsvm's ``Qfloat``, each value rounded once).
        ``single`` (where :attr:`single` allows): computed in float32 from the
        centred points, a few float32 roundings off (the decomposition's
        blocks, which steer the sub-problems only)."""
        if self._rbf is None:
            K = np.asarray(self.kernel(self.X[rows], self.X[cols]), dtype=np.float64)
            return K.astype(dtype, copy=False)
        rows, cols = np.asarray(rows), np.asarray(cols)
        if single and self.single:
            X, sq, work = self._x32(), self._sq32, np.float32
            dtype = np.float32
        else:
            if self._sq is None:  # scikit-learn's row_norms(X, squared=True)
                self._sq = np.einsum("ij,ij->i", self.X, self.X)
            X, sq, work = self.X, self._sq, np.float64
        out = np.empty((rows.size, cols.size), dtype=dtype)
        Xc, sqc, g = X[cols], sq[cols][None, :], work(-self._rbf)
        step = max(1, _CHUNK // max(cols.size, 1))  # rows per cache-sized chunk

        def chunk(a):
            r = rows[a:a + step]
            D = X[r] @ Xc.T
            D *= work(-2.0)
            D += sq[r][:, None]
            D += sqc
            np.maximum(D, 0, out=D)
            D *= g
            # the working precision's loop, its values cast on the way out
            np.exp(D, out=out[a:a + step], dtype=work, casting="same_kind")

        _over_chunks(chunk, range(0, rows.size, step))
        return out

    def _x32(self):
        """The points less their mean, float32, and their squared norms."""
        if self._X32 is None:  # distances do not change with a shift
            self._X32 = (self.X - self.X.mean(axis=0)).astype(np.float32)
            self._sq32 = np.einsum("ij,ij->i", self._X32, self._X32)
        return self._X32

    def diag(self):
        """``K(x_i, x_i)`` for every row (computed once)."""
        if self._diag is None:
            self._diag = np.asarray(self.kernel.diag(self.X), dtype=np.float64)
        return self._diag

    @property
    def single(self) -> bool:
        """Whether :meth:`apply` may run in float32: an rbf kernel whose
        exponents stay moderate (``gamma`` times the mean squared distance to
        the mean at most ``SINGLE_SPREAD``; ``gamma="scale"`` gives about 1),
        so that the float32 kernel values are within a few float32 roundings
        of the float64 ones."""
        if self._single is None:
            ok = self._rbf is not None
            if ok:
                mu = self.X.mean(axis=0)
                spread = float(np.mean(np.einsum("ij,ij->i", self.X - mu,
                                                 self.X - mu)))
                ok = self._rbf * spread <= SINGLE_SPREAD
            self._single = ok
        return self._single

    def apply(self, cols, w, rows=None, single=False):
        """``sum_k K(x_i, X[cols[k]]) w_k`` for every row ``i`` (of ``rows``
        only, where given). ``single`` (where :attr:`single` allows): a
        reduction over the centred points in float32, its float32 tile sums
        added in float64 (about 1e-7 relative); small products stay float64."""
        X = self.X if rows is None or len(rows) == len(self.X) else self.X[rows]
        if single and self.single and len(X) * len(cols) > DENSE_MAX:
            X32 = self._x32()
            Xr = X32 if X is self.X else X32[rows]
            w32 = np.asarray(w, dtype=np.float32)[:, None]
            out = self.kernel.lazy(Xr, X32[cols]).matmul(w32, backend=self.backend)
            return np.asarray(out, dtype=np.float64)[:, 0]
        return cross_apply(self.kernel, X, self.X[cols], w, backend=self.backend)


def _over_chunks(fn, starts) -> None:
    """``fn(s)`` for each of ``starts``: one thread per core, each with a
    one-thread BLAS (a chunk's thin product gains nothing from BLAS threads,
    which busy-wait: 3x the CPU time on a loaded machine, measured); a
    single chunk runs in the caller's thread."""
    starts = list(starts)
    workers = min(len(starts), _cores())
    with _blas_controller().limit(limits=1, user_api="blas"):
        if workers <= 1:
            for a in starts:
                fn(a)
            return
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(fn, starts))


def _cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


@functools.cache
def _blas_controller():
    """threadpoolctl's view of the loaded BLAS libraries (found once)."""
    from threadpoolctl import ThreadpoolController  # noqa: PLC0415

    return ThreadpoolController()


def cross_apply(kernel, X, Y, w, *, backend=None):
    """``K(X, Y) @ w`` (w of shape (m,) or (m, e)): dense when small, else one
    reduction that never stores ``K(X, Y)``."""
    w = np.asarray(w, dtype=np.float64)
    if len(X) * len(Y) <= DENSE_MAX:
        return np.asarray(kernel(X, Y), dtype=np.float64) @ w
    out = kernel.lazy(X, Y).matmul(w if w.ndim == 2 else w[:, None], backend=backend)
    out = np.asarray(out, dtype=np.float64)
    return out if w.ndim == 2 else out[:, 0]
