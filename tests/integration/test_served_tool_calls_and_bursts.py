"""Streams whose output, count or timing hides from a simple client, each reproduced by a real server process
(``fake_stream_server.py``: 16 one-token chunks 10 ms apart after a 20 ms prefill; the true figures, worked from
its sleeps, are in ``test_served_token_truth``'s docstring: TTFT ≈ 21 ms, TPOT ≈ 10 ms).

- output streamed as tool calls (``delta.tool_calls[].function.arguments``, content null; AIPerf PR #804, SGLang PR
  #36272, GuideLLM PR #687): every request failed "no tokens received";
- usage held back (FastDeploy PR #8113: 4 empty deltas whose per-chunk usage stays at 12, the final usage 16):
  the count was 12, every request flagged ``count_below_max_tokens`` and the point excluded;
- timing hidden by buffering (a whole response in one burst at the end, kekzl/imp #754; a proxy releasing 8
  events at a time, dstack #4269): a clean point with TTFT = E2EL or ITL p50 = 0;
- an event stream as the WHATWG specification writes it (CR line endings, comments, ``id``/``event``/``retry``,
  the JSON over two ``data:`` lines): every request failed "stream ended without data".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.analysis.analyze import point_quality, point_warnings
from pipeline.analysis.quality import point_verdict
from pipeline.metrics.definitions import e2el_s, ttft_s
from tests.integration.served_helpers import build_tokenizer
from tests.integration.test_served_token_truth import N_REQUESTS, N_TOKENS, assert_true_figures, measure, measured


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tok")
    build_tokenizer(folder)
    return folder


def test_output_streamed_as_tool_calls_is_output(tmp_path, tok_dir):
    """Fault kind: the whole output as tool-call argument fragments.  Right: 16 tokens by the server's usage,
    TTFT at the first fragment (≈ 21 ms), TPOT ≈ 10 ms, no caveat."""
    rec, summ = measure("tool_calls", tmp_path, tok_dir, endpoint="chat")
    for r in measured(rec):
        assert r.ok, r.error
        assert r.output_tokens == N_TOKENS and len(r.chunks) == N_TOKENS and r.token_count_source == "usage"
    assert summ.caveats == {} and summ.completed == N_REQUESTS
    assert_true_figures(summ)


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_usage_held_back_is_counted_at_the_final_usage(tmp_path, tok_dir, endpoint):
    """Fault kind: the last 4 tokens only in the final usage.  Right (by hand from the server's sleeps): 16 tokens,
    12 streamed chunks of 1 token and 4 tokens at the final usage chunk, which arrives 4 × 10 ms + 10 ms after the
    12th chunk, so E2EL ≈ 20 + 16 × 10 = 180 ms (not the 12th chunk's ≈ 130 ms); the point is not excluded."""
    rec, summ = measure("usage_held_back", tmp_path, tok_dir, endpoint=endpoint)
    for r in measured(rec):
        assert r.ok, r.error
        assert r.output_tokens == N_TOKENS and [k for _, k in r.chunks] == [1] * 12 + [4]
        assert r.chunks[-1][0] - r.chunks[-2][0] >= 0.050
        assert 0.170 <= e2el_s(r) < 0.400
        assert "usage_held_back" in r.token_count_flags and "count_below_max_tokens" not in r.token_count_flags
    assert summ.caveats == {"usage_held_back": N_REQUESTS}
    assert not point_quality(summ)["excluded"]


@pytest.mark.parametrize("fault", ["burst_end", "clumped"])
def test_tokens_released_by_a_buffer_flag_the_point(tmp_path, tok_dir, fault):
    """Fault kind: the tokens reach the client 16 (burst_end) or 8 (clumped) events per read.  Right: every
    measured request flagged ``timed_by_intermediary``, the point's verdict flagged naming it, and the sweep warns;
    burst_end gives TTFT = E2EL (all 16 events in one read)."""
    rec, summ = measure(fault, tmp_path, tok_dir)
    for r in measured(rec):
        assert r.ok and r.output_tokens == N_TOKENS
        assert "timed_by_intermediary" in r.token_count_flags
        if fault == "burst_end":
            assert ttft_s(r) == e2el_s(r)
    assert summ.caveats == {"timed_by_intermediary": N_REQUESTS}
    v = point_verdict(summ.model_dump() if hasattr(summ, "model_dump") else summ.__dict__)
    assert v["verdict"] == "flagged" and "timed by an intermediary" in v["reasons"][0]
    assert any("arrived in bursts" in w for w in point_warnings(summ))


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_event_stream_as_the_specification_writes_it(tmp_path, tok_dir, endpoint):
    """Fault kind: a spec-conforming SSE stream (CR endings, comments, id/event/retry, two data lines per event).
    Right: read as the reference server's stream: 16 tokens, no caveat, the true figures."""
    rec, summ = measure("sse_spec", tmp_path, tok_dir, endpoint=endpoint)
    for r in measured(rec):
        assert r.ok, r.error
        assert r.output_tokens == N_TOKENS and len(r.chunks) == N_TOKENS
    assert summ.caveats == {}
    assert_true_figures(summ)
