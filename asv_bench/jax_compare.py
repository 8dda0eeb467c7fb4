"""kerneltools.jax against the NumPy and torch front ends and dense jax.numpy,
in one run (issue 44's three comparisons, on the CPU):

1. Gaussian ``K @ b``, D = 3, float32, N = M = ``--n`` (10^5): the JAX front
   end (eager, and under ``jax.jit``) against the NumPy front end (the same
   generated kernel, called by ctypes): the custom call adds no copy.
2. The same at N = M = ``--dense-n`` (2 x 10^4), against dense ``jax.numpy``
   under ``jit`` (its N x M matrix; at 10^5 it would need 40 GB: not run).
3. The gradient of a Gaussian MMD loss with respect to the points,
   N = M = ``--mmd-n`` (10^5), ``jax.jit(jax.grad(...))`` against the torch
   front end's ``loss.backward()``.

Each system is warmed up first at N = 2,000 (kernels compiled), then
the systems run in turn, ``--repeat`` rounds (interleaved, so that a load
change hits all of them alike); each line gives the median wall and
process-CPU seconds (all threads) and the 1-minute load average around the
round. On a shared machine compare the CPU seconds: wall time follows the
load. Ratios are against the first system of each comparison.

    python asv_bench/jax_compare.py --parts matmul dense   # ~4 min at load 9
    python asv_bench/jax_compare.py --parts mmd            # ~4 min at load 9
    python asv_bench/jax_compare.py --n 20000 --mmd-n 20000 --repeat 5

``--gpu`` (asv_bench/gpu_session.sh): the JAX arrays live on the first GPU
(the CUDA custom call), the NumPy front end's arrays are CuPy arrays
(``backend="cuda"``, the same NVRTC kernel launched by CuPy), dense
``jax.numpy`` runs on the GPU, the torch front end on CUDA tensors; compare
the wall times there (the CPU seconds are the host's).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np


def _timed(fn):
    load0 = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return out, wall, cpu, (load0 + os.getloadavg()[0]) / 2


def _compare(title: str, make_systems, n: int, repeat: int) -> None:
    """Warm each system up at a small size (kernels compiled, programs traced),
    then ``repeat`` interleaved rounds at ``n``; print the medians (a JAX
    program's first round at ``n`` includes its trace for that shape)."""
    print(f"\n## {title}")
    for name, fn in make_systems(min(n, 2000)).items():
        _, wall, _, _ = _timed(fn)
        print(f"  warm-up (N = {min(n, 2000):,}) {name}: {wall:.2f} s")
    systems = make_systems(n)
    outs = {}
    walls = {k: [] for k in systems}
    cpus = {k: [] for k in systems}
    loads = []
    for _ in range(repeat):
        for name, fn in systems.items():
            outs[name], wall, cpu, load = _timed(fn)
            walls[name].append(wall)
            cpus[name].append(cpu)
            loads.append(load)
    first = next(iter(outs.values()))
    base_w = statistics.median(walls[next(iter(systems))])
    base_c = statistics.median(cpus[next(iter(systems))])
    print("  | system | wall s | CPU s | wall ratio | CPU ratio | max rel. diff |")
    print("  |---|---|---|---|---|---|")
    for name in systems:
        w, c = statistics.median(walls[name]), statistics.median(cpus[name])
        diff = np.abs(np.asarray(outs[name]) - np.asarray(first)).max() / max(
            np.abs(np.asarray(first)).max(), 1e-30)
        print(f"  | {name} | {w:.3f} | {c:.3f} | {w / base_w:.2f} | {c / base_c:.2f} | "
              f"{diff:.1e} |")
    print(f"  load average (1 min) during the rounds: {min(loads):.1f}-{max(loads):.1f} "
          f"(median {statistics.median(loads):.1f}), {os.cpu_count()} CPUs")


def _gaussian(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 3), dtype=np.float32)
    y = rng.random((n, 3), dtype=np.float32)
    b = rng.random((n, 1), dtype=np.float32)
    return x, y, b


#: Whether the systems run on a GPU (``--gpu``).
GPU = [False]


def _put(*arrays):
    """JAX arrays, on the first GPU with ``--gpu``."""
    import jax

    dev = jax.devices("gpu")[0] if GPU[0] else jax.devices("cpu")[0]
    return tuple(jax.device_put(a, dev) for a in arrays)


