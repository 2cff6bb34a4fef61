"""Peer definitions: per-token vs per-chunk ITL, vLLM's TPOT, vLLM's output throughput and goodput,
batchmark's own window under its own name, and MBU at points past max_num_seqs.

Every expected value is worked by hand from the records below, following the peer's source named in each
test (``vllm/benchmarks/serve.py`` ``calculate_metrics`` and ``vllm/benchmarks/lib/endpoint_request_func.py``,
read from the vLLM installed in ``.venv-vllm``).
"""

import pytest

from pipeline.analysis.analyze import analyze
from pipeline.analysis.regime import decode_batch
from pipeline.metrics.goodput import slo_goodput
from pipeline.metrics.summarize import summarize_point
from pipeline.metrics.definitions import itl_chunk_values, itl_values, repeat_duration_s, tpot_s, tpot_streamed_s
from pipeline.cards.modelcards import ModelCard
from pipeline.core.pointsummary import PointSummary
from pipeline.core.records import PointKey, PointRecords, RepeatRecord, RequestRecord


def _req(i, sent, chunks, out_tokens, **kw):
    return RequestRecord(request_id=i, queued_s=sent, sent_s=sent, first_token_s=chunks[0][0] if chunks else None,
                         done_s=chunks[-1][0] if chunks else None, chunks=chunks, input_tokens=10,
                         output_tokens=out_tokens, **kw)


def test_itl_per_token_and_per_chunk_by_hand():
    """A 3-token chunk (speculative decoding, a server batching tokens per event): 3 per-token gaps, 1 chunk gap.

    Chunks at 1.0 (1 token), 1.3 (3 tokens), 1.5 (1 token).  Per token (docs/definitions.md, ITL): 0.3 / 3 three times,
    then 0.2.  Per chunk (vLLM: ``output.itl.append(timestamp - most_recent_timestamp)`` per chunk): 0.3, 0.2.
    """
    r = _req(0, 0.0, [[1.0, 1], [1.3, 3], [1.5, 1]], 5)
    assert itl_values(r) == pytest.approx([0.1, 0.1, 0.1, 0.2])
    assert itl_chunk_values(r) == pytest.approx([0.3, 0.2])
    s = summarize_point(PointRecords(PointKey("m", "vllm", 10, 5, 1),
                                     [RepeatRecord(0, "served", 0.0, 1.5, [r])]))
    assert s.itl_s["p50"] == pytest.approx(0.1) and s.itl_s["mean"] == pytest.approx(0.5 / 4)
    assert s.itl_chunk_s["p50"] == pytest.approx(0.25) and s.itl_chunk_s["mean"] == pytest.approx(0.25)


def test_tpot_is_vllms_output_tokens_not_streamed_chunks():
    """vLLM: tpot = (latency − ttft) / (output_len − 1), output_len = the server's completion tokens.

    Two chunks at 1.0 and 2.0, the second carrying 2 tokens, 3 output tokens: (2.0 − 1.0) / 2 = 0.5 (a chunk
    count would give 1.0 / 1).  With 5 of 10 output tokens hidden (reasoning never streamed), vLLM still
    divides by 9; batchmark's streamed decode rate divides by 5 − 1 = 4.
    """
    assert tpot_s(_req(0, 0.0, [[1.0, 1], [2.0, 2]], 3)) == pytest.approx(0.5)
    hidden = _req(1, 0.0, [[1.0, 1], [1.5, 1], [2.0, 1], [2.5, 1], [3.0, 1]], 10, hidden_tokens=5)
    assert tpot_s(hidden) == pytest.approx(2.0 / 9)
    assert tpot_streamed_s(hidden) == pytest.approx(2.0 / 4)


def test_tpot_keeps_requests_whose_tokens_arrived_at_once():
    """vLLM appends tpot for every request with output_len > 1, so a request whose 4 tokens came in one chunk has
    TPOT 0 and counts in the percentiles; batchmark's streamed decode rate cannot be measured there (None).

    Point: request A (1 token a chunk at 1.0, 1.4, 1.8: TPOT 0.8 / 2 = 0.4), request B (4 tokens at 1.0 at
    once: TPOT 0).  vLLM's median of [0.4, 0] = 0.2; the streamed median is A's 0.4 alone, and
    per-user throughput and the step time are taken from it (1 / 0.4 = 2.5 tok/s).
    """
    a = _req(0, 0.0, [[1.0, 1], [1.4, 1], [1.8, 1]], 3)
    b = _req(1, 0.0, [[1.0, 4]], 4)
    assert tpot_s(b) == 0.0 and tpot_streamed_s(b) is None
    s = summarize_point(PointRecords(PointKey("m", "vllm", 10, 4, 2), [RepeatRecord(0, "served", 0.0, 1.8, [a, b])]))
    assert s.tpot_s["p50"] == pytest.approx(0.2) and s.tpot_s["mean"] == pytest.approx(0.2)
    assert s.tpot_streamed_s["p50"] == pytest.approx(0.4)
    assert s.per_user_tok_s == pytest.approx(2.5) and s.step_time_s == pytest.approx(0.4)
    assert s.samples["tpot_s"] == pytest.approx([0.4, 0.0])


