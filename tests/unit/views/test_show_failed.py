"""``show`` of a run whose points failed: the errors it promises are listed (fault kind: a message pointing at
output that is not there: the sweep ends "every point failed … (batchmark show RUN lists the errors)", and show
listed none)."""

from __future__ import annotations

from pathlib import Path

from pipeline.analysis import stages
from pipeline.core.records import PointKey, PointRecords, RepeatRecord, RequestRecord
from pipeline.store import runs
from pipeline.views.show import format_table, show_run
from tests import runbuilder as rb

ERROR = "HTTP 500: CUDA out of memory"


def failed_run(run_dir: Path, concurrency: tuple[int, ...] = (1, 4)) -> Path:
    """A complete served run of dense-a whose every request failed with :data:`ERROR` (4 a point, one repeat)."""
    runs.create_run(run_dir, {
        "source": "measured", "config_name": "t", "config_digest": "x", "config_path": None,
        "config": {"name": "t", "hardware": "cpu", "backend": "vllm", "models": [{"name": "dense-a"}],
                   "input_len": 64, "output_len": 16, "concurrency": list(concurrency), "repeats": 1},
        "hardware": rb.CPU_PROFILE, "host": "h", "platform": "p", "started_at": "2026-11-29T00:00:00+00:00",
        "git_commit": None, "versions": {"python": "3.11.0", "batchmark": "0.1.0"}, "gpu_driver": None,
        "command": "test"})
    n = len(concurrency)
    runs.update_run_json(run_dir, stopped={}, server={"engine": "vllm"},
                         failures={"points": n, "with_failures": n, "empty": n})
    for c in concurrency:
        reqs = [RequestRecord(request_id=j, queued_s=0.0, sent_s=0.0, first_token_s=None, done_s=None, chunks=[],
                              input_tokens=64, output_tokens=0, error=ERROR) for j in range(4)]
        runs.write_point(run_dir, PointRecords(point=PointKey("dense-a", "vllm", 64, 16, c), repeats=[
            RepeatRecord(repeat=0, batching="served", window_start_s=0.0, window_end_s=1.0, requests=reqs)]))
    runs.complete_run(run_dir, derive=stages.write_derived)
    return run_dir


def test_show_of_a_run_where_every_point_failed_lists_the_errors(tmp_path):
    """Each point's failed count and its errors, one line a point, in the text; ``show --json`` points carry them."""
    doc = show_run(failed_run(tmp_path / "r"))
    assert [p["errors"] for p in doc["points"]] == [[ERROR], [ERROR]]
    text = format_table(doc)
    assert f"  dense-a · in 64 / out 16 · c = 1: 4 failed: {ERROR}" in text.splitlines()
    assert f"  dense-a · in 64 / out 16 · c = 4: 4 failed: {ERROR}" in text.splitlines()
