"""The plan's budget over gpt-oss-20b's grid, simulated once per rung of the budget's ladder (seconds).

The plan's arithmetic is checked in tests/unit/plan/test_estimate.py.
"""

from __future__ import annotations

from pipeline.config.sweepconfig import load_config
from pipeline.plan.budget import fit_budget
from tests.unit.plan.test_estimate import SPARK


def test_budget_drops_grid_points_from_the_top_when_the_ladder_is_not_enough():
    cfg = load_config(SPARK).model_copy(update={"models": [m for m in load_config(SPARK).models
                                                             if m.name == "gpt-oss-20b"]})
    plan, measured = fit_budget(cfg, 20 * 60)
    assert measured.concurrency == cfg.concurrency[:len(measured.concurrency)]
    assert len(measured.concurrency) < len(cfg.concurrency)
    gone = cfg.concurrency[len(measured.concurrency):]
    assert any(d == f"concurrency {', '.join(map(str, gone))} (every model)" for d in plan.dropped), plan.dropped

