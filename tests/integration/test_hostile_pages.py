"""Hostile strings from outside reach the built site as text: no script runs, no table row splits, no chart blanks.

Regression (fault kind: HTML/Markdown injection): model names from imports (``import --model``,
an imported file), tool versions in ``run.json`` and model names of measured runs were rendered
by Jinja without escaping into Markdown that passes raw HTML through, so
``<img src=x onerror=alert(1)>`` ran in the reader's browser and ``a|b`` split a table row.
The site is built for real (``render_site`` then ``mkdocs build --strict``) and opened in
headless Chromium (tests/browser.py) with a dialog handler and a window flag watching for script.

Regression (fault kind: a name breaks out of a context the page body's escaping does not cover):
an imported ``model_id: "</title><script>alert(document.domain)</script><title>"`` was escaped in the page's H1,
but MkDocs takes the page title from the H1 and Material writes it into ``<title>`` through ``striptags``, which
turns character references back into characters: the script ran.  Every context a name lands in is opened here:
page body and tables, ``<title>`` and header, chart titles and tooltips, the search index (served over HTTP, where
Material's search worker runs), and file names.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser import CHROMIUM_ARGS, chromium_path, mkdocs_build, served_context, wait_for_charts
from tests.conftest import DATA, make_scratch_root

pytestmark = pytest.mark.slow

IMG = "<img src=x onerror=alert(1)>"
TITLE = "</title><script>alert(document.domain)</script><title>"  # the example: out of <title> into a script
ENTITY = "&lt;img src=x onerror=alert(2)&gt;"  # already-escaped text: unescaped once too often, it becomes markup
SCRIPT = "<script>window.__pwned=1</script>"
PIPE = "a|b"
BOLD = "<b onmouseover=alert(3)>*x* [y](z) {: #id }"
PAGES = ["index.html", "benchmarks.html", "runs.html", "methodology.html",
         "explain/batching.html", "explain/knee.html", "explain/bandwidth.html"]


def _open(html: Path, script: str | None = None) -> dict:
    """Open ``html`` offline; return dialogs opened, page errors, the window flag and the result of ``script``."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (python package) is not installed")
    exe = chromium_path()
    dialogs: list[str] = []
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        try:
            ctx = browser.new_context(offline=True)
            ctx.route("http*://**/*", lambda route: route.abort())
            page = ctx.new_page()
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(html.resolve().as_uri())
            n = wait_for_charts(page, 30000)
            page.wait_for_timeout(300)  # an <img onerror> fires once the image fails to load
            page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")  # folded tables
            for mark in page.locator(".vega-chart svg g.mark-symbol path").all()[:4]:  # chart tooltips show names
                mark.hover(force=True)
                page.wait_for_timeout(100)
            out = {"dialogs": dialogs, "errors": errors, "pwned": page.evaluate("() => window.__pwned === 1"),
                   "title": page.title(), "title_elements": page.locator("title").count(),
                   "tooltip_markup": page.locator("#vg-tooltip-element img, #vg-tooltip-element script").count(),
                   "text": page.inner_text("body"), "charts": n,
                   "svgs": page.locator(".vega-chart svg").count(),
                   "cells": page.locator("td").all_inner_texts(),
                   "injected": page.locator("article img[src=x], article script:not([type])").count()}
            if script:
                out["script"] = page.evaluate(script)
        finally:
            browser.close()
    return out


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory):
    """A site built from an import named with each hostile string and a measured run with hostile names and versions."""
    root = make_scratch_root(tmp_path_factory.mktemp("hostile"))
    mp = pytest.MonkeyPatch()
    mp.setenv("BATCHMARK_ROOT", str(root))
    try:
        from pipeline.importers import ImportOptions, import_run
        from pipeline.pages.render import render_site
        from tests.runbuilder import make_run

        runs_dir = root / "data" / "runs"
        for i, name in enumerate([IMG, BOLD, PIPE, TITLE, ENTITY]):  # an import takes the part after the last "/" as the name
            import_run("vllm-bench", [DATA / "vllm-bench"], "dgx-spark", run_id=f"20261102T10150{i}Z-vllm", options=ImportOptions(model=name))
        make_run(runs_dir, "20261201T000000Z-a", models=(PIPE, IMG), transformers_version=SCRIPT)
        render_site(root / "data" / "pages")
        # the Guide's pages as title-only stubs: their prose would fill the search results the last test reads
        for guide_page in (root / "data" / "pages" / "guide").rglob("*.md"):
            guide_page.write_text(f"# {guide_page.stem}\n", encoding="utf-8")
        res = mkdocs_build(root)
    finally:
        mp.undo()
    assert res.returncode == 0, res.stderr[-3000:]
    return root


