"""Finding and probing the C compiler: the system's, else ``zig cc``.

The compiler is the first that compiles and loads a tiny shared library,
among ``$CC`` if set (else ``cc``, ``gcc``, ``clang``), then ``zig cc`` of
the ``ziglang`` package (``pip install "kerneltools[compiler]"``, see
:mod:`._zig`): a machine without a system compiler still runs compiled
kernels. ``KERNELTOOLS_COMPILER=system`` or ``=zig`` tries only those. The
chosen :class:`Compiler` says why the others were not used (``skipped``,
printed by ``python -m kerneltools info``).

The probe also decides the flags: OpenMP when it links (and when no other
family of OpenMP runtime is in the process, :mod:`._openmp`; else the
kernels run on Python threads, :mod:`._threads`), ``-march=native`` when
accepted, and the glibc vector math library (``libmvec``) when it links, so
that ``exp`` and ``log`` vectorise. It finds out too whether ``#pragma omp
declare simd`` may stand before a function *definition* that declares a
local union (clang, zig's included, rejects that C: such a compiler gets the
sources with those pragmas removed, :meth:`Compiler.adapt`; the inlined
functions vectorise the same). ``-ffast-math`` is never used: it would break NaN and inf
propagation and the reductions' semantics; only ``-fno-math-errno`` (pure math
functions, so they can be hoisted and vectorised) and ``-fno-trapping-math``.

The probe (one compiler run with every feature on, else five or six, one
feature at a time; 0.1 s, else 0.5-3 s) records its findings in the
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
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from .._errors import storage_errno
from . import _openmp
from ._cache import read_record, write_record
from ._dlopen import dlopen_file
from ._zig import INSTALL_HINT, zig_binary

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
SIMD_DEFINITION
"""

#: A ``declare simd`` definition that declares a local union, as ``kt_exp.h`` has.
SIMD_DEFINITION = """
#pragma omp declare simd notinbranch
static inline float kt_probe_abs(float x) {
  union { float f; unsigned u; } b;
  b.f = x;
  b.u &= 0x7fffffffu;
  return b.f;
}
float kt_probe_simd(float x) { return kt_probe_abs(x); }
"""
#: The ``declare simd`` pragma before a definition (``static inline``).
_SIMD_BEFORE_DEFINITION = re.compile(
    r"^#pragma omp declare simd[^\n]*\n(?=static inline )", re.M
)

#: ``#pragma omp declare simd`` declarations of the libmvec functions (glibc >= 2.22).
VECMATH_DECL = "\n".join(
    f"#pragma omp declare simd notinbranch\n{t} ({f}{s})({t});"
    for f in ("exp", "log", "sin", "cos")
    for t, s in (("double", ""), ("float", "f"))
)


@dataclass
class Compiler:
    """A working C compiler with its flags (``ok=False``: none; ``reason`` says why)."""

    ok: bool
    path: str = ""
    version: str = ""
    flags: list = field(default_factory=list)
    libs: list = field(default_factory=list)
    openmp: bool = False
    vector_math: bool = False
    reason: str = ""
    #: What is run before the flags: the path, or zig's path and ``cc``.
    command: tuple = ()
    #: Whether ``declare simd`` may stand before a definition (see :meth:`adapt`).
    simd_definitions: bool = True
    #: Why each compiler tried before it, or not tried, is not the one used.
    skipped: tuple = ()
    #: Why OpenMP is not used though it links ("": it is, or it does not link).
    openmp_note: str = ""

    @property
    def argv(self) -> list:
        return list(self.command or (self.path,))

    @property
    def threads(self) -> str:
        """How the kernels use the cores."""
        return "OpenMP" if self.openmp else "Python threads (no OpenMP)"

    @property
    def description(self) -> str:
        extras = [x for x, on in (("OpenMP", self.openmp),
                                  ("libmvec", self.vector_math)) if on]
        name = " ".join(self.argv)
        return f"{name} ({self.version}){', ' + ', '.join(extras) if extras else ''}"

    @property
    def identity(self) -> str:
        """Part of every kernel's cache key: compiler, version, flags and CPU."""
        cpu = platform.machine() + ":" + _cpu_flags_digest()
        flags = " ".join(self.flags + self.libs)
        return "|".join([" ".join(self.argv), self.version, flags, cpu])

    def adapt(self, source: str) -> str:
        """``source`` as this compiler takes it: without the ``declare simd``
        pragmas before definitions where it rejects them (the same code)."""
        if self.simd_definitions:
            return source
        return _SIMD_BEFORE_DEFINITION.sub("", source)

    def without_openmp(self, note: str) -> Compiler:
        """This compiler with ``-fopenmp-simd`` for ``-fopenmp`` (``note``: why)."""
        flags = ["-fopenmp-simd" if f == "-fopenmp" else f for f in self.flags]
        return replace(self, flags=flags, openmp=False, openmp_note=note)

    def compile(self, source_path: str, output_path: str, *,
                tmpdir: str | None = None) -> subprocess.CompletedProcess:
        """Compile ``source_path`` into the shared library ``output_path``
        (``tmpdir``: the folder for the compiler's own temporary files)."""
        cmd = [*self.argv, *self.flags, source_path, "-o", output_path, *self.libs]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                              env=_env(tmpdir), check=False)


