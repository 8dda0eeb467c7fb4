"""GPU benchmark of the estimators on device arrays (issue 24): KernelRidge
(Falkon), Nystroem and GaussianProcessRegressor on CuPy arrays against our
CPU path, in one run.

For each size n (default 10^5 and 10^6; D = 8, float32, ``--landmarks``
landmarks, 1000 by default) and each path:

* ``cupy``: X and y uploaded to the GPU once (not timed), then
  ``KernelRidge(solver="falkon").fit(X, y).predict(X)`` and
  ``Nystroem().fit(X).transform(X)`` on CuPy arrays, outputs on the GPU.
  Also reported: the peak of CuPy's memory pool (freed before each run, so
  its size after the run is the most it held, the uploaded data included),
  and the time in host-device copies inside the estimator, from CUDA events
  around every copy of the device path (``Space.host`` / ``Space.put`` of
  ``kerneltools.estimators._array_api``: landmark-sized arrays), as a share
  of the wall time (target: under 5%);
* ``cpu``: the same calls on NumPy arrays with ``backend="cpu"`` (our C
  backend), at the sizes up to ``--cpu-max`` (10^5 by default: at 10^6 a
  Falkon fit takes minutes on the CPU); ``max_abs_diff`` compares the GPU's
  outputs with these;
* ``sklearn-cupy`` (Nystroem, with ``--sklearn``): scikit-learn's Nystroem on
  the same CuPy arrays under ``array_api_dispatch`` (needs SCIPY_ARRAY_API=1);
* ``torch-cpu`` (with ``--torch``, no GPU needed): the CPU path on CPU torch
  tensors under ``array_api_dispatch`` (zero-copy NumPy views, outputs back
  as tensors), against NumPy arrays under ``array_api_dispatch`` in the same
  run (``numpy_dispatch_s``): the ratio is the cost of the Array API layer.

The Gaussian process (``--gp-sizes``, default 10^4 and 10^5; ``--gp-exact``,
default 4,000 points): ``GaussianProcessRegressor(C * RBF(ARD) + White,
solver="iterative", n_pretrain=None)`` with an L-BFGS-B optimizer of
``--gp-steps`` (5) iterations (a callable ``optimizer``: each evaluation a
batched CG solve, a Lanczos log-determinant and the gradient's control
variate on the device), then ``predict(X[:100], return_std=True)`` (one
block CG of 100 columns); and the
exact solver with fixed hyperparameters, fit and the same predict (on a
device it computes on the host: one copy per fit, counted in the copies).
Its warm-up run is on 2,000 of the points (the same formulas compile), its
timed runs ``--gp-repeat`` (1); the CPU path up to ``--gp-cpu-max`` (10^4).
The copy share counts ``Space.host`` / ``Space.put`` and conjugate
gradients' per-iteration reads of their coefficients
(``kerneltools.backend._cg._host``); scalar reads (``float(xp.sum(...))``)
are not timed.

Times are medians of ``--repeat`` warm runs after one warm-up run (which
compiles), synchronised. ``--cpu`` runs the CPU path only (no GPU needed): the
test suite runs it at a tiny size so that the script cannot rot.

    python asv_bench/estimators_gpu.py --out $OUT/estimators_gpu.json
    python asv_bench/estimators_gpu.py --cpu --sizes 2000 --repeat 1 --gp-sizes 2000 \
        --gp-exact 1000
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback

import numpy as np

D = 8
GAMMA = 0.5
ALPHA = 1e-3


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, D)).astype(np.float32)
    y = (np.sin(X.sum(1)) + 0.1 * rng.normal(size=n)).astype(np.float32)
    return X, y


def _cases(m, backend):
    from kerneltools.estimators import KernelRidge, Nystroem

    def krr(X, y):
        est = KernelRidge(alpha=ALPHA, kernel="rbf", gamma=GAMMA, solver="falkon",
                          n_components=m, tol=1e-4, max_iter=200, random_state=0,
                          backend=backend)
        return est.fit(X, y).predict(X)

    def nys(X, y):
        est = Nystroem(kernel="rbf", gamma=GAMMA, n_components=m, random_state=0,
                       backend=backend)
        return est.fit(X).transform(X)

    return {"KernelRidge(falkon)": krr, "Nystroem": nys}


def _gp_cases(steps, backend):
    """The Gaussian-process cases (module docstring): name -> fn(X, y)."""
    import scipy.optimize
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    from kerneltools.estimators import GaussianProcessRegressor

    def few_steps(obj_func, theta, bounds):
        res = scipy.optimize.minimize(obj_func, theta, jac=True, bounds=bounds,
                                      method="L-BFGS-B", options={"maxiter": steps})
        return res.x, res.fun

    kernel = C(1.0) * RBF(np.ones(D)) + WhiteKernel(0.1)

    def iterative(X, y):
        gp = GaussianProcessRegressor(kernel, alpha=1e-6, solver="iterative",
                                      optimizer=few_steps, n_pretrain=None,
                                      random_state=0, backend=backend)
        return gp.fit(X, y).predict(X[:100], return_std=True)[1]

    def exact(X, y):
        fixed = C(1.0) * RBF(np.full(D, 2.0)) + WhiteKernel(0.01)
        gp = GaussianProcessRegressor(fixed, solver="cholesky", optimizer=None,
                                      backend=backend)
        return gp.fit(X, y).predict(X[:100], return_std=True)[1]

    return {"GP(iterative)": iterative, "GP(cholesky)": exact}


class _CopyClock:
    """CUDA events around every host-device copy of the estimators' device
    path (Space.host, Space.put): their GPU time, summed."""

    def __init__(self):
        import cupy

        from kerneltools.estimators import _array_api

        from kerneltools.backend import _cg

        self.cupy, self.space, self.seconds, self.count = cupy, _array_api.Space, 0.0, 0
        self.saved = {name: getattr(self.space, name) for name in ("host", "put")}
        self.cg, self.cg_host = _cg, _cg._host

    def __enter__(self):
        for name, fn in self.saved.items():
            setattr(self.space, name, self._timed(fn))
        gpu = self._timed(lambda _, a: self.cg_host(a))
        self.cg._host = lambda a: gpu(self._cupy_space, a)  # CG's coefficient reads
        return self

    def __exit__(self, *exc):
        for name, fn in self.saved.items():
            setattr(self.space, name, fn)
        self.cg._host = self.cg_host

    class _cupy_space:  # what _timed reads of a Space
        kind = "cupy"

    def _timed(self, fn):
        clock = self

        def timed(space, *args, **kwargs):
            if space.kind != "cupy":
                return fn(space, *args, **kwargs)
            start, end = clock.cupy.cuda.Event(), clock.cupy.cuda.Event()
            start.record()
            out = fn(space, *args, **kwargs)
            end.record()
            end.synchronize()
            clock.seconds += clock.cupy.cuda.get_elapsed_time(start, end) / 1e3
            clock.count += 1
            return out

        return timed


def _sync():
    import cupy

    cupy.cuda.Device().synchronize()


def _run_gpu(name, fn, X, y, repeat, warm=None):
    import cupy

    pool = cupy.get_default_memory_pool()
    Xd, yd = cupy.asarray(X), cupy.asarray(y)
    # warm-up: compiles (on ``warm``, a subset, where a run is long)
    out = fn(Xd, yd) if warm is None else fn(*map(cupy.asarray, warm))
    _sync()
    times, copies, counts, peaks = [], [], [], []
    for _ in range(repeat):
        del out
        pool.free_all_blocks()
        with _CopyClock() as clock:
            t0 = time.perf_counter()
            out = fn(Xd, yd)
            _sync()
            times.append(time.perf_counter() - t0)
        copies.append(clock.seconds)
        counts.append(clock.count)
        peaks.append(pool.total_bytes())
    t = statistics.median(times)
    c = statistics.median(copies)
    return out, {"time_s": t, "copy_s": c, "copy_share": c / t, "copies": max(counts),
                 "peak_gpu_bytes": max(peaks), "data_bytes": int(X.nbytes + y.nbytes)}


def _run_cpu(name, fn, X, y, repeat, warm=None):
    out = fn(X, y) if warm is None else fn(*warm)  # warm-up: compiles
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn(X, y)
        times.append(time.perf_counter() - t0)
    return out, {"time_s": statistics.median(times)}


def _run_torch(fn, X, y, repeat):
    import os

    import sklearn
    import torch

    os.environ.setdefault("SCIPY_ARRAY_API", "1")  # scikit-learn asks; our path needs none
    Xt, yt = torch.asarray(X), torch.asarray(y)
    with sklearn.config_context(array_api_dispatch=True):
        out, stats = _run_cpu("torch", fn, Xt, yt, repeat)
        # the anchor: NumPy arrays under dispatch too (scikit-learn's validation
        # costs more with dispatch on, whatever the arrays)
        _, anchor = _run_cpu("numpy", fn, X, y, repeat)
    assert isinstance(out, torch.Tensor)
    return {**stats, "numpy_dispatch_s": anchor["time_s"]}


def _sklearn_nystroem(m):
    import sklearn
    from sklearn.kernel_approximation import Nystroem

    def run(X, y):
        with sklearn.config_context(array_api_dispatch=True):
            return Nystroem(kernel="rbf", gamma=GAMMA, n_components=m,
                            random_state=0).fit(X).transform(X)

    return run


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10**5, 10**6])
    parser.add_argument("--cpu-max", type=int, default=10**5,
                        help="largest n of the CPU path (with a GPU)")
    parser.add_argument("--landmarks", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cpu", action="store_true", help="the CPU path only")
    parser.add_argument("--sklearn", action="store_true",
                        help="also scikit-learn's Nystroem on CuPy arrays")
    parser.add_argument("--torch", action="store_true",
                        help="also the CPU path on CPU torch tensors (array_api_dispatch)")
    parser.add_argument("--gp-sizes", type=int, nargs="*", default=[10**4, 10**5],
                        help="sizes of the iterative GP (none: no GP)")
    parser.add_argument("--gp-exact", type=int, default=4000,
                        help="size of the exact GP (0: none)")
    parser.add_argument("--gp-steps", type=int, default=5, help="L-BFGS-B iterations")
    parser.add_argument("--gp-repeat", type=int, default=1)
    parser.add_argument("--gp-cpu-max", type=int, default=10**4,
                        help="largest n of the GP's CPU path (with a GPU)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    rows = []
    for n in args.sizes:
        X, y = _data(n)
        m = min(args.landmarks, n)
        for name, fn in _cases(m, None).items():
            gpu_out = None
            if not args.cpu:
                try:
                    gpu_out, stats = _run_gpu(name, fn, X, y, args.repeat)
                    rows.append({"estimator": name, "n": n, "d": D, "m": m,
                                 "path": "cupy", **stats})
                except Exception:  # noqa: BLE001 - a failed case is a row, not the end
                    rows.append({"estimator": name, "n": n, "path": "cupy",
                                 "error": traceback.format_exc(limit=3)})
            if args.cpu or n <= args.cpu_max:
                cpu_fn = _cases(m, "cpu")[name]
                cpu_out, stats = _run_cpu(name, cpu_fn, X, y, args.repeat)
                row = {"estimator": name, "n": n, "d": D, "m": m, "path": "cpu", **stats}
                if gpu_out is not None:
                    row["max_abs_diff"] = float(np.abs(_host(gpu_out) - cpu_out).max())
                rows.append(row)
            if args.torch:
                rows.append({"estimator": name, "n": n, "d": D, "m": m,
                             "path": "torch-cpu", **_run_torch(_cases(m, "cpu")[name],
                                                               X, y, args.repeat)})
            if args.sklearn and name == "Nystroem" and not args.cpu:
                try:
                    _, stats = _run_gpu("sklearn", _sklearn_nystroem(m), X, y, args.repeat)
                    rows.append({"estimator": name, "n": n, "d": D, "m": m,
                                 "path": "sklearn-cupy", **stats})
                except Exception:  # noqa: BLE001
                    rows.append({"estimator": name, "n": n, "path": "sklearn-cupy",
                                 "error": traceback.format_exc(limit=3)})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    rows += _gp_rows(args)
    _table(rows)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(rows, fh, indent=1)
    return rows


def _gp_rows(args) -> list[dict]:
    """The Gaussian-process rows (module docstring): GPU, then CPU."""
    rows = []
    runs = [("GP(iterative)", n) for n in args.gp_sizes]
    if args.gp_exact:
        runs.append(("GP(cholesky)", args.gp_exact))
    for name, n in runs:
        X, y = _data(n)
        warm = (X[:2000], y[:2000]) if n > 2000 else None
        gpu_out = None
        if not args.cpu:
            try:
                gpu_out, stats = _run_gpu(name, _gp_cases(args.gp_steps, None)[name], X, y,
                                          args.gp_repeat, warm)
                rows.append({"estimator": name, "n": n, "d": D, "path": "cupy", **stats})
            except Exception:  # noqa: BLE001 - a failed case is a row, not the end
                rows.append({"estimator": name, "n": n, "path": "cupy",
                             "error": traceback.format_exc(limit=3)})
        if args.cpu or n <= args.gp_cpu_max:
            cpu_out, stats = _run_cpu(name, _gp_cases(args.gp_steps, "cpu")[name], X, y,
                                      args.gp_repeat, warm)
            row = {"estimator": name, "n": n, "d": D, "path": "cpu", **stats}
            if gpu_out is not None:
                row["max_abs_diff"] = float(np.abs(_host(gpu_out) - cpu_out).max())
            rows.append(row)
        if args.torch:
            rows.append({"estimator": name, "n": n, "d": D, "path": "torch-cpu",
                         **_run_torch(_gp_cases(args.gp_steps, "cpu")[name], X, y,
                                      args.gp_repeat)})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def _table(rows):
    print(f"{'estimator':22s} {'n':>8s} {'path':12s} {'time s':>9s} {'copies %':>9s} "
          f"{'peak GPU MB':>12s} {'speed-up':>8s}")
    cpu = {(r["estimator"], r["n"]): r["time_s"] for r in rows
           if r.get("path") == "cpu" and "time_s" in r}
    for r in rows:
        if "error" in r:
            print(f"{r['estimator']:22s} {r['n']:8d} {r['path']:12s} failed: "
                  f"{r['error'].strip().splitlines()[-1]}")
            continue
        share = f"{100 * r['copy_share']:.2f}" if "copy_share" in r else ""
        peak = f"{r['peak_gpu_bytes'] / 2**20:.0f}" if "peak_gpu_bytes" in r else ""
        ref = r.get("numpy_dispatch_s", cpu.get((r["estimator"], r["n"])))
        ratio = f"{ref / r['time_s']:.1f}x" if ref and r["path"] != "cpu" else ""
        print(f"{r['estimator']:22s} {r['n']:8d} {r['path']:12s} {r['time_s']:9.3f} "
              f"{share:>9s} {peak:>12s} {ratio:>8s}")


if __name__ == "__main__":
    main()
