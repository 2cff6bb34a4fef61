"""``batchmark upgrade``'s work: each run's stored files rewritten at the current schema versions, the derived files a
complete run lacks written by their stages (:func:`pipeline.analysis.stages.write_missing`), unreadable runs named."""

from __future__ import annotations

import sys

from pipeline.commands import print  # noqa: A004 (escapes control characters; see pipeline.commands.print)
from pipeline.core.errors import BatchmarkError


def upgrade(run: str | None, *, every: bool = False) -> int:
    """``batchmark upgrade``: rewrite one run's (or ``every`` run's) stored files at the current schema versions, and
    write the derived files (``summaries.json``, ``analysis.json``) a complete run published by an earlier batchmark
    lacks, through their stages (the read path never computes them).

    Returns:
        0; each run and its rewritten files are printed.

    Raises:
        BatchmarkError: neither or both of ``run`` and ``every``; the run cannot be read; with ``every``, any run that
            could not be read (each named on stderr, the others upgraded).
    """
    from pipeline.analysis import stages
    from pipeline.store import runs
    from pipeline.store.upgrade import upgrade_run

    if bool(every) == bool(run):
        raise BatchmarkError("upgrade: give one RUN or --all")
    run_dirs = runs.list_runs(complete_only=False) if every or run is None else [runs.resolve_run(run)]
    unreadable = 0
    for run_dir in run_dirs:
        try:
            rewritten = upgrade_run(run_dir)
            with runs.lock_run(run_dir):  # as upgrade_run: no sweep writes into the run meanwhile
                rewritten += stages.write_missing(run_dir)
        except BatchmarkError as exc:
            if not every:
                raise
            # --all: one rule for runs that cannot be read: each named, the others upgraded
            print(f"batchmark: run {run_dir.name} not upgraded: {exc}", file=sys.stderr)
            unreadable += 1
            continue
        print(f"run {run_dir.name}: " + (f"{len(rewritten)} file(s) rewritten at the current schema versions "
                                         "(or written by their stages where missing)"
                                         if rewritten else "every file already at its current schema version"))
        for path in rewritten:
            print(f"  {path.relative_to(run_dir)}")
    if unreadable:
        raise BatchmarkError(f"upgrade --all: {unreadable} run(s) could not be read (named above); nothing was "
                             "written into them")
    return 0
