"""GaussianProcessRegressor's iterative (BBMM) solver on a device: what differs.

:class:`._iterative.IterativeGP` is written once with the namespace of the
fit's space: its solves, log marginal likelihood, gradient reductions and
control variate (:mod:`._control`) run on device arrays as on NumPy ones.
:class:`DeviceGP` overrides only what the host does with host-only tools
(see :mod:`._array_api` for when it runs): the operator and preconditioner
(the host's are :class:`kerneltools.linalg.KernelOperator` and
:class:`~kerneltools.linalg.NystroemPreconditioner` subclasses, NumPy
only, whose ``K(X, Z)`` comes from scikit-learn's kernel; here dense blocks
evaluated on the device, :func:`._control.kernel_block`), the dense
escalation (a host Cholesky of the host's copy) and the predictions (no
dense-factor shortcut). The same numbers to rounding, with every n-sized
array in the device's namespace (CuPy on a GPU, array-api-strict's
``device1`` in the tests) and every reduction fed device arrays. Only
hyperparameter-sized things cross to the host: theta and its gradient, the
CG coefficients (a few numbers per iteration), the ``m x m`` and ``r x r``
matrices of the preconditioner (``m`` landmarks, ``r <= m``).

It serves ``c * RBF`` and ``c * Matern`` kernels (plus WhiteKernel terms;
:func:`kerneltools.kernels.stationary_form`), whose dense blocks it
evaluates where the data are: the preconditioner's ``K(X, Z)``, the
variances' ``K(X_train, X)`` and the control variate's ``n x m`` products
(:mod:`._control`). Other kernels are computed on the host
(:mod:`._array_api`'s rule: one copy per call).

- ``A = K + alpha I`` applies as one reduction on the rescaled points
  ``X / l`` (as :func:`._iterative.kernel_operator`).
- ``P`` is :class:`._iterative.StoredNystroem`'s preconditioner: its
  landmarks chosen on the host (randomly pivoted Cholesky reads at most
  ``max(20 m, 10^4)`` rows), ``K_mm`` and its factor on the host, the
  features ``F = K_nm W`` (``n x r``) and the diagonal ``D`` on the device.
- The probes ``z ~ N(0, P)`` are the host's draws (same seed, so the
  objective is the NumPy path's): their ``n x n_probes`` standard normal part
  is copied to the device once per fit and reused at every theta.
- Predictive variances and covariances always by CG on the device (the host
  path's dense Cholesky shortcut below 10^4 points is not taken: it would
  copy ``K`` to the host).

Memory: the features ``F`` are held whatever n (``8 n r`` bytes: 240 MB at
n = 10^5, 2.4 GB at 10^6, rank 300). The host holds them up to
``STORED_FEATURES_BYTES`` (n = 1.1 * 10^5 at rank 300) and above switches to
the lazy preconditioner, without the control variate: there the two paths'
gradient estimates differ (the same expectation; the device's with the
smaller variance), below they agree to rounding (tested).
"""

from __future__ import annotations

import copy

import numpy as np
import scipy.linalg

from ...kernels import stationary_form
from ...lazy import Vi, Vj
from ...linalg import robust_cholesky
from . import _iterative as it
from ._control import kernel_block

__all__ = ["DeviceGP", "serves"]

#: Rows per block of the dense ``rows x m`` kernel blocks (as the host's).
_ROWS = 4096


def serves(sk_kernel) -> bool:
    """Whether the device solver serves ``sk_kernel`` (a stationary form)."""
    return sk_kernel is not None and stationary_form(sk_kernel) is not None


class _Operator:
    """``V -> K V + shift V`` on the rescaled device points: one reduction
    per call; ``dtype`` tells CG the products' rounding (float64)."""

    dtype = np.float64

    def __init__(self, form, Xs, shift, sp, backend):
        x = sp.engine(Xs)
        self.K = form.phi(Vi(x).sqdist(Vj(x))) * form.c
        self.shift, self.sp, self.backend = shift, sp, backend

    def __call__(self, V):
        sp = self.sp
        out = sp.from_engine(self.K.matmul(sp.engine(V), backend=self.backend))
        shift = self.shift
        if not isinstance(shift, float) and V.ndim == 2:
            shift = shift[:, None]
        return out + shift * V


