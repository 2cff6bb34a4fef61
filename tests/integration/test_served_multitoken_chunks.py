"""Multi-token chunks: a chunk carrying 3 tokens must give 3 ITL entries whose sum is the chunk gap.

An in-test aiohttp server streams two content chunks: `` t001`` (1 token), then after
``GAP_S`` a chunk `` t002 t003 t004`` (3 tokens).  Three variants tell the client how many
tokens the second chunk holds: per-chunk usage (vLLM's continuous_usage_stats), only a
final usage (the client tokenizes the chunk text and reconciles with usage), and no usage at
all behind a server that rejects unknown request fields (the client drops them and counts by
tokenizing).  Expected values: the server's chunk layout and sleep, docs/definitions.md's ITL rule.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web
from tests.integration.served_helpers import build_tokenizer

from pipeline.loadgen import loadgen
from pipeline.metrics.definitions import itl_values

GAP_S = 0.05
SECOND = " t002 t003 t004"


def _app(variant: str) -> web.Application:
    async def completions(req: web.Request) -> web.StreamResponse:
        body = await req.json()
        if variant == "strict":
            unknown = set(body) - {"model", "prompt", "max_tokens", "stream", "temperature"}
            if unknown:
                return web.json_response({"error": f"unknown fields {sorted(unknown)}"}, status=400)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(req)
        per_chunk = variant == "per_chunk" and body.get("stream_options", {}).get("continuous_usage_stats")

        async def send(obj):
            await resp.write(b"data: " + json.dumps(obj).encode() + b"\n\n")

        first = {"choices": [{"index": 0, "text": " t001"}]}
        second = {"choices": [{"index": 0, "text": SECOND}]}
        if per_chunk:
            first["usage"] = {"prompt_tokens": 4, "completion_tokens": 1}
            second["usage"] = {"prompt_tokens": 4, "completion_tokens": 4}
        await send(first)
        await asyncio.sleep(GAP_S)
        await send(second)
        if variant != "strict":
            await send({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 4, "total_tokens": 8}})
        await resp.write(b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    return app


async def _one_request(variant: str, tokenizer):
    runner = web.AppRunner(_app(variant))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    try:
        target = loadgen.Target(base_url=f"http://127.0.0.1:{port}/v1", model="m")
        async with loadgen.make_session(1) as session:
            feats = await loadgen.detect_features(session, target, "t005 t006")
            raw = loadgen.RawStream(request_id=0, warmup=False, queued_s=0.0, sent_s=0.0)
            import time

            t0 = time.perf_counter()
            await loadgen.stream_one(session, target, loadgen.build_body(target, feats, "t005 t006", 4), raw, t0,
                                     target.headers())
        return feats, loadgen.finalize(raw, 2, tokenizer)
    finally:
        await runner.cleanup()


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return build_tokenizer(tmp_path_factory.mktemp("tok"))


@pytest.mark.parametrize("variant", ["per_chunk", "final_usage", "strict"])
def test_three_token_chunk_gives_three_itl_entries(variant, tokenizer):
    feats, rec = asyncio.run(_one_request(variant, tokenizer))
    assert rec.error is None
    assert [k for _, k in rec.chunks] == [1, 3]  # the server's layout
    assert rec.output_tokens == 4
    assert rec.usage_reported is (variant != "strict")
    gap = rec.chunks[1][0] - rec.chunks[0][0]
    # The server slept GAP_S between its sends, but that bounds its send times, not the client's
    # arrival times (a busy machine can deliver the first chunk late), so no wall-clock bound here:
    # the recorded timestamps are ordered and the ITL entries below are worked from them.
    assert rec.first_token_s == rec.chunks[0][0] < rec.chunks[1][0] == rec.done_s
    assert gap > 0
    itl = itl_values(rec)
    assert len(itl) == 3  # 4 tokens → 3 gaps, not 1 inflated entry
    assert itl == pytest.approx([gap / 3] * 3)
    assert sum(itl) == pytest.approx(gap)
    if variant == "strict":
        assert {"ignore_eos", "min_tokens", "stream_options"} <= set(feats.dropped)
    if variant == "per_chunk":
        assert feats.per_chunk_usage_seen and not feats.dropped


def _flaky_app() -> web.Application:
    """Every 3rd request (by prompt number) stalls past the client's timeout; every 4th answers HTTP 500."""
    async def completions(req: web.Request) -> web.StreamResponse:
        body = await req.json()
        n = int(body["prompt"].split()[0][1:])
        if n % 4 == 0:
            return web.json_response({"error": "boom"}, status=500)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(req)
        for i in range(4):
            if n % 3 == 0 and i == 2:
                await asyncio.sleep(1.5)
            await resp.write(b'data: {"choices":[{"index":0,"text":" t00%d"}]}\n\n' % (i + 1))
            await asyncio.sleep(0.005)
        await resp.write(b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":4}}\n\ndata: [DONE]\n\n')
        return resp

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    return app


def test_failed_and_timed_out_requests_are_recorded_and_kept_out_of_latencies():
    from pipeline.metrics.summarize import summarize_point
    from pipeline.metrics.definitions import e2el_s, ttft_s
    from pipeline.core.pointsummary import distribution
    from pipeline.core.records import PointKey, PointRecords, RepeatRecord

    async def run():
        runner = web.AppRunner(_flaky_app())
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        try:
            target = loadgen.Target(base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout_s=0.5)
            feats = loadgen.Features(False, False, True, False)
            bodies = [loadgen.build_body(target, feats, f"t{i:03d}", 4) for i in range(1, 13)]
            import time

            async with loadgen.make_session(3) as session:
                return await loadgen.closed_loop(session, target, bodies, 3, 0, time.perf_counter())
        finally:
            await runner.cleanup()

    res = asyncio.run(run())
    recs = [loadgen.finalize(s, 1) for s in res.streams]
    by_n = {r.request_id + 1: r for r in recs}  # prompt t00n is request n-1
    assert len(by_n) == 12
    for n, r in by_n.items():
        if n % 4 == 0:
            assert r.error.startswith("HTTP 500") and not r.ok
        elif n % 3 == 0:
            assert r.error == "timeout after 0.5 s" and not r.ok
        else:
            assert r.error is None and r.ok and r.output_tokens == 4
    start, end = loadgen.measured_window(recs)
    summ = summarize_point(PointRecords(PointKey("m", "openai", 1, 4, 3),
                                        [RepeatRecord(0, "served", start, end, recs)]))
    # prompts 1..12: 3 answer 500 (4, 8, 12), 3 stall (3, 6, 9) → 6 complete
    assert summ.completed == 6 and summ.failed == 6
    # the excluded requests themselves: the stalled ones (3, 6, 9) did stream a first token, so they
    # had a TTFT to give, yet neither it nor any of the failed requests' figures is in the summary
    complete = [r for r in recs if r.request_id + 1 in {1, 2, 5, 7, 10, 11}]
    stalled = [by_n[n] for n in (3, 6, 9)]
    assert all(r.first_token_s is not None for r in stalled)
    assert summ.samples["ttft_s"] == [ttft_s(r) for r in complete]
    assert summ.ttft_s == distribution([ttft_s(r) for r in complete])
    assert summ.e2el_s == distribution([e2el_s(r) for r in complete])
    assert not {ttft_s(r) for r in stalled} & set(summ.samples["ttft_s"])


def test_api_key_is_sent_but_never_stored(tmp_path, monkeypatch):
    """The openai engine sends ``Authorization: Bearer <key>`` read from ``api_key_env``; no record or provenance holds it."""
    import threading

    from pipeline.config.sweepconfig import parse_config
    from pipeline.backends import get_backend
    from pipeline.core.records import PointKey

    key = "sk-test-0123456789"
    seen = []

    async def completions(req: web.Request) -> web.StreamResponse:
        seen.append(req.headers.get("Authorization"))
        if req.headers.get("Authorization") != f"Bearer {key}":
            return web.json_response({"error": "unauthorized"}, status=401)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(req)
        for i in range(3):
            await resp.write(b'data: {"choices":[{"index":0,"text":" t00%d"}]}\n\n' % (i + 1))
        await resp.write(b'data: {"choices":[],"usage":{"prompt_tokens":8,"completion_tokens":3}}\n\ndata: [DONE]\n\n')
        return resp

    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        build_tokenizer(tmp_path / "tok")
        monkeypatch.setenv("BM_TEST_KEY", key)
        cfg = parse_config({"name": "k", "hardware": "cpu", "backend": "openai", "input_len": 8, "output_len": 3,
                            "concurrency": [1], "openai": {"base_url": f"http://127.0.0.1:{port}/v1", "api_key_env": "BM_TEST_KEY",
                                       "requests_per_point": 2, "tokenizer": str(tmp_path / "tok")},
                            "models": [{"name": "m", "served_name": "m"}]})
        engine = get_backend(cfg)
        engine.load(cfg.models[0])
        rec = engine.measure(PointKey("m", "openai", 8, 3, 1), 1, True, 0)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
    assert seen and all(h == f"Bearer {key}" for h in seen)
    assert all(r.ok for r in rec.repeats[0].requests)
    stored = json.dumps(rec.as_dict()) + json.dumps(engine.provenance()) + cfg.model_dump_json()
    assert key not in stored and "BM_TEST_KEY" in json.dumps(engine.provenance())
