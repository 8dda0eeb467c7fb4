"""Estimators on Array API arrays: where an input lives, where the work runs,
and the way back.

Design
------
**Namespace and device.** :func:`placement` looks at ``X`` once per call
(``fit``, ``predict``, ``transform``) and returns a :class:`Placement`: the
input's namespace and device (where outputs and fitted attributes go) and a
:class:`Space` (where the arithmetic runs). The namespace comes from
scikit-learn's vendored copy of array-api-compat
(``sklearn.externals.array_api_compat``), the library scikit-learn's own
(private) ``sklearn.utils._array_api.get_namespace_and_device`` wraps: our
outputs then carry the very namespace objects scikit-learn's checks compare
with (``array_api_compat.torch`` for torch tensors, ``array_api_strict``
itself). We do not import scikit-learn's private module. Whether an array is
in host memory is read from its ``__dlpack_device__()``, the one thing every
Array API library exposes alike.

**What runs where.**

- NumPy arrays, lists, DataFrames, sparse matrices (and, without
  ``sklearn.set_config(array_api_dispatch=True)``, any array other than
  CuPy's, converted by ``np.asarray`` as scikit-learn does): the NumPy path
  of before; every conversion here is the identity.
- With ``array_api_dispatch``, Array API arrays in host memory (DLPack device
  ``kDLCPU``: CPU torch tensors, array-api-strict on any of its devices): one
  zero-copy ``np.from_dlpack`` view per call, the NumPy path's computation on
  it, outputs and fitted attributes converted back into the input's namespace
  on its device.
- CuPy arrays (always: every LazyTensor reduction takes them), and with
  ``array_api_dispatch`` any array on a CUDA device (a torch CUDA tensor
  becomes a CuPy array through DLPack, zero-copy), with ``backend`` "auto" or
  "cuda": the engine serves them directly. The data stay on the device for
  the whole fit: reductions get CuPy arrays, the solvers' n-sized vector
  arithmetic runs in the array's namespace (CuPy), dense kernel blocks are
  computed there (:mod:`kerneltools.estimators._shared._xp_kernels`); only
  landmark-sized things (an ``m x m`` Cholesky or SVD, CG coefficients,
  Falkon's ``m``-vectors) are copied to the host and back.
- A host array with ``backend="cuda"``: copied to the device once per fit
  (not per reduction); predictions reuse device copies of the fitted arrays,
  cached on the estimator (never pickled), and outputs come back as NumPy.
- Device arrays with ``backend`` "cpu" or "numpy", or with a kernel that is
  not one of scikit-learn's named kernels (the device path evaluates dense
  blocks of the named kernels only): copied to the host once per call,
  computed there, outputs moved back to the input's device.
- What the engine does not serve at all (sparse input, ``"precomputed"``,
  callables of arrays) still goes to scikit-learn's estimator
  (:mod:`._fallback`), in the input's namespace when scikit-learn supports it.

**Converted once, at the edge.** An estimator converts its inputs once
where they enter (:meth:`Placement.to_space` and validation in ``fit``,
``predict``, ``transform``) and its outputs once where they leave
(:meth:`Placement.to_output`); in between, its solver is one code path
written with ``sp.xp`` (NumPy's module on the host), whatever the
namespace. :meth:`Space.host` and :meth:`Space.put` are for what must cross
on a device (``m x m`` factorisations on the host, hyperparameter-sized
results); a solver calls them per fit or per hyperparameter value, not per
iteration, except where a host-only tool sits inside the iteration (a
triangular solve, which the Array API lacks; each such place says so).

**Mixed inputs.** ``y`` and ``sample_weight`` follow ``X`` (scikit-learn's
rule, which its ``check_array_api_mixed_inputs`` checks): they are moved to
where ``X`` is computed. The input of ``predict`` or ``transform`` must be in
the namespace and on the device of ``fit``'s: :func:`check_same_place` raises
a ``ValueError`` naming the method and both namespaces, as scikit-learn's
``check_same_namespace`` does.

**Testing without a GPU.** :func:`simulated_device` makes one Array API
namespace and device (array-api-strict's ``device1`` in the tests) stand for
CuPy: the device path then runs unchanged, in that namespace, with the
reductions fed NumPy views of its arrays. array-api-strict rejects NumPy
arrays and arrays of another device in its arithmetic, so a host array
leaking into the device path fails there, as it would cost a copy (or fail)
on a GPU.
"""

