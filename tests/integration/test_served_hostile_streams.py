"""Hostile and odd streams from a real server process (``hostile_stream_server.py``), against 16-token requests.

Bounded memory (fault kind: a client that keeps every byte a server sends).  A stream that never ends (one event
growing 64 KiB a millisecond), 10^6 one-token events, or one 256 MiB event: every byte was kept (1.8 GB seen) and
the 256 MiB text went to the tokenizer (a 4 GiB allocation that ended the sweep).  Now each request fails by name
at the stream's bound, worked by hand from :mod:`pipeline.loadgen.streamcaps`: 1 MiB + 16 × 16 KiB =
1,310,720 bytes for a 16-token request, and the client process's peak memory grows by less than
:data:`RSS_GROWTH_KIB`: at concurrency 1 one stream is read at a time, and it holds at most its bound, one socket
read beyond it (asyncio reads at most 256 KiB) and, when it is folded, one joined copy: 2 × 1.25 MiB + 0.25 MiB
< 3 MiB, given 8× for the allocator's arenas (24 MiB; measured 1.8–2.0 MiB); aiohttp buffers up to twice its
4 MiB read buffer and hands it over joined, 16 MiB more (48 MiB; measured 17.4 MiB).  Before, the growth was
the bytes kept: 795 MiB for the 10^6 events (and 31 s, "impossible token count: 1000000 chunks").

Stream kinds (fault kind: a failed or odd stream counted as a success, or its tokens lost): a finish ``abort``;
llama.cpp's ``error:`` line outside ``data:`` then ``[DONE]`` (was a short success of 4 tokens); reasoning as
content parts (Mistral's, through LiteLLM: was 8 tokens of 16, TTFT at the first visible one).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.served_helpers import build_tokenizer, free_port, wait_healthy

HERE = Path(__file__).resolve().parent
#: The bound of a 16-token stream (bytes), worked by hand: 2**20 + 16 * 16 * 2**10.
CAP_16 = 1_310_720
#: Most the client's peak resident memory may grow over a point of hostile streams (KiB; module docstring).
RSS_GROWTH_KIB = {"raw": 24 * 1024, "aiohttp": 48 * 1024}
TIMEOUT_S = 30


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tok")
    build_tokenizer(folder)
    return folder


def start(fault: str, tmp: Path, after: int = 0) -> tuple[subprocess.Popen, str]:
    """Start ``hostile_stream_server.py`` with ``fault`` after ``after`` correct 16-token streams; (process, /v1 URL)."""
    port = free_port()
    log = tmp / f"hostile-{fault}.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, str(HERE / "hostile_stream_server.py"), "--port", str(port),
                                 "--fault", fault, "--after", str(after)], stdout=fh, stderr=subprocess.STDOUT)
    wait_healthy(f"http://127.0.0.1:{port}/health", proc, 30, log)
    return proc, f"http://127.0.0.1:{port}/v1"


@pytest.mark.parametrize("fault, transport", [("growing_event", "raw"), ("million_events", "raw"),
                                              ("huge_event", "raw"), ("huge_event", "aiohttp")])
def test_a_stream_past_its_bound_fails_by_name_with_bounded_memory(fault, transport, tmp_path, tok_dir):
    """Fault kind: unbounded client memory.  Each hostile request fails with the bound named, well within the
    timeout, and the client process's peak memory grows by less than RSS_GROWTH_KIB (was ≥ 256 MiB)."""
    proc, url = start(fault, tmp_path, after=2)  # the first point's 2 requests are correct
    try:
        res = subprocess.run([sys.executable, str(HERE / "bounded_client.py"), url, str(tok_dir), transport,
                              str(TIMEOUT_S)], capture_output=True, text=True, timeout=240,
                             cwd=HERE.parents[1])
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["first_errors"] == [None, None]
    assert len(got["errors"]) == 2
    for error in got["errors"]:
        assert error.startswith(f"stream exceeded {CAP_16} bytes for a 16-token request"), error
    assert got["took_s"] < TIMEOUT_S
    growth = got["rss_after_kib"] - got["rss_before_kib"]
    assert growth < RSS_GROWTH_KIB[transport], f"{fault}: peak memory grew by {growth} KiB"


def _measure(fault: str, tmp: Path, tok_dir: Path, endpoint: str = "completions"):
    from pipeline.config.sweepconfig import parse_config
    from pipeline.core.records import PointKey
    from pipeline.backends import get_backend

    proc, url = start(fault, tmp)
    try:
        cfg = parse_config({"name": "t", "hardware": "cpu", "backend": "openai", "input_len": 8, "output_len": 16,
                            "concurrency": [1], "repeats": 1,
                            "openai": {"base_url": url, "endpoint": endpoint, "requests_per_point": 2,
                                       "tokenizer": str(tok_dir), "timeout_s": TIMEOUT_S},
                            "models": [{"name": "m", "served_name": "m"}]})
        engine = get_backend(cfg)
        engine.load(cfg.models[0])
        rec = engine.measure(PointKey("m", "openai", 8, 16, 1), 1, False, 0)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    return [r for rep in rec.repeats for r in rep.requests]


def test_a_stream_that_ends_with_finish_abort_is_a_failure(tmp_path, tok_dir):
    """Fault kind: a stream whose finish_reason is "abort" (8 of 16 tokens, usage and [DONE] after it) counted as a
    success; now each request fails naming the finish."""
    for r in _measure("abort", tmp_path, tok_dir):
        assert not r.ok
        assert r.error == 'server ended the request with finish_reason "abort"'


def test_a_server_error_outside_data_is_a_failure_with_its_text_scrubbed(tmp_path, tok_dir):
    """Fault kind: llama.cpp's ``error:`` line (a field SSE ignores) then ``[DONE]`` counted as a 4-token success;
    now a failure quoting the server's message, the bearer token in it redacted."""
    for r in _measure("error_field", tmp_path, tok_dir):
        assert not r.ok
        assert r.error.startswith("server error event: context shift is disabled"), r.error
        assert "sk-live-0123456789" not in r.error and "[redacted]" in r.error


def test_reasoning_as_content_parts_is_timed_as_tokens(tmp_path, tok_dir):
    """Fault kind: reasoning streamed as a list of content parts (Magistral through LiteLLM) left out of the token
    times: 8 of 16 tokens, TTFT at the first visible token.  Now all 16 parts carrying text are token arrivals,
    the first at 10 ms + (the prefill of the fake, 10 ms), the first visible one 8 tokens (8 × 5 ms) later."""
    for r in _measure("content_parts", tmp_path, tok_dir, endpoint="chat"):
        assert r.ok, r.error
        assert r.output_tokens == 16 and len(r.chunks) == 16 and r.hidden_tokens == 0
        assert r.first_content_s - r.first_token_s >= 8 * 0.005  # the 8 thinking parts came first
