"""Nystroem kernel approximation: scikit-learn's transformer, better landmarks.

:class:`Nystroem` maps X to ``K(X, Z) K(Z, Z)^{-1/2}``, ``Z`` a set of
landmarks, so that inner products of the features approximate the kernel.
With ``landmarks='uniform'`` it draws the same landmarks as
:class:`sklearn.kernel_approximation.Nystroem` for the same ``random_state``
and gives the same features. The other strategies spend a little more time
choosing landmarks that cover the data better (k-means++ seeding in the
kernel's feature space, approximate ridge leverage scores, randomly pivoted
Cholesky), or take the user's own landmarks; :meth:`Nystroem.transform`
works block of rows by block of rows, so that it never holds more of
``K(X, Z)`` than one block besides its output.
"""

from __future__ import annotations

import time
import warnings
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
import scipy.linalg
import sklearn
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
)
from sklearn.utils import check_array, check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from ..config import check_backend
from ..dask import rows_method
from ..kernels import PAIRWISE_KERNELS, make_kernel
from ..lazy import Vi, Vj
from ..linalg import select_landmarks
from ._fallback import FallbackMixin, is_sparse, kernel_refusal
from ._param_validation import Interval, StrOptions, validate_params

__all__ = ["LANDMARK_METHODS", "Nystroem"]

#: The landmark strategies that ``Nystroem(landmarks=...)`` accepts by name.
LANDMARK_METHODS = ("uniform", "kmeans++", "rls", "rpcholesky")
#: Entries of ``K(X, Z)`` evaluated at once (64 MB in float64): blocks large
#: enough that the product with ``normalization_.T`` runs as a few big BLAS
#: calls (many small ones are slower, much slower on a busy machine).
_BLOCK_ENTRIES = 1 << 23
#: Entries evaluated per kernel call inside a block (8 MB): the kernel's
#: element-wise passes (distances, exp) run faster on pieces near cache size.
_PIECE_ENTRIES = 1 << 20
_FLOATS = [np.float64, np.float32]


