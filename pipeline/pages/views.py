"""Run views: what the page templates see of one run (its workloads, their points and analysis).

Read through :func:`pipeline.stages.load_run` (reading never writes); rendered by
:mod:`pipeline.pages.render`, used by the explainers (:mod:`pipeline.pages.explain`) too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline import runs
from pipeline.pages.escape import anchor
from pipeline.records import PointKey, workload_of


@dataclass
class Workload:
    """One (model, engine, input_len, output_len) of a run, with its points and analysis."""

    model: dict[str, Any]
    points: list[dict[str, Any]]
    analysis_points: list[dict[str, Any]]
    #: Open-loop points (issue 10), by load, cap and rate; ``points`` and ``analysis_points`` are the
    #: closed-loop grid the concurrency charts and tables show.
    rate_points: list[dict[str, Any]] = field(default_factory=list)

    @property
    def slug(self) -> str:
        """Anchor-safe id (see :func:`anchor`)."""
        m = self.model
        return anchor(f"{m['model']}-in{m['input_len']}-out{m['output_len']}".replace(".", "-"))

    def point(self, concurrency: int) -> dict[str, Any] | None:
        """The point summary at a concurrency, or None."""
        return next((p for p in self.points if p["concurrency"] == concurrency), None)

    def quality(self, concurrency: int) -> dict[str, Any]:
        """The analysis' flags of a point (``flags``, ``excluded``, ``excluded_reason``, ``failure_rate``)."""
        return next((a for a in self.analysis_points if a["concurrency"] == concurrency), {})

    def note(self, concurrency: int) -> str:
        """Short note on a flagged point for the tables (``""`` when unflagged); see :func:`pipeline.show.point_note`."""
        from pipeline.quality import point_verdict
        from pipeline.show import point_note

        p, a = self.point(concurrency) or {}, self.quality(concurrency)
        flags = a.get("flags") or sorted(set(p.get("flags") or {}) | ({"failed_requests"} if p.get("failed") else set()))
        return point_note({**p, "flags": flags, "flag_counts": p.get("flags") or {}, "excluded": a.get("excluded"),
                           "quality": point_verdict(p) if p else None,
                           "implausible": self.implausible_at(concurrency)})

    def rate_rows(self) -> list[dict[str, str]]:
        """Open-loop table rows (issue 10), formatted: offered / sent / achieved rate (req/s), p99 TTFT, TPOT, E2EL (ms),
        SLO (share of requests meeting it, met or not), goodput (req/s), whether the client kept its schedule."""
        def num(v: Any, scale: float = 1.0, digits: int = 2) -> str:
            return "–" if v is None else f"{v * scale:,.{digits}f}"

        rows = []
        for p in self.rate_points:
            slo = p.get("slo") or {}
            rows.append({
                "point": PointKey.of(p).label(), "offered": num(p.get("rate_rps"), digits=3),
                "sent": num(p.get("send_rate_rps"), digits=3), "achieved": num(p.get("achieved_rate_rps"), digits=3),
                **{m: num((p.get(f"{m}_s") or {}).get("p99"), 1e3, 1) for m in ("ttft", "tpot", "e2el")},
                "slo": "–" if not slo else (f"{'met' if slo.get('met') else 'missed'} ({num(slo.get('share_ok'), 100, 0)} % of requests)"),
                "goodput": num(slo.get("goodput_rps"), digits=3),
                "kept": {True: "yes", False: "NO: client fell behind", None: "–"}[p.get("schedule_kept")]})
        return rows

    @property
    def implausible(self) -> str | None:
        """Why this workload's numbers cannot be right (MBU above 1, single stream above its ceiling), or None
        (:func:`pipeline.analysis.implausible_model`; computed when an older analysis.json lacks the field)."""
        from pipeline.analysis import implausible_model

        return self.model.get("implausible") or implausible_model(self.model, self.analysis_points)

    def implausible_at(self, concurrency: int) -> str | None:
        """Why the point at ``concurrency`` cannot be right (its MBU is above 1), or None."""
        from pipeline.analysis import implausible_point

        a = self.quality(concurrency)
        return (a.get("implausible") or implausible_point(a)) if a else None

    def mbu_cell(self, concurrency: int, digits: int = 2) -> str:
        """MBU for a table cell; an impossible one (above 1) is marked as such, never shown as a plain result."""
        v = self.mbu(concurrency)
        if v is None:
            return "–"
        return f"⚠ {v:.{digits}f}: above 1, impossible" if self.implausible_at(concurrency) else f"{v:,.{digits}f}"

    def ceiling_cell(self) -> str:
        """The single-stream ceiling for a table cell, marked when the single stream exceeds it."""
        v = self.model.get("ceiling_tok_s")
        if v is None:
            return "–"
        return f"⚠ {v:,.1f}: exceeded, wrong card or format" if self.implausible else f"{v:,.1f}"

    def flag_summary(self) -> str:
        """Home-table cell: which points are excluded or flagged (``"–"`` when none)."""
        excluded = self.model.get("excluded_concurrency") or []
        flagged = [c for c in self.model.get("flagged_concurrency") or [] if c not in excluded]
        parts = []
        if excluded:
            parts.append("c = " + ", ".join(map(str, excluded)) + " excluded (failures)")
        if flagged:
            parts.append("c = " + ", ".join(map(str, flagged)) + " flagged")
        if self.implausible:
            parts.insert(0, "⚠ implausible: wrong model card or weight format")
        return "; ".join(parts) or "–"

    @property
    def knee_uncertainty(self) -> dict[str, Any]:
        """``knee_per_repeat`` and ``knee_settled`` (:func:`pipeline.analysis.knee_uncertainty_of`)."""
        from pipeline.analysis import knee_uncertainty_of

        return knee_uncertainty_of(self.model, self.points, self.analysis_points)

    @property
    def knee_text(self) -> str:
        """The knee with its uncertainty in words (``"c = 16, not settled: repeats give 16, 32, 16"``)."""
        from pipeline.analysis import knee_words

        u = self.knee_uncertainty
        return knee_words(self.model.get("knee_concurrency"), u["knee_per_repeat"], u["knee_settled"])

    @property
    def knee_spread_text(self) -> str:
        """What follows the knee in :attr:`knee_text` (``", not settled: repeats give 16, 32, 16"``)."""
        from pipeline.analysis import knee_spread_words

        u = self.knee_uncertainty
        return knee_spread_words(self.model.get("knee_concurrency"), u["knee_per_repeat"], u["knee_settled"])

    def mbu(self, concurrency: int) -> float | None:
        """MBU at a concurrency, or None."""
        return next((a.get("mbu") for a in self.analysis_points if a["concurrency"] == concurrency), None)


