"""The stage runners: the metrics and analysis stages that write a run's derived files, and :func:`load_run`.

Storage (the run folder, its files, their versions) is :mod:`pipeline.runs`; the pure
computations are :mod:`pipeline.metrics` and :mod:`pipeline.analysis`.  This module joins them:

- :func:`write_summaries` (``batchmark summarize``): request records -> ``summaries.json``;
- :func:`write_analysis` (``batchmark analyze``): summaries + model cards + hardware -> ``analysis.json``;
- :func:`analysis_of`: the same analysis in memory (importers, and runs not analysed yet);
- :func:`load_run`: one run read whole for ``show``, ``diff`` and ``pages``; a derived file
  missing from a complete run is computed in memory, never written: only the stages write.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.analysis import analyze
from pipeline.config import EXCLUSION_FAILURE_RATE
from pipeline.errors import BatchmarkError
from pipeline.knee import KNEE_THRESHOLD
from pipeline.metrics import summarize_run
from pipeline.modelcards import ModelCard
from pipeline.pointsummary import PointSummary
from pipeline.pointfiles import load_points
from pipeline.runs import (atomic_write_json, load_model_cards, model_card_path, read_analysis, read_run_json,
                           read_summaries, resolve_run)
from pipeline.schemas import AnalysisFile, SummariesFile, stamped


def slo_of(meta: dict[str, Any]) -> dict[str, float | None] | None:
    """The SLO of a run's config (``run.json`` ``config.slo``: ms limits), None when it has none."""
    slo = (meta.get("config") or {}).get("slo")
    return dict(slo) if isinstance(slo, dict) else None


def write_summaries(run_dir: Path) -> Path:
    """Metrics stage: summarise every stored point into ``summaries.json``.

    Imported runs carry no request records; their importer wrote the summaries, which are
    kept as they are.
    """
    meta = read_run_json(run_dir)
    out = run_dir / "summaries.json"
    if str(meta.get("source", "measured")).startswith("imported:"):
        if not out.is_file():
            raise BatchmarkError(f"{run_dir}: imported run has no summaries.json")
        return out
    if meta.get("status") != "complete":
        raise BatchmarkError(f"{run_dir}: run is incomplete; finish the sweep first")
    summaries = summarize_run(load_points(run_dir), slo_of(meta))
    atomic_write_json(out, stamped(SummariesFile, {"run_id": run_dir.name, "points": [s.as_dict() for s in summaries]}))
    return out


def analysis_of(run_dir: Path, meta: dict[str, Any], summaries: list[PointSummary]) -> dict[str, Any]:
    """Analyse a run in memory: its summaries, its model cards and hardware, its config's knee threshold.

    Raises:
        BatchmarkError: a model card file of the run is malformed (the file is named).
    """
    cards = {}
    for name, d in load_model_cards(run_dir).items():
        try:
            cards[name] = ModelCard.from_dict(d, source=str(model_card_path(run_dir, name)))
        except TypeError as exc:
            raise BatchmarkError(f"{model_card_path(run_dir, name)}: malformed model card ({exc})") from None
    threshold = (meta.get("config") or {}).get("knee_threshold", KNEE_THRESHOLD)
    max_failed = (meta.get("config") or {}).get("max_failure_rate", EXCLUSION_FAILURE_RATE)
    servers = ((meta.get("engine") or {}).get("servers") or {})
    limits = {name: srv.get("limits") for name, srv in servers.items() if isinstance(srv, dict) and srv.get("limits")}
    return analyze(summaries, cards, meta.get("hardware") or {}, meta.get("probe"), threshold, max_failed, limits)


def write_analysis(run_dir: Path) -> Path:
    """Analysis stage: ``summaries.json`` + model cards + hardware -> ``analysis.json``."""
    result = analysis_of(run_dir, read_run_json(run_dir), read_summaries(run_dir))
    out = run_dir / "analysis.json"
    atomic_write_json(out, stamped(AnalysisFile, {"run_id": run_dir.name, **result}))
    return out


@dataclass
class RunResults:
    """Everything later stages read of one complete run: provenance, point summaries, analysis.

    Attributes:
        run_dir: the run folder.
        meta: ``run.json`` (provenance).
        summaries: point summaries (``summaries.json``, or computed from the records in memory
            when that file was not written yet, by :func:`pipeline.stages.load_run`).
        analysis: ``analysis.json`` (or computed in memory the same way).
        partial: the run is incomplete (``allow_incomplete``): its finished points only.
    """

    run_dir: Path
    meta: dict[str, Any]
    summaries: list[PointSummary]
    analysis: dict[str, Any]
    partial: bool = False

    @property
    def run_id(self) -> str:
        """The run id (``run.json``'s ``run_id``, else the folder name)."""
        return str(self.meta.get("run_id") or self.run_dir.name)


def load_run(ref: str | Path, runs_dir: Path | None = None, allow_incomplete: bool = False) -> RunResults:
    """Read a run (id or path) whole, without writing anything into it: the one way ``show``, ``diff`` and ``pages`` read a run.

    Derived files missing from a complete measured run are computed in memory from its
    records, so a diff, ``show`` or ``pages`` never writes into the runs it reads: only the
    ``summarize`` and ``analyze`` stages write ``summaries.json`` and ``analysis.json``.
    With ``allow_incomplete`` an unfinished run is read too: its finished points, ``partial`` set.

    Raises:
        BatchmarkError: unknown run (the message names ``ref``); the run is incomplete (an
            unfinished sweep is reported, never compared, so half a grid is never mixed into
            a diff); an imported run without ``summaries.json``; corrupt files (named).
    """
    run_dir = resolve_run(ref, runs_dir)
    meta = read_run_json(run_dir)
    if meta.get("status") != "complete" and not allow_incomplete:
        raise BatchmarkError(f"run {run_dir.name} is incomplete (run.json status {meta.get('status')!r}); "
                             f"resume it with `batchmark sweep --resume {run_dir.name}` before comparing it")
    if (run_dir / "summaries.json").is_file():
        summaries = read_summaries(run_dir)
    elif str(meta.get("source", "measured")).startswith("imported:"):
        raise BatchmarkError(f"{run_dir}: imported run has no summaries.json")
    else:
        summaries = summarize_run(load_points(run_dir), slo_of(meta))
    if (run_dir / "analysis.json").is_file():
        analysis = read_analysis(run_dir)
    else:
        analysis = analysis_of(run_dir, meta, summaries)
    return RunResults(run_dir=run_dir, meta=meta, summaries=summaries, analysis=analysis,
                      partial=meta.get("status") != "complete")
