"""GPU benchmark of the estimators on device arrays (issue 24): KernelRidge
(Falkon), Nystroem, GaussianProcessRegressor, exact k-NN and the Sinkhorn
divergence on CuPy arrays against our CPU path, in one run.

For each size n (default 10^5 and 10^6; D = 8, float32, ``--landmarks``
landmarks, 1000 by default) and each path:

* ``cupy``: X and y uploaded to the GPU once (not timed), then
  ``KernelRidge(solver="falkon").fit(X, y).predict(X)`` and
  ``Nystroem().fit(X).transform(X)`` on CuPy arrays, outputs on the GPU.
  Also reported: the peak of CuPy's memory pool (freed before each run, so
  its size after the run is the most it held, the uploaded data included),
  and the time in host-device copies inside the estimator, from CUDA events
  around every copy of the device path (``Space.host`` / ``Space.put`` of
  ``kerneltools._utils._array_api``: landmark-sized arrays), as a share
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

Exact k-NN (``NearestNeighbors(n_neighbors=10).fit(X).kneighbors(X)``, the
n points queried against themselves, float32, uniform in a cube): D = 3,
where ``algorithm="auto"`` prunes by cells (``route`` "block_sparse"; on CuPy
arrays the cells are built on the host: the points and queries are copied
there once per call and the K-wide results back, all through
``Space.host`` / ``Space.put``, so counted in the copy share, while the
engine's block-sparse reductions then take host arrays, whose uploads it
makes itself and are not counted), and D = 64 (``route`` "brute": one
K-min reduction per block of queries on the device, the direct form). On
the CPU path at D = 64 the float32 BLAS tiles run. ``max_abs_diff``
compares the distances.

With ``--estimators sinkhorn`` (not in the default run: at 10^6 points it
takes about a minute): ``sinkhorn_divergence(x, y, blur=0.05,
return_grad=True)`` at ``--sinkhorn-sizes`` (default 10^5 and 10^6) points
per cloud, D = 3, float32 (the clouds of ``asv_bench/benchmarks/losses.py``),
dense ("online": every softmin a full LogSumExp reduction) and
``multiscale=True``, the value and both gradients computed, the gradients
left on the GPU. The same rows (time, peak GPU memory, copy share), the
copies counted here also including the engine's own host-device transfers
(``cupy.asarray`` of host arrays, ``cupy.asnumpy``: the block-sparse
kernel's index arrays, the multiscale cells and potentials). On the GPU
the warm-up runs at the full size (the CUDA kernels' launch shapes, hence
their compilations, depend on the sizes), then ``--sinkhorn-repeat`` timed
runs (1 by default); the CPU anchor's warm-up runs at 2,000 points (the C
kernels do not depend on the sizes). The CPU anchor
(``backend="cpu"``) runs the multiscale case up to ``--sinkhorn-cpu-max``
points (10^5; the dense one only up to a tenth of it: it is quadratic);
rows give ``value`` and, against the CPU anchor, ``value_rel_diff`` and
``max_abs_diff`` of ``grad_x``.

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
    python asv_bench/estimators_gpu.py --estimators sinkhorn --out $OUT/sinkhorn_gpu.json
    python asv_bench/estimators_gpu.py --cpu --sizes 2000 --repeat 1 --gp-sizes 2000 \
        --gp-exact 1000
    python asv_bench/estimators_gpu.py --estimators knn --sizes 1000000 --cpu-max 100000
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
#: k-NN: neighbours per query, and the features of each case.
KNN_K = 10
KNN_DIMS = {"NearestNeighbors(D=3)": 3, "NearestNeighbors(D=64)": 64}


def _data(n, seed=0, d=D):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, d)).astype(np.float32)
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

    return {"KernelRidge(falkon)": krr, "Nystroem": nys, **_knn_cases(backend)}


def _knn_cases(backend):
    from kerneltools.estimators import NearestNeighbors

    def knn(X, y):
        est = NearestNeighbors(n_neighbors=KNN_K, backend=backend).fit(X)
        knn.route = est._fit_method  # "block_sparse" (pruned) or "brute"
        return est.kneighbors(X)[0]

    return {name: knn for name in KNN_DIMS}


def _dims(name):
    return KNN_DIMS.get(name, D)


#: The Sinkhorn divergence's benchmark: D, blur, warm-up size.
SINKHORN_D, BLUR, SINKHORN_WARMUP = 3, 0.05, 2000


def _clouds(n, seed=0):
    """The clouds of asv_bench/benchmarks/losses.py (D = 3, float32)."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, SINKHORN_D)).astype(np.float32)
    y = rng.random((n, SINKHORN_D)).astype(np.float32)
    y[:, 0] += 0.3
    return x, y


