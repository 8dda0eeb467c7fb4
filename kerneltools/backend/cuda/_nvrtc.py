"""NVRTC without a GPU: the compile-only check of the generated CUDA.

NVRTC is loaded through ctypes (libnvrtc only: no GPU and no driver), for
``python -m kerneltools check --backend cuda --compile-only``; the options
are those that CuPy gets when the backend compiles on a GPU.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import re
import sys
from dataclasses import dataclass

__all__ = ["NVRTC_OPTIONS", "nvrtc", "nvrtc_compile", "log_warnings", "numbered",
           "CheckResult"]

#: Options passed to NVRTC, by CuPy on a GPU and by the compile-only check.
#: Warning 177 ("declared but never referenced") is expected: the renderer
#: writes every component of a vector even where only some are read, and the
#: compiler drops the others.
NVRTC_OPTIONS = ("-std=c++17", "--diag-suppress=177")


def numbered(source: str) -> str:
    """The source with line numbers, for error messages."""
    return "\n".join(f"{k:5d}  {line}" for k, line in enumerate(source.splitlines(), 1))


class _Nvrtc:
    """NVRTC through ctypes: needs libnvrtc only, no GPU and no driver."""

    def __init__(self):
        self.lib, self.path = self._load()
        for name in ("nvrtcGetErrorString",):
            getattr(self.lib, name).restype = ctypes.c_char_p

    @staticmethod
    def _candidates():
        for base in sys.path:
            for pattern in ("nvidia/cu13/lib/libnvrtc.so.*", "nvidia/cu12/lib/libnvrtc.so.*",
                            "nvidia/cuda_nvrtc/lib/libnvrtc.so.*"):
                yield from sorted(glob.glob(os.path.join(base, pattern)))
        for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                     "/usr/local/cuda"):
            if root:
                yield from sorted(glob.glob(os.path.join(root, "lib64", "libnvrtc.so*")))
        yield "libnvrtc.so"

    def _load(self):
        errors = []
        for path in self._candidates():
            if ".alt." in path or "builtins" in path:
                continue
            try:
                # Some wheels lack an RPATH to their builtins library: load it first.
                folder = os.path.dirname(path)
                for builtins in sorted(glob.glob(os.path.join(folder, "libnvrtc-builtins.so.*"))):
                    if ".alt." not in builtins:
                        ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
                return ctypes.CDLL(path), path
            except OSError as exc:
                errors.append(f"{path}: {exc}")
        raise OSError("NVRTC (libnvrtc) not found; pip install nvidia-cuda-nvrtc. "
                      + "; ".join(errors[-3:]))

    def version(self) -> tuple[int, int]:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
        return major.value, minor.value

    def compile(self, source: str, options, name: str = "kt_kernel.cu"):
        """(ok, log, binary): binary is the cubin (sm_XX) or PTX (compute_XX)."""
        lib = self.lib
        prog = ctypes.c_void_p()
        rc = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(),
                                    0, None, None)
        if rc:
            raise RuntimeError(f"nvrtcCreateProgram failed: {lib.nvrtcGetErrorString(rc)}")
        try:
            opts = [o.encode() for o in options]
            argv = (ctypes.c_char_p * len(opts))(*opts)
            rc = lib.nvrtcCompileProgram(prog, len(opts), argv)
            size = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            buf = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetProgramLog(prog, buf)
            log = buf.value.decode(errors="replace")
            if rc:
                return False, f"{lib.nvrtcGetErrorString(rc).decode()}\n{log}", b""
            cubin = any(o.startswith("-arch=sm_") or o.startswith("--gpu-architecture=sm_")
                        for o in options)
            get_size, get = (("nvrtcGetCUBINSize", "nvrtcGetCUBIN") if cubin
                             else ("nvrtcGetPTXSize", "nvrtcGetPTX"))
            getattr(lib, get_size)(prog, ctypes.byref(size))
            out = ctypes.create_string_buffer(size.value)
            getattr(lib, get)(prog, out)
            return True, log, out.raw
        finally:
            lib.nvrtcDestroyProgram(ctypes.byref(prog))


@functools.lru_cache(maxsize=None)
def nvrtc() -> _Nvrtc:
    return _Nvrtc()


@dataclass
class CheckResult:
    arch: str
    ok: bool
    log: str
    registers: int | None
    spill_stores: int | None
    spill_loads: int | None
    smem_static: int | None


def nvrtc_compile(source: str, arch: str = "sm_90") -> CheckResult:
    """Compile ``source`` as the backend does (plus ``-Xptxas -v``) for ``arch``."""
    ok, log, _ = nvrtc().compile(
        source, (*NVRTC_OPTIONS, f"-arch={arch}", "--ptxas-options=-v")
    )

    def grab(pattern):
        m = re.search(pattern, log)
        return int(m.group(1)) if m else None

    return CheckResult(
        arch=arch, ok=ok, log=log,
        registers=grab(r"Used (\d+) registers"),
        spill_stores=grab(r"(\d+) bytes spill stores"),
        spill_loads=grab(r"(\d+) bytes spill loads"),
        smem_static=grab(r"(\d+) bytes smem"),
    )


def log_warnings(log: str) -> list[str]:
    """The compiler's warnings in a log (NVRTC reports them on success too)."""
    return [line for line in log.splitlines() if re.search(r"\bwarning\b", line, re.I)]
