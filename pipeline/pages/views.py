"""Run views: what the page templates see of one run (its workloads, their points and analysis).

Read through :func:`pipeline.stages.load_run` (reading never writes); rendered by
:mod:`pipeline.pages.render`, used by the explainers (:mod:`pipeline.pages.explain`) too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline import runs
from pipeline.pages.escape import anchor


@dataclass
class Workload:
    """One (model, engine, input_len, output_len) of a run, with its points and analysis."""

    model: dict[str, Any]
    points: list[dict[str, Any]]
    analysis_points: list[dict[str, Any]]

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
        from pipeline.show import point_note

        p, a = self.point(concurrency) or {}, self.quality(concurrency)
        flags = a.get("flags") or sorted(set(p.get("flags") or {}) | ({"failed_requests"} if p.get("failed") else set()))
        return point_note({**p, "flags": flags, "flag_counts": p.get("flags") or {}, "excluded": a.get("excluded")})

    def flag_summary(self) -> str:
        """Home-table cell: which points are excluded or flagged (``"–"`` when none)."""
        excluded = self.model.get("excluded_concurrency") or []
        flagged = [c for c in self.model.get("flagged_concurrency") or [] if c not in excluded]
        parts = []
        if excluded:
            parts.append("c = " + ", ".join(map(str, excluded)) + " excluded (failures)")
        if flagged:
            parts.append("c = " + ", ".join(map(str, flagged)) + " flagged")
        return "; ".join(parts) or "–"

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


def view_of(res: "runs.RunResults") -> RunView:
    """The :class:`RunView` of a run read by :func:`pipeline.stages.load_run`."""
    meta, analysis = res.meta, res.analysis
    summaries = [x.as_dict() for x in res.summaries]
    view = RunView(run_id=res.run_dir.name, meta=meta, analysis=analysis)
    # grouped once by workload: linear in the points (issue 9 "Scale": a scan per workload was quadratic)
    by_key: dict[tuple, list[dict[str, Any]]] = {}
    for s in summaries:
        by_key.setdefault((s["model"], s["engine"], s["input_len"], s["output_len"]), []).append(s)
    aps_by_key: dict[tuple, list[dict[str, Any]]] = {}
    for a in analysis.get("points", []):
        aps_by_key.setdefault((a["model"], a["engine"], a["input_len"], a["output_len"]), []).append(a)
    for m in analysis.get("models", []):
        key = (m["model"], m["engine"], m["input_len"], m["output_len"])
        pts = sorted(by_key.get(key, []), key=lambda s: s["concurrency"])
        view.workloads.append(Workload(model=m, points=pts, analysis_points=list(aps_by_key.get(key, []))))
    return view
