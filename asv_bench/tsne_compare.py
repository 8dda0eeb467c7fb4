#!/usr/bin/env python
"""TSNE's neighbour phase: our KNeighborsTransformer against scikit-learn's TSNE.

Points: 20 Gaussian blobs, as ``lof_meanshift_compare.py``. scikit-learn's
Barnes-Hut TSNE first finds the ``K = 3 perplexity + 1`` nearest neighbours
of every point (``NearestNeighbors(algorithm='auto')``: its kd-tree or
ball-tree in low dimension, brute force above 15 features), then squares the
distances and optimises the embedding. Through our neighbours that is
``make_pipeline(KNeighborsTransformer(n_neighbors=K), TSNE(metric='precomputed'))``
(scikit-learn's approximate-nearest-neighbours pattern; TSNE squares the
graph's distances the same way), so the two embeddings are the same up to
rounding.

Timed (wall seconds, and this process's CPU seconds: on a shared machine
they say what the wall time hides), each once after a small warm-up (our
kernels compile at their first call): the neighbour phase alone (ours: the transformer's ``fit_transform``;
scikit-learn's: the two calls its TSNE makes), the check that the graphs hold
the same neighbours; with ``--full``, both whole pipelines (``init='random'``,
``random_state=0``, ``--max-iter`` iterations) and the largest difference of
the embeddings.

    python asv_bench/tsne_compare.py                   # 1e5 points, D 3 and 32
    python asv_bench/tsne_compare.py --cases 2e4:32 --full
    python asv_bench/tsne_compare.py --cases 1e5:3 --repeat 3   # medians

``--repeat N``: N calls of each phase, alternating (ours, scikit-learn, ours,
...), medians reported with the first calls: the first full-size call of a
process pays the kernel's zeroing of its fresh pages (measured at 10^5, D =
3: ~0.3 CPU s of system time, ~0.03 at the next call), which a single call
of each charges to the phase that runs first (ours).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _runner import cases, emit, table_head  # noqa: E402
from lof_meanshift_compare import blobs, cpu_timed, timed  # noqa: E402


def sklearn_neighbour_phase(X, k: int):
    """What scikit-learn's TSNE runs before its optimisation (``_fit``)."""
    from sklearn.neighbors import NearestNeighbors

    return NearestNeighbors(algorithm="auto", n_neighbors=k).fit(X).kneighbors_graph(
        mode="distance")


def our_neighbour_phase(X, k: int):
    from kerneltools.estimators import KNeighborsTransformer

    return KNeighborsTransformer(n_neighbors=k).fit_transform(X)


def same_neighbours(ours, ref) -> str:
    """Our graph (self included) against scikit-learn's (self excluded)."""
    ours = ours.tocsr().copy()
    ours.setdiag(0)
    ours.eliminate_zeros()
    ref = ref.tocsr()
    agree = np.mean([set(ours[r].indices) == set(ref[r].indices)
                     for r in range(0, ref.shape[0], max(1, ref.shape[0] // 2000))])
    return f"same neighbour sets on {100 * agree:.2f}% of sampled rows"


def rows(n: int, d: int, perplexity: float, full: bool, max_iter: int,
         repeat: int = 1) -> list[str]:
    from sklearn.manifold import TSNE
    from sklearn.pipeline import make_pipeline

    from kerneltools.estimators import KNeighborsTransformer

    k = min(n - 1, int(3.0 * perplexity + 1))
    X = blobs(n, d)
    our_neighbour_phase(X[:20000], k)  # compiles (the pruned search too: 4e8 pairs)
    kt, sk = [], []
    for _ in range(repeat):  # alternating: neither always runs on fresh pages
        *times, g_kt = cpu_timed(lambda: our_neighbour_phase(X, k))
        kt.append(times)
        *times, g_sk = cpu_timed(lambda: sklearn_neighbour_phase(X, k))
        sk.append(times)
    (t_kt, c_kt), (t_sk, c_sk) = np.median(kt, axis=0), np.median(sk, axis=0)
    first = "" if repeat == 1 else (
        f"; medians of {repeat} alternating calls (first: {kt[0][0]:.2f} ({kt[0][1]:.2f} "
        f"CPU) and {sk[0][0]:.2f} ({sk[0][1]:.2f} CPU))")
    out = [f"| neighbour phase | {d} | {n:.0e} | {k} | {t_kt:.2f} ({c_kt:.2f} CPU) | "
           f"{t_sk:.2f} ({c_sk:.2f} CPU) | {t_sk / t_kt:.1f} (CPU {c_sk / c_kt:.1f}) | "
           f"{same_neighbours(g_kt, g_sk)}{first} |"]
    if full:
        def tsne(**kw):
            return TSNE(perplexity=perplexity, init="random", random_state=0,
                        max_iter=max_iter, **kw)

        t_kt, e_kt = timed(lambda: make_pipeline(
            KNeighborsTransformer(n_neighbors=k), tsne(metric="precomputed"))
            .fit_transform(X))
        t_sk, e_sk = timed(lambda: tsne().fit_transform(X))
        out.append(f"| whole TSNE ({max_iter} iterations) | {d} | {n:.0e} | {k} | "
                   f"{t_kt:.2f} | {t_sk:.2f} | {t_sk / t_kt:.1f} | max embedding "
                   f"difference {np.max(np.abs(e_kt - e_sk)):.1e} |")
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default="1e5:3,1e5:32", help="N:D, comma-separated")
    p.add_argument("--perplexity", type=float, default=30.0)
    p.add_argument("--full", action="store_true", help="time the whole TSNE too")
    p.add_argument("--max-iter", type=int, default=250)
    p.add_argument("--repeat", type=int, default=1,
                   help="alternating calls of each phase, medians reported (the first "
                        "full-size call of a process pays for fresh pages)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    lines = table_head("seconds, ratio = scikit-learn / kerneltools",
                       ["phase", "D", "N", "K", "kerneltools s", "scikit-learn s",
                        "ratio", "check"])
    for n, d in cases(args.cases):
        lines += rows(n, d, args.perplexity, args.full, args.max_iter, args.repeat)
        print(lines[-1], file=sys.stderr, flush=True)
    emit(lines, args.out)


if __name__ == "__main__":
    main()
