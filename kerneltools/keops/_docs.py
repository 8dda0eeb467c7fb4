"""The docstrings of ``kerneltools.keops.numpy`` and ``.torch``, written once.

Both bindings give the same names with the same parameters; only the array
type differs. Each docstring here is a template whose ``{mod}`` (``numpy`` or
``torch``), ``{setup}`` (the import), ``{xp}`` (the array module) and
``{arr}`` (an array constructor: ``{arr}([[0.0], [1.0]])``) slots
:func:`docstring` fills per binding, so the Examples run as doctests in each
(the binding modules list the functions made in closures in their
``__test__``). The outputs are ``tolist()``, shapes and booleans: the same
text for NumPy arrays and torch tensors.
"""

from __future__ import annotations

__all__ = ["docstring"]

_BINDINGS = {
    "numpy": {"mod": "numpy", "setup": "import numpy as np", "xp": "np",
              "arr": "np.array", "lab": "np.array"},
    "torch": {"mod": "torch", "setup": "import torch", "xp": "torch",
              "arr": "torch.tensor", "lab": "torch.tensor"},
}

#: The data every example uses: three points on a line, weights b.
_DATA = """    >>> {setup}
    >>> from kerneltools.keops.{mod} import {name}
    >>> x = {arr}([[0.0], [1.0], [3.0]], dtype={xp}.float64)
    >>> b = {arr}([[1.0], [2.0], [3.0]], dtype={xp}.float64)
    >>> K = {xp}.exp(-((x - x.T) ** 2))  # the dense kernel matrix
"""

_GENRED_PARAMETERS = """
    Parameters
    ----------
    formula : str
        The formula, in pykeops' syntax: ``"Exp(-SqDist(x, y)) * b"``; or the
        whole reduction, ``"Sum_Reduction(Exp(-SqDist(x, y)) * b, 0)"``.
    aliases : list of str
        The arguments: ``"x = Vi(3)"`` (indexed by i, dimension 3; its index is
        its place in the list), ``"y = Vj(1, 3)"`` (index 1), ``"g = Pm(1)"``
        (a parameter); formulas may also use ``Var(index, dim, cat)``.{extra}
    axis : {{{{0, 1}}}}, default=0
        The reduction's axis: 0 reduces over i (the output is indexed by
        j), 1 over j.
    dtype : str, default=None
        Deprecated in pykeops 2 and ignored: the arrays' dtype is used.
    opt_arg : int, default=None
        K of the K-reductions.{formula2}
    cuda_type : str, default=None
        Deprecated in pykeops 2 and ignored, as ``dtype``.
    dtype_acc : str, default="auto"
        With ``"float64"``, float32 data are computed in float64 and the
        result rounded to float32.
    use_double_acc : bool, default=False
        True is ``dtype_acc="float64"``.
    sum_scheme : str, default="auto"
        The summation scheme of pykeops (``"direct_sum"``, ``"block_sum"``,
        ``"kahan_scheme"``): checked, without effect (kerneltools sums by
        tiles).
    enable_chunks, rec_multVar_highdim, use_fast_math : bool
        Code-generation options of pykeops: checked, without effect
        (kerneltools never uses fast-math).
"""

_REDUCTION_OP = """
    reduction_op : str, default="Sum"
        ``"Sum"``, ``"LogSumExp"``, ``"Min"``, ``"ArgMin"``, ``"Min_ArgMin"``,
        ``"Max"``, ... , ``"KMin"``, ``"ArgKMin"``, ``"KMin_ArgKMin"`` (K =
        ``opt_arg``), ``"SumSoftMaxWeight"`` and ``"LogSumExpWeight"`` (weights
        ``formula2``), ``"Max_SumShiftExp"`` and ``"Max_SumShiftExpWeight"``
        (``[max, sum exp(F - max) (G)]`` in one array); ``"Sum_Reduction"``
        and the like are accepted too."""

_FORMULA2 = """
    formula2 : str, default=None
        The weights of ``SumSoftMaxWeight`` / ``LogSumExp``."""

_RAISES = """
    Raises
    ------
    FormulaSyntaxError
        A formula or alias that does not parse, an unknown name or operation,
        with the position and a caret.
    ValueError
        An unknown reduction, a bad ``axis`` or options.
"""

