"""The examples run, save their figure, and print numbers that make sense.

Each script in ``examples/`` runs as ``__main__`` with ``--quick --out
<folder>``, from the repository root, in a process of its own. Besides the
exit status and a non-empty PNG, the numbers an example prints about its own
result (an accuracy, an R^2, a gradient's error) are parsed and bounded, so
that a wrong result fails here and not only in a reader's eyes.

The processes are forked, one per example, from one parent that imported
what every example imports first (NumPy, matplotlib's pyplot, kerneltools
and with it SciPy and scikit-learn): about 2 CPU s of imports per example
otherwise, most of an example's cost in quick mode. The examples bind every
name they use by their own ``import``/``from ... import`` lines, which run
again in the child (from ``sys.modules``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from signal import SIGXCPU

import pytest

pytest.importorskip(
    "matplotlib",
    reason="the examples save their figures with matplotlib "
    "(pip install -e '.[examples]')",
)

ROOT = Path(__file__).resolve().parents[1]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: CPU seconds an example may take in quick mode (its process's CPU limit):
#: each takes under 10 s, including the compilation of its kernels on a cold
#: cache. A CPU limit, not a wall-clock one: on a loaded machine an example
#: gets a fraction of a core, and 60 s of wall clock were not always enough.
CPU_LIMIT = 60
#: Wall-clock seconds for all of them (a hang, not a slow machine).
TIMEOUT = 1200


def number(label: str, stdout: str) -> float:
    """The number printed after ``label`` (a regex), e.g. ``accuracy = 0.98``."""
    match = re.search(label + r"\s*([-+0-9.eE]+)", stdout)
    assert match, f"the example did not print {label!r}; its output:\n{stdout}"
    return float(match.group(1))


def check_quickstart(out: str) -> None:
    assert number(r"relative error on 100 rows vs dense NumPy:", out) < 1e-4


def check_kernel_ridge(out: str) -> None:
    # Noisy targets: the noise-free curve itself scores about 0.93.
    r2 = number(r"held-out R\^2 =", out)
    best = number(r"the noise-free curve scores", out)
    assert best - 0.02 < r2 <= best + 0.02, (r2, best)


def check_gaussian_process(out: str) -> None:
    assert 0.15 < number(r"fitted noise std =", out) < 0.25  # true: 0.2
    # A calibrated predictive band holds about 95% of held-out points.
    assert 0.88 < number(r"coverage =", out) < 0.99


def check_knn_digits(out: str) -> None:
    assert number(r"test accuracy =", out) > 0.95
    same = re.search(r"KNeighborsClassifier: (\d+)/(\d+)", out)
    assert same, out
    assert int(same.group(1)) >= 0.98 * int(same.group(2))  # ties may differ


def check_nystroem_pipeline(out: str) -> None:
    assert number(r"test accuracy =", out) > 0.9  # a linear model gets ~0.85
    assert "best params: {'gamma':" in out


def check_sinkhorn_flow(out: str) -> None:
    # The flow brings the divergence down by orders of magnitude.
    assert number(r"final / initial divergence =", out) < 1e-2


def check_custom_formula(out: str) -> None:
    assert number(r"max finite-difference error =", out) < 1e-6


def check_accel_kernel_ridge(out: str) -> None:
    # plain scikit-learn here; tests/accel/test_accel.py runs it under kerneltools.accel
    assert "estimator: sklearn.kernel_ridge.KernelRidge" in out
    check_kernel_ridge(out)


def check_sklearn_timing(out: str) -> None:
    # The same models as scikit-learn's (exact paths at these sizes): the
    # printed differences, not the times, are what is checked.
    diffs = [float(d) for d in re.findall(r"prediction difference\| = (\S+)", out)]
    same = [float(s) for s in re.findall(r"same labels on ([\d.]+)%", out)]
    assert len(diffs) == 6 and len(same) == 3, out
    assert max(diffs) < 1e-6 and min(same) >= 99.0, out


def check_cluster_hdbscan(out: str) -> None:
    assert out.count("same labels: True") == 2, out  # HDBSCAN and DBSCAN


def check_density_kde(out: str) -> None:
    assert number(r"largest log-density difference", out) < 1e-8


def check_impute_knn(out: str) -> None:
    assert "all where donors tie: True" in out, out
    knn = number(r"error on the hidden pixels \(0-16 scale\):", out)
    assert knn < 0.7 * number(r"mean imputation", out), out


def check_kernel_pca_circles(out: str) -> None:
    assert number(r"largest difference \(up to sign\)", out) < 1e-6


def check_outliers_lof_meanshift(out: str) -> None:
    assert number(r"relative difference of the factors", out) < 1e-10
    assert "the same modes: True" in out, out


def check_semi_supervised_moons(out: str) -> None:
    assert "the same labels: True" in out, out
    assert number(r"difference of the label distributions", out) < 1e-6
    right = re.search(r"([\d.]+)% of the points labelled right", out)
    assert right and float(right.group(1)) > 90, out


def check_spectral_clustering(out: str) -> None:
    assert number(r"index against scikit-learn's labels", out) == 1.0
    assert number(r"against the truth", out) > 0.95


def check_svm_decision(out: str) -> None:
    assert number(r"largest decision-value difference", out) < 1e-2
    same = re.search(r"the same prediction for ([\d.]+)%", out)
    assert same and float(same.group(1)) > 99.5, out


CHECKS = {
    "accel_kernel_ridge": check_accel_kernel_ridge,
    "quickstart": check_quickstart,
    "kernel_ridge": check_kernel_ridge,
    "gaussian_process": check_gaussian_process,
    "knn_digits": check_knn_digits,
    "nystroem_pipeline": check_nystroem_pipeline,
    "sinkhorn_flow": check_sinkhorn_flow,
    "custom_formula": check_custom_formula,
    "sklearn_timing": check_sklearn_timing,
    "cluster_hdbscan": check_cluster_hdbscan,
    "density_kde": check_density_kde,
    "impute_knn": check_impute_knn,
    "kernel_pca_circles": check_kernel_pca_circles,
    "outliers_lof_meanshift": check_outliers_lof_meanshift,
    "semi_supervised_moons": check_semi_supervised_moons,
    "spectral_clustering": check_spectral_clustering,
    "svm_decision": check_svm_decision,
}


def test_every_example_is_checked():
    scripts = {p.stem for p in (ROOT / "examples").glob("*.py")}
    assert scripts == set(CHECKS), "add the new example to CHECKS"


#: The parent: imports once, then forks each example with its own argv,
#: output folder, stdout and stderr files and CPU limit, one after the other.
_DRIVER = textwrap.dedent("""
    import json, os, resource, runpy, sys, traceback
    import numpy, matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot, kerneltools
    names, folder, cpu_limit = sys.argv[1].split(","), sys.argv[2], int(sys.argv[3])
    codes = {}
    for name in names:
        out = os.path.join(folder, name)
        os.makedirs(out)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                for fd, suffix in ((1, "stdout"), (2, "stderr")):
                    f = os.open(os.path.join(folder, f"{name}.{suffix}"),
                                os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                    os.dup2(f, fd)
                resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit, cpu_limit))
                sys.argv = [f"examples/{name}.py", "--quick", "--out", out]
                try:
                    runpy.run_path(f"examples/{name}.py", run_name="__main__")
                    code = 0
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else (exc.code is not None)
                except BaseException:
                    traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        codes[name] = os.waitstatus_to_exitcode(status)
    print(json.dumps(codes))
