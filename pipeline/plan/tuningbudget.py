"""The budget of a tuning config (more than one variant or shape): which cells of model × variant × shape ×
point to drop, in a documented order, until the plan fits (:func:`fit_tuning`).

The order, cheapest certainty first (docs/tuning.md, "The tuning space"):

1. **the open loop** (every rate and the SLO bisection, every cell): one open-loop rate costs 10–35 min
   (its window is five expected E2ELs of arrivals after one of warm-up, :func:`pipeline.loadgen.scheduler.open_loop_counts`)
   against 1–3 min per grid point, and a tuning night's question — what each setting bought — is answered on the
   closed-loop curve, where every variant runs the same points;
2. **the ladder** of :data:`pipeline.plan.ladder.LADDER` (fewer measured requests per repeat, then fewer repeats),
   for every cell alike, so every variant keeps the same statistical power against the baseline;
3. **the largest concurrencies of the non-baseline variants**, one grid point at a time, down to two points: the top
   point costs the most (4·c requests per repeat) and the baseline keeps its whole curve, so each variant's
   points are still compared with the baseline's at the same concurrency;
4. **shapes beyond the first of the non-baseline variants**, the last first: the first shape is the one every
   variant is measured at;
5. **the largest concurrencies of every cell** (the baseline's too), as an untuned config's budget does.

Each step is listed in the plan's ``dropped`` and what it costs in ``certainty``; when even the last step is over
the budget, that plan is returned with ``fits_budget`` False.
"""

from __future__ import annotations

from pipeline.config.sweepconfig import SweepConfig
from pipeline.config.variants import variant_shapes
from pipeline.plan.estimate import Plan, make_plan, server_options
from pipeline.plan.ladder import LADDER, budgeted_config

#: Grid points a non-baseline variant keeps at least (step 3): two, so it still has a doubling to judge.
MIN_VARIANT_POINTS = 2


def _cut(cfg: SweepConfig, top: int, shapes: int | None) -> SweepConfig:
    """``cfg`` with every variant but the baseline cut: ``top`` grid points off its top, its first ``shapes``
    shapes only (None: all); validated again."""
    data = cfg.model_dump(mode="json")
    if cfg.workloads:
        data.pop("input_len"), data.pop("output_len")
    variants = data.get("variants") or []
    for i, v in enumerate(variants[1:], start=1):
        grid = list(cfg.variant_list()[i].concurrency or cfg.concurrency)
        if top:
            v["concurrency"] = grid[:max(len(grid) - top, MIN_VARIANT_POINTS)]
        if shapes is not None:
            v["workloads"] = [s.model_dump() for s in variant_shapes(cfg, cfg.variant_list()[i])[:shapes]]
    data.pop("budget", None)
    return SweepConfig.model_validate(data)


def fit_tuning(cfg: SweepConfig, budget_s: float) -> tuple[Plan, SweepConfig]:
    """The plan of a tuning config that fits ``budget_s`` (s), dropping in the module docstring's order, and the
    config the sweep then measures."""
    dropped: list[str] = []
    certainty: list[str] = []
    work, open_loop = cfg, True
    plan = make_plan(work)
    if plan.wall_s > budget_s and cfg.open_loop is not None:
        open_loop = False
        plan = make_plan(work, open_loop=False)
        dropped.append("the open loop (every rate and the SLO bisection, every variant)")
        certainty.append("no open-loop rates: no saturation rate and no highest rate that holds the SLO")
    reps, per_slot, min_req = cfg.repeats, None, None
    was = server_options(cfg)
    for reps_max, slot, least, why in LADDER[1:]:
        if plan.wall_s <= budget_s:
            break
        nxt = (min(cfg.repeats, reps_max) if reps_max else cfg.repeats, slot, least)
        if slot is not None and slot >= was.requests_per_slot and least >= was.min_requests:
            nxt = (nxt[0], per_slot, min_req)  # no fewer requests than the config already measures
        if nxt == (reps, per_slot, min_req):
            continue
        reps, per_slot, min_req = nxt
        certainty.append(why)
        plan = make_plan(work, repeats=reps, requests_per_slot=per_slot, min_requests=min_req, open_loop=open_loop)
    if reps != cfg.repeats:
        dropped.append(f"repeats {cfg.repeats} -> {reps}")
    if per_slot:
        dropped.append(f"measured requests per repeat max({was.requests_per_slot}·c, {was.min_requests}) -> "
                       f"max({per_slot}·c, {min_req}) (every cell)")

    def again(c: SweepConfig, drop: int = 0) -> Plan:
        return make_plan(c, repeats=reps, requests_per_slot=per_slot, min_requests=min_req, open_loop=open_loop,
                         drop_top=drop)
    top = 0
    while plan.wall_s > budget_s and top < len(cfg.concurrency) - MIN_VARIANT_POINTS:
        top += 1
        work = _cut(cfg, top, None)
        plan = again(work)
    if top:
        dropped.append(f"the top {top} concurrenc{'y' if top == 1 else 'ies'} of every variant but the baseline")
        certainty.append("a variant's curve ends below the baseline's: its knee or peak above that is not seen")
    n_shapes = len(cfg.shapes())
    keep = n_shapes
    while plan.wall_s > budget_s and keep > 1:
        keep -= 1
        work = _cut(cfg, top, keep)
        plan = again(work)
    if keep < n_shapes:
        gone = ", ".join(f"{s.input_len}/{s.output_len}" for s in cfg.shapes()[keep:])
        dropped.append(f"shapes {gone} of every variant but the baseline")
        certainty.append(f"only the baseline is measured at {gone}: what a setting buys there is not seen")
    drop = 0
    while plan.wall_s > budget_s and drop < len(cfg.concurrency) - 1:
        drop += 1
        plan = again(work, drop)
    if drop:
        dropped.append(f"the top {drop} concurrenc{'y' if drop == 1 else 'ies'} of every cell (the baseline too)")
        certainty.append("no point measured above the cut in any variant: a knee or peak above it is not seen")
    plan.budget_s, plan.dropped, plan.certainty = budget_s, dropped, certainty
    plan.fits_budget = plan.wall_s <= budget_s
    return plan, budgeted_config(work, reps, per_slot, min_req, drop, open_loop)