def _failing_late_repeat():
    # A: sent 0, done 2, 10 tokens; B: sent 0.5, done 3, 10 tokens; C failed after its first token at 1.5 and a
    # last chunk at 5.0 (the stream broke).  batchmark's window: first send 0 -> last completion 3.
    a = _req(0, 0.0, [[1.0, 1]] + [[1.0 + 0.1 * i, 1] for i in range(1, 9)] + [[2.0, 1]], 10)
    b = _req(1, 0.5, [[1.5, 1]] + [[1.5 + 0.1 * i, 1] for i in range(1, 9)] + [[3.0, 1]], 10)
    c = _req(2, 1.0, [[1.5, 1], [5.0, 1]], 2, error="stream ended early (no [DONE], finish_reason or usage)")
    return RepeatRecord(0, "served", 0.0, 3.0, [a, b, c])


def test_output_throughput_by_vllms_duration_and_the_steady_window_apart():
    """vLLM: output_throughput = Σ output tokens of successful requests / benchmark_duration, the duration running
    until every request returned, failed ones too.  Here: 20 tokens / (5.0 − 0.0) = 4 tok/s.  batchmark's own
    window (first measured send → last measured completion): 20 / 3.0 = 6.667 tok/s, as
    ``steady_output_throughput_tok_s``.
    """
    rep = _failing_late_repeat()
    assert repeat_duration_s(rep) == pytest.approx(5.0)
    s = summarize_point(PointRecords(PointKey("m", "vllm", 10, 10, 2), [rep]))
    assert s.output_throughput_tok_s == pytest.approx(4.0)
    assert s.steady_output_throughput_tok_s == pytest.approx(20 / 3.0)
    assert s.duration_s == pytest.approx(5.0)
    assert (s.completed, s.failed) == (2, 1)


def test_goodput_divides_by_vllms_duration():
    """vLLM: request_goodput = good_completed / dur_s.  Both finished requests meet a 10 s E2EL SLO:
    2 / 5.0 s = 0.4 req/s and 20 tokens / 5.0 s = 4 tok/s (not 2 / 3.0)."""
    g = slo_goodput(PointRecords(PointKey("m", "vllm", 10, 10, 2), [_failing_late_repeat()]),
                    {"goodput_e2el_ms": 10_000})  # the per-request limit (vLLM --goodput e2el:10000)
    assert g["good"] == 2 and g["goodput_rps"] == pytest.approx(0.4) and g["goodput_tok_s"] == pytest.approx(4.0)


def _card():
    # 1 GB of weights, 1 MB of KV per token in its one layer: at context 100 one sequence reads 1e8 bytes a step
    return ModelCard(name="d", kind="dense", total_params=10**9, active_params=10**9, embedding_params=0,
                     weight_bytes=1e9, dense_bytes=1e9, expert_bytes=0, num_layers=1, num_attention_heads=1,
                     num_kv_heads=1, head_dim=1, kv_bytes_per_token=1e6)


def _served(c, step, server=None):
    return PointSummary(model="d", engine="vllm", input_len=100, output_len=0, concurrency=c, repeats=1,
                        completed=4 * c, failed=0, output_throughput_tok_s=c / step, per_user_tok_s=1 / step,
                        ttft_s=None, ttft_with_queue_s=None, tpot_s=None, itl_s=None, e2el_s=None,
                        prefill_throughput_tok_s=None, step_time_s=step, server=server)


def test_mbu_past_max_num_seqs_uses_the_batch_that_ran():
    """c = 8 against --max-num-seqs 4 is 'queueing': the server decodes 4, so one step reads 1e9 + 4 × 1e8 =
    1.4e9 bytes; in 20 ms that is 70 GB/s, MBU 0.70 against 100 GB/s (the concurrency as the batch would
    claim 1.8e9 bytes, MBU 0.90).  With the scrape's running count (3) the batch is 3: 1.3e9 → 0.65."""
    hw = {"name": "x", "bandwidth_gb_s_spec": 100, "peak_tflops_spec": 10, "memory_gb": 16}
    limits = {"d": {"max_num_seqs": 4}}
    res = analyze([_served(8, 0.02)], {"d": _card()}, hw, None, limits=limits)
    p = res["points"][0]
    assert p["regime"] == "queueing" and p["batch"] == 4
    assert p["mbu"] == pytest.approx(0.70)
    scraped = {"requests_running_max": 3.0, "requests_waiting_max": 5.0, "kv_cache_usage_max": 0.5, "preemptions": 0.0}
    p = analyze([_served(8, 0.02, scraped)], {"d": _card()}, hw, None, limits=limits)["points"][0]
    assert p["batch"] == 3 and p["mbu"] == pytest.approx(0.65)
    # below the limit the batch is the concurrency
    p = analyze([_served(4, 0.02)], {"d": _card()}, hw, None, limits=limits)["points"][0]
    assert p["regime"] == "batching" and p["batch"] == 4 and p["mbu"] == pytest.approx(0.70)


def test_decode_batch_without_any_limit_is_the_concurrency():
    assert decode_batch(16, "queueing", None, None) == 16
    assert decode_batch(16, "batching", {"requests_running_max": 3}, {"max_num_seqs": 4}) == 16
