"""Sinkhorn divergences: kerneltools against GeomLoss and POT.

The problem (shared with ``asv_bench/ot_compare.py``, which imports this
module): the debiased Sinkhorn divergence ``S_eps`` between the uniform
measures on ``x ~ U[0, 1]^D`` and ``y ~ U[0, 1]^D + (0.3, 0, ..., 0)``, with
GeomLoss's definitions and defaults: cost ``|x - y|^2 / 2``, ``blur = 0.05``
(``eps = blur^2``), epsilon-scaling ratio ``scaling = 0.5``.

- kerneltools: ``sinkhorn_divergence(x, y, blur=0.05, scaling=0.5)``;
- GeomLoss: ``SamplesLoss("sinkhorn", p=2, blur=0.05, scaling=0.5,
  backend=...)(x, y)``, the same algorithm (``online`` runs on pykeops,
  ``tensorized`` stores the N x M matrices);
- POT: ``ot.bregman.empirical_sinkhorn2(x, y, reg=2 blur^2, isLazy=True)``,
  plain (no epsilon-scaling) log-domain Sinkhorn on one problem, which
  returns the primal cost ``<pi, |x - y|^2>``: its metric has no 1/2 (hence
  ``reg = 2 eps`` for the same plan, and the value is halved here to be in
  the same units), no entropy term and no debiasing. It is not the same
  quantity as S_eps (see ``ot_compare.py``).

The estimator ``SinkhornTransport`` (POT's domain-adaptation interface) is
timed against POT's ``ot.da.SinkhornTransport`` on the same samples with
blur = 0.1.

asv conventions (see ``_common.py``): ``NotImplementedError`` in ``setup``
skips a parameter combination (GeomLoss or POT not installed, the numpy
backend at the large size, no GPU for "cuda"). Each ``setup`` makes one call
first: the first call of a formula compiles it.
"""

from __future__ import annotations

import numpy as np

from ._common import (
    BACKENDS,
    DTYPES,
    _Timed,
    _Transformer,
    require_backend,
    require_module,
    require_small,
)

BLUR, SCALING, SHIFT = 0.05, 0.5, 0.3


def make_data(n: int, m: int, d: int, dtype, seed: int = 0) -> dict:
    """x (n, d) uniform in the unit cube, y (m, d) the same shifted along axis 0."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    x = rng.random((n, d)).astype(dtype)
    y = rng.random((m, d))
    y[:, 0] += SHIFT
    return {"x": x, "y": y.astype(dtype), "d": d}


def kerneltools_callable(data: dict, backend: str = "cpu", grad: bool = False):
    """S_eps (and its gradients with ``grad``) by kerneltools."""
    from kerneltools.estimators.optimal_transport import sinkhorn_divergence

    x, y = data["x"], data["y"]

    def run():
        return sinkhorn_divergence(
            x, y, blur=BLUR, scaling=SCALING, return_grad=grad, backend=backend
        )

    return run


def geomloss_callable(data: dict, backend: str = "online", grad: bool = False):
    """S_eps by GeomLoss; ImportError when GeomLoss or torch is missing."""
    import torch
    from geomloss import SamplesLoss

    loss = SamplesLoss("sinkhorn", p=2, blur=BLUR, scaling=SCALING, backend=backend)
    X, Y = torch.from_numpy(data["x"]), torch.from_numpy(data["y"])

    def run():
        if not grad:
            return loss(X, Y).item()
        Xg, Yg = X.clone().requires_grad_(True), Y.clone().requires_grad_(True)
        value = loss(Xg, Yg)
        gx, gy = torch.autograd.grad(value, [Xg, Yg])
        return value.item(), gx.numpy(), gy.numpy()

    return run


def pot_callable(
    data: dict, n_iter: int, stop_thr: float = 1e-6, batch_size: int = 1000
):
    """POT's lazy ``empirical_sinkhorn2``, halved: ``(value, iterations)``.

    ``stop_thr`` bounds the L1 marginal error (checked every 10 iterations);
    at most ``n_iter`` iterations. In float64 whatever the data's dtype: in
    float32 POT's marginal error stalls above 1e-6 and it runs all
    ``n_iter`` iterations.
    """
    import warnings

    import ot

    x, y = data["x"].astype(np.float64), data["y"].astype(np.float64)

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Sinkhorn did not converge"
            value, log = ot.bregman.empirical_sinkhorn2(
                x,
                y,
                2 * BLUR**2,
                numIterMax=n_iter,
                stopThr=stop_thr,
                isLazy=True,
                batchSize=batch_size,
                log=True,
            )
        return float(value) / 2, int(log["niter"]) + 1

    return run


# -- asv benchmarks ------------------------------------------------------------------

SMALL, LARGE = 1_000, 5_000
TRANSPORT_BLUR = 0.1  # SinkhornTransport: the domain-adaptation problem
POT_ITERS = 10  # iterations timed of POT's lazy Sinkhorn (see PotEmpiricalSinkhorn)


class _Sinkhorn(_Timed):
    def _setup(self, make, n, dtype):
        self.run = make(make_data(n, n, 3, dtype))
        self.run()  # compiles on the first call: never timed

    def time_divergence(self, *args):
        self.run()

    def peakmem_divergence(self, *args):
        self.run()


class _Transport(_Transformer):
    """``fit(Xs=x, Xt=y)`` and ``transform(Xs=x)``: POT's keywords, which
    kerneltools' SinkhornTransport accepts too (their positional orders differ)."""

    def _setup(self, make_model, n, dtype):
        data = make_data(n, n, 3, dtype)
        self._prepare(make_model, data["x"], data["y"])

    def _fit(self):
        return self.make_model().fit(Xs=self.X, Xt=self.y)

    def _query(self):
        return self.model.transform(Xs=self.X_query)


