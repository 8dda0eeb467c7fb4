"""Multiscale Sinkhorn: coarse-to-fine epsilon-scaling on block-sparse reductions.

GeomLoss's multiscale idea (J. Feydy's thesis, Section 3.3.3, "Multiscale
Sinkhorn", after B. Schmitzer, "Stabilized sparse scaling algorithms for
entropy regularized transport problems", SIAM J. Sci. Comput. 2019), on
:mod:`kerneltools.ranges`:

1. The points are put in the cells of a grid of side ``cluster_scale``; each
   cell is one weighted point (its barycentre, its mass).
2. The epsilon-scaling loop runs on these coarse measures while ``eps`` is
   above ``cluster_scale^p`` (the temperatures at which the cells are
   unresolved).
3. Jump: the coarse potentials are extrapolated to the points (one softmin
   of the fine points against the coarse ones), and they decide which pairs
   of cells the plan can still reach. A block ``(A, B)`` is kept when an
   upper bound of the plan's log-density over it, ``max (f_i + g_j - C_ij) / eps``
   over ``i`` in A and ``j`` in B, is above ``-truncate``. Two bounds, the
   smaller one used (both are bounds: the block is skipped only where one
   proves it negligible):

   - ``max_A f + max_B g - C_min(A, B)``, with ``C_min`` the cost between the
     cells' balls (centroid distance minus both radii);
   - for ``p = 2``, with ``d = c_A - c_B``, ``u_i = x_i - c_A`` and
     ``v_j = y_j - c_B`` (``C_ij = |d + u_i - v_j|^2 / 2 >=
     |d|^2 / 2 + d.u_i - d.v_j``): ``f_i - d.u_i <= m_A + |s_A - d| r_A``,
     where ``s_A`` is any slope (the least-squares one of f over the cell),
     ``m_A = max_A (f_i - s_A.u_i)`` and ``r_A = max_A |u_i|``; likewise for
     g with ``+d``. So the bound is
     ``m_A + |s_A - d| r_A + m_B + |s_B + d| r_B - |d|^2 / 2``, or, keeping
     the term ``-|u_i - v_j|^2 / 2`` (``max (a.w - |w|^2 / 2)`` over
     ``|w| <= r_A + r_B``: :func:`_psi`), a tighter one that equals the first
     bound when the slopes are 0 (:func:`_keep` takes the least). The
     potentials' slopes are the displacements (``grad f = x - T(x)``): where
     the transport moves the points far compared to the cells' size, the
     first bound's ``max_A f`` pays that displacement times the radius, this
     one only the cells' distance from the transport map.

   The distance between two cells' points is bounded below by both their
   balls' gap and their bounding boxes' distance (grid cells are cubes). On
   the benchmark's clouds (3-D, 10^5 points, blur 0.05, 1,728 cells) the x-y
   blocks kept hold 33% of the pairs (43% with the first bound alone); at
   10^4 points, 30% where 25% of the pairs lie in blocks that hold a pair
   above ``-truncate`` (brute force): no bound can keep fewer. (GeomLoss,
   testing its centroids only, a heuristic, keeps 24% of its blocks.)

   A skipped pair ``(x_i, y_j)`` has a transport weight below
   ``a_i b_j exp(-truncate)`` at the jump's temperature, and below that as
   ``eps`` decreases further (the plan concentrates). Every row and column
   keeps at least its best block.
4. The loop ends on the points, every softmin (and the gradients' reductions)
   restricted to the kept blocks.

With ``truncate=None`` no block is skipped (the jump only warm-starts the
fine loop). The value then differs from the dense loop only by the coarse
warm start; with the default ``truncate=5``, by the truncation too: the
tests check both against the dense solver (relative 1e-3 on the value).

On a device (a problem whose arrays are CuPy's, see :mod:`._sinkhorn`), the
cells and the block choice are computed on the host, the Sinkhorn loops on
the device: per call, one copy of the points and masses to the host (the
grid, the cells' barycentres, radii and boxes: :class:`_Clusters`), the
cells' barycentres and masses to the device (the coarse loop runs there),
and at the jump one copy of each extrapolated potential to the host (the
bounds of :func:`_keep`). The fine loop's block-sparse reductions then read
the device's points (the engine's ranges reductions take CuPy arrays: one
launch of the CUDA backend's block-sparse kernel per softmin). The engine
itself still uploads each call's block lists and index maps (int64, about
two per point: ``CudaBackend.run_ranges``); ``asv_bench/estimators_gpu.py``
counts them in its share of time spent in copies.
"""

from __future__ import annotations

import numpy as np

