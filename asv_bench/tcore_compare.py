"""GPU benchmark: the tensor-core kernel against our SIMT kernel and pykeops.

Gaussian ``K @ B``, ``K = exp(-|x - y|^2 / D)`` on standard normal points,
float32, N = M = ``--n`` (10^5), D = 64 and 256, B with 1 and 64 columns,
data resident on the GPU (CuPy arrays; torch CUDA tensors for pykeops).
Systems: kerneltools' CUDA backend with its generic (SIMT) kernel, the same
with ``KERNELTOOLS_CUDA_TENSOR_CORES=1`` (the 3xTF32 mma kernel of
``kerneltools/backend/cuda/_tcore.py``), pykeops where it imports. Times:
medians of ``--repeat`` synchronised calls after a warm-up call (which
compiles). Accuracy: the largest relative error of the sums (B >= 0, so
every sum is positive) on the first ``--check-rows`` rows against float64
dense CuPy. Each row prints as one JSON line; ``--out`` writes them all,
with the ratios tcore / SIMT and tcore / pykeops.

    python asv_bench/tcore_compare.py --out tcore.json
"""

from __future__ import annotations

import argparse
import json
import os
import traceback

import numpy as np

from cuda_compare import _timed  # noqa: E402  (asv_bench/ is the script's folder)

ENV = "KERNELTOOLS_CUDA_TENSOR_CORES"


def _reference(x, y, b, gamma, rows):
    """float64 dense K @ B on the first ``rows`` rows (chunks of y)."""
    import cupy

    x64, out = x[:rows].astype(cupy.float64), 0
    xn = (x64 * x64).sum(1)[:, None]
    for j0 in range(0, len(y), 20000):
        y64 = y[j0:j0 + 20000].astype(cupy.float64)
        d2 = cupy.maximum(xn + (y64 * y64).sum(1)[None] - 2 * x64 @ y64.T, 0)
        out = out + cupy.exp(-gamma * d2) @ b[j0:j0 + 20000].astype(cupy.float64)
    return cupy.asnumpy(out)


def _kt(x, y, b, gamma, tcore: bool):
    import kerneltools as kt

    def call():
        old = os.environ.pop(ENV, None)
        if tcore:
            os.environ[ENV] = "1"
        try:
            return (-kt.Vi(x).sqdist(kt.Vj(y)) * gamma).exp().matmul(b, backend="cuda")
        finally:
            os.environ.pop(ENV, None)
            if old is not None:
                os.environ[ENV] = old

    return call


def _keops(x, y, b, gamma):
    import torch
    from pykeops.torch import LazyTensor as PL

    xt, yt, bt = (torch.as_tensor(a, device="cuda") for a in (x, y, b))
    return lambda: (-((PL(xt[:, None, :]) - PL(yt[None, :, :])) ** 2).sum(-1) * gamma).exp() @ bt


def run(n, dims, cols, repeat, check_rows, systems):
    import cupy

    rows = []
    for d in dims:
        for e in cols:
            rng = np.random.default_rng(0)
            x = cupy.asarray(rng.standard_normal((n, d), dtype=np.float32))
            y = cupy.asarray(rng.standard_normal((n, d), dtype=np.float32))
            b = cupy.asarray(rng.random((n, e), dtype=np.float32))
            gamma = 1.0 / d
            ref = _reference(x, y, b, gamma, check_rows)
            makers = {"kerneltools simt": lambda: _kt(x, y, b, gamma, False),
                      "kerneltools tcore": lambda: _kt(x, y, b, gamma, True),
                      "pykeops": lambda: _keops(x, y, b, gamma)}
            for system in systems:
                row = {"n": n, "d": d, "e": e, "system": system}
                try:
                    out, first, med = _timed(makers[system](), repeat)
                    got = cupy.asnumpy(out) if isinstance(out, cupy.ndarray) else \
                        out.detach().cpu().numpy()
                    got = got.reshape(n, e)[:check_rows].astype(np.float64)
                    row.update(first_s=first, median_s=med,
                               max_rel_err=float(np.max(np.abs(got / ref - 1))))
                except Exception as exc:
                    row["skipped"] = f"{type(exc).__name__}: {str(exc)[:300]}"
                    traceback.print_exc()
                rows.append(row)
                print(json.dumps(row), flush=True)
            del x, y, b
            cupy.get_default_memory_pool().free_all_blocks()
    return rows


def ratios(rows):
    """tcore / SIMT and tcore / pykeops speed-ups per (d, e)."""
    by = {(r["d"], r["e"], r["system"]): r.get("median_s") for r in rows}
    out = []
    for d, e in sorted({(r["d"], r["e"]) for r in rows}):
        t = by.get((d, e, "kerneltools tcore"))
        entry = {"d": d, "e": e}
        for other in ("kerneltools simt", "pykeops"):
            o = by.get((d, e, other))
            if t and o:
                entry[f"speedup_vs_{other.split()[-1]}"] = o / t
        out.append(entry)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dims", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--cols", type=int, nargs="+", default=[1, 64])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--check-rows", type=int, default=1000)
    ap.add_argument("--systems", nargs="+",
                    default=["kerneltools simt", "kerneltools tcore", "pykeops"])
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    rows = run(args.n, args.dims, args.cols, args.repeat, args.check_rows, args.systems)
    summary = ratios(rows)
    for entry in summary:
        print(json.dumps(entry), flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"rows": rows, "ratios": summary}, fh, indent=1)


if __name__ == "__main__":
    main()