GENRED = """pykeops' generic reduction, ``Genred(formula, aliases, op, axis)``.

    Call it on the arrays of the aliases, in their order: ``out = gauss(x, y,
    b, backend="auto", ranges=None)``. {intro}
""" + _GENRED_PARAMETERS.format(extra=_REDUCTION_OP.replace("{", "{{").replace(
    "}", "}}"), formula2=_FORMULA2) + _RAISES + """
    See Also
    --------
    KernelSolve : Solve a linear system of such a formula.
    generic_sum : The same with the axis from an output alias.

    Examples
    --------
""" + _DATA + """    >>> aliases = ["x = Vi(1)", "y = Vj(1)", "b = Vj(1)"]
    >>> gauss = Genred("Exp(-SqDist(x, y)) * b", aliases, reduction_op="Sum", axis=1)
    >>> out = gauss(x, x, b)
    >>> tuple(out.shape), bool({xp}.allclose(out, K @ b))
    ((3, 1), True)
    """

KERNEL_SOLVE = """Solve ``(A + alpha I) u = b``, A a formula linear in ``u`` (pykeops').

    ``u`` is the variable ``varinvalias``; the solver is conjugate gradients.
    ``KernelSolve(formula, aliases, varinvalias, axis=0, ...)`` then
    ``Kinv(*args, alpha=1e-10, eps=1e-6, backend="auto", ranges=None)`` where
    ``args`` holds ``b`` in the unknown's place. The operator must be symmetric
    positive definite (plus ``alpha``); it may mix the unknown's components
    (each problem is one system of N E unknowns). Batch axes of the arguments
    are independent problems, solved together. Stops at ``|r| <= eps |b|``
    per problem (pykeops: an absolute threshold over all of them, no
    iteration cap); warns with ``ConvergenceWarning`` after ``10 n + 100``
    iterations. {intro}
""" + _GENRED_PARAMETERS.format(extra="""
    varinvalias : str
        The name of the unknown, one of the aliases.""", formula2="") + """
    See Also
    --------
    Genred : The reduction ``A u`` itself.

    Examples
    --------
""" + _DATA + """    >>> aliases = ["x = Vi(1)", "y = Vj(1)", "b = Vj(1)"]
    >>> Kinv = KernelSolve("Exp(-SqDist(x, y)) * b", aliases, "b", axis=1)
    >>> u = Kinv(x, x, b, alpha=0.1)
    >>> bool({xp}.allclose((K + 0.1 * {xp}.eye(3, dtype=x.dtype)) @ u, b, atol=1e-5))
    True
    """

_GENERIC = """``Genred(formula, aliases, "{op}", axis{k})``, axis{kk} from ``output``.

    pykeops' shorthand: the output's alias says which index the result
    carries, hence the axis of the reduction.

    Parameters
    ----------
    formula : str
        The formula, in pykeops' syntax.
    output : str
        The output's alias: ``"a = Vi({dim})"`` reduces over j (one row per i),
        ``"a = Vj({dim})"`` over i.{kdoc}
    *aliases : str
        The arguments' aliases, in their order (``"x = Vi(1)"``, ...).
    **kwargs
        :class:`Genred`'s other options.

    Returns
    -------
    Genred
        The reduction; call it on the arrays of ``aliases``.

    See Also
    --------
    Genred : The reduction, its axis given.

    Examples
    --------
""" + _DATA.replace("{name}", "generic_{fn}") + """{example}    """