@dataclass
class RunView:
    """What the templates see of one run."""

    run_id: str
    meta: dict[str, Any]
    analysis: dict[str, Any]
    workloads: list[Workload] = field(default_factory=list)

    @property
    def hardware(self) -> dict[str, Any]:
        """The analysis' hardware block."""
        return self.analysis.get("hardware", {})

    @property
    def quality(self) -> dict[str, Any]:
        """The run's quality verdict (:func:`pipeline.quality.run_quality`): probe warning, disagreeing repeats,
        implausible numbers; computed from the run's own files."""
        if "_quality" not in self.__dict__:
            from pipeline.quality import run_quality

            self.__dict__["_quality"] = run_quality(
                self.meta, [p for w in self.workloads for p in w.points],
                [{**w.model, "implausible": w.implausible} for w in self.workloads])
        return self.__dict__["_quality"]

    @property
    def flagged(self) -> bool:
        """True when the run's quality verdict is ``flagged`` (sorts after clean runs: False < True)."""
        return self.quality["verdict"] == "flagged"

    @property
    def quality_text(self) -> str:
        """The verdict in one line for tables (:func:`pipeline.quality.verdict_text`)."""
        from pipeline.quality import verdict_text

        return verdict_text(self.quality)


def view_of(res: "runs.RunResults") -> RunView:
    """The :class:`RunView` of a run read by :func:`pipeline.stages.load_run`."""
    meta, analysis = res.meta, res.analysis
    summaries = [x.as_dict() for x in res.summaries]
    view = RunView(run_id=res.run_dir.name, meta=meta, analysis=analysis)
    # grouped once by workload: linear in the points (issue 9 "Scale": a scan per workload was quadratic)
    by_key: dict[tuple, list[dict[str, Any]]] = {}
    for s in summaries:
        by_key.setdefault(workload_of(s), []).append(s)
    aps_by_key: dict[tuple, list[dict[str, Any]]] = {}
    for a in analysis.get("points", []):
        aps_by_key.setdefault(workload_of(a), []).append(a)
    def closed(p: dict[str, Any]) -> bool:
        return p.get("load", "closed") == "closed"

    for m in analysis.get("models", []):
        key = workload_of(m)
        mine = by_key.get(key, [])
        pts = sorted((s for s in mine if closed(s)), key=lambda s: s["concurrency"])
        rate_pts = sorted((s for s in mine if not closed(s)), key=lambda s: PointKey.of(s).sort_key())
        view.workloads.append(Workload(model=m, points=pts, rate_points=rate_pts,
                                       analysis_points=[a for a in aps_by_key.get(key, []) if closed(a)]))
    return view


def hardware_name(view: RunView) -> str:
    """The hardware a run was measured on, as pages group runs (``"unknown hardware"`` when unnamed)."""
    return str(view.hardware.get("name") or "unknown hardware")


def clean_first(views: list[RunView]) -> list[RunView]:
    """``views`` in their order, except that a flagged run comes after every clean run when a clean run of its
    hardware exists (a flagged run is never listed first over a clean one of the same hardware; issue 13)."""
    clean_hw = {hardware_name(v) for v in views if not v.flagged}
    return sorted(views, key=lambda v: v.flagged and hardware_name(v) in clean_hw)


def headline_runs(views: list[RunView]) -> list[dict[str, Any]]:
    """Home's headline: per hardware, its newest clean run (the newest run when none is clean).

    Returns ``[{"hardware", "view", "older": [run views], "sentence"}]`` sorted by hardware name;
    the sentence says what the chart shows, one clause per model (peak, knee with its uncertainty).
    """
    by_hw: dict[str, list[RunView]] = {}
    for v in sorted(views, key=lambda v: v.run_id, reverse=True):
        by_hw.setdefault(str(v.hardware.get("name") or "unknown hardware"), []).append(v)
    out = []
    for hw, vs in sorted(by_hw.items()):
        head = next((v for v in vs if not v.flagged), vs[0])
        clauses = []
        for w in head.workloads:
            m = w.model
            peak = m.get("peak_output_throughput_tok_s")
            clauses.append(f"{m['model']} ({m['input_len']} in / {m['output_len']} out) "
                           + (f"peaks at {peak:,.1f} tok/s at c = {m.get('peak_concurrency')}, knee {w.knee_text}"
                              if peak else "measured nothing"))
        sentence = (f"On {hw}, run {head.run_id}" + (" (flagged: no clean run on this hardware)" if head.flagged else "")
                    + ": " + ("; ".join(clauses) if clauses else "no models") + ".")
        out.append({"hardware": hw, "view": head, "older": [v for v in vs if v is not head], "sentence": sentence})
    return out
