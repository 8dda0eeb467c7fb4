"""examples/jax/mmd_flow.py runs, saves its figure, and its flow brings the
loss down (the examples of examples/ are run by tests/test_examples.py,
which has no JAX)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("jax", reason="kerneltools.jax needs JAX (optional extra)")
pytest.importorskip("matplotlib", reason="the example saves a figure")

ROOT = Path(__file__).resolve().parents[2]


def test_mmd_flow_example(tmp_path):
    proc = subprocess.run(
        [sys.executable, "examples/jax/mmd_flow.py", "--quick", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "MPLBACKEND": "Agg"})
    assert proc.returncode == 0, proc.stderr
    ratio = float(re.search(r"final / initial MMD\^2 = ([-+0-9.eE]+)", proc.stdout)[1])
    assert ratio < 0.05, proc.stdout
    png = tmp_path / "mmd_flow.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