from __future__ import annotations

import contextlib
import threading
from numbers import Integral

import numpy as np
import sklearn

from ..config import check_backend
from ..dask import is_dask_array

__all__ = ["DeviceCopies", "DeviceScore", "HOST", "Placement", "Space", "check_same_place",
           "fitted_placement", "host_array", "is_cupy_array", "placement",
           "r2_score_xp", "simulated_device", "to_cupy", "validate_on_device"]

#: DLPack device types (dlpack.h): host memory, and CUDA memory.
_DL_HOST = (1, 3)  # kDLCPU, kDLCUDAHost (pinned host memory)
_DL_CUDA = (2, 13)  # kDLCUDA, kDLCUDAManaged

_local = threading.local()


def compat():
    """array-api-compat, as scikit-learn vendors it."""
    from sklearn.externals import array_api_compat  # noqa: PLC0415 - sklearn's import

    return array_api_compat


def is_cupy_array(a) -> bool:
    """True for a CuPy ndarray, without importing CuPy."""
    return (type(a).__module__.startswith("cupy")
            and hasattr(a, "__cuda_array_interface__"))


def _dlpack_type(a):
    try:
        return int(a.__dlpack_device__()[0])
    except Exception:  # noqa: BLE001 - no DLPack: not an Array API array
        return None


class Space:
    """Where an estimator's arithmetic runs: NumPy on the host, or an Array
    API namespace on a device (CuPy's, or the simulated one of the tests).

    ``engine`` / ``from_engine`` convert to and from what the LazyTensor
    reductions take and return (NumPy or CuPy arrays); ``host`` / ``put``
    move small arrays (landmark-sized) to the host and back.
    """

    def __init__(self, xp, device=None, kind="host"):
        self.xp, self.device, self.kind = xp, device, kind

    def __repr__(self):
        where = "" if self.device is None else f" on {self.device}"
        return f"Space({self.kind}: {getattr(self.xp, '__name__', self.xp)}{where})"

    @property
    def on_device(self) -> bool:
        return self.kind != "host"

    def dtype(self, dt):
        """The namespace's dtype of the NumPy dtype ``dt``."""
        return np.dtype(dt) if self.kind == "host" else getattr(self.xp, np.dtype(dt).name)

    def np_dtype(self, a) -> np.dtype:
        """``a``'s dtype as a NumPy dtype."""
        if self.kind != "simulated":
            return np.dtype(a.dtype)
        for name in ("float64", "float32", "float16", "int64", "int32", "int16", "int8",
                     "uint64", "uint32", "uint16", "uint8", "bool"):
            if getattr(self.xp, name, None) == a.dtype:
                return np.dtype(name)
        return np.dtype(object)

    def astype(self, a, dt):
        if self.kind == "host":
            return a.astype(dt, copy=False)
        return self.xp.astype(a, self.dtype(dt), copy=False)

    def engine(self, a):
        """``a`` as a reduction takes it (the simulated device: a NumPy view)."""
        return np.from_dlpack(a) if self.kind == "simulated" else a

    def from_engine(self, a):
        """A reduction's output as an array of this space."""
        if self.kind == "simulated":
            return self.xp.asarray(np.asarray(a), device=self.device)
        return a

    def host(self, a) -> np.ndarray:
        """``a`` in host memory, as NumPy (a copy off the device)."""
        if self.kind == "host":
            return np.asarray(a)
        if self.kind == "cupy":
            return a.get()
        return np.array(np.from_dlpack(a))

    def put(self, a, dtype=None):
        """A host array (or a scalar) as an array of this space."""
        a = np.asarray(a, dtype=dtype)
        if self.kind == "host":
            return a
        return self.xp.asarray(a, device=self.device)

    def take(self, a, idx, axis=0):
        """``a``'s rows (or columns) ``idx``, host integer indices."""
        if self.kind == "host":
            return np.take(a, idx, axis=axis)
        return self.xp.take(a, self.put(np.asarray(idx, dtype=np.int64)), axis=axis)


