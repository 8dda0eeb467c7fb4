"""The spectral embeddings behind SpectralEmbedding and SpectralClustering
(private; public in :mod:`kerneltools.estimators.spectral`).

:func:`lazy_spectral_embedding` embeds a kernel affinity without forming it
beyond :data:`DENSE_MAX_SAMPLES` points (its top eigenvectors from a dense
eigendecomposition, block Lanczos, ARPACK or LOBPCG on the lazy normalised
operator); :func:`knn_affinity` and :func:`sparse_embedding` are the
``"nearest_neighbors"`` path: the sparse k-NN graph, embedded by
scikit-learn's public :func:`sklearn.manifold.spectral_embedding`.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import scipy.linalg
from scipy.sparse.csgraph import connected_components
from threadpoolctl import threadpool_limits

from ...linalg import NormalizedAffinityOperator, OffDiagonalKernel, eigsh, translated
from ..neighbors import NearestNeighbors

__all__ = ["DENSE_MAX_SAMPLES", "knn_affinity", "lazy_spectral_embedding",
           "sparse_embedding"]

#: Largest n whose embedding ``eigen_solver=None`` takes from a dense
#: eigendecomposition (8 MB; exact whatever the spectrum, where nearly
#: disconnected graphs slow the iterative solvers down), as scikit-learn
#: does for every n with a kernel affinity.
DENSE_MAX_SAMPLES = 1000


def lazy_spectral_embedding(kernel, X, n_components, *, drop_first=True,
                            eigen_solver=None, eigen_tol="auto", random_state=None,
                            backend=None, verbose=0, auto_tol=None):
    """The spectral embedding of the kernel affinity ``W = k(X, X)``, lazily.

    The ``n_components`` (plus one with ``drop_first``) largest eigenvectors
    ``u`` of ``D^-1/2 (W - diag W) D^-1/2`` (the smallest of the normalised
    Laplacian, scikit-learn's ``norm_laplacian=True``), scaled to
    ``u / sqrt(d)``, signed so that each one's largest entry is positive, and
    without the first (constant on a connected graph) with ``drop_first``.

    The affinity leaves its diagonal out of every sum
    (:class:`~kerneltools.linalg.OffDiagonalKernel`: a nearly isolated
    point keeps its small degree), and a translation-invariant kernel sees
    the data moved near the origin. ``eigen_solver``: None, a dense
    eigendecomposition up to :data:`DENSE_MAX_SAMPLES` points, block Lanczos
    beyond (float64 data: Krylov blocks from the float32 twin of the
    affinity, residuals from the float64 one); ``"lanczos"`` block Lanczos;
    ``"arpack"`` ARPACK on the lazy operator; ``"lobpcg"`` LOBPCG, or the
    dense problem below ``5 k + 1`` points as scikit-learn. Every iterative
    solver reaches its tolerance or falls back on the dense problem (or
    raises :class:`~kerneltools.exceptions.ConvergenceError` beyond
    :data:`~kerneltools.linalg.DENSE_MAX` points). ``k >= n`` eigenvectors
    (3 clusters of 3 points) are all of them, with scikit-learn's (SciPy's)
    warning. ``auto_tol``: the tolerance of ``eigen_tol="auto"`` for block
    Lanczos and LOBPCG (None: the solver's default; ARPACK's is 0, machine
    precision, as scikit-learn's). Returns an array (n, n_components) of X's
    dtype (fewer columns when ``k > n``).
    """
    n = len(X)
    k = n_components + 1 if drop_first else n_components
    if k >= n:
        # what scikit-learn does, through SciPy's eigsh: all the eigenvectors
        warnings.warn("k >= N for N * N square matrix. Attempting to use "
                      "scipy.linalg.eigh instead.", RuntimeWarning, stacklevel=3)
        k = n
    Xc = translated(kernel, X)
    W = OffDiagonalKernel(kernel, Xc, backend=backend)
    dense = (k == n or (eigen_solver is None and n <= DENSE_MAX_SAMPLES)
             or (eigen_solver == "lobpcg" and n < 5 * k + 1))
    if dense:
        V, sqrt_degrees = _dense_top_eigenvectors(W.to_dense(), k)
    else:
        V, sqrt_degrees = _iterative_top_eigenvectors(
            kernel, W, Xc, k, eigen_solver=eigen_solver, eigen_tol=eigen_tol,
            auto_tol=auto_tol, random_state=random_state, backend=backend,
            verbose=verbose)
    if verbose:
        print(f"[spectral embedding] {'dense' if dense else eigen_solver or 'lanczos'} "
              f"eigen-solver, {n} points", file=sys.stderr, flush=True)
    emb = (V[:, ::-1] / sqrt_degrees[:, None]).T  # one row per eigenvector
    rows = np.arange(len(emb))
    emb *= np.sign(emb[rows, np.abs(emb).argmax(axis=1)])[:, None]
    return (emb[1:k] if drop_first else emb[:k]).T.astype(X.dtype, copy=False)


def _dense_top_eigenvectors(W, k):
    """``(V, sqrt(d))``: the ``k`` largest eigenvectors (ascending) of the
    dense ``D^-1/2 W D^-1/2`` (``W`` without its diagonal), isolated points
    counting degree 1 as in :class:`~kerneltools.linalg.NormalizedAffinityOperator`."""
    if connected_components(W != 0, directed=False)[0] > 1:  # as scikit-learn
        warnings.warn("Graph is not fully connected, spectral embedding may not "
                      "work as expected.", stacklevel=4)
    d = W.sum(axis=1)
    if np.any(d < 0):
        raise ValueError("the affinity has negative degrees (row sums); spectral "
                         "methods need an affinity >= 0")
    s = np.sqrt(np.where(d == 0, 1.0, d))
    n = len(W)
    # one BLAS thread: at n = 1000 on 2 loaded cores, 0.07 s instead of 0.23 s
    with threadpool_limits(limits=1, user_api="blas"):
        _, V = scipy.linalg.eigh(W / s[:, None] / s[None, :],
                                 subset_by_index=(n - k, n - 1))
    return V, s


def _iterative_top_eigenvectors(kernel, W, Xc, k, *, eigen_solver, eigen_tol, auto_tol,
                                random_state, backend, verbose):
    """``(V, sqrt(d))`` as :func:`_dense_top_eigenvectors`, from the lazy
    operator by the solver asked for."""
    S = NormalizedAffinityOperator(W, 0.0)
    method = {"arpack": "arpack", "lobpcg": "lobpcg"}.get(eigen_solver, "lanczos")
    if eigen_tol == "auto":
        tol = None if method == "arpack" else auto_tol
    else:
        tol = None if eigen_tol == 0 else float(eigen_tol)
    options = {}
    if method == "lanczos":
        # blocks of k + 10 and a basis of up to 8 blocks: the k wanted
        # eigenvalues of well separated clusters are all near 1, and a block
        # no wider than that cluster of eigenvalues converges slowly (10
        # planted clusters, n = 10^4, rbf: 15 products to 1e-6 with 20
        # columns and 8 blocks, 27 with 10 columns and 4 blocks). A Nystroem
        # first block (nystroem_start) measured worse here (35 products):
        # for such a local kernel 200 landmarks explain little.
        options["block_size"] = min(len(Xc), k + 10)
        options["n_blocks"] = 8
        if Xc.dtype == np.float64:
            # float32 Krylov blocks (half the cost), float64 residuals and
            # result; the twin of the translated data keeps their digits
            options["A_fast"] = NormalizedAffinityOperator(
                OffDiagonalKernel(kernel, Xc.astype(np.float32), backend=backend), 0.0,
                degrees=S.degrees)
    wanted = k
    if method == "lobpcg":
        # guard vectors: the wanted ones' accuracy then hangs on the gap
        # after the (k + 5)-th eigenvalue, not after the k-th (a nearly
        # isolated point puts one 1e-5 below the k wanted ones at 1)
        k = max(k, min(k + 5, (len(Xc) - 2) // 5))
    _, V = eigsh(S, k, which="largest", method=method, tol=tol,
                 random_state=random_state, verbose=verbose, **options)
    return V[:, k - wanted:], S.sqrt_degrees


def knn_affinity(X, n_neighbors):
    """``(A + A^T) / 2`` for the k-NN connectivity graph ``A`` of X, each
    point its own first neighbour (scikit-learn's ``include_self=True``)."""
    A = NearestNeighbors(n_neighbors=n_neighbors).fit(X).kneighbors_graph(
        X, n_neighbors, mode="connectivity")
    return 0.5 * (A + A.T)


def sparse_embedding(A, n_components, *, drop_first, eigen_solver, eigen_tol,
                      random_state):
    """scikit-learn's public spectral embedding of a sparse affinity."""
    from sklearn.manifold import spectral_embedding

    solver = "arpack" if eigen_solver == "lanczos" else eigen_solver
    return spectral_embedding(A, n_components=n_components, eigen_solver=solver,
                              eigen_tol=eigen_tol, random_state=random_state,
                              drop_first=drop_first)
