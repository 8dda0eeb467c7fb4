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

What lives here: :class:`Nystroem` and, in :mod:`._landmarks`, its dense
kernel blocks and landmark strategies. What it may import: the public API,
:mod:`.._shared` and :mod:`kerneltools._utils`.
"""

from __future__ import annotations

import time
import warnings
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
)
from sklearn.utils import check_array, check_random_state
from sklearn.utils.validation import check_is_fitted

from ...dask import rows_method
from ...kernels import PAIRWISE_KERNELS, make_kernel
from ...linalg import select_landmarks
from ..._utils._array_api import (
    DeviceCopies,
    check_same_place,
    fitted_placement,
    host_array,
    placement,
    validate_on_device,
)
from . import _landmarks as _blocks
from .._shared._fallback import FallbackMixin, kernel_refusal
from ._landmarks import kmeans_plusplus, ridge_leverage_sample
from .._shared._xp_kernels import DEVICE_KERNELS, kernel_block
from ..._utils._param_validation import Interval, StrOptions, validate_params
from ..._utils._validation import validate_numeric

__all__ = ["LANDMARK_METHODS", "Nystroem", "kmeans_plusplus", "ridge_leverage_sample"]

#: The landmark strategies that ``Nystroem(landmarks=...)`` accepts by name.
LANDMARK_METHODS = ("uniform", "kmeans++", "rls", "rpcholesky")
_FLOATS = [np.float64, np.float32]


class Nystroem(DeviceCopies, FallbackMixin, ClassNamePrefixFeaturesOutMixin,
               TransformerMixin, BaseEstimator):
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
    components_ : array of shape (n_components, n_features)
        The landmarks.
    component_indices_ : array of shape (n_components,) or None
        Their rows in the training data (None for user-given landmarks).
    normalization_ : array of shape (n_components, n_components)
        ``K(Z, Z)^{-1/2}``, from the SVD of ``K(Z, Z)`` with singular values
        clipped at 1e-12, as scikit-learn computes it (in float64, stored in
        the training data's dtype).

        The three arrays are in the namespace and on the device of the
        training data (NumPy for NumPy data; CuPy arrays for CuPy data; with
        ``array_api_dispatch``, torch tensors for torch tensors ...), as
        scikit-learn's.
    n_features_in_ : int
        Number of features seen during :meth:`fit`.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features, when X had string column names.

    Notes
    -----
    Array API arrays: CuPy arrays, and with
    ``sklearn.set_config(array_api_dispatch=True)`` any Array API array
    (torch tensors, ...), are fitted and transformed in their namespace, on
    their device: on a GPU (CuPy, or torch CUDA tensors through DLPack) the
    kernel blocks are computed there with the named kernels; host arrays are
    read through a zero-copy NumPy view. ``landmarks`` other than "uniform"
    or an array choose on a host copy of a device X (once per fit). With
    ``backend="cuda"``, NumPy data are copied to the GPU once per fit and the
    transform runs there (outputs NumPy). See
    :mod:`kerneltools._utils._array_api`.

    What the engine does not serve is fitted by scikit-learn's
    :class:`sklearn.kernel_approximation.Nystroem` with the same parameters
    (``landmarks="uniform"`` only: it has no other strategy): sparse ``X``,
    ``kernel="precomputed"``, a callable of arrays, a GP kernel object without
    a formula (with ``array_api_dispatch``, scikit-learn keeps the input's
    namespace). It is kept in ``fallback_``, its fitted attributes are copied
    here, and every later call goes to it, so results, warnings and errors
    are scikit-learn's; ``verbose`` says so. A sparse query after a dense fit
    is densified block by block.

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
        if reason and not (isinstance(self.landmarks, str)
                           and self.landmarks == "uniform"):
            raise ValueError(
                f"Nystroem(landmarks={_short(self.landmarks)}) runs on the kerneltools "
                f"engine only, which does not serve {reason}; scikit-learn's Nystroem, "
                "which does, draws landmarks='uniform' only")
        return reason

    def _kernel(self):
        if not isinstance(self.kernel, str):
            named = {"gamma": self.gamma, "coef0": self.coef0, "degree": self.degree}
            if any(p is not None for p in named.values()):
                raise ValueError(
                    "Don't pass gamma, coef0 or degree to Nystroem if "
                    "using a callable or GP kernel; put a callable's "
                    "parameters in 'kernel_params'"
                )
            return make_kernel(self.kernel, kernel_params=self.kernel_params)
        return make_kernel(self.kernel, **self._named_params())

    def _named_params(self) -> dict:
        """A named kernel's gamma, coef0, degree: explicit parameters override
        those of kernel_params, as in scikit-learn."""
        named = {"gamma": self.gamma, "coef0": self.coef0, "degree": self.degree}
        params = {k: p for k, p in (self.kernel_params or {}).items() if k in named}
        params.update({k: p for k, p in named.items() if p is not None})
        return params

    def _device_serves(self) -> bool:
        """Whether the device path serves this kernel (a named one, whose
        dense blocks it evaluates)."""
        return isinstance(self.kernel, str) and self.kernel in DEVICE_KERNELS

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
        place = placement(X, backend=self.backend, who="Nystroem.fit",
                          device_ok=self._device_serves())
        reason = self._engine_refuses(X, y)
        if reason:
            self._fit_fallback(reason, X, y)
            self._n_features_out = self.fallback_._n_features_out  # feature names
            return self
        self._drop_fallback()
        self._drop_device_copies()
        sp = place.space
        if sp.on_device:
            X, _ = validate_on_device(self, place.to_space(X), reset=True, space=sp)
        else:
            X = validate_numeric(self, host_array(X), dtype=_FLOATS)
        dtype = sp.np_dtype(X)
        kernel = self._kernel()
        start = time.perf_counter()
        idx = None
        if isinstance(self.landmarks, str):
            idx = self._landmark_indices(kernel, X, sp, place.backend)
            Z = sp.take(X, idx)
        else:
            Z = sp.put(_user_landmarks(host_array(self.landmarks), X.shape[1], dtype))
        Kmm = np.asarray(kernel(sp.host(Z).astype(np.float64)), dtype=np.float64)
        Kmm[np.diag_indices_from(Kmm)] -= kernel.white_level()  # GP kernels' noise
        N = sp.put(_inverse_sqrt(Kmm).astype(dtype, copy=False))
        self.components_, self.normalization_ = place.to_output(Z), place.to_output(N)
        self.component_indices_ = None if idx is None else place.to_output(sp.put(idx))
        self._keep_device_copies(place, components_=Z, normalization_=N)
        self._n_features_out = Z.shape[0]
        if self.verbose:
            how = self.landmarks if isinstance(self.landmarks, str) else "given"
            where = "" if place.trivial else f", {place.describe()}"
            print(
                f"[Nystroem] {Z.shape[0]} landmarks ({how}) and their normalization "
                f"in {time.perf_counter() - start:.2f} s{where}"
            )
        return self

    def _landmark_indices(self, kernel, X, sp, backend):
        n = X.shape[0]
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
        X = sp.host(X)  # the other rules choose on the host (a copy off a device)
        if self.landmarks == "kmeans++":
            return kmeans_plusplus(kernel, X, m, random_state=rnd, backend=backend)
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
        fitted = fitted_placement(self, "components_", who="Nystroem.transform",
                                  device_ok=self._device_serves())
        place = check_same_place(self, X, fitted, "transform")
        sp = place.space
        xp = sp.xp
        if sp.on_device:
            X, _ = validate_on_device(self, place.to_space(X), reset=False, space=sp)
            Z, N = self._fitted_on(place, "components_", "normalization_")
        else:
            X = validate_numeric(self, host_array(X), reset=False, dtype=_FLOATS,
                                 accept_sparse="csr")
            Z, N = host_array(self.components_), host_array(self.normalization_)
        dtype = sp.dtype(np.result_type(sp.np_dtype(X), sp.np_dtype(Z)))
        NT = xp.astype(xp.matrix_transpose(N), dtype, copy=False)
        out = xp.empty((X.shape[0], Z.shape[0]), dtype=dtype, device=sp.device)
        for i0, i1, Kb in self._kernel_blocks(X, Z, dtype, sp):
            out[i0:i1, :] = xp.astype(Kb, dtype, copy=False) @ NT
        return place.to_output(out)

    def _kernel_blocks(self, X, Z, dtype, sp):
        """``(i0, i1, K(X[i0:i1], Z))`` over blocks of rows, in ``sp``: on
        the host by :func:`kerneltools.stats._blocks.kernel_blocks` (every
        kernel, sparse X), on a device by :func:`._xp_kernels.kernel_block`
        (the named kernels, whose blocks it evaluates there)."""
        if not sp.on_device:
            yield from _blocks.kernel_blocks(self._kernel(), X, Z)
            return
        xp = sp.xp
        X, Z = xp.astype(X, dtype, copy=False), xp.astype(Z, dtype, copy=False)
        n, m = X.shape[0], Z.shape[0]
        rows = max(1, _blocks._BLOCK_ENTRIES // max(1, m))
        for i0 in range(0, n, rows):
            i1 = min(n, i0 + rows)
            yield i0, i1, kernel_block(self.kernel, self._named_params(), X[i0:i1, :],
                                       Z, xp)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # by scikit-learn's Nystroem (see Notes), which draws uniform landmarks only
        uniform = isinstance(self.landmarks, str) and self.landmarks == "uniform"
        tags.input_tags.sparse = uniform
        tags.array_api_support = True  # NumPy, CuPy, Array API arrays (see Notes)
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


def _short(value) -> str:
    return repr(value) if isinstance(value, str) else f"<{type(value).__name__}>"


def _user_landmarks(landmarks, n_features, dtype):
    Z = check_array(landmarks, dtype=_FLOATS, input_name="landmarks")
    if Z.shape[1] != n_features:
        raise ValueError(
            f"'landmarks' has {Z.shape[1]} features but X has "
            f"{n_features}; give an array of shape (n_landmarks, "
            f"{n_features})"
        )
    return Z.astype(dtype, copy=False)


def _inverse_sqrt(K):
    """scikit-learn's ``K^{-1/2}``: ``U S^{-1/2} V`` from ``svd(K)``, the
    singular values clipped at 1e-12."""
    U, S, V = np.linalg.svd(K)
    S = np.maximum(S, 1e-12)
    return U / np.sqrt(S) @ V
