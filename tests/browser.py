"""Headless Chromium (Debian's ``chromium``, driven by Playwright with ``executable_path``) for page tests.

Pages are opened from ``file://`` in an offline browser context, and every http(s) request is
refused and recorded, so a chart that needs a CDN fails the test.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import shutil
import threading
from pathlib import Path

import pytest

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-quic"]


def chromium_path() -> str:
    """Path of the system Chromium, or skip the test saying why."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no Chromium on this machine (install Debian's 'chromium' package to run browser tests)")


@contextlib.contextmanager
def offline_context(width: int = 1280, height: int = 900, **options):
    """A Playwright browser context in the system Chromium, offline, every http(s) request refused;
    skips (saying why) without playwright or Chromium.  ``options`` go to ``new_context``."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python package) is not installed")
    exe = chromium_path()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        try:
            ctx = browser.new_context(offline=True, viewport={"width": width, "height": height}, **options)
            ctx.route("http*://**/*", lambda route: route.abort())
            yield ctx
        finally:
            browser.close()


@contextlib.contextmanager
def served_context(site: Path, width: int = 1280, height: int = 900):
    """The built site ``site`` served over HTTP on 127.0.0.1 (a thread of this process) and a Playwright browser
    context in the system Chromium that may reach that origin only (every other request is refused).

    For what needs an origin rather than ``file://``: Material's search runs in a Web Worker, which Chromium does not
    start from a file.  Yields ``(context, base_url)``; skips (saying why) without playwright or Chromium.
    """
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python package) is not installed")
    exe = chromium_path()

    class _Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # no request log on the test's output
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
            try:
                ctx = browser.new_context(viewport={"width": width, "height": height})
                ctx.route("**/*", lambda route: route.continue_() if route.request.url.startswith(base) else route.abort())
                yield ctx, base
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()


def wait_for_charts(page, timeout_ms: int = 60000) -> int:
    """Wait until every ``.vega-chart`` on ``page`` is drawn (an SVG) or shows its error text; return how many."""
    n = page.locator(".vega-chart").count()
    if n:
        page.wait_for_function("n => [...document.querySelectorAll('.vega-chart')].filter("
                               "e => e.querySelector('svg') || e.textContent).length >= n", arg=n, timeout=timeout_ms)
    return n


def each_chart(ctx, html: Path, js: str) -> list:
    """``js`` evaluated on every ``.vega-chart`` of ``html`` (a new page of ``ctx``), once every chart is drawn
    (``data-drawn``) or says why not; a script error on the page fails the calling test."""
    page = ctx.new_page()
    try:
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(html.resolve().as_uri())
        n = page.locator(".vega-chart").count()
        if n:
            page.wait_for_function("n => [...document.querySelectorAll('.vega-chart')].filter("
                                   "e => e.dataset.drawn || e.textContent).length >= n", arg=n, timeout=60000)
        out = [page.evaluate(js, el) for el in page.query_selector_all(".vega-chart")]
        assert errors == [], (html, errors)
        return out
    finally:
        page.close()


def open_page(html: Path, wait_selector: str = ".vega-chart svg", timeout_ms: int = 20000,
              count: dict[str, str] | None = None) -> dict:
    """Open a built page offline; return counts of rendered charts and marks, chart texts, and refused requests.

    ``count`` maps names to CSS selectors; ``result["counts"][name]`` is how many elements match.
    """
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python package) is not installed")
    exe = chromium_path()
    refused: list[str] = []
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        try:
            ctx = browser.new_context(offline=True)
            ctx.route("http*://**/*", lambda route: (refused.append(route.request.url), route.abort()))
            page = ctx.new_page()
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(html.resolve().as_uri())
            n_charts = page.locator(".vega-chart").count()
            if n_charts:
                page.wait_for_function(
                    "n => document.querySelectorAll('.vega-chart svg').length >= n", arg=n_charts, timeout=timeout_ms)
            result = {
                "charts": n_charts,
                "svgs": page.locator(".vega-chart svg").count(),
                "marks": page.locator(".vega-chart svg g.mark-line path, .vega-chart svg g.mark-symbol path, "
                                      ".vega-chart svg g.mark-rule line, .vega-chart svg g.mark-rect path").count(),
                "texts": page.locator(".vega-chart svg text").all_text_contents(),
                # bars actually drawn: rect marks with a visible width and height
                "visible_bars": page.evaluate(
                    "() => [...document.querySelectorAll('.vega-chart svg g.mark-rect path')]"
                    ".filter(p => { const b = p.getBBox(); return b.width > 1 && b.height > 1; }).length"),
                "refused": refused,
                "errors": errors,
                "counts": {name: page.locator(sel).count() for name, sel in (count or {}).items()},
            }
        finally:
            browser.close()
    return result


def mkdocs_build(root: Path):
    """``mkdocs build --strict`` of the project at ``root`` into ``root/site`` (a real build); returns the finished process."""
    import os
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"),
                           "-d", str(root / "site")], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def committed_site(root: Path, run_ids: list[str]):
    """The runs ``run_ids`` of ``data/runs/`` copied into the scratch project ``root``, its pages rendered (no
    reference given, as in a clone with no ``../shared/``) and built with ``mkdocs build --strict``.

    Returns ``(pages written, the finished build process)``.
    """
    from pipeline.pages.render import render_site
    from tests.conftest import REPO

    for run_id in run_ids:
        shutil.copytree(REPO / "data" / "runs" / run_id, root / "data" / "runs" / run_id)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BATCHMARK_ROOT", str(root))
        written = render_site(root / "data" / "pages", runs_dir=root / "data" / "runs", templates_dir=root / "templates")
        return written, mkdocs_build(root)


def screenshot(html: Path, out: Path, width: int = 1280, height: int = 900, full_page: bool = True) -> Path:
    """A PNG of a built page opened offline from disk, once its charts are drawn (for a person to look at)."""
    with offline_context(width, height) as ctx:
        page = ctx.new_page()
        page.goto(html.resolve().as_uri())
        wait_for_charts(page)
        page.screenshot(path=str(out), full_page=full_page)
    return out
