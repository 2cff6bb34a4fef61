"""The budget of a plan: the most certain plan of a config that fits a budget (:func:`fit_budget`, stepping down
:data:`LADDER`, then dropping grid points from the top, then the open loop), and :func:`plan_for`, the plan under
the config's or the command's budget.

Split out of :mod:`pipeline.plan.estimate`, which makes each plan the budget weighs.
"""

from __future__ import annotations

from pipeline.config.sweepconfig import SweepConfig, parse_duration
from pipeline.plan.estimate import Plan, make_plan, server_options


#: Rungs the budget steps down, most certain first: (repeats at most, measured requests per slot, fewest per
#: repeat, what the rung costs in certainty).  Requests per repeat go before repeats: the repeat is the unit a
#: diff tests on (docs/definitions.md, "Diffing runs"), so 5 of them are kept as long as possible.
LADDER: list[tuple[int | None, int | None, int | None, str]] = [
    (None, None, None, "as configured"),
    (5, None, None, "5 repeats instead of more: the smallest slow-down a diff calls 9 times in 10 at one point is "
                    "15 % with 5 repeats, 10 % with 10 (benchmarks/diff_power.py, docs/diff-statistics.md)"),
    (5, 2, 16, "measured requests per repeat max(2·c, 16) instead of max(4·c, 32): half the samples, so a repeat's "
               "throughput spreads about 1.4x (sqrt 2) wider and a p99 rests on fewer requests"),
    (5, 1, 8, "measured requests per repeat max(c, 8): a quarter of the samples (spread about 2x wider); at small "
              "c a p99 is the largest of 8 values per repeat"),
    (3, 1, 8, "3 repeats: the smallest slow-down a diff calls 9 times in 10 at one point grows to 20 % (15 % with 5; "
              "benchmarks/diff_power.py); a point's spread rests on 3 values"),
]


def fit_budget(cfg: SweepConfig, budget_s: float) -> tuple[Plan, SweepConfig]:
    """The most certain plan that fits ``budget_s`` seconds, and the config the sweep then measures.

    Steps down :data:`LADDER` (fewer repeats, fewer requests per repeat; a rung that changes nothing
    for this config is skipped), then drops grid points from the top (the largest concurrency first, for
    every model), then the open loop.  The plan's ``dropped`` lists exactly what was left out and
    ``certainty`` what each step taken costs; when even one concurrency without the open loop is over
    the budget, that last plan is returned with ``fits_budget`` False.
    """
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


def _budgeted(cfg: SweepConfig, reps: int, per_slot: int | None, min_req: int | None, drop: int,
              open_loop: bool) -> SweepConfig:
    """``cfg`` with the budget's choices applied (the config the sweep measures; validated again)."""
    data = cfg.model_dump(mode="json")
    data["repeats"] = reps
    if drop:
        data["concurrency"] = data["concurrency"][:len(data["concurrency"]) - drop]
        for eng in ("vllm", "simulated"):  # a server sized for the grid kept, as before the drop
            if data[eng].get("max_num_seqs") is None:
                data[eng]["max_num_seqs"] = max(cfg.concurrency)
    if not open_loop:
        data["open_loop"] = None
    if per_slot:
        for eng in ("vllm", "openai", "simulated"):
            data[eng]["requests_per_slot"] = per_slot
            data[eng]["min_requests"] = min_req
    data.pop("budget", None)
    return SweepConfig.model_validate(data)


def plan_for(cfg: SweepConfig, budget: str | float | None = None) -> tuple[Plan, SweepConfig]:
    """The plan of ``cfg`` under ``budget`` (the argument, else the config's ``budget``), and the config to measure.

    Raises:
        BatchmarkError: a budget that is not a duration; a config that cannot be planned (see :func:`make_plan`).
    """
    budget = budget if budget is not None else cfg.budget
    if budget is None:
        return make_plan(cfg), cfg
    return fit_budget(cfg, parse_duration(budget, "budget"))
