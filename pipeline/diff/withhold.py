"""Run vs run, flagged runs give no finding: a called change of a flagged run or point is taken back."""

from __future__ import annotations

from typing import Any

from pipeline.diff.metrics import MetricChange
from pipeline.core.records import PointKey


def withhold_flagged(changes: list[MetricChange], quality_a: dict[str, Any], quality_b: dict[str, Any]) -> None:
    """Take back every better / worse verdict of a flagged run or point, in place.

    A run measured on a busy machine (its quality verdict, :func:`pipeline.analysis.quality.run_quality`) or a point the
    interference check or its repeats' spread flagged, or that was client-bound (the client, not the server, was the
    limit: :mod:`pipeline.metrics.clientside`), gives no finding, nor does an MBU or MFU above 1 (an
    impossible figure: its roof or model card is wrong): its change becomes ``"~"``, not significant, with a note
    that says why (``--fail-above`` does not gate on it either).
    """
    runs = [name for name, q in (("A", quality_a), ("B", quality_b)) if q.get("verdict") == "flagged"]
    points = {PointKey.of(p) for q in (quality_a, quality_b) for p in q.get("points") or []}
    bound = {PointKey.of(p) for q in (quality_a, quality_b) for p in q.get("points") or []
             if any(str(r).startswith("client-bound") for r in p.get("reasons") or [])}
    for c in changes:
        if c.verdict not in ("better", "worse"):
            continue
        impossible = c.metric in ("mbu", "mfu") and any(v is not None and v > 1 for v in (c.a, c.b))
        why = ("point client-bound (the client, not the server, was the limit)" if c.key in bound else
               f"run {' and '.join(runs)} flagged" if runs else "point flagged" if c.key in points else
               f"{c.label} above 1 is impossible (a wrong roof or model card)" if impossible else None)
        if why:
            c.note = ((c.note + "; ") if c.note else "") + f"no verdict: {why}"
            c.verdict, c.significant = "~", False
