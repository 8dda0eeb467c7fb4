"""``KernelSolve`` as pykeops spells it, for either binding.

:class:`KernelSolveBase` is a :class:`~._genred.GenredBase` (a ``Sum``
reduction read from the same formula strings and aliases) that solves
``(A + alpha I) u = b`` for a formula ``A`` linear in one variable, the
unknown ``varinvalias``, by conjugate gradients on those reductions: it gives
the operator ``u -> A u`` (:meth:`~KernelSolveBase._operator`) and the layout
of the right-hand side (:meth:`~KernelSolveBase._layout`); the bindings'
subclasses (``kerneltools.keops.numpy`` / ``.torch``) run the solve.
"""

from __future__ import annotations

import re

import numpy as np

from ..lazy._solve import cg_layout
from ._genred import GenredBase, _cat_name

__all__ = ["KernelSolveBase"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")


class KernelSolveBase(GenredBase):
    """pykeops' ``KernelSolve``: see the subclasses in
    ``kerneltools.keops.numpy`` / ``.torch``."""

    who = "KernelSolve"

    def __init__(self, formula, aliases, varinvalias, axis=0, dtype=None,
                 opt_arg=None, cuda_type=None, dtype_acc="auto", use_double_acc=False,
                 sum_scheme="auto", enable_chunks=True, rec_multVar_highdim=False,
                 use_fast_math=True):
        super().__init__(formula, aliases, "Sum", axis, dtype=dtype, opt_arg=opt_arg,
                         cuda_type=cuda_type, dtype_acc=dtype_acc,
                         use_double_acc=use_double_acc, sum_scheme=sum_scheme,
                         enable_chunks=enable_chunks,
                         rec_multVar_highdim=rec_multVar_highdim,
                         use_fast_math=use_fast_math)
        if not isinstance(varinvalias, str) or not _NAME.match(varinvalias):
            raise TypeError(f"KernelSolve: 'varinvalias' must be the name of an alias, "
                            f"got {varinvalias!r}")
        alias = self.variables.names.get(varinvalias)
        if alias is None:
            raise ValueError(f"KernelSolve: 'varinvalias' {varinvalias!r} is not one "
                             f"of the aliases ({', '.join(self.variables.names)})")
        reduced = 1 if self.axis == 1 else 0  # category of the reduced index
        if alias.cat != reduced:
            raise ValueError(
                f"KernelSolve: the unknown {varinvalias!r} is {_cat_name(alias.cat)}; "
                f"with axis={self.axis} it must be {_cat_name(reduced)} (a variable of "
                "the reduced index)")
        self.varinv = alias.index
        self.varinvalias = varinvalias

    def _operator(self, args, backend, ranges):
        """``u -> A u``: the reduction with the unknown's argument replaced by
        ``u`` (*batch, N, E)."""
        def apply(u):
            F, _, nbatch, _ = self._lazy(args, replace={self.varinv: u})
            return self._reduce(F, None, nbatch, backend, ranges)
        return apply

    def _layout(self, args, b):
        """``(b, fold, unfold)``: the right-hand side broadcast to the batch
        axes of all the arguments, and conjugate gradients' layout of it: one
        vector of N E unknowns per problem (the operator may mix the
        unknown's components, as ``MatVecMult(m, u)`` does)."""
        batch = np.broadcast_shapes(*[
            tuple(a.shape[:a.ndim - (1 if self.variables.by_index[k][1] == 2 else 2)])
            for k, a in enumerate(args)])
        shape = tuple(batch) + tuple(b.shape[-2:])
        if tuple(b.shape) != shape:  # torch tensors expand, arrays broadcast
            b = b.expand(shape) if hasattr(b, "expand") else np.broadcast_to(b, shape)
        fold, unfold = cg_layout(tuple(batch), shape[-2:], per_column=False)
        return b, fold, unfold
