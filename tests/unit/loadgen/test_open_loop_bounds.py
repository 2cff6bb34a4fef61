"""An open loop's requests a repeat are bounded up front (fault kind: a sweep that plans what it cannot hold: an
open loop at 100,000 req/s planned 1,100,000 requests, 5.6 GB, for 95 s, then died with "SystemError: error return
without exception set" under a 6 GB limit)."""

from __future__ import annotations

import pytest

from pipeline.config.options import MAX_REQUESTS_PER_REPEAT
from pipeline.config.sweepconfig import parse_config
from pipeline.core.errors import BatchmarkError
from pipeline.loadgen.loopsizes import open_loop_counts

BASE = {"name": "t", "hardware": "cpu", "backend": "openai", "concurrency": [1], "input_len": 64, "output_len": 16,
        "openai": {"base_url": "http://127.0.0.1:9/v1"}, "models": [{"name": "m", "served_name": "m"}]}


def test_a_rate_a_client_cannot_hold_is_refused_in_one_line():
    """100,000 req/s × 10 s = 1,000,000 requests > 200,000: refused naming the rate; 20,000 req/s (exactly 200,000)
    is accepted."""
    with pytest.raises(BatchmarkError) as exc:
        parse_config({**BASE, "open_loop": {"rates": [2.0, 100000]}}, "c.yaml")
    msg = str(exc.value)
    assert "\n" not in msg and "open_loop.rates" in msg and "rates[1] = 100000" in msg and "1,000,000 requests" in msg
    parse_config({**BASE, "open_loop": {"rates": [20000]}}, "c.yaml")
    with pytest.raises(BatchmarkError, match="openai.requests_per_point"):
        parse_config({**BASE, "openai": {**BASE["openai"], "requests_per_point": MAX_REQUESTS_PER_REPEAT + 1}}, "c.yaml")


def test_a_long_window_at_a_fast_rate_is_bounded():
    """20,000 req/s with a 20 s E2EL: window min(120, max(10, 5 × 20)) = 100 s, 2,000,000 measured and 400,000
    warm-up asked; sent: 100,000 warm-up (half the bound) and 100,000 measured.  A slow rate is as before: 2 req/s,
    no E2EL: max(⌈2 × 10⌉, 32) = 32 measured, ⌈2 × 1⌉ = 2 warm-up."""
    assert open_loop_counts(20000.0, 32, expected_e2el_s=20.0) == (100_000, 100_000)
    assert open_loop_counts(2.0, 32) == (2, 32)
