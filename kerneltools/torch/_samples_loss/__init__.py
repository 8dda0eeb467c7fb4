"""``SamplesLoss``: GeomLoss's losses between point clouds, as a torch module (private).

Exported as :class:`kerneltools.torch.SamplesLoss`. The definitions are
GeomLoss 0.3.1's (``geomloss.SamplesLoss``), so that values and gradients can
be compared term by term:

- ``"sinkhorn"``: the (debiased) Sinkhorn divergence of
  :func:`kerneltools.ot.sinkhorn_divergence`
  (Feydy et al., AISTATS 2019), solved by the same symmetric log-domain loop
  with epsilon-scaling. The loop runs outside autograd; the backward pass is
  the envelope-theorem gradient of its last extrapolation step (one
  SumSoftMaxWeight reduction per potential), as GeomLoss's autograd computes
  it.

Every loss is one autograd node (:class:`._device._LossValue`)
whose forward runs the engine's reductions on the tensors' data (see "Where
it runs" below) and whose backward runs the gradient reductions, written out
below. Under ``create_graph=True`` (a gradient penalty, say) the kernel
losses' backward computes the same gradients as differentiable torch
operations (:class:`_KernelConv`, whose own backward is the engine's
symbolic derivative of the summand): gradients of gradients, exact to
second order for the three kernel losses (for the energy and Laplacian
kernels everywhere but where two points coincide, where ``|x - y|`` is not
twice differentiable and the derivatives of its term are taken as 0; see
:func:`_kernel`). Sinkhorn and Hausdorff raise
``NotImplementedError`` there: their gradients hold the dual potentials
(softmins) fixed, and their exact second derivatives need the derivatives
of the potentials, the solution of a linear system through the Sinkhorn
fixed point, which is not computed. (GeomLoss's double backward of these
differentiates its last extrapolation step with the potentials detached: a
second derivative that is not the loss's.)
- ``"gaussian"``, ``"laplacian"``, ``"energy"``: the kernel norms
  ``1/2 |a - b|_k^2`` with ``k(x, y) = exp(-|x - y|^2 / 2 blur^2)``,
  ``exp(-|x - y| / blur)`` and ``-|x - y|``, with their exact gradients.
- ``"hausdorff"``: the weighted Hausdorff divergence of Feydy and Trouvé,
  "Global divergences between measures: from Hausdorff distance to Optimal
  Transport" (ShapeMI 2018), Section 3: soft nearest-neighbour projections
  ``b_x = softmin_eps(C_xy, log b)`` etc., and
  ``H = <a, b_x - a_x> + <b, a_y - b_y>``. (GeomLoss 0.3.1 lists it but raises
  ``KeyError`` on it.)

The ``N x M`` matrices are never stored: every step is a reduction.

Where it runs (:mod:`._device`): CPU tensors are read through
zero-copy NumPy views. CUDA tensors, with CuPy seeing a GPU, stay on their
device: they become CuPy arrays through DLPack (no copy), the Sinkhorn loop
and every reduction run there (the solvers' vector arithmetic is written to
the Array API standard), and the value, the gradients and the potentials
come back as tensors on that device through DLPack; only scalars cross to
the host (and, with ``backend="multiscale"``, one copy of the points for
the cells and the block choice). Without CuPy or a GPU, or with
``backend="cpu"`` or ``"numpy"``, CUDA tensors are copied to the host and
the results sent back (``verbose`` says so).

What lives here: the loss, its inputs (:mod:`._inputs`) and where it computes
(:mod:`._device`). What it may import: :mod:`kerneltools.ot`'s solvers,
:mod:`kerneltools.lazy`, the torch binding; never the estimators.
"""

from __future__ import annotations

import torch

from ._device import Solution, TensorPlace, finish, tensor_place
from ._inputs import check_inputs, number, reconcile_masses, require_mass
from ...config import check_backend
from ...ot import _multiscale as multiscale
from ...ot import _sinkhorn as sk
from ...ot import _large_blur as limit
from ...ot._inputs import check_problem
from ...lazy import Vi, Vj

__all__ = ["SamplesLoss"]

LOSSES = ("sinkhorn", "hausdorff", "energy", "gaussian", "laplacian")