""")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{name: (exit code, stdout, stderr, output folder)} of every example."""
    folder = tmp_path_factory.mktemp("examples")
    env = dict(os.environ, MPLBACKEND="Agg")
    names = sorted(CHECKS)
    proc = subprocess.run(
        [sys.executable, "-c", _DRIVER, ",".join(names), str(folder), str(CPU_LIMIT)],
        check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert proc.returncode == 0, f"the examples' parent failed:\n{proc.stderr}"
    codes = json.loads(proc.stdout.splitlines()[-1])
    return {
        name: (codes[name], (folder / f"{name}.stdout").read_text(),
               (folder / f"{name}.stderr").read_text(), folder / name)
        for name in names
    }


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_example(name, runs):
    code, stdout, stderr, out = runs[name]
    why = f" (SIGXCPU: over its {CPU_LIMIT} CPU s)" if code == -SIGXCPU else ""
    assert code == 0, (
        f"examples/{name}.py --quick exited with {code}{why}\n"
        f"stdout:\n{stdout}\nstderr:\n{stderr}"
    )
    figure = out / f"{name}.png"
    assert figure.is_file(), f"examples/{name}.py wrote no {figure.name}: {stdout}"
    assert figure.read_bytes()[:8] == PNG_SIGNATURE
    assert figure.stat().st_size > 10_000  # a drawn figure, not an empty canvas
    CHECKS[name](stdout)
