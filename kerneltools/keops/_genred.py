"""``Genred`` and ``KernelSolve`` as pykeops spells them, for either binding.

A :class:`GenredBase` reads the formula strings and aliases once (the parser
of :mod:`kerneltools.lazy._formula_strings`, the operations of its
:mod:`._operations`: every name,
operation and argument is checked when it is made) and, when called,
validates the arrays against the aliases, builds the LazyTensor formula on
them and runs the reduction through the binding's LazyTensor methods (its
``sum``, ``logsumexp``, ``argKmin``, ...). The binding (NumPy's or torch's)
is a :class:`Binding` given by the subclass: the LazyTensor class and how to
make variables of its arrays. :class:`~._kernel_solve.KernelSolveBase`, a
subclass in its own module, solves ``(A + alpha I) u = b`` on those
reductions.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..lazy._symbolic import Binding as _Data
from ..lazy._symbolic import bindings_of, from_parts
from ..lazy import _reducing
from ..backend._dispatch import run_plan
from ..backend._plan import canonicalize
from ..backend.reductions import method_variants
from ..lazy._formula_strings import _operations as _formulas
from ._dtypes import check_arguments
from ..lazy._formula_strings._parser import (Alias, FormulaSyntaxError, parse_alias,
                                             parse_formula)

__all__ = ["GenredBase", "Binding", "BACKENDS", "REDUCTIONS"]

#: pykeops' backend names -> kerneltools' (None: the configured choice).
BACKENDS = {"auto": None, "CPU": "cpu", "GPU": "cuda", "GPU_1D": "cuda",
            "GPU_2D": "cuda", "numpy": "numpy", "cpu": "cpu", "cuda": "cuda"}

#: pykeops' reduction names -> (LazyTensor method, kind): "plain", "K" (takes
#: opt_arg as K), "weight" (formula2 optional), "needs_weight".
REDUCTIONS = {
    "Sum": ("sum", "plain"),
    "Min": ("min", "plain"), "ArgMin": ("argmin", "plain"),
    "Min_ArgMin": ("min_argmin", "plain"),
    "Max": ("max", "plain"), "ArgMax": ("argmax", "plain"),
    "Max_ArgMax": ("max_argmax", "plain"),
    "KMin": ("Kmin", "K"), "ArgKMin": ("argKmin", "K"),
    "KMin_ArgKMin": ("Kmin_argKmin", "K"),
    "LogSumExp": ("logsumexp", "weight"),
    "LogSumExpWeight": ("logsumexp", "needs_weight"),
    "SumSoftMaxWeight": ("sumsoftmaxweight", "needs_weight"),
    # pykeops' raw forms of LogSumExp: [m_i, sum_j exp(F_ij - m_i) (G_ij)], m_i = max_j F_ij
    "Max_SumShiftExp": ("max", "shift"),
    "Max_SumShiftExpWeight": ("max", "shift_weight"),
}
_REDUCTION_ALIASES = {"MinArgMin": "Min_ArgMin", "MaxArgMax": "Max_ArgMax",
                      "KMinArgKMin": "KMin_ArgKMin", "SoftMax": "SumSoftMaxWeight"}
_SUM_SCHEMES = ("auto", "direct_sum", "block_sum", "kahan_scheme")
_DTYPES_ACC = ("auto", "float16", "float32", "float64")


class Binding:
    """What Genred needs of a binding; the subclasses of :class:`GenredBase`
    set ``binding`` to one.

    Subclasses give ``LazyTensor``, ``minimum``, ``maximum`` and implement
    :meth:`as_array`, :meth:`variable`, :meth:`cast`, :meth:`dtype_name`,
    :meth:`concat`.
    """

    LazyTensor = None
    minimum = maximum = None
    #: Whether Genred may run a rebound formula through its cached plan (not
    #: for torch: its reductions are autograd functions).
    plans = False

    def as_array(self, x, what: str):  # pragma: no cover - interface
        raise NotImplementedError

    def variable(self, a, cat: int, batched: bool):  # pragma: no cover - interface
        """The LazyTensor of an argument: cat 0 (i), 1 (j), 2 (parameter)."""
        raise NotImplementedError

    def cast(self, a, dtype_name: str):  # pragma: no cover - interface
        raise NotImplementedError

    def dtype_name(self, a) -> str:  # pragma: no cover - interface
        raise NotImplementedError

    def concat(self, arrays):  # pragma: no cover - interface
        """The arrays joined along their last axis."""
        raise NotImplementedError

    # -- rebinding a built formula to new arrays (Genred's repeated calls) -----
    def data(self, a):
        """The NumPy array behind the argument ``a``, or None (then each call
        builds its formula anew)."""
        return a if type(a) is np.ndarray else None

    def level(self, lt):
        """The ``kerneltools.LazyTensor`` of one of the binding's LazyTensors."""
        return lt

    def wrap(self, template, lt, data: dict):
        """``lt`` (a ``kerneltools.LazyTensor``) as the binding's LazyTensor like
        ``template``; ``data`` maps each rebound node to ``(Binding, argument)``."""
        return lt


