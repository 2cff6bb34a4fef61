"""Multi-token chunks: a chunk carrying 3 tokens must give 3 ITL entries whose sum is the chunk gap.

An in-test aiohttp server streams two content chunks: `` t001`` (1 token), then after
``GAP_S`` a chunk `` t002 t003 t004`` (3 tokens).  Three variants tell the client how many
tokens the second chunk holds: per-chunk usage (vLLM's continuous_usage_stats), only a
final usage (the client tokenizes the chunk text and reconciles with usage), and no usage at
all behind a server that rejects unknown request fields (the client drops them and counts by
tokenizing).  Expected values: the server's chunk layout and sleep, DESIGN.md's ITL rule.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web
from served_helpers import build_tokenizer

from pipeline.engines import loadgen
from pipeline.metrics import itl_values

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
    assert gap >= GAP_S * 0.9  # the server slept GAP_S between the chunks
    itl = itl_values(rec)
    assert len(itl) == 3  # 4 tokens → 3 gaps, not 1 inflated entry
    assert itl == pytest.approx([gap / 3] * 3)
    assert sum(itl) == pytest.approx(gap)
    if variant == "strict":
        assert {"ignore_eos", "min_tokens", "stream_options"} <= set(feats.dropped)
    if variant == "per_chunk":
        assert feats.per_chunk_usage_seen and not feats.dropped
