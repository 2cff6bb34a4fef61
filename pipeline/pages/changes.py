"""The "Changes" page: each run diffed against the previous run of the same hardware and workload.

For every complete run that has a predecessor (:func:`pipeline.diff.previous_runs`), the page
shows the comparability headline, a chart of the relative change per concurrency (one panel
per model and metric family; filled marks are significant at α, hollow ones are ``~``), and
the diff's Markdown tables.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import altair as alt

from pipeline import paths, runs
from pipeline.diff import METRIC_BY_KEY, RunDiff, diff_runs, format_markdown, previous_runs, provenance_of

CHART_METRICS = ("output_throughput_tok_s", "per_user_tok_s", "ttft_p50_s", "tpot_p50_s")


def change_rows(d: RunDiff) -> list[dict[str, Any]]:
    """Chart data: one row per (point, charted metric) with the change in percent (None dropped)."""
    rows = []
    for c in d.changes:
        if c.metric not in CHART_METRICS or c.change is None:
            continue
        rows.append({"model": c.model, "workload": f"{c.model} · in {c.input_len} / out {c.output_len}",
                     "concurrency": c.concurrency, "metric": METRIC_BY_KEY[c.metric].label,
                     "change_pct": round(c.change * 100, 3),
                     "significance": "significant" if c.significant else "~ (not significant)",
                     "verdict": c.verdict, "p_value": c.p_value, "a": c.a, "b": c.b})
    return rows


def changes_chart(d: RunDiff) -> alt.FacetChart:
    """Relative change (B − A) / A in percent vs concurrency (log2 axis), a panel per workload.

    Colour is the metric; filled points are significant changes, hollow points are noise (``~``).
    """
    data = alt.Data(values=change_rows(d))
    color = alt.Color("metric:N", title="metric", sort=[METRIC_BY_KEY[k].label for k in CHART_METRICS])
    x = alt.X("concurrency:Q", scale=alt.Scale(type="log", base=2), title="concurrency")
    y = alt.Y("change_pct:Q", title="change B vs A (%)")
    tooltip = ["workload:N", "metric:N", "concurrency:Q", alt.Tooltip("change_pct:Q", format="+.1f", title="change %"),
               "significance:N", alt.Tooltip("p_value:Q", format=".3g", title="p")]
    zero = alt.Chart().mark_rule(color="gray", strokeDash=[4, 4]).encode(y=alt.datum(0))
    lines = alt.Chart().mark_line(opacity=0.6).encode(x=x, y=y, color=color)
    points = alt.Chart().mark_point(size=80, strokeWidth=2).encode(
        x=x, y=y, color=color, tooltip=tooltip,
        fill=alt.condition("datum.significance == 'significant'", alt.Color("metric:N", legend=None),
                           alt.value("white")))
    return alt.layer(zero, lines, points, data=data).facet(
        facet=alt.Facet("workload:N", title=None), columns=2
    ).properties(title=f"{d.run_b['run_id']} vs {d.run_a['run_id']}")


BUNDLE_PATH = Path("js") / "vega-bundle.js"


def write_vega_bundle(docs_dir: Path) -> Path:
    """Write the Vega, Vega-Lite and vega-embed JavaScript (vl-convert's bundle) into the docs dir once."""
    import vl_convert

    path = docs_dir / BUNDLE_PATH
    if not path.is_file():
        runs.atomic_write_text(path, vl_convert.javascript_bundle())
    return path


def _script_json(obj: Any) -> str:
    """JSON safe inside a ``<script>`` element (no ``</`` sequence can close it)."""
    return json.dumps(obj).replace("</", "<\\/")


def _environment():
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(paths.root() / "templates")),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


def page_name(run_id: str) -> str:
    """Docs-dir path of a run's Changes page (``changes/<run_id>.md``); the Runs page links here."""
    return f"changes/{run_id}.md"


def render_run_page(d: RunDiff, use_directory_urls: bool = True) -> str:
    """Markdown of one run's Changes page: headline, the chart (embedded Vega-Lite) and the diff tables."""
    md = format_markdown(d)
    tables = md.split("\n", 1)[1].lstrip("\n")  # the headline is placed under the title instead
    depth = 2 if use_directory_urls else 1  # changes/<id>/ (directory URLs) or changes/<id>.html
    return _environment().get_template("changes_run.md.j2").render(
        run_a=d.run_a["run_id"], run_b=d.run_b["run_id"], hardware=d.run_b["hardware"], alpha=f"{d.alpha:g}",
        headline=d.headline, chart_id="changes-chart", bundle_src="../" * depth + BUNDLE_PATH.as_posix(),
        spec_json=_script_json(changes_chart(d).to_dict()), diff_tables=tables)


def render_changes(runs_dir: Path | None = None, docs_dir: Path | None = None, alpha: float = 0.05,
                   use_directory_urls: bool = True) -> list[Path]:
    """Write the Changes pages for every complete run under ``runs_dir`` into ``docs_dir``.

    ``changes/index.md`` lists each run with its predecessor (same hardware and workload,
    :func:`pipeline.diff.previous_runs`); ``changes/<run_id>.md`` holds one comparison.  The
    Vega JavaScript is written to ``js/vega-bundle.js`` so the charts work offline.

    Returns:
        The paths written.

    Raises:
        BatchmarkError: a run's files are corrupt (named in the message).
    """
    runs_dir = runs_dir or paths.runs_dir()
    docs_dir = docs_dir or (paths.data_dir() / "pages")
    loaded = {r.run_id: r for r in (runs.load_run_results(p, runs_dir) for p in runs.list_runs(runs_dir))}
    prev = previous_runs([(rid, provenance_of(r)) for rid, r in loaded.items()])
    written: list[Path] = []
    rows, firsts = [], []
    for run_id in sorted(loaded, reverse=True):
        if prev[run_id] is None:
            firsts.append(run_id)
            continue
        d = diff_runs(loaded[prev[run_id]], loaded[run_id], alpha=alpha)
        path = docs_dir / page_name(run_id)
        runs.atomic_write_text(path, render_run_page(d, use_directory_urls))
        written.append(path)
        rows.append({"run_a": prev[run_id], "run_b": run_id, "hardware": d.run_b["hardware"], "link": f"{run_id}.md",
                     "better": sum(c.verdict == "better" for c in d.changes),
                     "worse": sum(c.verdict == "worse" for c in d.changes), "headline": d.headline.replace("|", "\\|")})
    index = docs_dir / "changes" / "index.md"
    runs.atomic_write_text(index, _environment().get_template("changes_index.md.j2").render(rows=rows, firsts=sorted(firsts)))
    written.append(index)
    if rows:
        written.append(write_vega_bundle(docs_dir))
    return written