def _sinkhorn_cases(backend):
    """``(value, grad_x)`` of the divergence, dense and multiscale."""
    from kerneltools.estimators import sinkhorn_divergence

    def case(multiscale):
        def run(x, y):
            value, gx, _ = sinkhorn_divergence(x, y, blur=BLUR, return_grad=True,
                                               multiscale=multiscale, backend=backend)
            return value, gx

        return run

    return {"sinkhorn_divergence(online)": case(False),
            "sinkhorn_divergence(multiscale)": case(True)}


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
    path (Space.host, Space.put, conjugate gradients' reads of their
    coefficients) and, with ``engine=True``, of the engine
    (``cupy.asarray`` of a host array, ``cupy.asnumpy``): their GPU time,
    summed (a copy inside another is counted once)."""

    def __init__(self, engine=False):
        import cupy

        from kerneltools.backend import _cg
        from kerneltools._utils import _array_api

        self.cupy, self.space, self.seconds, self.count = cupy, _array_api.Space, 0.0, 0
        self.depth = 0
        self.saved = [(self.space, name, getattr(self.space, name), True)
                      for name in ("host", "put")]
        self.saved.append((_cg, "_host", _cg._host, False))  # CG's coefficient reads
        if engine:
            self.saved += [(cupy, name, getattr(cupy, name), False)
                           for name in ("asarray", "asnumpy")]

    def __enter__(self):
        for owner, name, fn, method in self.saved:
            setattr(owner, name, self._timed(fn, method))
        return self

    def __exit__(self, *exc):
        for owner, name, fn, _ in self.saved:
            setattr(owner, name, fn)

    def _copies(self, name, args, method) -> bool:
        if method:  # Space.host / Space.put: copies on the CuPy space only
            return args[0].kind == "cupy"
        if name == "asarray":  # host to device, unless a CuPy array already
            return not (args and isinstance(args[0], self.cupy.ndarray))
        if name == "_host":  # CG's coefficients: a copy of a CuPy array only
            return bool(args) and isinstance(args[0], self.cupy.ndarray)
        return True  # asnumpy: device to host

    def _timed(self, fn, method):
        clock, name = self, fn.__name__

        def timed(*args, **kwargs):
            if clock.depth or not clock._copies(name, args, method):
                return fn(*args, **kwargs)
            clock.depth += 1
            start, end = clock.cupy.cuda.Event(), clock.cupy.cuda.Event()
            try:
                start.record()
                out = fn(*args, **kwargs)
                end.record()
                end.synchronize()
            finally:
                clock.depth -= 1
            clock.seconds += clock.cupy.cuda.get_elapsed_time(start, end) / 1e3
            clock.count += 1
            return out

        return timed


def _sync():
    import cupy

    cupy.cuda.Device().synchronize()


def _run_gpu(name, fn, X, y, repeat, warmup=None, engine=False):
    """``warmup``: the (X, y) of the warm-up run (default: X, y); ``engine``:
    also count the engine's copies (:class:`_CopyClock`)."""
    import cupy

    pool = cupy.get_default_memory_pool()
    Xd, yd = cupy.asarray(X), cupy.asarray(y)
    out = fn(*(cupy.asarray(a) for a in warmup)) if warmup else fn(Xd, yd)  # compiles
    _sync()
    times, copies, counts, peaks = [], [], [], []
    for _ in range(repeat):
        del out
        pool.free_all_blocks()
        with _CopyClock(engine) as clock:
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


