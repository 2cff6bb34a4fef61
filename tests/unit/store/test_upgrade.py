"""``batchmark upgrade``: a run's files rewritten at the current schema versions, format only.

On a copy of a run written before schema version 3 (``tests/data/runs-v1/``, the committed run of that
id before its upgrade): its unversioned model cards (version 1) come out at version 2 (their label stored
once), its point record files come out at version 3 (a repeat's ``kind`` named ``batching``; the requests moved to a Parquet file
beside the JSON), its ``run.json`` at version 2 (the command's machine path made relative to
the repository), every number of every file is equal before and after, and the pages render byte for
byte the same from the upgraded copy (the records download, which zips the raw files, aside).
"""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path
from typing import Any

import pytest

from pipeline import cli
from pipeline.store import pointfiles, schemas, upgrade
from pipeline.core.errors import BatchmarkError
from pipeline.core.records import PointRecords

COMMITTED = Path(__file__).resolve().parents[3] / "tests" / "data" / "runs-v1" / "20261129T161329Z-vm"


@pytest.fixture
def run(tmp_path: Path) -> Path:
    dst = tmp_path / "runs" / COMMITTED.name
    shutil.copytree(COMMITTED, dst)
    return dst


def _snapshot(run_dir: Path) -> dict[str, Any]:
    return {str(p.relative_to(run_dir)): json.loads(p.read_text()) for p in sorted(run_dir.rglob("*.json"))}


def _leaves(obj: Any, where: str = "") -> dict[str, Any]:
    """Every number and string of a JSON document by its path, ``schema_version`` left out."""
    if isinstance(obj, dict):
        return {k2: v for k, val in obj.items() if k != "schema_version" for k2, v in _leaves(val, f"{where}/{k}").items()}
    if isinstance(obj, list):
        return {k2: v for i, val in enumerate(obj) for k2, v in _leaves(val, f"{where}/{i}").items()}
    return {where: obj}


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_upgrade_stamps_the_old_files_and_changes_no_number(run: Path, tmp_path: Path, capsys):
    from pipeline.pages.render import render_site

    before = _snapshot(run)
    render_site(tmp_path / "pages-before", runs_dir=run.parent)
    assert all("schema_version" not in d for k, d in before.items() if k.startswith("models/"))

    assert cli.main(["upgrade", str(run)]) == 0
    assert "models/dense-llama-190m.json" in capsys.readouterr().out

    after = _snapshot(run)
    assert set(after) == set(before)
    for name in before:
        if name.startswith("points/"):
            # point records 1 -> 4: a repeat's "kind" is named "batching" (2); the requests are the Parquet file
            # named by requests_file (3); (4 moves an open-loop cap, and these points are closed); every other value
            # of the JSON equal, every request read back equal
            # (5: the point says its variant, default)
            assert schemas.version_of(name, after[name]) == schemas.PointRecordsFile.current == 5
            assert after[name]["requests_file"] == pointfiles.requests_path(run / name).name
            kept = {k.replace("/kind", "/batching"): v for k, v in _leaves(before[name]).items()
                    if not (k.startswith("/repeats/") and k.split("/")[3] == "requests")}
            kept["/point/variant"] = "default"
            assert {k: v for k, v in _leaves(after[name]).items() if k != "/requests_file"} == kept
            assert pointfiles.load_point(run / name) == PointRecords.from_dict(
                schemas.migrate(schemas.PointRecordsFile, name, before[name]))
            continue
        if name == "run.json":
            # run.json 1 -> 2: the command, recorded with the measuring machine's absolute path, is made relative to
            # the repository (committed runs carry no machine path); (2 -> 3 splits the SLO's keys, and this
            # run has none); every other value equal
            # (3 -> 4 states the run's one variant, default)
            # (4 -> 5: engine is server, driver gpu_driver, the config's engine its backend; values as stored)
            assert schemas.version_of(name, after[name]) == schemas.RunFile.current == 5
            assert after[name]["variants"] == [{"name": "default", "baseline": True, "settings": {}}]
            assert before[name]["command"] == ("/work/main/pipeline/__main__.py sweep --config config/default.yaml "
                                               "--run-id 20261129T161329Z-vm --pointer")
            assert after[name]["command"] == ("pipeline/__main__.py sweep --config config/default.yaml "
                                              "--run-id 20261129T161329Z-vm --pointer")
            words = (("/engine/", "/server/"), ("/driver", "/gpu_driver"), ("/config/engine", "/config/backend"))

            def renamed(k: str) -> str:
                return next((new + k[len(old):] for old, new in words if k.startswith(old)), k)

            assert {k: v for k, v in _leaves(after[name]).items() if k != "/command" and not k.startswith("/variants/")} == \
                {renamed(k): v for k, v in _leaves(before[name]).items() if k != "/command"}
            continue
        if name == "analysis.json":
            # analysis 1 -> 2: the hardware block's *_measured (the probe's figures) are *_probed; (2 -> 3
            # renames an open-loop cap and a point's flags, which this run written before both has not)
            # (3 -> 4: every point and model says its variant, default)
            assert schemas.version_of(name, after[name]) == schemas.AnalysisFile.current == 4
            old, new = ("/kind", "/batching") if name.startswith("points/") else ("_measured", "_probed")
            assert _leaves(after[name]) == {**{k.replace(old, new): v for k, v in _leaves(before[name]).items()},
                                            **{f"/{part}/{i}/variant": "default" for part in ("points", "models")
                                               for i in range(len(before[name][part]))}}
            continue
        if name.startswith("models/"):
            # card 1 -> 2: the weights' label, stored twice, is kept once as "quantization"
            assert schemas.version_of(name, after[name]) == 2
            assert before[name]["dtype"] == before[name]["quantization"]
            assert _leaves(after[name]) == {k: v for k, v in _leaves(before[name]).items() if k != "/dtype"}, name
            assert next(iter(after[name])) == "schema_version"  # old -> new: the card now says its version
        elif name == "summaries.json":
            # summaries 1 -> 2: every point says its open-loop cap, max_concurrency (null: these are closed)
            # (2 -> 3: every point says its variant, default)
            assert schemas.version_of(name, after[name]) == schemas.SummariesFile.current == 3
            n = len(before[name]["points"])
            assert _leaves(after[name]) == {**_leaves(before[name]),
                                            **{f"/points/{i}/max_concurrency": None for i in range(n)},
                                            **{f"/points/{i}/variant": "default" for i in range(n)}}
        else:
            assert _leaves(after[name]) == _leaves(before[name]), name  # every number (and string) equal
            assert schemas.version_of(name, after[name]) == 1
            assert (run / name).read_text() == (COMMITTED / name).read_text()  # already current: untouched
    render_site(tmp_path / "pages-after", runs_dir=run.parent)
    # every page the same, and every JSON download: run.json, summaries and analysis are published at the current
    # version whatever version the run stores (the download of a run not yet upgraded said "flags" and the old SLO
    # keys beside its pages and summaries.csv; breaker trial, 2026-12-01); the records download holds the raw point
    # files, so it carries their new format
    pages_after, pages_before = _tree(tmp_path / "pages-after"), _tree(tmp_path / "pages-before")
    zips = [k for k in pages_before if k.endswith("records.zip")]
    downloads = [k for k in pages_before if k.startswith("downloads/")
                 and k.endswith(("analysis.json", "run.json", "summaries.json"))]
    # (the Methodology page shows the command: relative on both sides, since a file is read migrated)
    assert b"<code>pipeline/&#95;&#95;main&#95;&#95;.py sweep" in pages_before["methodology.md"]
    assert zips and len(downloads) == 3 and {k: v for k, v in pages_after.items() if k not in zips} == \
        {k: v for k, v in pages_before.items() if k not in zips}
    for k in downloads:  # the current version, byte for byte what upgrade wrote into the run
        assert pages_after[k] == (run / k.split("/", 2)[2]).read_bytes(), k
    for k in zips:
        with zipfile.ZipFile(tmp_path / "pages-after" / k) as za, zipfile.ZipFile(tmp_path / "pages-before" / k) as zb:
            # each point's JSON, now with its Parquet file beside it
            assert za.namelist() == sorted(zb.namelist() + [n.removesuffix(".json") + ".parquet" for n in zb.namelist()])

    assert upgrade.upgrade_run(run) == []  # a second upgrade has nothing to do


