"""The stage runners: the metrics and analysis stages that write a run's derived files, and :func:`load_run`.

Storage (the run folder, its files, their versions) is :mod:`pipeline.store.runs`; the pure
computations are :mod:`pipeline.metrics.summarize` and :mod:`pipeline.analysis.analyze`.  This module joins them:

- :func:`write_summaries` (``batchmark write-summaries``): request records -> ``summaries.json``;
- :func:`write_analysis` (``batchmark analyze``): summaries + model cards + hardware -> ``analysis.json``;
- :func:`write_derived`: both, in order: what every writer of a complete run hands the store to run at
  publish (:func:`pipeline.store.runs.complete_run`, :func:`pipeline.store.runs.assembling`), so a run is never
  complete without its derived files (the sweep, the merge of parts, the importers; ``batchmark
  upgrade`` writes those an older run lacks);
- :func:`analysis_of`: the analysis in memory (what :func:`write_analysis` stores; a partial run's);
- :func:`load_run`: one run read whole for ``show``, ``diff`` and ``pages``: what the stages stored,
  read back.  A complete run missing a derived file is an error naming the command that produces it;
  nothing is computed.  The one exception is a partial run (``allow_incomplete``: ``show`` of a sweep
  in progress), summarised and analysed in memory and marked ``partial``: its derived files do not
  exist yet and must not (an incomplete run is still being written, and the stages refuse it), yet
  its finished points are worth seeing while the rest are measured.

The run's quality verdict (:func:`pipeline.analysis.quality.run_quality`) is not a stored file: it is a pure
judgement of three stored files (``run.json``'s probe, ``summaries.json``'s repeat spread and outside
load, ``analysis.json``'s implausible workloads) under the limits of the batchmark reading them, so
every run on a page, in a diff or in ``show`` is judged by one rule; it reads no records.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.analysis.analyze import analyze
from pipeline.config.sweepconfig import EXCLUSION_FAILURE_RATE
from pipeline.core.errors import BatchmarkError
from pipeline.analysis.knee import KNEE_THRESHOLD
from pipeline.metrics.summarize import summarize_run
from pipeline.cards.modelcards import ModelCard
from pipeline.core.pointsummary import PointSummary
from pipeline.store.pointfiles import load_points, point_path
from pipeline.core.records import PointKey, workload_of
from pipeline.store.derivedfiles import read_analysis, read_summaries
from pipeline.store.runs import atomic_write_json, load_model_cards, model_card_path, read_run_json, read_json, resolve_run
from pipeline.store.schemas import AnalysisFile, SummariesFile, stamped


def slo_of(meta: dict[str, Any]) -> dict[str, float | None] | None:
    """The SLO of a run's config (``run.json`` ``config.slo``: ms limits), None when it has none."""
    slo = (meta.get("config") or {}).get("slo")
    return dict(slo) if isinstance(slo, dict) else None


def write_summaries(run_dir: Path, *, publishing: bool = False) -> Path:
    """Metrics stage: summarise every stored point into ``summaries.json``; returns its path.

    Imported runs carry no request records; their importer wrote the summaries, which are
    kept as they are.  ``publishing``: the store is publishing the run (:func:`write_derived`), whose
    ``run.json`` still says incomplete until the derived files are written; otherwise the run must be
    complete (the points of an unfinished sweep are not all there).

    Raises:
        BatchmarkError: the run is incomplete (and not being published); an imported run without
            ``summaries.json``; a point file cannot be read (named).
    """
    meta = read_run_json(run_dir)
    out = run_dir / "summaries.json"
    if str(meta.get("source", "measured")).startswith("imported:"):
        if not out.is_file():
            raise BatchmarkError(f"{run_dir}: imported run has no summaries.json (import it again)")
        return out
    if meta.get("status") != "complete" and not publishing:
        raise BatchmarkError(f"{run_dir}: run is incomplete; finish the sweep first")
    summaries = summarize_run(load_points(run_dir), slo_of(meta))
    atomic_write_json(out, stamped(SummariesFile, {"run_id": _run_id(run_dir, meta),
                                                   "points": [s.as_dict() for s in summaries]}))
    return out


