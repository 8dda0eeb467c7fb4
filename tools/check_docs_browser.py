"""Check the built documentation in a headless browser, before a release.

Usage (after the build, ``python -m sphinx -W -b html docs docs/_build/html``)::

    pip install playwright            # the Python package only: no browser download
    python tools/check_docs_browser.py [docs/_build/html] [--chromium /usr/bin/chromium]

It serves the built site on 127.0.0.1 (a free port), drives a headless
Chromium (Debian's ``chromium`` package by default; never ``playwright
install``) through Playwright, and checks:

- the landing page, an estimator's API page (``SVC``), a user-guide page and a
  gallery page load with no console error, no uncaught exception and no failed
  request (every script, style sheet, image and font they ask for);
- every internal link of every page resolves: the file exists and, for a
  ``#fragment``, the target page has that id (read from the HTML files, so
  every page is covered, not only the four loaded);
- the search page finds ``SVC`` and ``LazyTensor``, with a result linking to
  their API pages.

Screenshots of each page loaded and of each search go to
``<site>/../screenshots/`` (``docs/_build/screenshots/``; ``--out`` changes
it), for review. Exit status 0 when every check passes, 1 otherwise, with
one line per failure.
"""

from __future__ import annotations

import argparse
import functools
import html.parser
import http.server
import sys
import threading
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

#: (name, page) loaded in the browser, screenshot under ``name``.png.
PAGES = [
    ("landing", "index.html"),
    ("api_svc", "api/generated/kerneltools.estimators.svm.SVC.html"),
    ("user_guide_engine", "user_guide/engine.html"),
    ("user_guide_svm", "user_guide/estimators/svm.html"),
    ("gallery_index", "auto_examples/index.html"),
    ("gallery_sinkhorn_flow", "auto_examples/sinkhorn_flow.html"),
    ("gallery_svm_decision", "auto_examples/svm_decision.html"),
    ("api_keops_genred", "api/generated/kerneltools.keops.numpy.Genred.html"),
    ("benchmarks", "benchmarks/index.html"),
]
#: (query, a page its results must link to).
SEARCHES = [
    ("SVC", "api/generated/kerneltools.estimators.svm.SVC.html"),
    ("LazyTensor", "api/generated/kerneltools.lazy.LazyTensor.html"),
]
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update",
    "--disable-sync",
]


@dataclass
class Links(html.parser.HTMLParser):
    """The ids and the links (href, src) of one HTML page."""

    ids: set[str] = field(default_factory=set)
    links: list[str] = field(default_factory=list)

    def __post_init__(self):
        super().__init__()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self.ids.add(attrs[key])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        if tag in ("img", "script") and attrs.get("src"):
            self.links.append(attrs["src"])
        if tag == "link" and attrs.get("href") and attrs.get("rel") != ["canonical"]:
            self.links.append(attrs["href"])


def parse(path: Path) -> Links:
    parser = Links()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return parser


def broken_links(site: Path) -> list[str]:
    """'page: link (why)' for each internal link that does not resolve."""
    # _static/ holds the theme's templates (webpack-macros.html), not pages.
    pages = {p: parse(p) for p in site.rglob("*.html")
             if p.relative_to(site).parts[0] != "_static"}
    broken = []
    for page, found in sorted(pages.items()):
        for link in found.links:
            parts = urllib.parse.urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "//")):
                continue  # external: not checked (the network is closed)
            target = page if not parts.path else (
                page.parent / urllib.parse.unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            name = f"{page.relative_to(site)}: {link}"
            if not target.exists():
                broken.append(f"{name} (no such file)")
                continue
            fragment = urllib.parse.unquote(parts.fragment)
            if fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else parse(target).ids
                if fragment not in ids:
                    broken.append(f"{name} (no id {fragment!r} there)")
    return broken


def serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # one line per request is noise here
        pass


def load(browser, url: str, shot: Path) -> list[str]:
    """Open ``url``; its console errors, page errors and failed requests."""
    problems = []
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.on("console", lambda m: m.type == "error" and problems.append(
        f"console error: {m.text}"))
    page.on("pageerror", lambda e: problems.append(f"uncaught exception: {e}"))
    page.on("requestfailed", lambda r: problems.append(
        f"request failed: {r.url} ({r.failure})"))
    page.on("response", lambda r: r.status >= 400 and problems.append(
        f"HTTP {r.status}: {r.url}"))
    response = page.goto(url, wait_until="networkidle")
    if response is None or response.status != 200:
        problems.append(f"HTTP {response.status if response else 'no response'}")
    page.screenshot(path=str(shot), full_page=False)
    page.close()
    return problems


def search(browser, base: str, query: str, expected: str, shot: Path) -> list[str]:
    """Search ``query``; a problem unless a result links to ``expected``."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(f"uncaught exception: {e}"))
    page.goto(f"{base}search.html?q={urllib.parse.quote(query)}",
              wait_until="networkidle")
    try:
        page.wait_for_selector("#search-results li", timeout=20_000)
    except Exception:  # noqa: BLE001 - Playwright's TimeoutError; reported below
        pass
    hrefs = page.eval_on_selector_all(
        "#search-results li a", "links => links.map(a => a.href)")
    page.screenshot(path=str(shot), full_page=False)
    page.close()
    if not any(urllib.parse.urlsplit(h).path.endswith("/" + expected) for h in hrefs):
        errors.append(f"no result links to {expected} ({len(hrefs)} results)")
    return errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", nargs="?", type=Path,
                        default=Path(__file__).parents[1] / "docs/_build/html")
    parser.add_argument("--out", type=Path, help="screenshots folder "
                        "(default: the site's ../screenshots)")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args(argv)
    site = args.site.resolve()
    out = (args.out or site.parent / "screenshots").resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not (site / "index.html").exists():
        print(f"no built site in {site}: build it first", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    failures = [f"link {b}" for b in broken_links(site)]
    server, base = serve(site)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium,
                                         headless=True, args=CHROMIUM_ARGS)
            for name, path in PAGES:
                shot = out / f"{name}.png"
                failures += [f"{path}: {p}" for p in load(browser, base + path, shot)]
                print(f"loaded {path} -> {shot}")
            for query, expected in SEARCHES:
                shot = out / f"search_{query}.png"
                failures += [f"search {query!r}: {p}"
                             for p in search(browser, base, query, expected, shot)]
                print(f"searched {query!r} -> {shot}")
            browser.close()
    finally:
        server.shutdown()
    for failure in failures:
        print("FAIL", failure)
    print(f"{len(failures)} failures; screenshots in {out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
