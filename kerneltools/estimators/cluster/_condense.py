"""HDBSCAN's single-linkage tree and condensed tree, written here.

The minimum spanning tree's edges, sorted by weight, are merged by a
union-find into the single-linkage tree (scipy's ``linkage`` layout: the
i-th merge is node ``n + i``, with the two nodes it joins, its height and
its size). The condensed tree (Campello, Moulavi and Sander 2013) keeps the
merges of two parts of at least ``min_cluster_size`` points as cluster
splits; every other point falls out of the cluster that holds it at the
height where it is cut off. Its rows, each ``(parent cluster, child,
lambda = 1 / height, child's size)``, are laid out as scikit-learn's
``_condense_tree`` lays them out (the merges visited breadth first, left
before right; a split's two new clusters numbered in that order; a
falling subtree's points breadth first), because the cluster numbers and
the order of the float sums of stability depend on it. Here that order
comes from each node's depth and pre-order rank, both sums along the path
from the root, computed for all nodes at once by pointer jumping
(O(n log depth)), never a walk per node.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CONDENSED_DTYPE", "HIERARCHY_DTYPE", "MST_EDGE_DTYPE",
           "condense_tree", "remap_non_finite", "single_linkage", "stability"]

#: The MST's edges, the single-linkage tree and the condensed tree, in
#: scikit-learn's field names and types (its ``dbscan_clustering`` reads the
#: single-linkage tree).
MST_EDGE_DTYPE = np.dtype([("current_node", np.int64), ("next_node", np.int64),
                           ("distance", np.float64)])
HIERARCHY_DTYPE = np.dtype([("left_node", np.intp), ("right_node", np.intp),
                            ("value", np.float64), ("cluster_size", np.intp)])
CONDENSED_DTYPE = np.dtype([("parent", np.intp), ("child", np.intp),
                            ("value", np.float64), ("cluster_size", np.intp)])


def single_linkage(a, b, w) -> np.ndarray:
    """The single-linkage tree of the MST edges ``(a, b, w)`` taken in the
    given order (sorted by weight): each merge's left node is the current
    node holding ``a``, the right the one holding ``b``."""
    m = len(a)
    n = m + 1
    top = list(range(n))  # each point's union-find parent, then its merge node
    node = list(range(n))  # the tree node of each union-find root
    size = [1] * n
    left, right, csize = [0] * m, [0] * m, [0] * m
    for i, (x, y) in enumerate(zip(np.asarray(a).tolist(), np.asarray(b).tolist())):
        while top[x] != x:  # path halving
            top[x] = x = top[top[x]]
        while top[y] != y:
            top[y] = y = top[top[y]]
        left[i], right[i] = node[x], node[y]
        if size[x] < size[y]:
            x, y = y, x
        top[y] = x
        size[x] += size[y]
        csize[i] = size[x]
        node[x] = n + i
    out = np.empty(m, dtype=HIERARCHY_DTYPE)
    out["left_node"], out["right_node"] = left, right
    out["value"], out["cluster_size"] = w, csize
    return out


def _path_sums(parent: np.ndarray, off: np.ndarray, root: int) -> np.ndarray:
    """``off`` summed over each node's path up to the root (root excluded;
    ``off`` may have several columns), by pointer jumping."""
    acc = off.copy()
    acc[root] = 0
    anc = parent.copy()
    while (anc != root).any():
        acc += acc[anc]
        anc = anc[anc]
    return acc


def _top_of_runs(up: np.ndarray) -> np.ndarray:
    """Follow ``up`` (a node's next node, itself at the end) to the end."""
    while True:
        nxt = up[up]
        if (nxt == up).all():
            return up
        up = nxt


def _layout(slt: np.ndarray):
    """The tree's nodes as arrays: children, parents, leaf counts, and each
    node's breadth-first key ``(depth, pre-order rank)``."""
    m = len(slt)
    n, root = m + 1, 2 * m
    left = slt["left_node"].astype(np.int64)
    right = slt["right_node"].astype(np.int64)
    count = np.concatenate([np.ones(n, np.int64), slt["cluster_size"]])
    parent = np.empty(2 * n - 1, np.int64)
    parent[left] = parent[right] = np.arange(n, 2 * n - 1)
    parent[root] = root
    off = np.ones((2 * n - 1, 2), np.int64)  # (depth, pre-order) steps
    off[right, 1] += 2 * count[left] - 1  # the left subtree's nodes come first
    depth, pre = _path_sums(parent, off, root).T
    return left, right, count, parent, depth, pre


def _cluster_numbers(n, left, right, parent, proc, sp) -> np.ndarray:
    """Each kept node's cluster: the root n, then two per split ``sp`` (in
    breadth-first order); a kept merge that is no cluster's birth carries
    its parent's cluster; -1 elsewhere."""
    root = 2 * n - 2
    label = np.full(2 * n - 1, -1, np.int64)
    label[root] = n
    label[left[sp - n]] = n + 1 + 2 * np.arange(len(sp))
    label[right[sp - n]] = n + 2 + 2 * np.arange(len(sp))
    up = np.where(label >= 0, np.arange(2 * n - 1), parent)
    return label[_top_of_runs(np.where(proc | (label >= 0), up, np.arange(2 * n - 1)))]


def condense_tree(slt: np.ndarray, min_cluster_size: int) -> np.ndarray:
    """The condensed tree of the single-linkage tree ``slt``, its rows in
    scikit-learn's order."""
    m = len(slt)
    n, root = m + 1, 2 * m
    left, right, count, parent, depth, pre = _layout(slt)
    value = slt["value"]
    with np.errstate(divide="ignore"):
        lam = np.where(value > 0.0, 1.0 / np.where(value > 0, value, 1), np.inf)
    nodes = np.arange(n, 2 * n - 1)
    kept = (count[nodes] >= min_cluster_size) | (nodes == root)  # processed merges
    proc = np.zeros(2 * n - 1, bool)
    proc[nodes[kept]] = True
    bfs = np.empty(2 * n - 1, np.int64)
    bfs[np.lexsort((pre, depth))] = np.arange(2 * n - 1)
    big = count >= min_cluster_size
    sp = nodes[proc[n:] & big[left] & big[right]]  # merges of two clusters
    sp = sp[np.argsort(bfs[sp])]
    label = _cluster_numbers(n, left, right, parent, proc, sp)
    # each point falls from its nearest kept ancestor f, through child s
    below = np.where(proc[parent], np.arange(2 * n - 1), parent)
    below[root] = root
    s = _top_of_runs(below)[:n]
    f = parent[s]
    side = (s == right[f - n]).astype(np.int64)
    # rows: the points', then the splits' cluster rows; sorted as scikit-learn
    # appends them (the merge's breadth-first rank, left side first, then the
    # point's breadth-first position within the falling subtree)
    lc, rc = label[left[sp - n]], label[right[sp - n]]
    rows_parent = np.concatenate([label[f], label[sp], label[sp]])
    rows_child = np.concatenate([np.arange(n), lc, rc])
    rows_value = np.concatenate([lam[f - n], lam[sp - n], lam[sp - n]])
    rows_size = np.concatenate([np.ones(n, np.int64), count[left[sp - n]],
                                count[right[sp - n]]])
    k_merge = np.concatenate([bfs[f], bfs[sp], bfs[sp]])
    k_side = np.concatenate([side, np.zeros(len(sp), np.int64),
                             np.ones(len(sp), np.int64)])
    k_depth = np.concatenate([depth[:n], np.zeros(2 * len(sp), np.int64)])
    k_pre = np.concatenate([pre[:n], np.zeros(2 * len(sp), np.int64)])
    order = np.lexsort((k_pre, k_depth, k_side, k_merge))
    out = np.empty(len(order), dtype=CONDENSED_DTYPE)
    out["parent"], out["child"] = rows_parent[order], rows_child[order]
    out["value"], out["cluster_size"] = rows_value[order], rows_size[order]
    return out


def stability(tree: np.ndarray) -> dict:
    """Each cluster's stability: the sum over its rows of ``(lambda -
    lambda_birth) * size``, summed in the rows' order (scikit-learn's)."""
    parent, child = tree["parent"], tree["child"]
    root = int(parent.min())
    births = np.full(max(int(child.max()), root) + 1, np.nan)
    births[child] = tree["value"]
    births[root] = 0.0
    result = np.zeros(int(parent.max()) - root + 1)
    np.add.at(result, parent - root,
              (tree["value"] - births[parent]) * tree["cluster_size"])
    return dict(zip(range(root, root + len(result)), result.tolist()))


def remap_non_finite(slt: np.ndarray, finite: np.ndarray, non_finite) -> np.ndarray:
    """The tree of the finite rows ``finite`` in the raw rows' numbers, with
    the ``non_finite`` rows (iterated in their order) merged at the top at
    infinite height, one after the other (scikit-learn's layout)."""
    tree = slt.copy()
    nf = len(finite)
    for field in ("left_node", "right_node"):
        x = tree[field]
        tree[field] = np.where(x < nf, finite[np.minimum(x, nf - 1)],
                               x + len(non_finite))
    extra = np.zeros(len(non_finite), dtype=HIERARCHY_DTYPE)
    last_id = max(tree[-1]["left_node"], tree[-1]["right_node"])
    last_size = tree[-1]["cluster_size"]
    steps = np.arange(1, len(non_finite) + 1)
    extra["left_node"] = list(non_finite)
    extra["right_node"] = last_id + steps
    extra["value"] = np.inf
    extra["cluster_size"] = last_size + steps
    return np.concatenate([tree, extra])
