"""The numpydoc Parameters and Returns sections of the search protocol's methods.

Every strategy of this package has the same methods (``build``, ``kmin``,
``within``, ``count``, ...; the package docstring lists them), whose
arguments and results mean the same in each. Their docstrings say what the
strategy does differently; :func:`document` appends the sections from one
template: :data:`PARAMETERS` by argument name, :data:`RETURNS` by method.
"""

from __future__ import annotations

import inspect

__all__ = ["PARAMETERS", "RETURNS", "document"]

_Q = "ndarray of shape (n_queries,)"

#: ``name: "type: Description."`` of the protocol's arguments.
PARAMETERS = {
    "case": "SearchCase: The fitted points and what the queries need.",
    "X": "ndarray of shape (n_queries, n_features): The queries.",
    "k": "int: The number of neighbors kept per query.",
    "threshold": f"float or {_Q}: The rdist bound, one for all or one per query.",
    "thr": f"{_Q}: The rdist bound of each query.",
    "Y": "ndarray of shape (n_points, n_features): The host points.",
    "x2": f"{_Q}: The queries' squared norms.",
    "d_k": f"{_Q}: The k-th smallest rdist of each query.",
    "exclude_self": "bool: Leave out each query's own index (queries = fit).",
    "by_index": "bool: Sort each row by index (else by rdist).",
    "metric": "Metric: The metric of the search.",
    "backend": "str or None: The backend of the reductions.",
    "B": "ndarray of shape (n_samples, n_outputs): The rows summed.",
}

_KMIN = "tuple of ndarray: ``(rdist, indices)``, each (n_queries, k), increasing."

#: ``method: "type: Description."`` of the protocol's results.
RETURNS = {
    "build": "object: The strategy over the case's fitted points.",
    "count": f"{_Q}: The number of fitted points within the bound.",
    "is_usable_for": "bool: Whether the strategy serves the case.",
    "kmin": _KMIN,
    "kmin_within": _KMIN,
    "fallback": _KMIN,
    "within": "tuple of ndarray: ``(values, indices, kept, full)``, as above.",
    "rdist_over": "tuple: ``(value(rows), w_j)``, as above.",
    "radius_csr": "tuple: The neighbors within ``thr`` of each query, as above.",
    "radius_sums": "tuple of ndarray: ``(sums, counts)``, as above.",
    "error_bound": f"{_Q}: The bound of each row.",
    "slack": f"{_Q}: The bound of each query.",
    "cells": "Grid: The cells of the points.",
    "device_points": "array: The fitted points on the device.",
    "host_points": "ndarray of shape (n_samples, n_features): The fitted points.",
    "on_host": "SearchCase: The same case, with the queries on the host.",
}


def _entry(name: str, spec: str) -> list[str]:
    kind, text = spec.split(": ", 1)
    return [f"{name} : {kind}" if name else kind, f"    {text}"]


def _sections(fn, method: str) -> str:
    names = [p for p in inspect.signature(fn).parameters if p not in ("self", "cls")]
    lines = [inspect.cleandoc(fn.__doc__), ""]
    if names:
        lines += ["Parameters", "----------"]
        for name in names:
            lines += _entry(name, PARAMETERS[name])
        lines.append("")
    return "\n".join([*lines, "Returns", "-------", *_entry("", RETURNS[method]), ""])


def document(classes) -> None:
    """Append the sections to the protocol methods that ``classes`` (and
    their bases of this package) define with a docstring and no Returns."""
    seen = set()
    for cls in classes:
        for klass in cls.__mro__:
            if klass in seen or not klass.__module__.startswith(__package__):
                continue
            seen.add(klass)
            for method, raw in vars(klass).items():
                fn = getattr(raw, "__func__", raw)
                doc = getattr(fn, "__doc__", None)
                if method in RETURNS and doc and "\nReturns\n" not in doc:
                    fn.__doc__ = _sections(fn, method)
