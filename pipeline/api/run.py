"""``load_run(path)``: a stored run as a typed, validated view, for programs that read batchmark's results.

A thin face over the store's readers (:func:`pipeline.analysis.stages.load_run`, the one way ``show``, ``diff`` and
the pages read a run): ``run.json`` as :class:`pipeline.store.schemas.RunFile`, the point summaries as
:class:`pipeline.core.pointsummary.PointSummary`, ``analysis.json`` as :class:`pipeline.store.schemas.AnalysisFile`,
and :meth:`Run.show`, the run's ``show --json`` document as :class:`pipeline.views.showcontract.ShowDocument`.
Every file is checked on the way in (its version, its fields' types, summaries against points, analysis against
summaries); reading never writes into the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline.analysis import stages
from pipeline.core.contracts import validate
from pipeline.core.pointsummary import PointSummary
from pipeline.core.records import PointKey
from pipeline.store.schemas import AnalysisFile, RunFile
from pipeline.views.show import show_run
from pipeline.views.showcontract import ShowDocument


@dataclass(frozen=True)
class Run:
    """One stored run, read whole and checked.

    Attributes:
        path: the run folder.
        run: ``run.json``: provenance (``hardware``, ``config``, ``server``; ``probe``, ``versions`` and the rest in
            ``run.model_extra``) and ``status``.
        summaries: one point summary per point (``summaries.json``): throughputs in tok/s, latencies
            ``{"p50", "p90", "p99", "mean"}`` in s.
        analysis: ``analysis.json``: per point MBU, MFU and regime, per workload ceiling, knee and peak.
        partial: an incomplete run read with ``allow_incomplete`` (its finished points, summarised in memory).
    """

    path: Path
    run: RunFile
    summaries: tuple[PointSummary, ...]
    analysis: AnalysisFile
    partial: bool = False

    @property
    def run_id(self) -> str:
        """The run id (``run.json``'s ``run_id``, else the folder name)."""
        return self.run.run_id or self.path.name

    @property
    def points(self) -> tuple[PointKey, ...]:
        """Every point's key (model, engine, variant, lengths, concurrency or rate), in the summaries' order."""
        return tuple(s.key for s in self.summaries)

    def show(self) -> ShowDocument:
        """The run's ``show --json`` document, validated against its published contract."""
        return validate(ShowDocument, show_run(self.path))


def load_run(path: str | Path, *, allow_incomplete: bool = False) -> Run:
    """The run at ``path`` (a run folder, or a run id under ``data/runs/``), typed and validated.

    Raises:
        BatchmarkError: unknown run, an incomplete one (unless ``allow_incomplete``), a complete run without
            ``summaries.json`` or ``analysis.json``, or a file whose version or values are wrong: one line naming
            the file, the field and the command that writes it.
    """
    res = stages.load_run(path, allow_incomplete=allow_incomplete)
    return Run(path=res.run_dir, run=RunFile.model_validate(res.meta), summaries=tuple(res.summaries),
               analysis=AnalysisFile.model_validate(res.analysis), partial=res.partial)
