"""Run ids are unique without waiting ("Also": two imports or sweeps on one host within one second).

Fault kind pinned: the second of two runs started in the same second got the same
``YYYYMMDDTHHMMSSZ-<host>`` id and was refused ("already exists").
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone

import pytest

from pipeline.store import runids, runs
from pipeline.core.errors import BatchmarkError
from pipeline.importers import import_run

from tests.conftest import DATA

WHEN = datetime(2026, 11, 29, 15, 4, 5, tzinfo=timezone.utc)


class _Frozen(datetime):
    @classmethod
    def now(cls, tz=None):
        return WHEN


def test_claims_in_one_second_get_suffixed_ids(tmp_path):
    first = runs.claim_run_dir(tmp_path, host="box", now=WHEN)
    second = runs.claim_run_dir(tmp_path, host="box", now=WHEN)
    third = runs.claim_run_dir(tmp_path, host="box", now=WHEN)
    assert [p.name for p in (first, second, third)] == ["20261129T150405Z-box", "20261129T150405Z-box.02",
                                                        "20261129T150405Z-box.03"]
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [
        first.name, second.name, third.name]  # ids sort by start (.locks/ holds who claimed each)
    assert all(runs.check_run_id(p.name) == p.name for p in (first, second, third))
    assert runs.new_run_id(WHEN, "box", runs_dir=tmp_path) == "20261129T150405Z-box.04"  # looks, takes nothing
    with pytest.raises(BatchmarkError, match="already exists"):
        runs.claim_run_dir(tmp_path, run_id=first.name)


def test_concurrent_claims_never_share_a_folder(tmp_path):
    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.append(runs.claim_run_dir(tmp_path, host="box", now=WHEN).name))
               for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == len(set(got)) == 12


def test_two_imports_in_one_second_both_land(scratch_root, monkeypatch):
    monkeypatch.setattr(runids, "datetime", _Frozen)  # new_run_id lives in pipeline.store.runids
    a = import_run("vllm-bench", [DATA / "vllm-bench"], "dgx-spark")
    b = import_run("vllm-bench", [DATA / "vllm-bench"], "dgx-spark")
    assert (a.name, b.name) == ("20261129T150405Z-dgx-spark-import", "20261129T150405Z-dgx-spark-import.02")
    assert (a / "run.json").is_file() and (b / "run.json").is_file()
    assert not [p for p in a.parent.iterdir() if p.name.endswith(".tmp")]  # no temporary folder left
    assert not list((a.parent / ".locks").glob("*.claim.json"))  # nor a claim (imports hold the run's lock meanwhile)


def test_no_test_lists_the_users_runs_folder():
    """Regression (fault kind: test depends on the user's data): tests take the committed runs from
    ``git ls-files`` (:func:`tests.conftest.committed_runs`) or build a temporary project, never a listing of the
    checkout's ``data/runs/``, which holds the user's own runs after the README's main job."""
    import re
    from pathlib import Path

    listing = re.compile(r'REPO\s*/\s*"data"\s*/\s*"runs"\s*\)\s*\.\s*(iterdir|glob|rglob)\(')
    tests = Path(__file__).resolve().parents[2]
    offenders = [str(p.relative_to(tests)) for p in tests.rglob("*.py") if listing.search(p.read_text())]
    assert offenders == []


# Regression (fault kind: a run folder's name reaches a shell): `cp -a data/runs/R
# 'data/runs/x;id>PWNED;#'` and the Snakefile ran `id`. Folder names arrive by `git pull`.
HOSTILE_FOLDERS = ["x;id>PWNED;#", "$(touch PWNED)", "a b", "`id`", "nl-run\n", "-rf", "x'y", "é-run"]


@pytest.mark.parametrize("name", HOSTILE_FOLDERS)
def test_a_run_folder_not_named_as_a_run_id_is_refused_naming_it(tmp_path, name):
    from tests.runbuilder import make_run

    make_run(tmp_path, "20261201T000000Z-a")
    (tmp_path / name).mkdir()
    (tmp_path / name / "run.json").write_text((tmp_path / "20261201T000000Z-a" / "run.json").read_text())
    assert not runs.is_run_id(name)
    for complete_only in (True, False):
        with pytest.raises(BatchmarkError) as err:
            runs.list_runs(tmp_path, complete_only=complete_only)
        msg = str(err.value)
        assert repr(name) in msg and "not a valid run id" in msg and "\n" not in msg


@pytest.mark.parametrize("bad", ["nl-run\n", "a\nb", "x" * 129, "ok;rm"])
def test_run_ids_are_matched_whole(bad):
    # `re.match` with `$` accepted a trailing newline; a full match does not
    assert not runs.is_run_id(bad)
    with pytest.raises(BatchmarkError, match="not a valid run id"):
        runs.check_run_id(bad)
