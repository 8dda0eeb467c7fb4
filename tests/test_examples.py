"""The examples run, save their figure, and print numbers that make sense.

Each script in ``examples/`` runs in a subprocess with ``--quick --out
<tmp_path>``, as a user would run it (from the repository root, the
installed kerneltools). Besides the exit status and a non-empty PNG, the
numbers an example prints about its own result (an accuracy, an R^2, a
gradient's error) are parsed and bounded, so that a wrong result fails here
and not only in a reader's eyes.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip(
    "matplotlib",
    reason="the examples save their figures with matplotlib "
    "(pip install -e '.[examples]')",
)

ROOT = Path(__file__).resolve().parents[1]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Seconds an example may take in quick mode: each takes under 10 s on two
#: cores, including the compilation of its kernels on a cold cache.
TIMEOUT = 60


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
    # plain scikit-learn here; tests/test_accel.py runs it under kerneltools.accel
    assert "estimator: sklearn.kernel_ridge.KernelRidge" in out
    check_kernel_ridge(out)


CHECKS = {
    "accel_kernel_ridge": check_accel_kernel_ridge,
    "quickstart": check_quickstart,
    "kernel_ridge": check_kernel_ridge,
    "gaussian_process": check_gaussian_process,
    "knn_digits": check_knn_digits,
    "nystroem_pipeline": check_nystroem_pipeline,
    "sinkhorn_flow": check_sinkhorn_flow,
    "custom_formula": check_custom_formula,
}


def test_every_example_is_checked():
    scripts = {p.stem for p in (ROOT / "examples").glob("*.py")}
    assert scripts == set(CHECKS), "add the new example to CHECKS"


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_example(name, tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg")
    proc = subprocess.run(
        [sys.executable, f"examples/{name}.py", "--quick", "--out", str(tmp_path)],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, (
        f"examples/{name}.py --quick exited with {proc.returncode}\n"
        f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    )
    figure = tmp_path / f"{name}.png"
    assert figure.is_file(), f"examples/{name}.py wrote no {figure.name}: {proc.stdout}"
    assert figure.read_bytes()[:8] == PNG_SIGNATURE
    assert figure.stat().st_size > 10_000  # a drawn figure, not an empty canvas
    CHECKS[name](proc.stdout)
