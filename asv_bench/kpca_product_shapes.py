"""The Lanczos block's product ``K V`` two ways, at one shape: the engine's
many-column Sum (a float32 KernelOperator) against a BLAS row-block product
(K a block of rows at a time from one GEMM of the points plus exp, then
``@ V``; ``--sym``-style: only the blocks on and above the diagonal, each used
for its rows and, transposed, for its columns).

    python asv_bench/kpca_product_shapes.py 10000 20     # n, columns

Prints the median of 3 (wall and CPU seconds) and the ratio; BLAS on 1 and 2
threads. rbf, gamma = 1/16, D = 16, 20 Gaussian blobs (kpca_compare's data).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kpca_compare import D, make_data  # noqa: E402

GAMMA = 1.0 / D
ROWS = 1024


def blas_product(X, V, symmetric):
    """``K V`` by dense row blocks of K (float32), optionally by symmetry."""
    Z = X - X.mean(axis=0)
    sq = np.einsum("ij,ij->i", Z, Z)
    n = len(Z)
    out = np.zeros(V.shape, np.float32)
    for r0 in range(0, n, ROWS):
        r1 = min(r0 + ROWS, n)
        c0 = r0 if symmetric else 0
        Kb = Z[r0:r1] @ Z[c0:].T
        Kb *= -2
        Kb += sq[r0:r1, None]
        Kb += sq[None, c0:]
        np.maximum(Kb, 0, out=Kb)
        Kb *= -GAMMA
        np.exp(Kb, out=Kb)
        if symmetric:  # the diagonal block counts half, its lower part not at all
            b = r1 - r0
            half = np.triu(np.ones((b, b)), 1) + 0.5 * np.eye(b)
            Kb[:, :b] *= half.astype(np.float32)
            out[r0:r1] += Kb @ V[c0:]
            out[c0:] += Kb.T @ V[r0:r1]
        else:
            out[r0:r1] = Kb @ V
    return out


def median_of_3(f):
    times = []
    for _ in range(3):
        t0, c0 = time.perf_counter(), time.process_time()
        out = f()
        times.append((time.perf_counter() - t0, time.process_time() - c0))
    times.sort()
    return times[1], out


def main():
    from kerneltools.kernels import make_kernel
    from kerneltools.linalg import KernelOperator

    n, b = int(sys.argv[1]), int(sys.argv[2])
    X = make_data(n).astype(np.float32)
    V = np.random.default_rng(0).normal(size=(n, b)).astype(np.float32)
    op = KernelOperator(make_kernel("rbf", gamma=GAMMA), X)
    op.matmat(V)  # compiled, warm
    (wall, cpu), ref = median_of_3(lambda: op.matmat(V))
    print(f"load {os.getloadavg()[0]:.1f}; n = {n}, {b} columns")
    print(f"engine: wall {wall:.3f} s, CPU {cpu:.3f} s")
    for symmetric in (False, True):
        for threads in (1, 2):
            with threadpool_limits(threads):
                (w, c), out = median_of_3(lambda: blas_product(X, V, symmetric))
            err = np.abs(out - ref).max() / np.abs(ref).max()
            name = "BLAS rows" + (" (symmetric)" if symmetric else "")
            print(f"{name}, {threads} thread(s): wall {w:.3f} s, CPU {c:.3f} s; "
                  f"engine {c / cpu:.2f}x faster in CPU; difference {err:.1e}")


if __name__ == "__main__":
    main()
