"""Served token-count faults (kinds reported against public servers: docs/definitions.md, "Which token count"), each reproduced by a real server process (``fake_stream_server.py``).

The server streams 16 one-token chunks, one every 10 ms after a 20 ms prefill, so the true
figures (worked from its sleeps) are: 16 output tokens, TTFT ≈ 21 ms, TPOT ≈ 10 ms, per-user
≈ 95 tok/s and, at concurrency 1, output throughput 16 / (0.02 + 15 × 0.01 + overheads)
≈ 85–90 tok/s.  Sleeps only overshoot, so the bounds the sleeps give are kept on the side
that catches a fault (TPOT ≥ 10 ms, throughput ≤ 94 tok/s: the faults gave 4.7 ms and 8.5×
the throughput; a ZeroDivisionError; 48 tokens); the other side is generous (TPOT < 50 ms,
TTFT < 100 ms, throughput > 20 tok/s) because a busy machine stretches every wall-clock figure.
Each test names the fault kind it pins.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.config.sweepconfig import parse_config
from pipeline.backends import get_backend
from pipeline.metrics.summarize import summarize_point
from pipeline.metrics.definitions import tpot_s, ttft_s
from pipeline.core.records import PointKey
from tests.integration.served_helpers import build_tokenizer, free_port, wait_healthy

HERE = Path(__file__).resolve().parent
N_TOKENS = 16
N_REQUESTS = 6


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tok")
    build_tokenizer(folder)
    return folder


def start_server(fault: str, tmp: Path, seed: int = 0) -> tuple[subprocess.Popen, str]:
    """Start ``fake_stream_server.py`` with ``fault``; returns (process, /v1 URL)."""
    port = free_port()
    log = tmp / f"server-{fault}.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, str(HERE / "fake_stream_server.py"), "--port", str(port),
                                 "--fault", fault, "--seed", str(seed)], stdout=fh, stderr=subprocess.STDOUT)
    wait_healthy(f"http://127.0.0.1:{port}/health", proc, 30, log)
    return proc, f"http://127.0.0.1:{port}/v1"


def measure(fault: str, tmp: Path, tok_dir: Path, endpoint: str = "completions", concurrency: int = 1,
            requests: int = N_REQUESTS, seed: int = 0):
    """Measure one point (16 out, 1 repeat, warm-up on) against a fresh server with ``fault``; returns (records, summary)."""
    proc, url = start_server(fault, tmp, seed)
    try:
        cfg = parse_config({"name": "t", "hardware": "cpu", "backend": "openai", "input_len": 8,
                            "output_len": N_TOKENS, "concurrency": [concurrency], "repeats": 1,
                            "openai": {"base_url": url, "endpoint": endpoint, "requests_per_point": requests,
                                       "tokenizer": str(tok_dir), "timeout_s": 5},
                            "models": [{"name": "m", "served_name": "m"}]})
        engine = get_backend(cfg)
        engine.load(cfg.models[0])
        rec = engine.measure(PointKey("m", "openai", 8, N_TOKENS, concurrency), 1, True, 0)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return rec, summarize_point(rec)


def measured(rec):
    return [r for rep in rec.repeats for r in rep.requests if not r.warmup]


def assert_true_figures(summ, c1: bool = True):
    """The reference server's figures (module docstring)."""
    assert 0.020 <= summ.ttft_s["p50"] < 0.100
    assert 0.010 <= summ.tpot_s["p50"] < 0.050
    assert 20 < summ.per_user_tok_s <= 100
    if c1:
        assert 20 < summ.output_throughput_tok_s <= 94


def test_running_sum_usage_gives_16_tokens_and_true_throughput(tmp_path, tok_dir):
    """Fault kind: per-chunk usage that is a running sum of running totals (16 tokens reported as 136)."""
    rec, summ = measure("running_sum", tmp_path, tok_dir)
    for r in measured(rec):
        assert r.ok and r.output_tokens == N_TOKENS  # not 136 = 16 × 17 / 2
        assert [k for _, k in r.chunks] == [1] * N_TOKENS
        assert r.token_count_source == "per_chunk_usage"
        assert "usage_above_max_tokens" in r.token_count_flags
        assert "running sum" in r.token_count_reason
    assert summ.caveats == {"usage_above_max_tokens": N_REQUESTS}
    assert_true_figures(summ)  # before: 8.5× the true throughput


def test_per_chunk_count_of_one_with_right_final_usage(tmp_path, tok_dir):
    """Fault kind: per-chunk usage is that chunk's own count (always 1); the final usage is right (was ZeroDivisionError)."""
    rec, summ = measure("per_chunk_ones", tmp_path, tok_dir)
    for r in measured(rec):
        assert r.ok and r.output_tokens == N_TOKENS and len(r.chunks) == N_TOKENS
        assert r.token_count_source == "usage" and not r.token_count_flags
        assert 0.010 <= tpot_s(r) < 0.050
    assert summ.caveats == {}
    assert_true_figures(summ)


def test_usage_above_max_tokens_never_reaches_throughput(tmp_path, tok_dir):
    """Fault kind: a final usage count above max_tokens (48 for 16 asked); the per-chunk running totals are right."""
    rec, summ = measure("above_max", tmp_path, tok_dir)
    for r in measured(rec):
        assert r.output_tokens == N_TOKENS and r.token_count_source == "per_chunk_usage"
        assert r.token_count_flags == ["usage_above_max_tokens"]
    assert summ.token_count_sources == {"per_chunk_usage": N_REQUESTS}
    assert_true_figures(summ)


