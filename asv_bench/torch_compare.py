"""Forward + backward of a Gaussian kernel sum on torch tensors (CPU, float32):
kerneltools.torch vs pykeops.torch vs dense torch, in one run.

    loss = sum_i sum_j exp(-|x_i - y_j|^2 / (2 sigma^2)) b_j,   gradients for x, y, b, sigma

Each case runs in its own subprocess (its peak RSS is its own); the time is
the median of ``--repeat`` calls after a warm-up call (which compiles).

    python asv_bench/torch_compare.py --sizes 10000 100000 --out torch_table.md
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _runner import emit, run_child  # noqa: E402

SYSTEMS = ("kerneltools.torch", "pykeops.torch", "dense torch")


def _step(system, x, y, b, s):
    import torch

    if system == "kerneltools.torch":
        from kerneltools.torch import Pm, Vi, Vj

        K = (-Vi(x).sqdist(Vj(y)) / (2 * Pm(s) ** 2)).exp()
        out = K @ b
    elif system == "pykeops.torch":
        from pykeops.torch import LazyTensor as PL

        D = ((PL(x[:, None, :]) - PL(y[None, :, :])) ** 2).sum(-1)
        K = (-D / (2 * PL(s.view(1, 1, 1)) ** 2)).exp()
        out = K @ b
    else:
        K = torch.exp(-((x[:, None, :] - y[None, :, :]) ** 2).sum(-1) / (2 * s ** 2))
        out = K @ b
    loss = out.sum()
    return [t.detach() for t in torch.autograd.grad(loss, (x, y, b, s))] + [loss.detach()]


def child(system, n, repeat):
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(n, 3, generator=g).requires_grad_()
    y = torch.rand(n, 3, generator=g).requires_grad_()
    b = torch.rand(n, 1, generator=g).requires_grad_()
    s = torch.tensor([0.1]).requires_grad_()
    t0 = time.perf_counter()
    ref = _step(system, x, y, b, s)
    first = time.perf_counter() - t0
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = _step(system, x, y, b, s)
        times.append(time.perf_counter() - t0)
    # Accuracy against float64 (kerneltools.torch, which the tests check
    # against dense float64 torch), on the same data.
    from kerneltools.torch import Pm, Vi, Vj

    xd, yd, bd, sd = (t.detach().double().requires_grad_() for t in (x, y, b, s))
    K = (-Vi(xd).sqdist(Vj(yd)) / (2 * Pm(sd) ** 2)).exp()
    exact = torch.autograd.grad((K @ bd).sum(), (xd, yd, bd, sd))
    err = max(float((o.double() - e).abs().max() / e.abs().max()) for o, e in zip(out, exact))
    print(json.dumps({
        "system": system, "n": n, "first_s": first, "median_s": statistics.median(times),
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "max_rel_err_vs_float64": err,
    }))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dense-max", type=int, default=20_000,
                        help="largest N for dense torch (it stores N x N x 3 floats)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--child", nargs=3, metavar=("SYSTEM", "N", "REPEAT"))
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]))
        return 0
    rows = []
    for n in args.sizes:
        for system in args.systems:
            if system == "dense torch" and n > args.dense_max:
                rows.append({"system": system, "n": n,
                             "skipped": f"needs {n * n * 3 * 4 * 3 / 1e9:.0f} GB"})
                continue
            repeat = args.repeat if n <= 20_000 else 1
            row = run_child(__file__, f"{system} n={n}", [system, str(n), str(repeat)])
            rows.append(row or {"system": system, "n": n, "skipped": "failed"})
    lines = ["| N = M | system | forward + backward (s) | first call (s) | peak RSS (MB) "
             "| max rel. error vs float64 | speed-up of kerneltools.torch |",
             "|---|---|---|---|---|---|---|"]
    for n in args.sizes:
        mine = next((r for r in rows if r["n"] == n and r["system"] == SYSTEMS[0]
                     and "median_s" in r), None)
        for r in (r for r in rows if r["n"] == n):
            if "median_s" not in r:
                lines.append(f"| {n:,} | {r['system']} | {r['skipped']} | | | | |")
                continue
            ratio = (r["median_s"] / mine["median_s"]) if mine else float("nan")
            lines.append(
                f"| {n:,} | {r['system']} | {r['median_s']:.3f} | {r['first_s']:.2f} | "
                f"{r['peak_mb']:.0f} | {r['max_rel_err_vs_float64']:.1e} | {ratio:.1f}x |")
    emit(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
