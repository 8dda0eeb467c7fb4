"""Dask support for estimators: methods mapped over row chunks, row access.

Optional: ``pip install "kerneltools[dask]"``; nothing here imports Dask until
a Dask array is met. Reductions of LazyTensors over Dask arrays are built by
the engine (:mod:`kerneltools.backend._dask`); this module holds what an
estimator needs on top, so that an estimator written for NumPy arrays takes
Dask arrays too:

- :func:`rows_method` decorates a method ``(self, X, ...)`` whose rows are
  independent (``predict``, ``transform``, ``kneighbors``): a Dask ``X`` maps
  it over its row chunks (:func:`map_rows`), Dask in, Dask out;
- :class:`Rows` gives ``len`` and ``rows[idx]`` of a Dask array (samples of
  rows without gathering the rest); :func:`check_rows` validates and
  persists a Dask array of samples; :func:`to_numpy` computes per-sample
  vectors; :func:`is_dask_array` tests without importing Dask.
"""

from __future__ import annotations

import operator
from itertools import count

import numpy as np

from .backend._dask import check_dask_array, current_client, is_dask_array, require_dask
from .config import config_context, get_config

__all__ = ["is_dask_array", "map_rows", "rows_method", "Rows", "check_rows", "to_numpy"]

_names = count()


# -- estimators ---------------------------------------------------------------
#: The estimators scattered lately, by content: their futures stay alive, so
#: the workers keep their copies (and what those cache at their first call,
#: such as the cells of a pruned k-NN search) from one call to the next.
_SCATTERED: dict = {}
_SCATTERED_MAX = 8


def _shared(obj):
    """A graph key holding ``obj`` once (scattered to every worker under a
    ``distributed`` client, reused while its content is unchanged), and the
    graph that defines it."""
    client = current_client()
    if client is not None:
        from dask.base import tokenize

        token = (client.id, tokenize(obj))
        future = _SCATTERED.pop(token, None)
        if future is None or future.status != "finished":
            future = client.scatter(obj, broadcast=True, hash=False)
        _SCATTERED[token] = future  # most recent last
        while len(_SCATTERED) > _SCATTERED_MAX:
            _SCATTERED.pop(next(iter(_SCATTERED)))
        return future, {}
    key = f"kt-shared-{next(_names)}"
    return key, {key: obj}


def _unwrapped(est, name):
    import inspect

    return inspect.unwrap(getattr(type(est), name))


def _call_rows(name, est, block, args, kwargs, config):
    # in the caller's configuration: the task runs in another thread or process
    with config_context(**config):
        out = _unwrapped(est, name)(est, block, *args, **kwargs)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def map_rows(est, name, X, args=(), kwargs=None):
    """``est.name(X, ...)`` over the row chunks of the Dask array ``X``.

    The estimator is one key of the graph (scattered once per worker under a
    ``distributed`` client); each task runs the in-memory method on one
    chunk of rows. The outputs' shapes beyond the first axis and their dtypes
    come from a run on one row of zeros, so nothing of ``X`` is computed
    here.

    Parameters
    ----------
    est : estimator
        A fitted estimator.
    name : str
        The name of its method, say ``"predict"``.
    X : dask.array.Array of shape (n_samples, n_features)
        The samples, in chunks of rows.
    args : tuple, default=()
        Further positional arguments of the method.
    kwargs : dict, default=None
        Its keyword arguments.

    Returns
    -------
    dask.array.Array or tuple or list of dask.array.Array
        The method's outputs, in its structure, chunked as ``X``'s rows.

    Examples
    --------
    >>> import numpy as np
    >>> import dask.array as da
    >>> X = da.from_array(np.arange(8.0).reshape(4, 2), chunks=(2, 2))
    >>> from sklearn.preprocessing import StandardScaler
    >>> from kerneltools.dask import map_rows
    >>> est = StandardScaler().fit(np.arange(8.0).reshape(4, 2))
    >>> Y = map_rows(est, "transform", X)
    >>> type(Y).__name__, np.round(Y.compute()[:, 0], 3)
    ('Array', array([-1.342, -0.447,  0.447,  1.342]))
    """
    da = require_dask()
    from dask.highlevelgraph import HighLevelGraph

    kwargs = dict(kwargs or {})
    X = check_dask_array(X, "X")
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D Dask array (n_samples, n_features), got shape {X.shape}")
    X = X.rechunk({1: -1})
    method = _unwrapped(est, name)
    probe = method(est, np.zeros((1, X.shape[1]), dtype=X.dtype), *args, **kwargs)
    structure = type(probe) if isinstance(probe, (tuple, list)) else None
    probes = tuple(probe) if structure else (probe,)
    tag = f"{next(_names)}-{name}"
    shared, layer = _shared(est)
    rows = f"kt-rows-{tag}"
    config = get_config()
    for a in range(len(X.chunks[0])):
        layer[(rows, a)] = (_call_rows, name, shared, (X.name, a, 0), args, kwargs,
                            config)
    outs = []
    for k, p in enumerate(probes):
        p = np.asarray(p)
        out = f"kt-{name}-{k}-{tag}"
        for a in range(len(X.chunks[0])):
            layer[(out, a) + (0,) * (p.ndim - 1)] = (operator.getitem, (rows, a), k)
        graph = HighLevelGraph.from_collections(out, dict(layer), dependencies=[X])
        chunks = (X.chunks[0],) + tuple((s,) for s in p.shape[1:])
        outs.append(da.Array(graph, out, chunks=chunks, dtype=p.dtype))
    if structure is None:
        return outs[0]
    return structure(outs)


