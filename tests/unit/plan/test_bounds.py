"""The plan refuses what no hardware holds before simulating it, and writes every duration readably.

Fault kinds: a planner whose cost grows without bound with its input (concurrency 100,000: 94 s and 1.9 GB; a
million: over 10 minutes, silently), an offered rate so low a point never ends planned as fitting (1e-9 req/s),
a duration printed with hundreds of digits, and a documented input form refused (``budget: 3600`` is seconds).
"""

from __future__ import annotations

import time

import pytest
import yaml

from pipeline.config.sweepconfig import parse_config, parse_duration
from pipeline.core.errors import BatchmarkError
from pipeline.plan import bounds
from pipeline.plan.estimate import make_plan
from tests.runbuilder import SMALL_SIMULATED_CONFIG


def _cfg(**changes):
    doc = yaml.safe_load(SMALL_SIMULATED_CONFIG)
    doc.update(changes)
    return parse_config(doc, "test.yaml")


def test_a_huge_concurrency_is_refused_before_it_is_simulated():
    """Llama-3.1-8B on the DGX Spark profile: ``bounds.kv_sequences`` of 144 tokens holds N sequences at once; a grid
    point of c = 1,000,000 is far beyond 16 N, so it is named and never simulated (the plan returns at once:
    seconds, where it ran for over 10 minutes)."""
    t0 = time.perf_counter()
    plan = make_plan(_cfg(concurrency=[1, 1_000_000]))
    assert time.perf_counter() - t0 < 60  # a generous bound on a shared 2-core machine; it was > 600 s
    last = plan.models[0].points[-1]
    held = plan.models[0].kv_sequences
    assert last.concurrency == 1_000_000 and not last.runs and not last.fits
    assert 1_000_000 > bounds.QUEUE_DEPTH_MAX * held
    assert f"over 16x the {held} sequences of 144 tokens" in last.fits_reason
    assert any("c = 1000000" in line for line in plan.not_fitting())


def test_beyond_memory_by_hand():
    assert bounds.beyond_memory(16 * 100, 100, 144) is None
    assert "c = 1601 is over 16x the 100" in bounds.beyond_memory(1601, 100, 144)
    assert bounds.beyond_memory(10**6, None, 144) is None  # the weights alone do not fit: said by the plan itself


def test_an_open_loop_rate_of_1e_9_does_not_fit():
    """32 requests at 1e-9 req/s take about 3.2e10 s = 8.9e6 h, far over the default job limit of 240 min."""
    cfg = _cfg(open_loop={"rates": [1e-9, 1.0], "load": "poisson"})
    plan = make_plan(cfg)
    slow = next(p for p in plan.models[0].points if p.rate_rps == 1e-9)
    assert not slow.fits and "more than a measuring job's time limit (cluster.runtime_min 240 min)" in slow.fits_reason
    assert "e+06 h" in slow.fits_reason or "e+07 h" in slow.fits_reason
    fast = next(p for p in plan.models[0].points if p.rate_rps == 1.0)
    assert fast.fits


def test_format_duration_of_absurd_durations():
    """1e300 s / 3600 = 2.8e296 h."""
    assert bounds.format_duration(1e300) == "2.8e+296 h"
    assert bounds.format_duration(float("inf")) == "forever"
    assert bounds.format_duration(5 * 3600 + 60) == "5 h 01 min"


def test_a_budget_of_a_bare_number_is_seconds():
    """The config's ``budget`` is documented as a duration or a number of seconds: 3600 is one hour."""
    assert _cfg(budget=3600).budget == 3600
    assert parse_duration(3600) == parse_duration("3600") == parse_duration("1h") == 3600.0
    with pytest.raises(BatchmarkError, match="budget"):
        _cfg(budget=0)
    with pytest.raises(BatchmarkError, match="budget"):
        _cfg(budget=True)
