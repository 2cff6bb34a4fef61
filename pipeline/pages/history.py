"""A lab's history on the Changes page: each workload's figures across all its runs on the same hardware, and the
steps found in them.

Runs are grouped as the Changes page pairs them (:func:`pipeline.diff.comparability.comparison_key`: hardware, engine,
input/output lengths); within a group of two or more runs, each workload (model, engine, lengths) gets one value
per run of each figure in :data:`FIGURES` (a median over the run's repeats, from its summaries), oldest run
first.  A step is a place where the history moves to a new level, found by penalized least squares
(:func:`pipeline.diff.stats.detect_steps` with :func:`pipeline.diff.stats.step_penalty`; asv's step detection idea),
not only the difference to the previous run.  This module builds the view objects and the chart spec; the
wording is in ``templates/changes.md.j2``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import altair as alt

from pipeline.diff.comparability import comparison_key, provenance_of
from pipeline.diff.stats import detect_steps, step_penalty
from pipeline.core.pointsummary import PointSummary
from pipeline.core.records import Workload, workload_of
from pipeline.pages.charts import WIDTH, from_skeleton

#: (key, label, higher is better) of each figure drawn per run.
FIGURES: tuple[tuple[str, str, bool], ...] = (
    ("peak_tok_s", "peak output tok/s", True),
    ("single_stream_tok_s", "per-user tok/s, lowest c", True),
    ("ttft_p50_ms", "TTFT p50 (ms), lowest c", False),
    ("tpot_p50_ms", "TPOT p50 (ms), lowest c", False),
)
FIGURE_LABEL = {k: label for k, label, _ in FIGURES}


def run_figures(summaries: list[PointSummary]) -> dict[Workload, dict[str, float]]:
    """One value of each :data:`FIGURES` entry per workload of one run (closed-loop points only).

    ``peak_tok_s``: the highest output throughput over the concurrencies (each a median over repeats);
    the others at the lowest concurrency measured: per-user tok/s, TTFT p50 and TPOT p50 in ms.  A figure the
    run does not have is left out.
    """
    by_wl: dict[Workload, list[PointSummary]] = {}
    for s in summaries:
        if s.load == "closed":
            by_wl.setdefault(workload_of(s), []).append(s)
    out: dict[Workload, dict[str, float]] = {}
    for wl, pts in by_wl.items():
        pts = sorted(pts, key=lambda s: s.concurrency or 0)  # closed-loop points: each has its concurrency
        first = pts[0]
        vals: dict[str, float | None] = {
            "peak_tok_s": max((s.output_throughput_tok_s for s in pts if s.output_throughput_tok_s is not None),
                              default=None),
            "single_stream_tok_s": first.per_user_tok_s,
            "ttft_p50_ms": first.ttft_s["p50"] if first.ttft_s else None,
            "tpot_p50_ms": first.tpot_s["p50"] if first.tpot_s else None,
        }
        for k in ("ttft_p50_ms", "tpot_p50_ms"):
            vals[k] = None if vals[k] is None else vals[k] * 1e3  # type: ignore[operator]
        out[wl] = {k: float(v) for k, v in vals.items() if v is not None}
    return out


def levels(values: list[float], steps: list[int]) -> list[float]:
    """The fitted level of every value: the mean of its segment between steps."""
    bounds = [0, *steps, len(values)]
    out: list[float] = []
    for a, b in zip(bounds, bounds[1:]):
        m = sum(values[a:b]) / (b - a)
        out += [m] * (b - a)
    return out


@dataclass
class HistoryView:
    """One group's history: its runs (oldest first), the chart, and the steps found."""

    hardware: str
    engine: str
    workloads: str
    runs: list[str]
    spec: dict[str, Any]
    steps: list[dict[str, str]] = field(default_factory=list)
    #: Runs flagged for a busy machine, drawn but left out of the steps: ``{"run", "moved"}`` (their largest move
    #: from the level of the clean runs, e.g. "TPOT p50 (ms), lowest c −70.0 %"), so "No step" never stands alone
    #: beside a flagged run's drop.
    flagged: list[dict[str, str]] = field(default_factory=list)


def _largest_move(moves: dict[str, tuple[float, str]], rid: str, label: str, v: float, level: float | None) -> None:
    """Keep in ``moves`` the largest relative move of a flagged run's figure from the clean runs' level, in place."""
    if level:
        move = v / level - 1
        if abs(move) > abs(moves.get(rid, (0.0, ""))[0]):
            moves[rid] = (move, label)


def _busy(res: Any) -> bool:
    """Whether a run's quality verdict says the machine was busy or changed while it measured
    (:func:`pipeline.analysis.quality.run_quality`'s ``interference``)."""
    from pipeline.analysis.quality import run_quality

    q = run_quality(res.meta, [s.as_dict() for s in res.summaries], (res.analysis or {}).get("models") or [])
    return bool(q.get("interference"))


