"""``batchmark plan``'s work: a config predicted point by point on its hardware (the simulated server), within its
budget, optionally as another harness measures it."""

from __future__ import annotations

import json

from pipeline.commands import print  # noqa: A004 (escapes control characters; see pipeline.commands.print)
from pipeline.core.errors import BatchmarkError


def plan(path: str | None, *, budget: str | None = None, harness: str | None = None, as_json: bool = False) -> int:
    """``batchmark plan CONFIG``: print the plan of the sweep config at ``path`` (text, or JSON with ``as_json``);
    ``budget`` (``8h``, ``90m``) over the config's own; ``harness`` ``closed``, ``wave`` or ``static`` (stated: priced
    by the stated engine's terms or refused, :func:`pipeline.plan.harnessplan.with_harness`; None: the closed loop,
    by the engine's terms where the profile has them, else the roofline and step overhead).

    Returns:
        0.

    Raises:
        BatchmarkError: no config given, or one the plan cannot read (one line).
    """
    from pipeline.config.sweepconfig import load_config
    from pipeline.plan.plantext import plan_text
    from pipeline.plan.budget import plan_for

    if not path:
        raise BatchmarkError("plan: give a config (batchmark plan --config config/spark.yaml)")
    from pipeline.plan.probed import probe_for_plan

    cfg = load_config(path)
    probe_for_plan(cfg)  # a profile without spec: this machine's probe, the stored one or one run now
    planned, _ = plan_for(cfg, budget)
    if harness is not None:
        from pipeline.plan.harnessplan import with_harness

        planned = with_harness(planned, cfg, harness)
    if as_json:
        print(json.dumps(planned.as_dict(), indent=1))
    else:
        print(plan_text(planned))
    return 0