def _data_binding(a, cat: str, batched: bool) -> _Data:
    """The engine's binding of an argument's array ``a``, as ``Binding.variable``
    makes it: (n, D) or (*batch, n, D) for i and j, (D,) or (*batch, D) for a
    parameter."""
    if batched:
        return _Data(a, batch=tuple(int(s) for s in a.shape[:-1 if cat == "p" else -2]))
    return _Data(a.reshape(-1) if cat == "p" else a.reshape(a.shape[0], -1))


def _bound(lt, data: dict, rows: dict):
    """``lt`` with the nodes of ``data`` bound to their new arrays."""
    bindings = dict(bindings_of(lt))
    for node, (binding, _) in data.items():
        if node in bindings:
            bindings[node] = binding
    ni = rows.get("i") if lt.ni is not None else None
    nj = rows.get("j") if lt.nj is not None else None
    return from_parts(type(lt), lt.formula, bindings, ni, nj)


def reduction_name(reduction_op) -> str:
    """pykeops' name of a reduction, checked: ``"Sum"``, ``"Sum_Reduction"``, ..."""
    if not isinstance(reduction_op, str):
        raise TypeError(f"Genred: 'reduction_op' must be a string, got {reduction_op!r}")
    name = reduction_op[:-len("_Reduction")] if reduction_op.endswith("_Reduction") \
        else reduction_op
    name = _REDUCTION_ALIASES.get(name, name)
    if name not in REDUCTIONS:
        raise ValueError(f"Genred: unknown 'reduction_op' {reduction_op!r}; the reductions "
                         f"are {', '.join(REDUCTIONS)} (optionally with '_Reduction')")
    return name


def _check_axis(axis, who: str) -> int:
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral) or axis not in (0, 1):
        raise ValueError(f"{who}: 'axis' must be 0 (reduce over i) or 1 (over j), got {axis!r}")
    return int(axis)


def _split_reduction(tree, text):
    """``Sum_Reduction(F, tag)`` / ``KMin_Reduction(F, K, tag)``: (name, F, axis, K)
    for a formula string that names its reduction (keopscore's tag: 0 when the
    output is indexed by i, so axis = 1 - tag); None for a plain formula."""
    func = getattr(tree, "func", "")
    if not func.endswith("_Reduction"):
        return None
    name = reduction_name(func)
    uses_k = REDUCTIONS[name][1] == "K"
    args = tree.args
    ints = [_formulas._int_literal(a) for a in args[1:]]
    if len(args) != (3 if uses_k else 2) or None in ints or ints[-1] not in (0, 1):
        form = f"{func}(F, K, tag)" if uses_k else f"{func}(F, tag)"
        raise FormulaSyntaxError(f"expected {form} with integer K and tag 0 or 1", text,
                                 tree.pos)
    return name, args[0], 1 - ints[-1], (ints[0] if uses_k else None)


