"""Imports that never invent a number: repeats grouped by what was configured, failures unknown where unstated.

Inputs are built from the fixtures' own files in each tool's layout (``vllm bench sweep serve``'s ``run=N.json``,
AIPerf's ``profile_runs/``); each test says which fault kind it pins and the value worked by hand.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pipeline.importers import parse

from tests.conftest import DATA

EXPERIMENT = DATA / "vllm-bench-sweep" / "20261202_100000"
CONC = DATA / "aiperf-sweep" / "concurrency-sweep" / "artifacts" / "llama-3-8b-openai-chat-concurrency_sweep"
ONE = "SERVE--max_num_seqs=2-BENCH--max_concurrency=4-random_input_len=32"


def _edit(path: Path, **changes) -> None:
    d = json.loads(path.read_text())
    d.update(changes)
    path.write_text(json.dumps(d))


def test_vllm_sweep_repeats_a_token_apart_are_one_point(tmp_path):
    """Fault kind: measured lengths taken for identity.  run=0 measured 256 output tokens over 8 requests (32 each),
    run=1 264 (33 each): one configured point (one combination folder), so one point of 2 repeats, not two shapes
    32 and 33.  By hand: output length median(32, 33) = 32.5 → 32 (half to even); throughput median(70, 74) = 72.0."""
    folder = tmp_path / ONE
    shutil.copytree(EXPERIMENT / ONE, folder)
    _edit(folder / "run=1.json", total_output_tokens=264)
    pts = parse("vllm-bench", [folder]).summaries
    assert [(p.output_len, p.repeats, p.output_throughput_tok_s) for p in pts] == [(32, 2, 72.0)]


def test_vllm_sweep_log_repeats_a_token_apart_are_one_point_per_bench_combination(tmp_path):
    """Fault kind: measured lengths taken for identity, in a ``--show-stdout`` log.  One server section runs bench
    combination A (runs 0, 1: 32 and 33 tokens per request) then B (runs 0, 1 at another input length): A's two runs
    are one point, and B's run numbers starting again at 0 begin another point.  By hand: A 2 repeats, median(70, 74)
    = 72.0; B 2 repeats, median(50, 54) = 52.0."""
    def block(tput: float, out_tokens: int, in_tokens: int) -> str:
        return "\n".join([
            "============ Serving Benchmark Result ============", "Successful requests:                     8",
            "Failed requests:                         0", "Maximum request concurrency:             4",
            "Benchmark duration (s):                  3.46", f"Total input tokens:                      {in_tokens}",
            f"Total generated tokens:                  {out_tokens}",
            f"Output token throughput (tok/s):         {tput}", "Median TPOT (ms):                        25.0",
            "=================================================="])
    log = ["Server overrides: {'max_num_seqs': 2}"]
    for run, (tput, out, inp) in enumerate([(70.0, 256, 256), (74.0, 264, 256)]):
        log += [f"Run Number: {run}", block(tput, out, inp)]
    for run, (tput, out, inp) in enumerate([(50.0, 256, 1024), (54.0, 256, 1024)]):
        log += [f"Run Number: {run}", block(tput, out, inp)]
    f = tmp_path / "sweep.log"
    f.write_text("\n".join(log) + "\n")
    pts = sorted(parse("vllm-bench", [f], model="m").summaries, key=lambda p: p.input_len)
    assert [(p.input_len, p.output_len, p.repeats, p.output_throughput_tok_s) for p in pts] == [
        (32, 32, 2, 72.0), (128, 32, 2, 52.0)]


def test_aiperf_multi_run_repeats_a_token_apart_are_one_point(tmp_path):
    """Fault kind: measured lengths taken for identity (AIPerf ``--num-profile-runs``).  run_0002 measured a median
    output length of 129 beside run_0001's 128, same settings: one point of 2 repeats.  By hand: median(128, 129) =
    128.5 → 128; throughput median(1250, 1230) = 1240.0."""
    src = CONC / "profile_runs"
    out = []
    for i, trial in enumerate(("trial_0001", "trial_0002"), 1):
        d = json.loads((src / trial / "concurrency_10" / "profile_export_aiperf.json").read_text())
        d["input_config"]["loadgen"]["concurrency"] = 10  # one point's multi-run, not the sweep's list
        if i == 2:
            d["output_sequence_length"].update(avg=129.0, p50=129.0, max=129.0)
        dest = tmp_path / "art" / "profile_runs" / f"run_000{i}" / "profile_export_aiperf.json"
        dest.parent.mkdir(parents=True)
        dest.write_text(json.dumps(d))
        out.append(dest)
    pts = parse("aiperf", [tmp_path / "art"]).summaries
    assert [(p.output_len, p.repeats, p.output_throughput_tok_s) for p in pts] == [(128, 2, 1240.0)]


def test_vllm_file_without_failed_has_failures_unknown(tmp_path):
    """Fault kind: an unstated count imported as a measured 0.  A ``vllm bench serve`` result without ``failed`` (and
    no ``errors`` list): failed count unknown (caveat over its 32 completed requests, failure rate null), never a
    clean 0; the same file with ``failed: 0`` keeps its measured 0."""
    d = json.loads((DATA / "vllm-bench" / "llama-3.1-8b-c4.json").read_text())
    del d["failed"]
    f = tmp_path / "c4.json"
    f.write_text(json.dumps(d))
    (p,) = parse("vllm-bench", [f]).summaries
    assert p.caveats.get("failed_count_unknown") == 32 and p.failure_rate is None
    assert any("states no failed count" in e for e in p.errors)
    (q,) = parse("vllm-bench", [DATA / "vllm-bench" / "llama-3.1-8b-c4.json"]).summaries
    assert "failed_count_unknown" not in q.caveats and q.failure_rate == 0.0


def _sweep_log(tmp_path: Path, overrides: str) -> Path:
    """A ``vllm bench sweep serve --show-stdout`` log of one server section (its ``Server overrides:`` line) and one
    run's printed block."""
    f = tmp_path / "sweep.log"
    f.write_text("\n".join([
        f"Server overrides: {overrides}", "Run Number: 0",
        "============ Serving Benchmark Result ============", "Successful requests:                     8",
        "Failed requests:                         0", "Maximum request concurrency:             4",
        "Benchmark duration (s):                  3.46", "Total input tokens:                      256",
        "Total generated tokens:                  256", "Output token throughput (tok/s):         74.0",
        "=================================================="]) + "\n")
    return f


