"""Gaussian-process regression side by side: kerneltools vs scikit-learn, one run.

Synthetic D = 8 data (a smooth function plus noise), kernel
``C * RBF(ARD) + WhiteKernel``, hyperparameters fitted by L-BFGS-B from the
same start. Each case runs in its own subprocess, so its peak resident memory
(``ru_maxrss``) is its own. Prints a Markdown table: fit time, peak memory,
log marginal likelihood, test RMSE against the noiseless function.

    python asv_bench/gp_compare.py                       # the issue's sizes
    python asv_bench/gp_compare.py --cases sklearn:3000:cholesky,kerneltools:3000:iterative
    python asv_bench/gp_compare.py --cases gpytorch:10000:adam50
    python asv_bench/gp_compare.py --cases sklearn:3000:eval,kerneltools:3000:eval

Solver ``eval`` times one evaluation of the optimizer's objective (the log
marginal likelihood and its gradient at the start, median of three; with
kerneltools, the exact path's) instead of a fit: with the evaluation counts
of full fits at a smaller n (the ``evals`` column, objective evaluations of
L-BFGS-B in the fit, polish included), it prices a fit that would take too
long to run.

GPyTorch (``gpytorch:n:adamK``, if installed) fits the same model, an exact GP
with ``ScaleKernel(RBFKernel(ard_num_dims=8))``, a zero mean and a Gaussian
likelihood, from the same start (length scales 1, scale 1, noise 0.1), in
float64, by K steps of Adam (learning rate 0.1, as in its tutorials) on its
default BBMM path (CG and Lanczos above 800 points, the kernel matrix held
dense); its log marginal likelihood is GPyTorch's own estimate (``mll * n``)
at the last step.

A kerneltools row counts its evaluations by stage (the pretraining subsets'
sizes, then all points). An iterative row also gives the exact log marginal
likelihood at its fitted hyperparameters (``exact there``, up to
``EXACT_CHECK_MAX`` points; not part of the fit's time or peak memory):
above ``POLISH_MAX_SAMPLES`` the fit reports its own stochastic estimate.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from _runner import emit, run_child

DEFAULT_CASES = ("sklearn:1500:cholesky,kerneltools:1500:cholesky,kerneltools:1500:iterative,"
                 "sklearn:3000:cholesky,kerneltools:3000:cholesky,"
                 "kerneltools:3000:iterative,kerneltools:20000:iterative")
D = 8
N_TEST = 2000


def make_data(n, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n + N_TEST, D))
    f = np.sin(2 * X[:, 0]) + np.cos(X[:, 1]) * X[:, 2] + 0.5 * X[:, 3] * X[:, 4]
    y = f + 0.2 * rng.normal(size=len(X))
    return X[:n], y[:n], X[n:], f[n:]


def child(system, n, solver):
    import resource

    import numpy as np
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    X, y, Xt, ft = make_data(n)
    kernel = C(1.0) * RBF(np.ones(D)) + WhiteKernel(0.1)
    if system == "gpytorch":
        fit, predict, lml = _gpytorch(X, y, int(solver.removeprefix("adam")))
        t0 = time.perf_counter()
        fit()
        t1 = time.perf_counter()
        pred = predict(Xt)
        t2 = time.perf_counter()
        rmse = float(np.sqrt(np.mean((pred - ft) ** 2)))
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps({"system": system, "n": n, "solver": solver, "fit_s": t1 - t0,
                          "predict_s": t2 - t1, "peak_mb": rss, "lml": lml(),
                          "rmse": rmse, "kernel": ""}))
        return
    if system == "sklearn":
        from sklearn.gaussian_process import GaussianProcessRegressor
        model = GaussianProcessRegressor(kernel, random_state=0)
    else:
        from kerneltools.estimators import GaussianProcessRegressor
        model = GaussianProcessRegressor(kernel, random_state=0,
                                         solver="cholesky" if solver == "eval" else solver)
    if solver == "eval":
        _print_eval(system, n, model, X, y, kernel.theta)
        return
    evals = _count_evaluations()
    stages = _count_stages(model) if system == "kerneltools" else {}
    t0, c0 = time.perf_counter(), _cpu_seconds()
    model.fit(X, y)
    t1, c1 = time.perf_counter(), _cpu_seconds()
    pred = model.predict(Xt)
    t2 = time.perf_counter()
    rmse = float(np.sqrt(np.mean((pred - ft) ** 2)))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before the check
    row = {"system": system, "n": n, "solver": solver, "fit_s": t1 - t0,
           "predict_s": t2 - t1, "peak_mb": rss,
           "lml": float(model.log_marginal_likelihood_value_), "rmse": rmse,
           "kernel": str(model.kernel_), "evals": evals[0], "cpu_s": c1 - c0,
           "stages": {str(k): v for k, v in sorted(stages.items())}}
    if system == "kerneltools" and model.solver_ == "iterative" \
            and n <= EXACT_CHECK_MAX:
        row["lml_exact"] = _exact_lml(model, X, y)
    print(json.dumps(row))


def _cpu_seconds():
    """User plus system CPU time of this process, all threads (on a shared
    machine the wall time depends on the load; this much less)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _count_evaluations():
    """A one-element list counting the objective evaluations of every
    ``scipy.optimize.minimize`` call (scikit-learn's and ours call it so),
    counted as calls of the objective: ours may stop L-BFGS-B by an
    exception from inside its objective (``_gp_optimize.STALL_EVALUATIONS``),
    which leaves no result to read ``nfev`` from."""
    import scipy.optimize

    count, minimize = [0], scipy.optimize.minimize

    def counted(fun, *args, **kwargs):
        def fun_counted(*a, **k):
            count[0] += 1
            return fun(*a, **k)

        return minimize(fun_counted, *args, **kwargs)

    scipy.optimize.minimize = counted
    return count


