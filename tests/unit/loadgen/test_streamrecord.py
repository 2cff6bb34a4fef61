"""The pure rules behind four stream kinds (values worked by hand; each names the fault kind and its public source):
tool-call deltas are output, usage held back to the final usage, tokens released in bursts by a buffer, and a
point that did not measure the asked workload (early stop under ``ignore_eos``, a tokenizer mismatch) left out.
"""

from __future__ import annotations

from pipeline.analysis.analyze import point_quality
from pipeline.core.pointsummary import PointSummary
from pipeline.loadgen.streamrecord import Features, RawStream, arrived_in_bursts, finalize, parse_event
from pipeline.loadgen.tokencount import Evidence, decide


def _chat(delta: dict, usage: dict | None = None) -> dict:
    obj = {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    return obj | ({"usage": usage} if usage else {})


def test_tool_call_fragments_are_streamed_output_and_ttft_is_the_first():
    """AIPerf PR #804 / SGLang PR #36272 / GuideLLM PR #687: content null, the output in
    ``tool_calls[0].function`` (name then argument fragments), final usage 3.  Right: 3 tokens, one per fragment
    chunk, TTFT at the first fragment (t = 0.5 s after a send at 0.1 s: 0.4 s).  Before: "no tokens received"."""
    raw = RawStream(request_id=0, warmup=False, queued_s=0.0, sent_s=0.1)
    parse_event(raw, _chat({"content": None, "tool_calls": [{"index": 0, "id": "c", "type": "function",
                                                             "function": {"name": "get", "arguments": ""}}]}), 0.5)
    parse_event(raw, _chat({"tool_calls": [{"index": 0, "function": {"arguments": "{\"a\""}}]}), 0.6)
    parse_event(raw, _chat({"tool_calls": [{"index": 0, "function": {"arguments": ": 1}"}}]}), 0.7)
    parse_event(raw, {"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": 3}}, 0.8)
    rec = finalize(raw, 8, max_tokens=3, features=Features())
    assert rec.ok and rec.output_tokens == 3 and [k for _, k in rec.chunks] == [1, 1, 1]
    assert rec.first_token_s - rec.sent_s == 0.4


def test_usage_held_back_final_usage_is_the_count():
    """FastDeploy PR #8113: 3 text chunks with cumulative usage 1, 2, 3, then 2 empty deltas whose usage stays at 3,
    then the final usage 5 = max_tokens under ignore_eos.  Right: 5 tokens from the usage, chunks 1, 1, 1, 0, 0 and
    the 2 held tokens at the final usage chunk.  Before: the per-chunk 3, flagged count_below_max_tokens."""
    ev = Evidence(texts=[" a", " b", " c", "", ""], per_chunk=[1, 2, 3, 3, 3], usage=5, max_tokens=5,
                  fixed_length=True, final_usage_timed=True)
    d = decide(ev)
    assert (d.output_tokens, d.counts, d.held_back, d.source) == (5, [1, 1, 1, 0, 0], 2, "usage")
    assert d.flags == ["usage_held_back"]
    # not under a fixed length, or a final usage that is not max_tokens: the rule does not apply
    assert decide(Evidence(**{**ev.__dict__, "fixed_length": False})).held_back == 0
    assert decide(Evidence(**{**ev.__dict__, "usage": 4})).held_back == 0


def test_usage_held_back_e2el_ends_at_the_final_usage_chunk():
    """The same stream through the record: text at 0.2, 0.3, 0.4 s, empty deltas at 0.5, 0.6, final usage at 0.7;
    send at 0.  Right: E2EL 0.7 s (not 0.4), chunks [[0.2, 1], [0.3, 1], [0.4, 1], [0.7, 2]]."""
    raw = RawStream(request_id=0, warmup=False, queued_s=0.0, sent_s=0.0)
    for t, text, u in [(0.2, " a", 1), (0.3, " b", 2), (0.4, " c", 3), (0.5, "", 3), (0.6, "", 3)]:
        parse_event(raw, {"choices": [{"index": 0, "text": text}], "usage": {"completion_tokens": u}}, t)
    parse_event(raw, {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 5}}, 0.7)
    rec = finalize(raw, 4, max_tokens=5, features=Features())
    assert rec.chunks == [[0.2, 1], [0.3, 1], [0.4, 1], [0.7, 2]] and rec.done_s == 0.7


def test_bursts_by_hand():
    """kekzl/imp #754 (whole response at the end), dstack #4269 (a proxy's buffer): 16 events in 1 read (16 per
    read) and in 2 reads (8 per read) are bursts; 16 events in 4 reads (4 per read, as a server speculating 3 tokens
    ahead may write) and 7 events in 1 read (too few to tell) are not."""
    assert arrived_in_bursts([1.0] * 16)
    assert arrived_in_bursts([1.0] * 8 + [2.0] * 8)
    assert not arrived_in_bursts([float(i // 4) for i in range(16)])
    assert not arrived_in_bursts([1.0] * 7)
    assert not arrived_in_bursts([0.01 * i for i in range(16)])


def _summary(**caveats: int) -> PointSummary:
    return PointSummary(model="m", engine="openai", input_len=8, output_len=16, concurrency=4, repeats=1,
                        output_throughput_tok_s=100.0, per_user_tok_s=30.0, ttft_s=None, ttft_with_queue_s=None,
                        tpot_s=None, itl_s=None, e2el_s=None, prefill_throughput_tok_s=None, step_time_s=None,
                        completed=20, failed=0, failure_rate=0.0, caveats=dict(caveats), input_tokens_served=40.0)


def test_tokenizer_mismatch_and_early_stop_leave_the_point_out_naming_the_cause():
    """vLLM PR #42532 (the server counts 5× the prompt) and inference-perf PR #746 (ignore_eos ignored): 20 of 20
    requests carry the caveat, above the 5 % of max_failure_rate.  Right: excluded, the reason naming the cause and
    both numbers; 1 of 20 (5 %, not above) is a caveat only.  Before: the mismatch was never excluded."""
    q = point_quality(_summary(input_tokens_mismatch=20))
    assert q["excluded"] and "counted by the server at 40 prompt tokens for the 8 the client built" in q["excluded_reason"]
    assert "tokenizer" in q["excluded_reason"]
    q = point_quality(_summary(count_below_max_tokens=20))
    assert q["excluded"] and "stopped before the requested 16 tokens although the server accepted ignore_eos" in \
        q["excluded_reason"]
    assert not point_quality(_summary(input_tokens_mismatch=1))["excluded"]
