"""Labels from a spectral embedding: :func:`cluster_qr` (column-pivoted QR)
and :func:`discretize` (Yu and Shi's discretisation), SpectralClustering's
``assign_labels`` other than k-means (private; public in
:mod:`kerneltools.estimators.spectral`)."""

from __future__ import annotations

import numpy as np
import scipy.linalg
from sklearn.utils import check_random_state

__all__ = ["cluster_qr", "discretize"]


def cluster_qr(vectors):
    """Labels from a spectral embedding by column-pivoted QR (Damle, Minden
    and Ying, "Simple, direct and efficient multi-way spectral clustering",
    2019): the pivots pick one representative row per cluster; the rotation
    that best aligns those rows with the axes (polar factor by SVD) assigns
    each row to its largest rotated coordinate. Deterministic.

    Parameters
    ----------
    vectors : ndarray of shape (n_samples, n_clusters)
        The embedding: the first eigenvectors of the normalised affinity.

    Returns
    -------
    ndarray of shape (n_samples,)
        The labels, in 0 .. n_clusters - 1.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.metrics import adjusted_rand_score
    >>> from kerneltools.estimators.spectral import cluster_qr
    >>> rng = np.random.default_rng(0)
    >>> labels = np.repeat([0, 1, 2], 4)
    >>> Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))  # a rotated, noisy embedding
    >>> V = np.eye(3)[labels] @ Q + 0.01 * rng.normal(size=(12, 3))
    >>> adjusted_rand_score(labels, cluster_qr(V))  # the same partition
    1.0
    """
    k = vectors.shape[1]
    piv = scipy.linalg.qr(vectors.T, pivoting=True, mode="r")[1]
    u, _, vt = scipy.linalg.svd(vectors[piv[:k]].T)
    return np.abs(vectors @ (u @ vt)).argmax(axis=1)


def discretize(vectors, *, copy=True, max_svd_restarts=30, n_iter_max=20,
               random_state=None):
    """Labels from a spectral embedding by Yu and Shi's discretisation
    ("Multiclass spectral clustering", ICCV 2003): alternate between the
    nearest indicator matrix to the rotated embedding and the rotation that
    best fits that indicator (an orthogonal Procrustes problem, by SVD),
    until the relaxed normalised cut stops changing; the first rotation is
    built from rows chosen far apart, starting from a random one.

    Parameters
    ----------
    vectors : ndarray of shape (n_samples, n_clusters)
        The embedding: the first eigenvectors of the normalised affinity.
    copy : bool, default=True
        False: ``vectors`` may be overwritten.
    max_svd_restarts : int, default=30
        Restarts from another random row when an SVD fails to converge.
    n_iter_max : int, default=20
        Iterations of each start.
    random_state : int, RandomState instance or None, default=None
        The first row of each start.

    Returns
    -------
    ndarray of shape (n_samples,)
        The labels, in 0 .. n_clusters - 1.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.metrics import adjusted_rand_score
    >>> from kerneltools.estimators.spectral import discretize
    >>> rng = np.random.default_rng(0)
    >>> labels = np.repeat([0, 1, 2], 4)
    >>> Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))  # a rotated, noisy embedding
    >>> V = np.eye(3)[labels] @ Q + 0.01 * rng.normal(size=(12, 3))
    >>> adjusted_rand_score(labels, discretize(V, random_state=0))
    1.0
    """
    from numpy.linalg import LinAlgError

    rng = check_random_state(random_state)
    V = np.array(vectors, dtype=np.float64, copy=copy)
    n, k = V.shape
    # unit columns of norm sqrt(n), signed by their first entry, then unit rows
    V = V / np.linalg.norm(V, axis=0) * np.sqrt(n)
    first = np.sign(V[0])
    V = V * np.where(first == 0, 1.0, -first)
    V = V / np.sqrt((V ** 2).sum(axis=1))[:, None]
    eps = np.finfo(float).eps
    for _ in range(max_svd_restarts):
        R = np.empty((k, k))
        R[:, 0] = V[rng.randint(n)]
        farness = np.zeros(n)
        for j in range(1, k):
            farness += np.abs(V @ R[:, j - 1])
            R[:, j] = V[farness.argmin()]
        previous, failed = 0.0, False
        for n_iter in range(1, n_iter_max + 2):
            labels = (V @ R).argmax(axis=1)
            fit = np.zeros((k, k))
            np.add.at(fit, labels, V)  # indicator^T V
            try:
                U, s, Vt = np.linalg.svd(fit)
            except LinAlgError:
                print("SVD did not converge, randomizing and trying again")
                failed = True
                break
            ncut = 2.0 * (n - s.sum())
            if abs(ncut - previous) < eps or n_iter > n_iter_max:
                return labels
            previous = ncut
            R = Vt.T @ U.T
        if not failed:
            break
    raise LinAlgError("SVD did not converge")
