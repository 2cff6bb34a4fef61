"""What every importer shares: the parsed result, a point's summary, the atomic run write.

An importer turns another tool's output into :class:`~pipeline.core.pointsummary.PointSummary` rows
(fields the source cannot supply stay None, :func:`summary`) plus what it says of each model
(:class:`~pipeline.importers.cardmatch.ModelInfo`), as an :class:`ImportResult`;
:func:`write_imported_run` stores it as a complete run (``source: imported:<format>``) built in
a temporary folder and renamed into place, so a failure never leaves a partial run.  Reading the
files is :mod:`~pipeline.importers.parsing`, checking the points :mod:`~pipeline.importers.checks`,
finding each model's card :mod:`~pipeline.importers.cardmatch`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pipeline import __version__
from pipeline.core import paths, scrub
from pipeline.core.errors import BatchmarkError
from pipeline.importers.cardmatch import ModelInfo, match_card
from pipeline.importers.importsecrets import redact_import
from pipeline.cards.modelcards import ModelCard
from pipeline.core.pointsummary import PointSummary
from pipeline.store.schemas import ModelCardFile, SummariesFile, stamped
from pipeline.analysis.stages import write_derived


@dataclass
class ImportResult:
    """What an importer read: points, models, and the provenance of the source."""

    format: str
    tool: str
    tool_version: str | None
    files: list[str]
    summaries: list[PointSummary]
    models: dict[str, ModelInfo] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    #: ``run.json`` ``variants`` (``[{name, baseline, settings}]``, baseline first) where the source measured several
    #: server settings (``vllm bench sweep serve --serve-params``); empty: one server, its points of variant ``default``.
    variants: list[dict[str, Any]] = field(default_factory=list)


def summary(model: str, engine: str, input_len: int, output_len: int, concurrency: int | None,
            failures_unknown: str | None = None, **kw: Any) -> PointSummary:
    """A :class:`PointSummary` with every field the source does not give set to None.

    ``concurrency`` is the closed loop's N; None for an open-loop point (pass ``load``, ``rate_rps``,
    ``completed`` and its cap ``max_concurrency`` then, None when uncapped).  ``failures_unknown``: why the source
    states no failed count (one line, kept in ``errors``); the point then has the caveat ``failed_count_unknown``
    over its completed requests and no failure rate (never 0 passed off as measured).
    """
    base: dict[str, Any] = dict(
        repeats=1, completed=concurrency or 0, failed=0, output_throughput_tok_s=None, per_user_tok_s=None,
        ttft_s=None, ttft_with_queue_s=None, tpot_s=None, itl_s=None, e2el_s=None,
        prefill_throughput_tok_s=None, step_time_s=None)
    base.update(kw)
    out = PointSummary(model=model, engine=engine, input_len=int(input_len), output_len=int(output_len),
                       concurrency=int(concurrency) if concurrency is not None else None, **base)
    out.key  # noqa: B018  (a closed point without a concurrency, an open one without a rate: a bug here)
    if out.output_throughput_window is None:  # the static-batch importers say "decode_phase" themselves
        out.output_throughput_window = "send_to_completion" if out.output_throughput_tok_s is not None else None
    if failures_unknown:
        out.caveats["failed_count_unknown"] = out.completed
        out.failure_rate = None
        out.errors.append(failures_unknown)
    return out


def write_imported_run(result: ImportResult, hardware: str, run_id: str | None = None,
                       runs_dir: Path | None = None) -> Path:
    """Store an import as a complete run under ``runs_dir/<run_id>/`` atomically; return its folder.

    Writes ``run.json`` (``source: imported:<format>``, the tool, its version, the source
    files, the hardware profile, the engine(s) and the import command; ``config`` and
    ``probe`` are null: nothing was configured or probed here), ``models/<model>.json`` and ``summaries.json``
    into a temporary sibling folder, where the analysis stage writes ``analysis.json`` from them
    (:func:`pipeline.analysis.stages.write_derived`) before the store publishes it in one rename
    (:func:`pipeline.store.runs.assembling`; ``run.json`` built by :func:`pipeline.store.runs.run_json`).

    Raises:
        BatchmarkError: unknown hardware profile, a run of that id exists, nothing to import.
    """
    from pipeline.store import runs
    from pipeline.machine.hardware import load_profile

    hw = load_profile(hardware, field="--hardware")
    result = redact_import(result)  # a server combination's key (--serve-params api_key) is no published setting
    if not result.summaries:
        raise BatchmarkError(f"{', '.join(result.files)}: no points found")
    runs_dir = runs_dir or paths.runs_dir()
    runs.clean_stale_tmp(runs_dir)  # temporary folders of imports killed mid-way (kill -9)
    runs.clean_stale_claims(runs_dir)  # and the empty run folders they had claimed
    # the empty run folder is the claim (mkdir is atomic); the store builds the run beside it and renames it over it,
    # holding the run's lock, so that a claim left by a killed import is known stale (runs.is_stale_claim)
    final = runs.claim_run_dir(runs_dir, runs.check_run_id(run_id) if run_id else None, host=f"{hw.name}-import")
    with runs.lock_run(final):
        return _build_imported_run(result, hw, final, runs_dir)


def _build_imported_run(result: ImportResult, hw: Any, final: Path, runs_dir: Path) -> Path:
    """Build the run claimed as ``final`` in a temporary sibling folder and rename it over the claim (lock held)."""
    from pipeline.store import runs

    run_id = final.name
    # the importer's summaries are the run's metrics; the analysis stage writes analysis.json from them before the
    # run is published (stages.write_derived keeps an import's summaries.json as it is)
    with runs.assembling(final, release_claim=True, derive=write_derived) as tmp:
        cards: dict[str, ModelCard] = {}
        matches: dict[str, str] = {}
        unknown: dict[str, str] = {}
        for name in sorted({s.model for s in result.summaries}):
            found = match_card(name, result.models.get(name))
            if found.card is not None:
                cards[name] = found.card
                matches[name] = found.how
            else:
                unknown[name] = found.how
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        engines = sorted({s.engine for s in result.summaries})
        tool = f"{result.tool} {result.tool_version}" if result.tool_version else result.tool
        # files relative to the repository, other machine folders replaced (pipeline.core.scrub): runs are published
        files = [scrub.relative_path(str(Path(f).resolve())) for f in result.files]
        command = f"batchmark import {result.format} {' '.join(files)} --hardware {hw.name} --run-id {run_id}"
        runs.atomic_write_json(tmp / "run.json", runs.run_json(run_id, "complete", {
            "source": f"imported:{result.format}", "source_tool": result.tool,
            "source_version": result.tool_version,
            "source_files": files,
            "source_details": result.details,
            "models_as_named": {k: v.raw_name for k, v in result.models.items()},
            "models_without_card": sorted({s.model for s in result.summaries} - set(cards)),
            "model_cards_used": matches,
            "models_unknown": {k: f"{v}; kind, ceiling, roofline and MBU are null" for k, v in unknown.items()},
            "hardware": hw.model_dump(mode="json"), "probe": None, "config": None,
            "server": {"engine": f"{', '.join(engines)} (measured by {tool})"},
            "versions": {result.tool: result.tool_version, "batchmark": __version__},
            **({"variants": result.variants} if result.variants else {}),
            "stopped": {}, "command": command,
            "imported_at": now, "finished_at": now}))
        for name, card in cards.items():
            runs.atomic_write_json(runs.model_card_path(tmp, name), stamped(ModelCardFile, card.as_dict()))
        ordered = sorted(result.summaries, key=lambda s: s.key.sort_key())
        runs.atomic_write_json(tmp / "summaries.json", stamped(SummariesFile, {
            "run_id": run_id, "points": [s.as_dict() for s in ordered]}))
    return final
