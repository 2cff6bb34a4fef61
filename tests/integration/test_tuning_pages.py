"""The tuning section of a model page, built from a run of two variants × two shapes (tests/runbuilder.py
``make_variant_run``), rendered, built with ``mkdocs build --strict`` and opened in headless Chromium.

The frontier chart's own data are read from its Vega view (``el.batchmarkView``) and checked against the
non-dominated points of the run's ``summaries.json``, computed here independently by the definition (a point is
dominated when another is at least as good in output and per-user throughput and better in one); its x and y
scales must hold every drawn point.  Fault kinds pinned: a frontier drawn from the wrong points (a dominated point
on the line, or a frontier point missing) and a chart whose scale cuts its own data off (Vega-Lite keeps an
explicit domain even where data fall outside it, https://vega.github.io/vega-lite/docs/scale.html#domain).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.browser import each_chart, mkdocs_build, offline_context
from tests.conftest import make_scratch_root
from tests.runbuilder import make_variant_run

RUN_ID = "20261129T000000Z-testhost"

#: Every chart's datasets (name -> rows) and continuous scales (name -> [type, domain]) from its Vega view.
VIEW_JS = """(el) => {
  const view = el.batchmarkView;
  if (!view) { return null; }
  const data = {}, scales = {};
  Object.entries(view._runtime.data || {}).forEach(([name, d]) => {
    const v = d && d.values && d.values.value;
    if (Array.isArray(v)) {  // each row's own fields (a tuple may point at the rows it was derived from)
      data[name] = v.map(t => Object.fromEntries(Object.entries(t).filter(([k, x]) =>
        x === null || ['number', 'string', 'boolean'].includes(typeof x))));
    }
  });
  Object.entries(view._runtime.scales || {}).forEach(([name, op]) => {
    const s = op && op.value;
    if (s && typeof s.domain === 'function') { scales[name] = [s.type, s.domain().map(Number)]; }
  });
  return {data: data, scales: scales};
}"""


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("tuning")
    root = make_scratch_root(tmp)
    mp = pytest.MonkeyPatch()
    mp.setenv("BATCHMARK_ROOT", str(root))
    try:
        from pipeline.pages.render import render_site

        run = make_variant_run(root / "data" / "runs", RUN_ID)
        render_site(root / "data" / "pages", runs_dir=root / "data" / "runs", templates_dir=root / "templates")
        res = mkdocs_build(root)
    finally:
        mp.undo()
    assert res.returncode == 0, res.stderr[-3000:]
    return root / "site", run


def _front_by_hand(points: list[dict]) -> set[tuple[str, int]]:
    """The non-dominated (variant, concurrency) pairs of summaries, O(n²) by the definition."""
    def beats(a, b):
        return (a["output_throughput_tok_s"] >= b["output_throughput_tok_s"] and a["per_user_tok_s"] >= b["per_user_tok_s"]
                and (a["output_throughput_tok_s"] > b["output_throughput_tok_s"] or a["per_user_tok_s"] > b["per_user_tok_s"]))
    return {(p["variant"], p["concurrency"]) for p in points if not any(beats(q, p) for q in points)}


@pytest.mark.slow
def test_frontier_chart_draws_exactly_the_non_dominated_points(built):
    site, run = built
    summaries = json.loads((run / "summaries.json").read_text())["points"]
    html = next(site.rglob("models/dense-a/index.html"), None) or next(site.rglob("dense-a*.html"))
    with offline_context() as ctx:
        views = each_chart(ctx, html, VIEW_JS)
    # a frontier chart: a dataset whose rows carry "order" (the line) beside one of per-user/output points
    fronts = [v for v in views if v and any(r and "order" in r[0] for r in v["data"].values() if r)]
    assert len(fronts) == 2  # one per shape
    seen_shapes = set()
    for v in fronts:
        line = next(rows for rows in v["data"].values() if rows and "order" in rows[0])
        dots = next(rows for rows in v["data"].values()
                    if rows and "order" not in rows[0] and "best" not in rows[0] and "per_user_tok_s" in rows[0])
        ring = next(rows for rows in v["data"].values() if rows and "best" in rows[0])
        assert len(ring) == 1 and (ring[0]["variant"], ring[0]["concurrency"]) in {(r["variant"], r["concurrency"]) for r in dots}
        # which shape: the summaries whose (variant, c, output) are the chart's points
        drawn = {(r["variant"], r["concurrency"], round(r["output_tok_s"], 6)) for r in dots}
        shape = next(i for i in {s["input_len"] for s in summaries}
                     if drawn == {(s["variant"], s["concurrency"], round(s["output_throughput_tok_s"], 6))
                                  for s in summaries if s["input_len"] == i})
        seen_shapes.add(shape)
        expected = _front_by_hand([s for s in summaries if s["input_len"] == shape])
        assert {(r["variant"], r["concurrency"]) for r in line} == expected
        assert len(line) == len(expected)
        xs, ys = [r["per_user_tok_s"] for r in dots], [r["output_tok_s"] for r in dots]
        (xt, xd), (yt, yd) = v["scales"]["x"], v["scales"]["y"]
        assert xt == yt == "linear"
        assert xd[0] <= min(xs) and max(xs) <= xd[1] and yd[0] <= min(ys) and max(ys) <= yd[1]
    assert seen_shapes == {64, 256}


def test_page_names_the_best_point_and_what_each_setting_bought(tmp_path):
    """The page text, rendered without a browser.  By hand (tests/runbuilder.py): TPOT = step_s(c) × factors ×
    u (u up to 1.1), the SLO TPOT p99 ≤ 25 ms.  64 in: fp8-kv at c = 16 has 30 ms × 0.7 × 1.1 = 23.1 ms (met) and
    the highest output of the met points; 256 in (× 1.2): fp8-kv c = 16 has 27.7 ms (missed), c = 8 has
    20 × 0.7 × 1.2 × 1.1 = 18.5 ms (met).  The peak output throughput of fp8-kv is at c = 16, every time × 0.7, so
    its throughput is 1 / 0.7 = 1.43× the baseline's: +43 %."""
    from pipeline.pages.render import render_site

    make_variant_run(tmp_path / "runs", RUN_ID)
    written = render_site(tmp_path / "pages", runs_dir=tmp_path / "runs")
    text = next(p for p in written if p.name == "dense-a.md").read_text()
    section = text[text.index("### Tuning"):]
    assert "best under the SLO: fp8-kv at c = 16" in section.split("**256 in")[0]
    assert "best under the SLO: fp8-kv at c = 8" in section.split("**256 in")[1]
    assert "**fp8-kv**: +43 % peak output throughput at c = 16 (64/16)" in section
    assert "TTFT p99 −30 % at c = " in section
    # the arithmetic beside it: fp8 KV halves 16,384 B a token (tests/runbuilder.card); the test H200's Capacity
    # prediction at 64 + 16 tokens: (141 × 0.9 − 1.2) GB / (80 × 16,384 B) = 95,901 sequences, fp8 twice the room
    assert "a token's KV takes 8,192 bytes instead of 16,384" in section
    assert "| default | 64 / 16 |" in section and "| 95901 |" in section and "| 191802 |" in section
