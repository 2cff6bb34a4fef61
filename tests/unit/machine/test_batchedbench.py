"""The llama-batched-bench runner: the rows a grid must print, the rows a real output printed, and a lost tail run again.

The outputs in ``tests/data/llama-batched-bench/real-cpu-*.txt`` are real stdout of llama-batched-bench built here
(``tests/data/README.md``); ``lost-tail`` is a real run that exited 0 with its last row missing.  The tool itself is
run for real by ``tests/integration/test_llamacpp_server.py``; here a stand-in ``run`` replays those two real outputs
in a chosen order, because a run that loses its tail cannot be made to happen on demand.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pipeline.core.errors import BatchmarkError
from pipeline.machine.batchedbench import expected_rows, printed_rows, run_batched_bench

pytestmark = pytest.mark.unit

DATA = Path(__file__).resolve().parents[2] / "data" / "llama-batched-bench"
WHOLE = (DATA / "real-cpu-whole.txt").read_text()
LOST = (DATA / "real-cpu-lost-tail.txt").read_text()
GRID = {"npp": [16], "ntg": [1024], "npl": [1, 2]}


def test_expected_rows_skip_what_the_context_cannot_hold():
    # batched-bench.cpp skips a row when B·(PP + TG) > n_kv_max: 2·(16 + 1,024) = 2,080 fits 4,096 and not 2,048;
    # B = 4 needs 4,160, more than 4,096
    assert expected_rows([16], [1024], [1, 2, 4], 4096) == {(16, 1024, 1), (16, 1024, 2)}
    assert expected_rows([16], [1024], [1, 2], 2048) == {(16, 1024, 1)}
    # 6·(128 + 32) = 960 fits 1,024; 6·(512 + 32) = 3,264 does not
    assert expected_rows([128, 512], [32], [1, 6], 1024) == {(128, 32, 1), (512, 32, 1), (128, 32, 6)}


def test_printed_rows_of_real_outputs():
    assert printed_rows(WHOLE) == {(16, 1024, 1), (16, 1024, 2)}
    assert printed_rows(LOST) == {(16, 1024, 1)}  # the header and the rule row are not rows


class Replay:
    """Stands in for ``subprocess.run``: returns the real outputs given, one per call, and records the commands."""

    def __init__(self, *stdouts: str):
        self.stdouts, self.calls = list(stdouts), []

    def __call__(self, cmd, **kw):
        self.calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout=self.stdouts.pop(0), stderr="log\n")


def test_a_lost_tail_is_run_again_and_the_whole_table_kept(tmp_path):
    out, run = tmp_path / "bb.txt", Replay(LOST, WHOLE)
    got = run_batched_bench(Path("llama-batched-bench"), Path("m.gguf"), out, GRID, n_ctx_tokens=4096, run=run)
    assert got == {(16, 1024, 1), (16, 1024, 2)} and len(run.calls) == 2
    assert run.calls[0] == ["llama-batched-bench", "-m", "m.gguf", "-c", "4096", "-npp", "16", "-ntg", "1024",
                            "-npl", "1,2"]
    assert out.read_text() == "log\n" + WHOLE  # stderr, then the table


def test_a_tail_lost_every_time_is_refused_by_row(tmp_path):
    out = tmp_path / "bb.txt"
    with pytest.raises(BatchmarkError, match=r"3 runs each lost rows of the table \(PP=16 TG=1024 B=2;"):
        run_batched_bench(Path("t"), Path("m.gguf"), out, GRID, n_ctx_tokens=4096, run=Replay(LOST, LOST, LOST))
    assert out.read_text() == "log\n" + LOST  # the last output kept for the reader


def test_a_grid_the_context_cannot_hold_and_bad_counts_are_refused(tmp_path):
    with pytest.raises(BatchmarkError, match="no \\(PP, TG, B\\) of the grid fits a context of 512 tokens"):
        run_batched_bench(Path("t"), Path("m.gguf"), tmp_path / "o", GRID, n_ctx_tokens=512, run=Replay())
    with pytest.raises(BatchmarkError, match="npl: \\[0\\] is not a list of positive"):
        run_batched_bench(Path("t"), Path("m.gguf"), tmp_path / "o", {**GRID, "npl": [0]}, 4096, run=Replay())


def test_a_failing_tool_names_its_last_error_line(tmp_path):
    def failing(cmd, **kw):
        return subprocess.CompletedProcess(cmd, 1, stdout="", stderr="loading\nfailed to load model 'm.gguf'\n\n")

    with pytest.raises(BatchmarkError, match="exited 1: failed to load model 'm.gguf'$"):
        run_batched_bench(Path("t"), Path("m.gguf"), tmp_path / "o", GRID, 4096, run=failing)
