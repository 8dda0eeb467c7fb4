"""Reductions run later: pykeops' ``call=False`` and symbolic variables.

``K.sum(axis=1, call=False)``, or any reduction of a formula with symbolic
variables (``Vi(0, 3)``, ``Vj(1, 3)``, ``Pm(2, 1)``, ``LazyTensor((0, 3, 0))``),
returns a :class:`DeferredReduction`: calling it with one array per symbolic
variable, in the order of their indices (pykeops' rule: argument ``k`` is the
variable of index ``k``), binds them and runs the reduction. Keywords given
at call time (``backend=``, ``ranges=``, ...) override those of the
reduction. Works for both bindings: the LazyTensor's class binds its own
data (``_bind_symbols``) and runs its own ``_reduce``.
"""

from __future__ import annotations

from ._symbolic import bindings_of, symbols_of

__all__ = ["DeferredReduction", "DeferredSolve"]


class _Deferred:
    """What deferred reductions and solves share: their symbolic indices
    (``self.symbols``) and pykeops' ``callfun``."""

    symbols: dict

    @property
    def n_args(self) -> int:
        """How many positional arrays a call takes (highest symbolic index + 1)."""
        return max(self.symbols) + 1 if self.symbols else 0

    @property
    def callfun(self):
        """The routine a call runs (pykeops' attribute, which its examples
        print): pykeops' compiled ``Genred`` or ``KernelSolve``, called with
        every variable of the formula; here this object itself, called as it
        is (one array per symbolic index)."""
        return self


class DeferredReduction(_Deferred):
    """A reduction of a LazyTensor, run when called; see the module docstring.

    Parameters are those of ``LazyTensor._reduce``: the formula ``t``, the
    registry name of the reduction, its axis (0: over i, 1: over j), its
    weight, K, backend and options.
    """

    def __init__(self, t, name: str, axis: int, weight, K, backend, options: dict):
        self.t, self.name, self.axis, self.weight = t, name, axis, weight
        self.K, self.backend, self.options = K, backend, dict(options)
        self.symbols = symbols_of(t, weight)

    def __repr__(self) -> str:
        over = "j" if self.axis == 1 else "i"
        syms = ", ".join(f"{k}: {'ijp'.index(n.cat)}-variable of dim {n.dim}"
                         for k, n in sorted(self.symbols.items()))
        return (f"DeferredReduction({self.name} over {over} of {self.t!r}"
                + (f"; symbolic variables {{{syms}}}" if syms else "") + ")")

    def __call__(self, *args, **kwargs):
        """Run the reduction, the k-th array bound to the symbolic variable of
        index k; ``kwargs``: reduction options overriding the stored ones."""
        if len(args) != self.n_args:
            want = (f"{self.n_args} (one per symbolic variable index, 0 to "
                    f"{self.n_args - 1})" if self.symbols else "none")
            raise TypeError(f"this {self.name} reduction takes {want} positional "
                            f"array(s); got {len(args)}")
        arrays = {k: args[k] for k in self.symbols}
        t = self.t._bind_symbols(arrays)
        w = self.weight
        if hasattr(w, "_bind_symbols"):
            w = w._bind_symbols(arrays)
        options = {**self.options, **kwargs}
        options.pop("call", None)
        backend = options.pop("backend", self.backend)
        return t._reduce(self.name, self.axis, weight=w, K=self.K, backend=backend,
                         **options)


class DeferredSolve(_Deferred):
    """``K.solve(b, ..., call=False)``, or a solve whose formula or right-hand
    side has symbolic variables: calling it with one array per symbolic
    index (pykeops' rule; none when there is none) binds them and solves.
    The right-hand side is ``b``, or, when ``b`` is symbolic (pykeops'
    ``F.solve(Vi(k, E), var=Vj(k, E))``), the array of its index. ``var``
    and ``kwargs`` are those of the solve."""

    def __init__(self, t, b, var, alpha, kwargs: dict):
        self.t, self.b, self.var, self.alpha, self.kwargs = t, b, var, alpha, dict(kwargs)
        self.symbols = symbols_of(t)
        self.rhs_index = _symbol_index(b)
        if self.rhs_index is not None:
            self.symbols.setdefault(self.rhs_index, getattr(b, "_lt", b).formula)
        kv = _symbol_index(var)
        if kv is not None and self.rhs_index is None and any(
                k != kv for k in self.symbols):
            raise ValueError(
                "solve(var=...): with other symbolic variables in the formula, give the "
                f"right-hand side as a symbolic variable of var's index {kv} (as pykeops: "
                f"F.solve(Vi({kv}, E), var=Vj({kv}, E))), its data given at call time")
        if kv is not None and self.rhs_index not in (None, kv):
            raise ValueError(f"solve(var=...): the symbolic right-hand side has index "
                             f"{self.rhs_index} but 'var' has index {kv}; as in pykeops, "
                             "they must be the same (the array of that index is b)")
        self.var_index = kv

    def __repr__(self) -> str:
        return (f"DeferredSolve(solve of {self.t!r}; "
                f"{self.n_args} positional array(s) by symbolic index)")

    def __call__(self, *args, **kwargs):
        """Solve, the k-th array bound to the symbolic variable of index k;
        ``kwargs``: solve options overriding the stored ones."""
        if len(args) != self.n_args:
            raise TypeError(f"this solve takes {self.n_args} positional array(s) (one per "
                            f"symbolic variable index); got {len(args)}")
        arrays = {k: args[k] for k in self.symbols}
        b = self.b if self.rhs_index is None else args[self.rhs_index]
        if self.var_index is not None and self.var_index not in arrays:
            arrays[self.var_index] = b
        t = self.t._bind_symbols(arrays) if arrays else self.t
        options = {**self.kwargs, **kwargs}
        options.pop("call", None)
        return t.solve(b, self.alpha, var=self.var, **options)


def _symbol_index(x):
    """pykeops' index of ``x`` if it is a symbolic variable, else None."""
    lt = getattr(x, "_lt", x)
    if not hasattr(lt, "_bindings") or lt.formula.op != "Var":
        return None
    b = bindings_of(lt).get(lt.formula)
    return b.symbol if b is not None else None
