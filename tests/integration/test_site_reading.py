"""Reading the built site in a real browser: the committed runs' site, ``mkdocs build
--strict``, opened from disk in headless Chromium at 1280 px.

- Benchmarks' model table shows its last (knee) column without scrolling;
- the per-point table's flags column is wide enough to read (it wrapped one character a line);
- the single-stream ceiling's label overlaps no plotted line and not the knee's rule.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser import committed_site, offline_context, wait_for_charts
from tests.conftest import committed_runs, make_scratch_root

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    root = make_scratch_root(tmp_path_factory.mktemp("reading"))
    _, res = committed_site(root, committed_runs())
    assert res.returncode == 0, res.stderr[-3000:]
    return root / "site"


@pytest.fixture
def page():
    with offline_context(1280, 900) as ctx:
        yield ctx.new_page()


def test_benchmarks_model_table_shows_the_knee_column(site, page):
    page.goto((site / "benchmarks.html").resolve().as_uri())
    page.wait_for_function("() => document.body.dataset.batchmarkTables === 'checked'", timeout=10000)
    t = page.evaluate("""() => { const t = document.querySelector('.md-content table');
        const w = t.closest('.md-typeset__scrollwrap').getBoundingClientRect();
        const last = t.rows[0].cells[t.rows[0].cells.length - 1].getBoundingClientRect();
        return {head: t.rows[0].cells[t.rows[0].cells.length - 1].textContent.trim(), right: last.right, wrap: w.right}; }""")
    assert t["head"] == "knee" and t["right"] <= t["wrap"] + 1, t


def test_point_table_notes_column_is_readable(site, page):
    page.goto((site / "models" / "dense-llama-190m.html").resolve().as_uri())
    page.wait_for_function("() => document.body.dataset.batchmarkTables === 'checked'", timeout=10000)
    widths = page.evaluate("""() => [...document.querySelectorAll('.md-content table')]
        .filter(t => t.rows[0].cells[t.rows[0].cells.length - 1].textContent.trim() === 'notes')
        .map(t => t.rows[1].cells[t.rows[1].cells.length - 1].getBoundingClientRect().width)""")
    assert widths and min(widths) >= 12 * 20 - 1, widths  # 12rem at Material's 20 px root: a line of ~35 characters


@pytest.mark.parametrize("name", ["dense-llama-190m", "moe-qwen3-290m"])
def test_ceiling_label_overlaps_no_line(site, page, name):
    page.goto((site / "models" / f"{name}.html").resolve().as_uri())
    wait_for_charts(page)
    hits = page.evaluate("""() => {
        const out = [];
        document.querySelectorAll('.vega-chart svg').forEach((svg, i) => {
          const label = [...svg.querySelectorAll('text')].find(t => t.textContent.includes('ceiling') && t.textContent.includes('tok/s'));
          if (!label) return;
          const b = label.getBoundingClientRect();
          // data lines and rules (the knee's, the repeats' spread), not the axes' grid, not the ceiling's own rule
          svg.querySelectorAll('g.mark-line.role-mark path, g.mark-rule.role-mark line').forEach(p => {
            if (p.tagName === 'line' && p.getAttribute('y2') !== null && +p.getAttribute('y2') === +(p.getAttribute('y1') || 0)) return;
            const ctm = p.getScreenCTM(), pt = svg.createSVGPoint();
            const len = p.getTotalLength ? p.getTotalLength() : 0;
            for (let s = 0; s <= len; s += 1) {
              const q = p.getPointAtLength(s); pt.x = q.x; pt.y = q.y; const r = pt.matrixTransform(ctm);
              if (r.x > b.left && r.x < b.right && r.y > b.top && r.y < b.bottom) { out.push([i, label.textContent, r.x, r.y]); break; }
            }
          });
        });
        return {hits: out, labels: [...document.querySelectorAll('.vega-chart svg text')].filter(t => t.textContent.includes('ceiling')).length};
    }""")
    assert hits["labels"] >= 1 and hits["hits"] == [], hits
