"""Warm starts of KernelRidge's CG solver across refits on the same data.

A grid search over ``alpha`` refits clones of one estimator on the same folds:
each clone is a new object, so what a refit can reuse lives here, in one
process-wide table keyed on the *content* of the training data (a hash of X's
bytes, its shape and dtype) and on everything else the reused parts depend on
(the kernel and its parameters, the landmark rule and seed, the backend).
A change to X, even in place, changes the key: a refit then builds afresh and
never sees another problem's parts.

What is kept per key: the landmarks and the Nystroem preconditioner (its
``n m^2`` Gram matrix does not depend on ``alpha``: a new ``alpha`` costs one
``m x m`` Cholesky, :meth:`~kerneltools.linalg.NystroemPreconditioner.with_shift`),
and the last solutions with their float64 residuals, per (y, alpha). A solution
for another ``alpha`` is only a starting point: CG still runs to ``tol`` on the
new system, so the answer is the cold one to within ``tol``.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from numbers import Real

import numpy as np

#: Training sets remembered (a 5-fold grid search needs five).
MAX_ENTRIES = 8
#: Memory the table may hold (the preconditioners keep their X): the oldest
#: entries go beyond it, and an entry larger than it is not kept at all.
MAX_BYTES = 1 << 30
#: Solutions remembered per training set.
MAX_SOLUTIONS = 4

_lock = threading.Lock()
_table: OrderedDict = OrderedDict()


def fingerprint(a) -> tuple:
    """A key for an array's content: shape, dtype and a 128-bit hash of its bytes."""
    a = np.ascontiguousarray(a)
    return (a.shape, a.dtype.str, hashlib.blake2b(a.view(np.uint8).reshape(-1),
                                                  digest_size=16).hexdigest())


def data_key(est, X, backend) -> tuple | None:
    """The key of ``est``'s parts on X, or None when they cannot be keyed safely:
    only named kernels with scalar parameters (a callable or a GP kernel object
    may hold state that its name does not show) and a reproducible landmark
    seed (an int, or None: any landmarks make a valid preconditioner)."""
    if not isinstance(est.kernel, str) or est.kernel_params:
        return None
    params = (est.gamma, est.degree, est.coef0)
    if not all(p is None or isinstance(p, Real) for p in params):
        return None
    rs = est.random_state
    if rs is not None and not isinstance(rs, Real):  # a Generator: its state moves
        return None
    return (fingerprint(X), est.kernel, *map(_num, params), est.landmarks,
            int(est.n_components), rs, backend)


def _num(v):
    return None if v is None else float(v)


def lookup(key):
    """The entry (a dict) stored under ``key``, or None; refreshes its age."""
    if key is None:
        return None
    with _lock:
        entry = _table.get(key)
        if entry is not None:
            _table.move_to_end(key)
        return entry


def store(key, entry: dict) -> None:
    """Keep ``entry`` under ``key``, dropping the oldest beyond ``MAX_ENTRIES``
    entries or ``MAX_BYTES``."""
    if key is None:
        return
    with _lock:
        _table.pop(key, None)
        if _nbytes(entry) > MAX_BYTES:
            return
        _table[key] = entry
        while len(_table) > MAX_ENTRIES or sum(map(_nbytes, _table.values())) > MAX_BYTES:
            _table.popitem(last=False)


def _nbytes(entry: dict) -> int:
    """The arrays an entry keeps alive, in bytes (its preconditioner's X counted
    in full, though it may be the caller's array)."""
    total = 0
    M = entry.get("preconditioner")
    if M is not None:
        total += sum(a.nbytes for a in (M.X, M.Z, M._W, M._FtF, M.d_inv, M._chol[0])
                     if isinstance(a, np.ndarray))
    for C, R in entry.get("solutions", {}).values():
        total += C.nbytes + R.nbytes
    return total


def clear() -> None:
    """Forget every entry (tests; or to free the memory)."""
    with _lock:
        _table.clear()


def remember_solution(entry: dict, y_key, alpha: float, C, R) -> None:
    """Keep the solution ``C`` of ``(K + alpha I) C = Y`` and its float64
    residual ``R = Y - (K + alpha I) C`` (the newest ``MAX_SOLUTIONS``).
    Under the table's lock: fits in threads share an entry."""
    with _lock:
        sols = entry.setdefault("solutions", OrderedDict())
        sols[(y_key, alpha)] = (C, R)
        sols.move_to_end((y_key, alpha))
        while len(sols) > MAX_SOLUTIONS:
            sols.popitem(last=False)


def warm_start(entry, y_key, alpha: float, Y):
    """``(x0, r0)``, a starting point of ``(K + alpha I) x = Y`` and its
    residual, from the stored solution for the same ``Y`` whose ``alpha`` is
    nearest (in log); ``(None, None)`` if there is none.

    From ``(K + a1 I) c1 = Y - R1`` follows ``(K + a I) c1 = Y - R1 + (a - a1) c1``
    without a kernel product; ``x0 = s c1`` with the ``s`` that minimises the
    ``(K + a I)``-norm error along ``c1``, ``s = c1^T Y / c1^T (K + a I) c1``
    (per column), and ``r0 = Y - s (K + a I) c1``.
    """
    with _lock:  # another thread's fit may be adding a solution
        sols = [] if entry is None else [
            (k[1], v) for k, v in entry.get("solutions", {}).items() if k[0] == y_key]
    if not sols:
        return None, None
    a1, (c1, R1) = min(sols, key=lambda s: abs(np.log(s[0] / alpha)))
    Ac1 = Y - R1 + (alpha - a1) * c1
    num = np.einsum("ij,ij->j", c1, Y)
    den = np.einsum("ij,ij->j", c1, Ac1)
    s = np.where(den > 0, num / np.where(den > 0, den, 1), 0.0)
    return s * c1, Y - s * Ac1