def _count_stages(model):
    """``{n_points: evaluations}``: the optimizer's objective evaluations of a
    kerneltools fit by the number of points they ran on (its pretraining
    stages, then all points; the polish included)."""
    counts = {}
    lml = type(model)._lml

    def counted(self, *args, **kwargs):
        if kwargs.get("objective"):
            counts[len(self.X_train_)] = counts.get(len(self.X_train_), 0) + 1
        return lml(self, *args, **kwargs)

    type(model)._lml = counted
    return counts


#: Largest n at which a kerneltools iterative row also reports the exact log
#: marginal likelihood at its fitted hyperparameters (one Cholesky factor of
#: an n x n float64 buffer: 3.2 GB at 2 * 10^4).
EXACT_CHECK_MAX = 20_000


def _exact_lml(model, X, y):
    """The exact log marginal likelihood at ``model.kernel_``, by one dense
    Cholesky factor built in place (``_gp_iterative.dense_cholesky``)."""
    import numpy as np
    import scipy.linalg

    from kerneltools.estimators.gaussian_process._iterative import dense_cholesky

    L = dense_cholesky(model.kernel_, X, model.alpha)
    a = scipy.linalg.cho_solve((L, True), y, check_finite=False)
    logdet = 2 * np.log(np.diagonal(L)).sum()
    return float(-0.5 * y @ a - 0.5 * logdet - len(y) / 2 * np.log(2 * np.pi))


def _print_eval(system, n, model, X, y, theta):
    """One objective evaluation (lml and gradient), median of three, as a row."""
    import resource
    import statistics

    model.set_params(optimizer=None).fit(X, y)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        lml, _ = model.log_marginal_likelihood(theta, eval_gradient=True)
        times.append(time.perf_counter() - t0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"system": system, "n": n, "solver": "eval", "fit_s": statistics.median(times),
                      "predict_s": float("nan"), "peak_mb": rss, "lml": float(lml),
                      "rmse": float("nan"), "kernel": "", "evals": 1}))


def _gpytorch(X, y, steps):
    """``(fit, predict, lml)`` closures for an exact GPyTorch GP trained by Adam."""
    import gpytorch
    import torch

    torch.set_default_dtype(torch.float64)
    Xtr, ytr = torch.as_tensor(X), torch.as_tensor(y)
    likelihood = gpytorch.likelihoods.GaussianLikelihood()

    class ExactGP(gpytorch.models.ExactGP):
        def __init__(self):
            super().__init__(Xtr, ytr, likelihood)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.RBFKernel(ard_num_dims=X.shape[1]))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                             self.covar_module(x))

    model = ExactGP()
    model.covar_module.base_kernel.lengthscale = torch.ones(X.shape[1])
    model.covar_module.outputscale = 1.0
    likelihood.noise = 0.1
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    last = {}

    def fit():
        model.train()
        likelihood.train()
        opt = torch.optim.Adam(model.parameters(), lr=0.1)
        for _ in range(steps):
            opt.zero_grad()
            loss = -mll(model(Xtr), ytr)
            loss.backward()
            opt.step()
            last["lml"] = -float(loss) * len(X)

    def predict(Xt):
        model.eval()
        likelihood.eval()
        with torch.no_grad():
            return model(torch.as_tensor(Xt)).mean.numpy()

    return fit, predict, lambda: last["lml"]


def _load(avg):
    return " / ".join(f"{v:.1f}" for v in avg)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=DEFAULT_CASES,
                    help="comma-separated system:n:solver (system: sklearn, kerneltools, "
                         "or gpytorch with solver adamK, K Adam steps)")
    ap.add_argument("--out", default=None, help="also write the table to this file")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        system, n, solver = args.child
        child(system, int(n), solver)
        return
    rows, load_start = [], os.getloadavg()
    for case in args.cases.split(","):
        system, n, solver = case.split(":")
        row = run_child(__file__, case, [system, n, solver])
        if row is not None:
            rows.append(row)
    lines = [
        f"GP regression, synthetic D = {D}, kernel C * RBF(ARD, {D} length scales) + "
        f"WhiteKernel, L-BFGS-B from the same start; RMSE against the noiseless "
        f"function on {N_TEST} test points. Load average (1, 5, 15 min) at the start "
        f"{_load(load_start)}, at the end {_load(os.getloadavg())} (2 cores, possibly "
        f"shared: fit CPU is user + system time of the case's process, all threads).",
        "",
        "| system | n | solver | fit (s) | fit CPU (s) | evals | predict (s) | peak RSS (MB) | log marginal likelihood | exact there | test RMSE |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        cpu = f"{r['cpu_s']:.1f}" if "cpu_s" in r else ""
        check = f"{r['lml_exact']:.6f}" if "lml_exact" in r else ""
        evals = str(r.get("evals", ""))
        stages = r.get("stages", {})
        if len(stages) > 1:  # by stage: "(1,250: 23, 5,000: 38, ...)"
            evals += " (" + ", ".join(f"{int(k):,}: {v}" for k, v in stages.items()) + ")"
        lines.append(f"| {r['system']} | {r['n']:,} | {r['solver']} | {r['fit_s']:.2f} | "
                     f"{cpu} | {evals} | {r['predict_s']:.2f} | {r['peak_mb']:.0f} | "
                     f"{r['lml']:.6f} | {check} | {r['rmse']:.4f} |")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
