"""Compiled C libraries: :func:`library`, the verified, loaded library of a C source.

Every C library of the CPU backend (the generated reductions, the K-min
tile selection, the radius search) comes from :func:`library`: the source's
key (SHA-256 of the source and of the compiler's identity and flags, so that
a change to a template or a flag can never pick up a library built from other
code) is looked up in this process's memory, then in the kernel cache
(:mod:`._cache`: only a library whose folder, owner and recorded SHA-256 check
out is loaded, :mod:`._dlopen`), else the source is compiled into the cache,
written to a temporary name and renamed, and loaded.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from .._errors import CompileError, is_storage_error, storage_errno
from .._progress import compiling
from ._cache import (
    atomic_write,
    cannot_store,
    kernel_folders,
    store_folder,
    store_library,
)
from ._compiler import Compiler, find_compiler
from ._dlopen import load_verified_library

__all__ = ["KEY", "Library", "library", "compile_count"]

#: Where a source names its own key (``kt_key()`` returns it): replaced by the key.
KEY = "KT_KEY_PLACEHOLDER"

_loaded: dict[str, Library] = {}
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()
_compiles = [0]


@dataclass(frozen=True)
class Library:
    """A loaded library and the key it is cached under."""

    cdll: ctypes.CDLL
    key: str


def compile_count() -> int:
    """How many libraries this process has compiled (tests count recompilations)."""
    return _compiles[0]


def library(source: str, comp: Compiler | None = None) -> Library:
    """The loaded library of the C ``source`` built by ``comp`` (default: the
    backend's compiler, :func:`._compiler.find_compiler`, which may adapt the
    source: :meth:`~._compiler.Compiler.adapt`): from memory, the kernel
    cache, or the compiler. :data:`KEY` in ``source`` becomes the key.

    Raises :class:`CompileError` where the compiler fails, and
    :class:`KernelStoreError` where neither the kernel cache nor a temporary
    folder can store a new library.
    """
    comp = find_compiler() if comp is None else comp
    source = comp.adapt(source)
    key = hashlib.sha256((source + "\n" + comp.identity).encode()).hexdigest()[:40]
    lib = _loaded.get(key)
    if lib is not None:
        return lib
    with _locks_guard:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        lib = _loaded.get(key)
        if lib is None:
            cdll = load_or_build(source.replace(KEY, key), comp, key)
            lib = _loaded[key] = Library(cdll, key)
    return lib


def _carries(lib, key: str) -> bool:
    """Whether ``lib`` says it is the library ``key`` (a sanity check: its bytes
    were verified against the recorded digest before it was loaded)."""
    try:
        lib.kt_key.restype = ctypes.c_char_p
        return lib.kt_key().decode() == key
    except (AttributeError, UnicodeDecodeError):
        return False


def load_or_build(source: str, comp: Compiler, key: str) -> ctypes.CDLL:
    """The library of ``source`` (``key``: its hash with the compiler's
    identity): from the kernel cache, else compiled and stored.

    Missing, foreign, a link or not the recorded bytes: rebuilt, never run.
    A folder that cannot store the new library (full, read-only) gives way to
    the private temporary cache (see ``_cache.py``); :class:`KernelStoreError`
    where that too refuses it.
    """
    for folder in kernel_folders("cpu"):
        lib = load_verified_library(folder, key)
        if lib is not None and _carries(lib, key):
            return lib
    while True:
        folder = store_folder("cpu")  # KernelStoreError where none is left
        try:
            return _build(source, comp, folder, key)
        except OSError as exc:  # full, read-only: the next folder, if any
            if not (is_storage_error(exc) and cannot_store(folder, exc)):
                raise


def _build(source: str, comp: Compiler, folder: Path, key: str) -> ctypes.CDLL:
    """Compile ``source`` into ``folder`` as ``key``; the loaded library.

    The source is kept as ``<key>.c`` (a compile error points to it); the
    compiler writes its output and its own temporary files (``TMPDIR``) in a
    private ``.tmp-build-*`` folder beside it, removed afterwards, so that a
    compile interrupted, or refused by a full disk, leaves no partial file
    under a kernel's name, and a full disk is the store folder's. OSError
    (:func:`is_storage_error`) where the folder cannot store the library.
    """
    src = folder / f"{key}.c"
    atomic_write(src, source.encode())
    work = tempfile.mkdtemp(dir=folder, prefix=".tmp-build-")
    try:
        built = os.path.join(work, f"{key}.so")
        try:
            with compiling(f"the C kernel {key[:12]}"):
                proc = comp.compile(str(src), built, tmpdir=work)
        except subprocess.TimeoutExpired as exc:
            raise CompileError(
                f"the C compiler did not finish the generated kernel {src} in "
                f"{exc.timeout:.0f} s",
                log=str(exc),
                source_path=str(src),
            ) from None
        _compiles[0] += 1
        if proc.returncode != 0:
            log = (proc.stderr or proc.stdout).strip()
            code = storage_errno(log)
            if code is not None:
                raise OSError(
                    code, f"{os.strerror(code)} (the C compiler: {log[-300:]})"
                )
            raise CompileError(
                f"the C compiler failed on the generated kernel {src}:\n{log[-4000:]}",
                log=log,
                source_path=str(src),
            )
        try:
            lib = store_library(folder, key, built)
        except OSError as exc:
            if is_storage_error(exc):
                raise
            lib, why = None, str(exc)
        if lib is None or not _carries(lib, key):
            raise CompileError(
                f"the compiled kernel {folder / key}.so does not load"
                f"{': ' + why if lib is None else ''}",
                source_path=str(src),
            )
        return lib
    finally:
        shutil.rmtree(work, ignore_errors=True)
