"""What the estimators' conjugate-gradient solves do when CG stops at
``max_iter`` short of ``tol``: a dense float64 solve of the same system where
it is small enough, else :class:`~kerneltools.exceptions.ConvergenceError`.

The low-level primitives (:func:`kerneltools.linalg.conjugate_gradient`,
``LazyTensor.solve``) mirror scipy and pykeops and warn; an estimator never
returns a result it knows to be wrong ("Solvers never stop wrong",
DESIGN.md). :func:`solve_or_escalate` runs the CG solve with its warning
silenced, reads whether it converged from its ``info`` and, if it did not,
calls the estimator's dense solve of the same system (same regularisation,
same sample weights), or raises with the residual reached and the fixes.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from ...exceptions import ConvergenceError

__all__ = ["DENSE_SOLVE_MAX", "solve_or_escalate"]

#: Largest system (``n`` points for CG, ``m`` landmarks for Falkon) that an
#: iterative solve which did not reach ``tol`` in ``max_iter`` iterations
#: redoes densely: a 5,000 x 5,000 float64 matrix is 200 MB and its
#: Cholesky factor takes about a second on two cores (KernelRidge's
#: ``CHOLESKY_MAX_SAMPLES``). Above it the solve raises
#: :class:`~kerneltools.exceptions.ConvergenceError`.
DENSE_SOLVE_MAX = 5000


def solve_or_escalate(cg: Callable[[dict], Any], dense: Callable[[], Any], *, size: int,
                      who: str, tol: float, max_iter: int, verbose: int = 0,
                      fixes: str,
                      method: str = "Cholesky, float64") -> tuple[Any, dict]:
    """Run ``cg(info)``; where it did not converge, ``dense()`` or raise.

    Parameters
    ----------
    cg : callable
        ``cg(info) -> result``: the iterative solve, which passes ``info`` to
        :func:`kerneltools.linalg.conjugate_gradient` (it receives
        ``"converged"`` and ``"relative_residual"``). Its
        ``ConvergenceWarning`` is silenced: the outcome is judged here.
    dense : callable
        ``dense() -> result``: the same system solved densely in float64, of
        the same form as ``cg``'s result.
    size : int
        The system's size (``n``, or ``m`` for Falkon), compared with
        :data:`DENSE_SOLVE_MAX`.
    who : str
        The estimator and solver, for messages ("KernelRidge(solver='cg')").
    tol, max_iter : float, int
        The tolerance and iteration cap CG ran with, for messages.
    verbose : int
        Say which path ran.
    fixes : str
        The parameters to change, for the error's message.
    method : str
        How ``dense`` solves, for ``verbose``.

    Returns
    -------
    result : object
        ``cg``'s result, or ``dense()``'s.
    info : dict
        CG's ``info``, with ``"escalated"``: whether the dense solve ran.

    Raises
    ------
    kerneltools.exceptions.ConvergenceError
        CG did not reach ``tol`` and ``size > DENSE_SOLVE_MAX``.
    """
    from ...exceptions import ConvergenceWarning

    info: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = cg(info)
    info["escalated"] = False
    if info["converged"]:  # every CG path of kerneltools.linalg reports it
        return result, info
    residual = info["relative_residual"]
    limit = DENSE_SOLVE_MAX
    why = (f"conjugate gradient stopped short of tol={tol} (max_iter={max_iter}): "
           f"relative residual {residual:.2e}")
    if size <= limit:
        if verbose:
            print(f"[{who}] {why}; solving the {size} x {size} system densely "
                  f"({method}) instead", flush=True)
        info["escalated"] = True
        return dense(), info
    raise ConvergenceError(
        f"{who} did not converge: {why}, and the system's size {size} is above "
        f"{limit} (DENSE_SOLVE_MAX), the largest solved densely instead. {fixes}")
