"""The Pareto frontier of a tuning run: over every variant and concurrency of one model × shape, the points no
other point beats on both output throughput and per-user throughput, and the best point under the SLO (pure).

Axes (docs/definitions.md; higher is better on both):

- output throughput (tok/s): output tokens of all requests / the measured window (``output_throughput_tok_s``);
- per-user throughput (tok/s): 1 / the median streamed TPOT (``per_user_tok_s``): the decode rate one user sees.

A point P *dominates* Q when P is at least as good on both axes and better on one (Pareto dominance, as the
InferenceX frontier of throughput against interactivity draws it: https://inferencemax.semianalysis.com/).
The frontier is the set of points no other point dominates; two points equal on both axes dominate neither, so
both stay on it.  A point the analysis excludes from the knee (failed above ``max_failure_rate``, nothing
completed, client-bound, a widespread token-count caveat: :func:`pipeline.analysis.analyze.point_quality`), or
one measured on a busy machine (other processes above :data:`pipeline.machine.interference.OUTSIDE_SHARE_LIMIT` of
the CPUs, :func:`pipeline.analysis.quality.point_verdict`), or one without both figures, is left out of the
frontier, and its reason is kept beside it: it may well have "dominated", but it did not measure the server.

The best point under the SLO is the point of highest output throughput among those that met the run's SLO
(``PointSummary.slo["met"]``: each bounded latency's p99 within its bound and at most 1 % of requests failed,
:mod:`pipeline.metrics.goodput`), ties broken by per-user throughput; None with the reason when the run has no
SLO or no included point met it.  Only closed-loop points enter (an open-loop point has no concurrency).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from pipeline.analysis.analyze import point_quality
from pipeline.analysis.quality import point_verdict
from pipeline.config.sweepconfig import EXCLUSION_FAILURE_RATE
from pipeline.core.pointsummary import PointSummary
from pipeline.machine.interference import OUTSIDE_SHARE_LIMIT

#: A shape: (model, engine, input_len, output_len); the frontier is drawn over every variant of one shape.
Shape = tuple[str, str, int, int]


@dataclass(frozen=True)
class FrontierPoint:
    """One closed-loop point of a shape as the frontier sees it.

    Attributes:
        variant: the server setting it was measured under (``PointKey.variant``).
        concurrency: requests kept in flight.
        output_tok_s / per_user_tok_s: the two axes (tok/s); None when not measured.
        excluded_reason: why it is left out of the frontier; None when it is in the running.
        on_frontier: no included point dominates it.
        slo_met: the point met the run's SLO (None: the run has no SLO for it).
    """

    variant: str
    concurrency: int
    output_tok_s: float | None
    per_user_tok_s: float | None
    excluded_reason: str | None
    on_frontier: bool
    slo_met: bool | None

    def label(self) -> str:
        """``fp8-kv at c = 64``: how a reader names the point."""
        return f"{self.variant} at c = {self.concurrency}"


def dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether ``a`` Pareto-dominates ``b`` (both axes higher-is-better): a ≥ b on both and a > b on one."""
    return a[0] >= b[0] and a[1] >= b[1] and (a[0] > b[0] or a[1] > b[1])


def non_dominated(values: list[tuple[float, float]]) -> list[int]:
    """Indices of the values no other value dominates (:func:`dominates`), in the order given; equal values all stay.

    Sorted sweep (Kung, Luccio & Preparata 1975, "On finding the maxima of a set of vectors", J. ACM 22:469):
    by the first axis descending, then the second descending, a value is kept when its second axis is at least
    the best second axis seen among values strictly ahead of it on the first axis, and not below any value of
    its own first-axis group.
    """
    order = sorted(range(len(values)), key=lambda i: (-values[i][0], -values[i][1]))
    keep: list[int] = []
    best_ahead = -math.inf  # the best second axis among values with a strictly higher first axis
    i = 0
    while i < len(order):
        x = values[order[i]][0]
        group = [j for j in order[i:] if values[j][0] == x]
        top = values[group[0]][1]  # the group is sorted by its second axis, highest first
        keep.extend(j for j in group if values[j][1] == top and top > best_ahead)
        best_ahead = max(best_ahead, top)
        i += len(group)
    return sorted(keep)