@pytest.mark.parametrize("overrides, why", [
    ("{'max_num_seqs': {2, 4}}", "a Python set"),
    ("{'kv_cache_dtype': b'fp8'}", "a Python bytes"),
    ("{'max_num_seqs': 2+3j}", "a Python complex"),
    ("{'gpu_memory_utilization': 1e999}", "inf is not a finite number"),
    ("{'max_num_seqs': [1, -1e999]}", "-inf is not a finite number"),
    ("{1, 2}", "is not a parameter combination"),
])
def test_server_overrides_of_no_plain_values_are_refused_naming_the_log_line(tmp_path, capsys, scratch_root,
                                                                             overrides, why):
    """Fault kind: untrusted text reaching the run store.  A set, bytes, a complex number or ``1e999`` in a log's
    ``Server overrides:`` was a TypeError traceback or a refusal naming the run store's temporary run.json: now one
    line naming the log and its line 1, and nothing written."""
    from pipeline.cli import main
    from pipeline.core import paths

    log = _sweep_log(tmp_path, overrides)
    assert main(["import", "vllm-bench", str(log), "--hardware", "h200", "--model", "m"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"batchmark: error: {log}: line 1: Server overrides: ") and why in err, err
    assert err.count("\n") == 1 and ".tmp" not in err and "Traceback" not in err
    assert not any(paths.runs_dir().glob("*/run.json"))
