"""Check a wheel of kerneltools against the checkout and the installed copy.

Usage: ``python .ci/check_wheel.py dist/kerneltools-*.whl`` (from .ci/run).
Fails if the wheel lacks a tracked file of ``kerneltools/`` or holds one that
is not tracked, or if the kerneltools installed in this environment is not
that wheel's content (its RECORD's hashes differ, or it is an editable
install).
"""

import csv
import importlib.metadata
import io
import subprocess
import sys
import zipfile


def wheel_record(path):
    """``{file: hash}`` of the wheel's RECORD, for the files of kerneltools/."""
    with zipfile.ZipFile(path) as wheel:
        names = [n for n in wheel.namelist() if n.endswith(".dist-info/RECORD")]
        text = wheel.read(names[0]).decode()
    return {row[0]: row[1] for row in csv.reader(io.StringIO(text))
            if row and row[0].startswith("kerneltools/")}


def main(path):
    in_wheel = wheel_record(path)
    tracked = set(subprocess.run(["git", "ls-files", "kerneltools"], check=True,
                                 capture_output=True, text=True).stdout.split())
    missing, extra = sorted(tracked - set(in_wheel)), sorted(set(in_wheel) - tracked)
    problems = [f"missing from the wheel: {missing}"] * bool(missing)
    problems += [f"in the wheel, not tracked: {extra}"] * bool(extra)
    installed = {f.as_posix(): f.hash and f"{f.hash.mode}={f.hash.value}"
                 for f in importlib.metadata.files("kerneltools") or ()
                 if f.as_posix().startswith("kerneltools/")
                 and "__pycache__" not in f.parts}  # pip compiles those
    if installed != in_wheel:
        differ = sorted(set(installed) ^ set(in_wheel)) or sorted(
            n for n in in_wheel if installed[n] != in_wheel[n])
        problems.append(f"the installed kerneltools is not this wheel: {differ[:10]}")
    if problems:
        sys.exit("\n".join(problems))
    print(f"{path}: {len(in_wheel)} files, every tracked file of kerneltools/; "
          "the installed copy is this wheel")


if __name__ == "__main__":
    main(sys.argv[1])
