"""After ``kill -9`` nothing temporary is published: a killed atomic write's ``.<name>.<random>.tmp`` file is not
in the complete run, and a killed merge's hidden assembling copy is cleaned by the next writer at once.

Fault kind: temporary files of interrupted writers left in published output (the rename-into-place pattern of
POSIX ``rename(2)``, https://pubs.opengroup.org/onlinepubs/9699919799/functions/rename.html, leaves the temporary
file when the writer dies between write and rename).
"""

from __future__ import annotations

import os

from pipeline.core import paths
from pipeline.store import runids, runs
from tests import runbuilder as rb


def test_a_killed_writers_tmp_file_is_not_in_the_complete_run(scratch_root):
    run = rb.make_run(paths.runs_dir(), "KILLED", models=("dense-a",), concurrency=(1,), noise=(1.0,), complete=False)
    left = run / "points" / "dense-a" / ".transformers-in64-out16-c2.json.abc123.tmp"
    left.write_text("{\"half")
    (run / ".run.json.x9y8.tmp").write_text("")
    runs.complete_run(run)
    assert runs.is_complete(run)
    assert sorted(p.name for p in run.rglob("*.tmp")) == []
    assert (run / "points.json").is_file()


def test_a_dead_owners_assembling_copy_is_removed_at_once(tmp_path):
    """A merge killed a minute ago (well under STALE_TMP_S = 600 s) by this host: its pid is dead, so its copy goes;
    a live owner's copy stays, and one of another host waits for the age rule."""
    pid = next(p for p in range(4_194_303, 4_000_000, -1) if not runids._alive(p))  # at Linux's pid_max: no process
    host = runids.tmp_prefix("x").split("@", 1)[1].rstrip(".")
    killed = tmp_path / f".R1.pid{pid}@{host}.abc.tmp"
    alive = tmp_path / f".R2.pid{os.getpid()}@{host}.abc.tmp"
    other = tmp_path / f".R3.pid{pid}@another-host.abc.tmp"
    for p in (killed, alive, other):
        p.mkdir()
    removed = runids.clean_stale_tmp(tmp_path)
    assert removed == [killed] and alive.is_dir() and other.is_dir()