GENERIC = {
    "sum": dict(op="Sum", k="", kk="", dim="E", kdoc="", example="""\
    >>> gsum = generic_sum("Exp(-SqDist(x, y)) * b", "a = Vi(1)",
    ...                    "x = Vi(1)", "y = Vj(1)", "b = Vj(1)")
    >>> bool({xp}.allclose(gsum(x, x, b), K @ b))
    True
"""),
    "logsumexp": dict(op="LogSumExp", k="", kk="", dim="1", kdoc="", example="""\
    >>> lse = generic_logsumexp("-SqDist(x, y)", "a = Vi(1)", "x = Vi(1)", "y = Vj(1)")
    >>> bool({xp}.allclose(lse(x, x, backend="numpy"), {xp}.log(K.sum(1))[:, None]))
    True
"""),
    "argmin": dict(op="ArgMin", k="", kk="", dim="1", kdoc="", example="""\
    >>> y = {arr}([[0.9], [2.5]], dtype={xp}.float64)
    >>> nearest = generic_argmin("SqDist(x, y)", "a = Vi(1)", "x = Vi(1)", "y = Vj(1)")
    >>> nearest(x, y, backend="numpy").ravel().tolist()  # the nearest y of each x
    [0, 0, 1]
"""),
    "argkmin": dict(op="ArgKMin", k=", opt_arg=K", kk=" and K", dim="K",
                    kdoc=" K is its dimension.", example="""\
    >>> y = {arr}([[0.9], [2.5]], dtype={xp}.float64)
    >>> knn = generic_argkmin("SqDist(x, y)", "a = Vi(2)", "x = Vi(1)", "y = Vj(1)")
    >>> knn(x, y, backend="numpy").tolist()  # the two y of each x, nearest first
    [[0, 1], [0, 1], [1, 0]]
"""),
}

#: The points of the cluster examples: two in the cell (0, 0) of side 1, one
#: in (1, 0), one in (2, 1), on either grid (anchored at 0 or at the minimum).
_POINTS = """    >>> {setup}
    >>> from kerneltools.keops.{mod}.cluster import {name}
    >>> x = {arr}([[0.1, 0.1], [0.2, 0.3], [1.5, 0.2], [2.7, 1.4]],
    ...           dtype={xp}.float64)
    >>> lab = {lab}([0, 0, 1, 2])  # grid_cluster(x, 1.0), sorted
"""

_X = """    x : array of shape (M, D)
        The points."""
_LAB = """    lab : array of shape (M,)
        The points' labels (integers from 0), sorted for the ranges."""
_RANGES = """
    Returns
    -------
    array of shape (C, 2)
        ``[start, end)`` of each label's run in the sorted labels.
"""

