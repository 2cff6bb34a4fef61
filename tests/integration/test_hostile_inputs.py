"""Hostile inputs that need a second process: a claimer killed mid-import, a reader that closed the pipe.

The in-process hostile inputs are tests/unit/test_hostile_inputs.py.
"""

from __future__ import annotations

import os
import subprocess
import sys

from pipeline import cli
from pipeline.core import paths
from pipeline.importers import import_run
from tests import runbuilder as rb
from tests.conftest import REPO
from tests.unit.test_hostile_inputs import VLLM


def test_claim_of_a_killed_import_does_not_block_its_id(scratch_root, tmp_path, capsys):
    """Regression (fault kind: a killed import's claim blocking its id): an import killed after claiming its id left an empty folder that blocked the id ("already exists")
    while ``show`` said "unknown run".  The claimer here is a real process that claimed the id and died."""
    rd = paths.runs_dir()
    code = f"from pathlib import Path; from pipeline.store import runs; runs.claim_run_dir(Path({str(rd)!r}), run_id='K1')"
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert (rd / "K1").is_dir() and not any((rd / "K1").iterdir())
    assert cli.main(["show", "K1"]) == 2 and "unknown run" in capsys.readouterr().err
    run = import_run("vllm-bench", [VLLM], "dgx-spark", run_id="K1")
    assert (run / "run.json").is_file() and cli.main(["show", "K1", "--json"]) == 0
    assert not (rd / ".locks" / "K1.claim.json").exists()


def test_closed_pipe_ends_quietly(scratch_root):
    """Tracebacks list: ``batchmark upgrade | head`` ended in a BrokenPipe traceback.  The reader here closes the
    pipe before the command writes (``head`` that already has its lines)."""
    for i in range(3):
        rb.make_run(paths.runs_dir(), f"P{i}")
    env = {**os.environ, "PYTHONPATH": str(REPO), "BATCHMARK_ROOT": str(scratch_root)}
    for argv in (["show", "P0"], ["upgrade", "--all"]):
        proc = subprocess.Popen([sys.executable, "-m", "pipeline", *argv], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, cwd=str(REPO))
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) in (0, 141) and "Traceback" not in err and "BrokenPipe" not in err, err

