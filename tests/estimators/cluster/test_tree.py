"""HDBSCAN's tree routines (``_condense``, ``_select``) against scikit-learn's.

The reference is scikit-learn's own (private, Cython) single-linkage,
condensed-tree and flat-clustering routines, on minimum spanning trees of
mutual reachability (dense, from SciPy) of random blobs, some rounded to a
grid so that weights tie: the single-linkage tree and the condensed tree
must be identical field by field, the labels identical and the
probabilities equal (both are computed with the same float operations in
the same order). Combinations where scikit-learn itself raises (its
``cluster_selection_epsilon`` walk indexes a NumPy array as a scalar,
refused by NumPy 2.4; ``allow_single_cluster`` with a lone non-root
cluster) are not compared.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.sparse.csgraph import minimum_spanning_tree
from scipy.spatial.distance import cdist

from kerneltools.estimators.cluster._condense import (
    condense_tree,
    remap_non_finite,
    single_linkage,
    stability,
)
from kerneltools.estimators.cluster._select import select_clusters, tree_labels

_linkage = pytest.importorskip("sklearn.cluster._hdbscan._linkage")
_tree = pytest.importorskip("sklearn.cluster._hdbscan._tree")


def _sorted_mst(seed: int):
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(5, 300)), int(rng.integers(1, 8))
    centres, spread = rng.uniform(-10, 10, (k, 2)), rng.uniform(0.2, 2, k)
    X = np.concatenate([rng.normal(c, s, (n // k + 1, 2))
                        for c, s in zip(centres, spread)])[:n]
    if seed % 3 == 0:
        X = np.round(X)  # tied weights, duplicated points
    D = cdist(X, X)
    core = np.sort(D, axis=1)[:, int(rng.integers(0, 5))]
    M = np.maximum(np.maximum(core[:, None], core[None]), D)
    T = minimum_spanning_tree(M + 1e-300).tocoo()  # zeros are edges too
    mst = np.rec.fromarrays([T.row, T.col, M[T.row, T.col]],
                            dtype=_linkage.MST_edge_dtype)
    assert len(mst) == n - 1
    return mst[np.argsort(mst["distance"])]


@pytest.mark.parametrize("seed", range(12))
def test_trees_labels_and_probabilities_match_sklearn(seed):
    mst = _sorted_mst(seed)
    ref = _linkage.make_single_linkage(mst)
    ours = single_linkage(mst["current_node"], mst["next_node"], mst["distance"])
    for f in ref.dtype.names:
        np.testing.assert_array_equal(ours[f], ref[f])
    compared = 0
    for mcs, method, single, eps, mx in itertools.product(
            [2, 5, 15], ["eom", "leaf"], [False, True], [0.0, 0.5, 2.0], [None, 30]):
        if mcs > len(ref) + 1:
            continue
        theirs = _tree._condense_tree(ref, mcs)
        tree = condense_tree(ours, mcs)
        for f in theirs.dtype.names:
            np.testing.assert_array_equal(tree[f], theirs[f])
        try:
            labels, probs = _tree.tree_to_labels(ref, mcs, method, single, eps, mx)
        except (TypeError, KeyError):
            continue  # scikit-learn's own failures (module docstring)
        chosen = select_clusters(tree, stability(tree), method, single, eps, mx)
        got, got_p = tree_labels(tree, chosen, single, eps)
        np.testing.assert_array_equal(got, labels)
        np.testing.assert_array_equal(got_p, probs)
        compared += 1
    assert compared >= 20


def test_remap_non_finite_matches_sklearn():
    hdb = pytest.importorskip("sklearn.cluster._hdbscan.hdbscan")
    mst = _sorted_mst(1)
    slt = single_linkage(mst["current_node"], mst["next_node"], mst["distance"])
    n = len(slt) + 1
    rng = np.random.default_rng(0)
    raw = n + 7
    bad = np.sort(rng.choice(raw, 7, replace=False))
    finite = np.setdiff1d(np.arange(raw), bad)
    ref = hdb.remap_single_linkage_tree(slt.copy(), dict(enumerate(finite)),
                                        set(bad.tolist()))
    ours = remap_non_finite(slt, finite, set(bad.tolist()))
    for f in ref.dtype.names:
        np.testing.assert_array_equal(ours[f], ref[f])
