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

asv conventions: ``NotImplementedError`` in ``setup`` skips a parameter
combination (GeomLoss not installed, the numpy backend at the large size).
Each ``setup`` makes one call first: the first call of a formula compiles it.
"""

from __future__ import annotations

import numpy as np

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

DTYPES = ["float32", "float64"]
SMALL, LARGE = 1_000, 5_000


class _Sinkhorn:
    number = 1
    repeat = (2, 5, 20.0)
    rounds = 1
    warmup_time = 0.0  # setup makes the warm-up call
    timeout = 300

    def _setup(self, make, n, dtype):
        self.run = make(make_data(n, n, 3, dtype))
        self.run()  # compiles on the first call: never timed


class SinkhornDivergence(_Sinkhorn):
    """kerneltools: S_eps, D = 3 (value; value and gradients)."""

    params = (DTYPES, ["cpu", "numpy"], [SMALL, LARGE], [False, True])
    param_names = ("dtype", "backend", "N", "grad")

    def setup(self, dtype, backend, n, grad):
        if backend == "numpy" and n > SMALL:
            raise NotImplementedError("the numpy reference backend only at N = 1e3")
        self._setup(lambda d: kerneltools_callable(d, backend, grad), n, dtype)

    def time_divergence(self, *args):
        self.run()

    def peakmem_divergence(self, *args):
        self.run()


class SinkhornTransportFit(_Sinkhorn):
    """kerneltools: SinkhornTransport.fit to tol = 1e-6, then transform, D = 3."""

    params = (DTYPES, [SMALL, LARGE])
    param_names = ("dtype", "N")

    def setup(self, dtype, n):
        from kerneltools.estimators.optimal_transport import SinkhornTransport

        def make(data):
            est = SinkhornTransport(blur=0.1, backend="cpu")
            return lambda: est.fit(data["x"], data["y"]).transform(data["x"])

        self._setup(make, n, dtype)

    def time_fit_transform(self, *args):
        self.run()

    def peakmem_fit_transform(self, *args):
        self.run()


class GeomLossSinkhornDivergence(_Sinkhorn):
    """Baseline: GeomLoss SamplesLoss("sinkhorn"), online (pykeops) and tensorized."""

    params = (["float32"], ["online", "tensorized"], [SMALL, LARGE])
    param_names = ("dtype", "backend", "N")

    def setup(self, dtype, backend, n):
        try:
            import geomloss  # noqa: F401
        except Exception as exc:  # noqa: BLE001 (torch and pykeops fail in many ways)
            raise NotImplementedError(f"GeomLoss is not usable: {exc}") from None
        self._setup(lambda d: geomloss_callable(d, backend), n, dtype)

    def time_divergence(self, *args):
        self.run()

    def peakmem_divergence(self, *args):
        self.run()
