"""Kernel ridge regression that scales past scikit-learn's dense solver.

Here: KernelRidge and its CG; other solvers in :mod:`._solvers`, warm starts in
:mod:`._warm`, the device CG in :mod:`._device`. It may import the public API,
:mod:`.._shared` and :mod:`kerneltools._utils`.
"""

from __future__ import annotations

import time
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from ...dask import check_rows, is_dask_array, rows_method, to_numpy
from ...kernels import PAIRWISE_KERNELS, from_sklearn, make_kernel
from . import _cg
from ..._utils._array_api import (
    HOST,
    DeviceCopies,
    DeviceScore,
    Placement,
    check_same_place,
    fitted_placement,
    host_array,
    placement,
    validate_on_device,
)
from .._shared._fallback import FallbackMixin, gp_kernel_object, is_sparse, kernel_refusal
from ._solvers import alpha_groups, np_dtype, solve_dense, solve_falkon
from ..._utils._param_validation import Interval, StrOptions, validate_params
from ..._utils._validation import validate_numeric

__all__ = ["KernelRidge"]

#: Largest n that ``solver='auto'`` solves densely (Cholesky): 5,000 points
#: hold a 200 MB float64 matrix and factor in about a second on two cores.
CHOLESKY_MAX_SAMPLES = 5000
#: Above this many points CG's kernel products run in float32 (values and
#: inputs; sums accumulated in float64), 2.5x faster than float64 ones on the
#: CPU, and float64 products recompute the residual (iterative refinement)
#: until it meets ``tol``: the float64 answer at a fraction of the cost. Below,
#: a product takes milliseconds and float64 ones do it all.
MIXED_PRECISION_MIN_SAMPLES = 5000
#: float32 kernel values (7 digits) resolve relative residuals down to about
#: 1e-6: a float32 fit with a tighter ``tol`` refines in float64.
_FLOAT32_TOL = 1e-5
#: Dense prediction (one BLAS product) below this many kernel entries.
_DENSE_PREDICT_MAX = 4_000_000


