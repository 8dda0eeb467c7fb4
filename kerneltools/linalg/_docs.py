"""The docstrings of some of ``kerneltools.linalg``'s functions, and the
numpydoc sections of some of its methods.

Kept here so that ``linalg/__init__.py`` stays within the layout's line
limit; ``__init__`` assigns each to its function's ``__doc__``, and appends
the sections to the methods' docstrings (the API reference, ``help()`` and
the doctests read them from there).
"""

import inspect

_SETUP = """    >>> import numpy as np
    >>> from kerneltools.kernels import make_kernel
    >>> from kerneltools import linalg
    >>> X = np.random.default_rng(0).normal(size=(50, 2))
    >>> kernel = make_kernel("rbf", gamma=0.5)
"""

SELECT_LANDMARKS = """Choose ``n_components`` landmark rows of X.

    ``"uniform"`` samples without replacement. ``"rpcholesky"`` runs randomly
    pivoted Cholesky (Chen, Epperly, Tropp and Webber, 2022): each pivot is
    drawn with probability proportional to the diagonal of the residual
    ``K - K_nS K_SS^{-1} K_Sn``, which favours points that the landmarks
    chosen so far explain badly. It keeps an ``n x m`` factor, so it runs on
    a uniform subsample of ``min(n, max(20 m, 10 000))`` rows.

    Parameters
    ----------
    kernel : Kernel
        The kernel (for ``"rpcholesky"``; see
        :func:`~kerneltools.kernels.make_kernel`).
    X : array-like of shape (n, d)
        The points.
    n_components : int
        The number of landmarks, ``1 <= m <= n``.
    method : {"uniform", "rpcholesky"}, default="uniform"
        How to choose them (above).
    random_state : int, Generator or None, default=None
        Seeds the choice.

    Returns
    -------
    ndarray of shape (n_components,), int
        The indices of the landmarks in X.

    Examples
    --------
""" + _SETUP + """\
    >>> idx = linalg.select_landmarks(
    ...     kernel, X, 5, method="rpcholesky", random_state=0)
    >>> idx.shape, len(set(idx.tolist()))
    ((5,), 5)
    """

ROBUST_CHOLESKY = """Compute the Cholesky factor of a positive semi-definite matrix.

    ``L`` with ``L L^T = A + j I`` (``lower=True``), or ``U`` with
    ``U^T U = A + j I``. The jitter ``j`` is 0 when ``A`` factors as it is;
    otherwise the first of ``10^-12 s``, ``10^-10 s``, ... ``s`` that lets it
    factor, ``s`` the mean of the diagonal: rounding makes kernel matrices of
    nearly dependent points fail a plain Cholesky by about ``n eps s``.

    Parameters
    ----------
    A : ndarray of shape (n, n)
        The symmetric positive semi-definite matrix.
    lower : bool, default=True
        The lower factor ``L``, or the upper ``U``.
    what : str, default="the matrix"
        Names the matrix in the ``LinAlgError`` raised when no jitter lets
        it factor.

    Returns
    -------
    ndarray of shape (n, n)
        The triangular factor.

    Examples
    --------
    >>> import numpy as np
    >>> from kerneltools.linalg import robust_cholesky
    >>> L = robust_cholesky(np.ones((2, 2)))  # singular: j = 1e-12 lets it factor
    >>> bool(np.allclose(L @ L.T, np.ones((2, 2))))
    True
    """

LANDMARK_SUMS = """Compute ``K(Z, X) A = sum_i k(Z, x_i) A_i`` over blocks of rows of X.

    Each block is a dense ``block x m`` kernel matrix: for few landmarks
    ``Z`` and many points X this needs no copy of X (a lazy reduction over X
    packs it into tiles, about three times its size at once: 400 MB at
    10^6 x 16).

    Parameters
    ----------
    kernel : Kernel or str
        Anything :func:`~kerneltools.kernels.make_kernel` accepts.
    X : array-like of shape (n, d)
        The points.
    Z : array-like of shape (m, d)
        The landmarks.
    A : array-like of shape (n,) or (n, E)
        The weights of the points.
    block : int, default=4096
        Rows of X per dense block.

    Returns
    -------
    ndarray of shape (m, E), float64
        The sums.

    Examples
    --------
""" + _SETUP + """\
    >>> S = linalg.landmark_sums(kernel, X, X[:3], np.ones(50))
    >>> K = np.exp(-0.5 * ((X[:3, None] - X[None]) ** 2).sum(-1))
    >>> S.shape, bool(np.allclose(S[:, 0], K.sum(1)))
    ((3, 1), True)
    """

NYSTROEM_START = """Compute a starting block for block Lanczos on a kernel operator.

    The top eigenvectors of the operator's (centred, or scaled as ``S K S``)
    Nystroem approximation on ``n_landmarks`` uniform landmarks
    (:func:`nystroem_eigh`, ``O(n m (d + m))``, a small fraction of one
    product with the operator for ``m`` well below ``n``), completed by random
    normal columns when the approximation has fewer than ``b``.
    :func:`block_lanczos` then starts near the wanted invariant subspace: on
    20 Gaussian blobs (n = 10^4, D = 16, rbf, 10 components) the float32 Krylov products
    needed to reach a relative residual of 1e-6 went from 8 to 5.

    Parameters
    ----------
    kernel : Kernel or str
        Anything :func:`~kerneltools.kernels.make_kernel` accepts.
    X : array-like of shape (n, d)
        The points.
    b : int
        The number of vectors.
    n_landmarks : int, default=START_LANDMARKS
        The landmarks of the approximation (at most n).
    center : bool, default=True
        Whether the operator is the centred kernel.
    scale : array-like of shape (n,), default=None
        ``S``'s diagonal, for a scaled operator ``S K S``.
    random_state : int, Generator, RandomState or None, default=None
        Seeds the landmarks and the random columns.
    backend : str or None, default=None
        The backend of the reductions (None: the configured one).

    Returns
    -------
    ndarray of shape (n, b)
        The starting block.

    Examples
    --------
""" + _SETUP + """\
    >>> V = linalg.nystroem_start(kernel, X, 4, n_landmarks=20, random_state=0)
    >>> V.shape
    (50, 4)
    """

#: The Parameters and Returns sections of ``NystroemPreconditioner``'s
#: methods, by method: ``__init__`` appends each to the method's docstring.
NYSTROEM_METHODS = {
    "with_shift": """
    Parameters
    ----------
    shift : float
        The new uniform shift (plus the kernel's white-noise level, as when
        building, it must be > 0).

    Returns
    -------
    NystroemPreconditioner
        A copy for ``shift`` (``self`` is unchanged).
    """,
    "logdet": """
    Returns
    -------
    float
        ``log det P``, ``P = D + F F^T`` the approximation of ``K + D``
        that this preconditioner inverts.
    """,
    "sample": """
    Parameters
    ----------
    n_samples : int
        The number of columns.
    random_state : int, Generator or None, default=None
        Seeds the draw (``numpy.random.default_rng``).

    Returns
    -------
    ndarray of shape (n, n_samples)
        The columns, each drawn from ``N(0, P)``, ``P = D + F F^T``.
    """,
}


def with_sections(doc: str, sections: str) -> str:
    """``doc`` (a docstring, cleaned) followed by ``sections`` (cleaned)."""
    return inspect.cleandoc(doc) + "\n\n" + inspect.cleandoc(sections) + "\n"
