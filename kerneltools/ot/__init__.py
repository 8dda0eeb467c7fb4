"""Entropic optimal transport: Sinkhorn divergences, potentials and plans.

What lives here: the transport solvers shared by the estimator
:class:`kerneltools.estimators.SinkhornTransport` and the torch loss
:class:`kerneltools.torch.SamplesLoss` (GeomLoss's log-domain Sinkhorn loop
with epsilon-scaling, :mod:`._sinkhorn`; its coarse-to-fine multiscale
version, :mod:`._multiscale`; the large-blur expansion, :mod:`._large_blur`;
refinement to a tolerance and the plan, :mod:`._solve`; the checks of the
inputs, :mod:`._inputs`) and the public functions :func:`sinkhorn_divergence`,
:func:`sinkhorn_potentials` and :func:`transport_plan`. What it may import:
:mod:`kerneltools.lazy`, :mod:`kerneltools.ranges`, :mod:`kerneltools.dask`,
:mod:`kerneltools.exceptions` and the utilities of :mod:`kerneltools._utils`;
never :mod:`kerneltools.estimators` or :mod:`kerneltools.torch` (which import
it), nor the engine directly.

The definitions are GeomLoss's (``geomloss.SamplesLoss("sinkhorn", ...)``), so
that values and gradients can be compared: the cost is ``|x - y|^p / p``
(``|x - y|^2 / 2`` for p = 2), the temperature ``eps = blur^p``, and
``reach`` (``rho = reach^p``) turns on unbalanced transport with KL-penalised
marginals. Every step is a LogSumExp reduction over one of the point clouds:
the ``N x M`` cost matrix and plan are never stored, and the temperature is a
run-time parameter, so the whole epsilon-scaling schedule runs one compiled
kernel.

Conventions that differ between libraries:

- GeomLoss's p = 2 cost is ``|x - y|^2 / 2``; POT's ``"sqeuclidean"`` metric
  is ``|x - y|^2``, so POT's ``reg`` is ``2 blur^2`` for the same plan, and
  its costs are twice ours.
- GeomLoss (and :func:`sinkhorn_divergence`) runs a fixed schedule with no
  convergence test: with ``scaling=0.5`` the value is a few percent below the
  converged one. ``scaling`` closer to 1 trades time for accuracy.
  :class:`~kerneltools.estimators.SinkhornTransport` and
  :func:`transport_plan` iterate further at the final temperature until the
  plan's marginals are right to ``tol``.

Arrays of other libraries (scikit-learn's ``array_api_dispatch`` conventions,
:mod:`kerneltools._utils._array_api`): CuPy arrays (and, with
``array_api_dispatch``, CUDA torch tensors) are solved on their device with
``backend`` "auto" or "cuda", every softmin a reduction of device arrays and
the loop's vectors device arrays; gradients, potentials, transformed points
and fitted arrays come back on the input's device, the value as a Python
float. With ``array_api_dispatch``, host Array API arrays (CPU torch tensors,
...) are solved on zero-copy NumPy views, their outputs returned in their
namespace. ``y``, ``a`` and ``b`` follow ``x``: they are moved to where ``x``
is computed.
"""

from ._functions import sinkhorn_divergence, sinkhorn_potentials, transport_plan

__all__ = ["sinkhorn_divergence", "sinkhorn_potentials", "transport_plan"]
