"""The on-disk cache of compiled kernels: location, size, clearing, atomic writes.

The directory is ``$KERNELTOOLS_CACHE_DIR`` if set, else ``kerneltools`` under
the platform's user cache directory. It is created with owner-only permissions.
Files are written to a temporary name in the same directory and renamed into
place, so no process or thread ever sees a partial file.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

__all__ = ["cache_dir", "cache_size", "clear_cache", "atomic_write"]


def _platform_cache_root() -> Path:
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def cache_dir(create: bool = True) -> Path:
    """The kernel cache directory (created owner-only if ``create``)."""
    env = os.environ.get("KERNELTOOLS_CACHE_DIR")
    path = Path(env).expanduser() if env else _platform_cache_root() / "kerneltools"
    if create:
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise OSError(
                f"cannot create the kernel cache directory {path}: {exc}; set "
                "KERNELTOOLS_CACHE_DIR to a writable directory"
            ) from exc
    return path


def cache_size() -> tuple[int, int]:
    """(number of files, total bytes) in the cache directory."""
    path = cache_dir(create=False)
    if not path.is_dir():
        return 0, 0
    files = [p for p in path.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def clear_cache() -> None:
    """Delete every compiled kernel of the cache directory (the directory stays)."""
    path = cache_dir(create=False)
    if not path.is_dir():
        return
    for entry in path.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            try:
                entry.unlink()
            except FileNotFoundError:
                pass


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