#: GeomLoss's backend names: all of them run our reductions (never a dense
#: matrix); "multiscale" asks for the block-sparse Sinkhorn.
GEOMLOSS_BACKENDS = ("auto", "tensorized", "online", "multiscale")

#: Added to squared distances before the square root of the energy and
#: Laplacian kernels, so that no step of their gradients (nor of the
#: derivatives of those, where ``1 / r^3`` appears) divides by 0 or overflows
#: float32 where points coincide. It moves distances by at most 1e-12.
_SQRT_FLOOR = 1e-24


class SamplesLoss(torch.nn.Module):
    """Losses between sampled measures, with GeomLoss's signature and values.

    Parameters
    ----------
    loss : {"sinkhorn", "hausdorff", "energy", "gaussian", "laplacian"}, \
default="sinkhorn"
        The loss; see the module docstring for the formulas.
    p : {1, 2}, default=2
        The ground cost ``|x - y|^p / p`` of ``"sinkhorn"`` and ``"hausdorff"``.
    blur : float > 0, default=0.05
        The temperature ``eps = blur^p`` (Sinkhorn, Hausdorff), or the kernel's
        standard deviation (Gaussian, Laplacian). Unused by ``"energy"``.
        This and the other numeric parameters may be Python or NumPy numbers
        or one-element tensors (as GeomLoss takes them), read once as
        finite floats: no gradient flows to them.
    reach : float > 0 or None, default=None
        Unbalanced transport with marginal penalty ``rho = reach^p``
        (``"sinkhorn"`` only).
    diameter : float > 0 or None, default=None
        Upper bound on ``|x_i - y_j|``, the first scale of the epsilon-scaling
        schedule; None: the diagonal of the bounding box of the data.
    scaling : float in (0, 1), default=0.5
        Ratio of successive blurs in the epsilon-scaling schedule. As in
        GeomLoss, the schedule is not run to convergence: at 0.5 the value is
        typically within 2-5% of the converged one, further on small
        problems; 0.9-0.99 for the converged value.
    truncate : float > 0 or None, default=5
        With ``backend="multiscale"``: blocks of clusters whose transport
        weight is below ``exp(-truncate^2 / 2)`` are skipped (see
        :mod:`kerneltools.ot._multiscale`). Otherwise unused.
    cost : str, callable or None, default=None
        ``"sinkhorn"`` and ``"hausdorff"``: the ground cost instead of
        ``|x - y|^p / p``, as GeomLoss takes it: a KeOps formula string in the
        variables ``X`` and ``Y`` (GeomLoss's online backend's form, e.g.
        ``"SqDist(X,Y) / IntCst(2)"``), or a callable ``cost(x_i, y_j)`` of
        two :class:`~kerneltools.LazyTensor` s returning the scalar formula
        ``C(x_i, y_j)`` (GeomLoss's tensorized backend takes a callable of
        dense tensors instead). Its gradient is the formula's symbolic
        derivative. Not with ``backend="multiscale"`` (the block pruning
        bounds ``|x - y|^p``).
    kernel : None
        GeomLoss's custom kernels are not supported: a value other than None
        raises.
    cluster_scale : float >= 0 or None, default=None
        The cluster width of ``backend="multiscale"``; None: chosen from the
        diameter, the dimension and the number of points; 0: cells of width
        0, one point each, which is the plain Sinkhorn of the other backends.
        Unused by the other backends (as in GeomLoss).
    debias : bool, default=True
        ``"sinkhorn"``: the Sinkhorn divergence ``S`` (True) or the entropic
        transport cost ``OT`` (False).
    potentials : bool, default=False
        Return the dual potentials ``(F, G)`` (shaped as the weights) instead
        of the loss. No gradient flows through them (GeomLoss's do).
    verbose : bool, default=False
        Print the Sinkhorn schedule (multiscale: the blocks kept per scale).
    backend : str, default="auto"
        GeomLoss's names ``"auto"``, ``"tensorized"``, ``"online"`` run the
        engine's dense (linear-memory) reductions on the configured backend;
        ``"multiscale"`` the block-sparse Sinkhorn for D <= 3; or one of the
        engine's backends ``"cpu"``, ``"cuda"``, ``"numpy"``.

    Examples
    --------
    >>> import torch
    >>> from kerneltools.torch import SamplesLoss
    >>> x = torch.rand(200, 3, dtype=torch.float64, requires_grad=True)
    >>> y = torch.rand(150, 3, dtype=torch.float64)
    >>> L = SamplesLoss("sinkhorn", blur=0.05)(x, y)
    >>> L.backward()
    >>> x.grad.shape
    torch.Size([200, 3])
    """

    def __init__(
        self,
        loss="sinkhorn",
        p=2,
        blur=0.05,
        reach=None,
        diameter=None,
        scaling=0.5,
        truncate=5,
        cost=None,
        kernel=None,
        cluster_scale=None,
        debias=True,
        potentials=False,
        verbose=False,
        backend="auto",
    ):
        super().__init__()
        self.loss, self.p, self.blur, self.reach = loss, p, blur, reach
        self.diameter, self.scaling, self.truncate = diameter, scaling, truncate
        self.cost, self.kernel, self.cluster_scale = cost, kernel, cluster_scale
        self.debias, self.potentials, self.verbose = debias, potentials, verbose
        self.backend = backend
        self._check_parameters()

    def _check_parameters(self):
        who = "SamplesLoss"
        if self.loss not in LOSSES:
            raise ValueError(
                f"The 'loss' parameter of {who} must be one of {list(LOSSES)}; "
                f"got {self.loss!r}"
            )
        if self.p not in (1, 2) or isinstance(self.p, bool):
            raise ValueError(f"The 'p' parameter of {who} must be 1 or 2; got {self.p!r}")
        # GeomLoss takes numbers or 0-d tensors: read once, as floats
        self.blur = number(self.blur, "blur")
        for name in ("reach", "diameter"):
            setattr(self, name, number(getattr(self, name), name, optional=True))
        self.cluster_scale = number(self.cluster_scale, "cluster_scale",
                                    low_open=False, optional=True)
        self.scaling = number(self.scaling, "scaling", high=1.0)
        self.truncate = number(self.truncate, "truncate", optional=True)
        if self.kernel is not None:
            raise NotImplementedError(
                f"{who}: custom 'kernel' functions or formulas are not supported; "
                "leave kernel=None (the named kernels of 'loss')"
            )
        self._cost = _cost_formula(self.cost, who)
        if self.cost is not None and self.loss not in ("sinkhorn", "hausdorff"):
            raise ValueError(f"{who}: 'cost' applies to loss='sinkhorn' or 'hausdorff'; "
                             f"got loss={self.loss!r}")
        if self.cost is not None and self.backend == "multiscale":
            raise ValueError(f"{who}: backend='multiscale' needs the cost |x - y|^p / p "
                             "(its block pruning bounds it); leave cost=None or use "
                             "backend='online'")
        if self.reach is not None and self.loss != "sinkhorn":
            raise ValueError(
                f"{who}: 'reach' (unbalanced transport) applies to loss='sinkhorn' "
                f"only; got loss={self.loss!r}"
            )
        if self.backend in GEOMLOSS_BACKENDS:
            return
        try:
            check_backend(self.backend, who)
        except ValueError as exc:  # an unknown name: GeomLoss's are valid too
            raise ValueError(f"The 'backend' parameter of {who} must be one of "
                             f"{list(GEOMLOSS_BACKENDS)} (GeomLoss's) or an engine "
                             f"backend; {exc}") from None

    @property
    def _engine_backend(self):
        return None if self.backend in GEOMLOSS_BACKENDS else self.backend

    def forward(self, *args):
        """``L(x, y)`` (uniform weights) or ``L(a, x, b, y)``.

        ``x`` (N, D) or (B, N, D), ``y`` (M, D) or (B, M, D); ``a``, ``b``
        (N,) / (M,) or (B, N) / (B, M). Returns a scalar tensor, or (B,) with a
        batch dimension; ``potentials=True``: ``(F, G)`` shaped as ``a``, ``b``.

        float32 and float64 points are computed in their dtype, float16 and
        bfloat16 in float32 (the result returned in their dtype), integer
        points in float64 (see :mod:`._inputs`).

        Parameters
        ----------
        *args : Tensor
            ``x, y`` or ``a, x, b, y``: the points and, optionally, their
            weights.

        Returns
        -------
        Tensor or tuple of Tensor
            The loss (a scalar, or (B,) with a batch dimension); with
            ``potentials=True`` the dual potentials ``(F, G)``.
        """
        inputs = check_inputs(args)
        if self.loss in ("sinkhorn", "hausdorff"):
            require_mass(inputs, self.loss)
        if self.loss == "sinkhorn" and self.reach is None:
            inputs = reconcile_masses(inputs)
        a, x, b, y = inputs.a, inputs.x, inputs.b, inputs.y
        place = tensor_place(x, self.backend, self.verbose)
        with place.running((x, y)):
            diameter = self.diameter
            if diameter is None and self.loss == "sinkhorn":
                # GeomLoss's: one schedule for the whole batch, from all its points
                D = x.shape[-1]
                diameter = sk.max_diameter(place.array(x.reshape(-1, D)),
                                           place.array(y.reshape(-1, D)), place.space)
            outs = [self._one(place, a[k], x[k], b[k], y[k], diameter)
                    for k in range(x.shape[0])]
        # half-precision inputs were computed in float32 (and some unbalanced
        # solves in float64): back to the input's dtype
        if self.potentials:
            F, G = (torch.stack([v.to(inputs.dtype) for v in t]) for t in zip(*outs))
            return (F, G) if inputs.batched else (F[0], G[0])
        values = torch.stack([v.to(inputs.dtype) for v in outs])
        return values if inputs.batched else values[0]

    def _one(self, place, a, x, b, y, diameter):
        """The loss (or potentials) of one pair of measures, computed in
        ``place``."""
        if self.loss == "sinkhorn":
            solution = sinkhorn_solution(self, place, a, x, b, y, diameter)
        elif self.loss == "hausdorff":
            solution = _hausdorff(self, place, a, x, b, y)
        else:
            solution = _kernel_loss(self, place, a, x, b, y)
        return finish(self, solution, a, x, b, y)


