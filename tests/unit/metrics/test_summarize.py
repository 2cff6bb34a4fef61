"""Metric definitions (docs/definitions.md) checked against hand-computed values."""

import pytest

from pipeline.metrics.summarize import summarize_point
from pipeline.metrics.definitions import itl_values, tpot_s
from pipeline.core.pointsummary import distribution
from pipeline.core.records import PointKey, PointRecords, RepeatRecord, RequestRecord


def _req(i, sent, chunks, out_tokens, **kw):
    return RequestRecord(request_id=i, queued_s=kw.pop("queued", sent), sent_s=sent, first_token_s=chunks[0][0],
                         done_s=chunks[-1][0], chunks=chunks, input_tokens=10, output_tokens=out_tokens, **kw)


def test_ttft_tpot_e2el_by_hand():
    # sent 1.0, first token 1.5, last token 2.5, 5 tokens -> TTFT 0.5, E2EL 1.5, TPOT (1.5-0.5)/4 = 0.25
    r = _req(0, 1.0, [[1.5, 1], [1.75, 1], [2.0, 1], [2.25, 1], [2.5, 1]], 5)
    assert tpot_s(r) == pytest.approx(0.25)
    key = PointKey("m", "openai", 10, 5, 1)
    rep = RepeatRecord(repeat=0, batching="served", window_start_s=1.0, window_end_s=2.5, requests=[r])
    s = summarize_point(PointRecords(key, [rep]))
    assert s.ttft_s["p50"] == pytest.approx(0.5)
    assert s.e2el_s["p50"] == pytest.approx(1.5)
    assert s.tpot_s["p50"] == pytest.approx(0.25)
    # served window 1.0 -> 2.5 holds 5 tokens: 5 / 1.5 = 3.333 tok/s
    assert s.output_throughput_tok_s == pytest.approx(5 / 1.5)
    assert s.per_user_tok_s == pytest.approx(4.0)  # 1 / 0.25


def test_itl_multi_token_chunk_is_split_per_token():
    # chunks at 0.1 (1 token), 0.4 (3 tokens): gap 0.3 carried by 3 tokens -> three gaps of 0.1
    r = _req(0, 0.0, [[0.1, 1], [0.4, 3]], 4)
    assert itl_values(r) == pytest.approx([0.1, 0.1, 0.1])
    assert sum(itl_values(r)) == pytest.approx(0.3)
    assert len(itl_values(r)) == r.output_tokens - 1


def test_itl_first_chunk_extra_tokens_are_zero_gaps():
    # first chunk carries 2 tokens at 0.2, then 1 token at 0.5: gaps [0, 0.3]; sum = E2EL - TTFT = 0.3
    r = _req(0, 0.0, [[0.2, 2], [0.5, 1]], 3)
    assert itl_values(r) == pytest.approx([0.0, 0.3])


def test_static_batch_throughput_is_s_tg():
    # B = 2, 4 tokens each; steps end at 1.0 (prefill), 1.2, 1.4, 1.6 -> decode window 0.6 s,
    # tokens after the first = 2 x 3 = 6 -> 10 tok/s (llama.cpp S_TG = B*TG/T_TG);
    # prefill 0.0 -> 1.0 for 2 x 10 input tokens -> 20 tok/s (S_PP).
    steps = [1.0, 1.2, 1.4, 1.6]
    reqs = [RequestRecord(i, 0.0, 0.0, 1.0, 1.6, [[t, 1] for t in steps], 10, 4) for i in range(2)]
    rep = RepeatRecord(0, "static_batch", 1.0, 1.6, reqs, prefill_start_s=0.0, step_end_s=steps)
    s = summarize_point(PointRecords(PointKey("m", "transformers", 10, 4, 2), [rep]))
    assert s.output_throughput_tok_s == pytest.approx(10.0)
    assert s.prefill_throughput_tok_s == pytest.approx(20.0)
    assert s.step_time_s == pytest.approx(0.2)
    assert s.tpot_s["p50"] == pytest.approx(0.2)


def test_failed_requests_counted_but_out_of_percentiles():
    ok = _req(0, 0.0, [[0.5, 1], [1.0, 1]], 2)
    bad = RequestRecord(1, 0.0, 0.0, None, None, [], 10, 0, error="timeout")
    rep = RepeatRecord(0, "served", 0.0, 1.0, [ok, bad])
    s = summarize_point(PointRecords(PointKey("m", "openai", 10, 2, 2), [rep]))
    assert (s.completed, s.failed) == (1, 1)
    assert s.ttft_s["p50"] == pytest.approx(0.5)
    assert s.errors == ["timeout"]


def test_distribution_linear_interpolation():
    # numpy linear: p50 of 1..5 = 3, p90 = 4.6, p99 = 4.96, mean 3
    assert distribution([1, 2, 3, 4, 5]) == pytest.approx({"p50": 3, "p90": 4.6, "p99": 4.96, "mean": 3})
    # in ms, scaled to s: p50 of 1..5 ms = 3 ms = 0.003 s
    assert distribution([1, 2, 3, 4, 5], scale=1e-3)["p50"] == pytest.approx(0.003)


def test_distribution_of_stated_figures():
    """The importers' path: figures a tool states (a missing one stays None), scaled ms -> s."""
    assert distribution(p50=20.0, mean=25.0, scale=1e-3) == pytest.approx(
        {"p50": 0.020, "p90": None, "p99": None, "mean": 0.025})
    assert distribution() is None and distribution([]) is None


def test_itl_chunk_without_tokens_does_not_lose_its_gap():
    # chunks: 0.1 (1), 0.2 (0 tokens: a keep-alive), 0.5 (1) -> one gap of 0.4 measured from the last token
    r = _req(0, 0.0, [[0.1, 1], [0.2, 0], [0.5, 1]], 2)
    assert itl_values(r) == pytest.approx([0.4])
    assert sum(itl_values(r)) == pytest.approx(r.done_s - r.first_token_s)
