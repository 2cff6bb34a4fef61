"""Test double of an OpenAI-compatible streaming server whose token accounting (or stream) is wrong in one way.

Run as its own process (``python fake_stream_server.py --port P --fault F``).  It streams
``max_tokens`` one-token chunks (`` t001 t002 …``, one word per token of the tests'
word-level tokenizer) one every ``--token-ms`` (10) ms after a ``--prefill-ms`` (20) ms
prefill, then a usage chunk and ``[DONE]``: TTFT ≈ 21 ms, TPOT ≈ 10 ms, per-user ≈ 95 tok/s,
and at concurrency 1 an output throughput of 16 / (0.02 + 0.15 + overheads) ≈ 85–90 tok/s
for 16 tokens.  Both ``/v1/completions`` and ``/v1/chat/completions`` are served, plus
``/health``.  Request 1 is the client's feature probe.

``--max-running K`` (0 = unlimited, the default) serves at most K requests at once; the rest
wait in arrival order before their prefill, as a server with K batch slots queues them.  Its
capacity is then K / service time requests/s (service time = prefill + max_tokens × token time),
which the open-loop tests use as a known saturation rate.

``--metrics-kb K`` (0 = none, the default) serves a Prometheus ``/metrics`` page of about K KiB
(``vllm:num_requests_running``, the requests being served now, then a histogram of vLLM's names)
after ``--metrics-ms`` ms: a slow, large page like a GPU vLLM's.  With ``--metrics-blocking`` the
wait holds the server's event loop (``time.sleep``), and with it every stream, as vLLM's page is rendered
(``prometheus_client.make_asgi_app`` renders synchronously in the API server's loop).  ``GET /scrapes`` answers
the server's clock (``time.monotonic``) at each ``/metrics`` request so far, as a JSON list.

Faults (``--fault``), each a kind of fault reported against public servers and clients:
- ``none``: correct; per-chunk cumulative usage when ``continuous_usage_stats`` is asked for;
- ``running_sum``: every chunk's ``completion_tokens`` is a running sum of running totals
  (16 tokens end at 136), the final usage too;
- ``per_chunk_ones``: every chunk's ``completion_tokens`` is 1 (that chunk alone), the final
  usage is right;
- ``above_max``: the final usage is 3 × max_tokens;
- ``usage_stalls``: per-chunk cumulative usage stops rising at half the tokens, the final
  usage too;
- ``usage_dropped``: the probe gets a usage, every later request none;
- ``usage_low``: two tokens per chunk (`` t001 t002``), final usage 9 for 16 tokens;
- ``hidden_reasoning``: the first half of the tokens is generated (10 ms each) but never
  streamed, reported in ``completion_tokens_details.reasoning_tokens``;
- ``reasoning_stream``: the first half streams as ``delta.reasoning_content`` (chat) and the
  rest as content;
- ``fail503``: every 4th request after the probe answers HTTP 503;
- ``stall``: after the probe, every request gets its headers and then nothing, ever (a hung
  server: the connection stays open);
- ``split_token``: every token's text is sent as two events (`` t0`` then ``01``), as a
  detokenizer that flushes a multi-byte character late does; usage is right;
- ``prompt_5x``: ``prompt_tokens`` is 5 × the prompt's words (a tokenizer or chat-template
  mismatch);
- ``stop_early``: after the probe, every request stops at half its ``max_tokens`` with finish
  ``stop`` although it accepted ``ignore_eos``;
- ``fuzz``: request n (after the probe) gets a seeded random corruption of its stream
  (``--seed``): truncation, garbage, bad JSON, wrong types, wrong counts.
- ``echo_auth``: after the probe, the server sends the client's ``Authorization`` header back
  (a credential leak through an echoing server), in turn: an HTTP 400 whose JSON body holds every request header, a stream
  whose first event is an error naming the bare key, a stream event that is not JSON and holds
  the header, an HTTP 401 whose plain-text body is ``key=<the bare key>``;
- ``tool_calls`` (chat): the whole output streams as ``delta.tool_calls`` fragments (``function.arguments``
  `` t001`` …, content null, no per-chunk usage), the final usage counting them (AIPerf PR #804, SGLang PR #36272);
- ``usage_held_back``: after the probe, the last 4 tokens are held back: 4 empty deltas 10 ms apart whose per-chunk
  usage stays at max_tokens − 4, then the final usage (max_tokens) 10 ms later (FastDeploy PR #8113);
- ``burst_end``: after the probe, every event is held and the whole response written in one burst at the end
  (kekzl/imp #754);
- ``clumped``: after the probe, the events are released 8 at a time, as a proxy's buffer does (dstack #4269);
- ``sse_spec``: every event is written as the WHATWG specification allows and simple splitters do not read:
  CR line endings, a comment line, ``id``, ``event`` and ``retry`` fields, the JSON over two ``data:`` lines (cut between two members);
- ``echo_spelled``: after the probe, an HTTP 400 whose JSON error spells the client's key another way, in turn: split
  in two halves apart, reversed, base64 (standard; URL-safe without padding; inside ``Bearer <key>`` encoded),
  URL-encoded, the halves swapped;
- ``echo_auth_probe``: every request, the probe too, gets the HTTP 400 of ``echo_auth``.
- ``echo_body``: after the probe, an HTTP 400 that echoes each request field the completions API does not
  define with its value, as vLLM's request validation does (pydantic's ``extra_forbidden``: ``'input': <value>``).

``--record`` keeps the server's own record of every request it streams: its arrival and each content chunk's
write time (``time.perf_counter``, the clock the client stamps with: one system-wide monotonic clock on Linux) with
the tokens it carried; ``GET /record`` answers them as ``[{"arrival_s", "chunks": [[t, tokens], …]}, …]`` in arrival
order (the client's feature probe first), the reference of the client-accuracy tests.

``--fail-model NAME`` (with any fault): every request for model NAME after its first (the client's
feature probe) answers HTTP 503, as a server whose one model is broken; other models are served.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time

from aiohttp import web


def metrics_histogram(size: int) -> str:
    """A Prometheus histogram of about ``size`` bytes under vLLM's names (one labelled series per engine index)."""
    lines = ["# HELP vllm:e2e_request_latency_seconds Latency.", "# TYPE vllm:e2e_request_latency_seconds histogram"]
    total, i = 0, 0
    while total < size:
        for le in ("0.01", "0.1", "1.0", "10.0", "+Inf"):
            lines.append(f'vllm:e2e_request_latency_seconds_bucket{{engine="{i}",le="{le}",model_name="m"}} {i}.0')
        lines.append(f'vllm:e2e_request_latency_seconds_count{{engine="{i}",model_name="m"}} {i}.0')
        lines.append(f'vllm:e2e_request_latency_seconds_sum{{engine="{i}",model_name="m"}} {i}.5')
        total += sum(len(x) + 1 for x in lines[-7:])
        i += 1
    return "\n".join(lines) + "\n" if size else ""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--fault", default="none")
    ap.add_argument("--token-ms", type=float, default=10.0)
    ap.add_argument("--prefill-ms", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-running", type=int, default=0)
    ap.add_argument("--fail-model", default=None, help="every request for this model after its first (the feature "
                                                       "probe) answers HTTP 503")
    ap.add_argument("--metrics-kb", type=int, default=0)
    ap.add_argument("--metrics-ms", type=float, default=0.0)
    ap.add_argument("--metrics-blocking", action="store_true")
    ap.add_argument("--record", action="store_true", help="keep every request's arrival and chunk times (GET /record)")
    args = ap.parse_args()
    slots = asyncio.Semaphore(args.max_running) if args.max_running > 0 else None
    state = {"requests": 0, "running": 0}
    fault = args.fault
    histogram = metrics_histogram(args.metrics_kb * 1024)

    async def health(_req: web.Request) -> web.Response:
        return web.Response(text="ok")

    scrapes: list[float] = []

    async def scrape_times(_req: web.Request) -> web.Response:
        return web.json_response(scrapes)

    async def metrics(_req: web.Request) -> web.Response:
        scrapes.append(time.monotonic())
        if args.metrics_blocking:
            time.sleep(args.metrics_ms / 1000)
        else:
            await asyncio.sleep(args.metrics_ms / 1000)
        head = ("# HELP vllm:num_requests_running Requests running.\n# TYPE vllm:num_requests_running gauge\n"
                f'vllm:num_requests_running{{model_name="m"}} {float(state["running"])}\n')
        return web.Response(text=head + histogram, content_type="text/plain")

    async def handle(req: web.Request) -> web.StreamResponse:
        state["running"] += 1
        try:
            if slots is None:
                return await serve(req)
            async with slots:
                return await serve(req)
        finally:
            state["running"] -= 1

    record: list[dict] = []

    async def recorded(_req: web.Request) -> web.Response:
        return web.json_response(record)

    async def serve(req: web.Request) -> web.StreamResponse:
        arrival = time.perf_counter()
        body = await req.json()
        mine: list[list[float]] = []
        if args.record:
            record.append({"arrival_s": arrival, "chunks": mine})
        state["requests"] += 1
        n_req = state["requests"]
        chat = req.path.endswith("/chat/completions")
        n = int(body.get("max_tokens", 16))
        if fault == "fail503" and n_req > 1 and n_req % 4 == 0:
            return web.json_response({"error": "server overloaded"}, status=503)
        per_model = state.setdefault(f"model:{body.get('model')}", 0) + 1
        state[f"model:{body.get('model')}"] = per_model
        if args.fail_model is not None and body.get("model") == args.fail_model and per_model > 1:
            return web.json_response({"error": f"model {args.fail_model} is broken"}, status=503)
        auth = req.headers.get("Authorization", "")
        key = auth.removeprefix("Bearer ")
        if fault == "echo_auth" and n_req > 1 and n_req % 4 == 2 or fault == "echo_auth_probe":
            return web.json_response({"error": f"invalid header Authorization: {auth}", "headers": dict(req.headers)},
                                     status=400)
        if fault == "echo_body" and n_req > 1:
            known = {"model", "prompt", "messages", "stream", "stream_options", "max_tokens", "temperature", "min_tokens",
                     "ignore_eos"}
            said = [{"type": "extra_forbidden", "loc": ["body", k], "msg": "Extra inputs are not permitted", "input": v}
                    for k, v in body.items() if k not in known]
            return web.json_response({"object": "error", "message": str(said)}, status=400)
        if fault == "echo_spelled" and n_req > 1:
            import base64
            import urllib.parse

            half = len(key) // 2
            spelled = [f"key starts {key[:half]} and, later, ends {key[half:]}", f"reversed {key[::-1]}",
                       f"b64 {base64.b64encode(key.encode()).decode()}",
                       f"b64url {base64.urlsafe_b64encode(key.encode()).decode().rstrip('=')}",
                       f"header {base64.b64encode(('Bearer ' + key).encode()).decode()}",
                       f"quoted {urllib.parse.quote(key, safe='')}", f"halves reversed {key[half:]} / {key[:half]}"]
            return web.json_response({"error": spelled[n_req % len(spelled)]}, status=400)
        if fault == "echo_auth" and n_req > 1 and n_req % 4 == 1:
            return web.Response(text=f"unauthorized: key={key} ({auth})", status=401)
        if fault == "echo_auth" and n_req > 1:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(req)
            await resp.write(b"data: " + json.dumps({"error": {"message": f"key {key} was revoked"}}).encode() + b"\n\n"
                             if n_req % 4 == 3 else f"data: <html>{auth}</html>\n\n".encode())
            return resp
        continuous = bool((body.get("stream_options") or {}).get("continuous_usage_stats"))
        continuous = continuous and fault not in ("usage_dropped", "usage_low", "split_token", "tool_calls")  # no per-chunk usage
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(req)
        rng = random.Random(args.seed * 100_003 + n_req)
        kind = rng.choice(["truncate", "garbage", "badjson", "array", "choices_str", "usage_str", "no_done",
                           "huge_usage", "negative_usage", "cut_bytes", "crlf", "delta_num"]) \
            if fault == "fuzz" and n_req > 1 else None
        cut_at = rng.randrange(0, n) if kind else -1
        events: list[bytes] = []

        def event(obj) -> bytes:
            return b"data: " + json.dumps(obj).encode() + b"\n\n"

        if fault == "stall" and n_req > 1:
            await asyncio.sleep(3600)
        hidden = n // 2 if fault == "hidden_reasoning" else 0
        await asyncio.sleep(args.prefill_ms / 1000)
        if hidden:
            await asyncio.sleep(hidden * args.token_ms / 1000)  # generated, never streamed
        step = 2 if fault == "usage_low" else 1
        cum = hidden
        running = 0
        words_in = len(str(body.get("prompt") or (body.get("messages") or [{}])[-1].get("content", "")).split())
        prompt_tokens = 5 * words_in if fault == "prompt_5x" else 16
        stop_at = n // 2 if fault == "stop_early" and n_req > 1 else n
        for i in range(hidden, stop_at, step):
            words = "".join(f" t{j % 255 + 1:03d}" for j in range(i, min(i + step, n)))
            cum += min(step, n - i)
            running += cum
            if chat:
                field = "reasoning_content" if fault == "reasoning_stream" and i < n // 2 else "content"
                choice = {"index": 0, "delta": {field: words}, "finish_reason": None}
            else:
                choice = {"index": 0, "text": words, "finish_reason": None}
            chunk: dict = {"object": "chat.completion.chunk" if chat else "text_completion", "choices": [choice]}
            if fault == "running_sum":
                chunk["usage"] = {"prompt_tokens": 16, "completion_tokens": running}
            elif fault == "per_chunk_ones":
                chunk["usage"] = {"prompt_tokens": 16, "completion_tokens": 1}
            elif fault == "usage_stalls":
                chunk["usage"] = {"prompt_tokens": 16, "completion_tokens": min(cum, n // 2)}
            elif continuous:
                chunk["usage"] = {"prompt_tokens": 16, "completion_tokens": cum}
            if fault == "tool_calls" and chat:
                chunk["choices"] = [{"index": 0, "finish_reason": None, "delta": {"content": None, "tool_calls": [
                    {"index": 0, **({"id": "call_0", "type": "function"} if i == 0 else {}),
                     "function": {**({"name": ""} if i == 0 else {}), "arguments": words}}]}}]
            held = fault == "usage_held_back" and n_req > 1 and i >= n - 4
            if held:  # the parser holds the token back: an empty delta, usage stopped short
                chunk["choices"] = [{**choice, **({"delta": {"content": ""}} if chat else {"text": ""})}]
                chunk["usage"] = {"prompt_tokens": 16, "completion_tokens": n - 4}
            data = event(chunk)
            if fault == "sse_spec":
                text = json.dumps(chunk)
                cut = text.index(", ") + 1  # between two members: the "\n" that joins the data lines is JSON whitespace
                data = (f": keep-alive\rid: {i}\revent: message\rretry: 3000\rdata: {text[:cut]}\r"
                        f"data:{text[cut:]}\r\r").encode()
            if fault in ("burst_end", "clumped") and n_req > 1:
                events.append(data)
                if fault == "clumped" and len(events) == 8:
                    await resp.write(b"".join(events))
                    events.clear()
                await asyncio.sleep(step * args.token_ms / 1000)
                continue
            if fault == "split_token":  # one token's text over two events, 1 ms apart
                half = {**choice, **({"delta": {"content": words[:3]}} if chat else {"text": words[:3]})}
                await resp.write(event({**chunk, "choices": [half]}))
                await asyncio.sleep(0.001)
                rest = {**choice, **({"delta": {"content": words[3:]}} if chat else {"text": words[3:]})}
                data = event({**chunk, "choices": [rest]})
            if kind and i == cut_at:
                if kind == "truncate":
                    await resp.write(data[: len(data) // 2])
                    return resp
                if kind == "cut_bytes":
                    await resp.write(data[:7])
                    return resp
                data = {"garbage": b"data: \xff\xfe{{{\n\n", "badjson": b"data: {\"choices\": [\n\n",
                        "array": b"data: [1, 2, 3]\n\n", "choices_str": b'data: {"choices": "x"}\n\n',
                        "usage_str": event({**chunk, "usage": {"completion_tokens": "many"}}),
                        "no_done": data, "huge_usage": event({**chunk, "usage": {"completion_tokens": 10 ** 9}}),
                        "negative_usage": event({**chunk, "usage": {"completion_tokens": -5}}),
                        "crlf": data.replace(b"\n\n", b"\r\n\r\n"),
                        "delta_num": b'data: {"choices": [{"index": 0, "delta": 5, "text": 7}]}\n\n'}[kind]
            if args.record:
                mine.append([time.perf_counter(), min(step, n - i)])
            await resp.write(data)
            await asyncio.sleep(step * args.token_ms / 1000)  # 10 ms per token generated
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": stop_at, "total_tokens": prompt_tokens + stop_at}
        if fault == "running_sum":
            usage["completion_tokens"] = running
        elif fault == "above_max":
            usage["completion_tokens"] = 3 * n
        elif fault == "usage_stalls":
            usage["completion_tokens"] = n // 2
        elif fault == "usage_low":
            usage["completion_tokens"] = 9
        elif fault in ("hidden_reasoning", "reasoning_stream"):
            usage["completion_tokens_details"] = {"reasoning_tokens": n // 2}
        last = {"index": 0, "finish_reason": "length" if stop_at == n else "stop", **({"delta": {}} if chat else {"text": ""})}
        if fault == "usage_held_back" and n_req > 1:
            await asyncio.sleep(args.token_ms / 1000)  # the final usage comes one step after the last held token
        if not (fault == "usage_dropped" and n_req > 1):
            events.append(event({"choices": [last]}))
            events.append(event({"choices": [], "usage": usage}))
        else:
            events.append(event({"choices": [last]}))
        if kind != "no_done":
            events.append(b"data: [DONE]\n\n")
        elif rng.random() < 0.5:
            events = events[1:]  # neither a finish_reason nor [DONE]: only the usage chunk
        if fault in ("burst_end", "clumped"):  # one write: the buffer releases what it holds at once
            events = [b"".join(events)]
        for ev in events:
            await resp.write(ev)
        return resp

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/record", recorded)
    if args.metrics_kb > 0:
        app.router.add_get("/metrics", metrics)
        app.router.add_get("/scrapes", scrape_times)
    app.router.add_post("/v1/completions", handle)
    app.router.add_post("/v1/chat/completions", handle)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None)


if __name__ == "__main__":
    main()
