"""The budget of a tuning config drops cells in its documented order (pipeline/plan/tuningbudget.py): the open loop,
the ladder, the non-baseline variants' top concurrencies, their shapes beyond the first, every cell's top."""

from __future__ import annotations

import pytest

from pipeline.config.sweepconfig import load_config
from pipeline.plan.budget import fit_budget
from pipeline.plan.estimate import make_plan
from tests.conftest import REPO


@pytest.fixture(scope="module")
def twin():
    cfg = load_config(REPO / "config" / "spark-tuning-simulated.yaml")
    return cfg.model_copy(update={"concurrency": [1, 2, 4, 8, 16], "repeats": 3})


def test_the_baseline_keeps_its_curve_while_the_variants_are_cut(twin):
    full = make_plan(twin).wall_s
    budget = full * 0.45
    plan, measured = fit_budget(twin, budget)
    assert plan.fits_budget and plan.wall_s <= budget
    # the twin already measures max(c, 8) and 3 repeats: no ladder rung cuts anything, so the variants go first
    assert plan.dropped[0] == "the top 3 concurrencies of every variant but the baseline"
    assert plan.dropped[1].startswith("shapes ") and plan.dropped[1].endswith("of every variant but the baseline")
    base, *others = measured.variant_list()
    assert base.concurrency is None and base.workloads is None  # the config's whole grid and every shape
    assert all(v.concurrency == [1, 2] and v.workloads for v in others)
    cells = {(m.variant, m.input_len): len(m.points) for m in plan.models}
    assert all(cells[("defaults", s.input_len)] >= 2 for s in twin.shapes())
    assert not any(v == "fp8-kv" and i == 32768 for v, i in cells)  # the last shape went first


def test_the_open_loop_goes_before_anything_else(twin):
    cfg = twin.model_copy(update={"open_loop": twin.model_validate(
        {**twin.model_dump(mode="json", exclude={"input_len", "output_len"}),
         "open_loop": {"rates": [0.5, 1.0]}}).open_loop})
    with_rates = make_plan(cfg).wall_s
    closed = make_plan(cfg, open_loop=False).wall_s
    assert with_rates > closed
    plan, measured = fit_budget(cfg, closed * 1.01)
    assert plan.dropped == ["the open loop (every rate and the SLO bisection, every variant)"]
    assert measured.open_loop is None and plan.fits_budget
