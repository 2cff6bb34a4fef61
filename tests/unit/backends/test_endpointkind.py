"""The serving engine behind an ``openai`` endpoint: stated (``openai.engine``), else asked of the server, else
``openai`` (unknown).  The answers' shapes are the servers' own documented ones (pipeline/backends/endpointkind.py
names each source): vLLM's ``GET /version`` is ``{"version": "0.11.0"}``; llama.cpp's ``GET /props`` holds
``default_generation_settings`` and ``total_slots``; SGLang's ``GET /get_server_info`` its server arguments.

The fault kind these pin: one vLLM server measured twice, once started by the ``vllm`` backend and once reached as an
endpoint, keyed under two engines (``vllm`` and ``openai``), so a diff of the two runs matched no point."""

from __future__ import annotations

import asyncio
import threading

import pytest

from pipeline.config.sweepconfig import parse_config
from pipeline.core.records import PointKey
from pipeline.loadgen import client
from pipeline.backends import endpointkind

ANSWERS = {
    "vllm": {"/version": {"version": "0.11.0"}},
    "llama.cpp": {"/props": {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 4, "build_info": "b6000"},
                  "/version": {"version": "unrelated"}},  # asked first, /props settles it
    "sglang": {"/get_server_info": {"model_path": "Qwen/Qwen3-8B", "tp_size": 1, "version": "0.5.0"}},
    "openai": {"/version": {"version": "1", "build": "x"}},  # another shape: not vLLM's answer
}


async def _serve(answers: dict[str, dict]) -> tuple[object, str]:
    from aiohttp import web

    app = web.Application()
    def answer(body: dict):
        async def handler(request):
            return web.json_response(body)
        return handler

    for path, body in answers.items():
        app.router.add_get(path, answer(body))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"


@pytest.mark.parametrize("engine", sorted(ANSWERS))
def test_the_server_says_which_engine_it_is(engine):
    async def go() -> str:
        runner, url = await _serve(ANSWERS[engine])
        try:
            async with client.make_session(1) as session:
                return await endpointkind.detect_engine(session, url)
        finally:
            await runner.cleanup()

    assert asyncio.run(go()) == engine


def _endpoint(base_url: str, **openai) -> object:
    from pipeline.backends.openai import OpenAIBackend

    cfg = parse_config({"name": "e", "hardware": "cpu", "backend": "openai", "openai": {"base_url": base_url, **openai},
                        "models": [{"name": "m", "served_name": "m"}]})
    return OpenAIBackend(cfg)


def test_a_stated_engine_is_not_asked_and_nothing_listening_is_unknown():
    # port 9 (discard) on the loopback: nothing listens there in a test; a question there fails at once
    assert _endpoint("http://127.0.0.1:9/v1", engine="trtllm").serving_engine == "trtllm"
    assert _endpoint("http://127.0.0.1:9/v1").serving_engine == "openai"


def test_a_vllm_server_reached_as_an_endpoint_keys_its_points_as_the_vllm_backend_does():
    from pipeline.backends.vllm import VLLMBackend

    async def start():
        return await _serve(ANSWERS["vllm"])

    loop = asyncio.new_event_loop()
    runner, url = loop.run_until_complete(start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        endpoint = _endpoint(url)
        engine = endpoint.serving_engine
        assert endpoint.provenance()["engine"] == "vllm" and endpoint.provenance()["backend"] == "openai"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.run_until_complete(runner.cleanup())
        loop.close()
    assert engine == VLLMBackend.serving_engine == "vllm"
    assert PointKey("m", engine, 64, 32, 8) == PointKey("m", VLLMBackend.serving_engine, 64, 32, 8)