from .. import ranges as kr
from ..lazy import Vi, Vj
from . import _sinkhorn as sk

__all__ = ["default_cluster_scale", "multiscale_solve", "solve"]

#: GeomLoss's heuristic: about this many cells over the data's bounding box.
TARGET_CELLS = 2000
#: From TARGET_CELLS * POINTS_PER_CELL points, one cell per POINTS_PER_CELL
#: points of the larger cloud, up to MAX_CELLS: with the cells fixed the
#: kept pairs stay a fixed fraction of all pairs (45% of 10^12 at 10^6
#: points, 3-D, blur 0.05: ~4,500 CPU s extrapolated), with half their side
#: 10% (781 CPU s in all; ``asv_bench/losses_results.md``). At 10^5 points
#: (1,728 cells, ~58 points each) the fixed count measured fastest.
POINTS_PER_CELL = 60
#: The block choice's masks are (cells x cells) booleans: 400 MB at most.
MAX_CELLS = 20000


def default_cluster_scale(diameter: float, dim: int, n: int = 0) -> float:
    """``diameter / (sqrt(D) C^(1/D))``: at most about C cells of the box, C =
    ``n / POINTS_PER_CELL`` clipped to [TARGET_CELLS, MAX_CELLS] (``n``: the
    larger cloud's number of points)."""
    cells = min(max(TARGET_CELLS, n / POINTS_PER_CELL), MAX_CELLS)
    return diameter / (np.sqrt(dim) * cells ** (1.0 / dim))


class _Clusters:
    """A measure's grid cells: labels, coarse masses, barycentres and radii."""

    def __init__(self, x, w, scale):
        self.labels = kr.grid_cluster(x, scale)
        self.w = np.bincount(self.labels, weights=w.astype(np.float64)).astype(w.dtype)
        self.c = kr.cluster_centroids(x, self.labels, weights=w).astype(x.dtype)
        # cells whose points all have zero mass: their plain centroid
        empty = ~np.isfinite(self.c).all(axis=1)
        if empty.any():
            plain = kr.cluster_centroids(x, self.labels).astype(x.dtype)
            self.c[empty] = plain[empty]
        self.r = kr.cluster_radii(x, self.labels, self.c).astype(np.float64)
        # the cells' bounding boxes (of their points): a grid cell is a cube,
        # whose ball overstates how close two cells' points can come
        x64 = x.astype(np.float64)
        self.lo = np.full((len(self.w), x.shape[1]), np.inf)
        self.hi = np.full((len(self.w), x.shape[1]), -np.inf)
        np.minimum.at(self.lo, self.labels, x64)
        np.maximum.at(self.hi, self.labels, x64)

    def max_per_cell(self, f: np.ndarray) -> np.ndarray:
        out = np.full(len(self.w), -np.inf)
        np.maximum.at(out, self.labels, f.astype(np.float64))
        return out

    def linear_bound(self, x, f):
        """``(m, s, r)``, per cell: a slope ``s`` (least squares of f on
        ``u_i = x_i - c``), ``m = max (f_i - s.u_i)`` and ``r = max |u_i|``,
        so that ``f_i - t.u_i <= m + |s - t| r`` for every vector t (float64;
        any slope gives a bound, the fitted one a tight one)."""
        C, D = len(self.w), x.shape[1]
        lab = self.labels
        u = x.astype(np.float64) - self.c.astype(np.float64)[lab]
        f = f.astype(np.float64)
        count = np.bincount(lab, minlength=C)
        fc = f - (np.bincount(lab, weights=f, minlength=C) / np.maximum(count, 1))[lab]
        suu = np.empty((C, D, D))
        for a in range(D):
            for b in range(a, D):
                suu[:, a, b] = suu[:, b, a] = np.bincount(lab, u[:, a] * u[:, b],
                                                          minlength=C)
        suf = np.stack([np.bincount(lab, u[:, a] * fc, minlength=C)
                        for a in range(D)], 1)
        # a ridge for the cells of one point (or of points on a line): slope 0 there
        ridge = 1e-12 * np.trace(suu, axis1=1, axis2=2) + 1e-300
        slope = np.linalg.solve(suu + ridge[:, None, None] * np.eye(D),
                                suf[:, :, None])[..., 0]
        m = np.full(C, -np.inf)
        np.maximum.at(m, lab, f - np.einsum("id,id->i", u, slope[lab]))
        r = np.zeros(C)
        np.maximum.at(r, lab, np.sqrt(np.einsum("id,id->i", u, u)))
        return m, slope, r * (1 + 1e-12) + 1e-300  # rounding: upper bounds


