"""The docstrings of ``kerneltools.stats``' functions.

Kept here so that ``stats/__init__.py`` stays within the layout's line
limit; ``__init__`` assigns each to its function's ``__doc__`` (the API
reference, ``help()`` and the doctests read them from there).
"""

_SAMPLES = """    >>> import numpy as np
    >>> from kerneltools import stats
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(30, 2))
    >>> Y = rng.normal(size=(30, 2)) + 2.0
"""

_BACKEND = """backend : {"auto", "cpu", "cuda", "numpy"} or None, default=None
        The backend of the reductions (None: the configured one)."""

MEDIAN_BANDWIDTH = """Compute the median heuristic's bandwidth.

    The median of the pairwise distances of ``Z``, on a seeded subsample of
    at most 1,000 points.

    Parameters
    ----------
    Z : array-like of shape (n, D)
        The sample.
    metric : {"euclidean", "manhattan"}, default="euclidean"
        The distance.
    random_state : int, default=0
        Seeds the subsample (for more than 1,000 points).

    Returns
    -------
    float
        The median distance.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.stats import median_bandwidth
    >>> median_bandwidth(np.array([[0.0], [1.0], [3.0]]))
    2.0
    """

MMD2 = """Compute the squared maximum mean discrepancy between two samples.

    Parameters
    ----------
    X : array-like of shape (n, D)
        The first sample.
    Y : array-like of shape (m, D)
        The second sample.
    kernel : str, callable or Kernel, default="rbf"
        Any kernel of :func:`kerneltools.kernels.make_kernel`, or ``"energy"``
        (``-|x - y|``: the energy distance).
    gamma : float > 0 or None, default=None
        The kernel's ``gamma``; None for ``"rbf"`` (``"laplacian"``): the median
        heuristic, ``1 / (2 med^2)`` (``1 / med``, L1 distances) on the pooled
        sample.
    unbiased : bool, default=True
        The U-statistic (no ``k(z_i, z_i)`` terms; Gretton et al. 2012, Eq. 3;
        needs 2 samples of each) or the biased V-statistic
        ``|mu_X - mu_Y|^2`` (Eq. 5; defined from 1 sample of each).
    kernel_params : dict, optional
        Other parameters of ``make_kernel`` (``degree``, ``coef0``).
    """ + _BACKEND + """

    Returns
    -------
    float
        The MMD^2 estimate.

    See Also
    --------
    mmd_test : Its permutation test.

    Examples
    --------
""" + _SAMPLES + """\
    >>> print(f"{stats.mmd2(X, Y):.2f}")
    0.63
    """

MMD_TEST = """Kernel two-sample test: MMD^2 and its permutation p-value.

    All the permutations are evaluated together: each is a column (its
    labelling) of one matrix ``U``, and ``K @ U`` gives every statistic. The
    permutations are ``rng.permutation(n + m)`` for
    ``rng = np.random.default_rng(random_state)``, in order; the first ``n``
    indices of each are labelled X. Two ways to compute ``K @ U``, with the
    same permutations and statistics (to rounding):

    - ``method="blocks"``: K by dense row blocks (one BLAS product of the
      points each, in float64), each block times every column at once
      (BLAS), in the samples' dtype (float32 products for float32 samples;
      the columns sum to zero, so the blocks are shifted by K's mean). The
      statistic (and ``K 1``) come from the float64 blocks: exact to float64
      rounding for float32 samples too; the null distribution from the
      float32 products (within about 2e-4 of the statistic's size on close
      samples). For the ``"rbf"`` and ``"energy"`` kernels on the CPU.
      Memory: a block (at most 64 MB) and the columns (at most 1 GiB; more
      columns go in several passes, each recomputing K), never ``(n + m)^2``.
    - ``method="reductions"``: the engine's Sum reductions on ``backend``
      (``batch_size`` columns per pass over the pairs, 32 per kernel), in
      float64 (float32 samples too, as :func:`mmd2`); any kernel, any
      backend (CUDA included).
    - ``"auto"`` (default): ``"blocks"`` when the kernel is served and the
      backend is the CPU (``"cpu"``, or ``"auto"`` without a GPU), else
      ``"reductions"``.

    Parameters
    ----------
    X : array-like of shape (n, D)
        The first sample.
    Y : array-like of shape (m, D)
        The second sample.
    kernel : str, callable or Kernel, default="rbf"
        As in :func:`mmd2`.
    gamma : float > 0 or None, default=None
        As in :func:`mmd2` (the median heuristic on the pooled sample).
    unbiased : bool, default=True
        As in :func:`mmd2`.
    n_permutations : int >= 1, default=1000
        The number of permutations.
    batch_size : int >= 1 or None, default=None
        Permutations per pass over the pairs; None: 100 with reductions, as
        many as 1 GiB of columns hold with blocks.
    random_state : int, Generator or None, default=None
        Seeds the permutations.
    kernel_params : dict, optional
        As in :func:`mmd2`.
    """ + _BACKEND + """
    method : {"auto", "blocks", "reductions"}, default="auto"
        How ``K @ U`` is computed (above).
    verbose : bool, default=False
        Print progress after each batch.

    Returns
    -------
    PermutationTestResult
        The statistic (:func:`mmd2`), the p-value and the null distribution.

    See Also
    --------
    linear_mmd_test : A linear-time test with an asymptotic p-value.

    Examples
    --------
""" + _SAMPLES + """\
    >>> result = stats.mmd_test(X, Y, n_permutations=99, random_state=0)
    >>> result.pvalue, result.null_distribution.shape
    (0.01, (99,))
    """

