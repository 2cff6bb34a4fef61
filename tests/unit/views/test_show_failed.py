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


def test_a_point_whose_record_has_zero_rows_is_excluded_and_flags_the_run(tmp_path):
    """Fault kind: an empty measurement passed as a clean one (a point whose Parquet record holds zero rows: show said
    "NOTHING MEASURED", yet the point was neither excluded nor the run flagged).  The point is left out of the knee and
    peak (peak 160 tok/s from c = 2: 2 / step_s(2) = 2 / (0.010 × 1.25), tests/runbuilder) and the verdict names it."""
    import pyarrow.parquet as pq

    run = rb.make_run(tmp_path, "20261129T000000Z-h", models=("dense-a",), concurrency=(1, 2, 4), complete=False)
    f = run / "points" / "dense-a" / "transformers-in64-out16-c4.parquet"
    pq.write_table(pq.read_table(f).slice(0, 0), f)
    runs.complete_run(run, derive=stages.write_derived)
    doc = show_run(run)
    c4 = next(p for p in doc["points"] if p["concurrency"] == 4)
    assert c4["completed"] == 0 and c4["excluded"] and "no request recorded" in c4["excluded_reason"]
    model = doc["models"][0]
    assert model["excluded_concurrency"] == [4] and model["peak_output_throughput_tok_s"] == 160.0
    quality = model["run_quality"]
    assert quality["verdict"] == "flagged"
    assert any(r.startswith("1 point(s) recorded no request") and "dense-a c = 4" in r for r in quality["reasons"])