def _psi(a, R):
    """``max (a.w - |w|^2 / 2)`` over the ball ``|w| <= R``, for ``|a|`` = a."""
    return np.where(a <= R, a**2 / 2, a * R - R**2 / 2)


#: Rows of cells per chunk of the (Cx, Cy, D) differences of centroids.
_KEEP_ROWS = 256


def _keep(cx: _Clusters, cy: _Clusters, x, y, f, g, eps, p, truncate):
    """The (Cx, Cy) mask of the blocks the plan can reach (module docstring, 3):
    the smaller of the two bounds of the plan's log-density (the second for
    ``p = 2``), over ``-truncate``."""
    fmax, gmax = cx.max_per_cell(f), cy.max_per_cell(g)
    if p == 2:
        mf, sf, rf = cx.linear_bound(x, f)
        mg, sg, rg = cy.linear_bound(y, g)
    ccx, ccy = cx.c.astype(np.float64), cy.c.astype(np.float64)
    # the mask by row chunks, never the (Cx, Cy) float64 scores (1.5 GB at
    # 13,800 cells); each column's best row tracked across the chunks
    keep = np.empty((len(ccx), len(ccy)), dtype=bool)
    col_best = np.full(len(ccy), -np.inf)
    col_row = np.zeros(len(ccy), dtype=np.intp)
    for i0 in range(0, len(ccx), _KEEP_ROWS):
        rows = slice(i0, min(i0 + _KEEP_ROWS, len(ccx)))
        d2 = np.zeros((len(ccx[rows]), len(ccy)))
        box2 = np.zeros_like(d2)
        for k in range(ccx.shape[1]):  # |c_A - c_B|^2 and the boxes' distance^2
            d2 += np.subtract.outer(ccx[rows, k], ccy[:, k]) ** 2
            below = np.subtract.outer(-cx.hi[rows, k], -cy.lo[:, k])  # lo_B - hi_A
            above = np.subtract.outer(cx.lo[rows, k], cy.hi[:, k])  # lo_A - hi_B
            side = np.maximum(np.maximum(below, above), 0.0)
            box2 += side**2
        d = np.sqrt(d2)
        gap = np.maximum(d - cx.r[rows, None] - cy.r[None, :], 0.0)
        gap = np.maximum(gap, np.sqrt(box2))  # two lower bounds of |x_i - y_j|
        c_min = gap**2 / 2 if p == 2 else gap
        bound = fmax[rows, None] + gmax[None, :] - c_min
        if p == 2:  # the second bound, where the first one keeps the block
            i, j = np.nonzero(bound > -truncate * eps)
            ra, rb = rf[rows][i], rg[j]
            dv = ccx[rows][i] - ccy[j]  # d
            alpha = np.linalg.norm(sf[rows][i] - dv, axis=1)
            beta = np.linalg.norm(sg[j] + dv, axis=1)
            ab = np.linalg.norm(sf[rows][i] + sg[j], axis=1)
            top = np.minimum(np.minimum(ab * rb + _psi(alpha, ra + rb),
                                        ab * ra + _psi(beta, ra + rb)),
                             alpha * ra + beta * rb)
            lin = mf[rows][i] + mg[j] - (dv**2).sum(1) / 2 + top
            bound[i, j] = np.minimum(bound[i, j], lin)
        score = bound / eps
        keep[rows] = score > -truncate
        n = score.shape[0]
        keep[i0 + np.arange(n), score.argmax(axis=1)] = True  # every row,
        # every column: its first best row (a NaN counts as the best, as argmax)
        top, at = score.max(axis=0), score.argmax(axis=0)
        better = (top > col_best) | (np.isnan(top) & ~np.isnan(col_best))
        col_best[better], col_row[better] = top[better], i0 + at[better]
    keep[col_row, np.arange(len(ccy))] = True
    return keep


def _block_cost(p, x, y, lab_x, lab_y, keep, space=sk.HOST) -> sk.CostMatrix:
    """C(x_i, y_j) restricted to the kept blocks (``x``, ``y``: arrays of
    ``space``; the labels and the mask on the host)."""
    bs = kr.block_sparsity(lab_x, lab_y, keep)
    x, y = space.engine(x), space.engine(y)
    return sk.CostMatrix(x, y, Vi(x).with_ranges(bs), Vj(y), p)


def _jump_index(eps_list, scale, p) -> int:
    """The first step of the fine loop: the first temperature below
    ``scale^p`` (GeomLoss's rule), or the last one."""
    for k, eps in enumerate(eps_list[1:], start=1):
        if eps < scale**p:
            return k
    return len(eps_list) - 1


