"""KernelPCA side by side: kerneltools vs scikit-learn, one run.

RBF kernel (gamma = 1 / D), 10 components, D = 16 (Gaussian blobs), float64.
Each case runs in its own subprocess, so its peak resident memory
(``ru_maxrss``, Python and NumPy included) is its own. For each case: the
fit time (wall and CPU: the process's CPU seconds, all its threads), the peak
memory (and the peak before the fit: Python, the libraries and the data) and the largest relative residual
``|Kc v - lambda v| / lambda`` of the components, ``Kc`` the centred kernel
matrix (applied lazily by kerneltools' ``CenteredOperator``, after the timed
fit, the same check for every system; one exact float64 product of the
components, so it is skipped beyond ``--residual-max-n``). ``kerneltools:nystroem``
also reports its stated eigenvalue error bound ``approximation_error_`` relative
to the largest eigenvalue.

    python asv_bench/kpca_compare.py                       # n = 10^4, all cases
    python asv_bench/kpca_compare.py --n 100000 --cases kerneltools:lanczos
    python asv_bench/kpca_compare.py --n 1000000 --cases kerneltools:nystroem \
        --landmarks 200 --residual-max-n 0
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _runner import emit, run_child  # noqa: E402

DEFAULT_CASES = ("sklearn:arpack,sklearn:randomized,kerneltools:lanczos,"
                 "kerneltools:nystroem")
D = 16
K = 10


def make_data(n, seed=0):
    """n points from 20 Gaussian blobs (std 1) in D dimensions."""
    import numpy as np

    rng = np.random.default_rng(seed)
    centers = rng.uniform(-3, 3, size=(20, D))
    labels = rng.integers(0, 20, n)
    X = rng.normal(size=(n, D))
    for s in range(0, n, 1 << 16):  # no (n, D) temporaries: 128 MB each at 10^6
        X[s:s + (1 << 16)] += centers[labels[s:s + (1 << 16)]]
    return X


def residual(X, model) -> float:
    """Largest ``|Kc v - lambda v| / lambda`` over the components (lazy Kc)."""
    import numpy as np

    from kerneltools.kernels import make_kernel
    from kerneltools.linalg import CenteredOperator, KernelOperator

    op = CenteredOperator(KernelOperator(make_kernel("rbf", gamma=1.0 / D), X))
    V = np.asarray(model.eigenvectors_, dtype=np.float64)
    lam = np.asarray(model.eigenvalues_, dtype=np.float64)
    R = op.matmat(V) - V * lam
    return float((np.linalg.norm(R, axis=0) / lam).max())


def count_products():
    """Count kerneltools' kernel products (calls, columns) in this process:
    those of kernel operators and of the diagonal-free spectral affinity."""
    from kerneltools.linalg._spectral_operators import OffDiagonalKernel
    from kerneltools.linalg._operators import KernelOperator

    tally = {"products": 0, "columns": 0}
    for cls in (KernelOperator, OffDiagonalKernel):
        inner = cls._matmat

        def counted(self, V, _inner=inner):
            tally["products"] += 1
            tally["columns"] += 1 if V.ndim == 1 else V.shape[1]
            return _inner(self, V)

        cls._matmat = counted
    return tally


def child(system, solver, n, landmarks, residual_max_n):
    import resource

    X = make_data(n)
    tally = count_products() if system == "kerneltools" else None
    if system == "sklearn":
        from sklearn.decomposition import KernelPCA
    else:
        from kerneltools.estimators import KernelPCA
    extra = {"n_landmarks": landmarks} if solver == "nystroem" else {}
    model = KernelPCA(K, kernel="rbf", gamma=1.0 / D, eigen_solver=solver, random_state=0,
                      **extra)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0, c0 = time.perf_counter(), time.process_time()
    model.fit(X)
    fit_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    products = None if tally is None else dict(tally)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    bound = getattr(model, "approximation_error_", None)
    print(json.dumps({"system": system, "solver": solver, "n": n, "fit_s": fit_s,
                      "cpu_s": cpu_s, "peak_mb": rss, "base_mb": base,
                      "residual": residual(X, model) if n <= residual_max_n else None,
                      "bound": None if bound is None else bound / model.eigenvalues_[0],
                      "top": float(model.eigenvalues_[0]),
                      "eigenvalues": [float(v) for v in model.eigenvalues_],
                      "products": products}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=DEFAULT_CASES,
                    help="comma-separated system:eigen_solver")
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--out", default=None, help="also write the table to this file")
    ap.add_argument("--landmarks", type=int, default=1000,
                    help="n_landmarks of kerneltools:nystroem")
    ap.add_argument("--residual-max-n", type=int, default=100_000,
                    help="largest n whose residual is measured (one exact product)")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        system, solver, n, landmarks, rmax = args.child
        child(system, solver, int(n), int(landmarks), int(rmax))
        return
    load0 = os.getloadavg()
    rows = []
    for case in args.cases.split(","):
        system, solver = case.split(":")
        row = run_child(__file__, case, [system, solver, str(args.n), str(args.landmarks),
                                         str(args.residual_max_n)])
        if row is not None:
            rows.append(row)
    load1 = os.getloadavg()
    anchor = next((r["fit_s"] for r in rows if r["system"] == "sklearn"), None)
    lines = [
        f"KernelPCA, rbf (gamma = 1/{D}), {K} components, n = {args.n:,}, D = {D}, "
        "float64; one run per case, each in its own process.",
        f"Machine: {platform.node() or 'vm'}, {os.cpu_count()} logical CPUs (shared); "
        f"load average (1 min) {load0[0]:.2f} at start, {load1[0]:.2f} at end.",
        "",
        "| system | eigen_solver | fit (s) | vs first scikit-learn case | CPU (s) | "
        "peak RSS (MB) (before the fit) | max |Kc v - lambda v| / lambda | "
        "stated eigenvalue error / lambda_1 | max eigenvalue difference to the first "
        "case, relative | kernel products (columns) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    ref = rows[0]["eigenvalues"] if rows else None
    for r in rows:
        ratio = f"{anchor / r['fit_s']:.2f}x" if anchor else ""
        res = "not measured" if r["residual"] is None else f"{r['residual']:.1e}"
        bound = "" if r["bound"] is None else f"{r['bound']:.1e}"
        name = r["solver"]
        if name == "nystroem":
            name += f" (m = {args.landmarks})"
        diff = max(abs(a / b - 1) for a, b in zip(r["eigenvalues"], ref))
        prod = "" if r["products"] is None else (f"{r['products']['products']} "
                                                 f"({r['products']['columns']})")
        lines.append(f"| {r['system']} | {name} | {r['fit_s']:.2f} | {ratio} | "
                     f"{r['cpu_s']:.1f} | {r['peak_mb']:.0f} ({r['base_mb']:.0f}) | {res} | "
                     f"{bound} | {diff:.1e} | {prod} |")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