def _cost_formula(cost, who):
    """A user's ``cost`` as a callable ``(x_i, y_j) -> formula``, or None."""
    if cost is None or callable(cost):
        return cost
    if not isinstance(cost, str):
        raise TypeError(f"{who}: 'cost' must be a KeOps formula string in X and Y, a "
                        f"callable of LazyTensors, or None; got {type(cost).__name__}")
    from ... import lazy
    from ...lazy._formula_strings import check, evaluate, parse_formula

    tree = parse_formula(cost)
    check(tree, {"X", "Y"}, cost)

    def no_inline(index):
        raise ValueError(f"{who}: 'cost' {cost!r}: use the names X and Y, not Var(...)")

    return lambda x_i, y_j: evaluate(tree, {"X": x_i, "Y": y_j}, no_inline, lazy, cost)


# -- Sinkhorn divergence (GeomLoss's sinkhorn_samples) --------------------------------
#
# The loop of kerneltools.ot._sinkhorn runs on the tensors' arrays
# (NumPy views, or CuPy arrays on the device), outside autograd (GeomLoss
# runs it under torch.no_grad too). The gradients are the envelope-theorem
# gradient of the last extrapolation step (Feydy's thesis, Eq. 3.226-227),
# the potentials' inputs held fixed as in GeomLoss: a_i (grad f_ba -
# grad f_aa)(x_i) for the points (one SumSoftMaxWeight reduction per
# potential), the potentials for the weights.


