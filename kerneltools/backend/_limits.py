"""The limits of formulas: bounded work for any formula.

A formula is a few characters, or a few LazyTensor operations; what it asks
for must stay in proportion. Each number below bounds one thing that a
short formula could otherwise make huge: a Python list over the variable
indices, a loop over a dimension, generated code, or a literal that Python
refuses to read. Beyond a limit, a formula string raises
:class:`~kerneltools.exceptions.FormulaSyntaxError` at the offending
literal, and a LazyTensor operation a ``ValueError`` naming its argument.
"""

from __future__ import annotations

__all__ = ["MAX_ARGUMENTS", "MAX_DIM", "MAX_EXPONENT", "MAX_LITERAL_CHARS",
           "MAX_DECIMALS", "check_int"]

#: Arguments of a ``Genred`` (its variables are numbered 0 to
#: MAX_ARGUMENTS - 1): the validation lists the arguments, and a kernel takes
#: one pointer per argument.
MAX_ARGUMENTS = 1024

#: Dimension of a variable declared in a formula string (``Vi(D)``) or of a
#: vector made by an operation from an integer (``OneHot(x, D)``,
#: ``SumT(x, D)``, ``ExtractT(x, start, D)``), and component index
#: (``Elem(x, k)``). 2^20 components: far beyond what a kernel renders
#: (``_codegen.MAX_COMPONENTS``), within what the NumPy backend evaluates.
MAX_DIM = 1 << 20

#: |n| of an integer power ``x ** n``, ``Pow(x, n)``: 2^24, so that n is
#: exact in float32 too (a parity error would flip the sign of x ** n for
#: x < 0). Generated code does not grow with n (see the Pow operation).
MAX_EXPONENT = 1 << 24

#: Characters of a number literal in a formula string: ints are exact, and
#: longer ones would reach Python's digit limit (4300) with no position.
MAX_LITERAL_CHARS = 100

#: |d| of ``Round(x, d)``: 10^d must be a finite float64.
MAX_DECIMALS = 300


def check_int(value: int, low: int, high: int, what: str) -> str | None:
    """Why ``value`` is outside ``[low, high]`` (None when it is inside), as
    "the <what> must be at most <high>, got <value>"."""
    if low <= value <= high:
        return None
    # str() of a huge int reaches Python's digit limit: say its size instead
    shown = (str(value) if value.bit_length() <= 100
             else f"a number of {value.bit_length()} bits")
    if value < low:
        return f"the {what} must be at least {low}, got {shown}"
    return f"the {what} must be at most {high}, got {shown}"
