"""Which serving engine is behind an OpenAI-compatible endpoint, where the server says so cheaply.

The ``openai`` backend measures a server batchmark did not start; its points are keyed under the serving engine
that produced the tokens (``PointKey.engine``), so that a vLLM server started by the ``vllm`` backend and the same
server reached as an endpoint diff as the same engine.  ``openai.engine`` states it; without it one GET each, in
this order, asks the server:

- llama.cpp's ``llama-server``: ``GET /props`` answers a JSON object with ``default_generation_settings`` and
  ``total_slots`` (llama.cpp, tools/server/README.md, "GET /props").
- SGLang: ``GET /get_server_info`` answers its server arguments, ``model_path`` and ``tp_size`` among them
  (SGLang docs, "Native APIs", /get_server_info).
- vLLM: ``GET /version`` answers ``{"version": "<vllm version>"}`` (vllm/entrypoints/openai/api_server.py, ``show_version``).

Anything else (no answer, another shape, an error) is ``openai``: an engine not known.  Asked before the first
point; a resumed run asks again and keys its points the same way while the server is the same.
"""

from __future__ import annotations

import re
from typing import Any

#: What the point keys of an endpoint hold when its engine is not known.
UNKNOWN = "openai"

#: Seconds each question may take: a server that does not answer at once is not asked further.
ASK_TIMEOUT_S = 3.0


def server_root(base_url: str) -> str:
    """The server's root URL from ``openai.base_url`` (``http://h:8000/v1`` → ``http://h:8000``)."""
    return re.sub(r"/v1/?$", "", base_url.rstrip("/"))


def _llama_cpp(body: Any) -> bool:
    return isinstance(body, dict) and "default_generation_settings" in body and "total_slots" in body


def _sglang(body: Any) -> bool:
    return isinstance(body, dict) and "model_path" in body and "tp_size" in body


def _vllm(body: Any) -> bool:
    return isinstance(body, dict) and set(body) == {"version"} and isinstance(body["version"], str)


#: (path, test of the JSON answer, engine name), asked in this order (the most specific answer first).
QUESTIONS = (("/props", _llama_cpp, "llama.cpp"), ("/get_server_info", _sglang, "sglang"), ("/version", _vllm, "vllm"))


async def _ask(session: Any, url: str) -> Any:
    """The JSON answer of ``GET url``, None on any failure (a question is best effort)."""
    import aiohttp

    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=ASK_TIMEOUT_S)) as resp:
            if resp.status != 200:
                return None
            return await resp.json(content_type=None)
    except Exception:  # not this engine, or no answer: the next question, and ``openai`` in the end
        return None


async def detect_engine(session: Any, base_url: str) -> str:
    """The serving engine behind ``base_url`` (:data:`QUESTIONS`), :data:`UNKNOWN` when none says."""
    root = server_root(base_url)
    for path, test, name in QUESTIONS:
        if test(await _ask(session, root + path)):
            return name
    return UNKNOWN