def _env(tmpdir: str | None) -> dict | None:
    """The compiler's environment: its temporary files, and zig's cache of
    the build (not its library cache), in ``tmpdir``."""
    if tmpdir is None:
        return None
    return {**os.environ, "TMPDIR": tmpdir, "TEMP": tmpdir, "TMP": tmpdir,
            "ZIG_LOCAL_CACHE_DIR": tmpdir}


@functools.lru_cache(maxsize=None)
def _cpu_flags_digest() -> str:
    """-march=native code is only valid on the same CPU features: Linux's
    flags; elsewhere the CPU's model (macOS' sysctl brand string, Windows'
    PROCESSOR_IDENTIFIER: written for, not tested here)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return hashlib.sha256(line.encode()).hexdigest()[:12]
    except OSError:
        pass
    model = os.environ.get("PROCESSOR_IDENTIFIER", "") if os.name == "nt" else ""
    if sys.platform == "darwin":
        try:
            model = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"],
                                   capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            model = ""
    model = f"{platform.processor()}|{model.strip()}"
    if model == "|":
        return "unknown"
    return hashlib.sha256(model.encode()).hexdigest()[:12]


#: The values of ``KERNELTOOLS_COMPILER``.
CHOICES = ("auto", "system", "zig")


def _candidates() -> tuple[list, list]:
    """([(name, command, version or None)] to try in order, [why others are
    not]); the version of a system compiler comes from running it, later."""
    choice = os.environ.get("KERNELTOOLS_COMPILER", "auto").strip().lower() or "auto"
    if choice not in CHOICES:
        return [], [f"KERNELTOOLS_COMPILER={choice!r} is not one of "
                    f"{', '.join(CHOICES)}"]
    tries, skipped = [], []
    if choice in ("auto", "system"):
        env = os.environ.get("CC")
        for name in [env] if env else ["cc", "gcc", "clang"]:
            path = shutil.which(name)
            if path is None:
                skipped.append(f"{name}: not found")
            else:
                tries.append((name, (path,), None))
    if choice in ("auto", "zig"):
        path, version = zig_binary()
        if path is None:
            skipped.append(f"zig: {version}")
        else:
            tries.append(("zig", (path, "cc"), version))
    else:
        skipped.append("zig: not tried (KERNELTOOLS_COMPILER=system)")
    return tries, skipped


_probe_runs = [0]


def probe_count() -> int:
    """How many probe compiles this process ran (tests check the record spares them)."""
    return _probe_runs[0]


def _try(command: tuple, flags: list, libs: list, source: str,
         tmp: str) -> tuple[bool, str]:
    _probe_runs[0] += 1
    src = os.path.join(tmp, "probe.c")
    out = os.path.join(tmp, f"probe{abs(hash((tuple(flags), tuple(libs), source)))}.so")
    with open(src, "w") as fh:
        fh.write(source)
    try:
        proc = subprocess.run([*command, *flags, src, "-o", out, *libs],
                              capture_output=True, text=True, timeout=300,
                              env=_env(tmp))
    except (OSError, subprocess.SubprocessError) as exc:
        return False, str(exc)
    if proc.returncode != 0:
        return False, (proc.stderr or proc.stdout).strip()[-500:]
    try:  # (from memory where the temporary folder is mounted noexec)
        lib = dlopen_file(Path(out))
        lib.kt_probe.restype = ctypes.c_int
        lib.kt_probe()
    except OSError as exc:
        return False, str(exc)
    return True, ""


# -ffp-contract=fast: fused multiply-adds (ISO C mode turns them off).
_BASE_FLAGS = ("-O3", "-std=c99", "-fPIC", "-shared", "-fno-math-errno",
               "-fno-trapping-math", "-ffp-contract=fast")
#: What the probe finds out; the flags follow from it (``_flags``).
_FEATURES = ("march_native", "openmp", "openmp_simd", "vector_math", "simd_definitions")


def _flags(features: dict) -> tuple[list, list]:
    flags = list(_BASE_FLAGS)
    if features["march_native"]:
        flags.append("-march=native")
    if features["openmp"]:
        flags.append("-fopenmp")
    elif features["openmp_simd"]:
        flags.append("-fopenmp-simd")
    return flags, ["-lmvec", "-lm"] if features["vector_math"] else ["-lm"]


def _source(found: dict) -> str:
    """The probe's source for the features ``found`` (vector math, simd definitions)."""
    vecmath = VECMATH_DECL if found["vector_math"] else ""
    simd = SIMD_DEFINITION if found["simd_definitions"] else ""
    return _PROBE.replace("VECMATH_DECL", vecmath).replace("SIMD_DEFINITION", simd)


