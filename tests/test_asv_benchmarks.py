"""Smoke test of the asv benchmarks (``asv_bench/benchmarks``), so they cannot rot.

Every module is imported and every benchmark class or function is collected
the way asv collects them (public names of the module; methods and functions
named ``time_*``, ``peakmem_*``, ``mem_*``, ``track_*``). Each runs in this
process with the FIRST value of each parameter, which the benchmarks keep
small: ``setup`` once, then every benchmark method once, then ``teardown``.
Nothing is timed or checked beyond "it runs".

A ``NotImplementedError`` raised by ``setup`` is asv's own convention for
"this parameter combination does not apply here" (a missing library, no GPU):
the case is skipped, saying so, as asv would show it as n/a.

BLAS is held to one thread: on a busy 2-core machine OpenBLAS' two threads
can make a 1,000 x 1,000 Cholesky 100 times slower, and only "it runs" is
tested here.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
from pathlib import Path

import pytest

BENCH_ROOT = Path(__file__).resolve().parents[1] / "asv_bench"
#: asv's name patterns (asv_runner.benchmarks.*.name_regex), timeraw_ excepted.
BENCHMARK_NAME = re.compile(
    r"^((Time|Mem|PeakMem|Track)[A-Z_].+|(time|mem|peakmem|track)_.+)$"
)
TIMERAW_NAME = re.compile(r"^(Timeraw[A-Z_].+|timeraw_.+)$")


def _import_package():
    """``benchmarks`` from asv_bench/ (as asv and compare.py import it)."""
    if str(BENCH_ROOT) not in sys.path:
        sys.path.insert(0, str(BENCH_ROOT))
    package = importlib.import_module("benchmarks")
    where = Path(package.__file__).resolve().parent
    assert where == BENCH_ROOT / "benchmarks", f"another 'benchmarks' package: {where}"
    return package


def _modules():
    package = _import_package()
    names = [m.name for m in pkgutil.iter_modules(package.__path__)]
    return [importlib.import_module(f"benchmarks.{name}") for name in sorted(names)]


def _collect():
    """(id, module, class or None, function names): what asv would run."""
    found = []
    for module in _modules():
        short = module.__name__.split(".", 1)[1]
        for name, obj in vars(module).items():
            if name.startswith("_"):
                continue
            if inspect.isclass(obj) and not inspect.isabstract(obj):
                methods = sorted(
                    m
                    for m, f in inspect.getmembers(obj)
                    if inspect.isfunction(f) and BENCHMARK_NAME.match(m)
                )
                timeraw = [m for m in dir(obj) if TIMERAW_NAME.match(m)]
                assert not timeraw, f"{short}.{name}: timeraw_ is not smoke-tested"
                if methods:
                    found.append((f"{short}.{name}", module, obj, methods))
            elif inspect.isfunction(obj) and BENCHMARK_NAME.match(name):
                found.append((f"{short}.{name}", module, None, [name]))
    return found


CASES = _collect()


def _first_params(source) -> list:
    """The first value of each parameter (asv: one list, or a list of lists)."""
    params = getattr(source, "params", [])
    if not params:
        return []
    if not isinstance(params[0], (list, tuple)):
        params = [params]
    names = list(getattr(source, "param_names", []))
    assert len(names) == len(params), f"{len(names)} param_names, {len(params)} params"
    return [values[0] for values in params]


def test_every_module_has_benchmarks():
    modules = {case[1].__name__ for case in CASES}
    expected = {
        "benchmarks.reductions",
        "benchmarks.neighbors",
        "benchmarks.kernel_ridge",
        "benchmarks.gaussian_process",
        "benchmarks.nystroem",
        "benchmarks.optimal_transport",
    }
    assert expected <= modules


def _first_attr(sources, name):
    """asv's lookup: the first of ``sources`` (function, instance, module) with it."""
    for source in sources:
        if hasattr(source, name):
            return getattr(source, name)
    return None


@pytest.mark.parametrize(
    ("module", "target", "methods"),
    [pytest.param(m, t, f, id=i) for i, m, t, f in CASES],
)
def test_benchmark_runs_once(module, target, methods):
    from threadpoolctl import threadpool_limits

    if target is None:
        function = getattr(module, methods[0])
        sources, calls = [function, module], [function]
    else:
        instance = target()
        sources = [instance, module]
        calls = [getattr(instance, name) for name in methods]
    args = _first_params(sources[0])
    with threadpool_limits(limits=1, user_api="blas"):
        setup_cache = _first_attr(sources, "setup_cache")
        if setup_cache is not None:
            args = [setup_cache(), *args]
        setup = _first_attr(sources, "setup")
        if setup is not None:
            try:
                setup(*args)
            except NotImplementedError as exc:
                pytest.skip(f"skipped by the benchmark itself (asv n/a): {exc}")
        try:
            for call in calls:
                call(*args)
        finally:
            teardown = _first_attr(sources, "teardown")
            if teardown is not None:
                teardown(*args)
