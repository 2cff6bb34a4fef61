"""Server replies that cannot be a stream or a count: named, never a lost point or a traceback.

Fault kinds: a proxy or a misconfigured server answering 200 with an HTML page or a non-streamed JSON completion
to a ``stream: true`` request (the OpenAI API streams only ``text/event-stream``,
https://platform.openai.com/docs/api-reference/completions/create#completions-create-stream), and a server's
usage count outside any integer a count can be (2^64 − 1: an unsigned wrap-around of −1; Parquet's INT64
logical type holds at most 2^63 − 1, https://parquet.apache.org/docs/file-format/types/).
"""

from __future__ import annotations

import asyncio
import json

import pytest

from pipeline.loadgen import client, streamrecord
from tests.localapp import serve_app


def _serve_once(body: bytes, content_type: str) -> str:
    """The error of one streamed request to a local aiohttp server answering 200 with ``body``."""
    from aiohttp import web

    async def handler(_request):
        return web.Response(body=body, status=200, headers={"Content-Type": content_type})

    async def go() -> str | None:
        runner, url = await serve_app("/v1/completions", handler)
        target = client.Target(base_url=url, model="m")
        try:
            async with client.make_session(1) as session:
                raw = streamrecord.RawStream(request_id=0, warmup=False, queued_s=0.0, sent_s=0.0)
                await client.stream_one(session, target, b"{}", raw, 0.0, {})
                return raw.error
        finally:
            await runner.cleanup()

    return asyncio.run(go())


def test_a_200_html_page_names_its_content_type_and_body():
    """Was "stream ended without data" for every request; the reader could not tell a proxy's login page."""
    err = _serve_once(b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head></html>", "text/html; charset=utf-8")
    assert "Content-Type text/html; charset=utf-8" in err and "<!DOCTYPE html> <html><head><title>Sign in" in err
    assert "\n" not in err


def test_a_200_non_streamed_json_completion_names_it():
    doc = {"id": "cmpl-1", "object": "text_completion", "choices": [{"text": "hi", "index": 0}]}
    err = _serve_once(json.dumps(doc).encode(), "application/json")
    assert "Content-Type application/json" in err and '{"id": "cmpl-1"' in err


@pytest.mark.parametrize("value", [2**64 - 1, 2**63])
def test_a_usage_count_beyond_int64_is_no_count(value):
    """``usage.prompt_tokens`` = 2^64 − 1 reached the point's write as an OverflowError (the point lost).  It is
    no count: the record falls back to what it knows (the built prompt length, the stream's own tokens), and
    2^63 − 1, the largest int64, is still a count."""
    raw = streamrecord.RawStream(request_id=0, warmup=False, queued_s=0.0, sent_s=0.0)
    streamrecord.parse_event(raw, {"choices": [], "usage": {"prompt_tokens": value, "completion_tokens": value}}, 1.0)
    assert raw.prompt_tokens is None and raw.completion_tokens is None
    raw = streamrecord.RawStream(request_id=0, warmup=False, queued_s=0.0, sent_s=0.0)
    streamrecord.parse_event(raw, {"choices": [], "usage": {"prompt_tokens": 2**63 - 1}}, 1.0)
    assert raw.prompt_tokens == 2**63 - 1