def test_usage_that_stops_rising(tmp_path, tok_dir):
    """Fault kind: per-chunk usage stops at 8 while 16 chunks of text keep arriving."""
    rec, summ = measure("usage_stalls", tmp_path, tok_dir)
    for r in measured(rec):
        assert r.output_tokens == N_TOKENS and r.token_count_source == "tokenized_text"
        assert "usage_stopped_rising" in r.token_count_flags
    assert summ.caveats["usage_stopped_rising"] == N_REQUESTS
    assert_true_figures(summ)


def test_stream_without_usage_on_a_server_that_reports_it(tmp_path, tok_dir):
    """Fault kind: the probe got a usage, the measured streams none."""
    rec, summ = measure("usage_dropped", tmp_path, tok_dir)
    for r in measured(rec):
        assert r.ok and r.output_tokens == N_TOKENS and not r.usage_reported
        assert r.token_count_source == "tokenized_text" and r.token_count_flags == ["usage_missing"]
    assert summ.caveats == {"usage_missing": N_REQUESTS}
    assert_true_figures(summ)


def test_usage_that_disagrees_with_the_chunks(tmp_path, tok_dir):
    """Fault kind: two tokens per chunk (8 chunks), final usage 9 for 16 tokens; text and max_tokens agree on 16."""
    rec, summ = measure("usage_low", tmp_path, tok_dir)
    for r in measured(rec):
        assert r.output_tokens == N_TOKENS and [k for _, k in r.chunks] == [2] * 8
        assert r.token_count_source == "tokenized_text" and "usage_disagrees_with_text" in r.token_count_flags
    # 8 chunks 20 ms apart carrying 2 tokens each: TPOT = 7 × 20 ms / 15 ≈ 9.3 ms (derived from the server's sleeps)
    assert 0.0093 <= summ.tpot_s["p50"] < 0.050


def test_hidden_reasoning_tokens_do_not_inflate_the_decode_rate(tmp_path, tok_dir):
    """Fault kind: 8 reasoning tokens generated but not streamed (usage only), then 8 visible tokens."""
    rec, summ = measure("hidden_reasoning", tmp_path, tok_dir)
    for r in measured(rec):
        assert r.ok and r.output_tokens == N_TOKENS and r.hidden_tokens == 8 and r.streamed_tokens == 8
        assert sum(k for _, k in r.chunks) == 8
        # first streamed token after 20 ms prefill + 8 × 10 ms hidden decode
        assert 0.100 <= ttft_s(r) < 0.500
        assert r.first_content_s == r.first_token_s
    # the streamed decode rate over the 8 visible tokens: 10 ms (per-user throughput and MBU's step time come
    # from it); vLLM's TPOT divides by all 16 output tokens: 7 × 10 / 15 ≈ 4.7 ms (each by its name)
    assert 0.010 <= summ.tpot_streamed_s["p50"] < 0.050 and 0.010 <= summ.step_time_s < 0.050
    assert 0.0046 <= summ.tpot_s["p50"] < 0.025
    assert 20 < summ.output_throughput_tok_s <= 94  # 16 generated tokens / ~0.18 s


def test_streamed_reasoning_counts_for_ttft_and_first_content_is_apart(tmp_path, tok_dir):
    """Fault kind: 8 tokens streamed as ``reasoning_content``, then 8 as content (chat)."""
    rec, summ = measure("reasoning_stream", tmp_path, tok_dir, endpoint="chat")
    for r in measured(rec):
        assert r.ok and r.output_tokens == N_TOKENS and r.hidden_tokens == 0 and len(r.chunks) == N_TOKENS
        assert 0.020 <= ttft_s(r) < 0.100  # the first reasoning token
        # first visible token: 20 ms + 8 × 10 ms, after the first (reasoning) token
        assert 0.100 <= r.first_content_s - r.sent_s < 0.500
        assert r.first_token_s < r.first_content_s
    assert 0.100 <= summ.time_to_first_content_s["p50"] < 0.500
    assert_true_figures(summ)


@pytest.mark.parametrize("seed", [0, 1])
def test_fuzzed_streams_give_failed_or_flagged_requests_never_a_traceback(seed, tmp_path, tok_dir):
    """Fuzz: every measured stream gets a seeded random corruption (truncation, garbage, bad JSON, wrong types,
    wrong counts, no [DONE]); each request must end failed with a one-line error, or with a possible count."""
    rec, summ = measure("fuzz", tmp_path, tok_dir, concurrency=2, requests=16, seed=seed)
    reqs = measured(rec)
    assert len(reqs) == 16
    for r in reqs:
        if r.error is not None:
            assert "\n" not in r.error and len(r.error) < 400 and not r.ok
        else:
            assert 1 <= r.output_tokens <= N_TOKENS  # never an impossible count
            if r.output_tokens < N_TOKENS:  # partial work is flagged, never a plain result
                assert "count_below_max_tokens" in r.token_count_flags
            assert sum(k for _, k in r.chunks) == r.streamed_tokens
    assert summ.failed == sum(1 for r in reqs if not r.ok) >= 1
    assert summ.completed + summ.failed == 16
    assert summ.caveats.get("failed_requests") == summ.failed
