"""Imports keep the length distribution their files state: per-request lengths summarized (mean, p50, min, max),
and the distribution a tool's settings name (vLLM's range ratio, SGLang's, AIPerf's and GuideLLM's standard
deviations), read with each tool's own definition; joined repeats keep them."""

from __future__ import annotations

import json

from pipeline.core.lengthstats import joined_lengths, normal_stated, uniform_stated
from pipeline.importers import aiperf, guidellm, vllm_bench
from tests.conftest import REPO

DATA = REPO / "tests" / "data"


def test_vllm_detailed_result_keeps_its_per_request_lengths_and_stated_range_ratio(tmp_path):
    """Fault kind: an import of a drawn workload kept as one median length (its distribution lost), a failed
    request's length 0 counted in it, or a range ratio read with another tool's definition.

    By hand: input_lens 100, 200, …, 800 with the last request failed (error text, length 0 output) → the seven
    successful ones: mean 400, p50 400, min 100, max 700; ``random_range_ratio`` "0.9" (``--metadata`` writes
    strings) is vLLM's uniform of range ratio 0.9; burstiness 0.7 at 2 req/s is a gamma point."""
    d = json.loads((DATA / "vllm-real-0.32" / "bench-serve" / "c4-detailed.json").read_text())
    d["input_lens"] = [100 * (i + 1) for i in range(8)]
    d["output_lens"] = [32] * 7 + [0]
    d["errors"] = [""] * 7 + ["boom"]
    d.update(completed=7, failed=1, total_input_tokens=2800, total_output_tokens=224, random_range_ratio="0.9",
             request_rate=2.0, burstiness=0.7, max_concurrency=None,
             output_throughput=224 / d["duration"])
    path = tmp_path / "r.json"
    path.write_text(json.dumps(d))
    p = vllm_bench.parse([path], max_failure_rate=0.5).summaries[0]
    assert p.lengths["input"] == {"mean": 400.0, "p50": 400.0, "min": 100.0, "max": 700.0}
    assert p.lengths["output"] == {"mean": 32.0, "p50": 32.0, "min": 32.0, "max": 32.0}
    assert p.lengths["stated"] == {"input": {"distribution": "uniform", "range_ratio": 0.9},
                                   "output": {"distribution": "uniform", "range_ratio": 0.9}}
    assert (p.load, p.burstiness, p.rate_rps) == ("gamma", 0.7, 2.0)


def test_range_ratios_read_by_each_tools_definition():
    """Fault kind: SGLang's range ratio (lengths on [L·r, L]: 1 is fixed) read as vLLM's ([L(1−r), L(1+r)]: 0 is
    fixed), which turns a fixed SGLang run into a wide distribution and back."""
    assert uniform_stated(0.0) == {"input": {"distribution": "fixed"}, "output": {"distribution": "fixed"}}
    assert uniform_stated(1.0, sglang=True) == {"input": {"distribution": "fixed"}, "output": {"distribution": "fixed"}}
    assert uniform_stated(0.5, sglang=True)["input"] == {"distribution": "sglang_uniform", "range_ratio": 0.5}
    assert uniform_stated(1.0) is None and uniform_stated(float("nan")) is None  # outside vLLM's [0, 1)
    assert normal_stated(0, 12.5) == {"input": {"distribution": "fixed"},
                                      "output": {"distribution": "normal", "std": 12.5}}


def test_aiperf_and_guidellm_keep_their_length_statistics_and_stated_stddev(tmp_path):
    """Fault kind: AIPerf's ISL/OSL statistics or GuideLLM's token counts and ``prompt_tokens_stdev`` dropped on
    import.

    By hand: the AIPerf export's input_sequence_length avg = p50 = min = max = 1024 (fixed prompts) and an
    ``input.prompt.input_tokens.stddev`` of 50 set → input normal (std 50), output not stated; GuideLLM 0.8.1's
    prompt_token_count 64 each, with ``prompt_tokens_stdev=8`` in its data → input normal (std 8)."""
    d = json.loads((DATA / "cases" / "06-aiperf-profile-export" / "profile_export_aiperf.json").read_text())
    d["input_config"].setdefault("input", {}).setdefault("prompt", {})["input_tokens"] = {"mean": 1024, "stddev": 50}
    path = tmp_path / "profile_export_aiperf.json"
    path.write_text(json.dumps(d))
    p = aiperf.parse([path]).summaries[0]
    assert p.lengths["input"] == {"mean": 1024.0, "p50": 1024.0, "min": 1024.0, "max": 1024.0}
    assert p.lengths["stated"] == {"input": {"distribution": "normal", "std": 50.0}}
    g = json.loads((DATA / "cases" / "16-guidellm-0.8.1" / "benchmarks-c4.json").read_text())
    g["config"]["spec"]["data"] = ["prompt_tokens=64,prompt_tokens_stdev=8,output_tokens=32"]
    gpath = tmp_path / "benchmarks.json"
    gpath.write_text(json.dumps(g))
    q = guidellm.parse([gpath]).summaries[0]
    assert q.lengths["input"] == {"mean": 64.0, "p50": 64.0, "min": 64.0, "max": 64.0}
    assert q.lengths["stated"] == {"input": {"distribution": "normal", "std": 8.0}}


def test_joined_repeats_keep_the_widest_range():
    """Fault kind: repeats of an import joined into one point with the first repeat's lengths only.

    By hand: repeats of mean 400 (100–700) and 500 (300–900), medians 400 and 450 → mean 450, p50 425, 100–900."""
    a = {"input": {"mean": 400.0, "p50": 400.0, "min": 100.0, "max": 700.0}, "output": None, "stated": None}
    b = {"input": {"mean": 500.0, "p50": 450.0, "min": 300.0, "max": 900.0}, "output": None, "stated": None}
    assert joined_lengths([a, None, b])["input"] == {"mean": 450.0, "p50": 425.0, "min": 100.0, "max": 900.0}
    assert joined_lengths([None, None]) is None