def _run_id(run_dir: Path, meta: dict[str, Any]) -> str:
    """The run's id as its ``run.json`` says (a run assembled in a temporary folder has another folder name)."""
    return str(meta.get("run_id") or run_dir.name)


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
    servers = ((meta.get("server") or {}).get("servers") or {})
    limits = {name: srv.get("limits") for name, srv in servers.items() if isinstance(srv, dict) and srv.get("limits")}
    return analyze(summaries, cards, meta.get("hardware") or {}, meta.get("probe"), threshold, max_failed, limits)


def write_analysis(run_dir: Path) -> Path:
    """Analysis stage: ``summaries.json`` + model cards + hardware -> ``analysis.json``; returns its path.

    Raises:
        BatchmarkError: ``summaries.json`` missing or unreadable, a malformed model card (each named).
    """
    meta = read_run_json(run_dir)
    result = analysis_of(run_dir, meta, read_summaries(run_dir))
    out = run_dir / "analysis.json"
    atomic_write_json(out, stamped(AnalysisFile, {"run_id": _run_id(run_dir, meta), **result}))
    return out


def write_derived(run_dir: Path) -> None:
    """The derived files of a run being published: ``summaries.json`` (:func:`write_summaries`), then
    ``analysis.json`` (:func:`write_analysis`) read from it, as ``batchmark write-summaries`` and ``analyze`` write them.

    The hook every writer of a complete run hands the store (``derive=``): :func:`pipeline.store.runs.complete_run`
    calls it after ``points.json`` and before ``run.json`` says complete, :func:`pipeline.store.runs.assembling` before
    the rename, so a reader never finds a complete run without them.
    """
    write_summaries(run_dir, publishing=True)
    write_analysis(run_dir)


def write_missing(run_dir: Path) -> list[Path]:
    """The derived files a complete run lacks, written by their stages (``batchmark upgrade`` of a run published
    without them by an earlier batchmark); returns the files written, ``[]`` when none was missing or the run
    is incomplete (its publish derives them).  Both files present are left as they are (never a number changed);
    without ``summaries.json`` both are written, the analysis from the summaries just written (as the command
    :func:`load_run` names does).

    Raises:
        BatchmarkError: an imported run without ``summaries.json`` (only its import writes them); the stages' errors.
    """
    if read_run_json(run_dir).get("status") != "complete":
        return []
    if not (run_dir / "summaries.json").is_file():
        return [write_summaries(run_dir), write_analysis(run_dir)]
    return [write_analysis(run_dir)] if not (run_dir / "analysis.json").is_file() else []


def produce_command(ref: str | Path, missing: str) -> str:
    """The exact command that writes the derived file ``missing`` (``summaries.json`` or ``analysis.json``) of the
    complete run ``ref`` (its id, or its path), its argument quoted for a shell."""
    arg = shlex.quote(str(ref))
    if missing == "summaries.json":
        return f"batchmark write-summaries {arg} && batchmark analyze {arg}"
    return f"batchmark analyze {arg}"


@dataclass
class RunResults:
    """Everything later stages read of one complete run: provenance, point summaries, analysis.

    Attributes:
        run_dir: the run folder.
        meta: ``run.json`` (provenance).
        summaries: point summaries (``summaries.json``; a partial run's computed in memory from its records).
        analysis: ``analysis.json`` (a partial run's computed in memory).
        partial: the run is incomplete (``allow_incomplete``): its finished points only, nothing of it stored.
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

    A complete run is read as its stages stored it: ``run.json``, ``summaries.json``,
    ``analysis.json``; nothing is computed.  With ``allow_incomplete`` an unfinished run is read
    too: its finished points are summarised and analysed in memory (the module docstring says why
    this is the one exception), ``partial`` set.

    Raises:
        BatchmarkError: unknown run (the message names ``ref``); the run is incomplete (an
            unfinished sweep is reported, never compared, so half a grid is never mixed into
            a diff); a complete run without ``summaries.json`` or ``analysis.json`` (one line naming
            the file and the command that writes it); corrupt files, or a value of the wrong type in them
            (named, with the field); a measured run's ``summaries.json`` that does not summarize exactly the
            point files ``points.json`` lists (:func:`_check_summaries_cover_points`); an ``analysis.json`` of other
            points or workloads than the summaries (:func:`_check_analysis_matches`).
    """
    run_dir = resolve_run(ref, runs_dir)
    meta = read_run_json(run_dir)
    if meta.get("status") != "complete":
        if not allow_incomplete:
            raise BatchmarkError(f"run {run_dir.name} is incomplete (run.json status {meta.get('status')!r}); "
                                 f"resume it with `batchmark sweep --resume {run_dir.name}` first "
                                 "(only `batchmark show` reads a sweep in progress)")
        summaries = summarize_run(load_points(run_dir), slo_of(meta))  # a sweep in progress: nothing stored yet
        return RunResults(run_dir=run_dir, meta=meta, summaries=summaries,
                          analysis=analysis_of(run_dir, meta, summaries), partial=True)
    # the run as the command will find it: as given, unless an id found under another folder than data/runs/
    shown = ref if runs_dir is None or (Path(ref) / "run.json").is_file() else run_dir
    for name in ("summaries.json", "analysis.json"):
        if not (run_dir / name).is_file():
            if name == "summaries.json" and str(meta.get("source", "measured")).startswith("imported:"):
                raise BatchmarkError(f"{run_dir / name}: missing; an imported run's summaries are written by its "
                                     "import: import it again (`batchmark import ...`)")
            raise BatchmarkError(f"{run_dir / name}: missing from the complete run {run_dir.name}; produce it with "
                                 f"`{produce_command(shown, name)}`")
    summaries = read_summaries(run_dir)
    if not str(meta.get("source", "measured")).startswith("imported:"):
        _check_summaries_cover_points(run_dir, summaries, produce_command(shown, "summaries.json"))
    analysis = read_analysis(run_dir)
    _check_analysis_matches(run_dir, summaries, analysis, produce_command(shown, "analysis.json"))
    return RunResults(run_dir=run_dir, meta=meta, summaries=summaries, analysis=analysis)


