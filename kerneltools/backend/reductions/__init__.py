"""The registry of reductions: each one a monoid, defined in one block.

One family per module: :mod:`.sums`, :mod:`.minmax`, :mod:`.kmin`,
:mod:`.logsumexp`. :class:`Reduction` (in :mod:`._spec`) lists the fields of
a definition; :func:`register` checks each one, and :func:`check_registry`
the references between them once every family is loaded. To add a
reduction, add one ``register(...)`` block to a family module (or a new
module imported here) and its reference to ``tests/_reference.py``.

What it may import: the rest of :mod:`kerneltools.backend` (the IR, the
operations); nothing above the engine.
"""

# isort: off  (the families register in this order)
from . import sums, minmax, kmin, logsumexp  # noqa: F401
# isort: on
from ._spec import (
    REDUCTIONS,
    Reduction,
    check_formulas,
    check_registry,
    method_variants,
    register,
    resolve,
)

check_registry()

__all__ = ["REDUCTIONS", "Reduction", "check_formulas", "check_registry",
           "method_variants", "register", "resolve"]