def multiscale_solve(prob: sk.Problem, *, debias: bool, backend, truncate=5.0,
                     cluster_scale=None, verbose=False, callback=None):
    """Coarse-to-fine Sinkhorn on ``prob``: ``(potentials, costs, softmin)``
    as :func:`._sinkhorn.solve`, the costs restricted to the kept blocks."""
    x, y, a, b, p, sp = prob.x, prob.y, prob.a, prob.b, prob.p, prob.space
    scale = cluster_scale or default_cluster_scale(prob.diameter, x.shape[1],
                                                   max(x.shape[0], y.shape[0]))
    # the cells on the host (from one copy of a device's points and masses)
    host = sp.host if sp.on_device else (lambda v: v)
    xh, yh, ah, bh = (host(v) for v in (x, y, a, b))
    cx, cy = _Clusters(xh, ah, scale), _Clusters(yh, bh, scale)
    jump = _jump_index(prob.eps_list, scale, p)
    softmin = sk.lse_softmin(backend, sp)
    coarse = sk.Problem(sp.put(cx.c), sp.put(cy.c), sp.put(cx.w), sp.put(cy.w), p,
                        prob.eps, prob.rho, prob.eps_list[:jump], prob.diameter,
                        space=sp)
    # Step 2: the coarse loop (its last extrapolation gives the h's at eps).
    pot_c, costs_c, _ = sk.solve(coarse, debias=debias, backend=backend)
    eps = prob.eps_list[jump - 1]
    lam = sk.damping(eps, prob.rho)
    # Step 3: extrapolate to the points (fine x against coarse y, ...).
    f = lam * softmin(eps, sk.cost_matrix(p, x, coarse.y, space=sp), pot_c.h_ba)
    g = lam * softmin(eps, sk.cost_matrix(p, y, coarse.x, space=sp), pot_c.h_ab)
    f_aa = g_bb = None
    if debias:
        f_aa = lam * softmin(eps, sk.cost_matrix(p, x, coarse.x, space=sp), pot_c.h_aa)
        g_bb = lam * softmin(eps, sk.cost_matrix(p, y, coarse.y, space=sp), pot_c.h_bb)
    t = np.inf if truncate is None else float(truncate)
    # the blocks are chosen for the next (finer) temperature, on the host
    eps = prob.eps_list[jump]
    fh, gh = host(f), host(g)
    keep_xy = _keep(cx, cy, xh, yh, fh, gh, eps, p, t)
    costs = sk.Costs(
        _block_cost(p, x, y, cx.labels, cy.labels, keep_xy, sp),
        _block_cost(p, y, x, cy.labels, cx.labels, keep_xy.T, sp),
        None, None)
    if debias:
        fh, gh = host(f_aa), host(g_bb)
        costs = costs._replace(
            xx=_block_cost(p, x, x, cx.labels, cx.labels,
                           _keep(cx, cx, xh, xh, fh, fh, eps, p, t), sp),
            yy=_block_cost(p, y, y, cy.labels, cy.labels,
                           _keep(cy, cy, yh, yh, gh, gh, eps, p, t), sp))
    if verbose:
        print(f"multiscale Sinkhorn: {len(cx.w)} x {len(cy.w)} cells of side {scale:.3g}; "
              f"{jump} coarse steps, {len(prob.eps_list) - jump} fine ones; "
              f"{keep_xy.mean():.1%} of the x-y blocks kept (truncate={truncate})")
    # Step 4: the fine loop from the jump on, block-sparse.
    pot = sk.sinkhorn_loop(
        softmin=softmin, a_log=sk.log_weights(a), b_log=sk.log_weights(b),
        C_xy=costs.xy, C_yx=costs.yx, C_xx=costs.xx, C_yy=costs.yy,
        eps_list=prob.eps_list[jump:], rho=prob.rho, debias=debias,
        callback=callback, a=a, init=(f, g, f_aa, g_bb),
    )
    return pot, costs, softmin


def solve(prob: sk.Problem, *, debias: bool, backend, multiscale=False, truncate=5.0,
          cluster_scale=None, verbose=False, callback=None):
    """:func:`multiscale_solve` if ``multiscale``, else the dense
    :func:`._sinkhorn.solve`: ``(potentials, costs, softmin)``."""
    if not multiscale:
        return sk.solve(prob, debias=debias, backend=backend, callback=callback)
    return multiscale_solve(prob, debias=debias, backend=backend, truncate=truncate,
                            cluster_scale=cluster_scale, verbose=verbose,
                            callback=callback)