def test_model_and_run_pages_show_hostile_names_as_text(hostile_site):
    """The pages of one model and of one run (a page each) escape names and versions as the others do."""
    from pipeline.pages.indexviews import run_page_path

    site = hostile_site / "site"
    run = _open(site / run_page_path("20261201T000000Z-a").replace(".md", ".html"))
    assert f"transformers {SCRIPT}" in run["text"] and PIPE in run["cells"] and IMG in run["cells"]
    pages = sorted((site / "models").glob("*.html"))
    assert len(pages) == 5  # one page each (the measured run's PIPE and IMG join their pages)
    titles = []
    for html in pages:
        res = _open(html)
        assert res["dialogs"] == [] and res["pwned"] is False and res["injected"] == 0 and res["errors"] == []
        assert res["charts"] and res["svgs"] == res["charts"]
        assert res["title_elements"] == 1 and res["tooltip_markup"] == 0
        titles.append(res["title"])
        # file names: a slug of letters, digits and '-' (pipeline.pages.escape.anchor), whatever the name
        assert html.name.removesuffix(".html").replace("-", "").isalnum() and html.name.isascii()
    # the tab title is the H1's text, shown as given: "<name> - batchmark"
    assert sorted(titles) == sorted(f"{n} - batchmark" for n in (IMG, BOLD, PIPE, TITLE, ENTITY))
    texts = " ".join(_open(p)["text"] for p in pages)
    assert IMG in texts and BOLD in texts and PIPE in texts and TITLE in texts and ENTITY in texts


@pytest.mark.parametrize("page", PAGES)
def test_hostile_names_show_as_text_and_run_no_script(hostile_site, page):
    res = _open(hostile_site / "site" / page)
    assert res["dialogs"] == [] and res["pwned"] is False and res["injected"] == 0
    assert res["errors"] == [] and res["title_elements"] == 1 and res["tooltip_markup"] == 0
    # the names are shown as given, never mangled (imports have no model card, so the explainers skip them)
    if page in ("index.html", "benchmarks.html"):
        assert IMG in res["text"] and BOLD in res["text"] and PIPE in res["text"] and TITLE in res["text"]
    if page.startswith("explain/"):
        assert IMG in res["text"] and PIPE in res["text"]
    if page in ("index.html", "explain/bandwidth.html"):  # tables with a model column
        # a | in a name stays in one cell: the row keeps its columns
        assert PIPE in res["cells"] and IMG in res["cells"]
    if page == "runs.html":  # the index links each run's own page, which shows its versions
        assert "20261201T000000Z-a" in res["text"]
    if res["charts"]:  # chart titles carry the names; every chart still renders
        assert res["svgs"] == res["charts"]


def test_one_bad_chart_spec_does_not_blank_the_others(hostile_site, tmp_path):
    """Regression (fault kind: one bad spec blanks the page): a spec that does not parse threw inside the loader's
    forEach, so no later chart rendered. The bad one shows a message; the next one draws."""
    js = hostile_site / "site" / "assets" / "javascripts"
    good = {"$schema": "https://vega.github.io/schema/vega-lite/v5.json", "data": {"values": [{"x": 1, "y": 2}]},
            "mark": "point", "encoding": {"x": {"field": "x", "type": "quantitative"}}}
    html = tmp_path / "page.html"
    html.write_text(f"""<!doctype html><html><body>
<div class="vega-chart" id="chart-1"></div>
<script type="application/json" class="vega-spec" data-target="chart-1">{{"data": {{"values": [{{"y": NaN}}]}}</script>
<div class="vega-chart" id="chart-2"></div>
<script type="application/json" class="vega-spec" data-target="chart-2">{json.dumps(good)}</script>
<script src="{(js / 'vega-bundle.js').as_uri()}"></script>
<script src="{(js / 'charts.js').as_uri()}"></script>
</body></html>""")
    res = _open(html, script="() => [document.querySelector('#chart-1').textContent, "
                             "!!document.querySelector('#chart-2 svg')]")
    message, second_drawn = res["script"]
    assert message.startswith("chart failed to render")
    assert second_drawn is True


def test_search_shows_hostile_names_as_text(hostile_site):
    """The search index (``search/search_index.json``, titles and text of every page and heading) is rendered by
    Material's search as HTML: each hostile name found by search shows as text in the results and runs nothing."""
    index = json.loads((hostile_site / "site" / "search" / "search_index.json").read_text())
    assert not [d["location"] for d in index["docs"] if "<script" in d["title"] or "<img" in d["title"]]
    with served_context(hostile_site / "site") as (ctx, base):
        page = ctx.new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(base + "index.html")
        page.keyboard.press("/")  # Material's search shortcut
        page.keyboard.type("measurement", delay=10)  # every model page opens "Every measurement of <name>"
        page.wait_for_selector(".md-search-result__item", timeout=20000)
        page.wait_for_timeout(500)
        shown = page.locator(".md-search-result__list").inner_text()
        injected = page.locator(".md-search-result img, .md-search-result script").count()
        title = page.title()
    assert dialogs == [] and injected == 0 and title == "batchmark"
    for name in (IMG, BOLD, PIPE, TITLE, ENTITY):
        assert name in shown, name
