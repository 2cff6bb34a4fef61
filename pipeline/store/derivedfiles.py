"""A run's derived files read back (``summaries.json``, ``analysis.json``), as stored: their versions checked and
migrated, the summaries typed point by point.  They are written by the stages of :mod:`pipeline.analysis.stages`;
reading computes nothing."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from pipeline.core.errors import BatchmarkError
from pipeline.core.pointsummary import PointSummary, summary_mismatch
from pipeline.store.runs import read_stored
from pipeline.store.schemas import AnalysisFile, SummariesFile


def read_summaries(run_dir: Path) -> list[PointSummary]:
    """Point summaries of a run (``summaries.json``).

    Raises:
        BatchmarkError: the file cannot be read (:func:`read_stored`), or a point's field is missing or not of its
            type (:func:`pipeline.core.pointsummary.summary_mismatch`): one line naming the file, the point and the field.
    """
    data = read_stored(SummariesFile, run_dir / "summaries.json")
    for i, d in enumerate(data["points"]):
        if err := summary_mismatch(d):
            arg = shlex.quote(str(run_dir))
            raise BatchmarkError(f"{run_dir / 'summaries.json'}: points[{i}]: {err}; write it again with "
                                 f"`batchmark write-summaries {arg} && batchmark analyze {arg}` (an imported run: import it again)")
    try:
        return [PointSummary.from_dict(d) for d in data["points"]]
    except (KeyError, TypeError) as exc:
        raise BatchmarkError(f"{run_dir / 'summaries.json'}: malformed summaries ({exc})") from None


def read_analysis(run_dir: Path) -> dict[str, Any]:
    """``analysis.json`` of a run (version checked, migrated), as stored."""
    return read_stored(AnalysisFile, run_dir / "analysis.json")
