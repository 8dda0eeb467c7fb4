"""``python -m kerneltools info``: what this installation can do."""

from __future__ import annotations

import platform

import numpy as np

from ._version import __version__
from .backend._cache import cache_dir, cache_size
from .backend._dispatch import backend_status, resolve_backend


def _compiler_line() -> str:
    try:
        from .backend._compiler import find_compiler
    except ImportError:
        return "not needed by this version"
    comp = find_compiler()
    return comp.description if comp.ok else f"none usable ({comp.reason})"


def info(file=None) -> str:
    """A report of the version, backends, C compiler and kernel cache; printed too."""
    lines = [
        f"kerneltools {__version__}",
        f"python {platform.python_version()}, numpy {np.__version__}, {platform.platform()}",
        "backends:",
    ]
    for name, ok, why in backend_status():
        lines.append(f"  {name:<6} {'usable' if ok else 'unusable'}: {why}")
    try:
        default = resolve_backend(None).name
    except Exception as exc:  # an invalid KERNELTOOLS_BACKEND, for instance
        default = f"error: {exc}"
    lines.append(f"default backend: {default}")
    lines.append(f"C compiler: {_compiler_line()}")
    path = cache_dir(create=False)
    n, size = cache_size()
    lines.append(f"kernel cache: {path} ({n} files, {size / 1e6:.1f} MB)")
    text = "\n".join(lines)
    print(text, file=file)
    return text