def _check_analysis_matches(run_dir: Path, summaries: list[PointSummary], analysis: dict[str, Any], command: str) -> None:
    """``analysis.json`` analyses exactly the stored summaries: one point row per summary (by
    :class:`~pipeline.core.records.PointKey`) and one model entry per workload, as :func:`pipeline.analysis.analyze.analyze`
    writes them; a stale or cut analysis would show and publish a run without a model's knee, or MBU of other
    points, without a word.

    Raises:
        BatchmarkError: they differ: one line naming the file, what differs first and ``command``.
    """
    try:
        rows = sorted(PointKey.of(p).sort_key() for p in analysis.get("points") or [])
        workloads = sorted(workload_of(m) for m in analysis.get("models") or [])
    except (KeyError, TypeError, ValueError) as exc:
        raise BatchmarkError(f"{run_dir / 'analysis.json'}: a point or model without its key ({exc}); write it "
                             f"again with `{command}`") from None
    want_rows = sorted(s.key.sort_key() for s in summaries)
    want_workloads = sorted({workload_of(s) for s in summaries})  # one curve per workload and variant
    if rows != want_rows:
        what = f"{len(rows)} point row(s) for the {len(want_rows)} point(s) of summaries.json"
    elif workloads != want_workloads:
        what = f"{len(workloads)} model entr(ies) for the {len(want_workloads)} workload(s) of summaries.json"
    else:
        return
    raise BatchmarkError(f"{run_dir / 'analysis.json'}: does not match summaries.json: {what}; write it again with "
                         f"`{command}`")


def _check_summaries_cover_points(run_dir: Path, summaries: list[PointSummary], command: str) -> None:
    """A measured run's ``summaries.json`` summarizes exactly the point files its ``points.json`` lists (one summary
    each, matched by :func:`pipeline.store.pointfiles.point_path`): a stale or hand-cut file would show, diff and
    publish fewer (or other) points than were measured, without a word.

    Raises:
        BatchmarkError: they differ: one line naming the file, the first point on either side and ``command``.
    """
    index = run_dir / "points.json"
    if not index.is_file():
        return
    listed = read_json(index).get("points")
    if not isinstance(listed, list):
        raise BatchmarkError(f"{index}: points: expected a list of point files")
    summarized = [str(point_path(Path(), s.key)) for s in summaries]
    missing = sorted(set(listed) - set(summarized))
    extra = sorted(set(summarized) - set(listed))
    if missing or extra or len(summarized) != len(set(summarized)):
        what = (f"{len(missing)} point(s) of points.json not summarized (first: {missing[0]})" if missing else
                f"{len(extra)} summary(ies) of no point file in points.json (first: {extra[0]})" if extra else
                "a point summarized twice")
        raise BatchmarkError(f"{run_dir / 'summaries.json'}: does not match the run's points: {what}; write it again "
                             f"with `{command}`")