def problem(loss, place: TensorPlace, a, x, b, y, diameter) -> sk.Problem:
    """The :class:`Problem` of one pair of measures, its arrays in ``place``'s
    space, GeomLoss's schedule from ``diameter`` (that of the whole batch, or
    the user's)."""
    prob = check_problem(
        *(place.array(t) for t in (x, y, a, b)), p=loss.p, blur=loss.blur,
        reach=loss.reach, scaling=loss.scaling, caller="SamplesLoss", space=place.space,
    )
    if diameter is not None and diameter > 0:
        d = float(diameter)
        prob = prob._replace(
            diameter=d, eps_list=sk.epsilon_schedule(prob.p, d, loss.blur, loss.scaling)
        )
    prob = prob._replace(cost=loss._cost)
    if loss.verbose:
        where = f" (on the device: {prob.space})" if prob.space.on_device else ""
        print(f"SamplesLoss: Sinkhorn over {len(prob.eps_list)} temperatures, "
              f"eps = {', '.join(f'{e:.3g}' for e in prob.eps_list)}{where}")
    return prob


def solve(prob: sk.Problem, loss, debias: bool, place: TensorPlace) -> Solution:
    """GeomLoss's "online" Sinkhorn (every softmin a full LogSumExp reduction)
    or, with ``backend="multiscale"``, the block-sparse coarse-to-fine one.

    Where the blur dwarfs the costs, the loop's potentials lose their
    precision (an error ``~ eps u``): the value, and there the potentials,
    then come from the large-eps expansion (:mod:`kerneltools.ot._large_blur`).
    """
    backend = place.backend(loss._engine_backend)
    # cluster_scale=0: cells of width 0, one point each: the plain Sinkhorn
    coarse = loss.backend == "multiscale" and loss.cluster_scale != 0
    pot, costs, _ = multiscale.solve(
        prob, debias=debias, backend=backend, multiscale=coarse,
        truncate=loss.truncate, cluster_scale=loss.cluster_scale, verbose=loss.verbose)
    value = None
    regime = limit.regime(prob, backend, limit.largest(pot.f_ba, pot.g_ab, pot.f_aa,
                                                         pot.g_bb))
    if regime.value:
        exp = limit.expansion(prob, debias, backend)
        value = exp.value
        if regime.potentials:
            pot = pot._replace(f_ba=exp.f_ba, g_ab=exp.g_ab, f_aa=exp.f_aa, g_bb=exp.g_bb)
        if loss.verbose:
            print(f"SamplesLoss: blur^p is {regime.ratio:.3g} times the largest cost: "
                  "the value from the large-blur expansion"
                  + (", the potentials from its first term" if regime.potentials else ""))
    return solution(prob, pot, debias, lambda: sk.value_gradients(prob, pot, costs, backend),
                    place, value)


