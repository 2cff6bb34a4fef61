"""The budget of a plan: the most certain plan of a config that fits a budget (:func:`fit_budget`, stepping down
:data:`LADDER`, then dropping grid points from the top, then the open loop), and :func:`plan_for`, the plan under
the config's or the command's budget.

Split out of :mod:`pipeline.plan.estimate`, which makes each plan the budget weighs.
"""

from __future__ import annotations

from pipeline.config.sweepconfig import SweepConfig, parse_duration
from pipeline.plan.estimate import Plan, make_plan, server_options
from pipeline.plan.tuningbudget import fit_tuning
from pipeline.plan.ladder import LADDER, budgeted_config as _budgeted  # noqa: F401  (LADDER importable from here)


def fit_budget(cfg: SweepConfig, budget_s: float) -> tuple[Plan, SweepConfig]:
    """The most certain plan that fits ``budget_s`` seconds, and the config the sweep then measures.

    A tuning config (more than one variant or shape) is fitted in its own order (:func:`pipeline.plan.tuningbudget.fit_tuning`).

    Steps down :data:`LADDER` (fewer repeats, fewer requests per repeat; a rung that changes nothing
    for this config is skipped), then drops grid points from the top (the largest concurrency first, for
    every model), then the open loop.  The plan's ``dropped`` lists exactly what was left out and
    ``certainty`` what each step taken costs; when even one concurrency without the open loop is over
    the budget, that last plan is returned with ``fits_budget`` False.
    """
    if len(cfg.variant_list()) > 1 or len(cfg.shapes()) > 1:
        return fit_tuning(cfg, budget_s)
    rungs: list[tuple[int, int | None, int | None, str]] = []
    for reps_max, per_slot, min_req, why in LADDER:
        reps = min(cfg.repeats, reps_max) if reps_max else cfg.repeats
        if rungs and (reps, per_slot, min_req) == rungs[-1][:3]:
            continue
        rungs.append((reps, per_slot, min_req, why))
    certainty: list[str] = []
    for i, (reps, per_slot, min_req, why) in enumerate(rungs):
        if i:
            certainty.append(why)
        plan = make_plan(cfg, repeats=reps, requests_per_slot=per_slot, min_requests=min_req)
        if plan.wall_s <= budget_s:
            break
    dropped = []
    if reps != cfg.repeats:
        dropped.append(f"repeats {cfg.repeats} -> {reps}")
    if per_slot:
        was = server_options(cfg)
        dropped.append(f"measured requests per repeat max({was.requests_per_slot}·c, {was.min_requests}) -> "
                       f"max({per_slot}·c, {min_req})")
    drop, open_loop = 0, True
    if plan.wall_s > budget_s:
        for drop in range(1, len(cfg.concurrency)):
            plan = make_plan(cfg, repeats=reps, requests_per_slot=per_slot, min_requests=min_req, drop_top=drop)
            if plan.wall_s <= budget_s:
                break
        gone = cfg.concurrency[len(cfg.concurrency) - drop:]
        dropped.append(f"concurrency {', '.join(map(str, gone))} (every model)")
        certainty.append(f"no point measured above c = {cfg.concurrency[len(cfg.concurrency) - drop - 1]}: "
                         "a knee or peak above it is not seen (the knee may read 'not reached')")
        if plan.wall_s > budget_s and cfg.open_loop is not None:
            open_loop = False
            plan = make_plan(cfg, repeats=reps, requests_per_slot=per_slot, min_requests=min_req, drop_top=drop,
                             open_loop=False)
            dropped.append("the open loop (every rate and the SLO bisection)")
            certainty.append("no open-loop rates: no saturation rate and no highest rate that holds the SLO")
    plan.budget_s = budget_s
    plan.dropped = dropped
    plan.certainty = certainty
    plan.fits_budget = plan.wall_s <= budget_s
    return plan, _budgeted(cfg, reps, per_slot, min_req, drop, open_loop)


def plan_for(cfg: SweepConfig, budget: str | float | None = None) -> tuple[Plan, SweepConfig]:
    """The plan of ``cfg`` under ``budget`` (the argument, else the config's ``budget``), and the config to measure.

    Raises:
        BatchmarkError: a budget that is not a duration; a config that cannot be planned (see :func:`make_plan`).
    """
    budget = budget if budget is not None else cfg.budget
    if budget is None:
        return make_plan(cfg), cfg
    return fit_budget(cfg, parse_duration(budget, "budget"))