class KernelRidge(DeviceCopies, DeviceScore, FallbackMixin, MultiOutputMixin,
                  RegressorMixin, BaseEstimator):
    """Kernel ridge regression, exact or iterative, in linear memory when large.

    Minimises ``||y - K c||^2 + alpha c^T K c`` as scikit-learn's
    :class:`sklearn.kernel_ridge.KernelRidge`, whose constructor, attributes and
    results it shares on the dense path. Above ``CHOLESKY_MAX_SAMPLES`` points
    it solves ``(K + alpha I) c = y`` by conjugate gradients preconditioned
    with Nystroem, each product ``K v`` a generated reduction that never
    stores ``K``; ``solver='falkon'`` restricts the model to ``n_components``
    landmarks (Falkon, Rudi et al. 2017; Meanti et al. 2020) for millions of
    points.

    Parameters
    ----------
    alpha : float or array of shape (n_targets,), default=1.0
        Regularisation strength, >= 0 (> 0 for the iterative solvers).
    kernel : str, callable or sklearn GP kernel, default="linear"
        A name of ``sklearn.metrics.pairwise.PAIRWISE_KERNEL_FUNCTIONS``, a
        callable ``(x_i, y_j, **kernel_params) -> LazyTensor`` formula, or a
        ``sklearn.gaussian_process.kernels`` object. scikit-learn's other
        kernels are handed to scikit-learn's own KernelRidge (see Notes):
        ``"precomputed"`` and callables of two 1-D arrays (a callable is
        called once on two symbolic LazyTensors; if it does not return a
        scalar formula, it is taken as a function of arrays).
    gamma, degree, coef0 : float
        Parameters of the named kernels, as in scikit-learn.
    kernel_params : dict, optional
        Keyword arguments of a callable kernel.
    solver : {"auto", "cholesky", "cg", "falkon"}, default="auto"
        "auto": "cholesky" up to ``CHOLESKY_MAX_SAMPLES`` samples, else "cg".
        The choice is stored in ``solver_``.
    n_components : int, default=1000
        Landmarks of the Nystroem preconditioner ("cg") or of the model
        ("falkon").
    tol : float, default=1e-6
        Relative residual ``|y - (K + alpha I) c| / |y|`` at which the
        iterative solvers stop. For "cg" it bounds the change of the training
        predictions: ``K (c - c*) = K (K + alpha I)^-1 r``, so
        ``|K c - K c*| <= |r| <= tol |y|`` (the default: predictions within
        1e-6 of ``|y|``; measured, the held-out ones moved by 0.7 to 0.8 times
        the residual). Above ``MIXED_PRECISION_MIN_SAMPLES`` points, "cg"
        computes its products in float32 (float64 sums) and checks, and if
        needed refines, the residual with float64 ones (iterative refinement),
        so ``tol`` holds in float64: at the default, one float64 product at
        the end. Held-out R^2 needs less: ``tol=1e-3`` came within 1e-4 of the
        exact test R^2 on the smooth problems we measured, in half the
        iterations.
    max_iter : int, optional
        Iteration cap of the iterative solvers (default: 1,000). Where CG
        reaches it short of ``tol``, the system (``n`` points for "cg", the
        ``n_components`` landmarks for "falkon") is solved densely in float64
        with the same ``alpha`` and weights when it has at most
        ``DENSE_SOLVE_MAX`` (5,000) unknowns (``verbose`` says so; see
        :mod:`kerneltools.estimators._shared._cg_escalation`), else
        :class:`~kerneltools.exceptions.ConvergenceError` is raised: never CG's
        last iterate with only a warning.
    landmarks : {"uniform", "rpcholesky"}, default="uniform"
        How the landmarks are drawn.
    random_state : int, Generator or None
        Seeds the landmark choice.
    backend : {"auto", "cpu", "cuda", "numpy"} or None, default=None
        Where the iterative solvers and large predictions reduce; None: the
        configured backend (:func:`kerneltools.config_context`). ``fit``
        raises :class:`~kerneltools.exceptions.BackendUnavailableError` for
        one that cannot run here.
    verbose : int, default=0
        Print the solver's progress (iteration, residual, time).

    Attributes
    ----------
    dual_coef_ : array of shape (n_fit,) or (n_fit, n_targets)
    X_fit_ : array of shape (n_fit, n_features)
        The training points, or the landmarks with ``solver='falkon'``.
        Both arrays are in the namespace and on the device of the training
        data (CuPy arrays after a fit on CuPy arrays; with
        ``array_api_dispatch``, torch tensors for torch tensors ...), as
        scikit-learn's Array API estimators keep theirs.
    solver_ : str
    n_iter_ : int
        Iterations of the iterative solver (the most over targets); 1 for
        "cholesky".
    n_features_in_ : int
    feature_names_in_ : ndarray of str

    Notes
    -----
    Refits on the same data reuse work (a grid search over ``alpha``): "cg"
    keeps, per training set (keyed on a hash of X's content, the kernel and
    its parameters, the landmark rule and seed; named kernels only), the
    landmarks, the preconditioner's ``n m^2`` Gram matrix and the last
    solutions, and starts from the solution for the nearest ``alpha``; each
    fit still runs to ``tol`` on its own system. ``verbose`` says when.

    Array API arrays: CuPy arrays, and with
    ``sklearn.set_config(array_api_dispatch=True)`` any Array API array
    (torch tensors, ...), are fitted and predicted in their namespace, on
    their device. On a GPU (CuPy arrays, or torch CUDA tensors through
    DLPack; the named kernels) the data stay there for the whole fit: the
    reductions take device arrays, CG's vectors live there ("cg"), Falkon's
    n-sized arithmetic runs there and only its landmark-sized vectors cross
    to the host; "cholesky" (n <= ``CHOLESKY_MAX_SAMPLES``) solves on the
    host. Host arrays (CPU tensors) are read through a zero-copy NumPy view.
    With ``backend="cuda"``, NumPy data are copied to the GPU once per fit,
    not per reduction. ``y`` and ``sample_weight`` follow ``X``; ``predict``
    takes X in the namespace and on the device of the fit (``ValueError``
    otherwise). Device fits do not keep the warm starts below. See
    :mod:`kerneltools._utils._array_api`.

    What the engine does not serve is fitted by scikit-learn's
    :class:`sklearn.kernel_ridge.KernelRidge` with the same parameters:
    sparse ``X``, ``kernel="precomputed"``, a callable of arrays, a GP kernel
    object without a formula. Its fitted attributes are copied here, it is
    kept in ``fallback_`` and every later call goes to it, so results,
    warnings and errors are scikit-learn's (``solver`` and the other
    parameters of ours are then unused; ``verbose`` says so). A sparse query
    after a dense fit is densified, as scikit-learn's kernels accept it.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.estimators import KernelRidge
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, size=(200, 1))
    >>> y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=200)
    >>> model = KernelRidge(alpha=0.1, kernel="rbf", gamma=1.0).fit(X, y)
    >>> bool(model.score(X, y) > 0.95)
    True
    """

    _parameter_constraints: ClassVar[dict] = {
        # scikit-learn's KernelRidge's (kernel: the names we compute)
        "alpha": [Interval(Real, 0, None, closed="left"), "array-like"],
        "kernel": [StrOptions({*PAIRWISE_KERNELS, "precomputed"}), callable],
        "gamma": [Interval(Real, 0, None, closed="left"), None],
        "degree": [Interval(Real, 0, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "kernel_params": [dict, None],
        # ours
        "solver": [StrOptions(("auto", "cholesky", "cg", "falkon"))],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left"), None],
        "landmarks": [StrOptions(("uniform", "rpcholesky"))],
        # seeds np.random.default_rng
        "random_state": [Interval(Integral, 0, None, closed="left"), np.random.Generator,
                         None],
        "backend": ["backend"],
        "verbose": ["verbose"],
    }

    def __init__(self, alpha=1.0, *, kernel="linear", gamma=None, degree=3, coef0=1,
                 kernel_params=None, solver="auto", n_components=1000, tol=1e-6,
                 max_iter=None, landmarks="uniform", random_state=None, backend=None,
                 verbose=0):
        self.alpha = alpha
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.solver = solver
        self.n_components = n_components
        self.tol = tol
        self.max_iter = max_iter
        self.landmarks = landmarks
        self.random_state = random_state
        self.backend = backend
        self.verbose = verbose

    _sklearn_class = "sklearn.kernel_ridge.KernelRidge"

    def _engine_refuses(self, X, y=None):
        """Why the engine cannot fit X (see Notes), or None: types only."""
        return kernel_refusal(self.kernel, X, self.kernel_params)

    def _kernel(self):
        if gp_kernel_object(self.kernel):
            # translated at the first use of its formula (fit's _engine_refuses
            # checked it translates): small fits evaluate the object itself.
            # scikit-learn's pairwise_kernels calls it as k(X, X): a WhiteKernel
            # in it adds nothing to the fit (alpha regularises).
            return from_sklearn(self.kernel, lazy=True).without_white()
        return make_kernel(self.kernel, gamma=self.gamma, degree=self.degree,
                           coef0=self.coef0, kernel_params=self.kernel_params)

    def fit(self, X, y, sample_weight=None):
        """Fit the model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
        sample_weight : float or array-like of shape (n_samples,), optional

        Returns
        -------
        self : object
        """
        validate_params(self)
        place = placement(X, backend=self.backend, who="KernelRidge.fit",
                          device_ok=self._device_serves())
        reason = self._engine_refuses(X, y)
        if reason:
            return self._fit_fallback(reason, X, y, sample_weight=sample_weight)
        self._drop_fallback()
        self._drop_device_copies()
        alpha = _check_alpha(self.alpha)
        if is_dask_array(X):
            return self._fit_dask(X, y, sample_weight, alpha)
        if place.space.on_device:
            X, y = validate_on_device(self, place.to_space(X), place.to_space(y),
                                      reset=True, space=place.space, y_numeric=True)
        else:
            X, y = validate_numeric(self, host_array(X), host_array(y),
                                    multi_output=True, y_numeric=True,
                                    dtype=[np.float64, np.float32])
        return self._fit_arrays(X, y, host_array(sample_weight), alpha, place=place)

    def _device_serves(self) -> bool:
        """Whether the device path serves this configuration (the named
        kernels, whose dense blocks it evaluates; see _array_api)."""
        return isinstance(self.kernel, str) and self.kernel in _cg.DEVICE_KERNELS

    def _fit_arrays(self, X, y, sample_weight, alpha, solver=None,
                    place: Placement | None = None):
        """Fit on validated arrays of ``place``'s compute space (NumPy, Dask
        rows, or a device namespace); fitted arrays in ``place``'s namespace."""
        place = Placement(backend=self.backend) if place is None else place
        kernel = self._kernel()
        n = X.shape[0]
        w = _check_sample_weight(sample_weight, n)
        solver = self.solver if solver is None else solver
        if solver == "auto":
            solver = "cholesky" if n <= CHOLESKY_MAX_SAMPLES else "cg"
        if solver == "cholesky" and place.space.on_device:  # n x n: on the host
            X, y = place.space.host(X), place.space.host(y)
            place = place.on_host()
        sp, backend = place.space, place.backend
        ravel = y.ndim == 1
        Y = sp.astype(y if y.ndim == 2 else sp.xp.reshape(y, (n, 1)), np_dtype(sp, X))
        if alpha.size not in (1, Y.shape[1]):
            raise ValueError(f"'alpha' has {alpha.size} values but y has {Y.shape[1]} targets; "
                             "give one alpha, or one per target")
        if solver != "cholesky" and not np.all(alpha > 0):
            raise ValueError(f"the {solver!r} solver needs 'alpha' > 0, got {self.alpha!r}")
        start = time.perf_counter()
        self.n_iter_ = 1  # one direct solve; the iterative solvers count their iterations
        fit_X = X
        if solver == "cholesky":
            coef = solve_dense(kernel(X), Y, alpha, w)
        elif solver == "cg":
            coef, self.n_iter_ = _cg.solve_cg(self, kernel, X, Y,
                                              alpha_groups(alpha, Y.shape[1]), w, sp,
                                              backend)
        else:
            fit_X, coef, self.n_iter_ = solve_falkon(self, kernel, X, Y, alpha, w, sp,
                                                     backend)
        coef = sp.astype(coef, np_dtype(sp, X))
        if ravel:
            coef = sp.xp.reshape(coef, (-1,))
        self.X_fit_, self.dual_coef_ = place.to_output(fit_X), place.to_output(coef)
        self._keep_device_copies(place, X_fit_=fit_X, dual_coef_=coef)
        self.solver_ = solver
        if self.verbose:
            where = "" if place.trivial else f" ({place.describe()})"
            print(f"[KernelRidge] {solver} solve of {n} points{where}: "
                  f"{self.n_iter_} iterations, {time.perf_counter() - start:.2f} s")
        return self

    def _fit_dask(self, X, y, sample_weight, alpha):
        """Fit on a Dask array X, which stays on the workers: "falkon" (the
        default here) moves landmark-sized vectors per iteration; "cg" moves
        one value per point per iteration and keeps X (a Dask array) as
        ``X_fit_``, so that predictions reduce over its chunks there."""
        solver = "falkon" if self.solver == "auto" else self.solver
        if solver == "cholesky":
            raise ValueError(
                "KernelRidge(solver='cholesky') cannot fit on a Dask array: it needs "
                "the n x n matrix in one process; use solver='falkon' (the default "
                "on Dask arrays) or 'cg'"
            )
        X = check_rows(X, "X", "KernelRidge.fit")
        y = np.asarray(to_numpy(y))
        if y.ndim not in (1, 2) or y.shape[0] != X.shape[0]:
            raise ValueError(f"KernelRidge.fit: 'y' must have shape ({X.shape[0]},) or "
                             f"({X.shape[0]}, n_targets), got {y.shape}")
        if y.dtype.kind not in "biuf" or not np.all(np.isfinite(y)):
            raise ValueError("KernelRidge.fit: 'y' must be numeric and finite")
        self.n_features_in_ = int(X.shape[1])
        self.__dict__.pop("feature_names_in_", None)
        # the in-memory code path, with X's rows on the workers
        return self._fit_arrays(X, y, to_numpy(sample_weight), alpha, solver)

    # -- solvers ----------------------------------------------------------
    def _working_data(self, X, sp=HOST):
        """The dtype Falkon evaluates the kernel in. Products accumulate in
        float64 either way; a `tol` tighter than float32 resolves upcasts."""
        if np_dtype(sp, X) == np.float32 and self.tol < _FLOAT32_TOL:
            return sp.astype(X, np.float64)
        return X

    def _cg_precisions(self, X, sp=HOST):
        """``(fast, exact)``: the rows of CG's kernel products, and those of the
        float64 products that refine its residual (None: no refinement)."""
        dtype = np_dtype(sp, X)
        if dtype == np.float64 and X.shape[0] <= MIXED_PRECISION_MIN_SAMPLES:
            return X, None
        fast = sp.astype(X, np.float32)
        if dtype == np.float32 and self.tol >= _FLOAT32_TOL:
            return fast, None
        return fast, sp.astype(X, np.float64)

    def _iterative_args(self):
        max_iter = 1000 if self.max_iter is None else self.max_iter
        return {"tol": self.tol, "max_iter": max_iter, "verbose": self.verbose}

    def _escalation_args(self, solver):
        """The arguments of :func:`._cg_escalation.solve_or_escalate` that
        name this estimator and its fixes."""
        args = self._iterative_args()
        other = "'falkon'" if solver == "cg" else "'cg'"
        return {"who": f"KernelRidge(solver={solver!r})", "tol": args["tol"],
                "max_iter": args["max_iter"],
                "fixes": f"Raise 'max_iter' (it is {args['max_iter']}), raise 'alpha' "
                         f"(it is {self.alpha!r}; a larger one conditions the system "
                         f"better), loosen 'tol' (it is {self.tol!r}), or use "
                         f"solver='cholesky' (a dense solve, n x n memory) or "
                         f"solver={other}."}

    @staticmethod
    def _dense_solve(kernel, Xk, b, a, wk):
        """``(K + a W^-1) c = b`` on the host rows ``Xk`` by a float64
        Cholesky (the "cholesky" solver's): CG's escalation, host or device."""
        K = kernel(np.asarray(Xk, dtype=np.float64))
        return solve_dense(K, np.asarray(b, dtype=np.float64), np.array([a]), wk)

    @rows_method
    def predict(self, X):
        """Predict with the fitted model: ``K(X, X_fit_) @ dual_coef_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            In the namespace and on the device of the training data (a CuPy
            array after a fit on CuPy arrays; see Notes).

        Returns
        -------
        y : array of shape (n_samples,) or (n_samples, n_targets)
            In X's namespace and on its device.
        """
        check_is_fitted(self)
        if self._delegating():
            return self.fallback_.predict(X)
        if is_dask_array(self.X_fit_):  # fitted on Dask by CG: reduce over its chunks
            return self._predict_dask_fit(X)
        fitted = fitted_placement(self, "X_fit_", who="KernelRidge.predict",
                                  device_ok=self._device_serves())
        place = check_same_place(self, X, fitted, "predict")
        sp = place.space
        if sp.on_device:
            X, _ = validate_on_device(self, place.to_space(X), reset=False, space=sp)
            Xf, coef = self._fitted_on(place, "X_fit_", "dual_coef_")
            return place.to_output(self._predict_reduction(X, Xf, coef, place))
        X = validate_numeric(self, host_array(X), reset=False,
                          dtype=[np.float64, np.float32], accept_sparse=("csr", "csc"))
        if is_sparse(X):  # a dense fit's features: scikit-learn's kernels take it
            X = X.toarray()
        Xf, coef = host_array(self.X_fit_), host_array(self.dual_coef_)
        if len(X) * len(Xf) <= _DENSE_PREDICT_MAX:
            return place.to_output(self._kernel()(X, Xf) @ coef)
        return place.to_output(self._predict_reduction(X, Xf, coef, place))

    def _predict_reduction(self, X, Xf, coef, place):
        """``K(X, X_fit) @ dual_coef`` as one reduction, in the namespace of
        ``place``'s space: NumPy on the host, the device's on a device (the
        arrays already there: one path for both)."""
        sp = place.space
        K = self._kernel().lazy(sp.engine(sp.astype(X, sp.np_dtype(Xf))), sp.engine(Xf))
        C = coef if coef.ndim == 2 else sp.xp.reshape(coef, (coef.shape[0], 1))
        out = sp.from_engine(K.matmul(sp.engine(C), backend=place.backend))
        return sp.xp.reshape(out, (X.shape[0],) + tuple(coef.shape[1:]))

    def _predict_dask_fit(self, X):
        dask_in = is_dask_array(X)
        if dask_in:
            X = check_rows(X, "X", "KernelRidge.predict", persist=False, finite=False)
        else:
            X = validate_numeric(self, X, reset=False, dtype=[np.float64, np.float32])
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but KernelRidge is expecting "
                             f"{self.n_features_in_} features as input")
        coef = self.dual_coef_
        K = self._kernel().lazy(X.astype(self.X_fit_.dtype), self.X_fit_)
        out = K.matmul(coef.reshape(len(coef), -1), backend=self.backend)
        out = out.reshape((X.shape[0],) + coef.shape[1:])
        return out if dask_in else to_numpy(out)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # by scikit-learn's KernelRidge (see Notes)
        tags.input_tags.pairwise = self.kernel == "precomputed"
        # NumPy, Array API arrays (array_api_dispatch) and CuPy: see Notes
        tags.array_api_support = True
        return tags

    def _expected_failed_checks(self) -> dict[str, str]:
        """The scikit-learn estimator checks this configuration is known to
        fail, with the reason (for ``parametrize_with_checks`` /
        ``check_estimator``'s ``expected_failed_checks``)."""
        # the check fits 15 rows: landmarks cover them all from 15 components
        if self.solver != "falkon" or (
                self.tol is not None and self.tol <= 1e-10
                and self.n_components is not None and self.n_components >= 15):
            return {}
        return {"check_sample_weight_equivalence_on_dense_data": (
            "Falkon is not invariant to repeating rows: its model lives on "
            "n_components landmarks drawn from the rows, and repeating a row (the "
            "check's integer weights) changes the draw, hence the model's span, "
            "where a weight does not; and its CG stops at `tol`, above the check's "
            "rtol=1e-7 by default. It passes when the landmarks cover every "
            "distinct row and tol <= 1e-10")}


def _check_alpha(alpha) -> np.ndarray:
    """``alpha`` (a float or an array-like, by the constraints) as a 1-D float64
    array of finite values >= 0, which the constraints cannot say."""
    a = np.atleast_1d(np.asarray(alpha, dtype=np.float64))
    if a.ndim != 1 or not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ValueError("KernelRidge: 'alpha' must be a float or a 1-D array (one value "
                         f"per target) of finite values >= 0; got {alpha!r}")
    return a


def _check_sample_weight(w, n: int) -> np.ndarray | None:
    """``w`` as a float64 array of shape (n,), finite and >= 0 (None stays None)."""
    if w is None:
        return None
    if isinstance(w, Real):
        w = np.full(n, float(w))
    w = np.asarray(w, dtype=np.float64)
    if w.shape != (n,):
        raise ValueError(f"'sample_weight' must have shape ({n},), got {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("'sample_weight' must be finite and >= 0")
    if n and not np.any(w > 0):
        raise ValueError("'sample_weight' is zero everywhere: at least one weight must be > 0")
    return w