class Nystroem(FallbackMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
               BaseEstimator):
    """Approximate a kernel map from a subset of the training data.

    The feature map ``x -> K(x, Z) K(Z, Z)^{-1/2}`` of scikit-learn's
    :class:`sklearn.kernel_approximation.Nystroem` (Williams and Seeger,
    2001), whose constructor, attributes and, with ``landmarks='uniform'``,
    results it shares. Beyond it: landmark strategies that cover clustered
    data better than uniform sampling, user-given landmarks, kernels written
    as LazyTensor formulas, and a :meth:`transform` in bounded extra memory.

    Parameters
    ----------
    kernel : str, callable or sklearn GP kernel, default="rbf"
        A name of ``sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS``; a
        callable ``(x_i, y_j, **kernel_params) -> LazyTensor`` that writes
        the kernel as a formula; or a ``sklearn.gaussian_process.kernels``
        object (its ``WhiteKernel`` terms add nothing off the diagonal, so
        they add nothing here, as in scikit-learn). ``"precomputed"`` and
        scikit-learn's callables of two 1-D arrays go to scikit-learn's
        Nystroem (see Notes); a callable is called once on two symbolic
        LazyTensors, and taken as a function of arrays unless it returns a
        scalar formula.
    gamma, coef0, degree : float, default=None
        Parameters of the named kernels, as in scikit-learn; None takes the
        kernel's default. They must stay None with a callable or GP kernel.
    kernel_params : dict, default=None
        Keyword arguments of a callable kernel; with a named kernel, values
        of its parameters that ``gamma``, ``coef0``, ``degree`` override.
    n_components : int, default=100
        Number of landmarks, hence of features. Above the number of samples
        it is lowered to it, with scikit-learn's warning. Unused when
        ``landmarks`` is an array.
    random_state : int, RandomState instance or None, default=None
        Seeds the landmark choice.
    n_jobs : int, default=None
        Accepted for compatibility with scikit-learn: the kernel blocks run
        on BLAS and OpenMP threads.
    landmarks : str or array of shape (n_landmarks, n_features), \
default="uniform"
        How the landmarks are chosen:

        - "uniform": ``n_components`` rows drawn without replacement, exactly
          as scikit-learn does (``component_indices_`` are the first entries
          of ``random_state.permutation(n_samples)``).
        - "kmeans++": k-means++ seeding (Arthur and Vassilvitskii, 2007) in
          the kernel's feature space: each new landmark is drawn with
          probability proportional to its squared feature-space distance
          ``k(x, x) + k(z, z) - 2 k(x, z)`` to the nearest landmark so far.
          These distances are kept for all rows as a vector, updated by one
          ``Min`` reduction per batch of new landmarks; draws between updates
          are made exact by rejection.
        - "rls": rows drawn in proportion to approximate ridge leverage
          scores (Alaoui and Mahoney, 2015), in rounds: an eighth of the
          landmarks uniform, then each round doubles them, drawing with the
          scores estimated from the landmarks so far (Musco and Musco, 2017),
          so that regions already covered stop drawing landmarks (see
          :func:`ridge_leverage_sample`). Costs one half to three quarters
          of a :meth:`transform` of the training data.
        - "rpcholesky": randomly pivoted Cholesky (Chen, Epperly, Tropp and
          Webber, 2022), see :func:`kerneltools.linalg.select_landmarks`.
        - an array: these rows are the landmarks (``component_indices_`` is
          then None and ``n_components`` unused).
    backend : {"auto", "cpu", "cuda", "numpy"} or None, default=None
        Where the reductions of "kmeans++" run (the other landmark choices
        and :meth:`transform` use dense kernel blocks); None: the configured
        backend (:func:`kerneltools.config_context`). ``fit`` raises
        :class:`~kerneltools.exceptions.BackendUnavailableError` for one that
        cannot run here.
    verbose : int, default=0
        Print how the landmarks were chosen and how long it took.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        The landmarks.
    component_indices_ : ndarray of shape (n_components,) or None
        Their rows in the training data (None for user-given landmarks).
    normalization_ : ndarray of shape (n_components, n_components)
        ``K(Z, Z)^{-1/2}``, from the SVD of ``K(Z, Z)`` with singular values
        clipped at 1e-12, as scikit-learn computes it (in float64, stored in
        the training data's dtype).
    n_features_in_ : int
        Number of features seen during :meth:`fit`.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features, when X had string column names.

    Notes
    -----
    What the engine does not serve is fitted by scikit-learn's
    :class:`sklearn.kernel_approximation.Nystroem` with the same parameters
    (``landmarks="uniform"`` only: it has no other strategy): sparse ``X``,
    ``kernel="precomputed"``, a callable of arrays, a GP kernel object without
    a formula, and, with ``sklearn.set_config(array_api_dispatch=True)``, an
    Array API array that is not NumPy's (the attributes then stay in its
    namespace and on its device). It is kept in ``fallback_``, its fitted
    attributes are copied here, and every later call goes to it, so results,
    warnings and errors are scikit-learn's; ``verbose`` says so. A sparse
    query after a dense fit is densified block by block.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators.nystroem import Nystroem
    >>> X = np.random.default_rng(0).normal(size=(500, 4))
    >>> nys = Nystroem(gamma=0.2, n_components=100, landmarks="kmeans++", random_state=0)
    >>> F = nys.fit_transform(X)
    >>> F.shape
    (500, 100)
    >>> K = np.exp(-0.2 * ((X[:, None] - X[None]) ** 2).sum(-1))
    >>> bool(np.linalg.norm(F @ F.T - K) < 0.01 * np.linalg.norm(K))
    True
    """

    _parameter_constraints: ClassVar[dict] = {
        # scikit-learn's Nystroem's (kernel: the names we compute)
        "kernel": [StrOptions({*PAIRWISE_KERNELS, "precomputed"}), callable],
        "gamma": [Interval(Real, 0, None, closed="left"), None],
        "coef0": [Interval(Real, None, None, closed="neither"), None],
        "degree": [Interval(Real, 1, None, closed="left"), None],
        "kernel_params": [dict, None],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "n_jobs": [Integral, None],
        # ours
        "landmarks": [StrOptions(LANDMARK_METHODS), "array-like"],
        "backend": ["backend"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        kernel="rbf",
        *,
        gamma=None,
        coef0=None,
        degree=None,
        kernel_params=None,
        n_components=100,
        random_state=None,
        n_jobs=None,
        landmarks="uniform",
        backend=None,
        verbose=0,
    ):
        self.kernel = kernel
        self.gamma = gamma
        self.coef0 = coef0
        self.degree = degree
        self.kernel_params = kernel_params
        self.n_components = n_components
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.landmarks = landmarks
        self.backend = backend
        self.verbose = verbose

    _sklearn_class = "sklearn.kernel_approximation.Nystroem"

    def _engine_refuses(self, X, y=None):
        """Why the engine cannot fit X (see Notes), or None: types only."""
        reason = kernel_refusal(self.kernel, X, self.kernel_params)
        if reason is None and _foreign_array_api(X):
            reason = f"an Array API array ({type(X).__module__}.{type(X).__name__})"
        if reason and not (isinstance(self.landmarks, str)
                           and self.landmarks == "uniform"):
            raise ValueError(
                f"Nystroem(landmarks={_short(self.landmarks)}) runs on the kerneltools "
                f"engine only, which does not serve {reason}; scikit-learn's Nystroem, "
                "which does, draws landmarks='uniform' only")
        return reason

    def _kernel(self):
        named = {"gamma": self.gamma, "coef0": self.coef0, "degree": self.degree}
        if not isinstance(self.kernel, str):
            if any(p is not None for p in named.values()):
                raise ValueError(
                    "Don't pass gamma, coef0 or degree to Nystroem if "
                    "using a callable or GP kernel; put a callable's "
                    "parameters in 'kernel_params'"
                )
            return make_kernel(self.kernel, kernel_params=self.kernel_params)
        # scikit-learn: explicit parameters override those of kernel_params.
        params = {k: p for k, p in (self.kernel_params or {}).items() if k in named}
        params.update({k: p for k, p in named.items() if p is not None})
        return make_kernel(self.kernel, **params)

    def fit(self, X, y=None):
        """Choose the landmarks and compute the normalization.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data.
        y : None
            Ignored.

        Returns
        -------
        self : object
        """
        validate_params(self)
        check_backend(self.backend, "Nystroem")
        reason = self._engine_refuses(X, y)
        if reason:
            self._fit_fallback(reason, X, y)
            self._n_features_out = self.fallback_._n_features_out  # feature names
            return self
        self._drop_fallback()
        X = validate_data(self, X, dtype=_FLOATS)
        kernel = self._kernel()
        start = time.perf_counter()
        if isinstance(self.landmarks, str):
            idx = self._landmark_indices(kernel, X)
            self.components_ = X[idx]
            self.component_indices_ = idx
        else:
            self.components_ = _user_landmarks(self.landmarks, X)
            self.component_indices_ = None
        Z = self.components_.astype(np.float64)
        Kmm = np.asarray(kernel(Z), dtype=np.float64)
        Kmm[np.diag_indices_from(Kmm)] -= kernel.white_level()  # GP kernels' noise
        self.normalization_ = _inverse_sqrt(Kmm).astype(X.dtype, copy=False)
        self._n_features_out = len(self.components_)
        if self.verbose:
            how = self.landmarks if isinstance(self.landmarks, str) else "given"
            print(
                f"[Nystroem] {len(Z)} landmarks ({how}) and their normalization "
                f"in {time.perf_counter() - start:.2f} s"
            )
        return self

    def _landmark_indices(self, kernel, X):
        n = len(X)
        m = self.n_components
        if m > n:
            warnings.warn(
                "n_components > n_samples. This is not possible.\n"
                "n_components was set to n_samples, which results in "
                "inefficient evaluation of the full kernel.",
                stacklevel=3,
            )
            m = n
        rnd = check_random_state(self.random_state)
        if self.landmarks == "uniform":  # scikit-learn's draw, exactly
            return rnd.permutation(n)[:m]
        if self.landmarks == "kmeans++":
            return kmeans_plusplus(kernel, X, m, random_state=rnd, backend=self.backend)
        if self.landmarks == "rls":
            return ridge_leverage_sample(kernel, X, m, random_state=rnd)
        seed = rnd.randint(np.iinfo(np.int32).max)
        return select_landmarks(kernel, X, m, method="rpcholesky", random_state=seed)

    @rows_method
    def transform(self, X):
        """Map X to the approximate kernel features.

        ``K(X, components_) @ normalization_.T``, with ``K`` evaluated for
        one block of rows at a time: beyond the output, the extra memory is
        one block of ``K``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        X_transformed : ndarray of shape (n_samples, n_components)
            In float32 when both X and the training data are float32.
        """
        check_is_fitted(self)
        if self._delegating():
            return self.fallback_.transform(X)
        X = validate_data(self, X, reset=False, dtype=_FLOATS, accept_sparse="csr")
        kernel = self._kernel()
        Z, N = self.components_, self.normalization_
        dtype = np.result_type(X.dtype, Z.dtype)
        out = np.empty((X.shape[0], len(Z)), dtype=dtype)
        NT = N.T.astype(dtype, copy=False)
        for i0, i1, Kb in _kernel_blocks(kernel, X, Z):
            np.matmul(Kb.astype(dtype, copy=False), NT, out=out[i0:i1])
        return out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # by scikit-learn's Nystroem (see Notes), which draws uniform landmarks only
        uniform = isinstance(self.landmarks, str) and self.landmarks == "uniform"
        tags.input_tags.sparse = uniform
        tags.array_api_support = uniform
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


def _foreign_array_api(X) -> bool:
    """An Array API array other than NumPy's, with scikit-learn's
    ``array_api_dispatch`` on (where scikit-learn keeps its namespace)."""
    # PyTorch's tensors have no __array_namespace__ (array-api-compat wraps
    # them), but every Array API library's arrays have __dlpack__
    return (sklearn.get_config()["array_api_dispatch"]
            and (hasattr(X, "__array_namespace__") or hasattr(X, "__dlpack__"))
            and not isinstance(X, np.ndarray)
            and type(X).__module__.split(".")[0] != "dask")


def _short(value) -> str:
    return repr(value) if isinstance(value, str) else f"<{type(value).__name__}>"


def _user_landmarks(landmarks, X):
    Z = check_array(landmarks, dtype=_FLOATS, input_name="landmarks")
    if Z.shape[1] != X.shape[1]:
        raise ValueError(
            f"'landmarks' has {Z.shape[1]} features but X has "
            f"{X.shape[1]}; give an array of shape (n_landmarks, "
            f"{X.shape[1]})"
        )
    return Z.astype(X.dtype, copy=False)


def _inverse_sqrt(K):
    """scikit-learn's ``K^{-1/2}``: ``U S^{-1/2} V`` from ``svd(K)``, the
    singular values clipped at 1e-12."""
    U, S, V = np.linalg.svd(K)
    S = np.maximum(S, 1e-12)
    return U / np.sqrt(S) @ V


def _kernel_blocks(kernel, X, Z):
    """``(i0, i1, K(X[i0:i1], Z))`` over blocks of rows of X, each block
    evaluated piece by piece into one buffer."""
    m = max(1, len(Z))
    rows, piece = max(1, _BLOCK_ENTRIES // m), max(1, _PIECE_ENTRIES // m)
    buf = None
    for i0 in range(0, X.shape[0], rows):
        i1 = min(X.shape[0], i0 + rows)
        for j0 in range(i0, i1, piece):
            j1 = min(i1, j0 + piece)
            Xp = X[j0:j1].toarray() if is_sparse(X) else X[j0:j1]
            Kp = np.asarray(kernel(Xp, Z))
            if j0 == i0 and j1 == i1:  # a single piece: no copy
                buf = Kp
                break
            if buf is None or buf.dtype != Kp.dtype or len(buf) < i1 - i0:
                buf = np.empty((i1 - i0, Kp.shape[1]), dtype=Kp.dtype)
            buf[j0 - i0 : j1 - i0] = Kp
        yield i0, i1, buf[: i1 - i0]


def _self_kernel(kernel, X):
    """``k(x, x)`` for every row, without GP white noise, in float64."""
    return np.asarray(kernel.diag(X), dtype=np.float64) - kernel.white_level()


# ---------------------------------------------------------------------------
# k-means++ seeding in the kernel's feature space
# ---------------------------------------------------------------------------
def kmeans_plusplus(
    kernel, X, n_components: int, *, random_state=None, backend=None, batch: int = 32
) -> np.ndarray:
    """Row indices of X chosen by k-means++ seeding in feature space.

    The first landmark is uniform; each next one is drawn with probability
    proportional to ``D(x)^2 = min_z k(x, x) + k(z, z) - 2 k(x, z)`` over the
    landmarks ``z`` chosen so far (Arthur and Vassilvitskii, 2007, step 1b).
    ``bound``, an upper bound of ``D^2`` for every row, is refreshed by one
    ``Min`` reduction over the landmarks added since the last refresh, so no
    ``n x m`` matrix is ever formed. Between refreshes, candidates are drawn
    ``batch`` at a time in proportion to ``bound`` and accepted with
    probability ``D(x)^2 / bound(x)``, which makes every draw exactly the
    k-means++ one.
    """
    rnd = check_random_state(random_state)
    seeding = _Seeding(make_kernel(kernel), X, rnd, backend)
    m = int(n_components)
    seeding.add(int(rnd.randint(len(X))))
    while len(seeding.chosen) < m:
        cum = seeding.refresh()
        if not cum[-1] > 0:  # every row is (numerically) a landmark already
            break
        cap = min(256, max(batch, len(seeding.chosen) // 2))
        while len(seeding.chosen) < m and len(seeding.pending) < cap:
            u = rnd.uniform(0, cum[-1], batch)
            cand = np.minimum(np.searchsorted(cum, u, side="right"), len(X) - 1)
            if 4 * seeding.screen(cand, m) < batch:  # bound is stale: refresh it
                break
    chosen = seeding.chosen
    if len(chosen) < m:  # top up uniformly among the other rows
        rest = np.flatnonzero(~seeding.taken)
        chosen += list(rnd.choice(rest, m - len(chosen), replace=False))
    return np.asarray(chosen, dtype=np.int64)


class _Seeding:
    """The state of :func:`kmeans_plusplus`: landmarks chosen, those not yet
    in ``bound`` (pending), and ``bound >= D^2`` for every row."""

    def __init__(self, kernel, X, rnd, backend):
        self.kernel, self.X, self.rnd, self.backend = kernel, X, rnd, backend
        self.kd = _self_kernel(kernel, X)
        self.bound = np.full(len(X), np.inf)
        self.taken = np.zeros(len(X), dtype=bool)
        self.chosen, self.pending = [], []

    def add(self, i):
        self.chosen.append(i)
        self.pending.append(i)
        self.taken[i] = True

    def refresh(self):
        """``bound = min(bound, D^2(x, pending))``, one Min reduction; returns
        the cumulative sums of ``bound``."""
        if self.pending:
            idx = np.asarray(self.pending)
            K = self.kernel.lazy(self.X, self.X[idx])
            kd = self.kd.astype(K.dtype)
            d2 = (Vi(kd[:, None]) + Vj(kd[idx, None]) - 2.0 * K).min(
                axis=1, backend=self.backend
            )
            self.bound = np.minimum(self.bound, np.maximum(d2[:, 0], 0.0))
            self.bound[self.taken] = 0.0
            self.pending = []
        return np.cumsum(self.bound)

    def screen(self, cand, m):
        """Accept candidates in turn with probability ``D^2 / bound``, ``D^2``
        counting the pending landmarks (those just accepted too), until m
        landmarks are chosen; returns the number accepted."""
        ref = np.concatenate([np.asarray(self.pending, dtype=np.int64), cand])
        K = np.asarray(self.kernel(self.X[cand], self.X[ref]))
        sq = self.kd[cand, None] + self.kd[None, ref] - 2.0 * K
        cols = list(range(len(self.pending)))
        accepted = 0
        for t, i in enumerate(cand):
            if self.taken[i] or len(self.chosen) == m:
                continue
            d2 = min(self.bound[i], sq[t, cols].min()) if cols else self.bound[i]
            if self.rnd.uniform() * self.bound[i] < d2:
                self.add(int(i))
                cols.append(len(ref) - len(cand) + t)
                accepted += 1
        return accepted


# ---------------------------------------------------------------------------
# approximate ridge leverage scores, in rounds
# ---------------------------------------------------------------------------
def ridge_leverage_sample(
    kernel, X, n_components: int, *, random_state=None, rounds: int = 3
) -> np.ndarray:
    """Row indices of X drawn by approximate ridge leverage scores, in rounds.

    The ``lam``-ridge leverage score of row i, ``(K (K + lam I)^{-1})_ii``,
    is estimated from landmarks S as Musco and Musco (2017, eq. 3) do:
    ``(k_ii - k_iS (K_SS + lam' I)^{-1} k_Si) / lam`` with
    ``lam' = lam |S| / n`` (S weighted as a uniform sample). The first
    ``n_components / 2^rounds`` landmarks are uniform; each round then draws
    as many new rows again (half the landmarks in the last round), without
    replacement, in proportion to the scores given the landmarks so far, so
    that regions already covered stop drawing landmarks. ``lam`` is their
    choice for a rank-m approximation, ``sum_{i>m} e_i(K) / m``, with the
    tail trace estimated by that of the residual of the uniform sample.
    """
    kernel = make_kernel(kernel)
    rnd = check_random_state(random_state)
    n, m = len(X), int(n_components)
    kd = np.maximum(_self_kernel(kernel, X), 0.0)
    sizes = [-(-m // 2**r) for r in range(rounds, -1, -1)]  # m/2^rounds ... m
    S = rnd.permutation(n)[: sizes[0]]
    lam = _ridge_residual(kernel, X, S, kd, 0.0).sum() / m
    for size in sizes[1:]:
        tau = _ridge_residual(kernel, X, S, kd, lam * len(S) / n)
        free = np.ones(n, dtype=bool)
        free[S] = False
        S = np.concatenate([S, _weighted_draw(rnd, tau, free, size - len(S))])
    return S


def _ridge_residual(kernel, X, S, kd, ridge):
    """``k_ii - k_iS (K_SS + ridge I)^{-1} k_Si`` for every row, in blocks."""
    W = _inverse_factor(np.asarray(kernel(X[S], X[S]), dtype=np.float64), ridge)
    out = np.empty(len(X))
    for i0, i1, Kb in _kernel_blocks(kernel, X, X[S]):
        F = Kb @ W
        out[i0:i1] = kd[i0:i1] - np.einsum("ij,ij->i", F, F)
    return np.maximum(out, 0.0)


def _inverse_factor(K, ridge):
    """``W`` with ``W W^T = (K + ridge I)^{-1}`` (K's negative eigenvalues,
    if any, raised to 0), the ridge at least ``m eps |K|``.

    Not :func:`kerneltools.linalg.robust_cholesky`, on purpose: the ridge is
    part of the scores being estimated (Musco and Musco's ``lam'``), so it may
    not grow until the matrix factors; a kernel that is not positive
    semi-definite (sigmoid) has its negative eigenvalues clipped instead.
    """
    m = len(K)
    ridge = max(ridge, m * np.finfo(np.float64).eps * np.abs(K).max(initial=0.0))
    if ridge <= 0:  # K = 0
        return np.zeros_like(K)
    try:
        L = scipy.linalg.cholesky(K + ridge * np.eye(m), lower=True)
        return scipy.linalg.solve_triangular(L, np.eye(m), lower=True).T
    except np.linalg.LinAlgError:  # not positive semi-definite (sigmoid, ...)
        e, U = np.linalg.eigh(K)
        return U / np.sqrt(np.maximum(e, 0.0) + ridge)


def _weighted_draw(rnd, w, free, k):
    """``k`` distinct indices among ``free`` drawn in proportion to ``w >= 0``
    (uniformly among the zero weights once the positive ones run out)."""
    w = np.where(free, w, 0.0)
    positive = np.flatnonzero(w > 0)
    if len(positive) <= k:
        rest = np.flatnonzero(free & (w <= 0))
        extra = rnd.choice(rest, k - len(positive), replace=False)
        return np.concatenate([positive, extra]).astype(np.int64)
    return rnd.choice(len(w), size=k, replace=False, p=w / w.sum())