def history_views(loaded: dict[str, Any]) -> list[HistoryView]:
    """The history of every group of two or more runs (``loaded``: run id → :class:`pipeline.analysis.stages.RunResults`).

    Each group's chart has one panel per workload × figure; a step is reported as the run the new level begins
    with, the levels before and after and their relative change.  A run flagged for a busy machine is drawn but
    takes no part in finding steps (no level, no step at it: a flagged run is no finding).
    """
    groups: dict[tuple[Any, ...], list[str]] = {}
    for rid, r in loaded.items():
        groups.setdefault(comparison_key(provenance_of(r)), []).append(rid)
    views = []
    for key, rids in sorted(groups.items(), key=lambda kv: str(kv[0])):
        if len(rids) < 2:
            continue
        rids = sorted(rids)
        per_run = {rid: run_figures(loaded[rid].summaries) for rid in rids}
        # a run measured on a busy machine is drawn but finds no step (no finding from a flagged run)
        busy = {rid: _busy(loaded[rid]) for rid in rids}
        rows: list[dict[str, Any]] = []
        steps: list[dict[str, str]] = []
        moves: dict[str, tuple[float, str]] = {}
        workloads = sorted({wl for figs in per_run.values() for wl in figs})
        for wl in workloads:
            name = wl.label()
            for fig, label, _ in FIGURES:
                series = [(i, rid, per_run[rid][wl][fig]) for i, rid in enumerate(rids) if fig in per_run[rid].get(wl, {})]
                if not series:
                    continue
                values = [v for _, _, v in series]
                quiet = [x for x in series if not busy[x[1]]]
                qvalues = [v for _, _, v in quiet]
                found = detect_steps(qvalues, step_penalty(qvalues)) if len(qvalues) >= 3 else []
                fitted = dict(zip((rid for _, rid, _ in quiet), levels(qvalues, found))) if qvalues else {}
                mid = sorted(values)[len(values) // 2] or 1.0
                for i, rid, v in series:
                    lv = fitted.get(rid)
                    if busy[rid]:  # its move from the latest clean level before it (else the first after it)
                        before = [fitted[q] for _, q, _ in quiet if q < rid] or [fitted[q] for _, q, _ in quiet]
                        _largest_move(moves, rid, f"{name}: {label}", v, before[-1] if before else None)
                    rows.append({"workload": name, "figure": label, "run": i + 1, "run_id": rid, "value": round(v, 4),
                                 "flagged": busy[rid],
                                 "pct": round((v / mid - 1) * 100, 2),
                                 "level_pct": None if lv is None else round((lv / mid - 1) * 100, 2)})
                levels_q = [fitted[rid] for _, rid, _ in quiet]
                for s in found:
                    lo, hi = levels_q[s - 1], levels_q[s]
                    steps.append({"workload": name, "figure": label, "run": quiet[s][1],
                                  "before": f"{lo:.4g}", "after": f"{hi:.4g}",
                                  "change": f"{(hi - lo) / lo * 100:+.1f}%" if lo else "–"})
        views.append(HistoryView(hardware=str(key[0]), engine=str(key[1]), workloads=", ".join(key[2]), runs=rids,
                                 spec=history_chart(rows, f"{key[0]} · {key[1]}: each workload across {len(rids)} runs, "
                                                          "% from its median run (dashed: the levels between steps)"),
                                 steps=steps,
                                 flagged=[{"run": rid, "moved": f"{moves[rid][1]} {moves[rid][0] * 100:+.1f} %" if rid in moves
                                           else "no figure beside a clean run's"} for rid in rids if busy[rid]]))
    return views


def history_chart(rows: list[dict[str, Any]], title: str) -> dict[str, Any]:
    """Vega-Lite spec: each figure per run (x: the run's place, oldest = 1) as % from the history's median run, a panel per
    workload × figure on one shared y scale (so a ±0.5 % wiggle stays flat beside a −20 % step; the tooltip gives the
    value itself); solid line and points: the run, dashed line: the fitted level between steps."""
    return from_skeleton(("history",), _history_skeleton, {"history": rows}, title=title)


def _history_skeleton() -> alt.TopLevelMixin:
    """The chart of :func:`history_chart` with placeholder data (built once)."""
    data = alt.Data(name="history")
    order = [label for _, label, _ in FIGURES]
    x = alt.X("run:O", title="run (oldest first)")
    y = alt.Y("pct:Q", title="% from the median run")
    color = alt.Color("figure:N", sort=order, legend=None)
    tooltip = ["workload:N", "figure:N", "run_id:N", alt.Tooltip("flagged:N", title="flagged (busy machine)"),
               alt.Tooltip("value:Q", format=".4g"),
               alt.Tooltip("pct:Q", format="+.1f", title="% from median")]
    line = alt.Chart().mark_line(point=True).encode(x=x, y=y, color=color, tooltip=tooltip)
    level = alt.Chart().mark_line(strokeDash=[4, 3], color="gray").encode(x=x, y="level_pct:Q")
    layered = alt.layer(line, level, data=data).properties(width=WIDTH // 4, height=110)
    return (layered.facet(row=alt.Row("workload:N", title=None, header=alt.Header(labelAngle=0, labelAlign="left",
                                                                                 labelLimit=200)),
                          column=alt.Column("figure:N", title=None, sort=order, header=alt.Header(labelLimit=160)))
            .properties(title="placeholder"))
