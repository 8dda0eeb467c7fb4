"""The README as a newcomer runs it: its commands and its snippets."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", README, flags=re.S | re.M)


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start:end if end > 0 else None]


def test_the_first_lines_hold_the_two_set_up_commands():
    """.ci/run runs the README's first bash block: it must be the two commands
    (install and run the main example; install and run the tests)."""
    assert README.index("```bash") < 40
    first = _blocks("bash")[0].splitlines()
    assert first == [
        "pip install . && python examples/quickstart.py",
        'pip install ".[test]" && pytest -q -n 2 --dist loadfile tests',
    ]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "README.md" in ci and "venv" in ci


def test_quickstart_runs_without_matplotlib(tmp_path):
    """The first command installs kerneltools alone (no matplotlib): the
    example still runs and checks its numbers, and says the figure is off."""
    script = f"""
        import runpy, sys
        sys.modules["matplotlib"] = None  # import matplotlib -> ImportError
        sys.argv = ["quickstart.py", "--quick", "--out", {str(tmp_path)!r}]
        runpy.run_path({str(ROOT / "examples" / "quickstart.py")!r}, run_name="__main__")
    """
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    err = re.search(r"relative error on 100 rows vs dense NumPy:\s*(\S+)", proc.stdout)
    assert err and float(err.group(1)) < 1e-4, proc.stdout
    assert "figure: skipped (matplotlib is not installed" in proc.stdout
    assert not list(tmp_path.iterdir())


def test_the_estimators_snippet_runs_as_written():
    """Copied into a file and run, the snippet of '## Estimators' works: every
    name it uses is imported there."""
    snippet = re.findall(r"^```python\n(.*?)^```$", _section("Estimators"),
                         flags=re.S | re.M)[0]
    proc = subprocess.run([sys.executable, "-c", snippet + "\nprint('snippet ok')"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith("snippet ok")


def test_the_first_python_snippet_computes_the_product():
    """The README's opening example, at 2,000 points instead of 100,000 (the
    sizes are its only change), against dense NumPy."""
    snippet = _blocks("python")[0]
    assert "100_000" in snippet
    small = snippet.replace("100_000", "2_000")
    scope: dict = {}
    exec(compile(small, "README.md", "exec"), scope)
    x, b, a = scope["x"].astype(float), scope["b"].astype(float), scope["a"]
    dense = np.exp(-((x[:, None] - x[None]) ** 2).sum(-1) / 0.02) @ b
    np.testing.assert_allclose(a, dense, rtol=1e-4, atol=1e-4 * np.abs(dense).max())


def test_the_genred_snippet_runs_as_written():
    """The snippet of '## pykeops code, unchanged but for the import', run as
    written, against dense NumPy."""
    snippet = re.findall(r"^```python\n(.*?)^```$",
                         _section("pykeops code, unchanged but for the import"),
                         flags=re.S | re.M)[0]
    scope: dict = {}
    exec(compile(snippet, "README.md", "exec"), scope)
    x, y, b, g, a = (scope[k] for k in "xybga")
    dense = np.exp(-g[0] * ((x[:, None] - y[None]) ** 2).sum(-1)) @ b
    np.testing.assert_allclose(a, dense, rtol=1e-10)
