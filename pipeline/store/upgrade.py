"""``batchmark upgrade``: a run's stored files rewritten at the current schema versions, never a number changed.

The one write a complete run allows (:func:`upgrade_run`): every versioned file of the run is read and
migrated (:mod:`pipeline.store.schemas`), a point of schema version 2 gets its requests moved to the Parquet
file beside its JSON (checked lossless first), and each file is then replaced atomically through the
store's writers (:mod:`pipeline.store.runs`) under the run's lock.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.core import arrays as point_arrays
from pipeline.store import columnar
from pipeline.core.arrays import PointArrays
from pipeline.core.atomicfiles import atomic_write_json, read_json
from pipeline.core.errors import BatchmarkError
from pipeline.store.pointfiles import inline_records, point_header
from pipeline.store.runlock import lock_run
from pipeline.store.runs import write_requests
from pipeline.store.schemas import AnalysisFile, ModelCardFile, PointRecordsFile, RunFile, StoredFile, SummariesFile, migrate


def stored_files(run_dir: Path) -> list[tuple[type[StoredFile], Path]]:
    """Every versioned file of a run with its model: ``run.json``, summaries, analysis, point records, model cards."""
    out: list[tuple[type[StoredFile], Path]] = [(RunFile, run_dir / "run.json")]
    out += [(cls, run_dir / name) for cls, name in ((SummariesFile, "summaries.json"), (AnalysisFile, "analysis.json"))
            if (run_dir / name).is_file()]
    out += [(PointRecordsFile, p) for p in sorted((run_dir / "points").glob("*/*.json"))]
    out += [(ModelCardFile, p) for p in sorted((run_dir / "models").glob("*.json"))]
    return out


def upgrade_run(run_dir: Path) -> list[Path]:
    """Rewrite a run's stored files at the current schema versions, in place; returns the files rewritten.

    The one write a complete run allows: the format changes (``schema_version`` and what the
    migrations of :mod:`pipeline.store.schemas` change), never a number.  Every file is read and
    migrated first; when any cannot be read (corrupt, malformed, newer than this batchmark)
    nothing is written.  Each file is then replaced atomically, holding the run's lock, so a
    sweep cannot write into the run meanwhile.  A file already at its current version is left
    untouched.

    Raises:
        BatchmarkError: a file cannot be read (named); the run is being measured.
    """
    with lock_run(run_dir):
        plan: list[tuple[Path, dict[str, Any], PointArrays | None]] = []
        for cls, path in stored_files(run_dir):
            raw = read_json(path)
            new = migrate(cls, path, raw)
            columns = None
            if cls is PointRecordsFile and new.get("requests_file") is None:
                # version 2 -> 3: the inline requests become the Parquet file beside the JSON
                records = inline_records(path, new)
                columns = point_arrays.from_records(records)
                table = columnar.to_table(columns)
                if point_arrays.to_records(columnar.from_table(table, records.point, columns.repeats, columns.meta,
                                                               path)) != records:  # lossless, or nothing is written
                    raise BatchmarkError(f"{path}: its requests do not survive the columnar form unchanged")
                new = point_header(columns, path)
            if new != raw:
                plan.append((path, new, columns))
        for path, new, columns in plan:
            if columns is not None:
                write_requests(path, columns)
            atomic_write_json(path, new)
    return [path for path, _, _ in plan]