class _Variables:
    """The arguments of a Genred: ``{index: (name, cat, dim)}`` from the aliases
    and the inline ``Var(...)`` of its formulas."""

    def __init__(self, aliases, texts_trees, who):
        if isinstance(aliases, str):
            aliases = [aliases]
        if not isinstance(aliases, (list, tuple)):
            raise TypeError(f"{who}: 'aliases' must be a list of strings such as "
                            f"'x = Vi(3)', got {type(aliases).__name__}")
        self.names: dict[str, Alias] = {}
        self.by_index: dict[int, tuple] = {}
        for k, text in enumerate(aliases):
            if not isinstance(text, str):
                raise TypeError(f"{who}: alias {k} must be a string, got {text!r}")
            a = parse_alias(text, default_index=k)
            if a.name in self.names:
                raise ValueError(f"{who}: the name {a.name!r} is declared twice in 'aliases'")
            self.names[a.name] = a
            self._declare(a.index, a.name, a.cat, a.dim, who)
        for text, tree in texts_trees:
            for cat, index, dim, pos in _formulas.variables_of(tree, text):
                try:
                    self._declare(index, f"Var({index})", cat, dim, who)
                except ValueError as exc:
                    raise FormulaSyntaxError(str(exc), text, pos) from None
        n = max(self.by_index, default=-1) + 1
        missing = [k for k in range(n) if k not in self.by_index]  # n <= MAX_ARGUMENTS
        if missing:
            shown = "[" + ", ".join(map(str, missing[:8])) + (
                f", ...] ({len(missing)} in all)" if len(missing) > 8 else "]")
            raise ValueError(f"{who}: no alias or Var(...) declares argument(s) {shown}; "
                             f"the {n} arguments must be numbered 0 to {n - 1}")
        self.count = n

    def _declare(self, index, name, cat, dim, who):
        old = self.by_index.get(index)
        if old is not None and old[1:] != (cat, dim):
            raise ValueError(
                f"{who}: argument {index} is declared as {_cat_name(old[1])}({old[2]}) "
                f"({old[0]}) and as {_cat_name(cat)}({dim}) ({name})")
        if old is None:
            self.by_index[index] = (name, cat, dim)


def _argument_of(text, who, formula, formula2, aliases) -> str:
    """The name of the argument that held ``text``, as ``"Genred: 'formula'"``."""
    if text is formula:
        return f"{who}: 'formula'"
    if text is formula2:
        return f"{who}: 'formula2'"
    listed = [aliases] if isinstance(aliases, str) else (
        aliases if isinstance(aliases, (list, tuple)) else [])
    for k, alias in enumerate(listed):
        if text is alias:
            return f"{who}: 'aliases'[{k}]"
    return f"{who}: 'formula'" if text == formula else f"{who}: 'aliases'"


def _cat_name(cat: int) -> str:
    return ("Vi", "Vj", "Pm")[cat]


