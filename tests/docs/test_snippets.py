"""The Python snippets of the documentation's pages run as written.

Each ``python`` block of ``docs/index.rst`` and of the user guide
(``docs/user_guide/``) runs in a process of its own, at smaller sizes (100,000
and 10,000 points become 2,000 and 1,000: the sizes are the only change), and
must exit cleanly. Blocks that need torch skip without it; the Dask block
starts a cluster of 10^7 points and is left to ``tests/test_dask.py``, which
checks the same calls. Needs no built site.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "docs" / "index.rst",
         *sorted((ROOT / "docs" / "user_guide").rglob("*.md"))]


def blocks(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    if page.suffix == ".md":
        return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)
    found = re.findall(r"^\.\. code-block:: python\n\n(.*?)(?=^\S)", text,
                       flags=re.S | re.M)
    return [textwrap.dedent(b) for b in found]


CASES = [(page, i, code) for page in PAGES for i, code in enumerate(blocks(page))]


@pytest.mark.parametrize(
    "page, index, code", CASES,
    ids=[f"{p.relative_to(ROOT / 'docs')}[{i}]" for p, i, _ in CASES])
def test_snippet_runs(page, index, code):
    if "distributed" in code:
        pytest.skip("starts a Dask cluster on 10^7 points (tests/test_dask.py "
                    "checks these calls)")
    if "import torch" in code and importlib.util.find_spec("torch") is None:
        pytest.skip("needs torch (pip install -e '.[torch]')")
    if "import jax" in code and importlib.util.find_spec("jax") is None:
        pytest.skip("needs jax (pip install -e '.[jax]')")
    small = code.replace("100_000", "2_000").replace("10_000", "1_000")
    proc = subprocess.run([sys.executable, "-c", small], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, f"{page.name}[{index}]:\n{proc.stderr[-3000:]}"


def test_every_page_was_read():
    assert len(PAGES) > 10 and len(CASES) >= 10, (len(PAGES), len(CASES))
