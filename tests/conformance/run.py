"""Run scikit-learn's own tests, unchanged, under kerneltools.accel; count and group.

    python tests/conformance/run.py [--json out.json] [--plain] [pytest args ...]

Runs the installed scikit-learn's test modules for the estimators kerneltools
replaces (``MODULES``) with ``plugin.py`` (accel installed before collection,
``EXCLUDED.md`` deselected), then prints: the tests that build one of our
estimators, how many pass and fail, and the failures grouped by cause.
``--plain`` runs the same tests without accel (scikit-learn's own classes),
the control. Extra arguments go to pytest (e.g. ``-k kneighbors``, ``-x``,
``-n 2``: pytest-xdist's workers each record their tests, merged here).
Exit status: 0 when every test that builds one of ours passes.
"""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

MODULES = [
    "sklearn.tests.test_kernel_ridge",
    "sklearn.gaussian_process.tests.test_gpr",
    "sklearn.neighbors.tests.test_neighbors",
    "sklearn.neighbors.tests.test_neighbors_pipeline",
    "sklearn.neighbors.tests.test_graph",
    "sklearn.tests.test_kernel_approximation",
    "sklearn.decomposition.tests.test_kernel_pca",
    "sklearn.cluster.tests.test_spectral",
    "sklearn.manifold.tests.test_spectral_embedding",
    "sklearn.neighbors.tests.test_kde",
    "sklearn.neighbors.tests.test_lof",
    "sklearn.cluster.tests.test_mean_shift",
    "sklearn.svm.tests.test_svm",
    "sklearn.svm.tests.test_sparse",
    "sklearn.svm.tests.test_bounds",
    "sklearn.cluster.tests.test_dbscan",
    "sklearn.impute.tests.test_knn",
    "sklearn.impute.tests.test_common",
    "sklearn.cluster.tests.test_hdbscan",
    "sklearn.semi_supervised.tests.test_label_propagation",
    "sklearn.gaussian_process.tests.test_gpc",
]

#: Known causes: (label, regular expression on "ExceptionType: message"), first match.
CAUSES = [
    ("precomputed kernel or metric refused", r"Got 'precomputed'"),
    ("metric refused by the k-NN estimators (DistanceMetric object, callable or name)",
     r"The 'metric' parameter"),
    ("sparse input refused", r"Sparse data was passed"),
    ("GP kernel the translator does not know (user Kernel subclass)",
     r"cannot translate the Gaussian-process kernel"),
    ("callable kernel of two 1-D arrays given LazyTensors (Nystroem)",
     r"__array_ufunc__=None|K @ b needs a scalar formula"),
    ("fitted estimator or tree as X", r"float\(\) argument must be .* not '\w+'"),
    ("array of radii refused", r"radius must be a float"),
    ("n_neighbors > n_samples_fit raised where scikit-learn does not",
     r"Expected n_neighbors <= n_samples_fit"),
    ("private _fit_method differs", r"assert '(brute|kd_tree|ball_tree)' == "),
    ("error scikit-learn raises for a tree limit not raised", r"DID NOT RAISE"),
    ("different numbers", r"Not equal to tolerance|Arrays are not (almost )?equal|"
     r"Mismatched elements"),
    ("expected warning not raised", r"DID NOT WARN|No warnings of type"),
]


def cause_of(message: str) -> str:
    first = message.strip().splitlines()[0] if message.strip() else "(no message)"
    for label, pattern in CAUSES:
        if re.search(pattern, message):
            return label
    # unknown: the message with numbers and quoted values folded
    first = re.sub(r"'[^']*'|\"[^\"]*\"", "'...'", first)
    return "other: " + re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", first)[:120]


def run(pytest_args: list[str], plain: bool, report: Path) -> int:
    import sklearn

    site = Path(sklearn.__file__).resolve().parents[1]
    cmd = [sys.executable, "-m", "pytest", "-c", str(HERE / "pytest.ini"),
           "--rootdir", str(site), "-q", "-p", "no:randomly", "--pyargs", *MODULES,
           *pytest_args]
    if not plain:
        cmd[3:3] = ["-p", "plugin", "--accel-report", str(report)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])]))
    # scikit-learn's Array API tests (Nystroem's) skip unless SciPy is told
    # before import to accept Array API inputs
    env.setdefault("SCIPY_ARRAY_API", "1")
    return subprocess.call(cmd, env=env, cwd=str(site))


def summarize(records: dict[str, dict], out=sys.stdout) -> bool:
    n_excluded = sum(v["outcome"] == "excluded" for v in records.values())
    ran = {k: v for k, v in records.items() if v["outcome"] != "excluded"}
    ours = {k: v for k, v in ran.items() if v.get("ours")}
    counts = collections.Counter(v["outcome"] for v in ours.values())
    print(f"\n{len(ran)} tests ran ({n_excluded} excluded by EXCLUDED.md); "
          f"{len(ours)} build a kerneltools estimator: "
          f"{counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['xfailed']} xfailed, {counts['skipped']} skipped", file=out)
    others = collections.Counter(v["outcome"] for k, v in ran.items() if k not in ours)
    print(f"the other {sum(others.values())} (scikit-learn's classes only): "
          f"{dict(others)}", file=out)
    groups = collections.defaultdict(list)
    for nodeid, rec in ours.items():
        if rec["outcome"] == "failed":
            groups[cause_of(rec["message"])].append(nodeid)
    print("\nfailures by cause:", file=out)
    for cause, ids in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        print(f"  {len(ids):4d}  {cause}", file=out)
        for nodeid in sorted(ids)[:3]:
            print(f"          e.g. {nodeid}", file=out)
    return counts["failed"] == 0


def _read_reports(report: Path) -> dict | None:
    """The records of ``report``, or, under pytest-xdist (``-n``), of its
    workers' files ``<report>.gw0``, ... merged (and written to ``report``);
    None where none was written."""
    if report.exists():
        return json.loads(report.read_text())
    parts = sorted(report.parent.glob(report.name + ".gw*"))
    if not parts:
        return None
    records = {}
    for part in parts:
        for nodeid, rec in json.loads(part.read_text()).items():
            if records.get(nodeid, {}).get("outcome") not in (None, "excluded"):
                continue  # (every worker records the deselected tests)
            records[nodeid] = rec
        part.unlink()
    report.write_text(json.dumps(records, indent=1, sort_keys=True))
    return records


def main(argv: list[str]) -> int:
    plain = "--plain" in argv
    argv = [a for a in argv if a != "--plain"]
    json_out = None
    if "--json" in argv:
        i = argv.index("--json")
        json_out = Path(argv[i + 1]).resolve()
        del argv[i:i + 2]
    with tempfile.TemporaryDirectory() as tmp:
        report = json_out or Path(tmp) / "report.json"
        for stale in (report, *report.parent.glob(report.name + ".gw*")):
            stale.unlink(missing_ok=True)
        rc = run(argv, plain, report)
        if plain:
            return rc
        records = _read_reports(report)
        if records is None:
            print(f"no report written (pytest exit status {rc})", file=sys.stderr)
            return rc or 1
        ok = summarize(records)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
