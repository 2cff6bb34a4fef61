"""The load generator against a real OpenAI-compatible server: ``transformers serve`` started by the test.

The server runs the tiny local model of :mod:`served_helpers` (word-level tokenizer, every
token visible text, no EOS) with continuous batching on the CPU.  Expected values come from
the server itself (its ``usage``), from the request (``max_tokens``, the prompt length) and
from docs/definitions.md's definitions, never from our own client.
"""

from __future__ import annotations

import pytest
from tests.integration.served_helpers import tiny_model_dir, transformers_server  # noqa: F401  (fixtures)

from pipeline.config.sweepconfig import parse_config
from pipeline.backends import get_backend
from pipeline.metrics.summarize import summarize_point
from pipeline.metrics.definitions import e2el_s, itl_values, ttft_s
from pipeline.core.records import PointKey

pytestmark = pytest.mark.slow

IN_LEN, OUT_LEN, N_REQ = 16, 16, 12


@pytest.fixture(scope="module")
def measured(transformers_server, tiny_model_dir):  # noqa: F811
    cfg = parse_config({
        "name": "t", "hardware": "cpu", "backend": "openai", "input_len": IN_LEN, "output_len": OUT_LEN,
        "concurrency": [1, 4], "repeats": 1,
        "openai": {"base_url": transformers_server, "requests_per_point": N_REQ},
        "models": [{"name": "tiny", "served_name": str(tiny_model_dir), "path": str(tiny_model_dir)}]})
    engine = get_backend(cfg)
    engine.load(cfg.models[0])
    points = {c: engine.measure(PointKey("tiny", "openai", IN_LEN, OUT_LEN, c), 1, True, 0) for c in (1, 4)}
    return engine, points


def _measured(points):
    return [r for p in points.values() for rep in p.repeats for r in rep.requests if not r.warmup]


def test_unknown_fields_are_dropped_and_usage_is_seen(measured):
    # transformers serve answers 422 "Unexpected fields" to ignore_eos/min_tokens (its _validate_request);
    # it ignores stream_options but sends usage in its last chunk anyway.
    engine, _ = measured
    assert "ignore_eos" in engine.features.dropped and "min_tokens" in engine.features.dropped
    assert engine.features.usage_seen is True


def test_every_measured_request_completed_with_the_requested_counts(measured):
    _, points = measured
    reqs = _measured(points)
    assert len(reqs) == 2 * N_REQ  # requests_per_point at each of c=1 and c=4
    for r in reqs:
        assert r.error is None and r.ok
        assert r.usage_reported
        # server usage: completion_tokens == max_tokens (no EOS in the model), prompt_tokens == our exact prompt length
        assert r.output_tokens == OUT_LEN
        assert r.input_tokens == IN_LEN
        # chunk token counts add up to the server's usage
        assert sum(k for _, k in r.chunks) == r.output_tokens


def test_ttft_below_e2el_and_one_itl_per_token_gap(measured):
    """TTFT ≤ E2EL, equal exactly when every token came in the first read (fault kind: a test asserting what the
    definition does not promise: under load the client, or a proxy buffering the stream, reads all 16 tokens at
    once, and ``0 < 0.0302679 < 0.0302679`` failed on a correct record).  The strict inequality is asserted where
    the record shows a later read; ITL is per token whatever the reads (docs/definitions.md)."""
    _, points = measured
    for r in _measured(points):
        assert 0 < ttft_s(r) <= e2el_s(r)
        later_read = any(t > r.first_token_s for t, _ in r.chunks)
        assert (ttft_s(r) < e2el_s(r)) == later_read, r.chunks
        assert len(itl_values(r)) == r.output_tokens - 1  # docs/definitions.md: ITL is per token
        assert sum(itl_values(r)) == pytest.approx(r.done_s - r.first_token_s)


def test_closed_loop_never_exceeds_concurrency(measured):
    # closed loop: at c=4 at most 4 requests (warm-up and measured) overlap at any send time.
    _, points = measured
    reqs = [r for rep in points[4].repeats for r in rep.requests]
    for r in reqs:
        overlapping = [q for q in reqs if q.sent_s <= r.sent_s and (q.done_s or 1e9) > r.sent_s]
        assert len(overlapping) <= 4


def test_concurrency_4_has_more_throughput_than_1(measured):
    # continuous batching decodes 4 sequences per step; docs/definitions.md's output throughput must rise.
    # Throughput is wall-clock: on a machine other work loads, one 12-request point can land in a busy
    # second.  So each concurrency is measured up to three times and the best of each is compared
    # (interference only ever lowers a throughput, so the best try is the least disturbed one).
    engine, points = measured
    best = {c: summarize_point(points[c]).output_throughput_tok_s or 0.0 for c in (1, 4)}
    for attempt in range(2):
        if best[4] > best[1]:
            break
        for c in (1, 4):
            again = engine.measure(PointKey("tiny", "openai", IN_LEN, OUT_LEN, c), 1, True, attempt + 1)
            best[c] = max(best[c], summarize_point(again).output_throughput_tok_s or 0.0)
    assert best[1] > 0 and best[4] > best[1], best
