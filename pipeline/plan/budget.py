"""The budget of a plan: the most certain plan of a config that fits a budget (:func:`fit_budget`, stepping down
:data:`LADDER`, then dropping the costliest cells first, :func:`cuts`: SLO bisection steps, open-loop rates, grid
points from the top, the open loop), and :func:`plan_for`, the plan under the config's or the command's budget.

Split out of :mod:`pipeline.plan.estimate`, which makes each plan the budget weighs.
"""

from __future__ import annotations

from pipeline.config.options import OpenLoop
from pipeline.config.sweepconfig import SweepConfig, parse_duration
from pipeline.plan.estimate import Plan, make_plan, server_options
from pipeline.plan.tuningbudget import fit_tuning
from pipeline.plan.ladder import LADDER, budgeted_config as _budgeted  # noqa: F401  (LADDER importable from here)


def fit_budget(cfg: SweepConfig, budget_s: float) -> tuple[Plan, SweepConfig]:
    """The most certain plan that fits ``budget_s`` seconds, and the config the sweep then measures.

    A tuning config (more than one variant or shape) is fitted in its own order (:func:`pipeline.plan.tuningbudget.fit_tuning`).

    Steps down :data:`LADDER` (fewer repeats, fewer requests per repeat; a rung that changes nothing
    for this config is skipped), then takes :func:`cuts` in their order (SLO bisection steps, open-loop rates,
    grid points from the top, the open loop).  The plan's ``dropped`` lists exactly what was left out and
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
    drop, open_loop = 0, cfg.open_loop
    if plan.wall_s > budget_s:
        for open_loop, drop in cuts(cfg):
            plan = make_plan(cfg.model_copy(update={"open_loop": open_loop}), repeats=reps, requests_per_slot=per_slot,
                             min_requests=min_req, drop_top=drop, open_loop=open_loop is not None)
            if plan.wall_s <= budget_s:
                break
        d, c = cut_lines(cfg, open_loop, drop)
        dropped += d
        certainty += c
    plan.budget_s = budget_s
    plan.dropped = dropped
    plan.certainty = certainty
    plan.fits_budget = plan.wall_s <= budget_s
    return plan, _budgeted(cfg, reps, per_slot, min_req, drop, open_loop)


def cuts(cfg: SweepConfig) -> list[tuple[OpenLoop | None, int]]:
    """The cells the budget drops once :data:`LADDER` is not enough, most expensive and least informative first:
    each entry ``(open loop kept, grid points dropped from the top)`` includes every cut before it.

    Their cost on config/spark.yaml (``batchmark plan``): an open-loop rate lasts 2–35 min (five E2ELs of queue at a
    rate near saturation), an SLO bisection step as long as the median rate, a grid point 1–4 min (a single stream of
    a dense 32B model up to 34 min).  So, in this order:

    1. the SLO bisection steps, last first: each narrows a bracket the rates already give (the highest rate that
       holds the SLO is still known to within the rates' spacing);
    2. open-loop rates, down to 2: ``auto_rates`` one fewer at a time (an explicit list loses its highest rate,
       the longest queue): the two left are the single-stream rate and past saturation, so the saturation rate
       still shows, with coarser steps;
    3. grid points from the top (the largest concurrency first, for every model): a point above the knee shows
       only how the plateau ends; the curve's shape below it stays;
    4. the open loop altogether (last: without it there is no saturation rate and no SLO rate at all).
    """
    out: list[tuple[OpenLoop | None, int]] = []
    ol = cfg.open_loop
    if ol is not None:
        for k in range(ol.bisect_steps - 1 if cfg.slo is not None else -1, -1, -1):  # no SLO: no bisection runs
            ol = ol.model_copy(update={"bisect_steps": k})
            out.append((ol, 0))
        n = ol.auto_rates if ol.rates == "auto" else len(ol.rates)
        for k in range(n - 1, 1, -1):
            ol = ol.model_copy(update={"auto_rates": k} if ol.rates == "auto" else {"rates": ol.rates[:k]})
            out.append((ol, 0))
    out += [(ol, drop) for drop in range(1, len(cfg.concurrency))]
    if ol is not None:
        out.append((None, len(cfg.concurrency) - 1))
    return out


def cut_lines(cfg: SweepConfig, open_loop: OpenLoop | None, drop: int) -> tuple[list[str], list[str]]:
    """What the cuts that end at ``(open_loop, drop)`` (an entry of :func:`cuts`) dropped, and what each costs."""
    dropped, costs = [], []
    was = cfg.open_loop
    if was is not None and open_loop is not None:
        if open_loop.bisect_steps != was.bisect_steps:
            dropped.append(f"SLO bisection steps {was.bisect_steps} -> {open_loop.bisect_steps} (every model)")
            costs.append("the highest rate that holds the SLO is known only to within the open-loop rates' spacing")
        n_was, n = ((was.auto_rates, open_loop.auto_rates) if was.rates == "auto" else
                    (len(was.rates), len(open_loop.rates)))
        if n != n_was:
            dropped.append(f"open-loop rates {n_was} -> {n} (every model)")
            costs.append(f"{n} rates from single stream to past saturation: the saturation rate is placed more coarsely")
    if drop:
        gone = cfg.concurrency[len(cfg.concurrency) - drop:]
        dropped.append(f"concurrency {', '.join(map(str, gone))} (every model)")
        costs.append(f"no point measured above c = {cfg.concurrency[len(cfg.concurrency) - drop - 1]}: "
                     "a knee or peak above it is not seen (the knee may read 'not reached')")
    if was is not None and open_loop is None:
        dropped.append("the open loop (every rate and the SLO bisection)")
        costs.append("no open-loop rates: no saturation rate and no highest rate that holds the SLO")
    return dropped, costs


def plan_for(cfg: SweepConfig, budget: str | float | None = None) -> tuple[Plan, SweepConfig]:
    """The plan of ``cfg`` under ``budget`` (the argument, else the config's ``budget``), and the config to measure.

    Raises:
        BatchmarkError: a budget that is not a duration; a config that cannot be planned (see :func:`make_plan`).
    """
    budget = budget if budget is not None else cfg.budget
    if budget is None:
        return make_plan(cfg), cfg
    return fit_budget(cfg, parse_duration(budget, "budget"))
