"""Immutability of run folders: what pipeline/store/runs.py and the sweep already guarantee.

- measuring again makes a new run id: a complete run is never written into again, a fresh
  sweep gets a new id, and the sweep refuses to touch a complete run;
- an incomplete run folder is resumed (same config) or reported (another config), never
  silently mixed with another sweep, and it is never compared or summarised as if whole.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from pathlib import Path

import pytest

from pipeline.analysis import stages
from pipeline.store import derivedfiles, runs
from pipeline.sweep import parts
from pipeline.config.sweepconfig import parse_config
from pipeline.core.errors import BatchmarkError
from pipeline.sweep.gridwalk import run_sweep
from tests.runbuilder import make_run, point_records


def _tree_digest(run_dir: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(run_dir.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(run_dir)).encode() + p.read_bytes())
    return h.hexdigest()


def _cfg():
    return parse_config({"name": "test", "hardware": "cpu", "models": [{"name": "dense-a", "architecture": {"model_type": "llama"}}]})


def test_complete_run_refuses_every_write(tmp_path: Path):
    run = make_run(tmp_path, "20261129T100000Z-a", derived=False)
    before = _tree_digest(run)
    with pytest.raises(BatchmarkError, match="immutable"):
        runs.write_point(run, point_records("dense-a", 32, (1.0,)))
    with pytest.raises(BatchmarkError, match="immutable"):
        runs.update_run_json(run, probe={})
    with pytest.raises(BatchmarkError, match="immutable"):
        runs.complete_run(run)
    with pytest.raises(BatchmarkError, match="never overwritten"):
        runs.create_run(run, {})
    assert _tree_digest(run) == before


def test_a_stored_point_is_never_overwritten(tmp_path: Path):
    run = make_run(tmp_path, "r", complete=False)
    with pytest.raises(BatchmarkError, match="never overwritten"):
        runs.write_point(run, point_records("dense-a", 1, (1.0,)))


def test_measuring_again_makes_a_new_run_id(tmp_path: Path):
    # The pointer keeps a second invocation on the same (complete) run, so nothing is re-measured;
    # asking for a fresh run gives a new id, and ids carry the start time to the second.
    old = runs.new_run_id(datetime(2026, 11, 29, 10, 0, 0, tzinfo=timezone.utc), host="box")
    make_run(tmp_path, old)
    parts.write_pointer("test", old, tmp_path)
    assert parts.run_id_for_config("test", runs_dir=tmp_path) == old
    fresh = parts.run_id_for_config("test", runs_dir=tmp_path, fresh=True)
    assert fresh != old and not (tmp_path / fresh).exists()


def test_sweep_into_a_complete_run_measures_nothing(tmp_path: Path):
    run = make_run(tmp_path, "r")
    before = _tree_digest(run)
    logs: list[str] = []
    assert run_sweep(_cfg(), run, progress=False, log=logs.append) == run
    assert _tree_digest(run) == before and any("complete" in m for m in logs)


def test_incomplete_run_of_another_config_is_reported_not_mixed(tmp_path: Path):
    # runbuilder stores config_digest "testdigest", which no real config hashes to.
    run = make_run(tmp_path, "r", complete=False)
    before = _tree_digest(run)
    with pytest.raises(BatchmarkError, match="another config"):
        run_sweep(_cfg(), run, progress=False, log=lambda m: None)
    assert _tree_digest(run) == before


def test_incomplete_run_is_neither_summarised_nor_compared(tmp_path: Path):
    run = make_run(tmp_path, "r", complete=False)
    with pytest.raises(BatchmarkError, match="incomplete"):
        stages.write_summaries(run)
    with pytest.raises(BatchmarkError, match="r is incomplete"):
        stages.load_run(run)


def test_load_run_never_writes(tmp_path: Path):
    # A complete run without derived files (published by an earlier `batchmark sweep` alone) is refused in one line
    # naming the missing file and the commands that write it; nothing is computed, the folder is unchanged.
    run = make_run(tmp_path, "r", derived=False)
    before = _tree_digest(run)
    with pytest.raises(BatchmarkError) as exc:
        stages.load_run(run)
    msg = str(exc.value)
    assert "\n" not in msg and "summaries.json: missing" in msg
    assert f"`batchmark write-summaries {run} && batchmark analyze {run}`" in msg
    assert _tree_digest(run) == before and not (run / "summaries.json").exists()
    # the stages write them, as a user runs them; then the run reads back exactly what they stored
    stages.write_summaries(run)
    with pytest.raises(BatchmarkError, match=r"analysis.json: missing .*`batchmark analyze {}`".format(run)):
        stages.load_run("r", tmp_path)  # an id under another folder than data/runs/: the command names its path
    stages.write_analysis(run)
    res = stages.load_run(run)
    assert len(res.summaries) == 10 and res.analysis == derivedfiles.read_analysis(run) and not res.partial


def test_partial_run_is_summarised_in_memory_and_labelled(tmp_path: Path):
    # The one exception: a sweep in progress (show reads it with allow_incomplete) has no derived files yet, and
    # gets none from reading: its finished points are summarised in memory, marked partial.
    run = make_run(tmp_path, "r", complete=False, models=("dense-a",), concurrency=(1, 2))
    before = _tree_digest(run)
    res = stages.load_run(run, allow_incomplete=True)
    assert res.partial and len(res.summaries) == 2 and res.analysis["models"]
    assert _tree_digest(run) == before and not (run / "summaries.json").exists()


def test_unknown_run_names_the_ref(tmp_path: Path):
    with pytest.raises(BatchmarkError, match="nosuch"):
        stages.load_run("nosuch", tmp_path)


def test_changed_config_content_gets_a_new_run(tmp_path: Path):
    # Regression (fault kind: config edited after a complete run): the pointer is reused only for the same
    # config content; touching the file keeps the digest, editing it changes the digest and gives a new id.
    old = runs.new_run_id(datetime(2026, 11, 29, 10, 0, 0, tzinfo=timezone.utc), host="box")
    run = make_run(tmp_path, old)
    digest = runs.read_run_json(run).get("config_digest")
    parts.write_pointer("test", old, tmp_path)
    assert parts.run_id_for_config("test", digest, runs_dir=tmp_path) == old
    assert parts.run_id_for_config("test", "another-digest", runs_dir=tmp_path) != old


@pytest.mark.parametrize("bad", ["../../x", "a/b", "..", ".hidden", ""])
def test_run_ids_cannot_escape_the_runs_folder(bad):
    # Regression (fault kind: path traversal through --run-id)
    with pytest.raises(BatchmarkError, match="not a valid run id"):
        runs.check_run_id(bad)