def exclusion(s: PointSummary, max_failure_rate: float = EXCLUSION_FAILURE_RATE) -> str | None:
    """Why a point stays out of the frontier (module docstring), or None when it is in the running."""
    reason = point_quality(s, max_failure_rate)["excluded_reason"]
    if reason:
        return reason
    verdict = point_verdict(s.as_dict())
    if verdict["outside_share"] is not None and verdict["outside_share"] > OUTSIDE_SHARE_LIMIT:
        return next(r for r in verdict["reasons"] if r.startswith("machine busy"))
    for name, v in (("output throughput", s.output_throughput_tok_s), ("per-user throughput", s.per_user_tok_s)):
        if v is None or not math.isfinite(v) or v <= 0:
            return f"no {name} measured"
    return None


def frontier_points(summaries: list[PointSummary], max_failure_rate: float = EXCLUSION_FAILURE_RATE) -> list[FrontierPoint]:
    """Every closed-loop point of the summaries (one shape's, any variants) with its place on the frontier,
    in (variant order of appearance, concurrency) order."""
    closed = [s for s in summaries if s.load == "closed" and s.concurrency is not None]
    reasons = [exclusion(s, max_failure_rate) for s in closed]
    inside = [i for i, r in enumerate(reasons) if r is None]
    values = [(float(closed[i].per_user_tok_s), float(closed[i].output_throughput_tok_s)) for i in inside]  # type: ignore[arg-type]
    front = {inside[j] for j in non_dominated(values)}
    order = {v: n for n, v in enumerate(dict.fromkeys(s.variant for s in closed))}
    out = [FrontierPoint(s.variant, int(s.concurrency), s.output_throughput_tok_s, s.per_user_tok_s,  # type: ignore[arg-type]
                         reasons[i], i in front, (s.slo or {}).get("met") if s.slo else None)
           for i, s in enumerate(closed)]
    return sorted(out, key=lambda p: (order[p.variant], p.concurrency))


def best_under_slo(points: list[FrontierPoint]) -> tuple[FrontierPoint | None, str]:
    """The included point of highest output throughput that met the SLO (ties: higher per-user throughput), and a
    sentence naming it, or None and why there is none."""
    if all(p.slo_met is None for p in points):
        return None, "the run has no SLO, so no point is named best under one"
    met = [p for p in points if p.excluded_reason is None and p.slo_met]
    if not met:
        return None, "no included point met the SLO"
    best = max(met, key=lambda p: (p.output_tok_s, p.per_user_tok_s))
    return best, (f"best under the SLO: {best.label()}, {best.output_tok_s:,.1f} tok/s output, "
                  f"{best.per_user_tok_s:,.1f} tok/s per user")


def shape_of(s: PointSummary) -> Shape:
    """(model, engine, input_len, output_len) of a summary: what one frontier is drawn over."""
    return (s.model, s.engine, s.input_len, s.output_len)


def frontiers(summaries: list[PointSummary], max_failure_rate: float = EXCLUSION_FAILURE_RATE) -> list[dict[str, Any]]:
    """One frontier per shape of a run (sorted by shape), as plain JSON.

    Returns:
        ``[{"model", "engine", "input_len", "output_len", "variants": [names, first = baseline],
        "points": [FrontierPoint as a dict], "frontier": [the points on it, by per-user throughput],
        "excluded": [{"variant", "concurrency", "reason"}], "best_under_slo": point dict or None,
        "best_words": str}]``.
    """
    by_shape: dict[Shape, list[PointSummary]] = {}
    for s in summaries:
        if s.load == "closed":
            by_shape.setdefault(shape_of(s), []).append(s)
    out = []
    for shape, group in sorted(by_shape.items()):
        pts = frontier_points(group, max_failure_rate)
        best, words = best_under_slo(pts)
        front = sorted((p for p in pts if p.on_frontier), key=lambda p: (p.per_user_tok_s, -(p.output_tok_s or 0)))
        out.append({"model": shape[0], "engine": shape[1], "input_len": shape[2], "output_len": shape[3],
                    "variants": list(dict.fromkeys(p.variant for p in pts)),
                    "points": [asdict(p) for p in pts], "frontier": [asdict(p) for p in front],
                    "excluded": [{"variant": p.variant, "concurrency": p.concurrency, "reason": p.excluded_reason}
                                 for p in pts if p.excluded_reason],
                    "best_under_slo": asdict(best) if best else None, "best_words": words})
    return out
