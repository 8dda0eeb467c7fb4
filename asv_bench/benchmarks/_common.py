"""What the asv benchmark modules share: timing settings, backends, skips.

asv conventions used throughout:

- ``NotImplementedError`` raised in ``setup`` skips one parameter combination
  (asv records it as "n/a"): a backend that cannot run here, a library that
  is not installed, a size where a slow system is not run.
- The first value of every parameter is the cheap one (small N, float32,
  the "cpu" backend): ``tests/test_asv_benchmarks.py`` runs each benchmark
  once with the first values, as a smoke test.
- ``setup`` makes the first call itself (kerneltools and pykeops compile a
  formula on its first call), so that compilation is never timed.

Names starting with ``_`` are not benchmarks: asv skips them when it collects
the classes and functions of a module.
"""

from __future__ import annotations

import numpy as np

DTYPES = ("float32", "float64")
#: The backends a kerneltools benchmark runs on; "numpy" (the tiled
#: reference) only at the small size, "cuda" only where a GPU is usable.
BACKENDS = ("cpu", "numpy", "cuda")


class _Timed:
    """asv's sampling settings for calls of 1 ms to a few seconds."""

    number = 1  # each sample is one call
    repeat = (2, 5, 20.0)  # at least 2 and at most 5 samples, 20 s per benchmark
    rounds = 1
    warmup_time = 0.0  # setup makes the warm-up call itself
    timeout = 300


def require_backend(backend: str) -> None:
    """Raise NotImplementedError (asv: skip) when ``backend`` cannot run here.

    One tiny reduction on ``backend``: kerneltools raises
    ``BackendUnavailableError`` with the reason (no GPU, no C compiler).
    """
    if backend == "numpy":
        return
    import kerneltools as kt

    x = np.zeros((1, 1), dtype=np.float32)
    try:
        kt.Vi(x).sqdist(kt.Vj(x)).sum(axis=1, backend=backend)
    except kt.BackendUnavailableError as exc:
        raise NotImplementedError(str(exc)) from None


def require_small(backend: str, n: int, small: int) -> None:
    """The NumPy reference backend runs only at the small size."""
    if backend == "numpy" and n > small:
        raise NotImplementedError(f"the numpy reference backend only at N = {small}")


def require_module(name: str):
    """Import ``name``, or raise NotImplementedError (asv: skip) saying why not."""
    import importlib

    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 (torch, pykeops fail in many ways)
        raise NotImplementedError(
            f"{name} is not usable: {type(exc).__name__}: {exc}"
        ) from None


def to_device(backend: str, data: dict) -> dict:
    """``data`` with its arrays moved to the GPU (CuPy) for ``backend='cuda'``."""
    if backend != "cuda":
        return data
    import cupy

    return {
        k: cupy.asarray(v) if isinstance(v, np.ndarray) else v for k, v in data.items()
    }


def synchronized(backend: str, run):
    """``run`` followed by a device synchronisation for ``backend='cuda'``."""
    if backend != "cuda":
        return run
    import cupy

    def call():
        out = run()
        cupy.cuda.Device().synchronize()
        return out

    return call


class _Fitted(_Timed):
    """An estimator fitted in ``setup``; no benchmark of its own.

    Subclasses set ``params``, ``param_names`` and a ``setup`` that calls
    :meth:`_prepare`. ``query`` names the method that :meth:`_query` calls on
    the fitted model with ``X_query`` (``predict``, ``transform``, ...).
    """

    query = "predict"

    def _prepare(self, make_model, X, y=None, X_query=None) -> None:
        self.make_model, self.X, self.y = make_model, X, y
        self.X_query = X if X_query is None else X_query
        # The warm-up: the first fit and query compile the formulas.
        self.model = self._fit()
        self._query()

    def _fit(self):
        model = self.make_model()
        return model.fit(self.X) if self.y is None else model.fit(self.X, self.y)

    def _query(self):
        return getattr(self.model, self.query)(self.X_query)


class _Fit(_Fitted):
    """``fit``."""

    def time_fit(self, *args):
        self._fit()

    def peakmem_fit(self, *args):
        self._fit()


class _Estimator(_Fit):
    """``fit`` and ``predict``."""

    def time_predict(self, *args):
        self._query()

    def peakmem_predict(self, *args):
        self._query()


class _Transformer(_Fit):
    """``fit`` and ``transform``."""

    query = "transform"

    def time_transform(self, *args):
        self._query()

    def peakmem_transform(self, *args):
        self._query()
