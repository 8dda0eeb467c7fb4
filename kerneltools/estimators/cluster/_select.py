"""HDBSCAN's flat clustering from the condensed tree, written here.

The clusters are chosen on the condensed tree's cluster rows (a few per
``min_cluster_size`` points: small loops) by excess of mass (``eom``: a
cluster is kept when its stability is at least its children's total,
``max_cluster_size`` permitting) or as the tree's leaves (``leaf``); then
``cluster_selection_epsilon`` merges the clusters born below that distance
into their ancestors born above it, and ``allow_single_cluster`` lets the
root be one. Each point is labelled with the nearest chosen cluster above
the cluster it falls from (noise when none), and its probability is its
lambda over that cluster's largest lambda. These follow scikit-learn's
``_get_clusters`` rule for rule, including where its choices depend on
the iteration order of Python sets and on the last run of a cluster's
rows (the largest lambda), so that the labels and probabilities are its
own; the per-point work is vectorised.
"""

from __future__ import annotations

import numpy as np

__all__ = ["select_clusters", "tree_labels"]


def _children(cluster_tree) -> dict:
    kids: dict = {}
    for p, c in zip(cluster_tree["parent"].tolist(), cluster_tree["child"].tolist()):
        kids.setdefault(p, []).append(c)
    return kids


def _descendants(kids: dict, node) -> list:
    out, todo = [], [node]
    while todo:
        out.extend(todo)
        todo = [c for x in todo for c in kids.get(x, ())]
    return out


def _leaves(kids: dict, root) -> list:
    """The cluster tree's leaves, depth first, children in row order."""
    out, todo = [], [root]
    while todo:
        x = todo.pop()
        if x in kids:
            todo.extend(reversed(kids[x]))
        else:
            out.append(x)
    return out


def _epsilon_search(leaves: set, cluster_tree, eps: float, allow_single) -> set:
    """The clusters ``cluster_selection_epsilon`` keeps from ``leaves``:
    a leaf born below ``eps`` gives way to its first ancestor born above."""
    parent = dict(zip(cluster_tree["child"].tolist(), cluster_tree["parent"].tolist()))
    birth = dict(zip(cluster_tree["child"].tolist(), cluster_tree["value"].tolist()))
    root = int(cluster_tree["parent"].min())
    kids = _children(cluster_tree)
    selected, processed = [], set()
    with np.errstate(divide="ignore"):
        for leaf in leaves:  # a set's order, as scikit-learn's
            if not 1 / np.float64(birth[leaf]) < eps:
                selected.append(leaf)
                continue
            if leaf in processed:
                continue
            node = leaf
            while True:
                up = parent[node]
                if up == root:
                    node = up if allow_single else node
                    break
                if 1 / np.float64(birth[up]) > eps:
                    node = up
                    break
                node = up
            selected.append(node)
            processed.update(x for x in _descendants(kids, node) if x != node)
    return set(selected)


def _eom(stab: dict, node_list, kids, sizes, max_size) -> dict:
    """Excess of mass, bottom-up over ``node_list`` (decreasing numbers)."""
    is_cluster = dict.fromkeys(node_list, True)
    for node in node_list:
        sub = float(np.sum([stab[c] for c in kids.get(node, ())]))
        if sub > stab[node] or sizes[node] > max_size:
            is_cluster[node] = False
            stab[node] = sub
        else:
            for x in _descendants(kids, node)[1:]:
                is_cluster[x] = False
    return is_cluster