def matmul_systems(n: int, dense: bool) -> dict:
    import jax
    import jax.numpy as jnp

    import kerneltools as kt
    from kerneltools import jax as ktj

    x, y, b = _gaussian(n)
    xj, yj, bj = _put(x, y, b)
    g = np.float32(50.0)  # exp(-50 |x - y|^2): a bandwidth of 0.1 in the unit cube
    xp, backend = np, "cpu"
    if GPU[0]:
        import cupy as xp
        backend = "cuda"
    xc, yc, bc = xp.asarray(x), xp.asarray(y), xp.asarray(b)

    def numpy_front():
        out = (-kt.Vi(xc).sqdist(kt.Vj(yc)) * g).exp().matmul(bc, backend=backend)
        return xp.asnumpy(out) if GPU[0] else out

    def jax_k(x, y, b):
        return (-ktj.Vi(x).sqdist(ktj.Vj(y)) * 50.0).exp() @ b

    jitted = jax.jit(jax_k)
    out = {}
    if not dense:
        out["NumPy front end (ctypes)"] = numpy_front
        out["kerneltools.jax eager"] = lambda: jax_k(xj, yj, bj).block_until_ready()
    out["kerneltools.jax jit"] = lambda: jitted(xj, yj, bj).block_until_ready()
    if dense:
        @jax.jit
        def dense_k(x, y, b):
            d2 = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
            return jnp.exp(-50.0 * d2) @ b

        out["dense jax.numpy jit"] = lambda: dense_k(xj, yj, bj).block_until_ready()
    return out


def mmd_systems(n: int) -> dict:
    import jax
    import torch

    from kerneltools import jax as ktj
    from kerneltools import torch as ktt

    x, y, _ = _gaussian(n, seed=1)
    device = "cuda" if GPU[0] and torch.cuda.is_available() else "cpu"

    def mmd(mod, x, y):
        def k(a, c):
            return (-mod.Vi(a).sqdist(mod.Vj(c)) * 50.0).exp().sum(axis=1).sum()
        return (k(x, x) + k(y, y) - 2 * k(x, y)) / float(len(x)) ** 2

    grad = jax.jit(jax.grad(lambda x, y: mmd(ktj, x, y)))
    xj, yj = _put(x, y)
    yt = torch.from_numpy(y).to(device)

    def torch_front():
        xt = torch.from_numpy(x).to(device).requires_grad_()
        mmd(ktt, xt, yt).backward()
        return xt.grad.cpu().numpy()

    return {"torch front end (backward)": torch_front,
            "kerneltools.jax jit(grad)": lambda: grad(xj, yj).block_until_ready()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--dense-n", type=int, default=20_000)
    p.add_argument("--mmd-n", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--mmd-repeat", type=int, default=1)
    p.add_argument("--parts", nargs="+", default=["matmul", "dense", "mmd"],
                   choices=["matmul", "dense", "mmd"])
    p.add_argument("--gpu", action="store_true", help="the arrays on the first GPU")
    args = p.parse_args()
    GPU[0] = args.gpu
    import jax

    print(f"jax {jax.__version__}, {jax.default_backend()}; load average at start "
          f"{os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs")
    if "matmul" in args.parts:
        _compare(f"Gaussian K @ b, D = 3, float32, N = M = {args.n:,}",
                 lambda n: matmul_systems(n, dense=False), args.n, args.repeat)
    if "dense" in args.parts:
        _compare(f"Gaussian K @ b, D = 3, float32, N = M = {args.dense_n:,}: dense "
                 "jax.numpy", lambda n: matmul_systems(n, dense=True), args.dense_n,
                 args.repeat)
        gb = args.n ** 2 * 4 / 1e9
        print(f"  (dense jax.numpy at N = M = {args.n:,}: its N x M kernel alone would "
              f"take {gb:.0f} GB: not run)")
    if "mmd" in args.parts:
        _compare(f"Gradient of a Gaussian MMD loss, D = 3, float32, N = M = "
                 f"{args.mmd_n:,}", mmd_systems, args.mmd_n, args.mmd_repeat)


if __name__ == "__main__":
    main()
