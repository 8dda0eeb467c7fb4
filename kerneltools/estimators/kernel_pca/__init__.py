"""Kernel PCA whose large fits never store the kernel matrix.

What lives here: :class:`KernelPCA`, and its transform of device arrays in
:mod:`._device`. What it may import: the public API (the kernels, the
eigen-solvers of :mod:`kerneltools.linalg`), :mod:`.._shared` and
:mod:`kerneltools._utils`.
"""

from __future__ import annotations

import time
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
import scipy.linalg
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.extmath import svd_flip
from sklearn.utils.validation import check_array, check_is_fitted

from ...kernels import PAIRWISE_KERNELS, make_kernel
from ...linalg import (START_LANDMARKS, CenteredOperator, KernelOperator, eigsh,
                      landmark_sums, nystroem_eigh, nystroem_start, randomized_eigsh,
                      translated, translation)
from . import _transform
from ..._utils._array_api import placement
from .._shared._fallback import FallbackMixin, is_sparse
from .._shared._handover import HandOver
from ..._utils._param_validation import Interval, StrOptions
from ..kernel_ridge import KernelRidge
from ..._utils._validation import validate_numeric

__all__ = ["KernelPCA", "DENSE_MAX_SAMPLES", "LANCZOS_TOL"]

#: The solvers that run on the engine only (scikit-learn has none of them).
_ENGINE_ONLY = ("lanczos", "lobpcg", "nystroem")

#: Largest n that ``eigen_solver="auto"`` decomposes densely (as scikit-learn
#: does for every n): 2,000 points hold a 32 MB float64 matrix.
DENSE_MAX_SAMPLES = 2000
#: The relative residual ``|Kc v - lambda v| / lambda_max`` that
#: ``eigen_solver="lanczos"`` reaches on float64 data when ``tol=0``. The
#: eigenvalues' error is of the order of its square over the relative gap
#: (about 1e-12 relative: ARPACK's eigenvalues to their printed digits),
#: the eigenvectors' of 1e-6 over the relative gap.
LANCZOS_TOL = 1e-6