#: The NumPy path.
HOST = Space(np, None, "host")


class Placement:
    """Where an input lives (``xp``, ``device``: None for NumPy) and where it
    is computed (``space``); :meth:`to_space` and :meth:`to_output` move
    arrays between the two."""

    def __init__(self, xp=None, device=None, space=HOST, backend=None):
        self.xp, self.device, self.space, self.backend = xp, device, space, backend

    def __repr__(self):
        name = "numpy" if self.xp is None else self.xp.__name__
        return f"Placement({name}, device={self.device}, computed in {self.space})"

    @property
    def trivial(self) -> bool:
        """NumPy in, NumPy computed, NumPy out: the path of before."""
        return self.xp is None and not self.space.on_device

    def describe(self) -> str:
        name = "NumPy" if self.xp is None else self.xp.__name__
        where = "the host (NumPy)" if not self.space.on_device else repr(self.space)
        dev = "" if self.device is None else f" on {self.device}"
        return f"{name} arrays{dev}, computed on {where}"

    def on_host(self) -> Placement:
        """The same input, computed on the host (one copy each way)."""
        return Placement(self.xp, self.device, HOST, _host_backend(self.backend))

    def to_space(self, a):
        """An input-side array (of any namespace: ``y`` follows ``X``) as an
        array of the compute space; None stays None."""
        if a is None:
            return None
        sp = self.space
        if sp.kind == "host":
            a = host_array(a)
            return a if isinstance(a, np.ndarray) or is_dask_array(a) else np.asarray(a)
        if sp.kind == "cupy":
            return to_cupy(a)
        if _in_namespace(a, sp.xp, sp.device):
            return a
        return sp.xp.asarray(np.asarray(host_array(a)), device=sp.device)

    def to_output(self, a):
        """An array of the compute space in the input's namespace and device."""
        sp = self.space
        if self.xp is None:  # NumPy out
            return sp.host(a) if sp.on_device else a
        if sp.kind == "simulated" or (sp.kind == "cupy" and _is_cupy_ns(self.xp)):
            return a
        if sp.kind == "cupy":  # a torch CUDA tensor in: zero-copy back through DLPack
            return self.xp.from_dlpack(a)
        if _is_cupy_ns(self.xp):  # computed on the host for a CuPy input
            return self.xp.asarray(a)
        return self.xp.asarray(a, device=self.device)


def host_array(a):
    """``a`` as NumPy when it is an array of another library: a zero-copy
    view of a host Array API array, a copy of a device array; anything else
    (NumPy, lists, DataFrames, sparse matrices, scalars, None) unchanged, for
    scikit-learn's validation to read."""
    if a is None or isinstance(a, np.ndarray) or is_dask_array(a):
        return a
    if is_cupy_array(a):
        return a.get()
    kind = _dlpack_type(a)
    if kind in _DL_HOST:
        try:
            return np.from_dlpack(a)
        except (BufferError, TypeError, RuntimeError):  # read-only, requires grad, ...
            return np.asarray(a)
    if kind in _DL_CUDA:  # a torch CUDA tensor and the like
        return np.from_dlpack(compat().to_device(a, "cpu"))
    return a


