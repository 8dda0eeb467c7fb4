"""``pykeops.torch``, on kerneltools: change the import, keep the code.

``from kerneltools.keops.torch import Genred, KernelSolve, LazyTensor, Vi, Vj, Pm``
gives pykeops' torch names on :mod:`kerneltools.torch`: reductions are
``torch.autograd`` functions (gradients of any order, through the torch
binding), results are tensors on the inputs' device. ``KernelSolve`` is
differentiable with respect to every input (implicit differentiation: one
more solve in the backward pass, the operator taken as symmetric, as in
pykeops).

What it may import: :mod:`kerneltools.keops`' private modules,
:mod:`kerneltools.torch` and the public API.
"""

from __future__ import annotations

import numpy as np
import torch

from ... import torch as _ktorch
from ...torch._autograd import view as _view
from ...linalg import conjugate_gradient as _conjugate_gradient
from .._dtypes_torch import LazyTensor, Pm, Vi, Vj  # pykeops' dtype rule
from .._genred import Binding, GenredBase
from .._kernel_solve import KernelSolveBase
from .._generic import generic_functions
from ...lazy._formula_strings._parser import FormulaSyntaxError

ComplexLazyTensor = _ktorch.ComplexLazyTensor

__all__ = sorted(["Genred", "KernelSolve", "LazyTensor", "ComplexLazyTensor", "Vi", "Vj",
                  "Pm", "generic_sum", "generic_logsumexp", "generic_argmin",
                  "generic_argkmin", "FormulaSyntaxError"])

_DTYPES = {"float16": torch.float16, "float32": torch.float32, "float64": torch.float64}


class _TorchBinding(Binding):
    LazyTensor, ComplexLazyTensor = _ktorch.LazyTensor, _ktorch.ComplexLazyTensor
    minimum = staticmethod(_ktorch.minimum)
    maximum = staticmethod(_ktorch.maximum)

    def as_array(self, x, what):
        if isinstance(x, torch.Tensor):
            t = x
        else:
            try:
                t = torch.as_tensor(np.asarray(x))
            except Exception as exc:
                raise TypeError(f"{what} must be a tensor; {exc}") from None
        if t.is_complex() or t.dtype == torch.bool:
            raise TypeError(f"{what} must be a real tensor, got dtype {t.dtype}")
        return t

    def variable(self, a, cat, batched):
        if cat == 2:
            return _ktorch.LazyTensor(a[..., None, None, :] if batched else a.reshape(-1))
        if batched:
            return _ktorch.LazyTensor(a[..., :, None, :] if cat == 0 else a[..., None, :, :])
        return _ktorch.LazyTensor(a, axis=cat)

    def cast(self, a, dtype_name):
        return a.to(_DTYPES[dtype_name])

    def dtype_name(self, a):
        return str(a.dtype).replace("torch.", "")

    def concat(self, arrays):
        return torch.cat(arrays, dim=-1)

    # rebinding a built formula (Genred's repeated calls: see _genred.Binding)
    def data(self, a):
        d = _view(a)
        return d if type(d) is np.ndarray else None

    def level(self, lt):
        return lt._lt

    def wrap(self, template, lt, data):
        tensors = dict(template._tensors)
        tensors.update({node: arg for node, (_, arg) in data.items()})
        return type(template)._wrap(lt, tensors)


class Genred(GenredBase):
    """pykeops' generic reduction on torch tensors, differentiable.

    The parameters are those of :class:`kerneltools.keops.numpy.Genred`; the
    call takes tensors and returns tensors on their device.
    """

    binding = _TorchBinding()


class _Solve(torch.autograd.Function):
    """``u = (A + alpha I)^{-1} b``; backward by one more solve (A symmetric)."""

    @staticmethod
    def forward(ctx, call, args, alpha, b, *tensors):
        ctx.call, ctx.args = call, args
        with torch.no_grad():
            u = call.cg(args, b, alpha)
        ctx.save_for_backward(u, alpha, *tensors)
        return u

    @staticmethod
    def backward(ctx, g):
        call = ctx.call
        u, alpha, *tensors = ctx.saved_tensors
        args = list(ctx.args)
        with torch.no_grad():
            w = call.cg(args, g, alpha)  # (A + alpha I)^{-T} g, A = A^T
        grads = [None, None, None, w]  # call, args, alpha, b
        grads[2] = -(w * u).sum().reshape(alpha.shape) if ctx.needs_input_grad[2] else None
        wanted = [k for k, t in enumerate(tensors) if ctx.needs_input_grad[4 + k]]
        rest = [None] * len(tensors)
        if wanted:
            # d<g, u> = -<w, dA u>: differentiate <w, A(u)> with u and w fixed
            with torch.enable_grad():
                leaves = [tensors[k].detach().requires_grad_() for k in wanted]
                inputs = list(args)
                for k, leaf in zip(wanted, leaves):
                    inputs[call.positions[k]] = leaf
                Au = call.operator(inputs)(u.detach())
                dots = torch.autograd.grad(-(w.detach() * Au).sum(), leaves,
                                           allow_unused=True)
            for k, d in zip(wanted, dots):
                rest[k] = d
        return tuple(grads) + tuple(rest)


class KernelSolve(KernelSolveBase):
    """pykeops' ``KernelSolve`` on torch tensors: solve ``(A + alpha I) u = b``
    for the variable ``varinvalias``, differentiable.

    See :class:`kerneltools.keops.numpy.KernelSolve`. The conjugate-gradient
    iterations run on NumPy copies of the iterates (one value per point); each
    product with A is a kerneltools reduction on the tensors' device.
    """

    binding = _TorchBinding()

    def __call__(self, *args, backend="auto", device_id=-1, alpha=1e-10, eps=1e-6,
                 ranges=None):
        if len(args) != self.variables.count:
            raise TypeError(f"KernelSolve takes {self.variables.count} tensors, "
                            f"got {len(args)}")
        args = [self.binding.as_array(a, f"KernelSolve: argument {k}")
                for k, a in enumerate(args)]
        b = args[self.varinv]
        alpha_t = torch.as_tensor(alpha, dtype=b.dtype, device=b.device).reshape(())
        call = _SolveCall(self, backend, ranges, eps)
        others = [args[k] for k in call.positions]
        return _Solve.apply(call, args, alpha_t, b, *others)


class _SolveCall:
    """One KernelSolve call's options, kept by its autograd node for the backward."""

    def __init__(self, solver, backend, ranges, eps):
        self.solver, self.backend, self.ranges, self.eps = solver, backend, ranges, eps
        # the arguments other than the unknown, in the order _Solve gets them
        self.positions = [k for k in range(solver.variables.count) if k != solver.varinv]

    def operator(self, args):
        return self.solver._operator(args, self.backend, self.ranges)

    def cg(self, args, b, alpha):
        """``(A + alpha I)^{-1} b`` by conjugate gradients (NumPy iterates; one
        vector per problem of the batch, see ``KernelSolveBase._layout``)."""
        op = self.operator(args)
        a = float(alpha)
        host = b.detach().cpu().numpy()
        host, fold, unfold = self.solver._layout(args, host)

        def matvec(v):
            t = torch.from_numpy(unfold(v)).to(b.device, b.dtype)
            return fold(op(t).detach().cpu().numpy()) + a * v

        u, _ = _conjugate_gradient(matvec, fold(host), tol=self.eps)
        return torch.from_numpy(unfold(u)).to(b.device, b.dtype)


generic_sum, generic_logsumexp, generic_argmin, generic_argkmin = (
    generic_functions(Genred)[name] for name in
    ("generic_sum", "generic_logsumexp", "generic_argmin", "generic_argkmin"))