def test_upgrade_runs_the_migrations_and_writes_the_new_version(run: Path, monkeypatch):
    def update_to_2(d: dict[str, Any]) -> dict[str, Any]:
        d["extra"] = {**(d.get("extra") or {}), "card_format": 2}
        return d

    monkeypatch.setattr(schemas.ModelCardFile, "current", 2)
    monkeypatch.setattr(schemas.ModelCardFile, "updates", {2: update_to_2})
    rewritten = [p for p in upgrade.upgrade_run(run) if p.parent.name == "models"]
    assert len(rewritten) == 2
    card = json.loads(rewritten[0].read_text())
    assert card["schema_version"] == 2 and card["extra"]["card_format"] == 2


def test_upgrade_refuses_a_file_it_cannot_read_and_writes_nothing(run: Path, capsys):
    (run / "analysis.json").write_text(json.dumps({**json.loads((run / "analysis.json").read_text()),
                                                   "schema_version": 7}))
    before = _tree(run)
    with pytest.raises(BatchmarkError, match=r"analysis\.json: schema_version 7 is newer"):
        upgrade.upgrade_run(run)
    assert _tree(run) == before
    assert cli.main(["upgrade", str(run)]) == 2
    assert "batchmark: error:" in capsys.readouterr().err


def test_upgrade_help_says_only_the_format_changes(capsys):
    with pytest.raises(SystemExit):
        cli.main(["upgrade", "--help"])
    assert "never a number" in " ".join(capsys.readouterr().out.split())
