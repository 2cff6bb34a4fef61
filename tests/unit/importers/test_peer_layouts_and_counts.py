"""Result files that lied or were refused for the wrong reason: cases 20–21 of ../shared/cases/ (copied under
tests/data/cases/ with their README.txt: source, input, right value) and the kinds without a file, each test naming
the fault kind and the public source of its right value.
"""

from __future__ import annotations

import copy
import json
import os
import re
import threading

import pytest

from pipeline.analysis.analyze import point_quality
from pipeline.core.errors import BatchmarkError
from pipeline.importers import parse

from tests.conftest import DATA

CASES = DATA / "cases"
ART = CASES / "20-aiperf-multi-run-layout" / "artifacts"
POINT = ART / "llama-3-8b-openai-chat-concurrency_10"
RUNS = sorted((POINT / "profile_runs").glob("run_*/profile_export_aiperf.json"))
AGGREGATE = POINT / "aggregate" / "profile_export_aiperf_aggregate.json"
SGLANG_BLOCK = CASES / "21-sglang-block-max-tokens-fallback" / "sglang-bench-serving-tool-calls.txt"
GENAI = DATA / "aiperf" / "profile_export_genai_perf.json"


# -- kind: AIPerf's multi-run layout (case 20; aiperf docs/tutorials/multi-run-confidence.md) ---------------------

@pytest.mark.parametrize("paths", [[ART], [POINT], RUNS, [*RUNS, AGGREGATE]])
def test_aiperf_profile_runs_are_the_repeats_of_one_point(paths):
    """README: one point c = 10, in 512, out 128, 3 repeats, output throughput the median of 1254.9, 1239.7, 1210.4 =
    1239.7 tok/s; the aggregate beside its runs left out.  Before: 'folder holds no files to import' (a), 'two results
    for the same point' (c)."""
    (p,) = parse("aiperf", paths).summaries
    assert (p.concurrency, p.input_len, p.output_len, p.repeats) == (10, 512, 128, 3)
    assert p.output_throughput_tok_s == 1239.7
    assert p.samples["output_throughput_tok_s"] == [1254.9, 1239.7, 1210.4]


def test_aiperf_aggregate_alone_is_refused_as_an_aggregate():
    """README command b: the aggregate alone was 'field input_config: missing; the concurrency of the run is
    unknown'.  Right: refused saying it is an aggregate of 3 runs and to import profile_runs/."""
    with pytest.raises(BatchmarkError, match=r"aggregate of 3 profile runs .*import the runs \(the profile_runs/"):
        parse("aiperf", [AGGREGATE])


# -- kind: AIPerf multi-turn and prefill-gated runs (aiperf docs: CLI options, prefill-concurrency tutorial) -------

def _with(tmp_path, change) -> list:
    d = json.loads(RUNS[0].read_text())
    change(d["input_config"])
    path = tmp_path / "profile_export_aiperf.json"
    path.write_text(json.dumps(d))
    return [path]


def test_aiperf_multi_turn_sessions_are_refused_naming_the_setting(tmp_path):
    """--conversation-turn-mean 6 --conversation-turn-delay-mean 30000 (input.conversation.turn.{mean, delay.mean}):
    each turn waits for the last answer and 30 s of think time, so by Little's law far fewer than 10 requests are in
    flight.  Before: imported as a clean c = 10 point."""
    paths = _with(tmp_path, lambda c: c["input"]["conversation"].update(turn={"mean": 6, "delay": {"mean": 30000}}))
    with pytest.raises(BatchmarkError, match=r"input_config\.input\.conversation\.turn\.mean: is 6: multi-turn .*30000 ms "
                                             "think time"):
        parse("aiperf", paths)
    single = _with(tmp_path, lambda c: c["input"]["conversation"].update(turn={"mean": 1}))
    assert parse("aiperf", single).summaries[0].concurrency == 10


def test_aiperf_prefill_concurrency_is_refused_naming_the_setting(tmp_path):
    """--prefill-concurrency 2 under --concurrency 10 (loadgen.prefill_concurrency): the client held 8 of 10 back
    from prefill (AIPerf's prefill-concurrency tutorial: coordinated omission).  A gate at or above the concurrency
    holds nothing back and is read."""
    with pytest.raises(BatchmarkError, match=r"loadgen\.prefill_concurrency: is 2: .*coordinated omission"):
        parse("aiperf", _with(tmp_path, lambda c: c["loadgen"].update(prefill_concurrency=2)))
    assert parse("aiperf", _with(tmp_path, lambda c: c["loadgen"].update(prefill_concurrency=10))).summaries


