"""SamplesLoss on CUDA tensors (issue 27): a check against the CPU and a
timing against GeomLoss, in one run.

1. Check (``--check-size`` points, 2,000 by default; D = 3, float32 and
   float64, the clouds of ``benchmarks/losses.py`` with random masses): for
   each loss ("sinkhorn", "hausdorff", "energy", "gaussian", "laplacian"
   and the multiscale Sinkhorn), the value and the gradients in x, y, a, b
   of CUDA tensors against the same CPU tensors (``value_rel_diff``, and
   ``grad_rel_diff``: the largest of the four, each relative to its largest
   entry), and ``big_host_copies``: the device-to-host copies of more than
   D numbers during the CUDA run (``Space.host``, ``cupy.asnumpy``,
   ``Tensor.cpu``, ``Tensor.numpy``): 0 but for the multiscale Sinkhorn (one copy of the
   points, masses and jump potentials, 8 in all).
2. Time (``--sizes``, 10^5 by default; D = 3, float32, blur 0.05): one
   forward + backward in x of ``SamplesLoss("sinkhorn")(x, y)`` on CUDA
   tensors, one untimed warm-up (compilations) then the median of
   ``--repeat`` synchronised runs, against GeomLoss's ``"online"`` backend
   (KeOps) on the same tensors where geomloss and pykeops import (else the
   row says why), with the value each computes, the ratio
   ``geomloss / kerneltools`` and the peak of torch's and CuPy's GPU memory.

``--cpu`` (no GPU needed; what the test suite runs at a tiny size so that the
script cannot rot): the check compares the simulated device
(``simulated_cuda_tensors``: CPU tensors through the device path, with
array-api-strict's ``device1`` standing for CuPy) with the host path,
counting ``Space.host`` copies, and the timing runs on CPU tensors.

    python asv_bench/samples_loss_gpu.py --out $OUT/samples_loss_gpu.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchmarks import losses as B

LOSSES = [("sinkhorn", {}), ("hausdorff", {"blur": 0.1}), ("energy", {}),
          ("gaussian", {"blur": 0.3}), ("laplacian", {"blur": 0.3}),
          ("sinkhorn(multiscale)", {"backend": "multiscale"})]


def _measures(n, dtype, torch):
    x, y = B.clouds(n, dtype=dtype)
    rng = np.random.default_rng(1)
    a, b = (rng.random(n).astype(dtype) + 0.5 for _ in range(2))
    return [torch.from_numpy(v) for v in (a / a.sum(), x, b / b.sum(), y)]


def _value_and_grads(L, args):
    leaves = [t.detach().clone().requires_grad_() for t in args]
    v = L(*leaves)
    v.backward()
    return v.detach(), [t.grad for t in leaves]


def _rel(got, ref) -> float:
    got = got.cpu()  # (outside the counted run)
    return float((got.double() - ref.double()).abs().max()
                 / ref.double().abs().max().clamp_min(1e-300))


class _HostCopies:
    """Counts the copies of more than ``d`` numbers to the host: those of the
    solvers (``Space.host``) and, on a GPU, ``cupy.asnumpy``, ``Tensor.cpu``
    and ``Tensor.numpy`` (CPU tensors are read through NumPy by design)."""

    def __init__(self, d, gpu):
        import torch

        from kerneltools._utils._array_api import Space

        self.d, self.count, self.saved = d, 0, [(Space, "host")]
        if gpu:
            import cupy

            self.saved += [(cupy, "asnumpy"), (torch.Tensor, "cpu"), (torch.Tensor, "numpy")]
        self.saved = [(owner, name, getattr(owner, name)) for owner, name in self.saved]

    def _counted(self, fn, method):
        def run(*args, **kwargs):
            a = args[1] if method else args[0]
            if int(np.prod(a.shape)) > self.d:
                self.count += 1
            return fn(*args, **kwargs)

        return run

    def __enter__(self):
        for owner, name, fn in self.saved:
            setattr(owner, name, self._counted(fn, name == "host"))
        return self

    def __exit__(self, *exc):
        for owner, name, fn in self.saved:
            setattr(owner, name, fn)


def check_rows(n, gpu) -> list[dict]:
    """The device path against the host path, every loss, float32 and float64."""
    import torch

    from kerneltools.torch import SamplesLoss

    rows = []
    for dtype in (np.float32, np.float64):
        args = _measures(n, dtype, torch)
        for name, kw in LOSSES:
            loss = name.split("(")[0]
            row = {"kind": "check", "loss": name, "n": n, "dtype": np.dtype(dtype).name}
            try:
                v_ref, g_ref = _value_and_grads(SamplesLoss(loss, **kw), args)
                if gpu:
                    dev_args, where = [t.cuda() for t in args], contextlib.nullcontext()
                else:
                    import array_api_strict as xps

                    from kerneltools.torch._samples_loss._device import simulated_cuda_tensors

                    dev_args = args
                    where = simulated_cuda_tensors(xps, xps.Device("device1"))
                with where, _HostCopies(args[1].shape[1], gpu) as copies:
                    v, g = _value_and_grads(SamplesLoss(loss, **kw), dev_args)
                row.update(value=float(v), value_rel_diff=_rel(v, v_ref),
                           grad_rel_diff=max(_rel(a, b) for a, b in zip(g, g_ref)),
                           big_host_copies=copies.count)
            except Exception:  # noqa: BLE001 - a failed case is a row, not the end
                row["error"] = traceback.format_exc(limit=4)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    return rows


def _sync(gpu):
    if gpu:
        import torch

        torch.cuda.synchronize()


def _timed(fn, repeat, gpu):
    out = fn()  # warm-up: compilations
    _sync(gpu)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        _sync(gpu)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def _geomloss(gpu):
    """GeomLoss's online SamplesLoss class, or the reason it cannot run."""
    try:
        import geomloss
        import pykeops  # noqa: F401 - its online backend needs it
    except ImportError as exc:
        return None, f"not installed ({exc})"
    return geomloss.SamplesLoss, ""


