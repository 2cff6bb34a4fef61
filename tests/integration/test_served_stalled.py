"""A stalled server must not cost ``timeout_s`` per request.

Fault kind: a hung endpoint (connection open, nothing streamed) kept every request waiting its
full timeout and nothing aborted the point; the shipped endpoint config would have taken days.
Here the fake server (``fake_stream_server.py --fault stall``, a real process) answers the
feature probe and then hangs every request.  Expected: with ``point_timeout_s`` = 3 s the point
is aborted after ~3 s (not the 300 s its 8 requests × ``timeout_s`` 60 s … would cost), every
measured request is stored as failed with the reason, the point is flagged, and the engine
refuses the model's next point so the sweep moves on.
"""

from __future__ import annotations

import time

import pytest

from pipeline.config.sweepconfig import parse_config
from pipeline.backends import get_backend
from pipeline.metrics.summarize import summarize_point
from pipeline.core.records import PointKey
from tests.integration.test_served_token_truth import start_server

pytestmark = pytest.mark.slow


def _cfg(url: str, tok: str, **opts):
    return parse_config({"name": "t", "hardware": "cpu", "backend": "openai", "input_len": 8, "output_len": 16,
                         "concurrency": [1, 2], "repeats": 2,
                         "openai": {"base_url": url, "requests_per_point": 8, "tokenizer": tok, "timeout_s": 60, **opts},
                         "models": [{"name": "m", "served_name": "m"}]})


@pytest.fixture
def stalled(tmp_path):
    from tests.integration.served_helpers import build_tokenizer

    build_tokenizer(tmp_path / "tok")
    proc, url = start_server("stall", tmp_path)
    yield url, str(tmp_path / "tok")
    proc.kill()  # a hung handler does not finish on SIGTERM's graceful shutdown
    proc.wait(timeout=10)


def test_point_deadline_aborts_a_stalled_point(stalled):
    url, tok = stalled
    engine = get_backend(_cfg(url, tok, point_timeout_s=3))
    engine.load(engine.cfg.models[0])
    t = time.monotonic()
    rec = engine.measure(PointKey("m", "openai", 8, 16, 2), 2, True, 0)
    took = time.monotonic() - t
    assert took < 20, took  # the deadline, not 8 × 60 s of timeouts
    assert "point deadline of 3 s passed" in rec.meta["aborted"]
    assert rec.meta["transport"] == "raw"  # plain http://: the load generator's own reader, named in the meta
    s = summarize_point(rec)
    assert s.completed == 0 and s.failed == 8
    assert all(r.error.startswith(("cancelled: point deadline", "not sent: point deadline"))
               for rep in rec.repeats for r in rep.requests if not r.warmup)
    ok, why = engine.fits(PointKey("m", "openai", 8, 16, 4))
    assert not ok and "aborted" in why


def test_failures_in_a_row_abort_a_point(tmp_path):
    from tests.integration.served_helpers import build_tokenizer

    build_tokenizer(tmp_path / "tok")
    proc, url = start_server("none", tmp_path)
    try:
        engine = get_backend(_cfg(url, str(tmp_path / "tok"), max_consecutive_failures=3))
        engine.load(engine.cfg.models[0])
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    # the server is gone now: every request fails at once (connection refused); 3 in a row abort the repeat
    rec = engine.measure(PointKey("m", "openai", 8, 16, 1), 2, True, 0)
    assert rec.meta["aborted"].startswith("3 requests failed in a row")
    assert len(rec.repeats) == 1  # the second repeat was not tried
    assert summarize_point(rec).completed == 0


def test_sweep_where_nothing_was_measured_says_so_and_exits_1(stalled, scratch_root, tmp_path):
    """Fault kind: a run where every request failed ended "complete" with exit 0 and only dashes in ``show``."""
    import subprocess
    import sys

    import yaml

    url, tok = stalled
    cfg = tmp_path / "dead.yaml"
    cfg.write_text(yaml.safe_dump({
        "name": "dead", "hardware": "cpu", "backend": "openai", "input_len": 8, "output_len": 16,
        "concurrency": [1, 2], "repeats": 1, "warmup": False,
        "openai": {"base_url": url, "requests_per_point": 4, "tokenizer": tok, "timeout_s": 60, "point_timeout_s": 1},
        "models": [{"name": "m", "served_name": "m"}]}))
    res = subprocess.run([sys.executable, "-m", "pipeline", "sweep", "--config", str(cfg), "--run-id",
                          "20260101T000000Z-dead", "--no-progress"], capture_output=True, text=True,
                         env={**__import__("os").environ, "BATCHMARK_ROOT": str(scratch_root)}, timeout=300)
    assert res.returncode == 1, res.stderr[-2000:]
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("batchmark: error: run 20260101T000000Z-dead: every point failed, nothing was measured")
    assert "warning: 1 of 1 point(s) had failed requests, 1 measured nothing" in res.stderr
