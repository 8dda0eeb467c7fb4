"""Loading a compiled kernel: exactly the bytes that were verified, with no write.

A cached library is code that ``dlopen`` runs (its constructors at once).
:func:`read_trusted` reads a file of ours alone (a regular file owned by the
current user, not writable by group or others, opened without following
links) through one descriptor; :func:`load_verified_library` loads a
library only if those bytes have the SHA-256 recorded beside it at build
time, and loads those very bytes (:func:`dlopen_bytes`): through a private
copy next to the kernels where the folder takes one, else from memory, so a
warm cache on a read-only or full disk loads with no write at all. A folder
that takes the copy but cannot map code from it (a ``noexec`` mount, common
for ``/tmp`` and homes on shared machines) loads from memory too, else from
a private folder of the temporary directory, with one :class:`CacheWarning`
per folder. The folders' checks and where files are written: :mod:`._cache`.

Portability: Linux is tested. On macOS the same code runs, without memory
files (a ``noexec`` cache falls back to the temporary folder). On Windows
there are no owners or mode bits to check (:func:`problem` checks nothing:
the per-user cache folder's ACLs keep it private), no ``O_NOFOLLOW``, and a
loaded library cannot be deleted (its private copy stays until the next
clean-up); written for, not tested here.
"""

from __future__ import annotations

import atexit
import ctypes
import errno
import hashlib
import itertools
import os
import shutil
import stat
import tempfile
import threading
import warnings
from pathlib import Path

from .._errors import CacheWarning, is_storage_error, outside_stacklevel

__all__ = ["dlopen_bytes", "dlopen_file", "load_verified_library", "problem",
           "read_trusted"]

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation of the bytes
#: The prefix of the temporary names in the cache (see ``_cache.py``).
_TMP = ".tmp-"
_loads = itertools.count()
_no_copy: set[str] = set()  # folders where a loading copy cannot be written or mapped
_memfds: list[int] = []  # descriptors of the libraries loaded from memory (kept open)
_private: list[str] = []  # this process's folder of loading copies, if it needed one
_lock = threading.Lock()


def problem(st: os.stat_result) -> str | None:
    """Why a file or folder with this status is not ours alone, or None
    (always None on Windows, which has no owner ids or mode bits to check)."""
    if not hasattr(os, "geteuid"):
        return None
    me = os.geteuid()
    if st.st_uid != me:
        return f"owned by another user (uid {st.st_uid}; you are uid {me})"
    if st.st_mode & 0o022:
        return f"writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def read_trusted(path: Path, limit: int | None = None) -> bytes | None:
    """The bytes of ``path`` if it is a regular file of ours alone (not a link,
    at most ``limit`` bytes), read through one descriptor; else None."""
    try:  # O_NONBLOCK: a FIFO planted there must not hang the open
        fd = os.open(path, os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC | _O_NONBLOCK
                     | _O_BINARY)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or problem(st):
            return None
        if limit is not None and st.st_size > limit:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    except OSError:
        return None
    finally:
        os.close(fd)


def dlopen_bytes(folder: Path, key: str, data: bytes) -> ctypes.CDLL:
    """dlopen exactly ``data`` (already verified); no write is needed.

    Through a private copy: a new folder made by mkdtemp (0700) inside the
    checked cache folder, a file created there exclusively, loaded, then
    deleted (the mapping stays). Loading the cache path itself would leave a
    window in which a rename puts other bytes there between the check and the
    load. The copy's name is unique in the process (key and a counter), and
    it sits next to the kernels, not in a /tmp that may be mounted noexec.

    Where the folder takes no copy (read-only, full), from memory, else from
    a private folder of the temporary directory (:func:`_dlopen_elsewhere`);
    where it takes the copy but cannot map it (noexec) the same, with one
    :class:`CacheWarning`. OSError where nothing loads ``data``.
    """
    refused = None
    if str(folder) not in _no_copy:
        try:
            tmp = tempfile.mkdtemp(dir=folder, prefix=f"{_TMP}load-")
        except OSError:  # read-only, or no room for a folder: from memory from now on
            _no_copy.add(str(folder))
        else:
            try:
                copy = os.path.join(tmp, f"{key}-{next(_loads)}.so")
                fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW
                             | _O_CLOEXEC | _O_BINARY, 0o700)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                return ctypes.CDLL(copy)
            except OSError as exc:  # no room for the copy; or a noexec mount
                if is_storage_error(exc):
                    _no_copy.add(str(folder))
                else:
                    refused = exc
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    lib, where = _dlopen_elsewhere(key, data)
    if refused is not None:  # the bytes load elsewhere: the folder cannot map code
        _no_copy.add(str(folder))
        warnings.warn(
            f"the kernel cache folder {folder} cannot load compiled code ({refused}; "
            f"a file system mounted noexec?): its kernels are loaded from {where} "
            "instead. To fix: set KERNELTOOLS_CACHE_DIR to a folder on a file system "
            "mounted with exec",
            CacheWarning,
            stacklevel=outside_stacklevel(),
        )
    return lib


