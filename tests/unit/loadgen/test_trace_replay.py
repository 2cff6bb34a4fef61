"""A trace replayed against a served endpoint: each request scheduled at the trace's offset (scaled to the rate),
its body the trace line's prompt length and ``max_tokens``, through the same open loop as Poisson and gamma."""

from __future__ import annotations

import asyncio
import threading

import pytest

from pipeline.config.sweepconfig import parse_config
from pipeline.core.records import PointKey
from pipeline.loadgen import streamrecord
from tests.conftest import REPO
from tests.integration.served_helpers import build_tokenizer
from tests.localapp import serve_app
from tests.unit.loadgen.test_workload_requests import _fake_server

TRACE = REPO / "tests" / "data" / "traces" / "mooncake-small.jsonl"


def test_a_served_trace_point_sends_the_trace_at_its_scaled_offsets(tmp_path):
    """Fault kinds: a trace point sent on a Poisson schedule (or at the nominal lengths) instead of the trace's.

    By hand: the shipped trace (R₀ = 2 req/s) at 40 req/s is a speed-up of 20, so its 8 arrivals (0, 0, 250, 500,
    1250, 1500, 2750, 3500 ms) are scheduled at 0, 0, 12.5, 25, 62.5, 75, 137.5, 175 ms; the bodies ask the
    trace's outputs (16, 8, 24, 4, 12, 20, 6, 10) with its prompt lengths."""
    from pipeline.backends.openai import OpenAIBackend

    seen: list[dict] = []
    loop = asyncio.new_event_loop()
    runner, url = loop.run_until_complete(serve_app("/v1/completions", _fake_server(seen)))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        cfg = parse_config({"name": "w", "hardware": "cpu", "backend": "openai", "concurrency": [],
                            "input_len": 100, "output_len": 12, "models": [{"name": "m", "served_name": "m"}],
                            "openai": {"base_url": url, "requests_per_point": 8, "engine": "vllm"},
                            "open_loop": {"load": "trace", "trace_file": str(TRACE), "speedups": [20.0]}}, "t.yaml")
        engine = OpenAIBackend(cfg)
        engine.spec, engine.features = cfg.models[0], streamrecord.Features()
        engine.tokenizer, engine.tokenizer_source = build_tokenizer(tmp_path / "tok"), "tok"
        rec = engine.measure(PointKey("m", "vllm", 100, 12, None, "trace", 40.0, None), 1, False, 0)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.run_until_complete(runner.cleanup())
        loop.close()
    got = sorted(rec.repeats[0].requests, key=lambda q: q.request_id)
    start = got[0].scheduled_s
    assert [q.scheduled_s - start for q in got] == pytest.approx([0, 0, 0.0125, 0.025, 0.0625, 0.075, 0.1375, 0.175])
    assert [q.drawn_input_len for q in got] == [120, 64, 200, 32, 96, 160, 48, 80]
    assert [q.drawn_output_len for q in got] == [16, 8, 24, 4, 12, 20, 6, 10]
    assert sorted(b["max_tokens"] for b in seen[:8]) == [4, 6, 8, 10, 12, 16, 20, 24]
    assert sorted(len(b["prompt"].split()) for b in seen[:8]) == [32, 48, 64, 80, 96, 120, 160, 200]
    assert rec.meta["trace_file"] == str(TRACE) and all(q.ok for q in got)
