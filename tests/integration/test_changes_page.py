"""The Changes page end to end: rendered by ``render_site``, built by ``mkdocs build --strict``, opened offline in headless Chromium.

Runs are hand-made (tests/runbuilder.py): A, then B with dense-a's c=8 point 20 % slower
(times × 1.25), then a run on other hardware.  Expected: one comparison (B vs A; the h200 run
has no earlier run on its hardware), listing exactly the slowed point's metrics as significant,
and its chart (on the comparison's own page) draws one point mark per (model, concurrency, charted metric) =
2 × 5 × 4 = 40 SVG symbols with no request leaving the machine.  The Runs page links B to its comparison.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.pages.changes import CHART_METRICS, anchor
from pipeline.pages.render import render_site
from pipeline.pages.indexviews import change_page_path, run_page_path
from tests.browser import open_page
from tests.conftest import make_scratch_root
from tests.runbuilder import CONCURRENCY, H200_PROFILE, MODELS, NOISE_A, NOISE_B, make_run

A, B, HW = "20261129T100000Z-a", "20261129T110000Z-b", "20261129T120000Z-h200"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A scratch project with three hand-made runs; pages rendered and the site built strictly."""
    root = make_scratch_root(tmp_path_factory.mktemp("changes"))
    runs_dir = root / "data" / "runs"
    make_run(runs_dir, A, noise=NOISE_A)
    make_run(runs_dir, B, noise=NOISE_B, slow={("dense-a", 8): 1.25})
    make_run(runs_dir, HW, noise=NOISE_B, hardware=H200_PROFILE)
    old = os.environ.get("BATCHMARK_ROOT")
    os.environ["BATCHMARK_ROOT"] = str(root)
    try:
        render_site(root / "data" / "pages", runs_dir=runs_dir)
    finally:
        if old is None:
            os.environ.pop("BATCHMARK_ROOT")
        else:
            os.environ["BATCHMARK_ROOT"] = old
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet"], cwd=root, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    return root


def test_changes_markdown(site):
    index = (site / "data" / "pages" / "changes.md").read_text()
    assert f"| [{B}]({change_page_path(B)}) | {A} |" in index  # the index links each comparison's own page
    assert HW not in index  # first run on its hardware: nothing to compare with
    assert not (site / "data" / "pages" / change_page_path(HW)).exists()
    md = (site / "data" / "pages" / change_page_path(B)).read_text()
    assert f"# {B} vs {A} {{ #{anchor(B)} }}" in md
    sig = md.split("## Significant changes", 1)[1].split("## Per model", 1)[0]
    rows = [line for line in sig.splitlines() if line.startswith("| dense-a") or line.startswith("| moe-b")]
    # Exactly the slowed point, every metric (7), all worse.
    assert len(rows) == 8 and all("| 8 |" in r and "(worse)" in r for r in rows)
    assert all(" pp (worse)" in r for r in rows if "| MBU |" in r or "| MFU |" in r)


def test_history_section_and_chart(site):
    """A lab's history: the index draws each workload across the runs of one hardware (A and B on cpu; the
    h200 run alone has none): 2 workloads × 4 figures × 2 runs = 16 point marks; two runs are too few for a step."""
    index = (site / "data" / "pages" / "changes.md").read_text()
    hist = index.split("## History", 1)[1]
    assert "### cpu · transformers · in 64 / out 16" in hist and "h200" not in hist
    assert "2 runs, " + A + " to " + B in hist and "No step" in hist
    res = open_page(site / "site" / "changes.html", count={"points": "#chart-1 svg g.mark-symbol.role-mark path"})
    assert res["errors"] == [] and res["charts"] == 1
    assert res["counts"]["points"] == len(MODELS) * 4 * 2


def test_runs_page_links_to_the_comparison(site):
    runs_md = (site / "data" / "pages" / "runs.md").read_text()
    assert f"[vs {A}]({change_page_path(B)})" in runs_md
    assert "first run on this hardware and workload" in runs_md
    html = (site / "site" / "runs.html").read_text()
    page = change_page_path(B).removesuffix(".md")
    assert f'href="{page}.html"' in html  # use_directory_urls: false (links work from disk)
    assert f'href="../{page}.html"' in (site / "site" / run_page_path(B).replace(".md", ".html")).read_text()


def test_changes_chart_renders_offline_in_chromium(site):
    res = open_page(site / "site" / change_page_path(B).replace(".md", ".html"),
                    count={"points": "#chart-1 svg g.mark-symbol.role-mark path"})
    assert res["errors"] == [] and res["charts"] == 1 and res["svgs"] == 1
    assert res["counts"]["points"] == len(MODELS) * len(CONCURRENCY) * len(CHART_METRICS)
    assert any(B in t and A in t for t in res["texts"])
    assert not [u for u in res["refused"] if "vega" in u or "jsdelivr" in u]
