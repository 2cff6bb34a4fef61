"""The explainer pages in a real browser: build the site with ``mkdocs build --strict`` and find rendered SVG marks, offline.

Headless Chromium (``/usr/bin/chromium``) loads the built pages from ``file://``; every
request that is not a local file is aborted and counted, so a chart that needed the network
would fail.  Skips with a reason where Chromium or Playwright is absent.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
EXPLAINERS = ["batching", "bandwidth", "knee", "moe", "kv-cache", "sizing"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    """A scratch copy of the project, pages rendered and the site built with --strict."""
    root = tmp_path_factory.mktemp("site") / "root"
    for item in ("mkdocs.yml", "templates"):
        src = REPO / item
        (shutil.copytree if src.is_dir() else shutil.copy)(src, root / item if src.is_dir() else root)
    for sub in ("hardware", "models"):
        shutil.copytree(REPO / "data" / sub, root / "data" / sub)
    (root / "data" / "runs").mkdir(parents=True)
    mp = pytest.MonkeyPatch()
    mp.setenv("BATCHMARK_ROOT", str(root))
    try:
        from pipeline.pages.render import render_site

        written = render_site(root / "data" / "pages", runs_dir=root / "data" / "runs", templates_dir=root / "templates")
        res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"),
                              "-d", str(root / "site")], capture_output=True, text=True, timeout=300)
    finally:
        mp.undo()
    assert res.returncode == 0, res.stderr[-3000:]
    return root, written


def test_explainer_pages_are_written(built_site):
    root, written = built_site
    names = {p.relative_to(root / "data" / "pages").as_posix() for p in written}
    assert {f"explain/{n}.md" for n in EXPLAINERS} | {"capacity.md"} <= names
    text = (root / "data" / "pages" / "capacity.md").read_text()
    assert "## Llama-3.1-8B" in text and "| 8192 | 1.00 GiB | 96 |" in text


def test_explainer_charts_render_svg_offline(built_site):
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    root, _ = built_site
    blocked: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        page = browser.new_page()

        def route(r):
            if r.request.url.startswith("file://"):
                r.continue_()
            else:
                blocked.append(r.request.url)
                r.abort()

        page.route("**/*", route)
        for name in EXPLAINERS + ["capacity"]:
            html = root / "site" / ("capacity" if name == "capacity" else f"explain/{name}") / "index.html"
            assert html.is_file(), html
            page.goto(html.as_uri())
            n_charts = page.locator(".vega-chart").count()
            if name != "capacity":
                assert n_charts >= 1, f"{name}: no chart on the page"
            if n_charts:
                page.wait_for_function(
                    "n => document.querySelectorAll('.vega-chart svg').length >= n", arg=n_charts, timeout=30000)
                marks = page.locator(".vega-chart svg g.mark-line path, .vega-chart svg g.mark-symbol path, "
                                     ".vega-chart svg g.mark-rect path, .vega-chart svg g.mark-rule line").count()
                assert marks > 0, f"{name}: charts drew no marks"
                assert "chart failed" not in page.inner_text("body")
        browser.close()
    assert blocked == [], f"pages asked the network for {blocked[:3]}"
