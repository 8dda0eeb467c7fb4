"""Lazy linear algebra on kernel matrices: operators, conjugate gradients and
Nystroem preconditioners, all in linear memory.

The operators and solvers live in :mod:`kerneltools.linalg._operators`, the
eigen-solvers in :mod:`kerneltools.linalg._lanczos`; this module is their one
public home, with the landmark methods (Nystroem preconditioners and
eigenpairs).

>>> import numpy as np
>>> from kerneltools.kernels import make_kernel
>>> from kerneltools.linalg import KernelOperator, NystroemPreconditioner, conjugate_gradient
>>> X = np.random.default_rng(0).normal(size=(2000, 3))
>>> k = make_kernel("rbf", gamma=0.5)
>>> A = KernelOperator(k, X, shift=1e-2)            # K + 0.01 I, never stored
>>> P = NystroemPreconditioner(k, X, shift=1e-2, n_components=200, random_state=0)
>>> b = np.ones(2000)
>>> x, n_iter = conjugate_gradient(A, b, M=P, tol=1e-8)
>>> bool(np.linalg.norm(A @ x - b) <= 1e-7 * np.linalg.norm(b))
True

What it may import: :mod:`kerneltools.kernels`, :mod:`kerneltools.lazy`,
:mod:`kerneltools.dask`, the engine's CG, and the CPU backend's C loader
(:func:`smo_block`, the SVMs' inner solver).
"""

from __future__ import annotations

import copy

import numpy as np
import scipy.linalg
from scipy.sparse.linalg import LinearOperator
from threadpoolctl import threadpool_limits

from . import _docs
from ._operators import _cg  # noqa: F401  (the one CG: tests check its identity)
from ._operators import KernelOperator, _count, _shift, conjugate_gradient, solve_with_logdet
from ..dask import Rows, is_dask_array, to_numpy
from ..kernels import Kernel, make_kernel
from ..lazy import Vi

__all__ = ["KernelOperator", "NystroemPreconditioner", "conjugate_gradient",
           "robust_cholesky", "select_landmarks", "solve_with_logdet"]


def select_landmarks(kernel, X, n_components: int, *, method="uniform",
                     random_state=None) -> np.ndarray:
    rng = np.random.default_rng(random_state)
    n = len(X)
    m = _count(n_components, "n_components")
    if not 1 <= m <= n:
        raise ValueError(f"'n_components' must be between 1 and n_samples={n}, got {m}")
    if method == "uniform":
        return np.sort(rng.choice(n, size=m, replace=False))
    if method != "rpcholesky":
        raise ValueError(f"unknown landmark method {method!r}; valid: 'uniform', 'rpcholesky'")
    k = make_kernel(kernel)
    pool = np.arange(n) if n <= max(20 * m, 10_000) else np.sort(
        rng.choice(n, size=max(20 * m, 10_000), replace=False))
    Xp = X[pool]
    resid = np.asarray(k.diag(Xp), dtype=np.float64).copy()
    F = np.zeros((len(pool), m))
    chosen = []
    for t in range(m):
        total = resid.clip(min=0).sum()
        if total <= 0:
            break
        s = int(rng.choice(len(pool), p=resid.clip(min=0) / total))
        col = np.asarray(k(Xp, Xp[s : s + 1]), dtype=np.float64)[:, 0]
        g = col - F[:, :t] @ F[s, :t]
        if g[s] <= 0:
            resid[s] = 0
            continue
        F[:, t] = g / np.sqrt(g[s])
        resid -= F[:, t] ** 2
        resid[s] = 0
        chosen.append(s)
    if len(chosen) < m:  # the kernel has rank < m on the pool: top up uniformly
        rest = np.setdiff1d(np.arange(len(pool)), chosen)
        chosen += list(rng.choice(rest, size=m - len(chosen), replace=False))
    return np.sort(pool[np.asarray(chosen)])


