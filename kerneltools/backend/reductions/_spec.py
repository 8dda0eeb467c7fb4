"""What a reduction is, and the registry that checks each one when it registers.

A reduction turns the values ``F_ij`` (and, for some, a second formula
``W_ij``) into one output row per ``i``. Every reduction is a monoid over a
small *state* per output row, and one :class:`Reduction` holds everything
that the backends, ``LazyTensor``, the torch binding and the Dask layer need
to know about it; none of them names a reduction. Each one is defined in one
block of one family module of this package (``sums``, ``minmax``, ``kmin``,
``logsumexp``); :func:`register` refuses an incomplete definition.

The gradient rule is ``surrogate``: a scalar formula ``S_ij`` whose
differential, with the forward outputs and the incoming gradient held fixed,
equals ``<gin_i, d out_i>`` summed over j. The gradient of the reduction with
respect to any variable is then a Sum reduction of the symbolic gradient of
``S``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from .._ir import Node

__all__ = ["Reduction", "REDUCTIONS", "register", "check_registry", "check_formulas",
           "method_variants", "resolve", "finite_shift", "exp_shifted"]

#: C templates too long to read well inline (the block-sparse folds).
TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


@dataclass(frozen=True)
class Reduction:
    """One reduction; fields without a default must be given (see :func:`register`)."""

    name: str
    doc: str
    # -- shape -----------------------------------------------------------------
    n_formulas: int  # 1, or 2 when a weight formula W is reduced along with F
    out_dim: Callable  # (formula dims) -> E of the output (per K entry)
    int_outputs: tuple  # which outputs are int64 indices (one bool per output)
    # -- the monoid, NumPy form (float states in float64: a sound reference) ----
    init: Callable  # (n, dims, K) -> the identity state of n rows
    tile: Callable  # (values, j0, K) -> the state of one tile, values (ti, tj, E)
    merge: Callable  # (a, b) -> a then b in j; associative
    finalize: Callable  # (state, K) -> the outputs
    # -- C form (string.Template over $E, $E1, $K) for the generated kernels:
    # state (the fields of one row's state struct), init (the identity, through
    # the pointer S), tile (fold the buffered tile buf0[e*TJ + jj] (and buf1),
    # jj < nj, into S; the reduced index is j0 + jj), final (write outf / outi
    # of row i). Optional: ranges_tile (tile in the block-sparse kernel, where
    # jmap[j0 + jj] is the caller's index), ranges_scalar_tile (block-sparse,
    # E = 1: a template whose loop computes the tile, see _cpu_backend),
    # online (the log-sum-exp family: ((state array, "F" | "1" | "W"), ...),
    # the sums of exp(F - shift) (times 1 or each W component; "F": one sum
    # per component of F, each with its own shift) that the dense kernel
    # accumulates inside the vectorised loop against the state's shift lm,
    # the tile fold running only where the tile holds a new maximum),
    # tile_skip (E = 1: the C value, through the state $S, below which a
    # tile's value must be folded, NaN: fold every tile; the dense kernel
    # tests it inside the vectorised loop and skips the fold of most tiles).
    # Or {"fused": True}: Sum, accumulated inside the vectorised loop instead.
    c: dict
    # -- CUDA form (string.Template over $E, $E1, $K and $S, the prefix of one
    # output row's names): state (register declarations), init, update (fold
    # the pair's values ${S}v0[e] (and ${S}v1) at reduced index j into the
    # state), final (write outf / outi of row i); optional: tile_end (once per
    # tile), launch ({itemsize: (block, rows)} where another shape measured
    # faster), exp_of_f (the form applies exp to F itself: float32 kernels get
    # F in base 2). KT_FOR(e, n) is an unrolled loop: the state stays in
    # registers.
    cuda: dict
    # -- gradient ----------------------------------------------------------------
    surrogate: Callable | None  # (F, W, outs, gin) -> scalar Node; None: zero
    # -- the expanded-sqdist rule: smooth in F, so |x - y|^2 may take the
    # expanded form (rounding eps |x|^2 blurs F slightly); Min, Max, K-min are
    # not: their outputs depend on the exact order of nearby distances.
    smooth: bool
    # -- partial states, merged across chunks (Dask; any multi-device split):
    # block: the in-memory reductions one block runs, ((name, with W), ...);
    # state_of_block(outs, j0, K): their outputs (indices local to the block,
    # which starts at j0) as this reduction's state, which ``merge`` folds.
    block: tuple
    state_of_block: Callable
    # -- the LazyTensor (and torch) method names; the first is the method, the
    # others aliases. Reductions that share a name differ by n_formulas (the
    # 2-formula one is chosen by weight=); () for none.
    methods: tuple
    # -- optional --------------------------------------------------------------
    uses_k: bool = False  # outputs (n, K, E): the K-reductions
    grad_forward: str | None = None  # the reduction whose outputs the gradient needs
    needs_lse: bool = False  # surrogate needs the log-sum-exp of F as well
    feature_op: str | None = None  # method(axis=-1) applies this op over features

    @property
    def n_outputs(self) -> int:
        return len(self.int_outputs)


REDUCTIONS: dict[str, Reduction] = {}

_REQUIRED = tuple(f.name for f in dataclasses.fields(Reduction)
                  if f.default is dataclasses.MISSING)
_C_KEYS = ({"state", "init", "tile", "final"},
           {"ranges_tile", "ranges_scalar_tile", "online", "tile_skip"})
_CUDA_KEYS = ({"state", "init", "update", "final"},
              {"tile_end", "launch", "exp_of_f", "ranges_update"})


def _check_form(name: str, what: str, form, keys) -> None:
    required, optional = keys
    if not isinstance(form, dict):
        raise TypeError(f"reduction {name!r}: '{what}' must be a dict, got {form!r}")
    missing = sorted(required - set(form))
    unknown = sorted(set(form) - required - optional)
    if missing or unknown:
        raise ValueError(
            f"reduction {name!r}: its '{what}' form lacks {missing} or has unknown "
            f"keys {unknown}; keys: {sorted(required | optional)}")


def register(**fields) -> Reduction:
    """Add a reduction to :data:`REDUCTIONS`, after checking it is complete.

    Raises ValueError naming what is missing: a required field, a key of the C
    or CUDA form, an output flag, a callable; or if the name is taken.
    """
    name = fields.get("name", "<unnamed>")
    missing = [f for f in _REQUIRED if f not in fields]
    if missing:
        raise ValueError(f"reduction {name!r} is incomplete: it lacks {missing} "
                         f"(every reduction defines {list(_REQUIRED)})")
    if name in REDUCTIONS:
        raise ValueError(f"a reduction named {name!r} is already registered")
    red = Reduction(**fields)
    if red.c != {"fused": True}:
        _check_form(name, "c", red.c, _C_KEYS)
    _check_form(name, "cuda", red.cuda, _CUDA_KEYS)
    if red.n_formulas not in (1, 2) or not red.int_outputs:
        raise ValueError(f"reduction {name!r}: n_formulas must be 1 or 2 and "
                         "int_outputs name at least one output")
    fns = ("out_dim", "init", "tile", "merge", "finalize", "state_of_block")
    for f in fns + (("surrogate",) if red.surrogate is not None else ()):
        if not callable(getattr(red, f)):
            raise TypeError(f"reduction {name!r}: '{f}' must be callable")
    if not red.block or not all(isinstance(m, str) for m in red.methods):
        raise ValueError(f"reduction {name!r}: 'block' names at least one reduction "
                         "and 'methods' is a tuple of method names")
    REDUCTIONS[name] = red
    return red


def check_registry() -> None:
    """Cross-references between reductions: blocks and gradient forwards name
    registered reductions, and one method name serves at most one reduction per
    number of formulas (the 2-formula one through ``weight=``)."""
    for red in REDUCTIONS.values():
        refs = [b for b, _ in red.block]
        if red.grad_forward is not None:
            refs.append(red.grad_forward)
        unknown = [r for r in refs if r not in REDUCTIONS]
        if unknown:
            raise ValueError(
                f"reduction {red.name!r} refers to unknown reductions {unknown}")
    for method, variants in method_variants().items():
        if any(r.uses_k for r in variants.values()) and len(variants) > 1:
            raise ValueError(
                f"method {method!r}: a K-reduction takes no weight variant")


def method_variants() -> dict[str, dict[int, Reduction]]:
    """{method name: {n_formulas: reduction}} over the registry."""
    table: dict[str, dict[int, Reduction]] = {}
    for red in REDUCTIONS.values():
        for m in red.methods:
            variants = table.setdefault(m, {})
            if red.n_formulas in variants:
                other = variants[red.n_formulas].name
                raise ValueError(f"method {m!r} is claimed by {other!r} and {red.name!r}, "
                                 f"both of {red.n_formulas} formula(s)")
            variants[red.n_formulas] = red
    return table


def resolve(reduction: str, weighted: bool) -> Reduction:
    """The reduction named ``reduction`` (a registry name or a method name, any
    case), its weighted variant when ``weighted`` and it has one."""
    key = str(reduction).lower()
    by_name = {k.lower(): r for k, r in REDUCTIONS.items()}
    variants = {m.lower(): v for m, v in method_variants().items()}
    if key in by_name:
        red = by_name[key]
        variants = variants.get(red.methods[0].lower(), {}) if red.methods else {}
    elif key in variants:
        variants = variants[key]
        red = variants.get(1) or variants[2]
    else:
        raise ValueError(
            f"unknown reduction {reduction!r}; known: {sorted(REDUCTIONS)}")
    return variants.get(2, red) if weighted else red


def check_formulas(red: Reduction, formulas: list[Node]) -> None:
    """Validate the formula dimensions for ``red`` (ValueError naming them)."""
    if len(formulas) != red.n_formulas:
        raise ValueError(
            f"{red.name} reduces {red.n_formulas} formula(s), got {len(formulas)}")
    if red.n_formulas == 2 and formulas[0].dim != 1:
        raise ValueError(
            f"{red.name}: the formula must be scalar (dimension 1) when a weight is "
            f"given, got dimension {formulas[0].dim}"
        )


# -- helpers shared by the family modules -------------------------------------
def finite_shift(m):
    """The shift of a log-sum-exp state: the maximum when finite, -inf when every
    value is -inf, else 0 (+inf or NaN present: exp then gives inf or NaN)."""
    return np.where(np.isfinite(m), m, np.where(m == -np.inf, -np.inf, 0.0))


def exp_shifted(v, shift):
    """exp(v - shift), with exp(. - (-inf)) taken as 0 (an all -inf state)."""
    empty = shift == -np.inf
    return np.where(empty, 0.0, np.exp(v - np.where(empty, 0.0, shift)))


def dim0(dims) -> int:
    """out_dim of the reductions whose output has the formula's dimension."""
    return dims[0]


def dim1(dims) -> int:
    """out_dim of the weighted reductions: the weight's dimension."""
    return dims[1]