# -- kind: SGLang's printed block with the max_tokens fallback (case 21; SGLang PR #36272, PR #24266) -------------

@pytest.mark.parametrize("given", [None, 8])
def test_sglang_block_is_sglangs_and_its_fallback_count_flagged(given):
    """README: 'Max request concurrency: 8' and 'Backend: sglang-oai-chat' make it SGLang's at c = 8; E2EL from 'E2E
    Latency' (median 7441.71 ms); 6400 generated vs 32 re-tokenized = 200× apart, so the count is the max_tokens
    fallback: flagged and left out of the knee.  Before: refused for want of --concurrency (a), or a clean vLLM point
    (b)."""
    (p,) = parse("vllm-bench", [SGLANG_BLOCK], model="deepseek-ai/DeepSeek-V4-Flash", concurrency=given).summaries
    assert (p.engine, p.concurrency, p.completed) == ("sglang", 8, 32)
    assert p.e2el_s["p50"] == pytest.approx(7.44171) and p.e2el_s["mean"] == pytest.approx(6.53822)
    assert p.caveats["output_count_not_measured"] == 32 and "failed_count_unknown" in p.caveats
    assert any("6400" in e and "200× apart" in e for e in p.errors)
    q = point_quality(p)
    assert q["excluded"] and "not what was streamed" in q["excluded_reason"]


def test_sglang_block_without_a_cap_says_not_set():
    """SGLang's bench_serving prints "Max request concurrency: not set" without --max-concurrency (vLLM prints
    None): uncapped, so a closed-loop block needs --concurrency, as vLLM's; it was 'not a number: 'not''."""
    text = SGLANG_BLOCK.read_text().replace("Max request concurrency:                 8         ",
                                            "Max request concurrency:                 not set   ")
    with pytest.raises(BatchmarkError, match="pass batchmark import --concurrency"):
        parse("vllm-bench", [_write(text)], model="m")
    (p,) = parse("vllm-bench", [_write(text)], model="m", concurrency=8).summaries
    assert p.concurrency == 8


def _write(text: str):
    import tempfile

    f = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
    f.write(text)
    f.close()
    return f.name


# -- kind: an output count above the max_tokens asked (GenAI-Perf 24.11–24.12; inference-perf PR #565) -----------

def test_output_length_above_the_requested_is_not_measured(tmp_path):
    """GenAI-Perf's flat export asking output_tokens_mean 128 (max_tokens) and reporting output_sequence_length 640
    (5×, the 24.11–24.12 streaming bug).  Right: caveat output_count_not_measured over the 100 requests, the bug named,
    the point left out of the knee.  Before: only output_len_mismatch, kept in the knee as a clean throughput."""
    d = json.loads(GENAI.read_text())
    d["input_config"]["output_tokens_mean"] = 128
    d["output_sequence_length"] = {"unit": "tokens", "avg": 640.0, "p50": 640.0}
    path = tmp_path / "profile_export_genai_perf.json"
    path.write_text(json.dumps(d))
    (p,) = parse("aiperf", [path]).summaries
    assert p.caveats["output_count_not_measured"] == 100 and p.output_len == 640
    assert any("streaming output-length bug (24.11-24.12)" in e for e in p.errors)
    assert point_quality(p)["excluded"]


# -- kind: a negative measured latency in any field, read or not ---------------------------------------------------

@pytest.mark.parametrize("field", ["time_to_first_token.p99", "request_latency.min", "benchmark_duration.avg"])
def test_aiperf_negative_latency_in_any_field_is_refused(tmp_path, field):
    """A latency is a later clock reading minus an earlier one: −5 ms cannot be measured.  p99 and min of TTFT,
    request latency and the benchmark duration are not all read by the importer; each is refused naming the field."""
    d = json.loads(RUNS[0].read_text())
    metric, stat = field.split(".")
    d[metric][stat] = -5.0
    path = tmp_path / "profile_export_aiperf.json"
    path.write_text(json.dumps(d))
    with pytest.raises(BatchmarkError, match=re.escape(f"field {field}: -5 is a negative latency")):
        parse("aiperf", [path])