def select_clusters(tree, stab: dict, method="eom", allow_single=False,
                    eps=0.0, max_size=None) -> set:
    """The chosen clusters' numbers in the condensed ``tree``."""
    node_list = sorted(stab, reverse=True)
    if not allow_single:
        node_list = node_list[:-1]
    ct = tree[tree["cluster_size"] > 1]
    kids = _children(ct)
    root = int(tree["parent"].min())
    if max_size is None:
        max_size = int(tree["child"][tree["cluster_size"] == 1].max()) + 2
    sizes = dict(zip(ct["child"].tolist(), ct["cluster_size"].tolist()))
    if allow_single:
        sizes[node_list[-1]] = int(ct["cluster_size"][ct["parent"] == node_list[-1]]
                                   .sum())
    if method == "eom":
        is_cluster = _eom(stab, node_list, kids, sizes, max_size)
        if eps != 0.0 and len(ct):
            chosen = [c for c in is_cluster if is_cluster[c]]
            if len(chosen) == 1 and chosen[0] == int(ct["parent"].min()):
                selected = chosen if allow_single else []
            else:
                selected = _epsilon_search(set(chosen), ct, eps, allow_single)
            is_cluster = {c: c in selected for c in is_cluster}
    else:
        is_cluster = dict.fromkeys(node_list, True)
        leaves = set(_leaves(kids, int(ct["parent"].min()))) if len(ct) else set()
        if not leaves:  # scikit-learn then keeps no cluster, not even the root
            is_cluster[root] = True
        selected = (_epsilon_search(leaves, ct, eps, allow_single)
                    if eps != 0.0 and leaves else leaves)
        is_cluster = {c: c in selected for c in is_cluster}
    return {c for c in is_cluster if is_cluster[c]}


def _deaths(tree) -> np.ndarray:
    """Each cluster's largest lambda over the last run of consecutive rows
    it is the parent of (scikit-learn's ``max_lambdas``)."""
    parent, value = tree["parent"], tree["value"]
    starts = np.flatnonzero(np.r_[True, parent[1:] != parent[:-1]])
    run_max = np.maximum.reduceat(value, starts)
    run_parent = parent[starts]
    deaths = np.zeros(int(parent.max()) + 1)
    last = len(run_parent) - 1 - np.unique(run_parent[::-1], return_index=True)[1]
    deaths[run_parent[last]] = run_max[last]
    return deaths


def tree_labels(tree, clusters: set, allow_single=False, eps=0.0):
    """Each point's label (the chosen clusters numbered in increasing
    order, -1 for noise) and probability."""
    parent, child, value = tree["parent"], tree["child"], tree["value"]
    root = int(parent.min())
    n = root
    order = sorted(clusters)
    cmap = {c: i for i, c in enumerate(order)}
    ct = tree[tree["cluster_size"] > 1]
    # each cluster's nearest chosen cluster above it (or itself), or root
    top = {root: root}
    for p, c in sorted(zip(ct["parent"].tolist(), ct["child"].tolist()),
                       key=lambda pc: pc[1]):
        top[c] = c if c in clusters else top[p]
    n_ids = int(parent.max()) + 1
    top_arr = np.full(max(n_ids, int(child.max()) + 1), root, np.int64)
    top_arr[list(top)] = list(top.values())
    lab_of = np.full(len(top_arr), -1, np.int64)
    lab_of[order] = np.arange(len(order))
    lab_of[root] = -1
    pts = np.flatnonzero(child < n)
    point, lam = child[pts], value[pts]
    labels = np.empty(n, np.intp)
    labels[point] = lab_of[top_arr[parent[pts]]]
    if len(clusters) == 1 and allow_single and root in clusters:
        at_root = top_arr[parent[pts]] == root
        threshold = 1 / eps if eps != 0.0 else value[parent == root].max()
        labels[point[at_root]] = np.where(lam[at_root] >= threshold, cmap[root], -1)
    probs = np.zeros(n)
    deaths = _deaths(tree)
    lab = labels[point]
    keep = lab != -1
    if keep.any():
        cl = np.asarray(order, np.int64)[lab[keep]]
        dmax, lk = deaths[cl], lam[keep]
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.minimum(lk, dmax) / dmax
        probs[point[keep]] = np.where((dmax == 0.0) | np.isinf(lk), 1.0, p)
    return labels, probs
