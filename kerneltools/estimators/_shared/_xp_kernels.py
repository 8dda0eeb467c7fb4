"""Dense blocks of scikit-learn's named kernels, in any Array API namespace.

The device path of the estimators (:mod:`._array_api`) evaluates
``K(A, B)`` for a block of rows ``A`` and the landmarks ``B`` where the data
are (CuPy on a GPU), as the host path does with
``sklearn.metrics.pairwise_kernels``: Nystroem's features, the Gram matrix of
KernelRidge's Nystroem preconditioner. Dot products and squared distances
are formed in float64 (float32 data too: the expansion
``|a|^2 + |b|^2 - 2 a.b`` cancels, as scikit-learn's ``euclidean_distances``
upcasts float32 for the same reason), the block is returned in the data's
dtype. The conventions are scikit-learn's: ``gamma=None`` is
``1 / n_features`` (1 for ``chi2``), ``degree`` 3, ``coef0`` 1; ``chi2``
terms with ``a + b = 0`` count 0; ``cosine`` leaves zero rows zero.
"""

from __future__ import annotations

from ...kernels import PAIRWISE_KERNELS

__all__ = ["DEVICE_KERNELS", "kernel_block"]

#: The kernel names the device path evaluates (all of scikit-learn's).
DEVICE_KERNELS = frozenset(PAIRWISE_KERNELS)
#: Entries of the (rows, columns, features) broadcast of the element-wise
#: kernels (laplacian, chi2) held at once.
_BROADCAST_ENTRIES = 1 << 22


def _params(name, params, d):
    g = params.get("gamma")
    gamma = (1.0 if name == "chi2" else 1.0 / d) if g is None else float(g)
    degree = 3.0 if params.get("degree") is None else float(params["degree"])
    coef0 = 1.0 if params.get("coef0") is None else float(params["coef0"])
    return gamma, degree, coef0


def kernel_block(name: str, params: dict, A, B, xp):
    """``K(A, B)`` of the named kernel ``name`` (shape (len(A), len(B))), in
    namespace ``xp``, in ``A``'s dtype; ``params`` holds ``gamma``,
    ``degree``, ``coef0`` (None: scikit-learn's default)."""
    if name not in DEVICE_KERNELS:
        raise ValueError(f"kernel_block: unknown kernel {name!r}; valid names are "
                         f"{', '.join(sorted(DEVICE_KERNELS))}")
    out_dtype = A.dtype
    A64, B64 = xp.astype(A, xp.float64), xp.astype(B, xp.float64)
    gamma, degree, coef0 = _params(name, params, A.shape[1])
    if name in ("chi2", "additive_chi2"):
        _nonnegative(A64, B64, name, xp)
    if name == "cosine":
        A64, B64 = _unit_rows(A64, xp), _unit_rows(B64, xp)
    if name == "rbf":
        K = xp.exp(-gamma * _sqdist(A64, B64, xp))
    elif name == "laplacian":
        K = xp.exp(-gamma * _broadcast_sum(A64, B64, xp, lambda a, b: xp.abs(a - b)))
    elif name in ("linear", "cosine"):
        K = A64 @ xp.matrix_transpose(B64)
    elif name in ("poly", "polynomial"):
        K = (gamma * (A64 @ xp.matrix_transpose(B64)) + coef0) ** degree
    elif name == "sigmoid":
        K = xp.tanh(gamma * (A64 @ xp.matrix_transpose(B64)) + coef0)
    else:  # chi2, additive_chi2: sum_k (a_k - b_k)^2 / (a_k + b_k)
        def term(a, b):
            s = a + b
            return xp.where(s > 0, (a - b) ** 2 / xp.where(s > 0, s, 1.0), 0.0)

        C = _broadcast_sum(A64, B64, xp, term)
        K = xp.exp(-gamma * C) if name == "chi2" else -C
    return xp.astype(K, out_dtype)


def _sqdist(A, B, xp):
    """``|a - b|^2`` by the expansion, clipped at 0, exact 0 on equal rows
    left to rounding (as scikit-learn's)."""
    aa = xp.sum(A * A, axis=1)[:, None]
    bb = xp.sum(B * B, axis=1)[None, :]
    return xp.clip(aa + bb - 2.0 * (A @ xp.matrix_transpose(B)), 0.0, None)


def _broadcast_sum(A, B, xp, term):
    """``sum_k term(A[i, k], B[j, k])`` over rows of A in pieces, each a
    (rows, len(B), features) broadcast of at most ``_BROADCAST_ENTRIES``."""
    n, m, d = A.shape[0], B.shape[0], A.shape[1]
    rows = max(1, _BROADCAST_ENTRIES // max(1, m * d))
    parts = [xp.sum(term(A[i:min(i + rows, n), None, :], B[None, :, :]), axis=2)
             for i in range(0, n, rows)]
    return parts[0] if len(parts) == 1 else xp.concat(parts, axis=0)


def _unit_rows(A, xp):
    norms = xp.sqrt(xp.sum(A * A, axis=1))
    return A / xp.where(norms > 0, norms, 1.0)[:, None]


def _nonnegative(A, B, name, xp):
    if bool(xp.any(A < 0)) or bool(xp.any(B < 0)):
        raise ValueError(f"the {name!r} kernel needs X >= 0; X contains negative values")
