"""The budget drops the costliest, least informative cells first (pipeline/plan/budget.py ``cuts``).

Regression (fault kind: cheap cells cut before dear ones): once the ladder was not enough, the budget dropped grid
points from the top before any open-loop rate, though on config/spark.yaml a rate costs 10–35 min against 1–3 min
per grid point (``batchmark plan config/spark.yaml``); the night then lost the knee's neighbourhood and kept every
rate.  Here ``make_plan`` is a hand-built plan of stated costs, so what is dropped follows from arithmetic alone.
"""

from __future__ import annotations

import pytest
import yaml

from pipeline.config.sweepconfig import parse_config
from pipeline.plan import budget
from pipeline.plan.estimate import Plan
from tests.runbuilder import SMALL_SIMULATED_CONFIG

GRID_POINT_S = 2 * 60  # per grid point, per model: the 1–3 min of config/spark.yaml's
RATE_S = 20 * 60       # per open-loop rate or bisection step: the 10–35 min of config/spark.yaml's


def _cfg(**changes):
    doc = yaml.safe_load(SMALL_SIMULATED_CONFIG)
    doc.update({"concurrency": [1, 2, 4, 8, 16, 32, 64, 128], "repeats": 3, "slo": {"ttft_p99_max_ms": 2000},
                "open_loop": {"rates": "auto", "auto_rates": 4, "bisect_steps": 1}, **changes})
    return parse_config(doc, "test.yaml")


def _hand_plan(cfg, *, repeats=None, requests_per_slot=None, min_requests=None, drop_top=0, open_loop=True):
    """Wall time of one model: grid points × 2 min + (rates + bisection steps) × 20 min, whatever the repeats."""
    grid = len(cfg.concurrency) - drop_top
    ol = cfg.open_loop if open_loop else None
    rates = 0 if ol is None else (ol.auto_rates if ol.rates == "auto" else len(ol.rates)) + ol.bisect_steps
    return Plan(cfg.name, "dgx-spark", cfg.backend, grid * GRID_POINT_S + rates * RATE_S, [], repeats or cfg.repeats,
                requests_per_slot or 4, min_requests or 32)


@pytest.fixture(autouse=True)
def hand_built(monkeypatch):
    monkeypatch.setattr(budget, "make_plan", _hand_plan)


def test_bisection_and_rates_go_before_grid_points():
    """Full: 8 × 2 + (4 + 1) × 20 = 116 min.  A 60 min budget: without the bisection 96, with 3 rates 76, with
    2 rates 56 min: fits with every grid point kept."""
    plan, measured = budget.fit_budget(_cfg(), 60 * 60)
    assert plan.wall_s == 56 * 60 and plan.fits_budget
    assert measured.concurrency == [1, 2, 4, 8, 16, 32, 64, 128]
    assert (measured.open_loop.auto_rates, measured.open_loop.bisect_steps) == (2, 0)
    assert "SLO bisection steps 1 -> 0 (every model)" in plan.dropped
    assert "open-loop rates 4 -> 2 (every model)" in plan.dropped
    assert not [d for d in plan.dropped if d.startswith("concurrency")]


def test_grid_points_go_from_the_top_before_the_open_loop():
    """A 50 min budget: 2 rates (40 min) leave 10 min, 5 grid points: c = 16 and above go, the open loop stays.
    A 15 min budget: even one grid point beside 2 rates is over (42 min): the open loop goes too, 1 point (2 min)."""
    plan, measured = budget.fit_budget(_cfg(), 50 * 60)
    assert plan.wall_s == 50 * 60 and measured.concurrency == [1, 2, 4, 8, 16]
    assert measured.open_loop.auto_rates == 2
    assert "concurrency 32, 64, 128 (every model)" in plan.dropped
    plan, measured = budget.fit_budget(_cfg(), 15 * 60)
    assert measured.open_loop is None and measured.concurrency == [1]
    assert plan.dropped[-1] == "the open loop (every rate and the SLO bisection)" and plan.wall_s == 2 * 60


def test_an_explicit_rate_list_loses_its_highest_rates_and_no_slo_means_no_bisection_cut():
    """Without an slo no bisection runs, so none is cut; rates [0.5, 1, 2, 4] keep [0.5, 1] (the longest queues go)."""
    cfg = _cfg(slo=None, open_loop={"rates": [0.5, 1, 2, 4], "bisect_steps": 1})
    assert [ol.rates for ol, drop in budget.cuts(cfg)[:2]] == [[0.5, 1.0, 2.0], [0.5, 1.0]]
    plan, measured = budget.fit_budget(cfg, 80 * 60)  # 8 × 2 + (2 + 1) × 20 = 76 min (the hand plan counts the step)
    assert measured.open_loop.rates == [0.5, 1.0] and not [d for d in plan.dropped if "bisection" in d]
