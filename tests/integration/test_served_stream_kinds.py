"""Streams and servers: three kinds seen in public reports, each reproduced by a real server process
(``fake_stream_server.py``: 16 one-token chunks 10 ms apart after a 20 ms prefill; the true figures are in
``test_served_token_truth``'s docstring).

- a token's text split over two SSE events: every request failed as "impossible token count: 32 chunks with
  text for max_tokens 16" although usage and the re-tokenised text both said 16;
- the server counting 5× the prompt the client built (input 8 → ``prompt_tokens`` 40): kept "in = 8" silently;
- ``ignore_eos`` accepted but not honoured (finish "stop" at 8 of 16 tokens): flagged, yet in the knee and
  peak, and the sweep printed nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.analysis.analyze import point_quality, point_warnings
from tests.integration.served_helpers import build_tokenizer
from tests.integration.test_served_token_truth import N_REQUESTS, N_TOKENS, assert_true_figures, measure, measured


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tok")
    build_tokenizer(folder)
    return folder


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_token_split_over_two_events_is_one_token(tmp_path, tok_dir, endpoint):
    """Fault kind: one token's text over two events; usage (16) and the tokenised text (16 words) agree."""
    rec, summ = measure("split_token", tmp_path, tok_dir, endpoint=endpoint)
    for r in measured(rec):
        assert r.ok, r.error
        assert r.output_tokens == N_TOKENS and r.token_count_source == "usage" and not r.token_count_flags
        # each token counts in the event where its text ends: 16 chunks of 1 token, 10 ms apart
        assert [k for _, k in r.chunks] == [1] * N_TOKENS
        assert "split over events" in r.token_count_reason
    assert summ.caveats == {} and summ.completed == N_REQUESTS
    assert_true_figures(summ)


def test_server_counting_five_times_the_prompt_is_flagged(tmp_path, tok_dir):
    """Fault kind: prompt_tokens 5× the prompt (8 words → 40): the record keeps the server's 40, the point is
    flagged, and the sweep's warning names both numbers."""
    rec, summ = measure("prompt_5x", tmp_path, tok_dir)
    for r in measured(rec):
        assert r.ok and r.input_tokens == 40
        assert "input_tokens_mismatch" in r.token_count_flags
    assert summ.input_tokens_served == 40
    assert summ.caveats == {"input_tokens_mismatch": N_REQUESTS}
    assert "input_tokens_mismatch" in point_quality(summ)["caveats"]
    (line,) = point_warnings(summ)
    assert "counted 40 prompt tokens for the 8" in line


def test_ignore_eos_accepted_but_not_honoured_is_warned_and_left_out(tmp_path, tok_dir):
    """Fault kind: requests stop at 8 of 16 tokens (finish "stop") although ignore_eos was accepted: every
    measured request is flagged, the point is left out of the analysis (6 of 6 > 5 %), and the sweep warns."""
    rec, summ = measure("stop_early", tmp_path, tok_dir)
    for r in measured(rec):
        assert r.ok and r.output_tokens == N_TOKENS // 2
        assert "count_below_max_tokens" in r.token_count_flags
    assert summ.output_tokens_served == 8
    q = point_quality(summ)
    assert q["excluded"] and "stopped before the requested 16 tokens" in q["excluded_reason"]
    (line,) = point_warnings(summ)
    assert "6 of 6 requests stopped before the requested 16 output tokens (mean 8)" in line
    assert "left out of the analysis" in line


@pytest.mark.parametrize("fault, words", [
    ("stop_early", "6 of 6 requests stopped before the requested 16 output tokens (mean 8) although the server "
                   "accepted ignore_eos"),
    ("prompt_5x", "the server counted 40 prompt tokens for the 8 the client built"),
])
def test_the_sweep_prints_each_kind_while_it_runs(fault, words, tmp_path, tok_dir, scratch_root, monkeypatch):
    """The sweep warns during the run (was: nothing printed), one line naming the point and the numbers."""
    from pipeline.sweep import gridwalk as sweep
    from pipeline.config.sweepconfig import parse_config
    from pipeline.machine.hardware import ProbeResult
    from tests.integration.test_served_token_truth import start_server

    fake = ProbeResult("cpu", "float32", 10.0, 0.1, [10.0], [0.1], 1, 1, 1)
    monkeypatch.setattr(sweep, "probe", lambda *a, **k: fake)
    proc, url = start_server(fault, tmp_path)
    said: list[str] = []
    try:
        cfg = parse_config({"name": "t", "hardware": "cpu", "backend": "openai", "input_len": 8, "output_len": N_TOKENS,
                            "concurrency": [1], "repeats": 1,
                            "openai": {"base_url": url, "requests_per_point": N_REQUESTS, "tokenizer": str(tok_dir),
                                       "timeout_s": 5},
                            "models": [{"name": "m", "served_name": "m"}]})
        sweep.run_sweep(cfg, scratch_root / "data" / "runs" / "warn", progress=False, log=said.append)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    (line,) = [m for m in said if m.startswith("warning: m c = 1:")]
    assert words in line and "\n" not in line
