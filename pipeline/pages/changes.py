"""The "Changes" page: each run diffed against the previous run of the same hardware and workload.

For every complete run on the site that has a predecessor (:func:`previous_runs`:
same hardware, engine and input/output lengths, a model in common), the page shows the
comparability headline, what differs in the provenance, a chart of the relative change per
concurrency (a panel per workload; filled points are significant at α, hollow ones are ``~``),
the significant changes, the per-model figures, points in one run only, and every metric in a
collapsed table.  This module turns runs into view objects and chart specs; the wording is in
``templates/changes.md.j2``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import altair as alt

from pipeline.diff.comparability import comparison_key, provenance_of
from pipeline.diff.rundiff import RunDiff, diff_runs
from pipeline.diff.metrics import METRIC_BY_KEY
from pipeline.diff.report import figure_words, format_change, format_value_ci, model_cell, provenance_cells
from pipeline.pages import escape
from pipeline.pages.charts import WIDTH, from_skeleton
from pipeline.pages.history import history_views
from pipeline.analysis.stages import RunResults, load_run

CHART_METRICS = ("output_throughput_tok_s", "per_user_tok_s", "ttft_p50_s", "tpot_p50_s")
SIGNIFICANT = "significant"
NOISE = "~ (not significant)"


def previous_runs(provenances: list[tuple[str, dict[str, Any]]]) -> dict[str, str | None]:
    """For each run, the latest earlier run of the same hardware and workload (None for the first).

    Args:
        provenances: ``[(run_id, provenance_of(run)), ...]`` in any order; run ids sort by
            start time (``YYYYMMDDTHHMMSSZ-<host>``), so "earlier" is "sorts before".

    Returns:
        ``{run_id: previous run_id or None}``; a run must also share at least one model with
        its predecessor, else the search goes further back.
    """
    out: dict[str, str | None] = {}
    ordered = sorted(provenances, key=lambda x: x[0])
    for i, (run_id, prov) in enumerate(ordered):
        out[run_id] = next((rid for rid, p in reversed(ordered[:i])
                            if comparison_key(p) == comparison_key(prov) and set(p["models"]) & set(prov["models"])),
                           None)
    return out


def change_rows(d: RunDiff) -> list[dict[str, Any]]:
    """Chart data: one row per (matched point, charted metric) with the change in percent; unknown changes are left out."""
    rows = []
    for c in d.changes:
        if c.metric not in CHART_METRICS or c.change is None or c.load != "closed":
            continue  # the chart's x axis is the concurrency; open-loop points are in the table
        rows.append({"workload": f"{model_cell(c.model, c.variant)} · in {c.input_len} / out {c.output_len}",
                     "concurrency": c.concurrency, "metric": METRIC_BY_KEY[c.metric].label,
                     "change_pct": round(c.change * 100, 3), "significance": SIGNIFICANT if c.significant else NOISE,
                     "p_value": None if c.p_value is None else float(f"{c.p_value:.3g}")})  # 3 digits: what the tooltip shows
    return rows


def changes_chart(d: RunDiff) -> dict[str, Any]:
    """Vega-Lite spec: relative change (B − A) / A in percent vs concurrency (log2 axis), a panel per workload × metric.

    Each metric has its own panel and its own y scale (``resolve_scale(y="independent")``): on one
    shared axis a TTFT rise of +2,500 % flattened a −85 % throughput drop to a line on zero
   .  Rows are workloads, columns metrics; filled points are
    significant changes, hollow points are noise (``~``); the dashed rule is no change.
    """
    return from_skeleton(("changes",), _changes_skeleton, {"changes": change_rows(d)},
                         title=f"{d.run_b['run_id']} vs {d.run_a['run_id']}: relative change per concurrency, "
                               "each metric on its own scale")


def _changes_skeleton() -> alt.TopLevelMixin:
    """The chart of :func:`changes_chart` with placeholder data (built once)."""
    data = alt.Data(name="changes")
    order = [METRIC_BY_KEY[k].label for k in CHART_METRICS]
    color = alt.Color("metric:N", title="metric", sort=order, legend=None)
    x = alt.X("concurrency:Q", scale=alt.Scale(type="log", base=2), axis=alt.Axis(title="concurrency"))
    y = alt.Y("change_pct:Q", title="change, B vs A (%)")
    tooltip = ["workload:N", "metric:N", "concurrency:Q", alt.Tooltip("change_pct:Q", format="+.1f", title="change %"),
               "significance:N", alt.Tooltip("p_value:Q", format=".3g", title="p")]
    zero = alt.Chart().mark_rule(color="gray", strokeDash=[4, 4]).encode(y=alt.datum(0))
    lines = alt.Chart().mark_line(opacity=0.6).encode(x=x, y=y, color=color)
    points = alt.Chart().mark_point(size=80, strokeWidth=2).encode(
        x=x, y=y, color=color, tooltip=tooltip,
        fill=alt.condition(f"datum.significance == '{SIGNIFICANT}'", alt.Color("metric:N", sort=order, legend=None),
                           alt.value("white")))
    layered = alt.layer(zero, lines, points, data=data).properties(width=WIDTH // 3, height=150)
    return (layered.facet(row=alt.Row("workload:N", title=None, header=alt.Header(
                              labelAngle=0, labelAlign="left", labelLimit=200, labelFontSize=12)),
                          column=alt.Column("metric:N", title=None, sort=order,
                                            header=alt.Header(labelFontSize=13, labelFontWeight="bold")))
            .resolve_scale(y="independent").properties(title="placeholder"))


def _cell(v: Any) -> str:
    if v is None:
        return "–"
    return str(v).replace("|", "\\|")


@dataclass
class ComparisonView:
    """What ``changes.md.j2`` shows of one comparison (strings ready for Markdown tables)."""

    run_a: str
    run_b: str
    diff: RunDiff
    spec: dict[str, Any]
    provenance: list[dict[str, str]] = field(default_factory=list)
    significant: list[dict[str, str]] = field(default_factory=list)
    #: Changes the statistics called that a flag took back (:mod:`pipeline.diff.withhold`): shown in the place of the
    #: verdict, never as "within noise".
    withheld: list[dict[str, str]] = field(default_factory=list)
    models: list[dict[str, str]] = field(default_factory=list)
    every: list[dict[str, str]] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        """Heading id of this comparison on the Changes page (the Runs page links to it)."""
        return anchor(self.run_b)

    @property
    def every_on_page(self) -> bool:
        """Whether the table of every metric at every point is on the page (:data:`EVERY_ROWS_ON_PAGE`)."""
        return len(self.every) <= EVERY_ROWS_ON_PAGE

    @property
    def every_csv(self) -> str:
        """Where the table of every metric at every point is as CSV, relative to the docs dir (always written)."""
        return f"downloads/changes/{anchor(self.run_b)}.csv"

    @property
    def n_better(self) -> int:
        """Significant improvements (point × metric)."""
        return sum(c.verdict == "better" for c in self.diff.changes)

    @property
    def n_worse(self) -> int:
        """Significant regressions (point × metric)."""
        return sum(c.verdict == "worse" for c in self.diff.changes)

    @property
    def withheld_why(self) -> list[str]:
        """The distinct reasons no verdict was given (``"run B flagged at this point"`` …), in order of first use."""
        return list(dict.fromkeys(r["withheld"] for r in self.withheld))


def withheld_reason(note: str | None) -> str | None:
    """Why a change the statistics called was given no verdict (the note's ``no verdict: …`` part), or None: only a
    called change is ever withheld (:func:`pipeline.diff.withhold.withhold_flagged`)."""
    if not note or "no verdict: " not in note:
        return None
    return note.split("no verdict: ", 1)[1].split("; ", 1)[0]


#: Rows of "every metric at every point" shown on a comparison's page; more are the page's CSV download only
#: (50 models × 7 points × 8 metrics = 2,800 rows made a 2.34 MB page; 500 rows are about 120 kB).
EVERY_ROWS_ON_PAGE = 500
EVERY_COLUMNS = ("model", "io", "c", "metric", "a", "b", "change", "verdict", "p", "q", "n", "note")


def every_csv(view: "ComparisonView") -> str:
    """The table of every metric at every point of a comparison as CSV (cells through
    :func:`pipeline.pages.escape.csv_cell`; the columns :data:`EVERY_COLUMNS`, ``io`` = in / out, ``n`` = repeats A + B)."""
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(EVERY_COLUMNS)
    for r in view.every:
        w.writerow([escape.csv_cell(str(r.get(k, ""))) for k in EVERY_COLUMNS])
    return buf.getvalue()


def anchor(run_id: str) -> str:
    """Heading id of a run's comparison on the Changes page: ``changes-<run id, lower case>`` (made id-safe by :func:`pipeline.pages.escape.anchor`)."""
    return escape.anchor(f"changes-{run_id}")


def comparison_view(d: RunDiff) -> ComparisonView:
    """Format one :class:`RunDiff` for the template."""
    view = ComparisonView(run_a=d.run_a["run_id"], run_b=d.run_b["run_id"], diff=d, spec=changes_chart(d))
    for it in d.provenance:
        if it.differs:  # bounded cells, a dict as the keys that differ
            view.provenance += [{"label": _cell(label), "a": _cell(a), "b": _cell(b)}
                                for label, a, b in provenance_cells(it.label, it.a, it.b, none="–")]
    for c in d.changes:
        row = {"model": model_cell(c.model, c.variant), "io": f"{c.input_len} / {c.output_len}", "c": c.point, "metric": c.label,
               "a": format_value_ci(c.a, c.ci95_a, c.unit), "b": format_value_ci(c.b, c.ci95_b, c.unit),
               "change": format_change(c.change, c.unit),
               "p": "–" if c.p_value is None else f"{c.p_value:.3g}", "q": "–" if c.q_value is None else f"{c.q_value:.3g}",
               "n": f"{c.n_a} + {c.n_b}",
               "verdict": c.verdict if c.verdict in ("better", "worse") else "~",
               "note": _cell(c.note) if c.note else "", "withheld": withheld_reason(c.note)}
        if row["withheld"]:  # the verdict's place says why there is none
            row["verdict"] = f"no verdict: {row['withheld']}"
        view.every.append(row)
        if c.significant:
            view.significant.append(row)
        elif row["withheld"]:
            view.withheld.append(row)
    for m in d.models:
        def show(v: Any, fld: str = m.field) -> str:
            return "–" if v is None and fld != "knee_concurrency" else figure_words(fld, v)

        view.models.append({"model": model_cell(m.model, m.variant), "io": f"{m.input_len} / {m.output_len}", "label": m.label,
                            "a": show(m.a), "b": show(m.b),
                            "change": format_change(m.change) if m.change is not None else ("changed" if m.changed else "same")})
    return view


def _load(run_dirs: list[Path], loaded: dict[str, RunResults] | None = None
          ) -> tuple[dict[str, RunResults], dict[str, str | None]]:
    """Each run of ``run_dirs`` read once (``loaded``: runs already read, by folder name) and its predecessor."""
    loaded = dict(loaded or {})
    for rd in run_dirs:
        if rd.name not in loaded:
            loaded[rd.name] = load_run(rd)
    loaded = {rd.name: loaded[rd.name] for rd in run_dirs}
    return loaded, previous_runs([(rid, provenance_of(r)) for rid, r in loaded.items()])


def _loaded_of(views: list[Any]) -> dict[str, RunResults]:
    """The runs the pages already read (:attr:`pipeline.pages.views.RunView.results`), by run id (folder name)."""
    return {v.run_id: v.results for v in views if getattr(v, "results", None) is not None}


def build_comparisons(run_dirs: list[Path], alpha: float = 0.05, loaded: dict[str, RunResults] | None = None
                      ) -> tuple[list[ComparisonView], dict[str, str | None]]:
    """Diff every run among ``run_dirs`` against its predecessor among them (``loaded``: runs already read).

    Returns:
        The comparisons, newest run first, and ``{run_id: previous run_id or None}`` for
        every run (keyed by folder name, as the Runs page names runs).

    Raises:
        BatchmarkError: an unreadable or incomplete run (named in the message).
    """
    loaded, previous = _load(run_dirs, loaded)
    views = [comparison_view(diff_runs(loaded[prev], loaded[rid], alpha=alpha))
             for rid, prev in sorted(previous.items(), reverse=True) if prev is not None]
    return views, previous


def changes_page_context(views: list[Any], run_dirs: list[Path]) -> dict[str, Any]:
    """Template context of ``changes.md`` (a ``PAGE_CONTEXT`` provider): ``comparisons``, ``previous`` and ``histories``
    (:func:`pipeline.pages.history.history_views`: each workload across all its runs on the same hardware, with steps)."""
    loaded = _load(run_dirs, _loaded_of(views))[0]
    comparisons, previous = build_comparisons(run_dirs, loaded=loaded)
    return {"comparisons": clean_comparisons_first(comparisons, views), "previous": previous,
            "histories": history_views(loaded)}


def clean_comparisons_first(comparisons: list[ComparisonView], views: list[Any]) -> list[ComparisonView]:
    """``comparisons`` in their order, except that one with a flagged run (A or B) comes after every comparison
    of clean runs when one of the same hardware exists (a flagged run is never put first)."""
    flagged = {v.run_id for v in views if getattr(v, "flagged", False)}

    def bad(c: ComparisonView) -> bool:
        return c.run_a in flagged or c.run_b in flagged

    clean_hw = {c.diff.run_b["hardware"] for c in comparisons if not bad(c)}
    return sorted(comparisons, key=lambda c: bad(c) and c.diff.run_b["hardware"] in clean_hw)


def runs_page_context(views: list[Any], run_dirs: list[Path]) -> dict[str, Any]:
    """Template context of ``runs.md`` and the run pages: ``previous`` (run id → predecessor or None) and ``changes_anchor``."""
    return {"previous": _load(run_dirs, _loaded_of(views))[1], "changes_anchor": anchor}