def solution(prob, pot: sk.Potentials, debias: bool, point_gradients,
             place: TensorPlace, value=None) -> Solution:
    """The :class:`Solution` of solved potentials (arrays of ``place``'s
    space); ``point_gradients()`` gives ``(grad_x, grad_y)``; ``value``:
    the loss, if not that of the potentials."""
    da, db = sk.weight_gradients(pot, debias)
    F, G = pot.f_ba, pot.g_ab
    if debias:
        F, G = F - pot.f_aa, G - pot.g_bb

    def gradients(need):
        dx, dy = point_gradients() if need[1] or need[3] else (None, None)
        return da, dx, db, dy

    if value is None:
        value = float(sk._f64(prob.a) @ da + sk._f64(prob.b) @ db)
    return Solution(value, gradients, (F, G),
                    why="loss='sinkhorn' (its envelope-theorem gradient holds the dual "
                    "potentials fixed; their derivatives are not computed)", place=place)


def sinkhorn_solution(loss, place: TensorPlace, a, x, b, y, diameter) -> Solution:
    """The solved Sinkhorn loss of :class:`SamplesLoss` for one pair of measures.

    Unbalanced transport at a blur that dwarfs the costs is solved in
    float64 where the input's dtype cannot resolve it, and refused where
    float64 cannot either (:mod:`kerneltools.ot._large_blur`).
    """
    prob = problem(loss, place, a, x, b, y, diameter)

    def in_float64():
        if loss.verbose:
            print("SamplesLoss: unbalanced transport at this blur solved in float64")
        return problem(loss, place, *(v.to(torch.float64) for v in (a, x, b, y)),
                       diameter)

    prob = limit.resolve_unbalanced(prob, place.backend(loss._engine_backend),
                                    in_float64, "SamplesLoss", loss.reach)
    return solve(prob, loss, bool(loss.debias), place)


# -- kernel norms (GeomLoss's kernel_samples) ----------------------------------------


