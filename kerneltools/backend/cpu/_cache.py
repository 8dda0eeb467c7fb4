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
  loaded is those very bytes (see ``_dlopen.py``).

An entry that fails a file check is not loaded; the caller rebuilds it.

A folder that cannot be written (a read-only mount or image layer, a full
disk, another user's permissions) is still read: its kernels are verified
as always and loaded without a write (a copy next to them where the folder
takes one, else from memory, ``_dlopen.py``); no record, lock or
marker needs writing. A new kernel that it refuses goes, for the rest of the
process, to a private temporary cache, with one :class:`CacheWarning` per
folder naming it, the reason and the fix (:func:`store_folder`,
:func:`cannot_store`); where that too refuses, :class:`KernelStoreError`
(``backend="auto"`` runs on NumPy).

Files are written to a temporary name (``.tmp-*``) in their folder and renamed
into place, so no process or thread sees a partial file, and a write that
fails removes its temporary file; leftovers of killed processes older than
:data:`STALE_AGE` are removed at a process's first use. The root holds a
marker file; :func:`clear_cache` deletes only names that kerneltools writes,
never a user's files.
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import hashlib
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from ._dlopen import dlopen_bytes, problem, read_trusted
from .._errors import CacheError, CacheWarning, KernelStoreError, outside_stacklevel

__all__ = [
    "cache_dir", "cache_size", "clear_cache", "storage_problem", "atomic_write",
    "kernel_folders", "store_folder", "cannot_store", "store_library", "read_record",
    "write_record",
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

_prepared: dict[str, _State] = {}  # configured root -> what this process found there
_fallback: list[Path] = []  # this process's private temporary cache, if any
_unwritable: dict[str, OSError] = {}  # folder -> why new kernels cannot be stored there
_warned: set[str] = set()  # folders whose CacheWarning was given
_prepare_lock = threading.Lock()


@dataclass
class _State:
    """The configured root as this process found it."""

    root: Path
    #: Whether it is a trusted folder whose kernels may be loaded.
    readable: bool
    #: Whether a repair to owner-only may be made (the default location).
    repair: bool


def _platform_cache_root() -> Path:
    """The user's cache folder: ``%LOCALAPPDATA%`` on Windows, ``~/Library/Caches``
    on macOS (both written for, not tested here), ``$XDG_CACHE_HOME`` or
    ``~/.cache`` elsewhere."""
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
    """The kernel cache directory: where this process stores new kernels.

    Parameters
    ----------
    create : bool, default=True
        Make it ready, once per process, as the backends do: created
        owner-only, checked (:class:`CacheError` if another user could write
        to it), cleaned of stale temporary files. Where it cannot store new
        kernels (read-only, full), the private temporary folder this process
        uses instead, once it has been made. Without, the configured path,
        untouched.

    Returns
    -------
    pathlib.Path
        The directory.

    Examples
    --------
    >>> import kerneltools as kt
    >>> kt.cache_dir(create=False).is_absolute()
    True
    """
    path, _ = _configured()
    if not create:
        return path
    state = _state()
    if str(state.root) in _unwritable and _fallback:
        return _fallback[0]
    return state.root


def _state() -> _State:
    path, from_env = _configured()
    state = _prepared.get(str(path))
    if state is None:
        with _prepare_lock:
            state = _prepared.get(str(path))
            if state is None:
                state = _prepared[str(path)] = _prepare(path, from_env)
    return state


def _prepare(root: Path, from_env: bool) -> _State:
    """Create and check ``root`` and its subfolders; whether it can be read
    and written. Nothing needs to be written to use a warm cache: a folder
    that cannot be written (read-only, full) is read as it is, and its
    kernels are loaded without a write (see ``_dlopen.py``)."""
    new = not root.exists()
    folders = (root, *(root / sub for sub in SUBFOLDERS))
    try:
        for folder in folders:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        _unwritable[str(root)] = exc
    if not root.is_dir():
        return _State(root, readable=False, repair=False)
    for folder in folders:
        if folder == root or folder.is_dir():
            _check_folder(folder, repair=not from_env, follow=folder == root)
    if str(root) not in _unwritable:
        try:  # a real write: os.access is wrong for root, on NFS, on a read-only mount
            for folder in folders:
                fd, probe = tempfile.mkstemp(dir=folder, prefix=_TMP)
                os.close(fd)
                os.unlink(probe)
        except OSError as exc:
            _unwritable[str(root)] = exc
    marked = _is_marked(root)
    if str(root) not in _unwritable:
        if not marked and (new or _only_ours(root)):
            try:  # the marker is a courtesy: a full disk may refuse it
                atomic_write(root / MARKER, _MARKER_TEXT)
                marked = True
            except OSError:
                pass
        _remove_stale(root, marked)
    return _State(root, readable=True, repair=not from_env)


def _fix(exc: OSError | None) -> str:
    """What the user can do about a folder that refused a write with ``exc``."""
    if exc is None:
        return "make it a folder you can write"
    if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        return "free space on its disk"
    if exc.errno == errno.EROFS:
        return "mount its file system read-write"
    return "make it a folder you can write"


def _private() -> Path:
    """This process's private temporary cache (made once, 0700, deleted at
    exit); KernelStoreError if it cannot be made or has refused a kernel."""
    configured = _state().root
    why = _unwritable.get(str(configured))
    with _prepare_lock:
        if not _fallback:
            try:
                tmp = Path(tempfile.mkdtemp(prefix="kerneltools-cache-"))  # 0700
                for sub in SUBFOLDERS:
                    (tmp / sub).mkdir(mode=0o700, exist_ok=True)
            except OSError as exc:
                raise _nowhere(configured, why, tempfile.gettempdir(), exc) from None
            owner = os.getpid()
            atexit.register(lambda: os.getpid() == owner and shutil.rmtree(tmp, True))
            _fallback.append(tmp)
        tmp = _fallback[0]
        if str(tmp) in _unwritable:
            raise _nowhere(configured, why, tmp, _unwritable[str(tmp)])
        if str(configured) not in _warned:
            _warned.add(str(configured))
            warnings.warn(
                f"the kernel cache folder {configured} cannot store new kernels "
                f"({_reason(why)}); this process compiles them into the temporary "
                f"folder {tmp}, deleted at exit (the kernels already in {configured} "
                f"are still used). To fix: {_fix(why)}, or set KERNELTOOLS_CACHE_DIR "
                "to a folder you can write",
                CacheWarning,
                stacklevel=outside_stacklevel(),
            )
    return tmp


def _reason(exc: OSError | None) -> str:
    return "unknown" if exc is None else exc.strerror or str(exc)


def _nowhere(configured: Path, why: OSError, tmp, exc: OSError) -> KernelStoreError:
    return KernelStoreError(
        f"a new kernel cannot be stored: the kernel cache folder {configured} refuses "
        f"it ({_reason(why)}) and so does the temporary folder {tmp} "
        f"({_reason(exc)}). To fix: for {configured}, {_fix(why)}, or set "
        "KERNELTOOLS_CACHE_DIR to a folder you can write (TMPDIR moves the "
        "temporary folder)"
    )


def kernel_folders(sub: str) -> list[Path]:
    """The folders to look a kernel up in: ``sub`` of the configured root
    where it is a folder of ours alone (else :class:`CacheError`), then of
    this process's private cache, if it has one."""
    state = _state()
    if not state.root.is_dir() and str(state.root) not in _unwritable:
        _prepared.pop(str(state.root), None)  # removed since this process prepared it
        state = _state()
    found = []
    folder = state.root / sub
    if state.readable and folder.is_dir():
        _check_folder(state.root, repair=state.repair, follow=True)
        _check_folder(folder, repair=state.repair)
        found.append(folder)
    if _fallback:
        found.append(_fallback[0] / sub)
    return found


def store_folder(sub: str) -> Path:
    """The folder where a new kernel of ``sub`` is written: the configured
    root's (checked), else the private cache's (one :class:`CacheWarning`
    per configured folder); :class:`KernelStoreError` if neither can be."""
    state = _state()
    if str(state.root) not in _unwritable:
        folder = state.root / sub
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)  # again, if removed
        except OSError as exc:
            cannot_store(state.root, exc)
        else:
            _check_folder(state.root, repair=state.repair, follow=True)
            _check_folder(folder, repair=state.repair)
            return folder
    return _private() / sub


def cannot_store(folder: Path, exc: OSError) -> bool:
    """Record that ``folder`` (a store folder or its root) refused a new
    kernel with ``exc``: this process stores no more there. Whether that is
    news (False: it was known, and another folder will not be tried)."""
    folder = Path(folder)
    for root in (_state().root, *_fallback):
        if (folder == root or root in folder.parents) and str(root) not in _unwritable:
            _unwritable[str(root)] = exc
            return True
    return False


def _check_folder(path: Path, *, repair: bool, follow: bool = False) -> None:
    """Raise CacheError unless ``path`` is a folder of ours alone (``repair``:
    chmod 700 one that is ours). The root may be reached through a link
    (``follow``), as in a home on another disk; a subfolder may not.

    Windows (written for, not tested here) opens no folder and has no owner
    ids: a folder, not a link unless ``follow``, is all it checks (its ACLs
    keep the per-user cache private)."""
    if not hasattr(os, "O_DIRECTORY"):
        _check_folder_windows(path, follow)
        return
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
        why = problem(st)
        if why and repair and st.st_uid == os.geteuid():
            try:
                os.fchmod(fd, 0o700)
                why = None
            except OSError:  # a read-only file system: said below
                pass
    finally:
        os.close(fd)
    if why:
        me = os.geteuid()
        fix = (f"chmod 700 {path}" if st.st_uid == me
               else f"use a folder of yours (or make it yours: chown {me} {path})")
        raise CacheError(
            f"the kernel cache folder {path} is {why}: another user could put "
            f"code there that kerneltools would run, so it is not used. To fix: {fix}, "
            "or set KERNELTOOLS_CACHE_DIR to a private folder"
        )


def _check_folder_windows(path: Path, follow: bool) -> None:
    try:
        st = os.stat(path) if follow else os.lstat(path)
        junction = getattr(path, "is_junction", lambda: False)()  # (Python >= 3.12)
        link = not follow and (stat.S_ISLNK(st.st_mode) or junction)
    except OSError as exc:
        raise CacheError(f"the kernel cache folder {path} cannot be read "
                         f"({exc.strerror}). To fix: set KERNELTOOLS_CACHE_DIR to a "
                         "private folder") from None
    if link or not stat.S_ISDIR(st.st_mode):
        raise CacheError(f"the kernel cache folder {path} is not a folder (a link?). "
                         "To fix: remove it, or set KERNELTOOLS_CACHE_DIR to a private "
                         "folder")


def store_library(folder: Path, key: str, built: str) -> ctypes.CDLL:
    """Put the library just built at ``built`` (a temporary file of ``folder``)
    in place as ``<key>.so`` with its digest, and load it (OSError if it does
    not load)."""
    os.chmod(built, 0o700)  # the linker may have recreated it with the umask's mode
    data = read_trusted(Path(built))
    if data is None:
        raise OSError(f"the compiled kernel {built} is not a regular file of this user")
    digest = hashlib.sha256(data).hexdigest()
    atomic_write(folder / f"{key}.sha256", digest.encode() + b"\n")
    os.replace(built, folder / f"{key}.so")
    return dlopen_bytes(folder, key, data)


def read_record(name: str) -> bytes | None:
    """The record ``name`` (see RECORD_FILE) at the cache root, or at this
    process's private cache, if it can be trusted as the kernels are, else
    None (none yet, foreign, a link, too big). Reading writes nothing."""
    try:
        state = _state()
        roots = ([state.root] if state.readable else []) + _fallback[:1]
        for root in roots:
            _check_folder(root, repair=False, follow=True)
            data = read_trusted(root / name, limit=1 << 16)
            if data is not None:
                return data
    except (CacheError, OSError):
        pass
    return None


def write_record(name: str, data: bytes) -> None:
    """Write a record where new kernels go; silently nothing if it cannot
    (a record is an optimisation: a full or read-only folder goes without)."""
    try:
        root = _state().root
        if str(root) in _unwritable:
            if not _fallback:
                return
            root = _fallback[0]
        atomic_write(root / name, data)
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


def _remove(path: Path, st: os.stat_result) -> OSError | None:
    """Delete ``path`` (a folder with what it holds); the error if it stays."""
    try:
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        return exc
    return None


def _remove_stale(root: Path, marked: bool) -> None:
    """Delete ``.tmp-*`` leftovers older than STALE_AGE (in the root only if
    kerneltools created it: elsewhere such a name may be the user's)."""
    now = time.time()
    for folder in (*(root / sub for sub in SUBFOLDERS), *((root,) if marked else ())):
        for name, st in _entries(folder, _TMP):
            if now - st.st_mtime > STALE_AGE:
                _remove(folder / name, st)


#: Free space below which a disk is reported full (a kernel takes 50-200 kB).
_LOW_SPACE = 1 << 20


def storage_problem() -> str | None:
    """Why the configured folder would refuse new kernels (a read-only or
    full file system), found without writing; None where nothing says so."""
    path = cache_dir(create=False)
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        fs = os.statvfs(path)
    except (OSError, AttributeError):
        return None
    if fs.f_flag & getattr(os, "ST_RDONLY", 1):
        return "read-only file system"
    if fs.f_bavail * fs.f_frsize < _LOW_SPACE:
        return f"its disk is full ({fs.f_bavail * fs.f_frsize // 1024} kB free)"
    return None


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

    Raises
    ------
    OSError
        Where some of them cannot be deleted (a read-only file system, for
        instance): how many, the folder, why and the fix.

    Examples
    --------
    Not run by the doctests (every kernel would compile again afterwards):

    >>> import kerneltools as kt
    >>> kt.clear_cache()  # doctest: +SKIP
    """
    root = cache_dir(create=False)
    marked = _is_marked(root)
    refused = []
    for sub in SUBFOLDERS:
        folder = root / sub
        try:
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                continue
        except OSError:
            continue
        for name, st in _entries(folder):
            if _KERNEL_FILE.fullmatch(name) and not stat.S_ISDIR(st.st_mode):
                refused.append(_remove(folder / name, st))
    for name, st in _entries(root):
        if RECORD_FILE.fullmatch(name) and not stat.S_ISDIR(st.st_mode):
            refused.append(_remove(root / name, st))
    _remove_stale(root, marked)
    refused = [exc for exc in refused if exc is not None]
    if refused:
        raise OSError(
            refused[0].errno,
            f"{len(refused)} file(s) that kerneltools wrote in the kernel cache folder "
            f"{root} cannot be deleted ({_reason(refused[0])}). To fix: "
            f"{_fix(refused[0])}, then clear it again",
        )


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