def to_cupy(a):
    """``a`` as a CuPy array (zero-copy from a CUDA array, else a copy)."""
    import cupy  # noqa: PLC0415 - only where a GPU computes

    if is_cupy_array(a):
        return a
    if _dlpack_type(a) in _DL_CUDA:
        return cupy.from_dlpack(a)
    return cupy.asarray(host_array(a))


def _is_cupy_ns(xp) -> bool:
    return getattr(xp, "__name__", "").split(".")[-1] == "cupy"


def _in_namespace(a, xp, device) -> bool:
    try:
        return compat().array_namespace(a) is xp and compat().device(a) == device
    except TypeError:
        return False


def _host_backend(backend):
    return None if backend == "cuda" else backend


# -- deciding ----------------------------------------------------------------
def _simulation():
    return getattr(_local, "simulated", None)


@contextlib.contextmanager
def simulated_device(xp, device):
    """Make arrays of namespace ``xp`` on ``device`` stand for CuPy arrays in
    this thread (tests without a GPU; see the module's docstring): they are
    computed in their namespace, with ``backend="cuda"`` standing for the
    host's default backend, and host arrays with ``backend="cuda"`` are
    moved there."""
    old = _simulation()
    _local.simulated = (xp, device)
    try:
        yield
    finally:
        _local.simulated = old


def _device_space(kind_hint):
    sim = _simulation()
    if sim is not None:
        return Space(sim[0], sim[1], "simulated")
    if kind_hint == "cupy-ok":
        import cupy  # noqa: PLC0415

        cp = compat().array_namespace(cupy.empty(0))
        return Space(cp, None, "cupy")
    return None


def _cupy_usable() -> bool:
    try:
        import cupy  # noqa: PLC0415
    except ImportError:
        return False
    return bool(cupy.is_available())


def _where(X, dispatch: bool):
    """``(where, xp, device)``: "numpy" (xp None), "host" (an Array API array
    in host memory), "device" (CuPy, or on a CUDA device) or "other"."""
    sim = _simulation()
    if sim is not None and _in_namespace(X, *sim):
        return "device", sim[0], sim[1]
    if is_cupy_array(X):
        return "device", compat().array_namespace(X), compat().device(X)
    if (dispatch and not isinstance(X, np.ndarray) and not is_dask_array(X)
            and _dlpack_type(X) is not None):
        try:
            xp, dev = compat().array_namespace(X), compat().device(X)
        except TypeError:  # DLPack but no namespace: converted as NumPy
            return "numpy", None, None
        kind = _dlpack_type(X)
        return ("host" if kind in _DL_HOST else "device" if kind in _DL_CUDA
                else "other"), xp, dev
    return "numpy", None, None


def placement(X, *, backend, who: str, device_ok: bool = True) -> Placement:
    """Where ``X`` lives and where an estimator computes it (module docstring).

    ``backend`` is the estimator's; ``who`` names it in errors
    (``"KernelRidge.fit"``); ``device_ok`` says whether the device path
    serves this configuration (else a device array is computed on the host).
    Raises :class:`~kerneltools.exceptions.BackendUnavailableError` for a
    backend that cannot run here.
    """
    sim = _simulation()
    name = backend
    if sim is None or backend != "cuda":
        name = check_backend(backend, who.split(".")[0])
    where, xp, dev = _where(X, sklearn.get_config()["array_api_dispatch"])
    to_device = device_ok and (
        (where == "device" and name in ("auto", "cuda"))
        or (where in ("numpy", "host") and name == "cuda"))
    if to_device:
        space = _device_space("cupy-ok" if sim is not None or _cupy_usable() else None)
        if space is not None:
            run = _host_backend(backend) if space.kind == "simulated" else backend
            return Placement(xp, dev, space, run)
    return Placement(xp, dev, HOST, _host_backend(backend) if where == "device" else backend)