class KernelPCA(HandOver, FallbackMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                BaseEstimator):
    """Kernel principal component analysis, in linear memory for large n.

    A drop-in for :class:`sklearn.decomposition.KernelPCA` (same parameters,
    attributes and results up to the sign of each component). The centred
    kernel ``C K C`` (``C = I - 1 1^T / n``) is never formed beyond
    ``DENSE_MAX_SAMPLES`` points: it is applied to blocks of vectors as one
    lazy reduction ``K V`` plus a rank-two correction
    (:class:`~kerneltools.linalg.CenteredOperator`), and its top eigenpairs
    come from block Lanczos, LOBPCG, ARPACK or randomized subspace iteration
    on that operator. A precomputed kernel, a callable kernel on arrays and
    sparse input go to scikit-learn's own KernelPCA (``fallback_``).

    Parameters
    ----------
    n_components : int, default=None
        Components kept; None: all those with a positive eigenvalue.
    kernel : str or callable, default="linear"
        A name of ``sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS``
        (computed on the engine), "precomputed" or a callable of two arrays
        (both handed to scikit-learn).
    gamma, degree, coef0 : float
        The named kernels' parameters; ``gamma=None`` means ``1 / n_features``.
    kernel_params : dict, optional
        Parameters of a callable kernel.
    alpha : float, default=1.0
        Ridge of the inverse transform (a :class:`KernelRidge` fit).
    fit_inverse_transform : bool, default=False
    eigen_solver : {"auto", "dense", "arpack", "randomized", "lanczos", "lobpcg", \
"nystroem"}
        "auto": "dense" up to ``DENSE_MAX_SAMPLES`` samples, else "lanczos".
        "arpack", "randomized", "lanczos" (block Lanczos, float32 Krylov
        blocks on float64 data) and "lobpcg" run on the lazy centred kernel.
        "nystroem" (for n beyond exact reach) decomposes the centred
        Nystroem approximation of the kernel on ``n_landmarks`` landmarks
        (:func:`kerneltools.linalg.nystroem_eigh`): its eigenvalues are below
        the exact ones by at most ``approximation_error_`` each, and
        ``transform`` maps new points through the landmarks only. The choice
        is stored in ``eigen_solver_``.
    tol : float, default=0
        Convergence tolerance of the iterative solvers (0: ARPACK's machine
        precision; "lanczos": relative residual ``LANCZOS_TOL`` = 1e-6 on
        float64 data, 1e-5 on float32; "lobpcg": its own default).
    max_iter : int, optional
        Iteration cap of the iterative solvers.
    iterated_power : int >= 0 or "auto", default="auto"
        Power iterations of "randomized" ("auto": 7 when ``n_components`` is
        below a tenth of the data's smaller dimension, else 4, as scikit-learn).
    remove_zero_eig : bool, default=False
    random_state : int, RandomState or None
        Seeds ARPACK's start vector, the random blocks and the landmarks.
    copy_X : bool, default=True
    n_jobs : int, optional
        Unused on the engine (its threads are its own); passed to a fallback.
    backend : {"auto", "cpu", "cuda", "numpy"} or None, default=None
        Where the lazy reductions run; None: the configured backend.
    verbose : int, default=0
        Print the solver and its progress.
    n_landmarks : int, default=1000
        Landmarks of ``eigen_solver="nystroem"`` (at most n), drawn
        uniformly: time ``O(n m (d + m))``, memory ``O(n d + m^2)``.

    Attributes
    ----------
    eigenvalues_ : ndarray of shape (n_components,)
    eigenvectors_ : ndarray of shape (n_samples, n_components)
    dual_coef_ : ndarray of shape (n_samples, n_features)
        Only with ``fit_inverse_transform``.
    X_transformed_fit_ : ndarray of shape (n_samples, n_components)
        Only with ``fit_inverse_transform``.
    X_fit_ : ndarray of shape (n_samples, n_features)
    landmarks_ : ndarray of shape (n_landmarks,)
        Rows of X that are the landmarks (only with "nystroem").
    approximation_error_ : float
        ``tr(K - K_nystroem) >= |K - K_nystroem|_2``, a bound on each
        eigenvalue's error: ``0 <= exact - eigenvalues_ <= approximation_error_``
        (only with "nystroem").
    gamma_ : float
    eigen_solver_ : str
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators import KernelPCA
    >>> X = np.random.default_rng(0).normal(size=(300, 4))
    >>> Z = KernelPCA(n_components=3, kernel="rbf", gamma=0.2).fit_transform(X)
    >>> Z.shape
    (300, 3)
    """

    _sklearn_class = "sklearn.decomposition.KernelPCA"

    _parameter_constraints: ClassVar[dict] = {
        # scikit-learn's KernelPCA's
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "kernel": [StrOptions({*PAIRWISE_KERNELS, "precomputed"}), callable],
        "gamma": [Interval(Real, 0, None, closed="left"), None],
        "degree": [Interval(Real, 0, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "kernel_params": [dict, None],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "fit_inverse_transform": ["boolean"],
        "eigen_solver": [StrOptions({"auto", "dense", "arpack", "randomized", "lanczos",
                                     "lobpcg", "nystroem"})],
        "tol": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left"), None],
        "iterated_power": [Interval(Integral, 0, None, closed="left"),
                           StrOptions({"auto"})],
        "remove_zero_eig": ["boolean"],
        "random_state": ["random_state"],
        "copy_X": ["boolean"],
        "n_jobs": [None, Integral],
        # ours
        "backend": ["backend"],
        "verbose": ["verbose"],
        "n_landmarks": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(self, n_components=None, *, kernel="linear", gamma=None, degree=3,
                 coef0=1, kernel_params=None, alpha=1.0, fit_inverse_transform=False,
                 eigen_solver="auto", tol=0, max_iter=None, iterated_power="auto",
                 remove_zero_eig=False, random_state=None, copy_X=True, n_jobs=None,
                 backend=None, verbose=0, n_landmarks=1000):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.alpha = alpha
        self.fit_inverse_transform = fit_inverse_transform
        self.eigen_solver = eigen_solver
        self.tol = tol
        self.max_iter = max_iter
        self.iterated_power = iterated_power
        self.remove_zero_eig = remove_zero_eig
        self.random_state = random_state
        self.copy_X = copy_X
        self.n_jobs = n_jobs
        self.backend = backend
        self.verbose = verbose
        self.n_landmarks = n_landmarks

    # -- the one decision: engine or scikit-learn ----------------------------
    def _engine_refuses(self, X, y=None):
        reason = None
        if self.kernel == "precomputed":
            reason = "kernel='precomputed'"
        elif callable(self.kernel):
            reason = "a callable kernel on arrays"
        elif is_sparse(X):
            reason = "sparse input"
        if reason and self.eigen_solver in _ENGINE_ONLY:
            raise ValueError(f"KernelPCA: eigen_solver={self.eigen_solver!r} runs on the "
                             f"engine, which does not serve {reason}; use 'dense', "
                             "'arpack' or 'randomized'")
        return reason

    def _kernel(self):
        if self.kernel_params is not None:  # scikit-learn: they replace the named ones
            p = self.kernel_params
            return make_kernel(self.kernel, gamma=p.get("gamma"), degree=p.get("degree"),
                               coef0=p.get("coef0"))
        return make_kernel(self.kernel, gamma=self.gamma_, degree=self.degree,
                           coef0=self.coef0)

    def fit(self, X, y=None):
        """Fit the model from the data in X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : ignored

        Returns
        -------
        self : object
        """
        if self._hand_over(X):
            return self
        X = validate_numeric(self, X, dtype=[np.float64, np.float32], copy=self.copy_X)
        self.gamma_ = 1 / X.shape[1] if self.gamma is None else self.gamma
        kernel = self._kernel()
        start = time.perf_counter()
        n = len(X)
        n_components = n if self.n_components is None else min(n, self.n_components)
        solver = self.eigen_solver
        if solver == "auto":
            solver = "dense" if n <= DENSE_MAX_SAMPLES else "lanczos"
        self.__dict__.pop("_landmarks", None)
        if solver == "nystroem":
            # data far from the origin: the landmark kernels (dense K(Z, Z)
            # by BLAS's expanded distances) see them translated, and so does
            # transform (offset 1e8: eigenvalues 10x off)
            centre = translation(kernel, X)
            X_fit = X if centre is None else (X.astype(np.float64) - centre).astype(X.dtype)
            w, V, info = nystroem_eigh(kernel, X_fit, min(n_components, self.n_landmarks, n),
                                       n_landmarks=self.n_landmarks,
                                       random_state=self.random_state,
                                       backend=self.backend)
            self.landmarks_ = info["landmarks"]
            self.approximation_error_ = info["error_bound"]
            self._landmarks = info
            w, V = _pad_components(w, V, min(n_components, self.n_landmarks, n),
                                   self.random_state)
        elif solver == "dense":
            # translated: the BLAS kernel's expanded distances keep their
            # digits on data far from the origin
            K = kernel(translated(kernel, X))
            self._row_means = K.mean(axis=0, dtype=np.float64)
            self._grand_mean = float(self._row_means.mean())
            Kc = (K - self._row_means[None, :].astype(K.dtype)
                  - self._row_means[:, None].astype(K.dtype) + K.dtype.type(self._grand_mean))
            w, V = scipy.linalg.eigh(Kc, subset_by_index=(n - n_components, n - 1))
        else:
            # the row means ride along with the first product
            op = CenteredOperator(KernelOperator(kernel, X, backend=self.backend),
                                  defer=True)
            w, V = self._iterative_eigs(op, n_components, solver, X)
            self._row_means, self._grand_mean = op.row_means, op.grand_mean
        self.eigen_solver_ = solver
        self._set_components(np.asarray(w, X.dtype), np.asarray(V, X.dtype),
                             _rounding_floor(kernel, X))
        if solver == "nystroem":
            self._landmark_map(kernel, X_fit)
            if centre is not None:
                self._landmarks["centre"] = centre
        if self.fit_inverse_transform:
            self._fit_inverse(self.eigenvectors_ * np.sqrt(self.eigenvalues_), X)
        self.X_fit_ = X
        if self.verbose:
            print(f"[KernelPCA] {solver} eigen-solver on {n} points, "
                  f"{len(self.eigenvalues_)} components: "
                  f"{time.perf_counter() - start:.2f} s")
        return self

    def _iterative_eigs(self, op, k, solver, X):
        tol = None if self.tol == 0 else self.tol
        args = {"random_state": self.random_state, "verbose": self.verbose}
        floor = _rounding_floor(self._kernel(), X)
        if solver == "randomized":
            n_iter = self.iterated_power
            if n_iter == "auto":
                n_iter = 7 if k < 0.1 * min(X.shape) else 4
            return randomized_eigsh(op, k, n_iter=n_iter, selection="module", **args)
        if solver == "arpack":
            return eigsh(op, k, method="arpack", tol=self.tol, max_iter=self.max_iter,
                         random_state=self.random_state)
        if solver == "lanczos":
            # blocks of k + 10 vectors (scikit-learn's randomized oversampling):
            # the convergence then hangs on the gap after the (k + 10)-th
            # eigenvalue, not the (k + 1)-th; float64 data: the Krylov blocks
            # are float32 products (half the cost; their own row means, with
            # their first product), the residuals float64's. The first block:
            # the Nystroem eigenvectors (a few products fewer).
            b = args["block_size"] = min(len(X), k + 10)
            if len(X) > 4 * START_LANDMARKS:
                args["X0"] = nystroem_start(self._kernel(), X, b,
                                            random_state=self.random_state,
                                            backend=self.backend)
            if X.dtype == np.float64:
                tol = LANCZOS_TOL if tol is None else tol
                # the twin of the translated data: offset by 1e8, a float32
                # copy of X itself rounds its points to multiples of 8
                Xt = translated(self._kernel(), X)
                args["A_fast"] = CenteredOperator(
                    KernelOperator(self._kernel(), Xt.astype(np.float32),
                                   backend=self.backend), defer=True)
            # residuals relative to at least the size whose tol-th part is the
            # products' rounding: C K C of constant data is 0 to rounding, and
            # its "eigenpairs" converge at once instead of never
            args["floor"] = floor / (tol or 1e-5)
        return eigsh(op, k, method=solver, tol=tol, max_iter=self.max_iter, **args)

    def _landmark_map(self, kernel, X):
        """``transform`` of the Nystroem fit: ``(phi(x) - mu)^T P`` with the
        landmark features ``phi(x) = W^T k(Z, x)``, ``P = (F - 1 mu^T)^T A``
        and ``A`` the scaled eigenvectors (one reduction over X), so that it
        is ``K_c~(x, X) A`` for the approximate kernel, and equals
        ``fit_transform`` on X itself; stored as ``k(x, Z) W P - mu^T P``."""
        info = self._landmarks
        A = self._scaled_eigenvectors().astype(np.float64, copy=False)
        KZA = landmark_sums(kernel, X, info["Z"], A)
        P = info["W"].T @ KZA - np.outer(info["mean_feature"], A.sum(axis=0))
        self._landmark_coef = info["W"] @ P
        self._landmark_offset = info["mean_feature"] @ P
        self._landmarks = {"Z": info["Z"]}

    def _scaled_eigenvectors(self):
        """``V / sqrt(lambda)`` (0 where lambda is 0): the projection's weights."""
        nz = np.flatnonzero(self.eigenvalues_)
        A = np.zeros_like(self.eigenvectors_)
        A[:, nz] = self.eigenvectors_[:, nz] / np.sqrt(self.eigenvalues_[nz])
        return A

    def _set_components(self, w, V, floor=0.0):
        """scikit-learn's post-processing: PSD check, signs, order, zero removal;
        eigenvalues all within ``floor`` of 0 are 0 (constant data: the
        centred kernel is 0, its computed eigenvalues rounding of either sign)."""
        w = np.array(w)
        if w.size and np.abs(w).max() <= floor:
            w[:] = 0
        w = _psd_eigenvalues(w)
        V, _ = svd_flip(V, None)
        order = w.argsort()[::-1]
        w, V = w[order], V[:, order]
        if self.remove_zero_eig or self.n_components is None:
            V, w = V[:, w > 0], w[w > 0]
        self.eigenvalues_, self.eigenvectors_ = w, V

    def _fit_inverse(self, X_transformed, X):
        # the pre-image map: kernel ridge from the components back to X (Bakir,
        # Weston and Schoelkopf, 2004), with the same kernel and gamma_
        params = {"gamma": self.gamma_, "degree": self.degree, "coef0": self.coef0}
        ridge = KernelRidge(alpha=self.alpha, kernel=self.kernel, backend=self.backend,
                            **params).fit(X_transformed, X)
        self._inverse = ridge
        self.dual_coef_ = ridge.dual_coef_
        self.X_transformed_fit_ = X_transformed

    def fit_transform(self, X, y=None, **params):
        """Fit the model from X and return its projection, ``V sqrt(lambda)``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The training samples.
        y : None
            Ignored.
        **params : dict
            Keyword arguments passed on to :meth:`fit`.

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_components)
            The projection of the training samples.
        """
        self.fit(X, **params)
        return self.eigenvectors_ * np.sqrt(self.eigenvalues_)

    def transform(self, X):
        """Project X on the components: ``C K(X, X_fit_) C`` times the scaled
        eigenvectors (the centring applied to the product, never to the matrix).

        The fit is NumPy's; X may also be a CuPy array, or with
        ``array_api_dispatch`` any Array API array: the projection then runs
        where X is (on a GPU: one reduction on device arrays, with device
        copies of the fitted arrays made on the first such call) and
        returns X's namespace and device (see
        :mod:`kerneltools.estimators.kernel_pca._transform`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The samples to project.

        Returns
        -------
        X_new : array of shape (n_samples, n_components)
            The projections, in X's namespace and on X's device.
        """
        check_is_fitted(self)
        if self._delegating():
            return self.fallback_.transform(X)
        place = placement(X, backend=self.backend, who="KernelPCA.transform")
        if not place.trivial:  # CuPy, or an Array API array (array_api_dispatch)
            return _transform.transform(self, X, place)
        X = validate_numeric(self, X, reset=False, dtype=[np.float64, np.float32])
        return _transform.project(self, X, _transform.fitted_arrays(self),
                                  backend=self.backend)

    def inverse_transform(self, X):
        """Map projections back to the input space (a kernel ridge pre-image).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_components)
            The projections, as :meth:`transform` returns them.

        Returns
        -------
        X_original : ndarray of shape (n_samples, n_features)
            The pre-images in the input space.
        """
        if self._delegating():
            return self.fallback_.inverse_transform(X)
        if not self.fit_inverse_transform:
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("The fit_inverse_transform parameter was not set to True "
                                 "when instantiating and hence the inverse transform is "
                                 "not available.")
        # scikit-learn's pairwise kernel reads X as floats (strings parsed)
        return self._inverse.predict(check_array(X, dtype=[np.float64, np.float32]))

    @property
    def _n_features_out(self):
        return self.eigenvalues_.shape[0]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # sparse input goes to scikit-learn, which has no Lanczos or LOBPCG
        tags.input_tags.sparse = self.eigen_solver not in _ENGINE_ONLY
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.input_tags.pairwise = self.kernel == "precomputed"
        return tags


def _rounding_floor(kernel, X):
    """The eigenvalues' rounding: ``100 eps tr(K)`` (``|K|_2 <= tr K``)
    bounds that of every product and decomposition of the fit."""
    return 100 * float(np.finfo(X.dtype).eps) * float(np.abs(kernel.diag(X)).sum())


def _pad_components(w, V, k, random_state):
    """``(w, V)`` with zero eigenvalues and centred orthonormal vectors
    orthogonal to ``V`` appended up to ``k`` columns: a Nystroem
    approximation of lower rank (constant data: rank 1) still gives the
    ``n_components`` that scikit-learn's KernelPCA gives, zeros beyond it."""
    n, m = V.shape
    if m >= k:
        return w, V
    rng = np.random.default_rng(random_state if isinstance(random_state, Integral)
                                else 0)
    R = rng.standard_normal((n, k - m))
    R -= R.mean(axis=0)  # orthogonal to 1, as the centred kernel's eigenvectors
    for _ in range(2):
        R -= V @ (V.T @ R)
        R, _ = np.linalg.qr(R)
    return np.concatenate([w, np.zeros(k - m, dtype=np.asarray(w).dtype)]), np.hstack([V, R])


def _psd_eigenvalues(w):
    """Eigenvalues of a matrix that should be PSD, as scikit-learn checks them:
    ValueError when the negative ones are significant next to the largest,
    otherwise negative and relatively tiny ones set to 0."""
    w = np.array(w)
    double = w.dtype == np.float64
    neg_ratio, neg_value = (1e-5, 1e-10) if double else (5e-3, 1e-6)
    tiny_ratio = 1e-12 if double else 2e-7
    top = w.max()
    if top < 0:
        raise ValueError(f"All eigenvalues are negative (maximum is {top:g}). Either the "
                         "matrix is not PSD, or there was an issue while computing the "
                         "eigendecomposition of the matrix.")
    low = w.min()
    if low < -neg_ratio * top and low < -neg_value:
        raise ValueError(f"There are significant negative eigenvalues ({-low / top:g} of "
                         "the maximum positive). Either the matrix is not PSD, or there "
                         "was an issue while computing the eigendecomposition of the "
                         "matrix.")
    w[w < 0] = 0
    w[w < tiny_ratio * top] = 0
    return w
