"""Run pykeops' own test files, unchanged, on kerneltools' compatibility modules.

    python tests/conformance/pykeops_run.py [--before] [--json out.json] [pytest args ...]

Copies the installed pykeops' test files (``pykeops/test/test_*.py``, byte for
byte) into a temporary folder and runs them with ``pykeops_plugin.py``, which
makes ``pykeops.numpy`` / ``pykeops.torch`` resolve to
``kerneltools.keops.numpy`` / ``.torch`` (pykeops itself is needed only for
these files and their NumPy reference helpers). Prints passed / failed /
skipped per file and the failures' messages. ``--before`` maps pykeops' names
to plain ``kerneltools`` / ``kerneltools.torch`` instead: the count before
the compatibility modules. Tests that need a GPU skip themselves without one.
Exit status 0 when no test fails; 0 with a message when pykeops is not
installed (nothing to run).
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from pykeops_plugin import pykeops_dir  # noqa: E402


def run(pytest_args: list[str], before: bool, report: Path, workdir: Path) -> int:
    real = pykeops_dir()
    for f in sorted((real / "test").glob("test_*.py")):
        shutil.copyfile(f, workdir / f.name)
    shutil.copyfile(real / "test" / "conv2d.py", workdir / "conv2d.py")
    cmd = [sys.executable, "-m", "pytest", "-c", str(HERE / "pytest.ini"), "--rootdir",
           str(workdir), "-q", "-p", "no:randomly", "--continue-on-collection-errors",
           "-p", "pykeops_plugin",
           "--pykeops-report", str(report), *(["--pykeops-before"] if before else []),
           str(workdir), *pytest_args]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])]))
    return subprocess.call(cmd, env=env, cwd=str(workdir))


def summarize(records: dict[str, dict], out=sys.stdout) -> bool:
    per_file = collections.defaultdict(collections.Counter)
    for nodeid, rec in records.items():
        per_file[nodeid.split("::")[0]][rec["outcome"]] += rec.get("tests", 1)
    total = collections.Counter()
    print("\nper file:", file=out)
    for f in sorted(per_file):
        c = per_file[f]
        total.update(c)
        print(f"  {f:45s} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())), file=out)
    print(f"\ntotal (a file that fails to import counts each of its tests): "
          f"{dict(sorted(total.items()))}", file=out)
    bad = {k: v for k, v in records.items() if v["outcome"] in ("failed", "collection error")}
    if bad:
        print("\nfailures:", file=out)
        for nodeid in sorted(bad):
            msg = bad[nodeid]["message"].strip().splitlines()
            print(f"  {nodeid}\n      {msg[0][:200] if msg else ''}", file=out)
    return not bad


def main(argv: list[str]) -> int:
    if pykeops_dir() is None:
        print("pykeops is not installed: its test files are what this run executes "
              "(pip install pykeops); nothing to run")
        return 0
    before = "--before" in argv
    argv = [a for a in argv if a != "--before"]
    json_out = None
    if "--json" in argv:
        i = argv.index("--json")
        json_out = Path(argv[i + 1]).resolve()
        del argv[i:i + 2]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "pykeops_tests"
        work.mkdir()
        report = json_out or Path(tmp) / "report.json"
        rc = run(argv, before, report, work)
        if not report.exists():
            print(f"no report written (pytest exit status {rc})", file=sys.stderr)
            return rc or 1
        ok = summarize(json.loads(report.read_text()))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