def test_vllm_block_and_json_negative_latency_refused(tmp_path):
    """vLLM/SGLang: 'P90 E2E Latency (ms): -1.0' in the printed block (a statistic nothing else reads), and a
    negative entry of --save-detailed's per-request ttfts."""
    block = tmp_path / "block.txt"
    block.write_text(SGLANG_BLOCK.read_text().replace("9187.89", "-1.0"))
    with pytest.raises(BatchmarkError, match=r"block at line 1\.p90_e2e_latency_ms: -1 is a negative latency"):
        parse("vllm-bench", [block], model="m")
    res = {"model_id": "m", "max_concurrency": 1, "request_rate": "inf", "completed": 2, "failed": 0,
           "output_throughput": 10.0, "total_input_tokens": 16, "total_output_tokens": 32, "ttfts": [0.1, -0.2]}
    f = tmp_path / "r.json"
    f.write_text(json.dumps(res))
    with pytest.raises(BatchmarkError, match=r"field ttfts\[1\]: -0.2 is a negative latency"):
        parse("vllm-bench", [f])


def test_llama_benchy_negative_ttfr_refused(tmp_path):
    """llama-benchy's time to first response (``ttfr``, a mean of −3 ms): refused naming the field."""
    d = json.loads((DATA / "llama-benchy" / "gpt-oss-120b.json").read_text())
    next(b for b in d["benchmarks"] if isinstance(b.get("ttfr"), dict))["ttfr"]["mean"] = -3.0
    f = tmp_path / "b.json"
    f.write_text(json.dumps(d))
    with pytest.raises(BatchmarkError, match=r"ttfr\.mean: -3 is a negative latency"):
        parse("llama-benchy", [f])


def test_confidence_bound_may_be_negative():
    """AIPerf's aggregate ci_low = mean − t·se can fall below 0 for a noisy small latency (3 runs, t = 4.303): a
    bound, not a measurement, so no latency refusal (the aggregate is refused for what it is)."""
    from pipeline.importers.parsing import is_latency_field

    assert not is_latency_field("metrics.ttft_avg_ms.ci_low") and is_latency_field("metrics.ttft_avg_ms.min")


# -- small kinds: BOM, is_pp_shared "0", a FIFO ---------------------------------------------------------------------

def test_vllm_bench_json_with_a_byte_order_mark(tmp_path):
    """A save-result JSON written with a UTF-8 BOM (PowerShell's Out-File, Windows editors) was 'no Serving Benchmark
    Result block found'.  Right: the same point as without the mark."""
    src = DATA / "vllm-bench"
    first = sorted(src.glob("*.json"))[0]
    plain = parse("vllm-bench", [first]).summaries[0]
    f = tmp_path / first.name
    f.write_bytes(b"\xef\xbb\xbf" + first.read_bytes())
    assert parse("vllm-bench", [f]).summaries[0].output_throughput_tok_s == plain.output_throughput_tok_s


def test_batched_bench_jsonl_pp_shared_string_zero_is_not_shared(tmp_path):
    """llama-batched-bench JSONL with "is_pp_shared": "0" was refused as a shared prompt ("0" is truthy in Python).
    Right: read as not shared, the same points as with 0; "1" and true are refused; "2" is neither."""
    src = DATA / "llama-batched-bench" / "llama-3.1-8b-q4_0.jsonl"
    rows = [json.loads(line) for line in src.read_text().splitlines() if line.strip()]
    plain = [p.output_throughput_tok_s for p in parse("llama-batched-bench", [src], model="m").summaries]

    def write(value):
        f = tmp_path / "bb.jsonl"
        f.write_text("\n".join(json.dumps({**copy.deepcopy(r), "is_pp_shared": value}) for r in rows) + "\n")
        return f

    assert [p.output_throughput_tok_s for p in parse("llama-batched-bench", [write("0")], model="m").summaries] == plain
    for shared in ("1", True):
        with pytest.raises(BatchmarkError, match="is_pp_shared"):
            parse("llama-batched-bench", [write(shared)], model="m")
    with pytest.raises(BatchmarkError, match="is neither 0 nor 1"):
        parse("llama-batched-bench", [write("2")], model="m")


def test_import_of_a_fifo_is_refused_not_blocked(tmp_path):
    """`import` of a named pipe opened it for reading and waited for a writer forever.  Right: refused at once,
    naming it a FIFO (the test fails by timing out after 10 s if it blocks)."""
    fifo = tmp_path / "result.json"
    os.mkfifo(fifo)
    out: list = []

    def run():
        try:
            parse("vllm-bench", [fifo])
        except BatchmarkError as exc:
            out.append(str(exc))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(10)
    if t.is_alive():  # unblock the reader so the test process can end
        with open(fifo, "w"):
            pass
        pytest.fail("import of a FIFO blocked")
    assert out and "a FIFO (named pipe), not a result file" in out[0]
