"""What every budget shares (:mod:`pipeline.plan.budget`, :mod:`pipeline.plan.tuningbudget`): the ladder of fewer
requests and repeats, and the config the sweep measures once the budget chose."""

from __future__ import annotations

from pipeline.config.options import OpenLoop  # noqa: F401  (the budget's cut open loop)
from pipeline.config.sweepconfig import SweepConfig


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


def budgeted_config(cfg: SweepConfig, reps: int, per_slot: int | None, min_req: int | None, drop: int,
                    open_loop: "bool | OpenLoop | None") -> SweepConfig:
    """``cfg`` with the budget's choices applied (the config the sweep measures; validated again): ``open_loop``
    False or None drops it, True keeps the config's, an :class:`~pipeline.config.options.OpenLoop` replaces it (the
    budget's fewer rates or bisection steps, :func:`pipeline.plan.budget.cuts`)."""
    data = cfg.model_dump(mode="json")
    if cfg.workloads:  # the shapes are the workloads; the shorthand fields only mirror the first
        data.pop("input_len"), data.pop("output_len")
    data["repeats"] = reps
    if drop:
        data["concurrency"] = data["concurrency"][:len(data["concurrency"]) - drop]
        for v in data.get("variants") or []:  # a variant's own grid (a tuning budget's cut) loses its top too
            if v.get("concurrency"):
                v["concurrency"] = v["concurrency"][:max(len(v["concurrency"]) - drop, 1)]
        for eng in ("vllm", "simulated"):  # a server sized for the grid kept, as before the drop
            if data[eng].get("max_num_seqs") is None:
                data[eng]["max_num_seqs"] = max(cfg.concurrency)
    if not open_loop:
        data["open_loop"] = None
    elif open_loop is not True:
        data["open_loop"] = open_loop.model_dump(mode="json")
    if per_slot:
        for eng in ("vllm", "openai", "simulated"):
            data[eng]["requests_per_slot"] = per_slot
            data[eng]["min_requests"] = min_req
    data.pop("budget", None)
    return SweepConfig.model_validate(data)
