"""Warm starts of KernelRidge's CG across refits (``kernel_ridge/_warm.py``).

The warm-start table is process-wide: fits in threads (a grid search under
joblib's threading backend) share an entry, and one fit's new solution was
written while another iterated over the entry's solutions ("OrderedDict
mutated during iteration").
"""

from __future__ import annotations

import numpy as np


def test_krr_warm_start_entry_is_safe_under_concurrent_fits(monkeypatch):
    import sys
    import threading
    import time

    from kerneltools.estimators.kernel_ridge import _warm as _krr_warm

    monkeypatch.setattr(_krr_warm, "MAX_SOLUTIONS", 200)  # longer iterations
    entry, key = {}, ("audit-findings", "thread-safety")
    Y = np.ones((50, 1))
    sol, res = np.ones((50, 1)), np.zeros((50, 1))
    stop, errors = threading.Event(), []

    def fit_solutions():  # what each fit's remember_solution does, repeatedly
        k = 0
        while not stop.is_set():
            _krr_warm.remember_solution(entry, ("y", (0,)), 0.1 + (k % 500) / 100, sol,
                                        res)
            k += 1

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    writer = threading.Thread(target=fit_solutions)
    writer.start()
    try:
        end = time.perf_counter() + 0.5
        while time.perf_counter() < end and not errors:
            try:
                x0, r0 = _krr_warm.warm_start(entry, ("y", (0,)), 0.5, Y)
                _krr_warm.store(key, entry)  # sizes the entry, under the lock
            except RuntimeError as e:  # pragma: no cover - the bug
                errors.append(e)
    finally:
        stop.set()
        writer.join()
        sys.setswitchinterval(interval)
        _krr_warm.clear()
    assert not errors, errors[0]
    assert np.all(np.isfinite(x0)) and np.all(np.isfinite(r0))
