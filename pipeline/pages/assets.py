"""The site's static assets: the local Vega bundle, the script that renders every embedded chart
(``assets/javascripts/charts.js``) and the site's stylesheet.  Written into the docs dir by :mod:`pipeline.pages.render`.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.store import runs

CHARTS_JS = """// Render every embedded Vega-Lite spec as SVG (vega-embed from the local bundle).
// Each chart is rendered on its own: a spec that does not parse or render shows a message in
// its own place and never stops the charts after it.
function batchmarkRenderCharts() {
  document.querySelectorAll('script.vega-spec').forEach(function (s) {
    var el = document.getElementById(s.dataset.target);
    if (!el || el.dataset.rendered) { return; }
    el.dataset.rendered = "1";
    try {
      vegaEmbed(el, JSON.parse(s.textContent), {renderer: "svg", actions: false})
        .then(function (res) { el.batchmarkView = res.view; el.dataset.drawn = "1"; })  // the Vega view, for tests
        .catch(function (err) { el.textContent = "chart failed to render: " + err; });
    } catch (err) {
      el.textContent = "chart failed to render: " + err;
    }
  });
}
if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", batchmarkRenderCharts);
} else {
  batchmarkRenderCharts();
}
// Wide tables: each table sits in a horizontally scrolling wrapper (Material's, or one made here);
// a wrapper whose table is wider than the column is marked "batchmark-overflow", which shows a
// scroll hint above it and a shaded right edge (batchmark.css).  Re-checked on resize.
function batchmarkMarkTables() {
  document.querySelectorAll('.md-content table').forEach(function (t) {
    var wrap = t.closest('.md-typeset__scrollwrap');
    if (!wrap) {
      wrap = document.createElement('div');
      wrap.className = 'md-typeset__scrollwrap';
      var inner = document.createElement('div');
      inner.className = 'md-typeset__table';
      t.parentNode.insertBefore(wrap, t);
      wrap.appendChild(inner);
      inner.appendChild(t);
    }
    wrap.classList.toggle('batchmark-overflow', t.getBoundingClientRect().width > wrap.clientWidth + 1);
  });
  document.body.dataset.batchmarkTables = 'checked';
}
window.addEventListener('load', function () { setTimeout(batchmarkMarkTables, 0); });
window.addEventListener('resize', batchmarkMarkTables);
"""

# Extra template context per page: {page path relative to docs_dir: fn(views, run_dirs) -> dict}.
# A page whose numbers come from another computation (a diff, capacity tables) registers
# its provider here; every other page sees only ``runs`` (the RunViews), ``chart`` and ``charts``.
SITE_CSS = """/* Wide result tables stay readable: smaller type, and the content column may grow. */
.md-grid { max-width: 1440px; }
.md-typeset table:not([class]) { font-size: .68rem; }
.md-typeset table:not([class]) td, .md-typeset table:not([class]) th { padding: .5em .8em; }
/* Material gives every header cell min-width 5rem, so a table of a dozen numbers squeezed its last
   (text) column to a few characters a line (the per-point flags wrapped one character per
   line, and Benchmarks' knee column was cut off): numbers may be narrower, a last text column wider. */
.md-typeset table:not([class]) th { min-width: 3rem; }
.md-typeset table:not([class]) td:last-child, .md-typeset table:not([class]) th:last-child { min-width: 12rem; }
.vega-chart { overflow-x: auto; }
.md-typeset td.n, .md-typeset th.n { text-align: right; }
/* A table wider than the column scrolls sideways and says so: a hint above it, a shaded right
   edge, and a scrollbar that stays visible (batchmarkMarkTables in charts.js marks the wrapper). */
.md-typeset__scrollwrap { overflow-x: auto; scrollbar-width: thin; scrollbar-color: #888 transparent; }
.md-typeset__scrollwrap::-webkit-scrollbar { height: 8px; }
.md-typeset__scrollwrap::-webkit-scrollbar-thumb { background: #888; border-radius: 4px; }
.md-typeset__scrollwrap.batchmark-overflow {
  background: linear-gradient(to left, rgba(0, 0, 0, .16), rgba(0, 0, 0, 0)) right top / 1.6rem 100% no-repeat;
}
.md-typeset__scrollwrap.batchmark-overflow table:not([class]) { background-color: transparent; }
.md-typeset__scrollwrap.batchmark-overflow::before {
  content: "⇆ wide table: scroll sideways for more columns";
  display: block; position: sticky; left: 0; font-size: .6rem; color: var(--md-default-fg-color--light);
  padding: 0 .8rem .2rem;
}
"""
def write_assets(docs_dir: Path) -> list[Path]:
    """Write the local Vega bundle (once per vl-convert version) and the chart bootstrap script; return the
    asset files (the bundle's too, when it was already there)."""
    import vl_convert

    js_dir = docs_dir / "assets" / "javascripts"
    bundle = js_dir / "vega-bundle.js"
    stamp = js_dir / "vega-bundle.version"
    version = getattr(vl_convert, "__version__", "unknown")
    if not bundle.is_file() or not stamp.is_file() or stamp.read_text() != version:
        # the default snippet (its docstring: "optionally, a snippet"); its stub calls the argument required
        runs.atomic_write_text(bundle, vl_convert.javascript_bundle())  # type: ignore[call-arg]
        runs.atomic_write_text(stamp, version)
    runs.atomic_write_text(js_dir / "charts.js", CHARTS_JS)
    runs.atomic_write_text(docs_dir / "assets" / "stylesheets" / "batchmark.css", SITE_CSS)
    return [bundle, stamp, js_dir / "charts.js", docs_dir / "assets" / "stylesheets" / "batchmark.css"]