def _probe(command: tuple) -> tuple[dict | None, str]:
    """(the features of the compiler run as ``command``, or None and why it
    is unusable).

    The usual compiler (gcc on x86-64 Linux with glibc) has every feature:
    one compile with all of them settles it. Otherwise
    :func:`_probe_one_by_one` finds the same features in five or six
    compiles, since a compile that works with a set of flags works with any
    part of it.
    """
    every = {**dict.fromkeys(_FEATURES, False), "march_native": True, "openmp": True,
             "vector_math": _vector_math_platform(), "simd_definitions": True}
    with tempfile.TemporaryDirectory(prefix="kerneltools-probe-") as tmp:
        if _try(command, *_flags(every), _source(every), tmp)[0]:
            return every, ""
    return _probe_one_by_one(command)


def _vector_math_platform() -> bool:
    """Whether libmvec may exist here (glibc on x86-64)."""
    return platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")


def _probe_one_by_one(command: tuple) -> tuple[dict | None, str]:
    """:func:`_probe` one feature at a time, each on top of those found so far."""
    found = dict.fromkeys(_FEATURES, False)
    with tempfile.TemporaryDirectory(prefix="kerneltools-probe-") as tmp:

        def works(**extra) -> bool:
            flags, libs = _flags({**found, **extra})
            return _try(command, flags, libs, _source({**found, **extra}), tmp)[0]

        ok, why = _try(command, list(_BASE_FLAGS), ["-lm"], _source(found), tmp)
        if not ok:
            return None, why
        found["march_native"] = works(march_native=True)
        found["openmp"] = works(openmp=True)
        if not found["openmp"]:
            found["openmp_simd"] = works(openmp_simd=True)
        if found["openmp"] or found["openmp_simd"]:
            found["simd_definitions"] = works(simd_definitions=True)
        else:  # the pragmas are ignored: nothing to reject
            found["simd_definitions"] = True
        if _vector_math_platform():
            found["vector_math"] = works(vector_math=True)
    return found, ""


def _record_key(command: tuple, version: str) -> str:
    """What the probe's findings depend on, hashed: the compiler binary, $CC,
    the probe's source and flags, the platform and CPU."""
    path = command[0]
    st = os.stat(path)
    probe = _PROBE + VECMATH_DECL + SIMD_DEFINITION + repr(_BASE_FLAGS)
    parts = [" ".join(command), os.path.realpath(path), version, str(st.st_size),
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


_HINT = ("install a C compiler (Debian/Ubuntu: apt-get install gcc; macOS: "
         f"xcode-select --install; conda: conda install c-compiler), or zig cc with "
         f"{INSTALL_HINT}, or set $CC")


def _features(command: tuple, version: str | None) -> tuple[dict | None, str, str]:
    """(the recorded or probed features of a candidate, or None and why not,
    its version); OSError from running it."""
    if version is None:
        ver = subprocess.run([*command, "--version"], capture_output=True, text=True,
                             timeout=30)
        version = (ver.stdout or ver.stderr).splitlines()[0].strip()
    key = _record_key(command, version)
    found = _recorded(key)
    if found is not None:
        return found, "", version
    try:
        found, why = _probe(command)
    except OSError as exc:  # its files: a full or read-only temporary folder
        found, why = None, exc.strerror or str(exc)
    if found is not None:
        write_record(f"compiler-{key}.json",
                     json.dumps({"key": key, "path": command[0], **found}).encode())
    return found, why, version


@functools.lru_cache(maxsize=None)
def find_compiler() -> Compiler:
    """Probe once per process (or read the probe's record); a Compiler with
    ok=False says why none works."""
    tries, reasons = _candidates()
    hint = _HINT
    for name, command, version in tries:
        try:
            found, why, version = _features(command, version)
        except (OSError, subprocess.SubprocessError, IndexError) as exc:
            reasons.append(f"{name}: {exc}")
            continue
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
        flags, libs = _flags(found)
        comp = Compiler(
            ok=True, path=command[0], version=version, flags=flags, libs=libs,
            openmp=found["openmp"], vector_math=found["vector_math"], command=command,
            simd_definitions=found["simd_definitions"], skipped=tuple(reasons),
        )
        note = _openmp.conflict(version) if comp.openmp else None
        return comp if note is None else comp.without_openmp(note)
    return Compiler(ok=False, reason="; ".join(reasons) + f". To fix: {hint}",
                    skipped=tuple(reasons))