class GenredBase:
    """pykeops' ``Genred``: see the subclasses in ``kerneltools.keops.numpy`` / ``.torch``."""

    binding: Binding = None
    who = "Genred"

    def __init__(self, formula, aliases, reduction_op="Sum", axis=0, dtype=None,
                 opt_arg=None, formula2=None, cuda_type=None, dtype_acc="auto",
                 use_double_acc=False, sum_scheme="auto", enable_chunks=True,
                 rec_multVar_highdim=False, use_fast_math=True):
        try:
            self._read(formula, aliases, reduction_op, axis, opt_arg, formula2)
        except FormulaSyntaxError as exc:  # say which argument held the string
            if exc.argument is not None:
                raise
            raise exc.named(_argument_of(exc.text, self.who, formula, formula2,
                                         aliases)) from None
        self.options = _check_options(self.who, dtype_acc, use_double_acc, sum_scheme,
                                      enable_chunks, rec_multVar_highdim, use_fast_math)
        self.dtype, self.cuda_type = dtype, cuda_type  # pykeops 2: deprecated, unused
        self._templates = {}  # (nbatch, batched flags) -> (F, W, nodes): see _lazy
        self._plans = {}  # (formulas, sizes, dtypes) -> (Plan, argument nodes)

    def _read(self, formula, aliases, reduction_op, axis, opt_arg, formula2):
        """Parse and check the formulas and aliases (FormulaSyntaxErrors name
        the position; the caller names the argument)."""
        who = self.who
        for name, text in (("formula", formula), ("formula2", formula2)):
            if not isinstance(text, str) and (text is not None or name == "formula"):
                raise TypeError(f"{who}: {name!r} must be a string such as "
                                f"'Exp(-SqDist(x, y)) * b', got {type(text).__name__}")
        tree = parse_formula(formula)
        split = _split_reduction(tree, formula)
        if split is not None:
            reduction_op, tree, axis, k = split
            opt_arg = k if k is not None else opt_arg
        self.reduction_op = reduction_name(reduction_op)
        self.axis = _check_axis(axis, who)
        self.formula, self.formula2 = formula, formula2
        self.tree = tree
        self.tree2 = parse_formula(formula2) if formula2 is not None else None
        method, kind = REDUCTIONS[self.reduction_op]
        if kind in ("needs_weight", "shift_weight") and self.tree2 is None:
            raise ValueError(f"{who}: the {self.reduction_op} reduction needs the weight "
                             "formula 'formula2'")
        if kind not in ("weight", "needs_weight", "shift_weight") and \
                self.tree2 is not None:
            raise ValueError(f"{who}: 'formula2' is only for the LogSumExp, "
                             f"LogSumExpWeight, SumSoftMaxWeight and "
                             f"Max_SumShiftExpWeight reductions, not {self.reduction_op}")
        if kind == "K":
            if isinstance(opt_arg, bool) or not isinstance(opt_arg, numbers.Integral) \
                    or opt_arg < 1:
                raise ValueError(f"{who}: the {self.reduction_op} reduction needs "
                                 f"'opt_arg', the number K >= 1 of values; got {opt_arg!r}")
        self.opt_arg = opt_arg
        texts = [(formula, tree)] + ([(formula2, self.tree2)] if formula2 else [])
        self.variables = _Variables(aliases, texts, who)
        for text, t in texts:
            _formulas.check(t, self.variables.names, text)

    def __repr__(self) -> str:
        extra = f", formula2={self.formula2!r}" if self.formula2 else ""
        return (f"{type(self).__module__}.{type(self).__name__}({self.formula!r}{extra}, "
                f"reduction_op={self.reduction_op!r}, axis={self.axis})")

    # -- a call ---------------------------------------------------------------
    def _lazy(self, args, replace=None):
        """(F, W, nbatch): the LazyTensor formulas on the arguments; ``replace``
        maps an argument index to an array used in its place."""
        who, b = self.who, self.binding
        if len(args) != self.variables.count:
            raise TypeError(f"{who} takes {self.variables.count} arrays (one per argument "
                            f"of {self._signature()}), got {len(args)}")
        arrays = [b.as_array(a, f"{who}: argument {k} ({self.variables.by_index[k][0]})")
                  for k, a in enumerate(args)]
        if replace:
            for k, a in replace.items():
                arrays[k] = a
        check_arguments(who, arrays, [self.variables.by_index[k][0]
                                      for k in range(len(arrays))])
        nbatch = self._check_shapes(arrays)
        if self.options["double"]:
            arrays = [b.cast(a, "float64") for a in arrays]
        flags = tuple(a.ndim == nbatch + (1 if self.variables.by_index[k][1] == 2 else 2)
                      and nbatch > 0 for k, a in enumerate(arrays))
        # The formula depends on the aliases and on which arguments are
        # batched, not on the data: built once per such key, later calls bind
        # their arrays to the same variables (the plan's memo then hits).
        template = self._templates.get((nbatch, flags))
        if template is not None:
            rebound = self._rebind(template, arrays, flags)
            if rebound is not None:
                return rebound + (nbatch, arrays)
        F, W, nodes = self._build(arrays, flags)
        self._templates[(nbatch, flags)] = (F, W, nodes)
        return F, W, nbatch, arrays

    def _build(self, arrays, flags):
        """(F, W, {argument index: variable node}) on ``arrays``."""
        b = self.binding
        lazies = {}

        def var(k):
            if k not in lazies:
                lazies[k] = b.variable(arrays[k], self.variables.by_index[k][1], flags[k])
            return lazies[k]

        env = {name: var(a.index) for name, a in self.variables.names.items()}
        F = _formulas.evaluate(self.tree, env, var, b, self.formula)
        # As in pykeops, the numbers of i- and j-points are those of the
        # arguments, used by the formula or not (a formula without j sums N
        # equal terms): a term that is exactly 0 (IfElse(v, 0, 0), NaN-safe,
        # simplified away) gives F the variable's points.
        for k, (_, cat, _) in self.variables.by_index.items():
            if cat != 2 and getattr(F, "ni" if cat == 0 else "nj") is None:
                F = F + var(k).elem(0).ifelse(0, 0)
        W = (_formulas.evaluate(self.tree2, env, var, b, self.formula2)
             if self.tree2 is not None else None)
        return F, W, {k: b.level(v).formula for k, v in lazies.items()}

    def _rebind(self, template, arrays, flags):
        """``(F, W)`` of ``template`` with ``arrays`` bound to its variables;
        None where the binding cannot say (CuPy, Dask, empty arrays: the
        full path checks them)."""
        b = self.binding
        F, W, nodes = template
        data, rows = {}, {}
        for k, node in nodes.items():
            d = b.data(arrays[k])
            if d is None or d.size == 0:
                return None
            data[node] = (_data_binding(d, node.cat, flags[k]), arrays[k])
            if node.cat != "p":
                rows[node.cat] = d.shape[-2]
        return tuple(None if t is None else b.wrap(t, _bound(b.level(t), data, rows), data)
                     for t in (F, W))

    def _signature(self) -> str:
        return ", ".join(f"{n}={_cat_name(c)}({d})"
                         for _, (n, c, d) in sorted(self.variables.by_index.items()))

    def _check_shapes(self, arrays) -> int:
        """The number of batch axes; ValueErrors naming the argument where an
        array's dimension, rank or row count does not fit its alias."""
        who = self.who
        nbatch = 0
        for k, a in enumerate(arrays):
            name, cat, dim = self.variables.by_index[k]
            base = 1 if cat == 2 else 2
            nbatch = max(nbatch, a.ndim - base)
        rows = {0: None, 1: None}
        for k, a in enumerate(arrays):
            name, cat, dim = self.variables.by_index[k]
            base = 1 if cat == 2 else 2
            what = f"{who}: argument {k} ({name} = {_cat_name(cat)}({dim}))"
            if a.ndim not in (base, base + nbatch) or (cat == 2 and a.ndim == 0):
                form = "(D,)" if cat == 2 else "(N, D)"
                raise ValueError(f"{what} must be {form}, or with the {nbatch} batch "
                                 f"axes of the others; got shape {tuple(a.shape)}")
            if a.shape[-1] != dim:
                raise ValueError(f"{what} must have {dim} column(s) (its declared "
                                 f"dimension); got shape {tuple(a.shape)}")
            if cat in rows:
                n = a.shape[-2]
                if rows[cat] is not None and rows[cat][0] != n:
                    raise ValueError(
                        f"{what} has {n} rows but argument {rows[cat][1]} has "
                        f"{rows[cat][0]}: every {_cat_name(cat)} variable must have "
                        "the same number of rows")
                rows[cat] = rows[cat] or (n, k)
        return nbatch

    def __call__(self, *args, backend="auto", device_id=-1, ranges=None, out=None):
        """The reduction on the arrays ``args`` (one per argument, in order).

        Parameters
        ----------
        *args : arrays
            ``Vi(D)`` and ``Vj(D)`` arguments (N, D) or (B..., N, D), ``Pm(D)``
            ones (D,) or (B..., D).
        backend : str
            pykeops' ``"auto"``, ``"CPU"``, ``"GPU"``, ``"GPU_1D"``, ``"GPU_2D"``
            (both GPU schemes are kerneltools' CUDA backend, which picks its own
            launch shape), or kerneltools' ``"numpy"``, ``"cpu"``, ``"cuda"``.
        device_id : int
            Accepted for pykeops' signature; data stays on its own device.
        ranges : tuple, optional
            pykeops' 6-tuple of block-sparsity ranges (or a BlockSparsity).
        out : array, optional
            Written in place with the result (NumPy), and returned.

        Returns
        -------
        array or tuple of arrays, as pykeops: (N, E) for ``axis=1``, (M, E) for
        ``axis=0``; ``(values, indices)`` for ``Min_ArgMin``, ...
        """
        F, W, nbatch, arrays = self._lazy(args)
        result = self._reduce(F, W, nbatch, backend, ranges)
        if self.options["double"]:
            low = self.binding.dtype_name(self.binding.as_array(args[0], "argument 0"))
            result = self._cast_back(result, low)
        if out is not None:
            out[...] = result
            return out
        return result

    def _cast_back(self, result, dtype_name):
        cast = self.binding.cast
        if isinstance(result, tuple):
            return tuple(r if self.binding.dtype_name(r).startswith("int") else
                         cast(r, dtype_name) for r in result)
        if self.binding.dtype_name(result).startswith("int"):
            return result
        return cast(result, dtype_name)

    def _reduce(self, F, W, nbatch, backend, ranges):
        method, kind = REDUCTIONS[self.reduction_op]
        if self.binding.plans and not nbatch and ranges is None and kind not in (
                "shift", "shift_weight"):
            res = self._run_planned(F, W, method, backend)
            if res is not None:
                return res
        opts = {"backend": _backend(backend, self.who)}
        if ranges is not None:
            opts["ranges"] = ranges
        axis = nbatch + self.axis  # pykeops numbers reductions after the batch axes
        fn = getattr(F, method)
        if kind in ("shift", "shift_weight"):
            return self._max_sum_shift_exp(F, W, nbatch, axis, opts)
        if kind == "K":
            res = fn(self.opt_arg, axis=axis, **opts)
        elif kind == "needs_weight" and method == "sumsoftmaxweight":
            res = fn(W, axis=axis, **opts)
        elif kind in ("weight", "needs_weight") and W is not None:
            res = fn(axis=axis, weight=W, **opts)
        else:
            res = fn(axis=axis, **opts)
        if self.reduction_op == "KMin_ArgKMin" and F.formula.dim == 1:
            res = tuple(r[..., None] for r in res)  # pykeops keeps (N, K, 1) here
        return res


    def _run_planned(self, F, W, method, backend):
        """The reduction of a rebound formula through its cached plan (the
        plan is a function of the formulas, the dtype and the sizes: the
        arrays are only its arguments); None for data the plan cannot take
        as they are (CuPy, Dask: the LazyTensor path handles them)."""
        parts = [F] + ([W] if W is not None else [])
        data = {}
        for p in reversed(parts):
            data.update(bindings_of(p))
        if any(type(d.array) is not np.ndarray for d in data.values()):
            return None
        key = (tuple(p.formula for p in parts), F.ni, F.nj,
               tuple(d.array.dtype for d in data.values() if not d.weak))
        hit = self._plans.get(key)
        if hit is None:
            red = method_variants()[method][len(parts)]
            K = self.opt_arg if red.uses_k else 1
            plan, _ = _reducing.plan(F, red.name, self.axis, W, K, _backend(backend, self.who))
            originals = canonicalize([p.formula for p in parts], self.axis)[1]
            if len(self._plans) >= 64:  # many sizes: keep the memo small
                self._plans.clear()
            hit = self._plans[key] = (plan, originals)
        plan, originals = hit
        args = [np.ascontiguousarray(data[v].array, dtype=plan.dtype) for v in originals]
        outs = run_plan(plan, args, _backend(backend, self.who))
        if plan.red.uses_k and plan.red.out_dim([f.dim for f in plan.formulas]) == 1:
            outs = tuple(o[..., 0] for o in outs)
        res = outs if len(outs) > 1 else outs[0]
        if self.reduction_op == "KMin_ArgKMin" and F.formula.dim == 1:
            res = tuple(r[..., None] for r in res)  # pykeops keeps (N, K, 1) here
        return res

    def _max_sum_shift_exp(self, F, W, nbatch, axis, opts):
        """pykeops' Max_SumShiftExp(Weight): ``[m, sum exp(F - m) (W)]`` with
        ``m = max F``, one array; two reductions, ``m`` a variable of the
        output index in the second."""
        if F.formula.dim != 1:
            raise ValueError(f"{self.who}: {self.reduction_op} needs a scalar formula, "
                             f"got dimension {F.formula.dim}")
        m = F.max(axis=axis, **opts)
        mv = self.binding.variable(m, 0 if self.axis == 1 else 1, nbatch > 0)
        shifted = (F - mv).exp()
        s = (shifted if W is None else shifted * W).sum(axis=axis, **opts)
        return self.binding.concat([m, s])