def _kernel(name, u, v, blur):
    """``(k(u_i, v_j), grad_u k(u_i, v_j))`` as formulas.

    The gradient of ``|u - v|`` is 0 where ``u = v`` (KeOps' and GeomLoss's
    online convention), and so are its derivatives: the Hessian of
    ``|u - v|`` is singular there (``~ 1 / |u - v|``), and a point's own
    term ``k(x_i, x_i)`` is a constant of the loss, so its derivatives of
    every order are 0. The ``ifelse`` selects 0 there; its derivative selects
    0 too (the ``ifelse``'s derivative rule), which is what makes the second
    derivatives of the energy and Laplacian losses exact elsewhere and 0 on
    the diagonal, as dense autograd of ``where(d > 0, d, 0)`` gives them.
    """
    diff = u - v
    if name == "gaussian":
        k = (u.sqdist(v) * (-0.5 / blur**2)).exp()
        return k, diff * (k * (-1.0 / blur**2))
    d2 = u.sqdist(v)
    r = (d2 + _SQRT_FLOOR).sqrt()
    # u = v, tested exactly: the C backend's expanded |u|^2 + |v|^2 - 2 <u, v>
    # (D >= 16) can leave a point's squared distance to itself at ~eps |u|^2,
    # whose square root (1e-8 |u| in float64, 3e-4 |u| in float32) would
    # enter k(x_i, x_i); the derivatives are 0 there in any case
    same = -diff.abs().sum(-1)
    dist = same.ifelse(0.0, r)
    if name == "laplacian":
        k = (dist * (-1.0 / blur)).exp()
        return k, same.ifelse(0.0, diff * (-k / (r * blur)))
    return -dist, same.ifelse(0.0, -diff / r)  # energy


def _kernel_loss(loss, place: TensorPlace, a, x, b, y):
    """``1/2 <a, K_xx a> + 1/2 <b, K_yy b> - <a, K_xy b>``, exact gradients:
    ``d/da = K_xx a - K_xy b``, ``d/dx_i = a_i sum_j (a_j grad k(x_i, x_j) -
    b_j grad k(x_i, y_j))`` (k symmetric), and the mirror for b and y; arrays
    of ``place``'s space."""
    be, blur, name = place.backend(loss._engine_backend), float(loss.blur), loss.loss
    sp = place.space
    xp = sp.xp
    A, X, B, Y = (place.array(t) for t in (a, x, b, y))
    dt = sp.np_dtype(X)
    A, B = sp.astype(A, dt), sp.astype(B, dt)

    def conv(u, v, w, grad=False):
        k, dk = _kernel(name, Vi(sp.engine(u)), Vj(sp.engine(v)), blur)
        F = dk if grad else k
        out = place.from_engine(
            (F * Vj(sp.engine(xp.reshape(w, (-1, 1))))).sum(axis=1, backend=be))
        return sk._f64(out if grad else out[:, 0])

    a_x, b_y, b_x, a_y = conv(X, X, A), conv(Y, Y, B), conv(X, Y, B), conv(Y, X, A)
    A64, B64 = sk._f64(A), sk._f64(B)
    value = 0.5 * A64 @ a_x + 0.5 * B64 @ b_y - A64 @ b_x

    def gradients(need):
        da = a_x - b_x if need[0] else None
        db = b_y - a_y if need[2] else None
        dx = _column(A64) * (conv(X, X, A, True) - conv(X, Y, B, True)) if need[1] else None
        dy = _column(B64) * (conv(Y, Y, B, True) - conv(Y, X, A, True)) if need[3] else None
        return da, dx, db, dy

    def torch_gradients(need, a, x, b, y):
        def conv(u, v, w, grad=False):
            return _KernelConv.apply((name, blur, grad, be, place), u, v, w)

        da = conv(x, x, a) - conv(x, y, b) if need[0] else None
        db = conv(y, y, b) - conv(y, x, a) if need[2] else None
        dx = a[:, None] * (conv(x, x, a, True) - conv(x, y, b, True)) if need[1] else None
        dy = b[:, None] * (conv(y, y, b, True) - conv(y, x, a, True)) if need[3] else None
        return da, dx, db, dy

    return Solution(value, gradients, (a_x - b_x, b_y - a_y), torch_gradients, place=place)


def _column(v):
    """A vector ``(N,)`` as a column ``(N, 1)``, in its namespace."""
    return sk.namespace(v).reshape(v, (-1, 1))


