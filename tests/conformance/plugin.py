"""pytest plugin of the conformance run: scikit-learn's tests under kerneltools.accel.

Loaded with ``-p plugin`` (``run.py`` does it), before any conftest, so that
:func:`kerneltools.accel.install` is in effect when scikit-learn's test
modules are imported. It records, per test, the outcome, the crash message
and whether the test built one of kerneltools' estimators (an instance made
while it ran, or one among its parameters), and writes them as JSON to
``--accel-report`` (under pytest-xdist, one file per worker). Tests listed
in ``EXCLUDED.md`` are deselected.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest

import kerneltools.accel as accel

EXCLUDED_FILE = Path(__file__).with_name("EXCLUDED.md")

_built: dict[str, bool] = {}
_current: list[str] = []
_records: dict[str, dict] = {}


def excluded() -> dict[str, str]:
    """The reviewed exclusions: node id (or id prefix before ``[``) -> reason."""
    out = {}
    for line in EXCLUDED_FILE.read_text().splitlines():
        m = re.match(r"^- `([^`]+)`\s*[:—-]+\s*(.+)$", line.strip())
        if m:
            out[m.group(1)] = m.group(2)
    return out


def _is_excluded(nodeid: str, table: dict[str, str]) -> bool:
    return nodeid in table or nodeid.split("[")[0] in table


def _track_construction() -> None:
    """Flag the running test when one of our estimators is constructed."""
    for cls in set(accel.replacements.values()):
        if "__new__" in vars(cls):
            continue

        def __new__(klass, *args, **kwargs):
            if _current:
                _built[_current[-1]] = True
            return object.__new__(klass)

        # inspect.signature(cls) reads a user-defined __new__ first: give it the
        # class's own (scikit-learn's checks inspect the constructor)
        sig = inspect.signature(cls)
        __new__.__signature__ = sig.replace(parameters=[
            inspect.Parameter("klass", inspect.Parameter.POSITIONAL_ONLY),
            *sig.parameters.values()])
        cls.__new__ = staticmethod(__new__)


def pytest_addoption(parser):
    parser.addoption("--accel-report", default=None,
                     help="write each test's outcome and cause as JSON here")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    accel.install()
    _track_construction()


def pytest_collection_modifyitems(session, config, items):
    table = excluded()
    keep, drop = [], []
    for item in items:
        (drop if _is_excluded(item.nodeid, table) else keep).append(item)
    for item in drop:
        _records[item.nodeid] = {"outcome": "excluded", "ours": None, "message": ""}
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _uses_ours(item) -> bool:
    ours = tuple(set(accel.replacements.values()))
    params = getattr(getattr(item, "callspec", None), "params", {})
    for value in params.values():
        if isinstance(value, ours) or (isinstance(value, type) and issubclass(value, ours)):
            return True
    return False


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _current.append(item.nodeid)
    _built[item.nodeid] = _uses_ours(item)
    try:
        yield
    finally:
        _current.pop()
        if item.nodeid in _records:
            _records[item.nodeid]["ours"] = _built[item.nodeid]


def pytest_runtest_logreport(report):
    rec = _records.setdefault(report.nodeid, {"outcome": "passed", "message": ""})
    rec.setdefault("ours", _built.get(report.nodeid, False))
    if report.failed and rec["outcome"] != "failed":
        rec["outcome"] = "failed"
        crash = getattr(report.longrepr, "reprcrash", None)
        rec["message"] = crash.message if crash is not None else str(report.longrepr)[-800:]
        rec["where"] = f"{crash.path}:{crash.lineno}" if crash is not None else ""
        rec["when"] = report.when
    elif report.skipped and rec["outcome"] == "passed":
        rec["outcome"] = "xfailed" if hasattr(report, "wasxfail") else "skipped"


def pytest_sessionfinish(session, exitstatus):
    """Write the records. Under pytest-xdist (``-n 2``) each worker ran its
    tests and recorded them itself (which of ours were built is known only
    there): it writes ``<report>.<worker id>``, which ``run.py`` merges; the
    controller writes nothing."""
    config = session.config
    path = config.getoption("--accel-report")
    worker = getattr(config, "workerinput", {}).get("workerid")
    if not path or (worker is None and config.pluginmanager.hasplugin("dsession")):
        return
    target = Path(f"{path}.{worker}" if worker else path)
    target.write_text(json.dumps(_records, indent=1, sort_keys=True))


def pytest_unconfigure(config):
    accel.uninstall()
