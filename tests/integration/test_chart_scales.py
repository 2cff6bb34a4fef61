"""Every chart of the built site has scales a reader can read: read from each Vega view in headless Chromium.

For every chart on every page of the site (the committed runs and a lab's 50 models × 2 runs, the fixture of
``test_site_charts.py``), every scale of its Vega view, nested facets included, must have a domain that is not
empty, finite where the scale is continuous, and strictly positive where it is a log scale.

Fault kind: a log scale whose domain reaches 0 (Vega: a log domain "must be strictly positive or negative",
https://vega.github.io/vega/docs/scales/#log): the open-loop "achieved rate and goodput vs offered rate" chart of
a zero goodput got the domain [0, 4], no ticks, and every mark on the top edge, on model pages of the committed
site.  The check is shown to fail on such a chart (:func:`test_the_scale_check_finds_a_log_scale_reaching_zero`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser import each_chart
from tests.integration.test_site_charts import browser, site  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow

#: Every scale of a chart's Vega view (the top context and each facet's subcontext): name, type, domain, and what
#: is wrong with it ("empty", "non-finite", "log reaches zero").
SCALES_JS = """(el) => {
  const view = el.batchmarkView;
  if (!view) { return null; }
  const continuous = ['linear', 'log', 'pow', 'sqrt', 'symlog', 'time', 'utc', 'sequential'];
  const out = {scales: 0, bad: []};
  function walk(ctx) {
    if (!ctx) { return; }
    Object.entries(ctx.scales || {}).forEach(([name, op]) => {
      const s = op && op.value;
      if (!s || typeof s.domain !== 'function') { return; }
      out.scales += 1;
      const d = s.domain().map(v => (v instanceof Date ? +v : v));
      const nums = d.map(v => +v);
      let why = null;
      if (d.length === 0) { why = 'empty domain'; }
      else if (continuous.includes(s.type) && nums.some(v => !isFinite(v))) { why = 'non-finite domain'; }
      else if (s.type === 'log' && (nums.some(v => v <= 0) && nums.some(v => v >= 0))) { why = 'log scale reaching zero'; }
      if (why) { out.bad.push({name: name, type: s.type, domain: JSON.stringify(d), why: why}); }
    });
    (ctx.subcontext || []).forEach(walk);
  }
  walk(view._runtime);
  return out;
}"""


def chart_scales(ctx, html: Path) -> list[dict | None]:
    """:data:`SCALES_JS` of every chart on a page, once every chart is drawn (or says why not)."""
    return each_chart(ctx, html, SCALES_JS)


def test_every_scale_of_every_chart_of_the_site_has_a_readable_domain(site, browser):  # noqa: F811
    pages = sorted(p for p in site.rglob("*.html") if 'class="vega-chart"' in p.read_text())
    assert len(pages) >= 60  # the fixed pages, the explainers, 50+ model pages, run and change pages
    charts = scales = 0
    bad = []
    for html in pages:
        for i, res in enumerate(chart_scales(browser, html)):
            where = f"{html.relative_to(site)} chart {i + 1}"
            assert res is not None, f"{where}: not drawn"
            charts += 1
            scales += res["scales"]
            bad += [f"{where}: scale {b['name']} ({b['type']}) {b['domain']}: {b['why']}" for b in res["bad"]]
    assert bad == [], "\n".join(bad[:20])
    assert charts >= 100 and scales >= 2 * charts


def test_the_scale_check_finds_a_log_scale_reaching_zero(site, browser, tmp_path):  # noqa: F811
    """The check can fail: a zero on a log axis (the old goodput chart) and an empty ordinal domain are caught."""
    js = site / "assets" / "javascripts"
    spec = {"$schema": "https://vega.github.io/schema/vega-lite/v6.json", "width": 200, "height": 100,
            "title": "goodput", "data": {"values": [{"r": 1, "g": 0}, {"r": 2, "g": 4}]}, "mark": "line",
            "encoding": {"x": {"field": "r", "type": "quantitative", "scale": {"type": "log"}},
                         "y": {"field": "g", "type": "quantitative", "scale": {"type": "log"}}}}
    html = tmp_path / "bad.html"
    html.write_text(f"""<!doctype html><html><body>
<div class="vega-chart" id="chart-1"></div>
<script type="application/json" class="vega-spec" data-target="chart-1">{json.dumps(spec)}</script>
<script src="{(js / 'vega-bundle.js').as_uri()}"></script>
<script src="{(js / 'charts.js').as_uri()}"></script>
</body></html>""")
    (res,) = chart_scales(browser, html)
    assert [b["why"] for b in res["bad"]] == ["log scale reaching zero"]
    assert res["bad"][0]["name"] == "y"
