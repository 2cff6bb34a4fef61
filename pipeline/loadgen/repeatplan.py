"""One served repeat as values: what it sends (:class:`RepeatPlan`: the bodies, the target, the warm-up, the clock, the
load, the limits), what it is told from outside (:class:`Hooks`), what its loop counts as it runs (:class:`LoopState`)
and what it returns (:class:`LoopResult`).

The loops of :mod:`pipeline.loadgen.scheduler` read one plan instead of a dozen arguments, as GuideLLM's scheduling
strategies (``scheduler/strategies.py``) are objects with typed fields; the plan is frozen and picklable, so
:mod:`pipeline.loadgen.clientprocs` hands each client process its share of it as it is.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from pipeline.config.arrivals import Load
from pipeline.config.tracefile import trace_gaps
from pipeline.loadgen.client import Target
from pipeline.loadgen.clientmeter import ClientMeter
from pipeline.loadgen.streamrecord import RawStream


@dataclass(frozen=True)
class Limits:
    """When a repeat is cut short: after ``max_consecutive_failures`` failed requests in a row (0 = never), or once
    ``deadline_s`` seconds have passed (None = never), the abort's reason then ``deadline_reason`` (None: "deadline of
    … s passed")."""

    max_consecutive_failures: int = 0
    deadline_s: float | None = None
    deadline_reason: str | None = None


@dataclass(frozen=True)
class RepeatPlan:
    """What one served repeat sends: ``bodies`` (request bodies, ``bodies[:n_warmup]`` warm-up, the rest measured) to
    ``target``, times in s since ``t0`` (``time.perf_counter``), on ``load`` (closed loop at its concurrency, or an
    open-loop schedule: :class:`pipeline.config.arrivals.Load`), cut short by ``limits``."""

    target: Target
    bodies: Sequence[bytes]
    n_warmup: int
    t0: float
    load: Load
    limits: Limits = Limits()

    @property
    def n_total(self) -> int:
        """Bodies of the repeat (warm-up and measured); cool-down requests re-use them past this index."""
        return len(self.bodies)

    @property
    def n_measured(self) -> int:
        """Measured requests of the repeat."""
        return len(self.bodies) - self.n_warmup

    def share(self, ids: Sequence[int], slots: int) -> "RepeatPlan":
        """The plan of one of several client processes: the bodies at ``ids`` (warm-up first, as
        :func:`pipeline.loadgen.clientprocs.assign` deals them), closed loop at ``slots`` in flight."""
        return dataclasses.replace(self, bodies=[self.bodies[i] for i in ids],
                                   n_warmup=sum(1 for i in ids if i < self.n_warmup),
                                   load=dataclasses.replace(self.load, concurrency=slots))


@dataclass(frozen=True)
class Hooks:
    """What a running repeat hears from outside: ``should_abort`` (polled before each send; a reason stops the sends),
    ``meter`` (told of every send and every end: :class:`pipeline.loadgen.clientmeter.ClientMeter`), and for one of
    several client processes ``own_done`` (set when its measured requests are done) and ``finished`` (set from outside
    when every process's are: it cools down until then)."""

    should_abort: Callable[[], str | None] | None = None
    meter: ClientMeter | None = None
    finished: asyncio.Event | None = None
    own_done: asyncio.Event | None = None


@dataclass
class LoopState:
    """What a loop counts while it runs: measured requests done, cool-down requests sent, the abort's reason (None:
    none), failures in a row, and (closed loop) the next body to send."""

    measured_done: int = 0
    cooldown: int = 0
    aborted: str | None = None
    fails_in_row: int = 0
    next_index: int = 0


@dataclass
class LoopResult:
    """Raw streams of one repeat plus what happened around them."""

    streams: list[RawStream]
    cooldown_sent: int
    aborted: str | None
    #: the cool-down requests' streams (warm-up like: left out of the metrics), kept so that what the server
    #: delivered inside the measured window can be counted (:func:`pipeline.loadgen.scheduler.delivered_tokens`)
    cooldown: list[RawStream] = field(default_factory=list)


def point_load(cfg: Any, key: Any, seed: int) -> Load:
    """The load of point ``key`` of sweep config ``cfg`` with its schedule seeded by ``seed``: its open loop's
    burstiness and, for a trace, the trace's gaps at the key's rate (:func:`pipeline.config.tracefile.trace_gaps`)."""
    return Load.of(key, seed, getattr(getattr(cfg, "open_loop", None), "burstiness", None),
                   trace_gaps(cfg, key.load, key.rate_rps))