def time_rows(sizes, repeat, gpu, with_geomloss) -> list[dict]:
    """Forward + backward of the Sinkhorn loss, ours and GeomLoss's."""
    import torch

    from kerneltools.torch import SamplesLoss

    rows = []
    for n in sizes:
        x, y = (torch.from_numpy(v) for v in B.clouds(n))
        if gpu:
            x, y = x.cuda(), y.cuda()
        systems = [("kerneltools", SamplesLoss("sinkhorn", blur=0.05))]
        GL, why = _geomloss(gpu) if with_geomloss else (None, "--no-geomloss")
        if GL is not None:
            systems.append(("geomloss-online", GL("sinkhorn", blur=0.05, backend="online")))
        base = None
        for name, L in systems:
            row = {"kind": "time", "system": name, "loss": "sinkhorn", "n": n,
                   "device": "cuda" if gpu else "cpu"}
            try:
                if gpu:
                    import cupy

                    torch.cuda.reset_peak_memory_stats()
                    cupy.get_default_memory_pool().free_all_blocks()

                def step(L=L, x=x, y=y):
                    xs = x.detach().clone().requires_grad_()
                    value = L(xs, y)
                    value.backward()
                    return float(value.detach()), xs.grad

                t, (value, _) = _timed(step, repeat, gpu)
                base = t if base is None else base
                row.update(time_s=t, value=value, ratio_to_kerneltools=t / base)
                if gpu:
                    row["peak_gpu_bytes"] = int(torch.cuda.max_memory_allocated()
                                                + cupy.get_default_memory_pool().total_bytes())
            except Exception:  # noqa: BLE001
                row["error"] = traceback.format_exc(limit=4)
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        if GL is None:
            rows.append({"kind": "time", "system": "geomloss-online", "n": n,
                         "skipped": why})
    return rows


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[10**5])
    parser.add_argument("--check-size", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cpu", action="store_true",
                        help="no GPU: the simulated device, timings on CPU tensors")
    parser.add_argument("--no-geomloss", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    gpu = not args.cpu
    rows = check_rows(args.check_size, gpu) if args.check_size else []
    rows += time_rows(args.sizes, args.repeat, gpu, not args.no_geomloss)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    for r in rows:
        if r["kind"] == "time" and "time_s" in r:
            print(f"{r['system']:18s} n={r['n']:>8d} {r['time_s']:9.3f} s  "
                  f"x{r['ratio_to_kerneltools']:.2f}  value={r['value']:.6g}")
    return rows


if __name__ == "__main__":
    main()
