"""Quadratic forms ``s^T K s`` of many columns, by dense row blocks of K (private).

The permutation tests of :mod:`kerneltools.stats` need, for ``P`` columns
``s_p`` at once, the quadratic forms ``q_p = s_p^T K s_p`` of the pooled
sample's kernel matrix ``K`` (``N x N``) and its row sums ``K 1``. On the
CPU the fastest exact way is a matrix product: ``K`` is computed a block of
rows at a time (``B x N``, from one BLAS product of the points for the
kernels of squared distances and dot products), multiplied by all the
columns at once (``K_t @ S``, BLAS, one tile of columns of the block at a
time), and folded into ``q`` at once; the tile is then dropped. Memory: the
tile and ``S`` (``O(B C + N P)``, bounded by :data:`BLOCK_BYTES` and
:data:`COLUMN_BYTES`; more columns go in several passes), never ``N x N``.
The symbolic reductions of the engine (one pass over the pairs per 32
columns, the kernel recomputed in each) stay the path for other kernels,
other backends and CUDA; here the per-column work is a BLAS product's,
about ten times faster on the CPU at 79 dimensions.

**Rounding.** K's tiles are computed in float64 (the distances' product
and the exponentials), whatever the inputs' dtype: two close samples' MMD^2
is a difference of kernel sums up to 10^5 times larger than itself, and
float32 kernel values alone (their rounding, the float32 expansion of the
distances) put it 4e-6 to 4e-5 off. The row sums ``K 1`` and the first
column's form ``q[0]`` (the observed labelling of a permutation test) are
then exact to float64 rounding. The products with all the columns run in the
inputs' dtype (float32 products of the float64 tile rounded to float32, for
float32 samples: BLAS's float32 sums of a column put ``q`` up to 2e-4 of the
statistic off on close samples, a null distribution's rounding that hardly
moves a p-value). The columns used here sum to zero, so that
``s^T K s = s^T (K - c) s`` for any constant ``c``: the blocks are shifted by
``c`` (the kernel's mean on a subsample) before the product, which shrinks
the entries that the float32 sums accumulate from ``|K|`` to ``|K - c|``.
The points are centred first (the kernels served are translation
invariant), so that the expanded squared distances stay accurate for data
far from the origin. The diagonal of each block is the
kernel's value at distance 0 exactly (the expanded squared distance
``|x|^2 + |y|^2 - 2 <x, y>`` is not exactly 0 there).
"""

from __future__ import annotations

import numpy as np

__all__ = ["BLOCK_BYTES", "COLUMN_BYTES", "block_kernel", "columns_per_pass", "quadratic_forms"]

#: Bytes of one tile of K (a row block, in tiles of columns).
BLOCK_BYTES = 64 * 2**20

#: Bytes of one pass's columns S. Each further pass recomputes K (its
#: distances' product and exponentials, about as long as 250 columns'
#: products at 79 dimensions): 1,001 float32 columns at 2 x 10^5 points
#: (800 MB) are one pass.
COLUMN_BYTES = 1024 * 2**20


def _scaled_sqdist_block(A, B, sq_a, sq_b, scale, clamp=True):
    """``scale |a_i - b_j|^2`` by the expansion, from one BLAS product of the
    points augmented with their squared norms (the sum and the scaling done
    by the product: no pass over the block), clamped on the side of 0 when
    ``clamp`` (a rounding's tiny value of the wrong sign: the energy kernel's
    square root needs it; ``exp`` of 1e-13 is 1 to rounding)."""
    Aa = np.empty((len(A), A.shape[1] + 2), dtype=A.dtype)
    Aa[:, :-2], Aa[:, -2], Aa[:, -1] = A, sq_a, 1
    Ba = np.empty((len(B), B.shape[1] + 2), dtype=B.dtype)
    np.multiply(B, -2 * scale, out=Ba[:, :-2])
    Ba[:, -2], Ba[:, -1] = scale, scale * sq_b
    d2 = Aa @ Ba.T
    if not clamp:
        return d2
    return (np.maximum if scale > 0 else np.minimum)(d2, 0, out=d2)


def _rbf(gamma):
    def block(A, B, sq_a, sq_b):
        d2 = _scaled_sqdist_block(A, B, sq_a, sq_b, -gamma, clamp=False)
        return np.exp(d2, out=d2)

    return block, 1.0


def _energy():
    def block(A, B, sq_a, sq_b):
        d2 = _scaled_sqdist_block(A, B, sq_a, sq_b, 1.0)
        np.sqrt(d2, out=d2)
        return np.negative(d2, out=d2)

    return block, 0.0


def block_kernel(kernel, n_features: int):
    """``(block(A, B, |A|^2, |B|^2) -> k(A, B), k(z, z))`` for the kernels that
    this module computes by BLAS products, else None (use reductions).

    Served: ``"rbf"`` (``gamma`` None: ``1 / n_features``, as
    :func:`~kerneltools.kernels.make_kernel`) and the energy distance's
    ``-|x - y|`` (``kernel.name == "energy"``, made by :mod:`kerneltools.stats`).
    """
    if kernel.name == "energy":
        return _energy()
    if kernel.name == "rbf" and kernel.prepare is None:
        gamma = kernel.params.get("gamma")
        gamma = 1.0 / n_features if gamma is None else float(np.asarray(gamma).ravel()[0])
        return _rbf(gamma)
    return None


