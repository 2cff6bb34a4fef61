"""Test double of an OpenAI-compatible server that answers with a hostile or odd stream (its own process).

``python hostile_stream_server.py --port P --fault F [--after N]``: the feature probe (any request whose
``max_tokens`` is not 16) and the first N requests of 16 tokens get a correct stream (16 one-token events
`` t001`` … 5 ms apart, a finish ``length``, the usage, ``[DONE]``); every later 16-token request gets the fault:

- ``growing_event``: one event that never ends: ``data: {"choices": [{"text": "`` and then 64 KiB of ``x`` every
  millisecond, up to 1 GiB, never a blank line;
- ``million_events``: 10^6 one-token events (``data: {"choices":[{"index":0,"text":" t001"}]}``, 48 bytes each,
  written 10,000 at a time), then ``[DONE]``;
- ``huge_event``: one event of 256 MiB of text (written 1 MiB at a time), then ``[DONE]``;
- ``abort``: 8 tokens, then a finish ``abort`` (vLLM's, when the engine drops the request), the usage, ``[DONE]``;
- ``error_field``: 4 tokens, then llama.cpp's error line outside ``data:`` (``error: {"code": 500, "message":
  …, "type": "server_error"}``, its message naming a bearer token), then ``data: [DONE]``;
- ``content_parts`` (chat): every token as a list of content parts (Mistral's, as LiteLLM streams Magistral): the
  first 8 as ``{"type": "thinking", "thinking": [{"type": "text", "text": " t00k"}]}``, the rest as
  ``{"type": "text", "text": " t00k"}``; the usage counts 16, 8 of them reasoning.

``GET /health`` answers ok.
"""

from __future__ import annotations

import argparse
import asyncio
import json

from aiohttp import web

#: The bearer token the ``error_field`` fault's message names (it must never reach a record).
LEAKED = "Bearer sk-live-0123456789abcdefghijklmnop"


def event(obj: object) -> bytes:
    """One SSE event of ``obj`` as JSON."""
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def token_choice(chat: bool, word: str, fault: str, i: int, n: int) -> dict:
    """The choice of token ``i`` (of ``n``): completions ``text`` or a chat delta (content parts for ``content_parts``)."""
    if not chat:
        return {"index": 0, "text": word, "finish_reason": None}
    if fault == "content_parts":
        part = ({"type": "thinking", "thinking": [{"type": "text", "text": word}]} if i < n // 2 else
                {"type": "text", "text": word})
        return {"index": 0, "delta": {"content": [part]}, "finish_reason": None}
    return {"index": 0, "delta": {"content": word}, "finish_reason": None}


async def hostile(resp: web.StreamResponse, fault: str) -> None:
    """Write the stream of one of the byte-heavy faults."""
    if fault == "growing_event":
        await resp.write(b'data: {"choices": [{"index": 0, "text": "')
        piece = b"x" * 65536
        for _ in range(16384):  # 1 GiB at most
            await resp.write(piece)
            await asyncio.sleep(0.001)
    elif fault == "million_events":
        batch = b'data: {"choices":[{"index":0,"text":" t001"}]}\n\n' * 10_000
        for _ in range(100):
            await resp.write(batch)
        await resp.write(b"data: [DONE]\n\n")
    elif fault == "huge_event":
        await resp.write(b'data: {"choices": [{"index": 0, "text": "')
        piece = b"t001 " * (2**20 // 5)
        for _ in range(256):
            await resp.write(piece)
        await resp.write(b'"}]}\n\ndata: [DONE]\n\n')


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--fault", required=True)
    ap.add_argument("--after", type=int, default=0, help="16-token requests served correctly before the fault")
    args = ap.parse_args()
    state = {"served": 0}

    async def health(_req: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def serve(req: web.Request) -> web.StreamResponse:
        body = await req.json()
        n = int(body.get("max_tokens", 16))
        chat = req.path.endswith("/chat/completions")
        fault = "none"
        if n == 16:
            state["served"] += 1
            fault = args.fault if state["served"] > args.after else "none"
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(req)
        if fault in ("growing_event", "million_events", "huge_event"):
            try:
                await hostile(resp, fault)
            except (ConnectionResetError, RuntimeError):  # the client closed the connection: as it should
                pass
            return resp
        await asyncio.sleep(0.01)
        stop_at = {"abort": n // 2, "error_field": 4}.get(fault, n)
        for i in range(stop_at):
            chunk = {"object": "chat.completion.chunk" if chat else "text_completion",
                     "choices": [token_choice(chat, f" t{i % 255 + 1:03d}", fault, i, n)]}
            await resp.write(event(chunk))
            await asyncio.sleep(0.005)
        if fault == "error_field":  # llama.cpp's server_sent_event(sink, "error", …), then [DONE]
            said = {"code": 500, "message": f"context shift is disabled (Authorization: {LEAKED})",
                    "type": "server_error"}
            await resp.write(b"error: " + json.dumps(said).encode() + b"\n\n" + b"data: [DONE]\n\n")
            return resp
        reason = "abort" if fault == "abort" else "length"
        last = {"index": 0, "finish_reason": reason, **({"delta": {}} if chat else {"text": ""})}
        usage = {"prompt_tokens": 8, "completion_tokens": stop_at, "total_tokens": 8 + stop_at}
        if fault == "content_parts":
            usage["completion_tokens_details"] = {"reasoning_tokens": n // 2}
        await resp.write(event({"choices": [last]}) + event({"choices": [], "usage": usage}) + b"data: [DONE]\n\n")
        return resp

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_post("/v1/completions", serve)
    app.router.add_post("/v1/chat/completions", serve)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None)


if __name__ == "__main__":
    main()