def fitted_placement(est, attribute: str, *, who: str, device_ok: bool = True):
    """The placement of ``est``'s fit, read from its fitted ``attribute``
    (its namespace and device; the estimator's backend)."""
    return placement(getattr(est, attribute), backend=est.backend, who=who,
                     device_ok=device_ok)


def check_same_place(est, X, fitted: Placement, method: str) -> Placement:
    """``fitted`` (the fit's placement), after checking that ``X``, the input
    of ``est.<method>``, is in the fit's namespace and on its device;
    ValueError otherwise, worded as scikit-learn's ``check_same_namespace``.
    A NumPy fit takes array-likes (lists, DataFrames, sparse matrices)."""
    where, xp, dev = _where(X, True)
    if where == "numpy" or (fitted.xp is None and not _dispatch_on()
                            and not is_cupy_array(X) and where != "device"):
        xp, dev = None, None  # converted by np.asarray, as scikit-learn does
    if fitted.xp is xp and (xp is None or fitted.device == dev):
        return fitted
    name = type(est).__name__
    a = "numpy" if fitted.xp is None else fitted.xp.__name__
    b = "numpy" if xp is None else xp.__name__
    msg = (f"Array namespaces used during fit ({a}) and {method} ({b}) differ."
           if a != b else
           f"Devices used during fit ({fitted.device}) and {method} ({dev}) differ.")
    raise ValueError(
        f"Inputs passed to {name}.{method}() must use the same namespace and the same "
        f"device as those passed to fit(). {msg} Move 'X' to the namespace and device "
        "of the fit, or fit again on data where X is.")


def _dispatch_on() -> bool:
    return bool(sklearn.get_config()["array_api_dispatch"])


# -- validation on the device --------------------------------------------------
def validate_on_device(est, X, y=None, *, reset: bool, space: Space, dtype=None,
                       y_numeric=False, who=None):
    """``(X, y)`` checked as ``sklearn.utils.validation.validate_data`` checks
    them, in ``space`` (a device namespace, where scikit-learn's checks would
    copy to the host): 2-D, non-empty, real, finite; integers and booleans
    become float64; ``y`` numeric, finite, of X's length, cast to X's dtype
    when ``y_numeric``. Sets or checks ``n_features_in_`` (and drops
    ``feature_names_in_``: device arrays have no column names)."""
    xp = space.xp
    name = who or type(est).__name__
    X = _check_device_array(X, "X", space, name, ndim=2)
    if dtype is not None:
        X = space.astype(X, dtype)
    n, d = X.shape
    if reset:
        est.n_features_in_ = int(d)
        est.__dict__.pop("feature_names_in_", None)
    elif d != est.n_features_in_:
        raise ValueError(f"X has {d} features, but {type(est).__name__} is expecting "
                         f"{est.n_features_in_} features as input.")
    if y is None:
        return X, None
    y = _check_device_array(y, "y", space, name, ndim=(1, 2))
    if y.shape[0] != n:
        raise ValueError("Found input variables with inconsistent numbers of samples: "
                         f"[{n}, {y.shape[0]}]")
    if y_numeric:
        y = xp.astype(y, X.dtype, copy=False) if space.kind != "host" else y.astype(X.dtype)
    return X, y


def _check_device_array(a, what, space, who, ndim):
    xp = space.xp
    kind = space.np_dtype(a).kind
    if kind == "c":
        raise ValueError(f"Complex data not supported: '{what}' has a complex dtype")
    if kind not in "biuf":
        raise ValueError(f"{who}: '{what}' must be numeric, got dtype {a.dtype}")
    ndims = (ndim,) if isinstance(ndim, Integral) else ndim
    if a.ndim not in ndims:
        raise ValueError(f"Expected {' or '.join(f'{k}D' for k in ndims)} array for "
                         f"'{what}', got {a.ndim}D array of shape {tuple(a.shape)} "
                         "instead.")
    if a.shape[0] < 1 or (a.ndim == 2 and what == "X" and a.shape[1] < 1):
        raise ValueError(f"Found array with {a.shape[0]} sample(s) and shape "
                         f"{tuple(a.shape)} while a minimum of 1 is required by {who} "
                         f"('{what}').")
    if kind in "biu":
        a = xp.astype(a, space.dtype(np.float64))
    if not bool(xp.all(xp.isfinite(a))):
        bad = "NaN" if bool(xp.any(xp.isnan(a))) else "infinity"
        raise ValueError(f"Input {what} contains {bad}.")
    return a