def _rows_per_block(N: int, itemsize: int) -> int:
    """About 8 blocks of rows (the symmetry saves the part of K left of the
    blocks' diagonal, 7/16 of it for 8 blocks), of 512 to 1,024 rows: the
    products ``K_t @ S`` of shorter blocks run several times slower per flop
    (83 rows x 2 10^5 columns: 3.5 GFLOP/s against 39 for 1,024 x 8,192 on
    this project's 2-core machine), longer ones gain nothing."""
    return int(np.clip(max(N // 8, 512), 16, min(N, 1024)))


def _columns_per_tile(rows: int, N: int, itemsize: int) -> int:
    """Columns of one tile of a row block: at most BLOCK_BYTES per tile, at
    least ``rows`` (the block's diagonal square lies in its first tile)."""
    return int(min(N, max(rows, BLOCK_BYTES // (rows * itemsize))))


def _upper_half(b: int, dt) -> np.ndarray:
    """The (b, b) mask: 1 above the diagonal, 1/2 on it, 0 below."""
    return (np.triu(np.ones((b, b), dtype=dt), 1) + 0.5 * np.eye(b, dtype=dt)).astype(dt)


def columns_per_pass(N: int, itemsize: int) -> int:
    """How many columns of S one pass holds (:data:`COLUMN_BYTES`)."""
    return max(1, COLUMN_BYTES // (N * itemsize))


def _add_row_sums(r, Kt, r0, r1, c0):
    """Add the tile ``Kt = K[r0:r1, c0:c1]`` (``c0 >= r0``, its diagonal
    exact) to the row sums ``r`` of the symmetric K: its rows, and its
    columns right of the diagonal square as the rows of K's lower part."""
    r[r0:r1] += Kt.sum(axis=1, dtype=np.float64)
    skip = max(r1 - c0, 0)  # columns of the diagonal square, already in its rows
    r[c0 + skip : c0 + Kt.shape[1]] += Kt[:, skip:].sum(axis=0, dtype=np.float64)


def quadratic_forms(Z, block, diag_value: float, columns, progress=None):
    """``(q, r, rs)``: ``q[p] = s_p^T K s_p`` for each zero-sum column ``s_p``
    that ``columns()`` yields (arrays ``(N, P_c)`` in Z's dtype, one per pass),
    the row sums ``r = K 1`` and ``rs[p] = r . s_p``, in float64;
    ``K = block(Z, Z)`` by row blocks, in float64 tiles (see the module's
    docstring: ``r`` and ``q[0]`` exact to float64 rounding, the other forms
    from products in Z's dtype); ``progress(pass, rows_done, N)``, if given,
    after each block."""
    N, dt = len(Z), Z.dtype
    # the kernels here are translation invariant: centred points keep the
    # expanded distances accurate when the data sit far from the origin
    Z = np.asarray(Z, dtype=np.float64)
    Z = Z - Z.mean(axis=0)
    sq = np.einsum("ij,ij->i", Z, Z)
    rb = _rows_per_block(N, 8)
    # the shift c: the kernel's mean on a subsample (any constant is exact)
    sub = Z[:: max(1, N // 256)]
    ssub = sq[:: max(1, N // 256)]
    c = float(block(sub, sub, ssub, ssub).mean())
    r = np.zeros(N)
    qs, rs = [], []
    for k, S in enumerate(columns()):
        q, rsum = np.zeros(S.shape[1]), np.zeros(S.shape[1])
        q0 = 0.0  # the first column's form, from the float64 tiles
        for r0 in range(0, N, rb):
            r1 = min(r0 + rb, N)
            S_b = S[r0:r1].astype(np.float64)
            # K is symmetric: the block's rows against the points from r0 on,
            # in tiles of ct columns, the diagonal square's lower triangle
            # dropped and its diagonal halved, count twice.
            ct = _columns_per_tile(r1 - r0, N - r0, 8)
            for c0 in range(r0, N, ct):
                c1 = min(c0 + ct, N)
                Kt = block(Z[r0:r1], Z[c0:c1], sq[r0:r1], sq[c0:c1])
                if c0 == r0:
                    idx = np.arange(r1 - r0)
                    Kt[idx, idx] = diag_value
                if k == 0:
                    _add_row_sums(r, Kt, r0, r1, c0)
                mask = _upper_half(r1 - r0, np.float64) if c0 == r0 else None
                if mask is not None:
                    Kt[:, : r1 - r0] *= mask
                # the first column from the float64 tile (unshifted: exact too)
                q0 += 2 * float(S_b[:, 0] @ (Kt @ S[c0:c1, 0].astype(np.float64)))
                # shifted, in the inputs' dtype, in one pass: mask (K - c)
                Ks = np.subtract(Kt, c, out=Kt if dt == Kt.dtype else None, dtype=dt)
                if mask is not None:
                    Ks[:, : r1 - r0] += (c * (1 - mask)).astype(dt)
                KS = Ks @ S[c0:c1]  # the inputs' dtype; folded in float64
                q += 2 * np.einsum("ip,ip->p", S_b, KS.astype(np.float64))
            # r[r0:r1] is complete here: the earlier blocks gave its columns < r0
            rsum += r[r0:r1] @ S_b
            if progress is not None:
                progress(k, r1, N)
        q[0] = q0
        qs.append(q)
        rs.append(rsum)
    return np.concatenate(qs), r, np.concatenate(rs)