class _KernelConv(torch.autograd.Function):
    """``sum_j F(u_i, v_j) w_j`` with ``F = k`` or ``grad_u k`` (``spec``:
    ``(name, blur, grad, backend, place)``): a differentiable reduction whose
    backward reduces the engine's symbolic derivatives of the summand in
    ``u_i``, ``v_j`` and ``w_j`` (once differentiable: second order for the
    loss). The reductions read the tensors in ``place`` (NumPy views, or CuPy
    arrays on the device) and their outputs come back as tensors on the
    inputs' device."""

    @staticmethod
    def _summand(spec, u, v, w):
        name, blur, grad, _, place = spec
        ui, vj, wj = Vi(place.engine(u)), Vj(place.engine(v)), Vj(place.engine(w[:, None]))
        k, dk = _kernel(name, ui, vj, blur)
        return (dk if grad else k) * wj, (ui, vj, wj)

    @staticmethod
    def forward(ctx, spec, u, v, w):
        ctx.spec = spec
        ctx.save_for_backward(u, v, w)
        H, _ = _KernelConv._summand(spec, u, v, w)
        place = spec[4]
        out = place.from_engine(H.sum(axis=1, backend=spec[3]))
        return place.tensor(out if spec[2] else out[:, 0], u)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        spec, (u, v, w) = ctx.spec, ctx.saved_tensors
        place, be = spec[4], spec[3]
        H, (ui, vj, wj) = _KernelConv._summand(spec, u, v, w)
        E = Vi(place.engine(g.reshape(len(u), -1).to(u.dtype)))
        need = ctx.needs_input_grad[1:]
        du = dv = dw = None
        if need[0]:
            du = place.tensor(place.from_engine(H.grad(ui, E).sum(axis=1, backend=be)), g)
        if need[1] or need[2]:  # one reduction over i for both j-variables
            d = u.shape[1]
            vw = place.from_engine(
                H.grad(vj, E).concat(H.grad(wj, E)).sum(axis=0, backend=be))
            dv, dw = place.tensor(vw[:, :d], g), place.tensor(vw[:, d], g)
        out = [None, du, dv if need[1] else None, dw if need[2] else None]
        return tuple(out)


# -- Hausdorff divergence -----------------------------------------------------------


def _hausdorff(loss, place: TensorPlace, a, x, b, y):
    """``<a, b_x - a_x> + <b, a_y - b_y>``: soft nearest neighbours at eps.

    The gradient is GeomLoss's convention for softmins (its Sinkhorn's last
    step): each softmin is differentiated in its output points, its input
    points and log-weights held fixed; the weights' gradients are the
    potentials ``b_x - a_x`` and ``a_y - b_y``.
    """
    be, p = place.backend(loss._engine_backend), int(loss.p)
    sp = place.space
    eps = float(loss.blur) ** p
    A, X, B, Y = (place.array(t) for t in (a, x, b, y))
    dt = sp.np_dtype(X)
    A, B = sp.astype(A, dt), sp.astype(B, dt)
    la, lb = sk.log_weights(A), sk.log_weights(B)
    pairs = {"a_x": (X, X, la), "b_y": (Y, Y, lb), "b_x": (X, Y, lb), "a_y": (Y, X, la)}
    costs = {k: sk.cost_matrix(p, u, v, loss._cost, sp) for k, (u, v, _) in pairs.items()}
    softmin = sk.lse_softmin(be, sp)
    s = {k: sk._f64(softmin(eps, costs[k], h)) for k, (_, _, h) in pairs.items()}
    prob = sk.Problem(X, Y, A, B, p, eps, None, [eps], 0.0, loss._cost, sp)
    if limit.regime(prob, be, limit.largest(*s.values())).value:
        s = limit.softmins(prob, be)  # blur dwarfs the costs: see _sinkhorn_limit
    F, G = s["b_x"] - s["a_x"], s["a_y"] - s["b_y"]
    A64, B64 = sk._f64(A), sk._f64(B)

    def grad(k):
        return sk._f64(sk.softmin_gradient(eps, costs[k], pairs[k][2], be, sp))

    def gradients(need):
        dx = _column(A64) * (grad("b_x") - grad("a_x")) if need[1] else None
        dy = _column(B64) * (grad("a_y") - grad("b_y")) if need[3] else None
        return F, dx, G, dy

    return Solution(A64 @ F + B64 @ G, gradients, (F, G),
                    why="loss='hausdorff' (its gradient holds its potentials, the softmins, "
                    "fixed; their derivatives are not computed)", place=place)