ENERGY_DISTANCE = """Compute the squared energy distance between two samples.

    ``2 E|X - Y| - E|X - X'| - E|Y - Y'|`` (V-statistic, defined from 1
    sample of each; in 1-D the square of ``scipy.stats.energy_distance``).

    Parameters
    ----------
    X : array-like of shape (n, D)
        The first sample.
    Y : array-like of shape (m, D)
        The second sample.
    """ + _BACKEND + """

    Returns
    -------
    float
        The squared energy distance.

    See Also
    --------
    energy_test : Its permutation test.

    Examples
    --------
""" + _SAMPLES + """\
    >>> print(f"{stats.energy_distance(X, Y):.2f}")
    3.02
    """

ENERGY_TEST = """Energy-distance two-sample test (Székely and Rizzo).

    :func:`energy_distance` and its permutation p-value, computed as in
    :func:`mmd_test`.

    Parameters
    ----------
    X : array-like of shape (n, D)
        The first sample.
    Y : array-like of shape (m, D)
        The second sample.
    n_permutations : int >= 1, default=1000
        The number of permutations.
    batch_size : int >= 1 or None, default=None
        Permutations per pass over the pairs (see :func:`mmd_test`).
    random_state : int, Generator or None, default=None
        Seeds the permutations.
    """ + _BACKEND + """
    method : {"auto", "blocks", "reductions"}, default="auto"
        As in :func:`mmd_test`.
    verbose : bool, default=False
        Print progress after each batch.

    Returns
    -------
    PermutationTestResult
        The statistic, the p-value and the null distribution.

    Examples
    --------
""" + _SAMPLES + """\
    >>> stats.energy_test(X, Y, n_permutations=99, random_state=0).pvalue
    0.01
    """

LINEAR_MMD_TEST = """Compute the linear-time MMD^2 and its asymptotic (normal) p-value.

    Gretton et al. 2012, Lemma 14 and Corollary 16: the mean over
    ``k = 1..n2`` (``n2 = min(n, m) // 2``) of
    ``h_k = k(x_{2k-1}, x_{2k}) + k(y_{2k-1}, y_{2k}) - k(x_{2k-1}, y_{2k})
    - k(x_{2k}, y_{2k-1})``; the p-value is ``1 - Phi(stat / (s / sqrt(n2)))``
    with ``s`` the standard deviation of the ``h_k``. O(n) time and memory.

    Parameters
    ----------
    X : array-like of shape (n, D)
        The first sample.
    Y : array-like of shape (m, D)
        The second sample.
    kernel : str, callable or Kernel, default="rbf"
        As in :func:`mmd2`.
    gamma : float > 0 or None, default=None
        As in :func:`mmd2` (the median heuristic on the pooled sample).
    kernel_params : dict, optional
        As in :func:`mmd2`.
    """ + _BACKEND + """

    Returns
    -------
    TestResult
        The statistic and the p-value.

    Examples
    --------
""" + _SAMPLES + """\
    >>> result = stats.linear_mmd_test(X, Y)
    >>> print(f"{result.statistic:.2f}", result.pvalue < 0.01)
    0.67 True
    """

_PAIRED = """X : array-like of shape (n, D)
        The first sample.
    Y : array-like of shape (n, E)
        The second, paired with X row by row (its dimension may differ).
    kernel_x, kernel_y : str, callable or Kernel, default="rbf"
        The kernels on X and on Y (as ``kernel`` of :func:`mmd2`).
    gamma_x, gamma_y : float > 0 or None, default=None
        Their ``gamma``; None for rbf / laplacian: the median heuristic on
        each sample."""

HSIC = """Compute the (biased) Hilbert-Schmidt independence criterion.

    ``HSIC_b = trace(K H L H) / n^2`` (Gretton et al. 2007, Eq. 4), for
    paired samples.

    Parameters
    ----------
    """ + _PAIRED + """
    """ + _BACKEND + """

    Returns
    -------
    float
        The statistic.

    See Also
    --------
    hsic_test : Its permutation test.

    Examples
    --------
""" + _SAMPLES + """\
    >>> print(f"{stats.hsic(X, X ** 2):.3f}")
    0.017
    """

HSIC_TEST = """Independence test: :func:`hsic` and its permutation p-value.

    The permutations (``rng.permutation(n)`` in order, applied to Y) break the
    pairing. ``sum_ij K_ij L_pi(i)pi(j)`` does not factor through a matrix
    product, but the permutations share ``K``: batches of
    :data:`HSIC_BATCH` permutations are one reduction each, ``K_ij``
    computed once per pair for the batch, ``L`` at the permuted points; the
    row sums ``L 1`` are computed once and permuted.

    Parameters
    ----------
    """ + _PAIRED + """
    n_permutations : int >= 1, default=1000
        The number of permutations.
    random_state : int, Generator or None, default=None
        Seeds the permutations.
    """ + _BACKEND + """
    verbose : bool, default=False
        Print progress after each batch.

    Returns
    -------
    PermutationTestResult
        The statistic, the p-value and the null distribution.

    Examples
    --------
""" + _SAMPLES + """\
    >>> stats.hsic_test(X, X ** 2, n_permutations=99, random_state=0).pvalue
    0.01
    """
