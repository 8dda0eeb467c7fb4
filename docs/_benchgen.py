"""Write the benchmarks pages from the results files of ``asv_bench/``.

Run by ``conf.py`` before every build. Each ``asv_bench/*_results.md`` (and
``RESULTS.md``, the engine's tables) becomes one page under
``docs/benchmarks/``: the file as it is, headed by where it comes from, the
machine and the date it names (and the date of its last commit), and a chart
of the first table that has a ratio column (the column's own header says
which way the ratio goes). The index lists every page with its machine and
date. Nothing here measures anything: the numbers are the files'.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: Words that name a machine in a results file's prose.
MACHINES = [
    re.compile(r"[^.\n(]*(?:Xeon|EPYC|H100|H200)[^.\n)]*"),
    re.compile(r"[^.\n()`]*(?:\d-core|\d+ cores?)[^.\n()`]*", re.IGNORECASE),
]
DATE = re.compile(
    r"\b(20\d\d-\d\d-\d\d|(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z]{2} +\d{1,2} "
    r"(?:[0-9:]+ (?:UTC )?)?20\d\d)\b"
)
#: A table header cell holding a ratio.
RATIO = re.compile(r"ratio|vs |/ ?k(?:erneltools|t)\b|/ after|zig / gcc", re.I)
#: Columns that name a row by its size rather than measure it.
SIZE_COLUMNS = {"n", "N", "D", "K", "M", "Q", "E", "N=M", "h"}
#: A cell that is a measurement: a number with its unit (and a remark).
MEASURE = re.compile(
    r"\**[-+~]?[\d.,]+(?:e[-+]?\d+)?(?:\s*[-/]\s*[\d.,]+)*\s*(?:x|%|ms|s|MB|GB)?\**"
    r"(?:\s*\(.*\))?",
    re.IGNORECASE,
)
NUMBER = re.compile(r"-?\d[\d,]*\.?\d*(?:e[-+]?\d+)?")


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]


@dataclass
class Results:
    source: Path
    title: str
    machine: str
    date: str
    committed: str
    text: str


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def tables(text: str) -> list[Table]:
    """The Markdown tables of ``text``, header and rows split into cells."""
    out, lines = [], text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.startswith("|") and re.match(r"^\|[\s:|-]+\|$", lines[i + 1].strip()):
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append(_cells(row))
            out.append(Table(_cells(line), rows))
    return out


def _number(cell: str) -> float | None:
    match = NUMBER.search(cell.replace("**", ""))
    if match is None:
        return None
    try:
        return float(match.group().replace(",", ""))
    except ValueError:
        return None


def ratio_series(text: str) -> tuple[str, list[tuple[str, float]]] | None:
    """(column header, [(row label, value)]) of the first ratio column."""
    for table in tables(text):
        columns = [j for j, h in enumerate(table.header) if RATIO.search(h)]
        if not columns:
            continue
        j = columns[0]
        series = []
        for row in table.rows:
            if len(row) <= j:
                continue
            value = _number(row[j])
            if value is None or value <= 0:
                continue
            # The row's name: its words and sizes, not its other measurements.
            label = ", ".join(row[k] for k in range(j) if row[k] and (
                table.header[k].strip() in SIZE_COLUMNS or not MEASURE.fullmatch(
                    row[k].strip())))
            series.append((re.sub(r"[`*]", "", label)[:60], value))
        if len(series) >= 2:
            return table.header[j], series[:24]
    return None


def _committed(path: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "log", "-1", "--format=%ad", "--date=short", "--", path.name],
            cwd=path.parent, capture_output=True, text=True, check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        out = ""
    return out or "not committed"


def read(path: Path) -> Results:
    text = path.read_text(encoding="utf-8")
    heading = re.search(r"^#+ +(.+)$", text, re.M)
    machine = next((m for m in (p.search(text) for p in MACHINES) if m), None)
    date = DATE.search(text)
    return Results(
        source=path,
        title=heading.group(1).strip() if heading else path.stem,
        machine=" ".join(machine.group().split()).strip(" (,;:") if machine else
        "not named in the file",
        date=date.group(1) if date else "not named in the file",
        committed=_committed(path),
        text=text,
    )


def chart(series: tuple[str, list[tuple[str, float]]], path: Path, title: str) -> None:
    """A horizontal bar chart of the ratios, log scale, a line at 1."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    header, rows = series
    fig, ax = plt.subplots(figsize=(7.5, 0.9 + 0.28 * len(rows)))
    labels = [label for label, _ in rows]
    values = [value for _, value in rows]
    ax.barh(range(len(rows)), values, color=["#1f77b4" if v >= 1 else "#d62728"
                                             for v in values])
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel(f"{header} (log scale; the line is 1)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def page(results: Results, image: str | None) -> str:
    rel = f"asv_bench/{results.source.name}"
    head = [
        f"<!-- generated by docs/_benchgen.py from {rel}: edit that file -->",
        f"# {results.title}\n",
        f"- Source: `{rel}` (last committed {results.committed})",
        f"- Machine: {results.machine}",
        f"- Date named in the file: {results.date}\n",
    ]
    if image:
        head.append(f"![Ratios of the first table with a ratio column]({image})\n")
    body = re.sub(r"^#+ +.+\n", "", results.text, count=1)  # the title is above
    body = re.sub(r"^(#+)", lambda m: "#" + m.group(1), body, flags=re.M)
    return "\n".join(head) + "\n" + body


def write(bench: Path, out: Path) -> list[Results]:
    """Write one page per results file and the index into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    files = sorted(bench.glob("*_results.md")) + [bench / "RESULTS.md"]
    found = []
    for path in files:
        if not path.exists():
            continue
        results = read(path)
        found.append(results)
        series = ratio_series(results.text)
        image = None
        if series is not None:
            image = f"{path.stem}.png"
            chart(series, out / image, results.title)
        _write_if_changed(out / f"{path.stem}.md", page(results, image))
    _write_if_changed(out / "index.rst", index(found))
    return found


def _write_if_changed(path: Path, text: str) -> None:
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def index(found: list[Results]) -> str:
    lines = [
        ".. _benchmarks:\n",
        "Benchmarks\n==========\n",
        "Every measured number quoted in this documentation comes from the "
        "scripts of ``asv_bench/`` (each ``--help``), run on the machine each "
        "results file names. The pages below are those files, generated at "
        "build time (``docs/_benchgen.py``), each with a chart of its first "
        "ratio column. Ratios are CPU or wall seconds of one system over "
        "another's, as each column says, measured in one run on shared "
        "machines: compare within a table, not across tables.\n",
        "To measure again: ``pip install -e \".[bench,anchors]\"`` and "
        "``python asv_bench/tables.py --out tables.md`` (hours on 2 cores; "
        "``--quick`` checks the scripts in minutes).\n",
        ".. list-table::\n   :header-rows: 1\n   :widths: 30 45 25\n",
        "   * - Results\n     - Machine\n     - Date (file; last commit)",
    ]
    for r in found:
        machine = r.machine.replace("`", "").replace("*", "")
        lines.append(f"   * - :doc:`{r.source.stem}`\n     - {machine}\n"
                     f"     - {r.date}; {r.committed}")
    lines += ["", ".. toctree::", "   :hidden:", ""]
    lines += [f"   {r.source.stem}" for r in found]
    return "\n".join(lines) + "\n"
