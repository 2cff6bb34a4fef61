"""Test double of ``vllm serve``: a tiny aiohttp server that imitates the cases the launcher must handle.

Not a model: it streams ``max_tokens`` one-token chunks (`` t001 t002 …``) every
``--token-ms`` milliseconds, then a usage chunk and ``[DONE]``, and serves ``/health``,
``/version`` and a Prometheus ``/metrics`` page with vLLM's metric names.

Modes (``--mode``):
- ``healthy``: ready after ``--start-delay-s``;
- ``never``: prints loading lines forever and answers ``/health`` with 503;
- ``--api-key KEY`` (else ``VLLM_API_KEY`` of the environment): as vLLM's, a ``/v1`` request without ``Authorization: Bearer KEY`` is answered 401; the key (and
  an ``HF_TOKEN`` of the environment) is printed to the log, as vLLM prints its arguments;
- ``crash``: like healthy, but exits with code 3 in the middle of streaming the
  ``--crash-at``-th completion request (1-based; the launcher's feature probe is request 1);
  with ``--crash-model NAME`` only when serving NAME.

Writes its pid to ``--pid-file`` so a test can check that the launcher stopped it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time

from aiohttp import web


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--mode", choices=["healthy", "never", "crash"], default="healthy")
    ap.add_argument("--crash-at", type=int, default=0)
    ap.add_argument("--crash-model", default=None, help="crash only when serving this name (else healthy)")
    ap.add_argument("--token-ms", type=float, default=2.0)
    ap.add_argument("--start-delay-s", type=float, default=0.3)
    ap.add_argument("--served-model-name", default="fake")
    ap.add_argument("--pid-file", default=None)
    ap.add_argument("--api-key", default=None, help="as vLLM's: /v1 requests without 'Authorization: Bearer KEY' get 401")
    args, unknown = ap.parse_known_args()
    args.api_key = args.api_key or os.environ.get("VLLM_API_KEY")  # as vLLM: the flag, else the environment's
    if args.mode == "crash" and args.crash_model and args.crash_model != args.served_model_name:
        args.mode = "healthy"
    if args.pid_file:
        with open(args.pid_file, "w") as fh:
            fh.write(str(os.getpid()))
    print(f"fake-vllm: starting on port {args.port}, mode {args.mode}, extra flags {unknown}", flush=True)
    if args.api_key or os.environ.get("HF_TOKEN"):  # as vLLM logs its arguments, and a library its token, bare
        print(f"fake-vllm: non-default args: {{'api_key': [{args.api_key!r}]}}; hub token {os.environ.get('HF_TOKEN')} "
              f"ok; key {args.api_key}", flush=True)
    # the machine's folders, as vLLM's own log names them (model folder, compile cache, its environment's files)
    print(f"fake-vllm: cache {os.path.expanduser('~')}/.cache/vllm/torch_compile_cache, dist "
          f"{tempfile.gettempdir()}/vllm_dist_0123abcd, code {os.path.abspath(__file__)}, env {sys.prefix}/lib/x.py",
          flush=True)
    started = time.monotonic()
    state = {"requests": 0, "running": 0, "preemptions": 0}

    async def health(_req: web.Request) -> web.Response:
        ready = args.mode != "never" and time.monotonic() - started > args.start_delay_s
        return web.Response(status=200 if ready else 503)

    async def version(_req: web.Request) -> web.Response:
        return web.json_response({"version": "0.0.0-fake"})

    async def metrics(_req: web.Request) -> web.Response:
        text = ("# HELP vllm:num_requests_running running\n# TYPE vllm:num_requests_running gauge\n"
                f'vllm:num_requests_running{{model_name="{args.served_model_name}"}} {state["running"]}\n'
                f'vllm:num_requests_waiting{{model_name="{args.served_model_name}"}} 0\n'
                f'vllm:kv_cache_usage_perc{{model_name="{args.served_model_name}"}} {0.01 * state["running"]}\n'
                f'vllm:num_preemptions_total{{model_name="{args.served_model_name}"}} {state["preemptions"]}\n'
                f'vllm:request_success_total{{model_name="{args.served_model_name}"}} {state["requests"]}\n'
                'vllm:e2e_request_latency_seconds_bucket{le="1.0"} 3\n')
        return web.Response(text=text)

    async def completions(req: web.Request) -> web.StreamResponse:
        if args.api_key and req.headers.get("Authorization") != f"Bearer {args.api_key}":
            return web.json_response({"error": "Unauthorized"}, status=401)
        body = await req.json()
        state["requests"] += 1
        n = state["requests"]
        max_tokens = int(body.get("max_tokens", 16))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(req)
        state["running"] += 1
        try:
            for i in range(max_tokens):
                if args.mode == "crash" and n == args.crash_at and i == max_tokens // 2:
                    print(f"fake-vllm: CUDA error: an illegal memory access (request {n}, token {i})", flush=True)
                    os._exit(3)
                chunk = {"object": "text_completion", "choices": [{"index": 0, "text": f" t{i % 255 + 1:03d}"}]}
                await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                await asyncio.sleep(args.token_ms / 1000)
            usage = {"prompt_tokens": 16, "completion_tokens": max_tokens, "total_tokens": 16 + max_tokens}
            await resp.write(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\ndata: [DONE]\n\n")
        finally:
            state["running"] -= 1
        return resp

    async def loading_forever(app: web.Application) -> None:
        async def chatter() -> None:
            while True:
                print("fake-vllm: loading weights (never finishes)", flush=True)
                await asyncio.sleep(0.2)
        if args.mode == "never":
            app["chatter"] = asyncio.create_task(chatter())

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/version", version)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/v1/completions", completions)
    app.on_startup.append(loading_forever)
    web.run_app(app, host=args.host, port=args.port, print=None, handle_signals=True)
    print("fake-vllm: stopped", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