# kerneltools -----------------------------------------------------------------------


class SinkhornDivergence(_Sinkhorn):
    """kerneltools: S_eps, D = 3 (value; value and gradients)."""

    params = (DTYPES, BACKENDS, (SMALL, LARGE), (False, True))
    param_names = ("dtype", "backend", "N", "grad")

    def setup(self, dtype, backend, n, grad):
        require_small(backend, n, SMALL)
        require_backend(backend)
        self._setup(lambda d: kerneltools_callable(d, backend, grad), n, dtype)


class SinkhornTransport(_Transport):
    """kerneltools: SinkhornTransport(blur=0.1), ``fit`` to tol = 1e-6 and
    ``transform`` (the barycentric map of the N source points), D = 3."""

    params = (DTYPES, BACKENDS, (SMALL, LARGE))
    param_names = ("dtype", "backend", "N")

    def setup(self, dtype, backend, n):
        from kerneltools.estimators.optimal_transport import SinkhornTransport as OT

        require_small(backend, n, SMALL)
        require_backend(backend)
        self._setup(lambda: OT(blur=TRANSPORT_BLUR, backend=backend), n, dtype)


# baselines -------------------------------------------------------------------------


class GeomLossSinkhornDivergence(_Sinkhorn):
    """Baseline: GeomLoss SamplesLoss("sinkhorn"), online (pykeops) and tensorized,
    float32 (GeomLoss' usual dtype; a float64 run adds minutes, not information)."""

    params = (("float32",), ("online", "tensorized"), (SMALL, LARGE))
    param_names = ("dtype", "backend", "N")

    def setup(self, dtype, backend, n):
        require_module("geomloss")
        if backend == "online":
            # GeomLoss's online backend is pykeops (without it, geomloss fails
            # with a NameError inside its own module)
            require_module("pykeops")
        self._setup(lambda d: geomloss_callable(d, backend), n, dtype)


class PotEmpiricalSinkhorn(_Sinkhorn):
    """Baseline: POT's lazy ``empirical_sinkhorn2``, 10 iterations (float64), N = 1e3.

    Plain Sinkhorn without epsilon-scaling needs hundreds of iterations on
    this problem (590 at N = 1e3, see RESULTS.md): a fixed count times the
    cost of one iteration instead. Not the same quantity as S_eps.
    """

    params = (DTYPES, (SMALL, LARGE))
    param_names = ("dtype", "N")

    def setup(self, dtype, n):
        require_module("ot")
        if n > SMALL:
            raise NotImplementedError("POT's lazy Sinkhorn only at N = 1e3")
        self._setup(lambda d: pot_callable(d, POT_ITERS, stop_thr=0.0), n, dtype)


class PotSinkhornTransport(_Transport):
    """Baseline: POT's ``ot.da.SinkhornTransport`` (dense, log-domain Sinkhorn),
    ``reg_e = 2 blur^2`` for the same plan, tol = 1e-6; only at N = 1e3 (a
    fit takes one to two minutes at N = 5e3)."""

    params = (DTYPES, (SMALL, LARGE))
    param_names = ("dtype", "N")

    def setup(self, dtype, n):
        ot = require_module("ot")
        if n > SMALL:
            raise NotImplementedError("POT's dense SinkhornTransport only at N = 1e3")
        reg = 2 * TRANSPORT_BLUR**2
        self._setup(lambda: ot.da.SinkhornTransport(reg_e=reg, tol=1e-6), n, dtype)
