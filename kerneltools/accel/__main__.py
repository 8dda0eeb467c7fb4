"""``python -m kerneltools.accel [-v] script.py [args]`` or ``... [-v] -m module [args]``:
run a scikit-learn script unchanged, with :func:`kerneltools.accel.install` in effect."""

from __future__ import annotations

import os
import runpy
import sys

from . import install

USAGE = """\
usage: python -m kerneltools.accel [-v] script.py [args ...]
       python -m kerneltools.accel [-v] -m module [args ...]

Run a Python script (as __main__, with sys.argv = [script, args ...], as
`python script.py args` does) where scikit-learn's estimators import as
kerneltools'. -v prints what is patched."""


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = False
    while argv and argv[0] in ("-v", "--verbose", "-h", "--help"):
        if argv.pop(0) in ("-h", "--help"):
            print(USAGE)
            return 0
        verbose = True
    if not argv or argv[0] == "-m" and len(argv) < 2:
        print(USAGE, file=sys.stderr)
        return 2
    install(verbose=verbose)
    if argv[0] == "-m":
        module, args = argv[1], argv[2:]
        sys.argv = [module, *args]  # runpy sets argv[0] to the module's file
        sys.path.insert(0, os.getcwd())
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        script, args = argv[0], argv[1:]
        sys.argv = [script, *args]
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
        runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