class NystroemPreconditioner(LinearOperator):
    """An approximate inverse of ``K(X, X) + diag(shift)`` from Nystroem.

    With landmarks ``Z`` (m rows), ``K ~ F F^T`` with ``F = K_nm L^{-T}`` and
    ``L L^T = K_mm`` (plus a tiny relative jitter), and by the Woodbury
    identity (``D = diag(shift)``)::

        (D + F F^T)^{-1} = D^{-1} - D^{-1} F (I + F^T D^{-1} F)^{-1} F^T D^{-1}

    Building it evaluates ``K_nm`` once, block by block (never whole), to form
    the ``m x m`` matrix; applying it costs two lazy ``n x m`` reductions.
    Memory: ``O(n d + m^2)``.

    With ``diag_correction=True``, ``D`` also holds the diagonal of the
    Nystroem residual, ``D = diag(shift) + diag(K - F F^T)`` (the FITC form),
    so ``P`` has the exact diagonal of ``K + diag(shift)``. For a kernel that
    the landmarks explain badly (short length scales, many dimensions), where
    ``K`` is close to its diagonal, this keeps ``P^{-1} A`` close to the
    identity instead of leaving ``diag(K)`` to the iterations; where the
    landmarks explain ``K`` well, the residual is small and nothing changes.

    Parameters
    ----------
    kernel : as :class:`KernelOperator`
    X : array (n, d)
    shift : float or array (n,), > 0
    n_components : int, default 500 (at most n)
    landmarks : "uniform", "rpcholesky" or an array of row indices
    random_state : int, Generator or None
    backend : {"auto", "cpu", "cuda", "numpy"} or None, default=None
        Where its products run, as :class:`KernelOperator`'s.
    diag_correction : bool, default False
        Add the diagonal of ``K - F F^T`` to ``D`` (see above).
    smooth : bool, default False
        Take ``F = K_nm L^{-T}`` with ``L L^T = K_mm + j I`` (Cholesky),
        ``j = min(10^-8 tr(K_mm), 10^-3 min(shift))``, instead of dropping
        the eigenvalues of ``K_mm`` below ``10^-8`` of the largest, and form
        ``F^T D^-1 F`` from blocks of ``F`` (never from ``K_mn K_nm``):
        ``P``, its log-determinant and :meth:`sample` are then smooth and
        accurate functions of the kernel's hyperparameters, with no jump
        where an eigenvalue crosses the threshold (a Gaussian-process
        objective needs that). Without it, with a uniform ``shift``,
        :meth:`with_shift` serves other shifts.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools import linalg
    >>> from kerneltools.kernels import make_kernel
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> kernel = make_kernel("rbf", gamma=0.5)
    >>> K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1))
    >>> A = linalg.KernelOperator(kernel, X, shift=1.0)
    >>> M = linalg.NystroemPreconditioner(kernel, X, shift=1.0, n_components=20,
    ...                                   random_state=0)
    >>> x, n_iter = linalg.conjugate_gradient(A, np.ones(50), M=M)
    >>> bool(np.allclose((K + np.eye(50)) @ x, 1.0, atol=1e-4))
    True
    """

    def __init__(self, kernel, X, *, shift, n_components=500, landmarks="uniform",
                 random_state=None, backend=None, diag_correction=False, smooth=False):
        self.kernel = make_kernel(kernel)
        X = X if is_dask_array(X) else np.asarray(X)  # Dask: rows stay on the workers
        rows = Rows(X) if is_dask_array(X) else X
        n = len(X)
        d = _shift(shift, n, "shift") + self.kernel.white_level()
        if not np.all(np.asarray(d) > 0):
            raise ValueError("NystroemPreconditioner: 'shift' must be > 0")
        d = np.broadcast_to(np.asarray(d, dtype=np.float64), (n,))
        if isinstance(landmarks, str):
            idx = select_landmarks(self.kernel, rows,
                                   min(_count(n_components, "n_components"), n),
                                   method=landmarks, random_state=random_state)
        else:
            idx = np.asarray(landmarks, dtype=np.int64)
        self.landmarks_ = idx
        self.Z = rows[idx].astype(np.float64)
        self.X = X.astype(np.float64) if is_dask_array(X) else X.astype(np.float64, copy=False)
        self.backend = backend
        Kmm = self.kernel(self.Z).astype(np.float64)
        Kmm[np.diag_indices_from(Kmm)] -= self.kernel.white_level()
        # P = D + F F^T with F = K_nm W, W = V_r S_r^{-1/2} from the
        # eigenvalues of K_mm above 1e-8 of the largest (nearly dependent
        # landmarks would otherwise amplify rounding without bound).
        if smooth:
            # small next to the diagonal D, so F F^T loses nothing that P
            # needs; the Cholesky factor of K_mm + j I is then a smooth
            # function of the kernel, unlike a truncated spectrum
            jitter = min(1e-8 * float(np.trace(Kmm)), 1e-3 * float(np.min(d)))
            jitter = max(jitter, 1e-14 * float(np.trace(Kmm)), np.finfo(np.float64).tiny)
            L = robust_cholesky(Kmm + jitter * np.eye(len(Kmm)))
            self._W = scipy.linalg.solve_triangular(L, np.eye(len(Kmm)), lower=True).T
        else:
            S, V = np.linalg.eigh(Kmm)
            keep = S > 1e-8 * max(S[-1], np.finfo(np.float64).tiny)
            self._W = V[:, keep] / np.sqrt(S[keep])
        if is_dask_array(self.X):
            gram, self.d_inv = _gram_chunks(self.kernel, self.X, self.Z, d, self._W,
                                            diag_correction)
        elif (not (diag_correction or smooth) and np.ptp(d) == 0
              and 1e-8 * n / len(idx) <= 1e-3 * d[0]):
            # uniform D: F^T D^-1 F = W^T (K_mn K_nm) W / d, a third of the
            # flops of forming F. K_mn K_nm squares K_nm's condition number:
            # its rounding (about 1e-16 |K_nm|^2, |K_nm|^2 ~ (n / m) S_max),
            # amplified by |W|^2 <= 1e8 / S_max, is about 1e-8 n / (m d) next
            # to the identity in I + F^T D^-1 F: taken where that is < 1e-3,
            # P stays positive definite and as good a preconditioner
            gram = _landmark_gram(self.kernel, self.X, self.Z, self._W) / d[0]
            self.d_inv = 1.0 / d
        else:
            kdiag = None
            if diag_correction:
                kdiag = _residual_diag(self.kernel, self.X)
            gram, self.d_inv = _gram(self.kernel, self.X, self.Z, d, self._W, kdiag)
        # a uniform D, no diagonal correction, W free of the shift (not smooth):
        # F^T F = d F^T D^-1 F
        # serves any other uniform shift (with_shift)
        uniform = not (diag_correction or smooth) and np.ptp(d) == 0
        self._FtF = gram * d[0] if uniform else None
        self._factor(gram)
        self._Knm = self.kernel.lazy(self.X, self.Z)
        super().__init__(dtype=np.float64, shape=(n, n))

    def _factor(self, gram):
        inner = np.eye(self._W.shape[1]) + gram
        # I + F^T D^-1 F, as (factor, lower) for cho_solve
        self._chol = (robust_cholesky(inner, what="the Nystroem matrix"), True)

    def with_shift(self, shift: float) -> NystroemPreconditioner:
        """The same preconditioner for another uniform ``shift``: the landmarks
        and the ``n m^2`` Gram matrix ``F^T F`` are reused, only the ``m x m``
        Cholesky factor is new (a grid search over a ridge parameter).
        Available when this one was built with a uniform shift,
        ``diag_correction=False`` and ``smooth=False``; ValueError otherwise."""
        if self._FtF is None:
            raise ValueError("with_shift needs a preconditioner built with a uniform "
                             "'shift', diag_correction=False and smooth=False")
        d = float(shift) + self.kernel.white_level()
        if not (np.isfinite(d) and d > 0):
            raise ValueError(f"NystroemPreconditioner.with_shift: 'shift' must be > 0, "
                             f"got {shift!r}")
        new = copy.copy(self)
        new.d_inv = np.full(len(self.d_inv), 1.0 / d)
        new._factor(self._FtF / d)
        return new

    def _matmat(self, R):
        # Woodbury: P^-1 = D^-1 - D^-1 F (I + F^T D^-1 F)^-1 F^T D^-1
        R = np.asarray(R, dtype=np.float64)
        R2 = R.reshape(R.shape[0], -1)
        DR = self.d_inv[:, None] * R2
        U = self._W.T @ to_numpy((self._Knm * Vi(DR)).sum(axis=0, backend=self.backend))
        c = self._W @ scipy.linalg.cho_solve(self._chol, U)
        Fc = to_numpy(self._Knm.matmul(c, backend=self.backend))
        out = DR - self.d_inv[:, None] * Fc
        return out.reshape(R.shape)

    def _matvec(self, r):
        return self._matmat(np.asarray(r).reshape(-1, 1)).reshape(-1)

    def logdet(self) -> float:
        """``log det P``, by the matrix determinant lemma:
        ``log det D + log det(I + F^T D^-1 F)``."""
        return float(-np.log(self.d_inv).sum() + _chol_logdet(self._chol))

    def sample(self, n_samples: int, random_state=None) -> np.ndarray:
        """``n_samples`` columns drawn from ``N(0, P)``, shape (n, n_samples)."""
        rng = np.random.default_rng(random_state)
        n, m = len(self.X), len(self.Z)
        e1 = rng.standard_normal((n, n_samples))
        e2 = rng.standard_normal((m, n_samples))
        coef = self._W @ e2[: self._W.shape[1]]  # F e2 = K_nm W e2
        Fe2 = to_numpy(self._Knm.matmul(coef, backend=self.backend))
        return e1 / np.sqrt(self.d_inv)[:, None] + Fe2