def _run_cpu(name, fn, X, y, repeat, warmup=None):
    out = fn(*(warmup or (X, y)))  # warm-up: compiles
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


def _route(fn):
    """The k-NN search's route of the last run (``_fit_method``), if any."""
    return {"route": fn.route} if hasattr(fn, "route") else {}


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
    parser.add_argument("--estimators", nargs="+", default=["krr", "nystroem", "gp", "knn"],
                        choices=["krr", "nystroem", "gp", "knn", "sinkhorn"],
                        help="KernelRidge (Falkon), Nystroem, the GP, exact k-NN (D = 3 "
                        "and 64), the Sinkhorn divergence (not in the default run)")
    parser.add_argument("--gp-sizes", type=int, nargs="*", default=[10**4, 10**5],
                        help="sizes of the iterative GP (none: no GP)")
    parser.add_argument("--gp-exact", type=int, default=4000,
                        help="size of the exact GP (0: none)")
    parser.add_argument("--gp-steps", type=int, default=5, help="L-BFGS-B iterations")
    parser.add_argument("--gp-repeat", type=int, default=1)
    parser.add_argument("--gp-cpu-max", type=int, default=10**4,
                        help="largest n of the GP's CPU path (with a GPU)")
    parser.add_argument("--sinkhorn-sizes", type=int, nargs="+", default=[10**5, 10**6])
    parser.add_argument("--sinkhorn-repeat", type=int, default=1)
    parser.add_argument("--sinkhorn-cpu-max", type=int, default=10**5,
                        help="largest n of the Sinkhorn CPU anchor, multiscale (with "
                        "a GPU; the dense one: a tenth of it)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    rows = []
    names = {"krr": ["KernelRidge(falkon)"], "nystroem": ["Nystroem"], "knn": list(KNN_DIMS)}
    chosen = {name for e in args.estimators for name in names.get(e, ())}
    for n in args.sizes if chosen else ():
        data = {}
        m = min(args.landmarks, n)
        for name, fn in _cases(m, None).items():
            if name not in chosen:
                continue
            d = _dims(name)
            X, y = data[d] = data.get(d) or _data(n, d=d)
            gpu_out = None
            if not args.cpu:
                try:
                    gpu_out, stats = _run_gpu(name, fn, X, y, args.repeat)
                    rows.append({"estimator": name, "n": n, "d": d, "m": m,
                                 "path": "cupy", **stats, **_route(fn)})
                except Exception:  # noqa: BLE001 - a failed case is a row, not the end
                    rows.append({"estimator": name, "n": n, "path": "cupy",
                                 "error": traceback.format_exc(limit=3)})
            if args.cpu or n <= args.cpu_max:
                cpu_fn = _cases(m, "cpu")[name]
                cpu_out, stats = _run_cpu(name, cpu_fn, X, y, args.repeat)
                row = {"estimator": name, "n": n, "d": d, "m": m, "path": "cpu",
                       **stats, **_route(cpu_fn)}
                if gpu_out is not None:
                    row["max_abs_diff"] = float(np.abs(_host(gpu_out) - cpu_out).max())
                rows.append(row)
            if args.torch:
                rows.append({"estimator": name, "n": n, "d": d, "m": m,
                             "path": "torch-cpu", **_run_torch(_cases(m, "cpu")[name],
                                                               X, y, args.repeat)})
            if args.sklearn and name == "Nystroem" and not args.cpu:
                try:
                    _, stats = _run_gpu("sklearn", _sklearn_nystroem(m), X, y, args.repeat)
                    rows.append({"estimator": name, "n": n, "d": d, "m": m,
                                 "path": "sklearn-cupy", **stats})
                except Exception:  # noqa: BLE001
                    rows.append({"estimator": name, "n": n, "path": "sklearn-cupy",
                                 "error": traceback.format_exc(limit=3)})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    if "gp" in args.estimators:
        rows += _gp_rows(args)
    if "sinkhorn" in args.estimators:
        rows += _sinkhorn_rows(args)
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
                                          args.gp_repeat, warmup=warm)
                rows.append({"estimator": name, "n": n, "d": D, "path": "cupy", **stats})
            except Exception:  # noqa: BLE001 - a failed case is a row, not the end
                rows.append({"estimator": name, "n": n, "path": "cupy",
                             "error": traceback.format_exc(limit=3)})
        if args.cpu or n <= args.gp_cpu_max:
            cpu_out, stats = _run_cpu(name, _gp_cases(args.gp_steps, "cpu")[name], X, y,
                                      args.gp_repeat, warmup=warm)
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


