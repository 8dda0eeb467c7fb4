"""What ``kerneltools.keops.numpy`` and ``.torch`` share besides Genred:
pykeops' ``generic_sum``, ``generic_logsumexp``, ``generic_argmin``,
``generic_argkmin`` (a ``Genred`` whose axis, and K, come from an output
alias)."""

from __future__ import annotations

from ._parser import parse_alias

__all__ = ["generic_functions"]


def generic_functions(genred_cls) -> dict:
    """The four helpers, making instances of ``genred_cls``."""

    def _output(output, who):
        a = parse_alias(output)
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
