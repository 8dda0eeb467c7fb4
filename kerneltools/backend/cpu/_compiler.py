"""Finding and probing the system C compiler.

The compiler is ``$CC`` if set, else the first of ``cc``, ``gcc``, ``clang``
that compiles and loads a tiny OpenMP shared library. The probe also decides
the flags: OpenMP when it links, ``-march=native`` when accepted, and the
glibc vector math library (``libmvec``) when it links, so that ``exp`` and
``log`` vectorise. ``-ffast-math`` is never used: it would break NaN and inf
propagation and the reductions' semantics; only ``-fno-math-errno`` (pure math
functions, so they can be hoisted and vectorised) and ``-fno-trapping-math``.

The probe (one compiler run with every feature on, else four or five, one
feature at a time; 0.1 s, else 0.2-0.5 s) records its findings in the
kernel cache (``compiler-<hash>.json``, read with the kernels' ownership and
no-link checks), keyed by the compiler's path, ``--version``, the binary's
size and mtime, ``$CC``, the probe itself and the CPU, so a new process with a
warm cache runs only ``--version``. The record holds the findings as booleans,
from which the flags are rebuilt: it cannot smuggle other flags in.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

from ._cache import read_record, write_record
from .._errors import storage_errno

__all__ = ["Compiler", "find_compiler", "probe_count"]

_PROBE = r"""
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
VECMATH_DECL
int kt_probe(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}
double kt_probe_exp(double *x, int n) {
  double s = 0;
  #pragma omp simd reduction(+:s)
  for (int i = 0; i < n; i++) s += exp(x[i]);
  return s;
}
"""

#: ``#pragma omp declare simd`` declarations of the libmvec functions (glibc >= 2.22).
VECMATH_DECL = "\n".join(
    f"#pragma omp declare simd notinbranch\n{t} ({f}{s})({t});"
    for f in ("exp", "log", "sin", "cos")
    for t, s in (("double", ""), ("float", "f"))
)


@dataclass
class Compiler:
    ok: bool
    path: str = ""
    version: str = ""
    flags: list = field(default_factory=list)
    libs: list = field(default_factory=list)
    openmp: bool = False
    vector_math: bool = False
    reason: str = ""

    @property
    def description(self) -> str:
        extras = [x for x, on in (("OpenMP", self.openmp), ("libmvec", self.vector_math)) if on]
        return f"{self.path} ({self.version}){', ' + ', '.join(extras) if extras else ''}"

    @property
    def identity(self) -> str:
        """Part of every kernel's cache key: compiler, version, flags and CPU."""
        cpu = platform.machine() + ":" + _cpu_flags_digest()
        return "|".join([self.path, self.version, " ".join(self.flags + self.libs), cpu])

    def compile(self, source_path: str, output_path: str, *,
                tmpdir: str | None = None) -> subprocess.CompletedProcess:
        """Compile ``source_path`` into the shared library ``output_path``
        (``tmpdir``: the folder for the compiler's own temporary files)."""
        cmd = [self.path, *self.flags, source_path, "-o", output_path, *self.libs]
        env = None if tmpdir is None else {**os.environ, "TMPDIR": tmpdir}
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env,
                              check=False)


