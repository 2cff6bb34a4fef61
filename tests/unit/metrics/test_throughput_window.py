"""Which window each point's output throughput was measured over (the name must say which).

docs/definitions.md: a static batch's output throughput is the decode phase (llama.cpp's S_TG),
a served point's is first measured send to last measured completion.  The contract keeps the name
``output_throughput_tok_s`` for both; ``output_throughput_window`` says which, for every source.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.core import paths
from pipeline.importers import ImportOptions, import_run
from pipeline.core.pointsummary import PointSummary, throughput_window
from pipeline.views.show import show_run as show_json

RUNS = paths.data_dir() / "runs"
DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.mark.parametrize("run_id, window", [
    ("20261129T165000Z-vm", "decode_phase"),        # transformers engine: static batches
    ("20261130T010035Z-vm", "send_to_completion"),  # real vLLM CPU server
])
def test_committed_runs_say_their_window(run_id, window):
    doc = show_json(RUNS / run_id)
    windows = {p["output_throughput_window"] for p in doc["points"] if p["output_throughput_tok_s"] is not None}
    assert windows == {window}


def test_a_summary_stored_before_the_field_reads_it_from_what_it_measured():
    base = dict(model="m", engine="e", input_len=8, output_len=8, concurrency=2, repeats=1, completed=2, failed=0,
                output_throughput_tok_s=10.0, per_user_tok_s=5.0, ttft_s=None, ttft_with_queue_s=None, tpot_s=None,
                itl_s=None, e2el_s=None, step_time_s=None)
    assert PointSummary.from_dict({**base, "prefill_throughput_tok_s": 100.0}).output_throughput_window == "decode_phase"
    assert PointSummary.from_dict({**base, "prefill_throughput_tok_s": None}).output_throughput_window == "send_to_completion"
    assert throughput_window({**base, "output_throughput_tok_s": None}) is None


def test_importers_say_the_window_of_their_tool(tmp_path):
    static = import_run("llama-batched-bench", [DATA / "llama-batched-bench" / "llama-3.1-8b-q4_0.jsonl"],
                        hardware="dgx-spark", runs_dir=tmp_path, options=ImportOptions(model="llama-3.1-8b-q4_0"))
    served = import_run("vllm-bench", [DATA / "vllm-bench" / "llama-3.1-8b-c1.json"], hardware="h100-sxm",
                        runs_dir=tmp_path)
    assert {p["output_throughput_window"] for p in show_json(static)["points"]} == {"decode_phase"}
    assert {p["output_throughput_window"] for p in show_json(served)["points"]} == {"send_to_completion"}