def dlopen_file(path: Path) -> ctypes.CDLL:
    """dlopen the file ``path`` (the compiler probe's library), from memory or
    a private folder where its own folder cannot map code (:func:`dlopen_bytes`)."""
    try:
        return ctypes.CDLL(str(path))
    except OSError as exc:
        try:
            with open(path, "rb") as fh:
                return _dlopen_elsewhere("probe", fh.read())[0]
        except OSError:
            raise exc from None


def _dlopen_elsewhere(key: str, data: bytes) -> tuple[ctypes.CDLL, str]:
    """(``data`` loaded from memory, else from this process's private folder
    of the temporary directory, where it came from); OSError if neither can."""
    try:
        return _dlopen_memory(key, data), "memory (a memory file)"
    except OSError as exc:
        in_memory = exc
    try:
        folder = _private_folder()
        copy = os.path.join(folder, f"{key}-{next(_loads)}.so")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_CLOEXEC | _O_BINARY
        fd = os.open(copy, flags, 0o700)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        lib = ctypes.CDLL(copy)
    except OSError as exc:
        raise OSError(exc.errno, f"{exc} (and from memory: {in_memory})") from None
    try:
        os.unlink(copy)  # (Windows: not while it is loaded; removed at exit)
    except OSError:
        pass
    return lib, f"the temporary folder {folder}"


def _private_folder() -> str:
    """This process's folder of loading copies (mkdtemp: 0700), removed at exit."""
    with _lock:
        if not _private:
            folder = tempfile.mkdtemp(prefix="kerneltools-load-")
            owner = os.getpid()
            atexit.register(lambda: os.getpid() == owner
                            and shutil.rmtree(folder, ignore_errors=True))
            _private.append(folder)
    return _private[0]


def _dlopen_memory(key: str, data: bytes) -> ctypes.CDLL:
    """dlopen ``data`` from an anonymous memory file (Linux's ``memfd_create``)
    through ``/proc/self/fd/N``; OSError where there is none.

    The descriptor stays open for the life of the process, as the library
    does: glibc's dlopen first matches the *name* against the libraries
    already loaded, so a number closed and reused would give a later kernel
    the earlier library. One descriptor per kernel loaded this way, only
    where the cache folder cannot take a copy.
    """
    if not hasattr(os, "memfd_create"):
        raise OSError(errno.ENOSYS, "no memfd_create on this platform")
    mfd_exec = 0x10  # MFD_EXEC (Linux 6.3): executable even where memfds default to not
    try:
        fd = os.memfd_create(f"kerneltools-{key}", os.MFD_CLOEXEC | mfd_exec)
    except OSError:
        fd = os.memfd_create(f"kerneltools-{key}", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        lib = ctypes.CDLL(f"/proc/self/fd/{fd}")
    except BaseException:
        os.close(fd)
        raise
    _memfds.append(fd)
    return lib


def load_verified_library(folder: Path, key: str) -> ctypes.CDLL | None:
    """The library ``<key>.so`` of ``folder`` (checked: ``_cache.kernel_folders``)
    if it is ours alone and its bytes have the recorded digest; else None, for
    the caller to rebuild: nothing of an untrusted file runs."""
    data = read_trusted(folder / f"{key}.so")
    digest = read_trusted(folder / f"{key}.sha256", limit=200)
    if data is None or digest is None:
        return None
    if digest.decode("ascii", "replace").strip() != hashlib.sha256(data).hexdigest():
        return None
    try:
        return dlopen_bytes(folder, key, data)
    except OSError:
        return None
