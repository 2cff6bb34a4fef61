"""``show`` as a user runs it (a process) reads the derived files the stages wrote and computes nothing.

The helpers and the in-process checks are tests/unit/analysis/test_stages.py's; these two start
``python -m pipeline show``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pipeline.core import paths
from pipeline.store import runs
from tests.conftest import REPO
from tests.unit.analysis.test_stages import assert_written_by_the_stages, run_cli, sweep_config


def show_subprocess(root: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m pipeline show ...`` as a user runs it, on the scratch project ``root``."""
    return subprocess.run([sys.executable, "-m", "pipeline", "show", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(REPO), "BATCHMARK_ROOT": str(root)})


def test_sweep_alone_leaves_the_derived_files_and_show_reads_them(scratch_root: Path, tmp_path: Path):
    rc, out, err = run_cli("sweep", "--config", str(sweep_config(scratch_root)), "--run-id", "20261201T000000Z-d",
                           "--no-progress")
    assert rc == 0, err
    run_dir = Path(out.strip().splitlines()[-1])
    assert runs.is_complete(run_dir)
    assert_written_by_the_stages(run_dir, tmp_path)
    res = show_subprocess(scratch_root, run_dir.name, "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    stored = json.loads((run_dir / "summaries.json").read_text())["points"]
    assert [p["output_throughput_tok_s"] for p in doc["points"]] == [p["output_throughput_tok_s"] for p in stored]
    assert "partial" not in doc


def test_complete_run_without_analysis_is_one_line_naming_the_command(scratch_root: Path):
    from tests.runbuilder import make_run

    run_dir = make_run(paths.runs_dir(), "20261201T000000Z-na")
    (run_dir / "analysis.json").unlink()  # as an earlier `batchmark sweep` alone, or a copy cut short, left it
    before = sorted(p.name for p in run_dir.rglob("*"))
    res = show_subprocess(scratch_root, run_dir.name)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert res.stderr.startswith("batchmark: error: ") and "analysis.json: missing" in res.stderr
    assert f"produce it with `batchmark analyze {run_dir.name}`" in res.stderr
    assert sorted(p.name for p in run_dir.rglob("*")) == before  # nothing computed, nothing written
    assert run_cli("analyze", run_dir.name)[0] == 0  # the command named does it
    assert show_subprocess(scratch_root, run_dir.name).returncode == 0

