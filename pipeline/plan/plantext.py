"""The plan as text (``batchmark plan``): a table per model × variant × shape cell, the budget's choices, the points
that do not fit.  Split out of :mod:`pipeline.plan.estimate`, which makes the plan."""

from __future__ import annotations

from pipeline.plan.bounds import format_duration
from pipeline.plan.estimate import Plan


def plan_text(plan: Plan) -> str:
    """The plan as a text table per model, with the budget's choices and the points that do not fit."""
    from pipeline.core.texttable import text_table

    def f(v: float | None, scale: float = 1.0, fmt: str = ".3g") -> str:
        return "-" if v is None else format(v * scale, fmt)

    lines = [f"plan of {plan.config} (backend {plan.backend}) on {plan.hardware}: {format_duration(plan.wall_s)} in all "
             f"({plan.repeats} repeats, measured requests per repeat max({plan.requests_per_slot}·c, {plan.min_requests}))"]
    lines += ([f"requests: {plan.workload}"] if getattr(plan, "workload", None) else [])
    lines += ([plan.hardware_note] if plan.hardware_note else []) + [""]
    for m in plan.models:
        rows = [[p.concurrency if p.load == "closed" else f"{p.load} {p.rate_rps:g}/s" if p.rate_rps else "bisection",
                 f(p.output_throughput_tok_s, 1, ".1f"), f(p.ttft_s, 1000, ".0f"), f(p.tpot_s, 1000, ".1f"),
                 "yes" if p.fits else "NO", format_duration(p.wall_s)] for p in m.points]
        lines.append(f"{m.label}: {format_duration(m.wall_s)} (server start {format_duration(m.server_start_s)}"
                     + (", shared with the variant's first shape" if not m.server_start_s else "") + ")"
                     + (f"; stops after c = {m.stops_after} (weak doublings)" if m.stops_after else ""))
        lines.extend(text_table(["point", "tok/s", "TTFT ms", "TPOT ms", "fits", "wall"], rows, "rrrrlr"))
        lines.append("")
    for line in plan.not_fitting():
        lines.append(f"does not fit: {line}")
    if plan.budget_s is not None:
        lines.append(f"budget {format_duration(plan.budget_s)}: " + ("met" if plan.fits_budget else "NOT met even so"))
        for d in plan.dropped:
            lines.append(f"  dropped: {d}")
        for c in plan.certainty:
            lines.append(f"  costs: {c}")
    lines.append(f"predicted by the simulated server ({_step_source(plan)}): a prediction, not a measurement")
    return "\n".join(lines)


def _step_source(plan: Plan) -> str:
    """Where the plan's step times come from: the served formats and the profile's engine terms, or the roofline
    (:func:`pipeline.backends.simulated.server_for`)."""
    cost = (f"each step costed by {plan.step_terms}'s engine terms, data/hardware/{plan.hardware}.yaml engines:, "
            "each with its source" + (f"; {plan.step_terms_note}" if plan.step_terms_note else "")
            if plan.step_terms else "the roofline of the hardware profile plus its step_overhead_s")
    return f"the model cards in their served formats, pipeline/cards/servedformat.py; {cost}"