@functools.lru_cache(maxsize=None)
def _cpu_flags_digest() -> str:
    """-march=native code is only valid on the same CPU features."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return hashlib.sha256(line.encode()).hexdigest()[:12]
    except OSError:
        pass
    return platform.processor() or "unknown"


def _candidates() -> list[str]:
    env = os.environ.get("CC")
    if env:
        return [env]
    return ["cc", "gcc", "clang"]


_probe_runs = [0]


def probe_count() -> int:
    """How many probe compiles this process ran (tests check the record spares them)."""
    return _probe_runs[0]


def _try(path: str, flags: list, libs: list, source: str, tmp: str) -> tuple[bool, str]:
    _probe_runs[0] += 1
    src = os.path.join(tmp, "probe.c")
    out = os.path.join(tmp, f"probe{abs(hash((tuple(flags), tuple(libs))))}.so")
    with open(src, "w") as fh:
        fh.write(source)
    try:
        proc = subprocess.run(
            [path, *flags, src, "-o", out, *libs], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return False, str(exc)
    if proc.returncode != 0:
        return False, (proc.stderr or proc.stdout).strip()[-500:]
    try:
        lib = ctypes.CDLL(out)
        lib.kt_probe.restype = ctypes.c_int
        lib.kt_probe()
    except OSError as exc:
        return False, str(exc)
    return True, ""


# -ffp-contract=fast: fused multiply-adds (ISO C mode turns them off).
_BASE_FLAGS = ("-O3", "-std=c99", "-fPIC", "-shared", "-fno-math-errno",
               "-fno-trapping-math", "-ffp-contract=fast")
#: What the probe finds out; the flags follow from it (``_flags``).
_FEATURES = ("march_native", "openmp", "openmp_simd", "vector_math")


def _flags(features: dict) -> tuple[list, list]:
    flags = list(_BASE_FLAGS)
    if features["march_native"]:
        flags.append("-march=native")
    if features["openmp"]:
        flags.append("-fopenmp")
    elif features["openmp_simd"]:
        flags.append("-fopenmp-simd")
    return flags, ["-lmvec", "-lm"] if features["vector_math"] else ["-lm"]


def _probe(path: str) -> tuple[dict | None, str]:
    """(the features of the compiler at ``path``, or None and why it is unusable).

    The usual compiler (gcc or clang on x86-64 Linux with glibc) has every
    feature: one compile with all of them settles it. Otherwise
    :func:`_probe_one_by_one` finds the same features in four or five compiles,
    since a compile that works with a set of flags works with any part of it.
    """
    every = {**dict.fromkeys(_FEATURES, False), "march_native": True, "openmp": True,
             "vector_math": _vector_math_platform()}
    decl = VECMATH_DECL if every["vector_math"] else ""
    source = _PROBE.replace("VECMATH_DECL", decl)
    with tempfile.TemporaryDirectory(prefix="kerneltools-probe-") as tmp:
        if _try(path, *_flags(every), source, tmp)[0]:
            return every, ""
    return _probe_one_by_one(path)


def _vector_math_platform() -> bool:
    """Whether libmvec may exist here (glibc on x86-64)."""
    return platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")


def _probe_one_by_one(path: str) -> tuple[dict | None, str]:
    """:func:`_probe` one feature at a time, each on top of those found so far."""
    found = dict.fromkeys(_FEATURES, False)
    with tempfile.TemporaryDirectory(prefix="kerneltools-probe-") as tmp:
        plain = _PROBE.replace("VECMATH_DECL", "")

        def works(source: str = plain, **extra) -> bool:
            flags, libs = _flags({**found, **extra})
            return _try(path, flags, libs, source, tmp)[0]

        ok, why = _try(path, list(_BASE_FLAGS), ["-lm"], plain, tmp)
        if not ok:
            return None, why
        found["march_native"] = works(march_native=True)
        found["openmp"] = works(openmp=True)
        if not found["openmp"]:
            found["openmp_simd"] = works(openmp_simd=True)
        if _vector_math_platform():
            vec_src = _PROBE.replace("VECMATH_DECL", VECMATH_DECL)
            found["vector_math"] = works(vec_src, vector_math=True)
    return found, ""


def _record_key(path: str, version: str) -> str:
    """What the probe's findings depend on, hashed: the compiler binary, $CC,
    the probe's source and flags, the platform and CPU."""
    st = os.stat(path)
    probe = _PROBE + VECMATH_DECL + repr(_BASE_FLAGS)
    parts = [path, os.path.realpath(path), version, str(st.st_size),
             str(st.st_mtime_ns), os.environ.get("CC", ""), probe, platform.system(),
             platform.machine(), _cpu_flags_digest(), "-".join(platform.libc_ver())]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


def _recorded(key: str) -> dict | None:
    """The findings recorded under ``key``, or None (none, foreign, corrupt)."""
    data = read_record(f"compiler-{key}.json")
    try:
        entry = json.loads(data) if data is not None else None
    except ValueError:
        return None
    if not isinstance(entry, dict) or entry.get("key") != key:
        return None
    found = {k: entry.get(k) for k in _FEATURES}
    return found if all(isinstance(v, bool) for v in found.values()) else None


@functools.lru_cache(maxsize=None)
def find_compiler() -> Compiler:
    """Probe once per process (or read the probe's record); a Compiler with
    ok=False says why none works."""
    reasons = []
    hint = (
        "install a C compiler (Debian/Ubuntu: apt-get install gcc; macOS: "
        "xcode-select --install; conda: conda install c-compiler) or set $CC"
    )
    for name in _candidates():
        path = shutil.which(name)
        if path is None:
            reasons.append(f"{name}: not found")
            continue
        try:
            ver = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
            version = (ver.stdout or ver.stderr).splitlines()[0].strip()
            key = _record_key(path, version)
        except (OSError, subprocess.SubprocessError, IndexError) as exc:
            reasons.append(f"{name}: {exc}")
            continue
        found = _recorded(key)
        if found is None:
            try:
                found, why = _probe(path)
            except OSError as exc:  # its files: a full or read-only temporary folder
                found, why = None, exc.strerror or str(exc)
            if found is None and storage_errno(why) is not None:
                tmp = tempfile.gettempdir()
                reasons.append(f"{name}: its probe cannot write in the temporary folder "
                               f"{tmp} ({why[-300:]})")
                hint = (f"free space in {tmp} or set TMPDIR to a folder you can "
                        "write (no probe runs where the kernel cache holds its record)")
                continue
            if found is None:
                reasons.append(f"{name}: cannot build a shared library: {why}")
                continue
            write_record(f"compiler-{key}.json",
                         json.dumps({"key": key, "path": path, **found}).encode())
        flags, libs = _flags(found)
        return Compiler(
            ok=True, path=path, version=version, flags=flags, libs=libs,
            openmp=found["openmp"], vector_math=found["vector_math"],
        )
    return Compiler(ok=False, reason="; ".join(reasons) + f". To fix: {hint}")
