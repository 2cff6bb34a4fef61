"""Derived files are written by their stages at publish and read back; the read path computes nothing.

Every writer of a complete run — ``batchmark sweep`` (also resumed, adaptive, open-loop), ``batchmark merge``,
the importers, ``batchmark upgrade`` of a run an earlier batchmark published without them — leaves
``summaries.json`` and ``analysis.json`` in the run, written by the stages (:func:`pipeline.analysis.stages.write_derived`).
A complete run that lacks one is refused by ``show`` in one line naming the file and the command that writes it
(exit 2, no traceback).  The expected files are the stages' own output: ``batchmark write-summaries`` and ``analyze``
run again on a copy of the run write the same bytes (both are deterministic functions of the stored files).

The sweeps use the simulated engine (a continuous-batching server in virtual time: seconds on this CPU).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from pipeline import cli
from pipeline.analysis import stages
from pipeline.core import paths
from pipeline.store import runs
from tests.conftest import REPO
from tests.runbuilder import SMALL_SIMULATED_CONFIG

SIM = SMALL_SIMULATED_CONFIG
DERIVED = ("summaries.json", "analysis.json")


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(list(args))
    return rc, out.getvalue(), err.getvalue()


def assert_written_by_the_stages(run_dir: Path, tmp_path: Path, imported: bool = False) -> None:
    """The run holds both derived files, byte for byte what ``summarize`` and ``analyze`` write on a copy of it
    (``imported``: the summaries are the importer's own, which ``summarize`` keeps; ``analyze`` is run again)."""
    for name in DERIVED:
        assert (run_dir / name).is_file(), name
    copy = tmp_path / "again" / run_dir.name
    shutil.copytree(run_dir, copy)
    for name in DERIVED[imported:]:
        (copy / name).unlink()
    assert run_cli("summarize", str(copy))[0] == 0 and run_cli("analyze", str(copy))[0] == 0
    for name in DERIVED:
        assert (copy / name).read_bytes() == (run_dir / name).read_bytes(), name


def sweep_config(root: Path, text: str = SIM) -> Path:
    cfg = root / "config" / "sim-derived.yaml"
    cfg.write_text(text)
    return cfg


def test_resumed_sweep_publishes_the_derived_files(scratch_root: Path, tmp_path: Path, monkeypatch):
    from pipeline.backends.simulated import SimulatedBackend

    real, calls = SimulatedBackend.measure, []

    def interrupting(self, key, *a, **kw):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(key.concurrency)
        return real(self, key, *a, **kw)

    cfg = sweep_config(scratch_root)
    with monkeypatch.context() as m:
        m.setattr(SimulatedBackend, "measure", interrupting)
        rc, _, err = run_cli("sweep", "--config", str(cfg), "--run-id", "20261201T000000Z-r", "--no-progress")
        assert rc == 130 and "interrupted" in err  # Ctrl-C after two points
    run_dir = paths.runs_dir() / "20261201T000000Z-r"
    assert not runs.is_complete(run_dir) and not any((run_dir / n).exists() for n in DERIVED)
    rc, _, err = run_cli("show", run_dir.name)  # a sweep in progress: summarised in memory, labelled, nothing written
    assert rc == 0 and not any((run_dir / n).exists() for n in DERIVED)
    rc, _, err = run_cli("sweep", "--config", str(cfg), "--resume", run_dir.name, "--no-progress")
    assert rc == 0, err
    assert runs.is_complete(run_dir)
    assert_written_by_the_stages(run_dir, tmp_path)


@pytest.mark.parametrize("extra", ["adaptive:\n  tolerance: 0.10\n", "open_loop:\n  rates: [2.0, 4.0]\n"])
def test_adaptive_and_open_loop_sweeps_publish_the_derived_files(scratch_root: Path, tmp_path: Path, extra: str):
    text = SIM.replace("concurrency: [1, 2, 4]", "concurrency: [1, 2, 4, 8]") + extra
    rc, out, err = run_cli("sweep", "--config", str(sweep_config(scratch_root, text)), "--no-progress")
    assert rc == 0, err
    run_dir = Path(out.strip().splitlines()[-1])
    assert_written_by_the_stages(run_dir, tmp_path)
    loads = {p["load"] for p in json.loads((run_dir / "summaries.json").read_text())["points"]}
    assert loads == ({"closed", "poisson"} if "open_loop" in extra else {"closed"})


def test_upgrade_writes_what_an_earlier_sweep_left_out(scratch_root: Path, tmp_path: Path):
    from tests.runbuilder import make_run

    run_dir = make_run(paths.runs_dir(), "20261201T000000Z-old", derived=False)
    rc, out, err = run_cli("upgrade", run_dir.name)
    assert rc == 0, err
    assert "  summaries.json" in out and "  analysis.json" in out
    assert_written_by_the_stages(run_dir, tmp_path)
    rc, out, _ = run_cli("upgrade", run_dir.name)  # nothing left to write: the files are left as they are
    assert rc == 0 and "every file already at its current schema version" in out


def test_merge_command_publishes_the_derived_files(scratch_root: Path, tmp_path: Path):
    cfg = sweep_config(scratch_root, SIM.replace("models:\n", "models:\n  - name: qwen3-30b-a3b\n    card: Qwen3-30B-A3B\n"))
    for model in ("llama-3.1-8b-instruct", "qwen3-30b-a3b"):
        rc, _, err = run_cli("sweep", "--config", str(cfg), "--run-id", "20261201T000000Z-m", f"--model={model}",
                             "--no-progress")
        assert rc == 0, err
    run_dir = paths.runs_dir() / "20261201T000000Z-m"
    assert not run_dir.exists()
    rc, out, err = run_cli("merge", "--config", str(cfg), "--run-id", run_dir.name)
    assert rc == 0, err
    assert runs.is_complete(run_dir)
    assert_written_by_the_stages(run_dir, tmp_path)
    assert {m["model"] for m in stages.load_run(run_dir).analysis["models"]} == {"llama-3.1-8b-instruct",
                                                                                "qwen3-30b-a3b"}


def test_import_publishes_its_analysis_through_the_stage(scratch_root: Path, tmp_path: Path):
    bench = sorted((REPO / "tests" / "data" / "vllm-bench").glob("llama-3.1-8b-c*.json"))  # three saved results
    rc, out, err = run_cli("import", "vllm-bench", *map(str, bench), "--hardware", "h200", "--run-id", "20261201T000000Z-i")
    assert rc == 0, err
    run_dir = paths.runs_dir() / "20261201T000000Z-i"
    assert len(json.loads((run_dir / "summaries.json").read_text())["points"]) == 3
    assert json.loads((run_dir / "analysis.json").read_text())["run_id"] == run_dir.name  # not the temporary folder's
    assert_written_by_the_stages(run_dir, tmp_path, imported=True)
