"""What ``kerneltools.keops.numpy`` and ``.torch`` share besides Genred:
pykeops' ``generic_sum``, ``generic_logsumexp``, ``generic_argmin``,
``generic_argkmin`` (a ``Genred`` whose axis, and K, come from an output
alias)."""

from __future__ import annotations

from ..backend._errors import FormulaSyntaxError
from ..lazy._formula_strings._parser import parse_alias

__all__ = ["generic_functions"]


def generic_functions(genred_cls) -> dict:
    """The four helpers, making instances of ``genred_cls``."""

    def _output(output, who):
        if not isinstance(output, str):
            raise TypeError(f"{who}: 'output' must be a string such as 'a = Vi(1)', got "
                            f"{type(output).__name__}")
        try:
            a = parse_alias(output)
        except FormulaSyntaxError as exc:
            raise exc.named(f"{who}: 'output'") from None
        if a.cat == 2:
            raise ValueError(f"{who}: the output {output!r} must be Vi(...) (reduce over "
                             "j) or Vj(...) (reduce over i), not a parameter")
        return a, 1 - a.cat  # output indexed by i: reduce over j (axis 1)

    def generic_sum(formula, output, *aliases, **kwargs):
        """``Genred(formula, aliases, "Sum", axis)``, the axis from ``output``
        (``"a = Vi(E)"``: reduce over j)."""
        _, axis = _output(output, "generic_sum")
        return genred_cls(formula, list(aliases), reduction_op="Sum", axis=axis, **kwargs)

    def generic_logsumexp(formula, output, *aliases, **kwargs):
        """``Genred(formula, aliases, "LogSumExp", axis)``, the axis from ``output``."""
        _, axis = _output(output, "generic_logsumexp")
        return genred_cls(formula, list(aliases), reduction_op="LogSumExp", axis=axis,
                          **kwargs)

    def generic_argmin(formula, output, *aliases, **kwargs):
        """``Genred(formula, aliases, "ArgMin", axis)``, the axis from ``output``."""
        _, axis = _output(output, "generic_argmin")
        return genred_cls(formula, list(aliases), reduction_op="ArgMin", axis=axis,
                          **kwargs)

    def generic_argkmin(formula, output, *aliases, **kwargs):
        """``Genred(formula, aliases, "ArgKMin", axis, opt_arg=K)``: the axis and
        K from ``output`` (``"a = Vi(K)"``)."""
        a, axis = _output(output, "generic_argkmin")
        return genred_cls(formula, list(aliases), reduction_op="ArgKMin", axis=axis,
                          opt_arg=a.dim, **kwargs)

    return {f.__name__: f for f in (generic_sum, generic_logsumexp, generic_argmin,
                                    generic_argkmin)}