def _sinkhorn_rows(args) -> list[dict]:
    """The Sinkhorn divergence's rows (module docstring)."""
    rows = []
    for n in args.sinkhorn_sizes:
        x, y = _clouds(n)
        warm = _clouds(min(n, SINKHORN_WARMUP), seed=1)
        for name, fn in _sinkhorn_cases(None).items():
            base = {"estimator": name, "n": n, "d": SINKHORN_D}
            gpu_out = None
            if not args.cpu:
                try:
                    gpu_out, stats = _run_gpu(name, fn, x, y, args.sinkhorn_repeat,
                                              engine=True)
                    rows.append({**base, "path": "cupy", "value": gpu_out[0], **stats})
                except Exception:  # noqa: BLE001 - a failed case is a row, not the end
                    rows.append({**base, "path": "cupy",
                                 "error": traceback.format_exc(limit=3)})
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            limit = args.sinkhorn_cpu_max // (1 if "multiscale" in name else 10)
            if args.cpu or n <= limit:
                cpu_out, stats = _run_cpu(name, _sinkhorn_cases("cpu")[name], x, y,
                                          args.sinkhorn_repeat, warmup=warm)
                row = {**base, "path": "cpu", "value": cpu_out[0], **stats}
                if gpu_out is not None:
                    row["value_rel_diff"] = abs(gpu_out[0] - cpu_out[0]) / abs(cpu_out[0])
                    row["max_abs_diff"] = float(np.abs(_host(gpu_out[1]) - cpu_out[1]).max())
                rows.append(row)
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def _table(rows):
    print(f"{'estimator':32s} {'n':>8s} {'path':12s} {'time s':>9s} {'copies %':>9s} "
          f"{'peak GPU MB':>12s} {'speed-up':>8s} route")
    cpu = {(r["estimator"], r["n"]): r["time_s"] for r in rows
           if r.get("path") == "cpu" and "time_s" in r}
    for r in rows:
        if "error" in r:
            print(f"{r['estimator']:32s} {r['n']:8d} {r['path']:12s} failed: "
                  f"{r['error'].strip().splitlines()[-1]}")
            continue
        share = f"{100 * r['copy_share']:.2f}" if "copy_share" in r else ""
        peak = f"{r['peak_gpu_bytes'] / 2**20:.0f}" if "peak_gpu_bytes" in r else ""
        ref = r.get("numpy_dispatch_s", cpu.get((r["estimator"], r["n"])))
        ratio = f"{ref / r['time_s']:.1f}x" if ref and r["path"] != "cpu" else ""
        print(f"{r['estimator']:32s} {r['n']:8d} {r['path']:12s} {r['time_s']:9.3f} "
              f"{share:>9s} {peak:>12s} {ratio:>8s} {r.get('route', '')}")


if __name__ == "__main__":
    main()
