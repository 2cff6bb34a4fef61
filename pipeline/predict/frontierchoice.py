"""Adaptive sweeps over a tuning space: which unmeasured points could still be on the Pareto frontier (pure).

Over several variants (server settings) or shapes, an adaptive sweep first settles each curve's knee (one curve:
model × variant × shape, :func:`pipeline.predict.adaptive.walk`), then the frontier of each model × shape over its
variants: output throughput against per-user throughput (:mod:`pipeline.analysis.frontier`, higher is better on
both).  A point of a curve is either measured (its summary's two figures) or predicted (the curve's calibrated
prediction anchored to its measurements, :func:`pipeline.predict.adaptive.anchored`, on both axes: output
throughput, and per-user throughput = 1 / the predicted median TPOT).

A predicted point is known only within its *uncertainty* u (a fraction of each axis, :func:`uncertainty`):
2 × its spread over the per-repeat fits (two standard deviations of the fitted curve at that point), or the walk's
tolerance (the error its stopping rule accepts of a prediction) where there is no spread (a single repeat).  A measured point counts as exact (the
frontier of :mod:`pipeline.analysis.frontier` takes it so).  A predicted point is a *contender* (:func:`contenders`)
when no other point's pessimistic corner (both axes × (1 − u)) dominates its optimistic corner (× (1 + u)): within
the uncertainties it may be on the frontier.  Every predicted point on the frontier of the central values is a
contender (a pessimistic corner is below its centre, an optimistic one above), so once no contender is left, the
frontier over measured and predicted points holds measured points only, and no prediction can join it: its
membership is settled.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.analysis.frontier import dominates, non_dominated


@dataclass(frozen=True)
class Candidate:
    """One point of a model × shape as the frontier walk sees it.

    Attributes:
        variant: the server setting (``PointKey.variant``).
        concurrency: requests in flight.
        output_tok_s / per_user_tok_s: the two axes (tok/s): measured, or the anchored prediction.
        measured: a measurement (True) or a prediction.
        uncertainty: the relative uncertainty u of both axes (0 for a measurement).
    """

    variant: str
    concurrency: int
    output_tok_s: float
    per_user_tok_s: float
    measured: bool
    uncertainty: float = 0.0

    def corner(self, sign: int) -> tuple[float, float]:
        """(per-user, output) × (1 + sign × u): the optimistic corner (sign +1) or the pessimistic one (−1)."""
        f = 1.0 + sign * self.uncertainty
        return self.per_user_tok_s * f, self.output_tok_s * f

    def label(self) -> str:
        """``fp8-kv at c = 64``."""
        return f"{self.variant} at c = {self.concurrency}"


def uncertainty(spread: float | None, tolerance: float) -> float:
    """A prediction's relative uncertainty: 2 × ``spread`` (relative sd over the per-repeat fits), or ``tolerance``
    (the adaptive walk's) where no spread is known (one repeat) — module docstring."""
    return 2.0 * spread if spread is not None else tolerance


def contenders(points: list[Candidate]) -> list[int]:
    """Indices of the predicted points that may be on the frontier within the uncertainties (module docstring), in
    the order given."""
    out = []
    for i, p in enumerate(points):
        if p.measured:
            continue
        best = p.corner(+1)
        if not any(dominates(q.corner(-1), best) for j, q in enumerate(points) if j != i):
            out.append(i)
    return out


def frontier(points: list[Candidate]) -> list[int]:
    """Indices of the points on the frontier of the central values (measured and predicted alike,
    :func:`pipeline.analysis.frontier.non_dominated` on (per-user, output)), in the order given."""
    return non_dominated([(p.per_user_tok_s, p.output_tok_s) for p in points])