def _chol_logdet(chol) -> float:
    return float(2 * np.log(np.diag(chol[0])).sum())


def _gram(kernel: Kernel, X, Z, d, W, kdiag=None, block: int = 4096):
    """``(F^T D^{-1} F, 1 / diag(D))`` with ``F = K(X, Z) W``, accumulated over
    blocks of rows; ``D = diag(d)``, plus ``diag(K) - rowsums(F^2)`` (clipped
    at 0) when ``kdiag``, the diagonal of ``K``, is given."""
    r = W.shape[1]
    out = np.zeros((r, r))
    d_inv = np.empty(len(X))
    rows = max(256, min(block, (1 << 24) // max(len(Z), 1)))
    for i0 in range(0, len(X), rows):
        sl = slice(i0, i0 + rows)
        F = np.asarray(kernel(X[sl], Z), dtype=np.float64) @ W
        dd = d[sl]
        if kdiag is not None:
            dd = dd + np.clip(kdiag[sl] - np.einsum("ij,ij->i", F, F), 0, None)
        d_inv[sl] = 1.0 / dd
        Fs = np.sqrt(d_inv[sl, None]) * F
        out += Fs.T @ Fs  # one array and its transpose: BLAS syrk, half the flops
    return out, d_inv


def _landmark_gram(kernel: Kernel, X, Z, W, block: int = 4096):
    """``W^T K(Z, X) K(X, Z) W``, ``K(X, Z)`` accumulated over blocks of rows."""
    G = np.zeros((len(Z), len(Z)))
    rows = max(256, min(block, (1 << 24) // max(len(Z), 1)))
    for i0 in range(0, len(X), rows):
        Kb = np.asarray(kernel(X[i0:i0 + rows], Z), dtype=np.float64)
        G += Kb.T @ Kb  # BLAS syrk
    G = W.T @ G @ W
    return (G + G.T) / 2


def _residual_diag(kernel, X):
    """The diagonal of ``K(X, X)`` without its white noise."""
    return np.asarray(kernel.diag(X), dtype=np.float64) - kernel.white_level()


def _gram_chunk(kernel, X, Z, d, W, diag_correction):
    return _gram(kernel, X, Z, d, W, _residual_diag(kernel, X) if diag_correction else None)


def _gram_chunks(kernel, X, Z, d, W, diag_correction):
    """:func:`_gram` of a Dask array X: one task per chunk of rows, the
    ``r x r`` parts summed here (nothing of X comes back)."""
    import dask

    X = X.rechunk({1: -1})
    bounds = np.concatenate([[0], np.cumsum(X.chunks[0])])
    tasks = [dask.delayed(_gram_chunk)(kernel, block, Z, d[bounds[k]:bounds[k + 1]], W,
                                       diag_correction)
             for k, block in enumerate(X.to_delayed().ravel())]
    parts = dask.compute(*tasks)
    return sum(p[0] for p in parts), np.concatenate([p[1] for p in parts])


def robust_cholesky(A, *, lower: bool = True, what: str = "the matrix") -> np.ndarray:
    scale = max(float(np.trace(A)) / len(A), np.finfo(np.float64).tiny)
    jitter = 0.0
    for _ in range(8):
        try:
            return scipy.linalg.cholesky(A + jitter * np.eye(len(A)), lower=lower)
        except np.linalg.LinAlgError:
            jitter = scale * 1e-12 if jitter == 0 else jitter * 100
    raise np.linalg.LinAlgError(
        f"{what} is not positive definite, even with {jitter / 100:.3g} added to its "
        "diagonal")


# eigen-solvers on lazy operators (issue 26)
from ._eigsh import EIGEN_METHODS, eigsh, lobpcg, randomized_eigsh  # noqa: E402
from ._lanczos import (  # noqa: E402
    DENSE_MAX,
    CenteredOperator,
    NormalizedAffinityOperator,
    OffDiagonalKernel,
    block_lanczos,
)
from ._spectral_operators import translated, translation  # noqa: E402
from ._box_qp import smo_block, smo_block_numpy, smo_native_available  # noqa: E402

__all__ += ["DENSE_MAX", "EIGEN_METHODS", "CenteredOperator", "NormalizedAffinityOperator",
            "OffDiagonalKernel", "translated", "translation",
            "block_lanczos", "eigsh", "lobpcg", "randomized_eigsh", "nystroem_eigh",
            "landmark_sums", "nystroem_start", "START_LANDMARKS",
            "smo_block", "smo_block_numpy", "smo_native_available"]


def landmark_sums(kernel, X, Z, A, *, block: int = 4096) -> np.ndarray:
    kernel = make_kernel(kernel)
    A = np.asarray(A, np.float64).reshape(len(X), -1)
    out = np.zeros((len(Z), A.shape[1]))
    for i0 in range(0, len(X), block):
        out += np.asarray(kernel(X[i0:i0 + block], Z), np.float64).T @ A[i0:i0 + block]
    return out


def nystroem_eigh(kernel, X, k: int, *, n_landmarks: int = 1000, random_state=None,
                  backend=None, center: bool = True, scale=None):
    """The top ``k`` eigenpairs of the centred Nystroem approximation of a kernel.

    With ``m`` landmarks ``Z`` drawn uniformly from X and ``F = K(X, Z) W``,
    ``W W^T = K(Z, Z)^+`` (eigenvalues of ``K(Z, Z)`` below ``10^-8`` of the
    largest dropped), ``K ~ F F^T`` (Williams and Seeger, 2001). The
    centred approximation ``C F F^T C = (C F)(C F)^T`` has the eigenvalues
    ``s`` of the ``r x r`` matrix ``G = F^T C F = F^T F - n mu mu^T``
    (``mu = F^T 1 / n``, the mean feature) and the eigenvectors
    ``(F - 1 mu^T) U s^-1/2``. ``F^T F`` is accumulated over blocks of rows,
    never whole: ``O(n m (d + m))`` time, ``O(n d + m^2)`` memory, and one
    pass over X for any ``k``.

    Stated error: the approximation is below the kernel in the PSD order
    (``F F^T <= K``), hence ``C F F^T C <= C K C``, and for each ``i``
    (Weyl's inequalities)::

        0 <= lambda_i - s_i <= |K - F F^T|_2 <= tr(K - F F^T) = error_bound

    with ``lambda_i`` the exact eigenvalues of the centred kernel; the
    eigenvectors are within ``sin angle <= error_bound / gap_i`` of the exact
    ones (Davis and Kahan). ``error_bound`` is computed exactly (the
    diagonal of K minus the squared row norms of F, summed). It is 0 when
    the landmarks span the kernel's feature space (e.g. ``m = n``).

    Parameters
    ----------
    kernel : anything :func:`~kerneltools.kernels.make_kernel` accepts
    X : array (n, d)
    k : int
        Eigenpairs, ``1 <= k <= n_landmarks``.
    n_landmarks : int, default 1000 (at most n)
    random_state : int, Generator or None
        Draws the landmarks.
    backend : {"auto", "cpu", "cuda", "numpy"} or None
    center : bool, default True
        False: the eigenpairs of ``F F^T`` itself (no centring, ``mu = 0``).
    scale : array (n,), optional
        Row weights ``s``: the eigenpairs of ``S F F^T S`` (``S = diag(s)``)
        approximating ``S K S`` (say ``s = d^-1/2`` for a normalised
        affinity); the bound is then ``tr(S (K - F F^T) S)``.

    Returns
    -------
    w : array (k,)
        Eigenvalues, decreasing.
    V : array (n, k)
        Orthonormal eigenvectors of the approximation.
    info : dict
        ``"landmarks"`` (row indices of X), ``"Z"`` (the landmarks),
        ``"W"``, ``"mean_feature"`` (``mu``) and ``"error_bound"``: what
        maps new points, ``k(x, Z) W - mu``, and the bound above.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools import linalg
    >>> from kerneltools.kernels import make_kernel
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> kernel = make_kernel("rbf", gamma=0.5)
    >>> w, V, info = linalg.nystroem_eigh(kernel, X, 3, n_landmarks=50,
    ...                                   random_state=0)
    >>> w.shape, V.shape, bool(info["error_bound"] < 1e-5)
    ((3,), (50, 3), True)
    """
    kernel = make_kernel(kernel)
    X = np.asarray(X)
    n = len(X)
    m = min(_count(n_landmarks, "n_landmarks"), n)
    k = _count(k, "k")
    if k > m:
        raise ValueError(f"nystroem_eigh: 'k' must be <= n_landmarks={m}, got {k}")
    idx = select_landmarks(kernel, X, m, random_state=random_state)
    X64 = X.astype(np.float64, copy=False)
    Z = X64[idx]
    white = kernel.white_level()
    Kmm = np.asarray(kernel(Z), np.float64)
    Kmm[np.diag_indices_from(Kmm)] -= white
    with threadpool_limits(limits=1, user_api="blas"):  # m x m: threads only wait
        S, Vm = np.linalg.eigh(Kmm)
    kept = S > 1e-8 * max(S[-1], np.finfo(np.float64).tiny)
    W = Vm[:, kept] / np.sqrt(S[kept])
    s2 = None if scale is None else np.asarray(scale, np.float64).reshape(n) ** 2
    # F^T S^2 F (_gram's D^-1 is S^2)
    gram, _ = _gram(kernel, X64, Z, np.ones(n) if s2 is None else 1 / s2, W)
    mu = np.zeros(W.shape[1])
    if center:
        weights = np.ones((n, 1)) if scale is None else np.sqrt(s2)[:, None]
        mu = W.T @ landmark_sums(kernel, X64, Z, weights)[:, 0] / n
    G = gram - n * np.outer(mu, mu)
    with threadpool_limits(limits=1, user_api="blas"):
        s, U = scipy.linalg.eigh((G + G.T) / 2)
    s, U = s[::-1][:k], U[:, ::-1][:, :k]
    FU = np.asarray(KernelOperator(kernel, X64, Z, backend=backend).matmat(W @ U),
                    np.float64)
    if scale is not None:
        FU *= np.sqrt(s2)[:, None]
    inv = np.where(s > 0, 1 / np.sqrt(np.clip(s, np.finfo(np.float64).tiny, None)), 0)
    FU -= mu @ U  # in place: at n = 10^6 each (n, k) temporary is 80 MB
    FU *= inv
    V = FU
    diag = _residual_diag(kernel, X64)
    error = max(float((diag if s2 is None else diag * s2).sum() - np.trace(gram)), 0.0)
    info = {"landmarks": idx, "Z": Z, "W": W, "mean_feature": mu, "error_bound": error}
    return s, V, info


#: Landmarks of :func:`nystroem_start`.
START_LANDMARKS = 200


def nystroem_start(kernel, X, b: int, *, n_landmarks: int = START_LANDMARKS,
                   center: bool = True, scale=None, random_state=None, backend=None):
    b = _count(b, "b")
    n = len(X)
    m = min(int(n_landmarks), n)
    if isinstance(random_state, np.random.RandomState):  # scikit-learn's kind
        random_state = int(random_state.randint(np.iinfo(np.int32).max))
    with threadpool_limits(limits=1, user_api="blas"):  # thin products: threads wait
        _, V, _ = nystroem_eigh(kernel, X, min(b, m), n_landmarks=m,
                                random_state=random_state, backend=backend,
                                center=center, scale=scale)
    if V.shape[1] < b:
        rng = np.random.default_rng(random_state)
        V = np.hstack([V, rng.standard_normal((n, b - V.shape[1]))])
    return V


class LaplacianPreconditioner(LinearOperator):
    """An approximate inverse of ``L + shift I``, ``L = I - D^-1/2 (W - diag W) D^-1/2``
    the normalised Laplacian of a kernel affinity ``W = k(X, X)``, for LOBPCG.

    Nystroem on ``m`` uniform landmarks ``Z``: ``W ~ F F^T`` with
    ``F = K(X, Z) K(Z, Z)^-1/2``, so that with ``G = D^-1/2 F``::

        L + shift I ~ c I - G G^T,   c = 1 + shift + max_i W_ii / d_i

    (``c`` covers the dropped diagonal: ``G G^T <= D^-1/2 W D^-1/2``, whose
    largest eigenvalue is at most ``1 + max W_ii / d_i``, so the
    approximation is positive definite), inverted by Woodbury::

        (c I - G G^T)^-1 = (I + G (c I - G^T G)^-1 G^T) / c

    The landmarks capture the affinity's cluster structure, which is where
    the Laplacian's smallest eigenvectors live, so the preconditioned
    problem has its wanted eigenvalues well apart. Building it takes
    ``G^T G`` over blocks of rows (``O(n m (d + m))``); applying it, two lazy
    ``n x m`` reductions. Memory ``O(n d + m^2)``.

    Parameters
    ----------
    kernel : as :class:`KernelOperator`
    X : array (n, d)
    degrees : array (n,)
        ``W 1 - diag W`` (:class:`NormalizedAffinityOperator`'s ``degrees``;
        isolated points count 1).
    n_components : int, default 200 (at most n)
    shift : float > 0, default 1e-3
    random_state : int, Generator or None
    backend : {"auto", "cpu", "cuda", "numpy"} or None

    Examples
    --------
    The preconditioned Laplacian is far better conditioned:

    >>> import numpy as np
    >>> from kerneltools import linalg
    >>> from kerneltools.kernels import make_kernel
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> kernel = make_kernel("rbf", gamma=0.5)
    >>> K = np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1))  # dense NumPy
    >>> W = linalg.NormalizedAffinityOperator(linalg.KernelOperator(kernel, X), 1.0)
    >>> P = linalg.LaplacianPreconditioner(kernel, X, W.degrees, n_components=20,
    ...                                    random_state=0)
    >>> L = np.eye(50) - W @ np.eye(50) + 1e-3 * np.eye(50)  # L + shift I
    >>> bool(np.linalg.cond(P @ L) < np.linalg.cond(L) / 5)
    True
    """

    def __init__(self, kernel, X, degrees, *, n_components=200, shift=1e-3,
                 random_state=None, backend=None):
        self.kernel = make_kernel(kernel)
        X = np.asarray(X, np.float64)
        n = len(X)
        if not shift > 0:
            raise ValueError(f"LaplacianPreconditioner: 'shift' must be > 0, got {shift!r}")
        d = np.where(np.asarray(degrees, np.float64) > 0, degrees, 1.0)
        idx = select_landmarks(self.kernel, X, min(_count(n_components, "n_components"), n),
                               random_state=random_state)
        Z = X[idx]
        S, V = np.linalg.eigh(np.asarray(self.kernel(Z), np.float64))
        kept = S > 1e-8 * max(S[-1], np.finfo(np.float64).tiny)
        self._W = V[:, kept] / np.sqrt(S[kept])
        self._scale = 1 / np.sqrt(d)  # D^-1/2
        # G^T G = F^T D^-1 F: the Nystroem Gram with D = diag(d)
        GtG, _ = _gram(self.kernel, X, Z, d, self._W)
        self.c = 1 + float(shift) + float(np.max(_residual_diag(self.kernel, X) / d))
        self._inner = (robust_cholesky(self.c * np.eye(len(GtG)) - GtG,
                                       what="c I - G^T G"), True)
        self._Knm = self.kernel.lazy(X, Z)
        self.backend = backend
        self.landmarks_ = idx
        super().__init__(dtype=np.float64, shape=(n, n))

    def _matmat(self, R):
        R = np.asarray(R, np.float64).reshape(self.shape[0], -1)
        SR = self._scale[:, None] * R
        GtR = self._W.T @ to_numpy((self._Knm * Vi(SR)).sum(axis=0, backend=self.backend))
        u = self._W @ scipy.linalg.cho_solve(self._inner, GtR)
        GU = self._scale[:, None] * to_numpy(self._Knm.matmul(u, backend=self.backend))
        return (R + GU) / self.c

    def _matvec(self, r):
        return self._matmat(np.asarray(r).reshape(-1, 1)).reshape(-1)

    def _adjoint(self):
        return self


__all__ += ["LaplacianPreconditioner"]


for _f in (select_landmarks, robust_cholesky, landmark_sums, nystroem_start):
    _f.__doc__ = getattr(_docs, _f.__name__.upper())  # numpydoc text: _docs.py
for _name, _sections in _docs.NYSTROEM_METHODS.items():
    _m = getattr(NystroemPreconditioner, _name)
    _m.__doc__ = _docs.with_sections(_m.__doc__, _sections)
