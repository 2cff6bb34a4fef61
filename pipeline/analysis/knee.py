"""The knee of a throughput curve, its uncertainty over repeats, what the curve does past it, scaling efficiency (pure).

Definitions (docs/definitions.md, "knee" and "scaling efficiency"):
- knee: smallest grid concurrency from which every further doubling raises output throughput by
  less than the threshold (:data:`KNEE_THRESHOLD` by default, the config key ``knee_threshold``);
  ``None`` ("not reached") when the last doubling measured still gains at least the threshold.
  Past the knee the curve "declines" when its last point is more than :data:`DECLINE_FRACTION`
  below its peak, else it "plateaus";
- knee uncertainty: the knee above is of the medians over repeats; ``knee_per_repeat``
  is the knee (same definition, same threshold) of each repeat's own curve (repeat i of every
  point of the workload), and ``knee_settled`` is True when every repeat gives the reported knee,
  False when any differs, None when there are fewer than two repeats (nothing to compare);
- scaling efficiency at c = T(c) / (c × T(1)).
A curve here is ``[(concurrency, output throughput tok/s), ...]`` of one workload's closed-loop points,
excluded points already left out (:func:`pipeline.analysis.analyze.point_quality`).
"""

from __future__ import annotations

import math
from typing import Any

from pipeline.config.sweepconfig import KNEE_THRESHOLD  # noqa: F401  (the default, defined once with the config key)
from pipeline.core.records import workload_of

DECLINE_FRACTION = 0.10


def doubling_gains(points: list[tuple[int, float]]) -> list[float]:
    """Per-doubling throughput gain between successive grid points: (T2/T1)^(1/log2(c2/c1)) − 1."""
    gains = []
    for (c1, t1), (c2, t2) in zip(points, points[1:]):
        gains.append((t2 / t1) ** (1 / math.log2(c2 / c1)) - 1 if t1 > 0 else math.inf)
    return gains


def find_knee(points: list[tuple[int, float]], threshold: float = KNEE_THRESHOLD) -> int | None:
    """The knee concurrency of ``[(c, T(c)), ...]`` (sorted by c), or None when not reached.

    The smallest c_i such that every doubling from c_i onward gains < ``threshold``; at least
    one doubling after c_i must have been measured.  A lone weak step followed by strong
    gains (an MoE's 1 → 2) is therefore not a knee.
    """
    pts = sorted(points)
    gains = doubling_gains(pts)
    knee = None
    for i in range(len(gains) - 1, -1, -1):
        if gains[i] < threshold:
            knee = pts[i][0]
        else:
            break
    return knee


def knee_per_repeat(samples: list[tuple[int, list[float]]], threshold: float = KNEE_THRESHOLD) -> list[int | None]:
    """The knee of each repeat: :func:`find_knee` of ``[(c, samples_c[i]) for each c]`` for repeat i.

    ``samples`` is ``[(c, [T of repeat 0, T of repeat 1, ...]), ...]`` over the workload's knee curve
    (excluded points already left out).  Only repeats measured at every point are compared (the
    shortest list bounds them); fewer than two points or two repeats give ``[]``.
    """
    if len(samples) < 2:
        return []
    n = min(len(v) for _, v in samples)
    if n < 2:
        return []
    return [find_knee([(c, v[i]) for c, v in samples], threshold) for i in range(n)]


def knee_uncertainty(samples: list[tuple[int, list[float]]], knee: int | None,
                     threshold: float = KNEE_THRESHOLD) -> dict[str, Any]:
    """``{"knee_per_repeat": [...], "knee_settled": bool | None}`` (see the module docstring)."""
    per = knee_per_repeat(samples, threshold)
    return {"knee_per_repeat": per, "knee_settled": all(k == knee for k in per) if per else None}


def knee_uncertainty_of(model: dict[str, Any], summaries: list[dict[str, Any]],
                        analysis_points: list[dict[str, Any]]) -> dict[str, Any]:
    """The knee uncertainty of one analysed workload, from its point summaries (dicts) where an older
    ``analysis.json`` lacks ``knee_per_repeat``; the stored fields when present."""
    if "knee_per_repeat" in model:
        return {"knee_per_repeat": model["knee_per_repeat"], "knee_settled": model.get("knee_settled")}
    key = workload_of(model)
    excluded = {a["concurrency"] for a in analysis_points if a.get("excluded") and a.get("load", "closed") == "closed"
                and workload_of(a) == key}
    excluded |= set(model.get("excluded_concurrency") or [])
    samples = sorted((s["concurrency"], list((s.get("samples") or {}).get("output_throughput_tok_s") or []))
                     for s in summaries if workload_of(s) == key
                     and s.get("load", "closed") == "closed"
                     and s.get("output_throughput_tok_s") and s["concurrency"] not in excluded)
    return knee_uncertainty(samples, model.get("knee_concurrency"), model.get("knee_threshold") or KNEE_THRESHOLD)


def post_knee(points: list[tuple[int, float]], knee: int | None) -> str:
    """``"decline"`` (last point > 10 % below peak), ``"plateau"``, or ``"not_reached"`` (no knee)."""
    if knee is None:
        return "not_reached"
    peak = max(t for _, t in points)
    last = sorted(points)[-1][1]
    return "decline" if last < (1 - DECLINE_FRACTION) * peak else "plateau"


def kneedle(points: list[tuple[int, float]]) -> int | None:
    """Second opinion: Kneedle (``kneed.KneeLocator``) on (log2 c, T), concave increasing; None if none."""
    if len(points) < 3:
        return None
    from kneed import KneeLocator

    pts = sorted(points)
    xs = [math.log2(c) for c, _ in pts]
    ys = [t for _, t in pts]
    if max(ys) == min(ys):
        return None  # flat: no bend, and Kneedle's normalisation would divide 0 by 0
    try:
        loc = KneeLocator(xs, ys, curve="concave", direction="increasing", online=False)
    except (ValueError, ZeroDivisionError):
        return None
    if loc.knee is None or loc.knee in (xs[0], xs[-1]):
        return None  # an end point is no knee: the curve never bends inside the grid
    return int(round(2 ** loc.knee))


def scaling_efficiency(points: list[tuple[int, float]]) -> dict[int, float]:
    """``{c: T(c) / (c × T(1))}``; relative to the smallest c (c / c0 in the denominator) when 1 is absent."""
    pts = sorted(points)
    if not pts or pts[0][1] <= 0:
        return {}
    c0, t0 = pts[0]
    return {c: t / ((c / c0) * t0) for c, t in pts}
