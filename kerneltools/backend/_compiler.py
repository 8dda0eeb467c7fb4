"""Finding and probing the system C compiler.

The compiler is ``$CC`` if set, else the first of ``cc``, ``gcc``, ``clang``
that compiles and loads a tiny OpenMP shared library. The probe also decides
the flags: OpenMP when it links, ``-march=native`` when accepted, and the
glibc vector math library (``libmvec``) when it links, so that ``exp`` and
``log`` vectorise. ``-ffast-math`` is never used: it would break NaN and inf
propagation and the reductions' semantics; only ``-fno-math-errno`` (pure math
functions, so they can be hoisted and vectorised) and ``-fno-trapping-math``.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

__all__ = ["Compiler", "find_compiler"]

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

    def compile(self, source_path: str, output_path: str) -> subprocess.CompletedProcess:
        cmd = [self.path, *self.flags, source_path, "-o", output_path, *self.libs]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


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


def _try(path: str, flags: list, libs: list, source: str, tmp: str) -> tuple[bool, str]:
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


@functools.lru_cache(maxsize=None)
def find_compiler() -> Compiler:
    """Probe once per process; a Compiler with ok=False says why none works."""
    reasons = []
    for name in _candidates():
        path = shutil.which(name)
        if path is None:
            reasons.append(f"{name}: not found")
            continue
        try:
            ver = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
            version = (ver.stdout or ver.stderr).splitlines()[0].strip()
        except (OSError, subprocess.SubprocessError, IndexError) as exc:
            reasons.append(f"{name}: {exc}")
            continue
        # -ffp-contract=fast: fused multiply-adds (ISO C mode turns them off).
        base = ["-O3", "-std=c99", "-fPIC", "-shared", "-fno-math-errno",
                "-fno-trapping-math", "-ffp-contract=fast"]
        with tempfile.TemporaryDirectory(prefix="kerneltools-probe-") as tmp:
            plain = _PROBE.replace("VECMATH_DECL", "")
            ok, why = _try(path, base, ["-lm"], plain, tmp)
            if not ok:
                reasons.append(f"{name}: cannot build a shared library: {why}")
                continue
            flags, libs = list(base), ["-lm"]
            if _try(path, flags + ["-march=native"], libs, plain, tmp)[0]:
                flags.append("-march=native")
            openmp = _try(path, flags + ["-fopenmp"], libs, plain, tmp)[0]
            if openmp:
                flags.append("-fopenmp")
            else:
                flags.append("-fopenmp-simd") if _try(
                    path, flags + ["-fopenmp-simd"], libs, plain, tmp
                )[0] else None
            vecmath = False
            if platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64"):
                vec_src = _PROBE.replace("VECMATH_DECL", VECMATH_DECL)
                vecmath = _try(path, flags, ["-lmvec", "-lm"], vec_src, tmp)[0]
                if vecmath:
                    libs = ["-lmvec", "-lm"]
        return Compiler(
            ok=True, path=path, version=version, flags=flags, libs=libs,
            openmp=openmp, vector_math=vecmath,
        )
    hint = (
        "install a C compiler (Debian/Ubuntu: apt-get install gcc; macOS: "
        "xcode-select --install; conda: conda install c-compiler) or set $CC"
    )
    return Compiler(ok=False, reason="; ".join(reasons) + f". To fix: {hint}")
