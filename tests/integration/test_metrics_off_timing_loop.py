"""A timing loop nothing disturbs: a slow, large ``/metrics`` leaves TTFT and ITL as they were.

A real server process (``fake_stream_server.py``) streams 16 one-token chunks 10 ms apart after a
20 ms prefill (per-token ITL 10 ms, TTFT ≈ 21 ms, worked from its sleeps) and serves ``/metrics``
either fast and small (1 KiB, no delay) or slow and large (about 1 MiB of vLLM histogram samples
after 300 ms; ``prometheus_client`` parses such a page in about 0.25 s on this machine).  Parsed
inside the event loop that timestamps the chunks (as before this issue), each scrape held every
stream for the parse: chunks piled up and were stamped together, giving per-token gaps of a
quarter second (p99) and inflated TTFTs.  Sampled in its own process, both stay within the noise
of the fast page: TTFT p50 within 10 ms, ITL p99 within 15 ms, max ITL under 100 ms.  The samples
still arrive (``max_during`` holds the server's running count).

The sampler also keeps off the server (agreement with ``vllm bench serve``): vLLM renders its page in
the loop that writes every stream, so each scrape holds them all.  Against a page whose render holds the
server's loop (``--metrics-blocking``), the sampler scrapes at most once a second and waits 99 times as long as
a scrape took before the next (1 % of the server's time; ``scrape.next_wait_s``); every 0.25 s, as before,
a 40 ms render took 16 % of the server's time.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from pipeline.config.sweepconfig import parse_config
from pipeline.backends import get_backend
from pipeline.backends.scrape import Sampler
from pipeline.metrics.summarize import summarize_point
from pipeline.metrics.definitions import itl_values
from pipeline.core.records import PointKey
from tests.integration.served_helpers import build_tokenizer, free_port, wait_healthy

pytestmark = [pytest.mark.slow, pytest.mark.alone]  # alone: it times the streams with and without a /metrics sampler (run alone: another test process bunches them)

HERE = Path(__file__).resolve().parent
N_TOKENS = 16
CONCURRENCY = 4
REQUESTS = 32


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tok")
    build_tokenizer(folder)
    return folder


def measure(tmp: Path, tok_dir: Path, metrics_kb: int, metrics_ms: float):
    """One point (c = 4, 32 requests, 16 tokens) against a fresh server with the given ``/metrics``; (records, summary)."""
    port = free_port()
    log = tmp / f"server-{metrics_kb}.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, str(HERE / "fake_stream_server.py"), "--port", str(port),
                                 "--metrics-kb", str(metrics_kb), "--metrics-ms", str(metrics_ms)],
                                stdout=fh, stderr=subprocess.STDOUT)
    try:
        wait_healthy(f"http://127.0.0.1:{port}/health", proc, 30, log)
        cfg = parse_config({"name": "t", "hardware": "cpu", "backend": "openai", "input_len": 8,
                            "output_len": N_TOKENS, "concurrency": [CONCURRENCY], "repeats": 1,
                            "openai": {"base_url": f"http://127.0.0.1:{port}/v1", "requests_per_point": REQUESTS,
                                       "tokenizer": str(tok_dir), "timeout_s": 30},
                            "models": [{"name": "m", "served_name": "m"}]})
        engine = get_backend(cfg)
        engine.load(cfg.models[0])
        rec = engine.measure(PointKey("m", "openai", 8, N_TOKENS, CONCURRENCY), 1, True, 0)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return rec, summarize_point(rec)


def test_slow_large_metrics_page_leaves_ttft_and_itl_unchanged(tmp_path, tok_dir):
    fast_rec, fast = measure(tmp_path, tok_dir, 1, 0)
    slow_rec, slow = measure(tmp_path, tok_dir, 1024, 300)
    assert fast.completed == slow.completed == REQUESTS and fast.failed == slow.failed == 0
    # the sampler ran during the slow repeat: the server's running count was seen (up to 4 requests)
    during = slow_rec.repeats[0].server_metrics["max_during"]
    assert 1 <= during["vllm:num_requests_running"] <= CONCURRENCY + 1
    # the server's own figures (module docstring) hold under both pages
    for s in (fast, slow):
        assert 0.010 <= s.itl_s["p50"] < 0.030
    assert abs(slow.ttft_s["p50"] - fast.ttft_s["p50"]) <= 0.010
    assert slow.itl_s["p99"] <= fast.itl_s["p99"] + 0.015
    slow_max = max(v for rep in slow_rec.repeats for r in rep.requests if r.ok and not r.warmup for v in itl_values(r))
    assert slow_max < 0.100  # in the loop, one parse held every stream for about 0.25 s


def sampled_scrapes(tmp: Path, metrics_ms: float, window_s: float) -> list[float]:
    """The server-side times of the sampler's scrapes over one ``window_s`` repeat of a server whose page takes
    ``metrics_ms`` to render while holding its loop."""
    port = free_port()
    log = tmp / f"server-blocking-{metrics_ms:g}.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, str(HERE / "fake_stream_server.py"), "--port", str(port),
                                 "--metrics-kb", "1", "--metrics-ms", str(metrics_ms), "--metrics-blocking"],
                                stdout=fh, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base + "/health", proc, 30, log)
        sampler = Sampler(base + "/metrics")
        try:
            sampler.start()  # spawns the process, waits until it is ready, then starts sampling
            time.sleep(window_s)
            during = sampler.stop()
        finally:
            sampler.close()
        assert during.get("vllm:num_requests_running") == 0.0  # the page was read
        with urllib.request.urlopen(base + "/scrapes", timeout=10) as resp:
            return json.loads(resp.read())
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_sampler_takes_at_most_one_percent_of_a_server_whose_page_holds_its_loop(tmp_path):
    # a 40 ms render: after the first scrape (0.05 s in) the next waits 0.040 · 99 = 3.96 s, beyond a 2.5 s repeat
    # (every 0.25 s, the sampler before this issue, scraped 9 times: 0.36 s of the server's 2.5 s)
    assert len(sampled_scrapes(tmp_path, 40, 2.5)) == 1
    # a fast page: about once a second (0.05 s, ~1.05 s, ~2.05 s, ~3.05 s; a busy machine's slower answers space
    # them further), never closer than 1 s apart
    fast = sampled_scrapes(tmp_path, 0, 3.2)
    assert 2 <= len(fast) <= 4
    assert min(b - a for a, b in zip(fast, fast[1:])) >= 1.0