class DeviceNystroem:
    """The solver's preconditioner ``P = D + F F^T`` on device arrays: the
    host's ``StoredNystroem(smooth=True, diag_correction=True)`` (see
    :class:`kerneltools.linalg.NystroemPreconditioner`), its ``n``-sized
    parts (``F``, ``D^-1``) on the device. Called on a block of residuals
    (``P^-1 R``); ``Z``, ``_W``, ``_chol``, ``_F``, ``d_inv`` as the host's.

    Its application and draws are the host's functions
    (:func:`._iterative.woodbury_solve`, :func:`._iterative.woodbury_sample`).
    Its construction stays a twin of the host's: there
    :class:`kerneltools.linalg.NystroemPreconditioner` (public, NumPy only,
    any kernel: ``K(X, Z)`` from scikit-learn's kernel object, ``D`` by
    lazy reductions) builds ``W``, ``D`` and the factor; here the stationary
    form's dense blocks are evaluated on the device (:func:`._control.kernel_block`)
    so that ``K(X, Z)`` never crosses to the host."""

    def __init__(self, form, kernel, Xs, landmarks, shift, white, sp, probes):
        xp = self.xp = sp.xp
        self.sp, self.probes = sp, probes
        # the landmarks' rows on the host (m x d, float64) and their indices
        # on the device: both copied once per fit (:func:`_landmarks`)
        self.Z, index = landmarks
        Kmm = np.asarray(kernel(self.Z), dtype=np.float64)
        Kmm[np.diag_indices_from(Kmm)] -= white
        d = shift + white  # a float, or an n-vector of the device
        d_min = d if isinstance(d, float) else float(xp.min(d))
        if not d_min > 0:
            raise ValueError("NystroemPreconditioner: 'shift' must be > 0")
        jitter = min(1e-8 * float(np.trace(Kmm)), 1e-3 * d_min)
        jitter = max(jitter, 1e-14 * float(np.trace(Kmm)), np.finfo(np.float64).tiny)
        L = robust_cholesky(Kmm + jitter * np.eye(len(Kmm)))
        self._W = scipy.linalg.solve_triangular(L, np.eye(len(Kmm)), lower=True).T
        W = self._Wd = sp.put(self._W)
        Zs = self.Zs = xp.take(Xs, index, axis=0)  # the rescaled landmarks
        n, r = Xs.shape[0], self._W.shape[1]
        F, d_inv = [], []
        gram = xp.zeros((r, r), dtype=xp.float64, device=sp.device)
        for i0 in range(0, n, _ROWS):
            i1 = min(n, i0 + _ROWS)
            Fb = kernel_block(form, Xs[i0:i1, :], Zs, xp) @ W
            # D = shift + white + diag(K - F F^T), clipped at 0 (the FITC form)
            resid = xp.clip(form.c - xp.sum(Fb * Fb, axis=1), 0.0, None)
            db = 1.0 / ((d if isinstance(d, float) else d[i0:i1]) + resid)
            Fs = xp.sqrt(db)[:, None] * Fb
            gram = gram + xp.matrix_transpose(Fs) @ Fs
            F.append(Fb)
            d_inv.append(db)
        self._F = F[0] if len(F) == 1 else xp.concat(F, axis=0)
        self.d_inv = d_inv[0] if len(d_inv) == 1 else xp.concat(d_inv, axis=0)
        inner = np.eye(r) + sp.host(gram)
        self._chol = (robust_cholesky(inner, what="the Nystroem matrix"), True)

    def __call__(self, R):
        """``P^-1 R`` (:func:`._iterative.woodbury_solve`, as the host's)."""
        return it.woodbury_solve(self._F, self.d_inv, self._chol, R, self.sp)

    def logdet(self) -> float:
        """``log det P = log det D + log det(I + F^T D^-1 F)``."""
        return (-float(self.xp.sum(self.xp.log(self.d_inv)))
                + 2 * float(np.log(np.diag(self._chol[0])).sum()))

    def sample(self, n_samples, random_state=None):
        """``n_samples`` columns from ``N(0, P)``: the host's draws (``probes``
        keeps their device copies for the fit)."""
        e1, e2 = self.probes(len(self.Z), n_samples, random_state)
        return it.woodbury_sample(self._F, self.d_inv, e1, e2, self.xp)