CLUSTER = {
    "grid_cluster": ("""Label the cells of a regular grid that hold the points.

    The grid's cells have side ``size``; {anchor} Labels number the non-empty
    cells from 0 in lexicographic order of their coordinates.

    Parameters
    ----------
""" + _X + """
    size : float or array of shape (D,)
        The cells' side (one per feature).

    Returns
    -------
    array of shape (M,)
        The label of each point's cell (int64).
""", """    >>> grid_cluster(x, 1.0).tolist()
    [0, 0, 1, 2]
"""),
    "sort_clusters": ("""Sort points (and their labels) by label.

    Parameters
    ----------
    x : array of shape (M, D), or a tuple or list of such arrays
        The points (or several arrays sorted alike).
""" + _LAB + """

    Returns
    -------
    x : array of shape (M, D), or a tuple or list of them
        The points sorted by label (stable).
    lab : array of shape (M,)
        The sorted labels.
""", """    >>> xs, ls = sort_clusters(x, {lab}([1, 0, 1, 0]))
    >>> xs.tolist(), ls.tolist()
    ([[0.2, 0.3], [2.7, 1.4], [0.1, 0.1], [1.5, 0.2]], [0, 0, 1, 1])
"""),
    "cluster_ranges": ("""The index range of each cluster in sorted labels.

    Parameters
    ----------
""" + _LAB + """
    Nlab : array, default=None
        Anything of the clusters' count's length, to count empty trailing
        clusters too (pykeops' argument).
""" + _RANGES, """    >>> cluster_ranges(lab).tolist()
    [[0, 2], [2, 3], [3, 4]]
"""),
    "cluster_centroids": ("""The clusters' barycenters.

    Parameters
    ----------
""" + _X + "\n" + _LAB + """
    Nlab : array, default=None
        Accepted for pykeops' signature.
    weights : array of shape (M,), default=None
        The points' weights (1 each by default).
    weights_c : array, default=None
        Accepted for pykeops' signature.

    Returns
    -------
    array of shape (C, D)
        The (weighted) mean of each cluster's points.
""", """    >>> [[round(v, 2) for v in c] for c in cluster_centroids(x, lab).tolist()]
    [[0.15, 0.2], [1.5, 0.2], [2.7, 1.4]]
"""),
    "cluster_ranges_centroids": ("""The ranges, barycenters and weights of the clusters.

    Parameters
    ----------
""" + _X + "\n" + _LAB + """
    weights : array of shape (M,), default=None
        The points' weights (1 each by default).
    min_weight : float, default=1e-9
        Accepted for pykeops' signature.

    Returns
    -------
    ranges : array of shape (C, 2)
        As :func:`cluster_ranges`.
    centroids : array of shape (C, D)
        As :func:`cluster_centroids`.
    weights_c : array of shape (C,)
        The total weight of each cluster.
""", """    >>> ranges, centroids, weights_c = cluster_ranges_centroids(x, lab)
    >>> ranges.tolist(), weights_c.tolist()
    ([[0, 2], [2, 3], [3, 4]], [2.0, 1.0, 1.0])
"""),
    "from_matrix": ("""pykeops' 6-tuple of block-sparsity ranges from cluster pairs.

    The points sorted by cluster, a reduction given these ranges computes
    only the interactions of the cluster pairs that ``keep`` marks.

    Parameters
    ----------
    ranges_i, ranges_j : array of shape (Ci, 2) and (Cj, 2)
        The clusters' ranges of the i and j points (:func:`cluster_ranges`).
    keep : array of bool of shape (Ci, Cj)
        The cluster pairs whose interactions are computed.

    Returns
    -------
    tuple of 6 arrays
        ``(ranges_i, slices_i, redranges_j, ranges_j, slices_j,
        redranges_i)``, the ``ranges=`` argument of a reduction.
""", """    >>> r = cluster_ranges(lab)
    >>> ranges = from_matrix(r, r, {xp}.eye(3) > 0)  # each cluster with itself
    >>> [a.tolist() for a in ranges[:3]]
    [[[0, 2], [2, 3], [3, 4]], [1, 2, 3], [[0, 2], [2, 3], [3, 4]]]
"""),
    "swap_axes": ("""The 6-tuple of ranges of the transposed problem (i and j swapped).

    Parameters
    ----------
    ranges : tuple of 6 arrays
        As :func:`from_matrix` gives.

    Returns
    -------
    tuple of 6 arrays
        Its last three arrays, then its first three.
""", """    >>> r = cluster_ranges(lab)
    >>> ranges = from_matrix(r, r, {xp}.eye(3) > 0)
    >>> swapped = [a.tolist() for a in swap_axes(ranges)]
    >>> swapped == [a.tolist() for a in ranges[3:] + ranges[:3]]
    True
"""),
}

_ANCHOR = {"numpy": "as pykeops.numpy's, the grid is anchored at the origin "
                    "(cells ``floor(x / size)``).",
           "torch": "as pykeops.torch's, the grid is anchored at the points' "
                    "minimum (cells ``floor((x - min x) / size)``)."}


#: What the torch binding adds to Genred's and KernelSolve's first paragraph.
INTRO = {
    "genred": {"numpy": "", "torch": "The call takes tensors and returns tensors on "
               "their device, differentiable (``torch.autograd``)."},
    "solve": {"numpy": "", "torch": "On tensors, differentiable with respect to "
              "every input (implicit differentiation: one more solve in the "
              "backward pass, the operator taken as symmetric, as in pykeops); "
              "each product with A is a kerneltools reduction on the tensors' "
              "device."},
}


def docstring(template: str, binding: str, **slots) -> str:
    """``template`` with the binding's slots (and ``slots``) filled in."""
    return template.format(**_BINDINGS[binding], **slots)


def generic(fn: str, binding: str) -> str:
    """The docstring of ``generic_<fn>`` in ``binding``."""
    parts = dict(GENERIC[fn])
    parts["example"] = parts["example"].format(**_BINDINGS[binding])
    return docstring(_GENERIC, binding, fn=fn, **parts)


def cluster(name: str, binding: str) -> str:
    """The docstring of the cluster helper ``name`` in ``binding``."""
    head, example = CLUSTER[name]
    body = head.format(anchor=_ANCHOR[binding]) if name == "grid_cluster" else head
    return (body + "\n    Examples\n    --------\n"
            + docstring(_POINTS + example, binding, name=name) + "    ")
