"""One long call measured the way a shared machine needs: wall and process CPU
seconds (all threads), the peak resident memory of the call, and the load
average sampled while it ran.

The peak is the process's ``VmHWM`` after it was reset to the current
resident size just before the call (Linux: ``echo 5 > /proc/self/clear_refs``,
as ``compare.py`` does),
so each of several calls in one process gets its own peak; where that reset
is not available the figure is the process's peak so far (``ru_maxrss``),
said in :attr:`Measured.peak_kind`.
"""

from __future__ import annotations

import os
import resource
import threading
import time
from dataclasses import dataclass, field

from compare import _reset_peak, _status_kb  # the peak reset of compare.py


@dataclass
class Measured:
    """What :func:`measure` saw of one call."""

    wall_s: float
    cpu_s: float
    peak_mb: float
    peak_kind: str
    load: list = field(default_factory=list)
    started: str = ""
    ended: str = ""
    out: object = None

    def load_text(self) -> str:
        """``min-max (mean)`` of the 1-minute load average during the call."""
        if not self.load:
            return "-"
        lo, hi = min(self.load), max(self.load)
        return f"{lo:.1f}-{hi:.1f} (mean {sum(self.load) / len(self.load):.1f})"

    def when(self) -> str:
        return f"{self.started}-{self.ended} UTC"


def _utc() -> str:
    return time.strftime("%H:%M:%S", time.gmtime())


def measure(fn, *, sample_s: float = 15.0, log=None) -> Measured:
    """Call ``fn()`` once; return its :class:`Measured` (``out``: its result).

    ``log``, if given, is called with a line every ``sample_s`` seconds (wall,
    CPU so far, load): progress for calls of an hour.
    """
    load = [os.getloadavg()[0]]
    stop = threading.Event()
    t0, c0 = time.perf_counter(), time.process_time()

    def sample():
        while not stop.wait(sample_s):
            load.append(os.getloadavg()[0])
            if log is not None:
                log(f"  [{_utc()}] {time.perf_counter() - t0:.0f} s wall, "
                    f"{time.process_time() - c0:.0f} CPU s, load {load[-1]:.1f}")

    reset = _reset_peak()
    started = _utc()
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        out = fn()
    finally:
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        stop.set()
        thread.join()
    load.append(os.getloadavg()[0])
    hwm = _status_kb("VmHWM") if reset else None
    if hwm is None:
        peak, kind = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "process"
    else:
        peak, kind = hwm / 1024, "call"
    return Measured(wall, cpu, peak, kind, load, started, _utc(), out)
