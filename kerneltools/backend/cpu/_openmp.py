"""Which OpenMP runtimes a process has loaded, and whether the kernels may add one.

Two OpenMP runtimes of different families in one process (GNU's
``libgomp``, LLVM's ``libomp``, Intel's ``libiomp5``) can crash it or
deadlock it: both define the same entry points, or each keeps a team of
its own threads. scikit-learn's wheels vendor one (``libgomp`` on Linux,
``libomp`` on macOS), and so do PyTorch's and others. So the kernels are
built with OpenMP only where its runtime is of the family already loaded,
or none is; otherwise without it, on Python threads (:mod:`._threads`).

The runtimes are found in ``/proc/self/maps`` on Linux (a file read,
about a millisecond), elsewhere with threadpoolctl (a scikit-learn
dependency; about 10 ms), once per process, when the compiler is chosen
(the first reduction on the C backend): a runtime that an import brings in
after that is not seen. macOS and Windows are written for, not tested here.
"""

from __future__ import annotations

import os
import re
import sys

__all__ = ["runtime_family", "loaded_families", "conflict"]

#: A runtime's file name: its family ("libgomp-e985bcbb.so.1.0.0" is GNU's).
_FAMILY = re.compile(r"^(libgomp|libomp|libiomp5?|vcomp)[-.\d]")
_NAMES = {
    "libgomp": "GNU OpenMP (libgomp)",
    "libomp": "LLVM OpenMP (libomp)",
    "libiomp": "Intel OpenMP (libiomp5)",
    "libiomp5": "Intel OpenMP (libiomp5)",
    "vcomp": "Microsoft OpenMP (vcomp)",
}


def runtime_family(version: str) -> str:
    """The family of the OpenMP runtime a compiler links (from its
    ``--version`` line): LLVM's for clang, Intel's for icx, else GNU's."""
    v = version.lower()
    if "intel" in v or "icx" in v:
        return "libiomp5"
    return "libomp" if "clang" in v else "libgomp"


def _family(path: str) -> str | None:
    m = _FAMILY.match(os.path.basename(path))
    if m is None:
        return None
    return "libiomp5" if m.group(1).startswith("libiomp") else m.group(1)


def loaded_families() -> dict[str, str]:
    """{family: a path} of the OpenMP runtimes loaded in this process."""
    paths: list[str] = []
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/self/maps") as fh:
                paths = [line.split(None, 5)[-1].strip() for line in fh if "/" in line]
        except OSError:
            paths = []
    else:
        try:
            from threadpoolctl import threadpool_info

            paths = [
                i.get("filepath", "")
                for i in threadpool_info()
                if i.get("internal_api") == "openmp"
            ]
        except Exception:  # noqa: BLE001 (an optional look: nothing found)
            paths = []
    found: dict[str, str] = {}
    for path in paths:
        family = _family(path)
        if family is not None:
            found.setdefault(family, path)
    return found


def conflict(version: str) -> str | None:
    """Why the kernels of the compiler ``version`` must not load their OpenMP
    runtime into this process (another family's is loaded), or None."""
    mine = runtime_family(version)
    others = {f: p for f, p in loaded_families().items() if f != mine}
    if not others:
        return None
    names = ", ".join(f"{_NAMES[f]} from {p}" for f, p in sorted(others.items()))
    return (
        f"this process already has {names}: loading {_NAMES[mine]} beside it "
        "can crash it, so the kernels are built without OpenMP"
    )
