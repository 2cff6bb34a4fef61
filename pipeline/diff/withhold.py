"""Run vs run, a flag withholds what it touches: a called change resting on a flagged figure is taken back."""

from __future__ import annotations

from typing import Any

from pipeline.analysis.probedrift import drift_explains
from pipeline.diff.metrics import MetricChange
from pipeline.core.records import PointKey

#: The diff's metrics computed from the probe's roofs or the model card (ceilings, roofline): what a noisy probe
#: or an impossible figure makes uncertain.  Throughput and latency are measured by their repeats alone.
ROOFLINE_METRICS = frozenset({"mbu", "mfu"})


def withheld_why(change: MetricChange, quality_a: dict[str, Any], quality_b: dict[str, Any]) -> str | None:
    """Why ``change`` gives no verdict, or None (:func:`withhold_flagged`'s rule, one change)."""
    sides = (("A", quality_a), ("B", quality_b))
    at_point = [name for name, q in sides if change.key in {PointKey.of(p) for p in q.get("points") or []}]
    moved = [(name, q["probe_drift"]) for name, q in sides if q.get("probe_drift") is not None]
    roof = [name for name, q in sides if q.get("verdict") == "flagged" and q.get("withholds") == "roofline"]
    bound = [name for name, q in sides if change.key in {PointKey.of(p) for p in q.get("points") or []
                                                         if any(str(r).startswith("client-bound") for r in p.get("reasons") or [])}]
    if bound:
        return "point client-bound (the client, not the server, was the limit)"
    if at_point:
        return f"run {' and '.join(at_point)} flagged at this point"
    explained = [(name, d) for name, d in moved if change.metric not in ROOFLINE_METRICS and drift_explains(d, change.change)]
    if explained:
        return (f"run {' and '.join(n for n, _ in explained)}'s bandwidth probe moved "
                f"{', '.join(f'{d:+.0%}' for _, d in explained)} while it was measured, as much as this change")
    if change.metric in ROOFLINE_METRICS and moved:
        return f"run {' and '.join(n for n, _ in moved)}'s bandwidth probe moved while it was measured ({change.label} rests on it)"
    if change.metric in ROOFLINE_METRICS and roof:
        return f"run {' and '.join(roof)} flagged (its probe or card makes {change.label} uncertain)"
    if change.metric in ROOFLINE_METRICS and any(v is not None and v > 1 for v in (change.a, change.b)):
        return f"{change.label} above 1 is impossible (a wrong roof or model card)"
    return None


def withhold_flagged(changes: list[MetricChange], quality_a: dict[str, Any], quality_b: dict[str, Any]) -> None:
    """Take back every better / worse verdict that rests on a flagged figure, in place.

    Each run's verdict (:func:`pipeline.analysis.quality.run_quality`) says what its flag touches: a point the
    interference check or its repeats' spread flagged gives no finding at that point; a probe that warned, or an
    impossible figure, makes MBU and MFU uncertain (``withholds: "roofline"``) but not a throughput or latency
    measured with agreeing repeats; a probe that moved beyond its own noise while the run was measured
    (``probe_drift``) withholds MBU and MFU, and a throughput or latency change only when the drift is as large as
    the change (:func:`pipeline.analysis.probedrift.drift_explains`); an MBU or MFU above 1 is no finding either.  A withheld change becomes ``"~"``, not significant,
    with a note beginning ``no verdict:`` that says why (``--fail-above`` does not gate on it either).
    """
    for c in changes:
        if c.verdict not in ("better", "worse"):
            continue
        why = withheld_why(c, quality_a, quality_b)
        if why:
            c.note = ((c.note + "; ") if c.note else "") + f"no verdict: {why}"
            c.verdict, c.significant = "~", False
