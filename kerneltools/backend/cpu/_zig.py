"""The C compiler of the ``ziglang`` package: ``zig cc`` (clang, with its own libc).

``pip install "kerneltools[compiler]"`` installs it (about 100 MB to
download, 410 MB installed, wheels for Linux, macOS and Windows on x86-64
and ARM). It needs nothing else on the machine: no system compiler, linker,
headers or libc development files; its C library stubs are built once into
zig's own cache (``ZIG_GLOBAL_CACHE_DIR``, default ``~/.cache/zig``, about
50 MB, 5 s), then each kernel compiles as fast as with gcc. It has no
OpenMP runtime: its kernels run on threads of :mod:`._threads`.

The binary is found beside the package's ``__init__.py`` without importing
it (``python -m ziglang`` would cost a Python start per compile). On
Windows it is ``zig.exe``; that and macOS are written for, not tested here.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys

__all__ = ["zig_binary", "INSTALL_HINT"]

INSTALL_HINT = 'pip install "kerneltools[compiler]"'


def zig_binary() -> tuple[str | None, str]:
    """(the path of the ``zig`` binary of the installed ``ziglang`` package,
    its version), or (None, why there is none)."""
    try:
        spec = importlib.util.find_spec("ziglang")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return (
            None,
            f"the ziglang package is not installed ({INSTALL_HINT} installs it)",
        )
    name = "zig.exe" if sys.platform == "win32" else "zig"
    for folder in spec.submodule_search_locations:
        path = os.path.join(folder, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            try:
                version = importlib.metadata.version("ziglang")
            except importlib.metadata.PackageNotFoundError:
                version = "?"
            return path, f"zig {version} (ziglang package)"
    return (
        None,
        f"the ziglang package has no {name} binary (reinstall it: {INSTALL_HINT})",
    )
