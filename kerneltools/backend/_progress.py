"""Progress of long work, and interruptible chunks.

A long reduction runs as a sequence of chunks of output rows (or of output
blocks), each about :data:`CHUNK_SECONDS` long: between chunks Python runs its
signal handlers, so Ctrl-C stops a reduction within a fraction of a second, and
the time of the first chunks estimates the whole. Results do not depend on the
chunks: output rows are independent.

Messages go to the ``kerneltools`` logger at INFO level. While nothing is
configured for it (no handler on it or its ancestors, no level set), they are
written to standard error, so that a long silent wait never surprises a user;
``logging.getLogger("kerneltools").setLevel(logging.WARNING)`` silences them.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from typing import Iterator

__all__ = ["logger", "notice", "slow_notice", "compiling", "chunks", "Estimate", "LONG_SECONDS"]

logger = logging.getLogger("kerneltools")

#: A first compile still running after this many seconds says so.
COMPILE_NOTICE_SECONDS = 2.0
#: A reduction estimated above this many seconds says so once.
LONG_SECONDS = 10.0
#: The wall time of one chunk: the longest a Ctrl-C waits for.
CHUNK_SECONDS = 0.2
#: Work below this many pair-components runs in one call (no chunking).
CHUNK_WORK = 1 << 26
#: The estimate of a long reduction is made once this many seconds have run.
ESTIMATE_AFTER = 0.5


def notice(message: str) -> None:
    """Log ``message`` at INFO; to standard error if logging is not set up."""
    if logger.level == logging.NOTSET and not logger.hasHandlers():
        print(f"kerneltools: {message}", file=sys.stderr, flush=True)
    else:
        logger.info(message)


@contextlib.contextmanager
def slow_notice(after: float, message: str):
    """Say ``message`` if the block is still running after ``after`` seconds,
    and how long it took when it ends."""
    start = time.perf_counter()
    said = threading.Event()

    def say():
        said.set()
        notice(message)

    timer = threading.Timer(after, say)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        if said.is_set():
            notice(f"done in {time.perf_counter() - start:.1f} s")


def compiling(what: str):
    """:func:`slow_notice` for a compile of ``what`` (once per formula)."""
    return slow_notice(COMPILE_NOTICE_SECONDS,
                       f"compiling {what} (first use of this formula; "
                       "the kernel cache keeps it for later runs)...")


class Estimate:
    """Says once, when the part done so far predicts more than
    :data:`LONG_SECONDS` in all, how long ``what`` will take."""

    def __init__(self, what: str, total: int):
        self.what, self.total, self.told = what, total, False
        self.start = time.perf_counter()

    def update(self, done: int) -> None:
        if self.told or not 0 < done < self.total:
            return
        elapsed = time.perf_counter() - self.start
        if elapsed >= ESTIMATE_AFTER and elapsed * self.total / done > LONG_SECONDS:
            notice(f"{self.what}: about {elapsed * self.total / done:.0f} s in all "
                   f"({100 * done / self.total:.0f}% done after {elapsed:.1f} s)")
            self.told = True


def chunks(n: int, work_per_item: int, *, what: str, align: int = 1,
           min_items: int = 1) -> Iterator[tuple[int, int]]:
    """Ranges ``[a, b)`` covering ``range(n)``, each about ``CHUNK_SECONDS``.

    ``work_per_item`` (pairs times formula width, say) sizes the first chunk;
    later ones adapt to the measured time of the previous. Once the elapsed
    time predicts more than :data:`LONG_SECONDS` in all, says so once
    (``what`` names the work). ``align`` rounds chunk sizes (kernel blocks).
    """
    work_per_item = max(1, int(work_per_item))
    if n * work_per_item <= CHUNK_WORK:
        yield 0, n
        return
    size = max(min_items, CHUNK_WORK // (8 * work_per_item))
    estimate = Estimate(what, n)
    a = 0
    while a < n:
        size = max(align, size // align * align)
        b = min(n, a + size)
        t0 = time.perf_counter()
        yield a, b
        dt = time.perf_counter() - t0
        a = b
        estimate.update(a)
        # the next chunk lasts about CHUNK_SECONDS; grow by at most 4x a step
        scale = CHUNK_SECONDS / dt if dt > 0 else 4.0
        size = max(min_items, int(size * min(4.0, scale)))