def _backend(backend, who):
    if backend is None:
        return None
    if backend not in BACKENDS:
        raise ValueError(f"{who}: unknown 'backend' {backend!r}; expected one of "
                         f"{', '.join(BACKENDS)}")
    return BACKENDS[backend]


def _check_options(who, dtype_acc, use_double_acc, sum_scheme, enable_chunks,
                   rec_multVar_highdim, use_fast_math) -> dict:
    """pykeops' compilation options, checked. Only accumulation in float64
    changes what kerneltools does (the float32 data are computed in float64,
    the result rounded back); the others name pykeops' code-generation
    schemes, which kerneltools' generator does not have (its sums are tiled,
    fast-math is never on): accepted, and without effect on the numbers."""
    if dtype_acc not in _DTYPES_ACC:
        raise ValueError(f"{who}: 'dtype_acc' must be one of {_DTYPES_ACC}, got {dtype_acc!r}")
    if sum_scheme not in _SUM_SCHEMES:
        raise ValueError(f"{who}: 'sum_scheme' must be one of {_SUM_SCHEMES}, "
                         f"got {sum_scheme!r}")
    for name, v in (("use_double_acc", use_double_acc), ("enable_chunks", enable_chunks),
                    ("rec_multVar_highdim", rec_multVar_highdim),
                    ("use_fast_math", use_fast_math)):
        if not isinstance(v, bool):
            raise TypeError(f"{who}: {name!r} must be True or False, got {v!r}")
    return {"double": bool(use_double_acc) or dtype_acc == "float64",
            "sum_scheme": sum_scheme}