class DeviceCopies:
    """Device copies of an estimator's fitted host arrays (a NumPy fit with
    ``backend="cuda"``: computed on the device, attributes NumPy), made once
    and reused by every later call; never pickled (a device handle)."""

    def _drop_device_copies(self) -> None:
        self.__dict__.pop("_device_copies", None)

    def _keep_device_copies(self, place: Placement, **arrays) -> None:
        if place.xp is None and place.space.on_device:
            self._device_copies = dict(arrays)

    def _fitted_on(self, place: Placement, *names):
        """The fitted arrays ``names`` as arrays of ``place``'s compute space."""
        if not (place.xp is None and place.space.on_device):
            return [place.to_space(getattr(self, n)) for n in names]
        copies = self.__dict__.setdefault("_device_copies", {})
        for n in names:
            if n not in copies:
                copies[n] = place.to_space(getattr(self, n))
        return [copies[n] for n in names]

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_device_copies", None)
        return state


class DeviceScore:
    """``score`` of a regressor whose ``predict`` returns CuPy arrays for CuPy
    inputs: R^2 computed on the GPU without ``array_api_dispatch`` too (where
    scikit-learn's ``r2_score`` would convert them with ``np.asarray`` and
    fail); scikit-learn's ``RegressorMixin.score`` otherwise. Put it before
    ``RegressorMixin`` in the bases."""

    def score(self, X, y, sample_weight=None):
        """R^2 of :meth:`predict` on ``X`` against ``y``, as scikit-learn's
        ``RegressorMixin.score``; on CuPy arrays computed on the GPU (also
        without ``array_api_dispatch``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The test samples.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            The true values for ``X``.
        sample_weight : array-like of shape (n_samples,), default=None
            The sample weights.

        Returns
        -------
        score : float
            The coefficient of determination R^2 of ``self.predict(X)``.
        """
        if is_cupy_array(X) and not sklearn.get_config()["array_api_dispatch"]:
            pred = self.predict(X)
            return r2_score_xp(to_cupy(y), pred, host_array(sample_weight))
        return super().score(X, y, sample_weight=sample_weight)


def r2_score_xp(y, pred, sample_weight=None):
    """scikit-learn's ``r2_score`` (``multioutput="uniform_average"``,
    ``force_finite=True``) computed in the arrays' namespace, on their device:
    for CuPy arrays without ``array_api_dispatch``, where scikit-learn's
    would convert them with ``np.asarray`` (and fail)."""
    xp = compat().array_namespace(y, pred)
    y = xp.astype(y, pred.dtype)
    if y.ndim == 1:
        y, pred = xp.reshape(y, (-1, 1)), xp.reshape(pred, (-1, 1))
    w = 1.0 if sample_weight is None else xp.reshape(
        xp.asarray(sample_weight, dtype=pred.dtype, device=compat().device(pred)), (-1, 1))
    num = xp.sum(w * (y - pred) ** 2, axis=0)
    mean = xp.sum(w * y, axis=0) / (xp.sum(w + 0 * y, axis=0))
    den = xp.sum(w * (y - mean) ** 2, axis=0)
    ok = (num != 0) & (den != 0)
    # a constant y: 1 when predicted exactly, else 0 (scikit-learn's force_finite)
    flat = xp.astype(num == 0, num.dtype)
    scores = xp.where(ok, 1 - num / xp.where(ok, den, 1.0), flat)
    return float(xp.mean(scores))
