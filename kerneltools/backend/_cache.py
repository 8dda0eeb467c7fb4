"""The on-disk cache of compiled kernels: where it is, and why its files are trusted.

The folder is ``$KERNELTOOLS_CACHE_DIR`` if set, else ``kerneltools`` under
the platform's user cache directory; kernels of the CPU backend live in its
``cpu/`` subfolder.

A cached library is code that ``dlopen`` runs (its constructors at once), so
nothing is loaded that kerneltools did not build for this user:

* every folder from the cache root down is owned by the current user and not
  writable by group or others, else :class:`CacheError` (the default location
  is repaired to 0700 when we own it; a folder named by the variable is the
  user's to fix);
* every file is opened without following links (``O_NOFOLLOW``) and must be a
  regular file owned by the current user, not writable by group or others;
* a library's bytes, read through that descriptor, must have the SHA-256
  recorded beside it at build time (``<key>.sha256``, owner-only), and what is
  loaded is those very bytes (see :func:`_dlopen_bytes`).

An entry that fails a file check is not loaded; the caller rebuilds it. A
folder that cannot be created or written is replaced, for this process, by a
private temporary cache, with one :class:`CacheWarning`.

Files are written to a temporary name (``.tmp-*``) in their folder and renamed
into place, so no process or thread sees a partial file; leftovers of killed
processes older than :data:`STALE_AGE` are removed at a process's first use.
The root holds a marker file; :func:`clear_cache` deletes only names that
kerneltools writes, never a user's files.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import itertools
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

from ._errors import CacheError, CacheWarning

__all__ = [
    "cache_dir", "cache_size", "clear_cache", "atomic_write", "kernel_folder",
    "load_verified_library", "store_library", "read_record", "write_record",
]

#: The marker file at the root of a folder that kerneltools created.
MARKER = ".kerneltools-cache"
#: Temporary files older than this (seconds) belong to no running compile.
STALE_AGE = 600.0
#: The subfolders kerneltools writes (one per backend that caches files).
SUBFOLDERS = ("cpu",)
_KERNEL_FILE = re.compile(r"[0-9a-f]{40}\.(so|c|sha256)")
#: Small JSON records at the root (the compiler probe's, see ``_compiler.py``).
RECORD_FILE = re.compile(r"compiler-[0-9a-f]{20}\.json")
_TMP = ".tmp-"
_MARKER_TEXT = (b"kerneltools kernel cache: 'python -m kerneltools clear-cache' "
                b"deletes what kerneltools wrote here\n")
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)

_prepared: dict[str, Path] = {}  # configured root -> the root this process uses
_fallback: list[Path] = []  # this process's private temporary cache, if any
_prepare_lock = threading.Lock()
_loads = itertools.count()


def _platform_cache_root() -> Path:
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def _configured() -> tuple[Path, bool]:
    """(the configured root, whether it comes from the environment variable)."""
    env = os.environ.get("KERNELTOOLS_CACHE_DIR")
    if env:
        return Path(env).expanduser(), True
    return _platform_cache_root() / "kerneltools", False


def cache_dir(create: bool = True) -> Path:
    """The kernel cache directory.

    With ``create`` (what the backends use), it is made ready once per
    process: created owner-only, checked (:class:`CacheError` if another user
    could write to it), cleaned of stale temporary files; if it cannot be
    created or written, a private temporary folder is used instead, with one
    :class:`CacheWarning`. Without, the configured path, untouched.
    """
    path, from_env = _configured()
    if not create:
        return path
    usable = _prepared.get(str(path))
    if usable is None:
        with _prepare_lock:
            usable = _prepared.get(str(path))
            if usable is None:
                usable = _prepared[str(path)] = _prepare(path, from_env)
    return usable


def _prepare(root: Path, from_env: bool) -> Path:
    new = not root.exists()
    folders = (root, *(root / sub for sub in SUBFOLDERS))
    try:
        for folder in folders:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not os.access(folder, os.W_OK | os.X_OK):
                raise PermissionError(13, "not writable by this user")
    except OSError as exc:
        return _fall_back(root, exc)
    for folder in folders:
        _check_folder(folder, repair=not from_env, follow=folder == root)
    try:
        for folder in folders:  # a real write: os.access is wrong for root on NFS
            fd, probe = tempfile.mkstemp(dir=folder, prefix=_TMP)
            os.close(fd)
            os.unlink(probe)
        marked = _is_marked(root)
        if not marked and (new or _only_ours(root)):
            atomic_write(root / MARKER, _MARKER_TEXT)
            marked = True
    except OSError as exc:
        return _fall_back(root, exc)
    _remove_stale(root, marked)
    return root


def _fall_back(root: Path, exc: OSError) -> Path:
    if not _fallback:
        tmp = Path(tempfile.mkdtemp(prefix="kerneltools-cache-"))  # 0700
        owner = os.getpid()
        atexit.register(lambda: os.getpid() == owner and shutil.rmtree(tmp, True))
        _fallback.append(tmp)
    tmp = _fallback[0]
    warnings.warn(
        f"the kernel cache folder {root} cannot be used ({exc.strerror or exc}); this "
        f"process compiles into the temporary folder {tmp}, deleted at exit. To fix: "
        f"make {root} a folder you can write, or set KERNELTOOLS_CACHE_DIR to one",
        CacheWarning,
        stacklevel=2,
    )
    for sub in SUBFOLDERS:
        (tmp / sub).mkdir(mode=0o700, exist_ok=True)
    return tmp


def _problem(st: os.stat_result) -> str | None:
    """Why a file or folder with this status is not ours alone, or None."""
    me = os.geteuid()
    if st.st_uid != me:
        return f"owned by another user (uid {st.st_uid}; you are uid {me})"
    if st.st_mode & 0o022:
        return f"writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _check_folder(path: Path, *, repair: bool, follow: bool = False) -> None:
    """Raise CacheError unless ``path`` is a folder of ours alone (``repair``:
    chmod 700 one that is ours). The root may be reached through a link
    (``follow``), as in a home on another disk; a subfolder may not."""
    flags = os.O_RDONLY | os.O_DIRECTORY | _O_CLOEXEC | (0 if follow else _O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise CacheError(
            f"the kernel cache folder {path} cannot be opened as a folder without "
            f"following links ({exc.strerror}). To fix: remove it, or set "
            "KERNELTOOLS_CACHE_DIR to a private folder"
        ) from None
    try:
        st = os.fstat(fd)
        problem = _problem(st)
        if problem and repair and st.st_uid == os.geteuid():
            os.fchmod(fd, 0o700)
            problem = None
    finally:
        os.close(fd)
    if problem:
        me = os.geteuid()
        fix = (f"chmod 700 {path}" if st.st_uid == me
               else f"use a folder of yours (or make it yours: chown {me} {path})")
        raise CacheError(
            f"the kernel cache folder {path} is {problem}: another user could put "
            f"code there that kerneltools would run, so it is not used. To fix: {fix}, "
            "or set KERNELTOOLS_CACHE_DIR to a private folder"
        )


def kernel_folder(sub: str) -> Path:
    """``sub`` of the cache root, checked: a folder of ours alone (else CacheError)."""
    configured, from_env = _configured()
    root = cache_dir()
    if not root.is_dir():  # removed since this process prepared it: again
        _prepared.pop(str(configured), None)
        root = cache_dir()
    repair = not from_env or root != configured  # the default, or our fallback
    folder = root / sub
    folder.mkdir(mode=0o700, exist_ok=True)  # again, if removed since
    _check_folder(root, repair=repair, follow=True)
    _check_folder(folder, repair=repair)
    return folder


def _read_trusted(path: Path, limit: int | None = None) -> bytes | None:
    """The bytes of ``path`` if it is a regular file of ours alone (not a link,
    at most ``limit`` bytes), read through one descriptor; else None."""
    try:  # O_NONBLOCK: a FIFO planted there must not hang the open
        fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or _problem(st):
            return None
        if limit is not None and st.st_size > limit:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    except OSError:
        return None
    finally:
        os.close(fd)


def _dlopen_bytes(folder: Path, key: str, data: bytes) -> ctypes.CDLL:
    """dlopen exactly ``data`` (already verified).

    Through a private copy: a new folder made by mkdtemp (0700) inside the
    checked cache folder, a file created there exclusively, loaded, then
    deleted (the mapping stays). Loading the cache path itself would leave a
    window in which a rename puts other bytes there between the check and the
    load. ``/proc/self/fd/N`` of the verified descriptor closes that window,
    but glibc's dlopen first matches the *name* against the libraries already
    loaded, and descriptor numbers are reused: a later kernel loaded through
    the same number would silently get the earlier library. The copy's name is
    unique in the process (key and a counter), and it sits next to the
    kernels, not in a /tmp that may be mounted noexec.
    """
    tmp = tempfile.mkdtemp(dir=folder, prefix=f"{_TMP}load-")
    copy = os.path.join(tmp, f"{key}-{next(_loads)}.so")
    try:
        with open(copy, "xb") as fh:
            fh.write(data)
        return ctypes.CDLL(copy)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_verified_library(folder: Path, key: str) -> ctypes.CDLL | None:
    """The library ``<key>.so`` of ``folder`` (checked by :func:`kernel_folder`)
    if it is ours alone and its bytes have the recorded digest; else None, for
    the caller to rebuild: nothing of an untrusted file runs."""
    data = _read_trusted(folder / f"{key}.so")
    digest = _read_trusted(folder / f"{key}.sha256", limit=200)
    if data is None or digest is None:
        return None
    if digest.decode("ascii", "replace").strip() != hashlib.sha256(data).hexdigest():
        return None
    try:
        return _dlopen_bytes(folder, key, data)
    except OSError:
        return None


def store_library(folder: Path, key: str, built: str) -> ctypes.CDLL:
    """Put the library just built at ``built`` (a temporary file of ``folder``)
    in place as ``<key>.so`` with its digest, and load it (OSError if it does
    not load)."""
    os.chmod(built, 0o700)  # the linker may have recreated it with the umask's mode
    data = _read_trusted(Path(built))
    if data is None:
        raise OSError(f"the compiled kernel {built} is not a regular file of this user")
    digest = hashlib.sha256(data).hexdigest()
    atomic_write(folder / f"{key}.sha256", digest.encode() + b"\n")
    os.replace(built, folder / f"{key}.so")
    return _dlopen_bytes(folder, key, data)


def read_record(name: str) -> bytes | None:
    """The record ``name`` (see RECORD_FILE) at the cache root if it can be
    trusted as the kernels are, else None (none yet, foreign, a link, too big)."""
    try:
        root = cache_dir()
        _check_folder(root, repair=False, follow=True)
    except (CacheError, OSError):
        return None
    return _read_trusted(root / name, limit=1 << 16)


def write_record(name: str, data: bytes) -> None:
    """Write a record at the cache root; silently nothing if it is unusable."""
    try:
        atomic_write(cache_dir() / name, data)
    except (CacheError, OSError):
        pass


def _is_marked(root: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(root / MARKER).st_mode)
    except OSError:
        return False


def _only_ours(root: Path) -> bool:
    """Whether the root holds nothing but names kerneltools writes."""
    try:
        names = os.listdir(root)
    except OSError:
        return False
    return all(n in SUBFOLDERS or RECORD_FILE.fullmatch(n) for n in names)


def _entries(folder: Path, prefix: str = ""):
    """(name, lstat) of the entries of ``folder`` whose name starts with
    ``prefix``, skipping any that vanish meanwhile."""
    try:
        names = [n for n in os.listdir(folder) if n.startswith(prefix)]
    except OSError:
        return
    for name in names:
        try:
            yield name, os.lstat(folder / name)
        except OSError:
            continue


def _remove(path: Path, st: os.stat_result) -> None:
    try:
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass


def _remove_stale(root: Path, marked: bool) -> None:
    """Delete ``.tmp-*`` leftovers older than STALE_AGE (in the root only if
    kerneltools created it: elsewhere such a name may be the user's)."""
    now = time.time()
    for folder in (*(root / sub for sub in SUBFOLDERS), *((root,) if marked else ())):
        for name, st in _entries(folder, _TMP):
            if now - st.st_mtime > STALE_AGE:
                _remove(folder / name, st)


def cache_size() -> tuple[int, int]:
    """(number of files, total bytes) in the cache directory.

    Tolerates files that vanish while it counts (another process compiling).
    """
    n = size = 0
    stack = [cache_dir(create=False)]
    while stack:
        folder = stack.pop()
        for name, st in _entries(folder):
            if stat.S_ISDIR(st.st_mode):
                stack.append(folder / name)
            elif stat.S_ISREG(st.st_mode):
                n, size = n + 1, size + st.st_size
    return n, size


def clear_cache() -> None:
    """Delete the files kerneltools wrote in the cache directory.

    Kernels, their sources and digests (``cpu/<40 hex>.so``, ``.c``,
    ``.sha256``) and the compiler probe's records; temporary files older than
    STALE_AGE (a younger one may be a compile running now, in the root only
    if kerneltools created the folder). Nothing else: the variable may point
    to a folder that also holds the user's files. Links are not followed.
    """
    root = cache_dir(create=False)
    marked = _is_marked(root)
    for sub in SUBFOLDERS:
        folder = root / sub
        try:
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                continue
        except OSError:
            continue
        for name, st in _entries(folder):
            if _KERNEL_FILE.fullmatch(name) and not stat.S_ISDIR(st.st_mode):
                _remove(folder / name, st)
    for name, st in _entries(root):
        if RECORD_FILE.fullmatch(name) and not stat.S_ISDIR(st.st_mode):
            _remove(root / name, st)
    _remove_stale(root, marked)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (owner-only) through a temporary file and a rename.

    The rename makes the file whole or absent for every other process. There
    is no ``fsync`` (10 to 20 ms a file, two per compiled kernel): what a
    power loss could leave behind, an empty or stale file, fails the checks
    that every reader makes (a library's recorded digest, the probe record's
    key), and is rebuilt, never trusted.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_TMP, suffix=path.suffix)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