class DeviceGP(it.IterativeGP):
    """:class:`._iterative.IterativeGP` on arrays of the device space
    ``sp`` (``est._X_fit``, ``est._y_fit`` and ``est._alpha_fit`` live there):
    ``solve``, ``lml`` and ``predict`` as the host's."""

    def __init__(self, est, kernel, sk_kernel, sp):
        self.est, self.sp = est, sp
        kernel = copy.copy(kernel)
        kernel.dense = sk_kernel.__call__  # K_mm, the landmarks' columns: on the host
        self.kernel, self.sk_kernel = kernel, sk_kernel
        self.form = stationary_form(sk_kernel)
        X = est._X_fit
        self.Xs = X / sp.put(self.form.length_scale)
        shift = est._alpha
        if np.ndim(shift) == 0:
            shift = float(shift)
        else:  # one per point: on the device, once per fit
            shift = _cached(est, "alpha", sp, shift)
        white = kernel.white_level()
        self.A = _Operator(self.form, self.Xs, shift + white, sp, it.run_backend(est))
        landmarks = getattr(est, "_landmarks", None)
        if landmarks is None:
            landmarks = it.landmarks_for(est, kernel)
        n = X.shape[0]
        self.M = DeviceNystroem(self.form, kernel, self.Xs,
                                _landmarks(est, sp, landmarks), shift, white, sp,
                                lambda m, p, seed: _probes(est, sp, n, m, p, seed))

    def _dense_solve(self, B):
        """``A^{-1} B`` by a dense Cholesky factor built on the host (from
        the scikit-learn kernel, as the host's), kept for later solves."""
        sp = self.sp
        if getattr(self, "_host_L", None) is None:
            self._host_L = it.dense_cholesky(self.sk_kernel, sp.host(self.est._X_fit),
                                             self.est._alpha)
        return sp.put(scipy.linalg.cho_solve((self._host_L, True), sp.host(B)))

    def _rescaled(self, form, dtype):
        """The rescaled points, computed once per theta (float64, as the
        device's products are)."""
        return self.Xs

    def _dense_pays(self, n_query):
        """Never on the device: a dense factor would copy ``K`` to the host."""
        return False

    def _query_blocks(self, X, kernel, cov):
        """:meth:`IterativeGP._query_blocks` from dense blocks evaluated on the
        device (:func:`._control.kernel_block`, white noise on the diagonal)."""
        sp, xp, form = self.sp, self.sp.xp, self.form
        Xs = X / sp.put(form.length_scale)
        white, nq = self.kernel.white_level(), X.shape[0]
        if cov:
            eye = xp.eye(nq, dtype=xp.float64, device=sp.device)
            prior = kernel_block(form, Xs, Xs, xp) + white * eye
        else:
            prior = xp.full((nq,), form.c + white, dtype=xp.float64, device=sp.device)
        return (lambda b0, b1: kernel_block(form, self.Xs, Xs[b0:b1, :], xp)), prior


def _cached(est, name, sp, host):
    """A device copy of the host array ``host``, made once per fit (kept in
    ``est._device_arrays``, never pickled)."""
    table = est.__dict__.setdefault("_device_arrays", {})
    if name not in table:
        table[name] = sp.put(np.asarray(host, dtype=np.float64))
    return table[name]


def _landmarks(est, sp, landmarks):
    """``(rows, index)``: the landmarks' rows of the training points on the
    host (float64) and their indices on the device, made once per set of
    landmarks (kept in ``est._device_arrays``, never pickled)."""
    landmarks = np.asarray(landmarks, dtype=np.int64)
    key = ("landmarks", landmarks.tobytes())
    table = est.__dict__.setdefault("_device_arrays", {})
    if key not in table:
        index = sp.put(landmarks)
        table[key] = (sp.host(sp.xp.take(est._X_fit, index, axis=0)), index)
    return table[key]


def _probes(est, sp, n, m, p, seed):
    """``(e1, e2)``: the standard normal draws of :meth:`StoredNystroem.sample`
    (``e1`` n x p on the device, ``e2`` m x p), drawn once per fit."""
    key = ("probes", n, m, p, seed)
    table = est.__dict__.setdefault("_device_arrays", {})
    if key not in table:
        rng = np.random.default_rng(seed)
        e1 = rng.standard_normal((n, p))
        table[key] = (sp.put(e1), sp.put(rng.standard_normal((m, p))))
    return table[key]
