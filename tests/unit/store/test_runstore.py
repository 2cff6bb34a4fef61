"""The store that owns a run's life: ``run.json`` built in one place, a run built elsewhere published
in one rename or not at all, and the sweep's, the importers' and the merge's runs all written through it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.store import runs
from pipeline.core.errors import BatchmarkError
from pipeline.store.schemas import RunFile


def test_run_json_is_stamped_and_keeps_the_provenance_order():
    doc = runs.run_json("r1", "complete", {"source": "measured", "status": "incomplete", "run_id": "x", "b": 1, "a": 2})
    assert list(doc) == ["schema_version", "run_id", "status", "source", "b", "a"]
    assert doc["schema_version"] == RunFile.current and doc["run_id"] == "r1" and doc["status"] == "complete"
    with pytest.raises(ValueError):
        runs.run_json("r1", "done", {})


def test_assembling_publishes_a_complete_run_whole(tmp_path: Path):
    store = runs.RunStore(tmp_path / "runs")
    claimed = store.claim("r1")
    with store.assembling(claimed) as tmp:
        assert tmp.parent == claimed.parent and tmp.name.startswith(".r1.") and tmp.name.endswith(".tmp")
        runs.atomic_write_json(tmp / "run.json", runs.run_json("r1", "complete", {"source": "imported:x"}))
        (tmp / "summaries.json").write_text("{}")
        assert not (claimed / "run.json").exists()  # nothing visible before the rename
    assert store.read("r1")["status"] == "complete" and (claimed / "summaries.json").is_file()
    assert not runs.claim_marker(claimed).exists()  # the claim is filled
    assert store.list() == [claimed]
    assert [p.name for p in (tmp_path / "runs").iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize("what", ["error", "incomplete", "other id"])
def test_assembling_publishes_nothing_on_failure_and_frees_the_claim(tmp_path: Path, what: str):
    store = runs.RunStore(tmp_path / "runs")
    claimed = store.claim("r1")
    with pytest.raises((BatchmarkError, RuntimeError)) as exc:
        with store.assembling(claimed, release_claim=True) as tmp:
            status, run_id = ("incomplete", "r1") if what == "incomplete" else ("complete", "r2" if what == "other id" else "r1")
            runs.atomic_write_json(tmp / "run.json", runs.run_json(run_id, status, {}))
            if what == "error":
                raise RuntimeError("importer failed half way")
    if what != "error":
        assert "not a complete run r1" in str(exc.value) and "\n" not in str(exc.value)
    assert not claimed.exists() and not runs.claim_marker(claimed).exists()  # the id is free again
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [".locks"]  # and no temporary folder is left


def test_assembling_never_overwrites_a_run(tmp_path: Path):
    store = runs.RunStore(tmp_path / "runs")
    run = store.claim("r1")
    store.create(run, {"source": "measured"})
    with pytest.raises(BatchmarkError, match="holds files already"):
        with store.assembling(run) as tmp:
            runs.atomic_write_json(tmp / "run.json", runs.run_json("r1", "complete", {}))
    assert json.loads((run / "run.json").read_text())["status"] == "incomplete"


def test_swap_in_replaces_a_derived_run(tmp_path: Path):
    out = tmp_path / "ref"
    out.mkdir()
    (out / "run.json").write_text("old")
    built = tmp_path / "scratch" / "ref"
    built.mkdir(parents=True)
    (built / "run.json").write_text("new")
    runs.swap_in(built, out)
    assert (out / "run.json").read_text() == "new" and not built.exists()
    assert list((tmp_path / "scratch").iterdir()) == []
