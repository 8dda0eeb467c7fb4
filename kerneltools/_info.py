"""``python -m kerneltools info``: what this installation can do."""

from __future__ import annotations

import platform

import numpy as np

from ._version import __version__
from .backend.cpu._cache import cache_dir, cache_size, storage_problem
from .backend._dispatch import backend_status, resolve_backend


def _compiler() -> tuple[bool, str]:
    """(whether a C compiler is usable, the report's lines about it: the
    compiler, how its kernels use the cores, why the others are not used)."""
    try:
        from .backend.cpu._compiler import find_compiler
        from .backend.cpu._zig import zig_binary
    except ImportError:
        return True, "not needed by this version"
    comp = find_compiler()
    if not comp.ok:
        return False, f"none usable: {comp.reason}"
    lines = [comp.description, f"  threads: {comp.threads}"
             + (f" ({comp.openmp_note})" if comp.openmp_note else "")]
    others = list(comp.skipped)
    zig, version = zig_binary()
    if zig is not None and comp.command[:1] != (zig,):
        others.append(f"zig: {version}, installed; the system compiler comes first "
                      "(KERNELTOOLS_COMPILER=zig chooses zig)")
    lines += [f"  not used: {why}" for why in others]
    return True, "\n".join(lines)


def info(file=None) -> str:
    """A report of the version, backends, C compiler and kernel cache; printed too.

    The report is all it says: what would be a warning elsewhere (the NumPy
    fallback of a machine without a compiler) is a line of it, said once.

    Parameters
    ----------
    file : file-like, optional
        Where to print it (default: standard output).

    Returns
    -------
    str
        The report.

    Examples
    --------
    >>> import io
    >>> import kerneltools as kt
    >>> report = kt.info(file=io.StringIO())
    >>> report.splitlines()[0].startswith("kerneltools ")
    True
    """
    lines = [
        f"kerneltools {__version__}",
        f"python {platform.python_version()}, numpy {np.__version__}, {platform.platform()}",
        "backends:",
    ]
    compiler_ok, compiler_line = _compiler()
    for name, ok, why in backend_status():
        if name == "cpu" and not compiler_ok:  # why: the "C compiler" line below
            why = "no usable C compiler (see below)"
        lines.append(f"  {name:<6} {'usable' if ok else 'unusable'}: {why}")
    try:
        # (the report says why NumPy: no warning here; a reduction still warns)
        default = resolve_backend(None, warn=False).name
    except Exception as exc:  # an invalid KERNELTOOLS_BACKEND, for instance
        default = f"error: {exc}"
    lines.append(f"default backend: {default}")
    lines.append(f"C compiler: {compiler_line}")
    path = cache_dir(create=False)
    n, size = cache_size()
    problem = storage_problem()
    state = (f"; {problem}: its kernels are used, new ones go to a temporary folder"
             if problem else "")
    lines.append(f"kernel cache: {path} ({n} files, {size / 1e6:.1f} MB{state})")
    text = "\n".join(lines)
    print(text, file=file)
    return text
