"""How a repeat sends (pure): the closed loop's concurrency or an open-loop schedule's gaps between sends (Poisson,
constant, gamma with vLLM's burstiness, or a trace's own gaps, from one seed), as one value (:class:`Load`).  The one
draw the load generator (:mod:`pipeline.loadgen.scheduler`) and the simulated server (:mod:`pipeline.simulation.simloop`)
share, so a simulated point is sent as a measured one is."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

#: The open-loop schedules :func:`schedule_gaps` draws (a closed loop has none).
OPEN_LOADS = ("poisson", "constant", "gamma", "trace")


@dataclass(frozen=True)
class Load:
    """How one repeat sends its requests: ``kind`` ``closed`` keeps ``concurrency`` in flight; an open ``kind``
    (:data:`OPEN_LOADS`) sends on :func:`schedule_gaps` at ``rate_rps`` requests/s from ``seed`` (``burstiness`` for
    ``gamma``, ``trace``'s gaps for ``trace``), at most ``max_concurrency`` in flight (None: no cap)."""

    kind: str = "closed"
    concurrency: int | None = None
    rate_rps: float | None = None
    max_concurrency: int | None = None
    seed: int = 0
    burstiness: float | None = None
    #: a trace schedule's gaps (s), one round (:meth:`pipeline.config.tracefile.Trace.gaps_s`); an array, so it
    #: takes no part in equality
    trace: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, key: Any, seed: int = 0, burstiness: float | None = None, trace: Any = None) -> "Load":
        """The load of a point key (:class:`pipeline.core.records.PointKey`: its ``load``, concurrency, rate and
        cap), its schedule seeded by ``seed``."""
        return cls(kind=key.load, concurrency=key.concurrency, rate_rps=key.rate_rps,
                   max_concurrency=key.max_concurrency, seed=seed, burstiness=burstiness, trace=trace)

    @property
    def open_loop(self) -> bool:
        """True for an open-loop schedule (the sends follow :meth:`gaps`, never the responses)."""
        return self.kind != "closed"

    def gaps(self) -> Iterator[float]:
        """The schedule's endless gaps (s) between sends (:func:`schedule_gaps`)."""
        rate_rps = float(self.rate_rps) if self.rate_rps is not None else math.nan  # none: schedule_gaps names it
        return schedule_gaps(self.kind, rate_rps, self.seed, self.burstiness, self.trace)


def schedule_gaps(load: str, rate_rps: float, seed: int, burstiness: float | None = None,
                  trace: np.ndarray | None = None) -> Iterator[float]:
    """Endless gaps (s) between successive sends of an open-loop schedule at ``rate_rps`` requests/s.

    ``constant``: every gap is 1 / rate.  ``poisson``: independent exponential gaps of mean
    1 / rate from ``numpy.random.default_rng(seed)`` (a Poisson process; the same seed gives the
    same schedule), as vLLM's ``get_request`` draws them with burstiness 1.  ``gamma``: independent gamma gaps of
    shape k = ``burstiness`` and scale 1 / (rate · k), mean 1 / rate and coefficient of variation 1 / √k (vLLM's
    ``get_request``: ``np.random.gamma(shape=burstiness, scale=1 / (request_rate * burstiness))``).  ``trace``:
    the gaps ``trace`` gives (one round of a trace file's, scaled to the rate:
    :meth:`pipeline.config.tracefile.Trace.gaps_s`), round and round.

    Raises:
        ValueError: ``load`` is not ``poisson``/``constant``/``gamma``/``trace``, the rate is not finite and
            positive, a gamma schedule's burstiness is not, or a trace schedule has no gaps (a bug: config and keys
            check them).
    """
    if not (math.isfinite(rate_rps) and rate_rps > 0):
        raise ValueError(f"rate_rps must be finite and positive, got {rate_rps!r}")
    mean = 1.0 / rate_rps
    if load == "constant":
        while True:
            yield mean
    if load == "trace":
        if trace is None or not len(trace):
            raise ValueError("a trace schedule needs its gaps")
        while True:
            yield from (float(g) for g in trace)
    if load not in ("poisson", "gamma"):
        raise ValueError(f"no open-loop schedule {load!r}")
    if load == "gamma" and not (burstiness is not None and math.isfinite(burstiness) and burstiness > 0):
        raise ValueError(f"a gamma schedule needs a finite positive burstiness, got {burstiness!r}")
    rng = np.random.default_rng(seed)
    while True:
        if load == "gamma":
            yield from (float(g) for g in rng.gamma(burstiness, mean / burstiness, 256))
        else:
            yield from (float(g) for g in rng.exponential(mean, 256))
