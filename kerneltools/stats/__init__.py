"""Kernel two-sample and independence tests, in linear memory.

MMD (Gretton, Borgwardt, Rasch, Schölkopf, Smola, "A kernel two-sample test",
JMLR 2012), the energy distance (Székely and Rizzo, 2004; the MMD of the
kernel ``-|x - y|``) and HSIC (Gretton, Fukumizu, Teo, Song, Schölkopf,
Smola, "A kernel statistical test of independence", NIPS 2007), computed
with kernel reductions: the ``(n + m) x (n + m)`` kernel matrix is never
stored.

**Many permutations per pass.** A two-sample statistic of a labelling of the
pooled sample ``Z = [X; Y]`` is a quadratic form of its indicator ``u`` (1 on
the points called X): ``S_xx = u^T K u``, ``S_xy = u^T K (1 - u)``, ... A
batch of ``P`` permutations is the ``(n + m, P)`` matrix ``U`` of their
indicators, and ``K @ U`` (one reduction over the pairs, ``P`` columns)
gives every statistic of the batch; memory ``O((n + m) P)``, with ``P`` set
by ``batch_size``.

**Float32 samples are reduced in float64.** A statistic of two close
samples is a small difference of large kernel sums (MMD^2 of 4e-5 from
kernel means near 0.1 at 10^5 + 10^5 points, a cancellation of about 10^4):
float32 reductions resolve it to a few digits only (7-9e-4 relative at
2,000 + 2,000 points in 79-D, 3e-3 for the close samples of the tests). The
engine's reductions here (:func:`mmd2`, :func:`hsic`, their permutation
tests on the ``"reductions"`` path, the linear-time MMD) therefore compute
on float64 copies of the samples, which is exact to float64 rounding for the
float32 values given; the ``"blocks"`` path of :func:`mmd_test` keeps its
float32 products (their blocks shifted by K's mean: within 3e-5).

The results are scipy.stats-style objects: ``statistic`` and ``pvalue``
(and the ``null_distribution`` of a permutation test).

>>> import numpy as np
>>> from kerneltools import stats
>>> rng = np.random.default_rng(0)
>>> X, Y = rng.normal(size=(200, 3)), rng.normal(size=(150, 3)) + 0.5
>>> res = stats.mmd_test(X, Y, n_permutations=200, random_state=0)
>>> bool(res.pvalue < 0.01)
True

What lives here: the tests, their inputs' checks (:mod:`._inputs`) and the
dense blocks path (:mod:`._blocks`). What it may import:
:mod:`kerneltools.kernels`, :mod:`kerneltools.lazy`, :mod:`kerneltools.config`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Real

import numpy as np
from scipy.spatial.distance import pdist
from scipy.special import ndtr

from . import _blocks as kb, _docs
from ._inputs import (U_STATISTIC, check_backend, check_count, check_kernel_params,
                            check_pair, check_random_state)
from ..kernels import Kernel, make_kernel
from ..lazy import Vi, Vj

__all__ = [
    "TestResult",
    "PermutationTestResult",
    "energy_distance",
    "energy_test",
    "hsic",
    "hsic_test",
    "linear_mmd_test",
    "median_bandwidth",
    "mmd2",
    "mmd_test",
]

#: Points on which the median heuristic measures distances (a seeded subsample).
MEDIAN_SAMPLE = 1000


@dataclass(frozen=True)
class TestResult:
    """A test's ``statistic`` and ``pvalue``, as scipy.stats returns them.

    Parameters
    ----------
    statistic : float
        The test statistic.
    pvalue : float
        Its p-value.

    Examples
    --------
    >>> from kerneltools.stats import TestResult
    >>> TestResult(statistic=1.5, pvalue=0.02)
    TestResult(statistic=1.5, pvalue=0.02)
    """

    statistic: float
    pvalue: float


@dataclass(frozen=True)
class PermutationTestResult(TestResult):
    """A permutation test: also the statistics of the permuted samples.

    ``pvalue = (1 + #{null >= statistic}) / (1 + n_permutations)``.

    Parameters
    ----------
    statistic : float
        The test statistic.
    pvalue : float
        Its p-value.
    null_distribution : ndarray of shape (n_permutations,)
        The statistics of the permuted samples.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.stats import PermutationTestResult
    >>> PermutationTestResult(1.5, 0.25, np.array([0.1, 2.0, 0.3]))
    PermutationTestResult(statistic=1.5, pvalue=0.25)
    """

    null_distribution: np.ndarray = field(repr=False, default=None)


# -- inputs -----------------------------------------------------------------------


def median_bandwidth(Z, *, metric="euclidean", random_state=0) -> float:
    Z = np.asarray(Z, dtype=np.float64)
    if len(Z) > MEDIAN_SAMPLE:
        idx = np.random.default_rng(random_state).choice(len(Z), MEDIAN_SAMPLE, replace=False)
        Z = Z[idx]
    d = pdist(Z, metric=metric)
    med = float(np.median(d[d > 0])) if (d > 0).any() else 1.0
    return med


def _energy_kernel() -> Kernel:
    k = make_kernel(lambda x, y: -(x.sqdist(y) + 1e-30).sqrt())
    k.name = "energy"  # what kerneltools.stats._blocks recognises
    return k


def _kernel(kernel, gamma, Z, kernel_params, caller, names=("kernel", "gamma")) -> Kernel:
    """The kernel, with the median heuristic for an rbf / laplacian ``gamma=None``:
    ``exp(-|x - y|^2 / (2 med^2))`` and ``exp(-|x - y|_1 / med)``; errors name
    the arguments ``names`` of ``caller``."""
    if kernel == "energy":
        return _energy_kernel()
    if isinstance(kernel, str) and gamma is None and kernel in ("rbf", "laplacian"):
        metric = "euclidean" if kernel == "rbf" else "cityblock"
        med = median_bandwidth(Z, metric=metric)
        gamma = 1.0 / (2 * med**2) if kernel == "rbf" else 1.0 / med
    if gamma is not None and (isinstance(gamma, bool) or not isinstance(gamma, Real)
                              or not gamma > 0):
        raise ValueError(f"{caller}: '{names[1]}' must be a float > 0 or None; "
                         f"got {gamma!r}")
    try:
        return make_kernel(kernel, gamma=gamma, **(kernel_params or {}))
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"{caller}: '{names[0]}': {exc}") from None


def _float64(A) -> np.ndarray:
    """The sample as the engine's reductions here take it: float64 (see the
    module's docstring: float32 sums would lose the statistic to cancellation)."""
    return np.ascontiguousarray(A, dtype=np.float64)


def _prepared(kernel: Kernel, Z):
    return kernel.prepare(Z) if kernel.prepare is not None else Z


def _diagonal(kernel: Kernel, A, B, backend) -> np.ndarray:
    """``k(a_i, b_i)`` for paired rows: a formula of i alone, reduced over one j
    (in float64)."""
    A, B = _float64(A), _float64(B)
    f = kernel.formula(Vi(_prepared(kernel, A)), Vi(_prepared(kernel, B)))
    one = Vj(np.ones((1, 1), dtype=A.dtype))
    return (f * one).sum(axis=1, backend=backend)[:, 0].astype(np.float64)


# -- MMD and its permutation test ------------------------------------------------------


class _Pooled:
    """The pooled sample and what every labelling's statistic needs:
    ``K 1`` and the diagonal of K (computed once), in float64."""

    def __init__(self, kernel, X, Y, backend):
        self.n, self.m = len(X), len(Y)
        Z = _float64(np.concatenate([X, Y]))
        self.dtype = Z.dtype
        self.K = kernel.lazy(Z)
        self.backend = backend
        self.row_sums = self.matmul(np.ones((len(Z), 1), dtype=Z.dtype))[:, 0]
        self.total = float(self.row_sums.sum())
        self.diag = _diagonal(kernel, Z, Z, backend)

    def matmul(self, U) -> np.ndarray:
        return np.asarray(self.K.matmul(U, backend=self.backend), dtype=np.float64)

    def statistics(self, U: np.ndarray, unbiased: bool) -> np.ndarray:
        """MMD^2 of each column of the 0/1 indicator matrix U (1: "in X")."""
        KU = self.matmul(U.astype(self.dtype))
        U64 = U.astype(np.float64)
        s_xx = np.einsum("ip,ip->p", U64, KU)
        s_x1 = U64.T @ self.row_sums  # u^T K 1
        s_xy = s_x1 - s_xx
        s_yy = self.total - 2 * s_x1 + s_xx
        n, m = self.n, self.m
        if not unbiased:
            return s_xx / n**2 + s_yy / m**2 - 2 * s_xy / (n * m)
        d_x = U64.T @ self.diag
        d_y = self.diag.sum() - d_x
        return ((s_xx - d_x) / (n * (n - 1)) + (s_yy - d_y) / (m * (m - 1))
                - 2 * s_xy / (n * m))


def _indicator(n, m, perms=None) -> np.ndarray:
    """Columns: 1 on the points labelled X (the first n of each permutation)."""
    if perms is None:
        u = np.zeros((n + m, 1))
        u[:n] = 1
        return u
    U = np.zeros((n + m, len(perms)))
    cols = np.repeat(np.arange(len(perms)), n)
    U[np.asarray(perms)[:, :n].ravel(), cols] = 1
    return U


def mmd2(X, Y, *, kernel="rbf", gamma=None, unbiased=True, kernel_params=None,
         backend=None) -> float:
    return _mmd2(X, Y, kernel, gamma, unbiased, kernel_params, backend, "mmd2")


def _mmd2(X, Y, kernel, gamma, unbiased, kernel_params, backend, caller) -> float:
    """:func:`mmd2`, its errors naming ``caller`` (the function the user called)."""
    X, Y = check_pair(X, Y, caller, min_samples=2 if unbiased else 1, why=U_STATISTIC)
    check_backend(backend, caller)
    check_kernel_params(kernel_params, caller)
    k = _kernel(kernel, gamma, np.concatenate([X, Y]), kernel_params, caller)
    pooled = _Pooled(k, X, Y, backend)
    return float(pooled.statistics(_indicator(len(X), len(Y)), bool(unbiased))[0])


def _permutation_test(pooled, unbiased, n_permutations, batch_size, random_state,
                      verbose, caller) -> PermutationTestResult:
    n, m = pooled.n, pooled.m
    observed = float(pooled.statistics(_indicator(n, m), unbiased)[0])
    rng = np.random.default_rng(random_state)
    null = np.empty(n_permutations)
    for start in range(0, n_permutations, batch_size):
        stop = min(start + batch_size, n_permutations)
        perms = [rng.permutation(n + m) for _ in range(stop - start)]
        null[start:stop] = pooled.statistics(_indicator(n, m, perms), unbiased)
        if verbose:
            print(f"{caller}: {stop}/{n_permutations} permutations")
    return _result(observed, null)


def _result(observed, null) -> PermutationTestResult:
    # ties count as exceedances (a valid p-value, as scipy's permutation_test)
    tol = 1e-10 * max(abs(observed), 1e-300)
    pvalue = (1 + np.count_nonzero(null >= observed - tol)) / (1 + len(null))
    return PermutationTestResult(float(observed), float(pvalue), null)


def _blocked_permutation_test(block, diag_value, Z, n, unbiased, n_permutations,
                              batch_size, random_state, verbose, caller):
    """The permutation test by dense row blocks of K times every labelling's
    column (:mod:`kerneltools.stats._blocks`): one BLAS product per block.

    A labelling with indicator ``u`` is the zero-sum column
    ``s = m u - n (1 - u)`` (exact integers in any dtype): ``s^T K s / (n m)^2``
    is the biased MMD^2, and with ``K 1`` (computed in the same pass) it gives
    every sum of the unbiased one. The permutations are those of
    :func:`_permutation_test`, in the same order (column 0: the observed
    labelling)."""
    N, m = len(Z), len(Z) - n
    rng = np.random.default_rng(random_state)
    per_pass = batch_size or kb.columns_per_pass(N, Z.dtype.itemsize)
    total = n_permutations + 1

    def columns():
        for start in range(0, total, per_pass):
            stop = min(start + per_pass, total)
            S = np.full((N, stop - start), -float(n), dtype=Z.dtype)
            for c, col in enumerate(range(start, stop)):
                S[np.arange(n) if col == 0 else rng.permutation(N)[:n], c] = m
            yield S

    shown = {}

    def progress(k, done, rows):  # about every tenth of the rows
        tenth = done * 10 // rows
        if verbose and shown.get(k) != tenth:
            shown[k] = tenth
            cols = min((k + 1) * per_pass, total) - 1
            print(f"{caller}: pass {k + 1} (permutations up to {cols} of "
                  f"{n_permutations}): {done}/{rows} rows of K")

    q, r, rs = kb.quadratic_forms(Z, block, diag_value, columns, progress)
    T = r.sum()
    r_x = (rs + n * T) / (n + m)  # u^T K 1, as s = (n + m) u - n
    stat = q / float(n * m) ** 2
    if unbiased:
        s_xx = (q + 2 * n * rs + n**2 * T) / (n + m) ** 2
        s_x1 = r_x
        s_xy = s_x1 - s_xx
        s_yy = T - 2 * s_x1 + s_xx
        d_x = diag_value * n
        d_y = diag_value * m
        stat = ((s_xx - d_x) / (n * (n - 1)) + (s_yy - d_y) / (m * (m - 1))
                - 2 * s_xy / (n * m))
    return _result(stat[0], stat[1:])


def _blocks_for(kernel, backend, method, Z, caller):
    """The block evaluator of ``kernel`` when ``method`` (and the backend)
    choose dense blocks, else None (the engine's reductions)."""
    if method not in ("auto", "blocks", "reductions"):
        raise ValueError(f"{caller}: 'method' must be 'auto', 'blocks' or 'reductions'; "
                         f"got {method!r}")
    if method == "reductions":
        return None
    found = kb.block_kernel(kernel, Z.shape[1])
    if method == "blocks":
        if found is None:
            raise ValueError(
                f"{caller}: method='blocks' serves the kernels 'rbf' and 'energy'; "
                f"got {kernel!r}: use method='reductions' (or 'auto')")
        return found
    name = check_backend(backend, caller)
    if name == "cpu" or (name == "auto" and not _gpu_visible()):
        return found
    return None


def _gpu_visible() -> bool:
    """Whether CuPy sees a GPU ("auto" then runs the engine on CUDA)."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver
        return False


def mmd_test(X, Y, *, kernel="rbf", gamma=None, unbiased=True, n_permutations=1000,
             batch_size=None, random_state=None, kernel_params=None, backend=None,
             method="auto", verbose=False) -> PermutationTestResult:
    return _mmd_test(X, Y, kernel, gamma, unbiased, n_permutations, batch_size,
                     random_state, kernel_params, backend, method, verbose, "mmd_test")


def _mmd_test(X, Y, kernel, gamma, unbiased, n_permutations, batch_size, random_state,
              kernel_params, backend, method, verbose, caller) -> PermutationTestResult:
    """:func:`mmd_test`, its errors naming ``caller``."""
    X, Y = check_pair(X, Y, caller, min_samples=2 if unbiased else 1, why=U_STATISTIC)
    check_backend(backend, caller)
    n_permutations = check_count(n_permutations, "n_permutations", caller, 1)
    if batch_size is not None:
        batch_size = check_count(batch_size, "batch_size", caller, 1)
    check_random_state(random_state, caller)
    check_kernel_params(kernel_params, caller)
    Z = np.concatenate([X, Y])
    k = _kernel(kernel, gamma, Z, kernel_params, caller)
    blocks = _blocks_for(k, backend, method, Z, caller)
    if blocks is not None:
        return _blocked_permutation_test(*blocks, Z, len(X), bool(unbiased),
                                         n_permutations, batch_size, random_state,
                                         verbose, caller)
    pooled = _Pooled(k, X, Y, backend)
    return _permutation_test(pooled, bool(unbiased), n_permutations, batch_size or 100,
                             random_state, verbose, caller)


def energy_distance(X, Y, *, backend=None) -> float:
    return _mmd2(X, Y, "energy", None, False, None, backend, "energy_distance")


def energy_test(X, Y, *, n_permutations=1000, batch_size=None, random_state=None,
                backend=None, method="auto", verbose=False) -> PermutationTestResult:
    return _mmd_test(X, Y, "energy", None, False, n_permutations, batch_size,
                     random_state, None, backend, method, verbose, "energy_test")


# -- linear-time MMD ------------------------------------------------------------------------


def linear_mmd_test(X, Y, *, kernel="rbf", gamma=None, kernel_params=None,
                    backend=None) -> TestResult:
    caller = "linear_mmd_test"
    X, Y = check_pair(X, Y, caller)
    check_backend(backend, caller)
    check_kernel_params(kernel_params, caller)
    n2 = min(len(X), len(Y)) // 2
    k = _kernel(kernel, gamma, np.concatenate([X, Y]), kernel_params, caller)
    x1, x2, y1, y2 = X[0:2 * n2:2], X[1:2 * n2:2], Y[0:2 * n2:2], Y[1:2 * n2:2]
    h = (_diagonal(k, x1, x2, backend) + _diagonal(k, y1, y2, backend)
         - _diagonal(k, x1, y2, backend) - _diagonal(k, x2, y1, backend))
    stat = float(h.mean())
    sd = float(h.std(ddof=1)) if n2 > 1 else 0.0
    pvalue = 0.5 if sd == 0 else float(1 - ndtr(stat / (sd / np.sqrt(n2))))
    return TestResult(stat, pvalue)


# -- HSIC ------------------------------------------------------------------------------------


#: Permutations of an HSIC test reduced together (one formula of this many
#: outputs; the last batch is padded, so that one compiled kernel serves all).
HSIC_BATCH = 16


class _Hsic:
    """HSIC_b = (1/n^2) [sum_ij K_ij L_ij - (2/n) (K1).(L1) + (1^T K 1)(1^T L 1) / n^2]
    (the trace of K H L H / n^2, H the centring matrix, expanded so that no
    matrix is stored).

    A permutation pi of Y permutes L's rows and columns: ``L1`` becomes
    ``(L1)[pi]`` and ``1^T L 1`` stays (both computed once); only
    ``sum_ij K_ij L_pi(i)pi(j)`` needs the pairs. A batch of permutations is
    one reduction of ``K_ij [L(y_pi1(i), y_pi1(j)), ..., L(y_piP(i), y_piP(j))]``:
    each pair's ``K_ij`` is computed once for the whole batch."""

    def __init__(self, kx, ky, X, Y, backend):
        X, Y = _float64(X), _float64(Y)  # as _Pooled: no float32 cancellation
        self.kx, self.ky, self.X, self.Y, self.backend = kx, ky, X, Y, backend
        self.n = len(X)
        self.Kx = kx.lazy(X)
        self.k1 = self._row_sums(self.Kx)
        self.l1 = self._row_sums(ky.lazy(Y))

    def _row_sums(self, K) -> np.ndarray:
        ones = np.ones((self.n, 1), dtype=self.X.dtype)
        return np.asarray((K * Vj(ones)).sum(axis=1, backend=self.backend),
                          dtype=np.float64)[:, 0]

    def _combine(self, kl, l1) -> np.ndarray:
        n = self.n
        return (kl - 2.0 / n * (l1 @ self.k1) + self.k1.sum() * self.l1.sum() / n**2) / n**2

    def statistic(self) -> float:
        kl = np.asarray((self.Kx * self.ky.lazy(self.Y)).sum(axis=1, backend=self.backend),
                        dtype=np.float64).sum()
        return float(self._combine(kl, self.l1))

    def null(self, perms) -> np.ndarray:
        """The statistics of Y permuted by each of ``perms`` (at most
        :data:`HSIC_BATCH`), from one reduction."""
        padded = list(perms) + [perms[-1]] * (HSIC_BATCH - len(perms))
        Ls = None
        for pi in padded:
            Yp = _prepared(self.ky, self.Y[pi])
            L = self.ky.formula(Vi(Yp), Vj(Yp))
            Ls = L if Ls is None else Ls.concat(L)
        out = (self.Kx * Ls).sum(axis=1, backend=self.backend)
        kl = np.asarray(out, dtype=np.float64).sum(axis=0)[: len(perms)]
        l1 = np.stack([self.l1[pi] for pi in perms])
        return self._combine(kl, l1)


def hsic(X, Y, *, kernel_x="rbf", kernel_y="rbf", gamma_x=None, gamma_y=None,
         backend=None) -> float:
    caller = "hsic"
    X, Y = check_pair(X, Y, caller, same_n=True)
    check_backend(backend, caller)
    kx = _kernel(kernel_x, gamma_x, X, None, caller, ("kernel_x", "gamma_x"))
    ky = _kernel(kernel_y, gamma_y, Y, None, caller, ("kernel_y", "gamma_y"))
    return float(_Hsic(kx, ky, X, Y, backend).statistic())


def hsic_test(X, Y, *, kernel_x="rbf", kernel_y="rbf", gamma_x=None, gamma_y=None,
              n_permutations=1000, random_state=None, backend=None,
              verbose=False) -> PermutationTestResult:
    caller = "hsic_test"
    X, Y = check_pair(X, Y, caller, same_n=True)
    n_permutations = check_count(n_permutations, "n_permutations", caller, 1)
    check_backend(backend, caller)
    check_random_state(random_state, caller)
    kx = _kernel(kernel_x, gamma_x, X, None, caller, ("kernel_x", "gamma_x"))
    ky = _kernel(kernel_y, gamma_y, Y, None, caller, ("kernel_y", "gamma_y"))
    h = _Hsic(kx, ky, X, Y, backend)
    observed = h.statistic()
    rng = np.random.default_rng(random_state)
    null = np.empty(n_permutations)
    for start in range(0, n_permutations, HSIC_BATCH):
        stop = min(start + HSIC_BATCH, n_permutations)
        null[start:stop] = h.null([rng.permutation(len(X)) for _ in range(stop - start)])
        if verbose:
            print(f"{caller}: {stop}/{n_permutations} permutations")
    return _result(observed, null)


for _f in (median_bandwidth, mmd2, mmd_test, energy_distance, energy_test,
           linear_mmd_test, hsic, hsic_test):  # numpydoc text in _docs.py (line limit)
    _f.__doc__ = getattr(_docs, _f.__name__.upper())
