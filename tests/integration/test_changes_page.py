"""The Changes page in a real browser: rendered, built by MkDocs, opened offline in headless Chromium.

Runs are hand-made (tests/runbuilder.py): A, then B with dense-a's c=8 point 20 % slower,
then a run on other hardware.  Expected: B's page exists (its predecessor is A), the h200 run
has none (no earlier run on its hardware), and B's chart draws one point mark per (model,
concurrency, charted metric) = 2 × 5 × 4 = 40 SVG symbols, with no request leaving the machine.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.pages.changes import CHART_METRICS, page_name, render_changes
from tests.runbuilder import CONCURRENCY, H200_PROFILE, MODELS, NOISE_A, NOISE_B, make_run

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
A, B, HW = "20261129T100000Z-a", "20261129T110000Z-b", "20261129T120000Z-h200"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """Render the Changes pages of three hand-made runs and build them with MkDocs (Material)."""
    tmp = tmp_path_factory.mktemp("site")
    runs_dir, docs, site_dir = tmp / "runs", tmp / "docs", tmp / "site"
    make_run(runs_dir, A, noise=NOISE_A)
    make_run(runs_dir, B, noise=NOISE_B, slow={("dense-a", 8): 1.25})
    make_run(runs_dir, HW, noise=NOISE_B, hardware=H200_PROFILE)
    written = render_changes(runs_dir, docs)
    assert docs / page_name(B) in written and not (docs / page_name(HW)).exists()
    cfg = tmp / "mkdocs.yml"
    cfg.write_text(f"site_name: test\ndocs_dir: {docs}\nsite_dir: {site_dir}\n"
                   "theme:\n  name: material\n  font: false\n")
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "-q", "-f", str(cfg)], capture_output=True,
                         text=True, timeout=300, env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr
    return site_dir


def test_changes_page_markdown(site):
    index = (site.parent / "docs" / "changes" / "index.md").read_text()
    assert f"[{B}]({B}.md)" in index and A in index
    page = (site.parent / "docs" / page_name(B)).read_text()
    assert "**Comparable" in page and "worse (p=0.00794 n=5+5)" in page


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium not installed at /usr/bin/chromium")
def test_changes_chart_renders_offline_in_chromium(site):
    from playwright.sync_api import sync_playwright

    external: list[str] = []
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            ctx = browser.new_context(offline=True)
            page = ctx.new_page()
            page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file://")
                       else (external.append(r.request.url), r.abort()))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto((site / "changes" / B / "index.html").as_uri())
            marks = page.locator("#changes-chart svg g.mark-symbol.role-mark path")
            marks.first.wait_for(timeout=30_000)
            n_marks = marks.count()
            title = page.locator("#changes-chart svg").text_content()
        finally:
            browser.close()
    assert n_marks == len(MODELS) * len(CONCURRENCY) * len(CHART_METRICS)
    assert B in title and A in title
    assert external == [] and errors == []


def test_site_contains_the_bundled_vega(site):
    bundle = site / "js" / "vega-bundle.js"
    assert bundle.is_file() and "vegaEmbed" in bundle.read_text()[-2000:]
