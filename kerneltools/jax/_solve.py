"""``LazyTensor.solve`` of :mod:`kerneltools.jax`: ``(K + alpha I)^-1 b`` by
conjugate gradients (``jax.scipy.sparse.linalg.cg``, each product ``K @ v`` a
custom-call reduction), differentiable by implicit differentiation (K
symmetric): for the cotangent ``g``, ``lambda = (K + alpha I)^-1 g`` is the
gradient of ``b``, and that of K's arrays is the gradient of
``-<lambda, K a>`` (one more solve and one reduction's gradient)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["solve"]


def solve(K, b, alpha: float, *, tol: float, max_iter, matvec):
    """``a`` with ``(K + alpha I) a = b``; ``matvec(arrays, v)`` is ``K @ v``
    with K's arrays ``arrays`` (those of ``K._arrays``, in order)."""
    if K.dim != 1:
        raise ValueError(f"solve needs a scalar formula K, got dimension {K.dim}")
    if K.ni != K.nj:
        raise ValueError(f"solve needs as many i-points as j-points; K indexes "
                         f"{K.ni} x {K.nj}")
    if b.shape[0] != K.ni:
        raise ValueError(f"b must have {K.ni} rows (one per point); got shape {b.shape}")

    def op(arrays, v):
        return matvec(arrays, v) + alpha * v

    def cg(arrays, rhs):
        a, _ = jax.scipy.sparse.linalg.cg(lambda v: op(arrays, v), rhs, tol=tol,
                                          maxiter=max_iter)
        return a

    @jax.custom_vjp
    def run(rhs, arrays):
        return cg(arrays, rhs)

    def fwd(rhs, arrays):
        a = run(rhs, arrays)
        return a, (a, arrays)

    def bwd(res, g):
        a, arrays = res
        lam = run(g, arrays)  # (K + alpha I) symmetric
        _, pull = jax.vjp(lambda arrs: matvec(arrs, a), arrays)
        (garrays,) = pull(-lam)
        return lam, garrays

    run.defvjp(fwd, bwd)
    b2 = jnp.reshape(b, (b.shape[0], -1))
    return jnp.reshape(run(b2, tuple(K._arrays.values())), b.shape)
