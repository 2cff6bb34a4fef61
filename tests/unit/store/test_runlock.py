"""One live process per run, exclusive point writes, and reading never writes (fault kinds: two sweeps merged into
one run, a stored point overwritten, --resume of a complete run with another config, show refusing an incomplete
run, show/pages writing derived files into run folders)."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys

import pytest

from pipeline.store import runs
from pipeline.cli import main
from pipeline.core.errors import BatchmarkError
from tests.conftest import REPO, TINY_CONFIG
from tests.runbuilder import make_run

HOLD = """
import sys, time
from pathlib import Path
from pipeline.store import runs
with runs.lock_run(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(120)
"""


@pytest.fixture
def holder(tmp_path):
    """Start a real process holding the lock of ``runs/<id>``; yields (process, run_dir); killed afterwards."""
    procs = []

    def start(run_dir):
        p = subprocess.Popen([sys.executable, "-c", HOLD, str(run_dir)], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
        procs.append(p)
        assert p.stdout.readline().strip() == "held"
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_second_sweep_into_a_live_run_is_refused_naming_the_holder(scratch_root, holder, capsys):
    run_dir = scratch_root / "data" / "runs" / "20261201T000000Z-live"
    p = holder(run_dir)
    assert main(["sweep", "--config", str(TINY_CONFIG), "--run-id", run_dir.name, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"batchmark: error: run {run_dir.name} is being measured by pid {p.pid} "
                             f"on host {socket.gethostname()} since ")
    assert not (run_dir / "run.json").exists()  # nothing was measured or written by the refused sweep


@pytest.mark.parametrize("holding", ["bare claim", "run.json, no point yet"])
def test_a_refused_sweep_never_removes_the_folder_the_holder_measures_into(scratch_root, holder, capsys, monkeypatch,
                                                                          holding):
    """Regression (fault kind: a refused sweep's clean-up deletes another process's run).  Two ``sweep --run-id R``
    started together: the one refused by the lock saw no ``run.json`` (it was "fresh") and removed the folder as one
    it "measured nothing" into ("measured nothing and was removed"), while the holder, a real process, was about to
    measure into it.  The folder is judged only under the lock now: it stays as it was, the refusal the only line."""
    run_dir = scratch_root / "data" / "runs" / "20261201T000000Z-race"
    run_dir.mkdir(parents=True)
    if holding != "bare claim":  # the holder wrote its run.json just after the refused sweep looked for it
        runs.create_run(run_dir, {"config_name": "tiny", "config_digest": "other"})
        real_exists = pathlib.Path.exists
        monkeypatch.setattr(pathlib.Path, "exists",
                            lambda self, **kw: False if self == run_dir / "run.json" else real_exists(self, **kw))
    before = _files(run_dir)
    p = holder(run_dir)
    assert main(["sweep", "--config", str(TINY_CONFIG), "--run-id", run_dir.name, "--no-progress"]) == 2
    monkeypatch.undo()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"is being measured by pid {p.pid}" in err[0], err
    assert run_dir.is_dir() and _files(run_dir) == before
    from pipeline.sweep.preflight import discard_if_empty

    assert discard_if_empty(run_dir) is False  # held: never removed
    p.kill()
    p.wait()
    assert discard_if_empty(run_dir) is True and not run_dir.exists()  # free, and nothing measured: removed


def test_lock_of_a_killed_process_is_free_again(tmp_path, holder):
    """kill -9 of the holder: the kernel drops its flock, so the resume is not blocked by a stale lock."""
    run_dir = tmp_path / "runs" / "r1"
    p = holder(run_dir)
    with pytest.raises(BatchmarkError):
        with runs.lock_run(run_dir):
            pass
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    with runs.lock_run(run_dir):
        assert runs.lock_path(run_dir).is_file()
    assert not runs.lock_path(run_dir).with_suffix(".owner.json").exists()
    assert not (run_dir / ".lock").exists()  # the lock lives beside the run, never in its (committed) folder


def test_point_write_is_exclusive_create(tmp_path):
    """A record file that appeared after the check is never replaced: os.link refuses an existing name."""
    path = tmp_path / "points" / "m" / "p.json"
    runs.atomic_create_json(path, {"a": 1})
    with pytest.raises(BatchmarkError, match="already written by another process"):
        runs.atomic_create_json(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 1}
    assert [f.name for f in path.parent.iterdir()] == ["p.json"]  # no temp file left


def test_resume_of_a_complete_run_with_another_config_is_refused(scratch_root, capsys):
    run = make_run(scratch_root / "data" / "runs", "20261201T000000Z-done")  # config_digest "testdigest"
    assert main(["sweep", "--config", str(TINY_CONFIG), "--resume", str(run), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"batchmark: error: run {run.name} is complete and immutable, and was measured with another "
                   "config; --resume measures nothing into it"]


def _files(run_dir):
    return sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*"))


def test_show_of_an_incomplete_run_shows_finished_points_marked_partial(scratch_root, capsys):
    run = make_run(scratch_root / "data" / "runs", "20261201T000000Z-half", complete=False)
    before = _files(run)
    assert main(["show", str(run), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["partial"] is True and len(doc["points"]) == 10  # 2 models × 5 concurrencies finished
    # dense-a at c=1: B / step = 1 / (0.010 × (1 + 1/8)) = 88.89 tok/s (tests/runbuilder.py)
    p1 = next(p for p in doc["points"] if p["model"] == "dense-a" and p["concurrency"] == 1)
    assert p1["output_throughput_tok_s"] == pytest.approx(1 / (0.010 * 1.125), rel=1e-3)
    assert main(["show", str(run)]) == 0
    assert "PARTIAL: the run is incomplete; 10 finished point(s) shown" in capsys.readouterr().out
    assert _files(run) == before


def test_show_and_pages_never_write_into_runs(scratch_root, capsys):
    # A complete run published without its derived files: show refuses it in one line naming the commands that write
    # them (exit 2), the site leaves it out naming the same; neither computes nor writes anything.
    runs_dir = scratch_root / "data" / "runs"
    run = make_run(runs_dir, "20261201T000000Z-nod", derived=False)
    before = _files(run)
    assert "summaries.json" not in before and "analysis.json" not in before
    assert main(["show", str(run), "--json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "summaries.json: missing" in err
    assert f"`batchmark write-summaries {run} && batchmark analyze {run}`" in err
    from pipeline.pages.render import render_site

    logged: list[str] = []
    render_site(scratch_root / "data" / "pages", runs_dir=runs_dir, log=logged.append)
    assert _files(run) == before
    assert len(logged) == 1 and "batchmark write-summaries" in logged[0]
    # the stages that own the files do write them; then show and the site read them back, writing nothing
    assert main(["summarize", str(run)]) == 0 and main(["analyze", str(run)]) == 0
    assert (run / "summaries.json").is_file() and (run / "analysis.json").is_file()
    after = _files(run)
    capsys.readouterr()
    assert main(["show", str(run), "--json"]) == 0
    assert "partial" not in json.loads(capsys.readouterr().out)  # a complete run: exactly the contract (docs/definitions.md)
    render_site(scratch_root / "data" / "pages", runs_dir=runs_dir)
    assert _files(run) == after
    dl = scratch_root / "data" / "pages" / "downloads" / run.name
    assert json.loads((dl / "summaries.json").read_text())["run_id"] == run.name
    assert json.loads((dl / "analysis.json").read_text())["models"]
