"""A control variate for the trace in the iterative solver's gradient.

The gradient of the log marginal likelihood needs ``tr(A^{-1} dK_h)`` for
each hyperparameter ``h``; the solver (:mod:`._gp_iterative`) estimates it
by Hutchinson's ``mean_k u_k^T dK_h v_k`` with probes ``z_k ~ N(0, P)``,
``u_k = A^{-1} z_k`` and ``v_k = P^{-1} z_k``. Its error is that of a
Hutchinson estimate of the whole ``A^{-1} dK_h``: at n = 10^4, D = 8 and 16
probes, 10 to 20 in gradient components of 10 to 30 (against the exact
gradient), which stops L-BFGS-B where the estimated gradient vanishes and
makes its line searches fail near the optimum.

The preconditioner ``P = D + F F^T`` (Nystroem on landmarks ``Z``, with the
exact diagonal: ``D = diag(shift) + diag(K - Q)``, ``Q = F F^T =
K_nm B``, ``B = K_mm^{-1} K_mn``) is close to ``A``: CG converges in two or
three iterations. The same construction on ``dK_h``,

    G_h = dQ_h + diag(dK_h - dQ_h),
    dQ_h = dK_nm B + B^T dK_mn - B^T dK_mm B,

(the derivative of the Nystroem approximation, with the exact diagonal) is
close to ``dK_h``, and ``tr(P^{-1} G_h)`` has a closed form in ``n x m``
dense products. With the same probes (``E[v^T G v] = tr(P^{-1} G)``)::

    tr(A^{-1} dK_h) = tr(P^{-1} G_h) + E[u^T dK_h v - v^T G_h v],

whose stochastic part is small where ``A^{-1} dK_h`` is close to
``P^{-1} G_h`` (a control variate; the log-determinant's estimate uses ``P``
in the same way: ``log det P`` plus Lanczos on ``P^{-1/2} A P^{-1/2}``). The
white noise's ``dA = level I`` takes ``G = I``.

Everything here is an ``n x m`` dense product over blocks of rows
(``O(n m (D + p + n_theta))`` time, ``O(m^2 + block m)`` memory), for
``c * phi(|x / l - y / l|^2)`` kernels (:func:`kerneltools.kernels.stationary_form`;
Matern nu = 0.5 excluded, whose ``phi'`` is singular at 0) and a
preconditioner that holds its features ``F``. Written once for the host
and the device (``sp``, a :class:`~kerneltools._utils._array_api.Space`):
the ``n``-sized blocks in the namespace of ``F``, the ``m x m`` and
``r x r`` algebra on the host.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg
from scipy.spatial.distance import cdist

from ..._utils._array_api import HOST
from .._shared._xp_kernels import _broadcast_sum
from ._exact import _phi_and_weight

#: Rows per block (each block holds a few ``rows x m`` arrays: 10 MB at m = 300).
_ROWS = 4096


def applies(form, M) -> bool:
    """Whether :func:`trace_corrections` serves kernel ``form`` and
    preconditioner ``M`` (stored features, a smooth ``phi``)."""
    return form is not None and form.nu != 0.5 and hasattr(M, "_F")


def _kernel_and_weight(form, S):
    """``(c phi(s), -2 c phi'(s))`` on the squared distances ``S`` (kept)."""
    phi, w = _phi_and_weight(form.nu, S.copy())
    return form.c * phi, form.c * w


def _derivatives(form, U, V):
    """``(dK_h, their diagonals)`` of ``c * phi(|u - v|^2)`` between the
    rescaled points ``U`` and ``V``: the amplitude's (``d k / d log c = k``),
    then each length scale's (``d k / d log l_d = -2 c phi'(s) (u_d -
    v_d)^2``; one for a scalar length scale)."""
    S = cdist(U, V, "sqeuclidean")
    K, Wt = _kernel_and_weight(form, S)
    out = [K]
    if form.length_scale.size > 1:
        out += [Wt * np.subtract.outer(u, v) ** 2 for u, v in zip(U.T, V.T)]
    else:
        out.append(Wt * S)
    diag = [form.c] + [0.0] * (len(out) - 1)  # the diagonal of dK_h (white noise apart)
    return out, diag


def phi_and_weight(nu, S, xp):
    """``(phi(s), -2 phi'(s))`` of the Matern correlations (RBF: ``nu = inf``)
    on the scaled squared distances ``S``, in namespace ``xp`` (and nu =
    0.5's phi). The exact path's :func:`._exact._phi_and_weight` is its
    NumPy twin, kept because it works in place on ``n x n`` matrices."""
    if nu == math.inf:
        phi = xp.exp(-0.5 * S)
        return phi, phi
    r = xp.sqrt(S)
    if nu == 0.5:
        return xp.exp(-r), None
    if nu == 1.5:
        r = math.sqrt(3) * r
        e = xp.exp(-r)
        return (1.0 + r) * e, 3.0 * e
    r = math.sqrt(5) * r
    e = xp.exp(-r)
    return (1.0 + r + r * r / 3.0) * e, (5.0 / 3.0) * (1.0 + r) * e


def sqdist(A, B, xp):
    """``|a - b|^2`` by differences (exact 0 on equal rows, as ``cdist``)."""
    return _broadcast_sum(A, B, xp, lambda a, b: (a - b) ** 2)


def kernel_block(form, A, B, xp):
    """``c * phi(|a - b|^2)`` between rescaled rows ``A`` and ``B`` (no white
    noise), in namespace ``xp``."""
    return form.c * phi_and_weight(form.nu, sqdist(A, B, xp), xp)[0]


def _inner_products(form, U, Zu, E, xp):
    """``<dK_h(U, Zu), E>`` for every ``h`` of :func:`_derivatives` (a vector
    of ``xp``), without forming the length scales' ``dK_h``: with ``G = -2 c
    phi'(s) o E``, ``<G, (u_d - z_d)^2> = sum_i u_id^2 (G 1)_i - 2 u_d^T G
    z_d + sum_a (1^T G)_a z_ad^2`` (one ``G @ Zu`` product for all d)."""
    S = sqdist(U, Zu, xp)
    phi, w = phi_and_weight(form.nu, S, xp)
    G = form.c * w * E
    if form.length_scale.size > 1:
        scales = xp.matrix_transpose(U * U) @ xp.sum(G, axis=1) \
            - 2 * xp.sum(U * (G @ Zu), axis=0) + xp.sum(G, axis=0) @ (Zu * Zu)
    else:
        scales = xp.reshape(xp.sum(G * S), (1,))
    return xp.concat([xp.reshape(xp.sum(form.c * phi * E), (1,)), scales])


def trace_corrections(form, M, Xs, V, sp=HOST):
    """``(tr(P^{-1} G_h) - mean_k v_k^T G_h v_k)`` for the amplitude and the
    length scales (in :func:`_derivatives`' order), and the same for the
    white noise (``G = I``): what turns the Hutchinson estimate of
    ``tr(A^{-1} dK_h)`` into the controlled one (see the module's notes).

    Parameters
    ----------
    form : StationaryForm
    M : preconditioner with features ``_F`` (``n x r``), ``_W`` (``m x r``,
        ``W W^T = K_mm^{-1}``, host), ``_chol`` (of ``C = I + F^T D^{-1}
        F``), ``d_inv`` and landmarks ``Z`` (host); on a device also ``_Wd``
        and ``Zs``, its ``W`` and rescaled landmarks there.
    Xs : array (n, d), the training points over the length scales
    V : array (n, p), ``P^{-1} z_k`` for the probes
    sp : Space
        Where ``F``, ``d_inv``, ``Xs`` and ``V`` are.

    Returns
    -------
    kernel_part : ndarray (1 + n_length_scales,)
    white_part : float

    Notes
    -----
    With ``B^T = F W^T`` and Woodbury, ``P^{-1} F = D^{-1} F C^{-1}``, so
    ``Y = P^{-1} B^T = D^{-1} F C^{-1} W^T`` and
    ``B P^{-1} B^T = W (I - C^{-1}) W^T``. For ``x`` the diagonal of
    ``P^{-1}`` (``D^{-1} - D^{-2} rowsums(F C^{-1} o F)``) or the probes'
    ``rowsums(V o V)``, ``sum_i x_i dQ_ii = 2 <dK_nm, x o B^T> - <dK_mm, B
    diag(x) B^T>``, and ``sum_k v_k^T dQ v_k = 2 <dK_nm, V (B V)^T> -
    <B V, dK_mm B V>``. Every ``n x m`` term is then one inner product of
    ``dK_nm`` with ``E = Y - (x_P - x_V / p) o B^T - V (B V)^T / p``.
    """
    xp = sp.xp
    F, W, d_inv = M._F, M._W, M.d_inv
    p, r = V.shape[1], F.shape[1]
    Zu = M.Z / form.length_scale
    dK_mm, kdiag = _derivatives(form, Zu, Zu)
    C_inv = scipy.linalg.cho_solve(M._chol, np.eye(r))
    # W, C^-1 and the rescaled landmarks where F is (the host's are F's)
    Wd, Cd, Zd = (M._Wd, sp.put(C_inv), M.Zs) if sp.on_device else (W, C_inv, Zu)
    BV = Wd @ (xp.matrix_transpose(F) @ V)  # B V, (m, p)
    inner = xp.zeros(len(dK_mm), dtype=xp.float64, device=sp.device)
    core = xp.zeros((r, r), dtype=xp.float64, device=sp.device)
    sums = xp.zeros(2, dtype=xp.float64, device=sp.device)  # of p_diag, of v_sq
    for r0 in range(0, F.shape[0], _ROWS):
        r1 = min(F.shape[0], r0 + _ROWS)
        Fb, db, Vb = F[r0:r1, :], d_inv[r0:r1], V[r0:r1, :]
        FC = Fb @ Cd
        p_diag = db - db**2 * xp.sum(FC * Fb, axis=1)
        v_sq = xp.sum(Vb * Vb, axis=1)
        x = p_diag - v_sq / p
        core = core + xp.matrix_transpose(Fb) @ (x[:, None] * Fb)  # F^T diag(x) F
        sums = sums + xp.stack([xp.sum(p_diag), xp.sum(v_sq)])
        # E = Y - x o B^T - V (B V)^T / p, with Y = D^-1 F C^-1 W^T, B^T = F W^T
        E = (db[:, None] * FC - x[:, None] * Fb) @ xp.matrix_transpose(Wd) \
            - Vb @ xp.matrix_transpose(BV) / p
        inner = inner + _inner_products(form, Xs[r0:r1, :], Zd, E, xp)
    # the m x m terms: <dK_mm, -B P^-1 B^T + B diag(x) B^T> + <B V, dK_mm B V> / p
    parts = (core, BV, inner, sums)
    if sp.on_device:  # one copy to the host, not four
        flat = sp.host(xp.concat([xp.reshape(a, (-1,)) for a in parts]))
        parts = _split(flat, [tuple(a.shape) for a in parts])
    core, BV, inner, sums = parts
    p_sum, v_sum = float(sums[0]), float(sums[1])
    mid = W @ (core - (np.eye(r) - C_inv)) @ W.T
    small = np.array([np.vdot(dK, mid) + np.vdot(BV, dK @ BV) / p for dK in dK_mm])
    kernel_part = 2 * inner + small + np.asarray(kdiag) * (p_sum - v_sum / p)
    return kernel_part, p_sum - v_sum / p


def _split(flat, shapes):
    """The host vector ``flat`` cut into arrays of ``shapes``, in order."""
    out, i = [], 0
    for shape in shapes:
        k = math.prod(shape)
        out.append(flat[i : i + k].reshape(shape))
        i += k
    return out