def _holds_dask(est) -> bool:
    """Whether a fitted estimator keeps Dask arrays (then its methods reduce
    over their chunks themselves rather than being mapped over X's rows)."""
    return any(is_dask_array(v) for v in vars(est).values())


def rows_method(method=None, *, coupled=()):
    """Map an estimator method over the row chunks of a Dask array.

    Decorates a method ``(self, X, ...)`` so that a Dask array ``X`` maps it
    over its row chunks (:func:`map_rows`): Dask in, Dask out. Other inputs
    go to the method itself.

    Parameters
    ----------
    method : callable, default=None
        The method (None: ``rows_method(coupled=...)`` returns the
        decorator).
    coupled : tuple of str, default=()
        Names of the method's arguments that, when true, ask for an output
        relating different rows (a joint covariance): refused on Dask arrays,
        whose chunks are processed apart.

    Returns
    -------
    callable
        The decorated method (or the decorator).

    Examples
    --------
    >>> import numpy as np
    >>> import dask.array as da
    >>> X = da.from_array(np.arange(8.0).reshape(4, 2), chunks=(2, 2))
    >>> from kerneltools.dask import rows_method
    >>> class Doubler:
    ...     @rows_method
    ...     def predict(self, X):
    ...         return 2 * np.asarray(X)[:, 0]
    >>> Doubler().predict(X).compute()
    array([ 0.,  4.,  8., 12.])
    """
    if method is None:
        return lambda m: rows_method(m, coupled=coupled)
    import functools
    import inspect

    signature = inspect.signature(method)

    @functools.wraps(method)
    def wrapper(self, X=None, *args, **kwargs):
        if is_dask_array(X) and not _holds_dask(self):
            if coupled:
                bound = signature.bind(self, X, *args, **kwargs)
                bound.apply_defaults()
                for name in coupled:
                    if bound.arguments.get(name):
                        raise ValueError(
                            f"{type(self).__name__}.{method.__name__}({name}=True) relates "
                            "every pair of rows; it is not available on a Dask array "
                            "(compute X, or ask for per-row outputs)"
                        )
            return map_rows(self, method.__name__, X, args, kwargs)
        return method(self, X, *args, **kwargs)

    return wrapper


class Rows:
    """Row access to a Dask array for code written for NumPy.

    ``len`` and ``rows[idx]`` (computed), so that a sample of rows
    (landmarks, a pool) can be taken without gathering the rest.

    Parameters
    ----------
    X : dask.array.Array
        The array.

    Examples
    --------
    >>> import numpy as np
    >>> import dask.array as da
    >>> X = da.from_array(np.arange(8.0).reshape(4, 2), chunks=(2, 2))
    >>> from kerneltools.dask import Rows
    >>> rows = Rows(X)
    >>> len(rows), rows[[3, 1]]
    (4, array([[6., 7.],
           [2., 3.]]))
    """

    def __init__(self, X):
        self.X = X

    def __len__(self):
        return int(self.X.shape[0])

    def __getitem__(self, idx):
        idx = np.asarray(idx)
        if idx.dtype.kind == "b":
            idx = np.flatnonzero(idx)
        order = np.argsort(idx, kind="stable")
        out = np.empty((len(idx),) + tuple(self.X.shape[1:]), dtype=self.X.dtype)
        out[order] = self.X[idx[order]].compute()
        return out


def check_rows(X, name: str, caller: str, *, persist: bool = True, finite: bool = True):
    """Validate a Dask array of samples for an estimator.

    2-D, float32 or float64 (other numbers become float64), finite, whole
    along its features; persisted (kept in the workers' memory) for the
    iterations to come. Computes one pass over the data (the finiteness
    check).

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_features)
        The samples.
    name : str
        The argument's name, for the error messages.
    caller : str
        The caller's name, for the error messages.
    persist : bool, default=True
        Persist the result.
    finite : bool, default=True
        Check that every value is finite.

    Returns
    -------
    dask.array.Array of shape (n_samples, n_features)
        The validated samples.

    Examples
    --------
    >>> import dask.array as da
    >>> from kerneltools.dask import check_rows
    >>> X = da.ones((4, 2), chunks=2, dtype=int)
    >>> check_rows(X, "X", "fit", persist=False).dtype
    dtype('float64')
    """
    da = require_dask()
    X = check_dask_array(X, f"{caller}: '{name}'")
    if X.ndim != 2:
        raise ValueError(f"{caller}: '{name}' must be a 2-D array (n_samples, n_features), "
                         f"got shape {X.shape}")
    if X.dtype.kind not in "biuf":
        raise TypeError(f"{caller}: '{name}' must be numeric, got dtype {X.dtype}")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{caller}: '{name}' is empty (shape {X.shape})")
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    X = X.rechunk({1: -1})
    if persist:
        X = X.persist()
    if finite and not bool(da.isfinite(X).all().compute()):
        raise ValueError(f"{caller}: '{name}' contains NaN or infinity")
    return X


def to_numpy(a):
    """Compute a Dask array (one value per sample: targets, weights).

    Parameters
    ----------
    a : dask.array.Array or object
        The array; other inputs are returned unchanged.

    Returns
    -------
    ndarray or object
        The computed array, or ``a`` itself.

    Examples
    --------
    >>> import dask.array as da
    >>> from kerneltools.dask import to_numpy
    >>> to_numpy(da.arange(3)), to_numpy([1, 2])
    (array([0, 1, 2]), [1, 2])
    """
    return a.compute() if is_dask_array(a) else a
