"""When the served backends send: the closed loop (N in flight), the open loop (a Poisson, constant, gamma or trace
schedule), the measured window.

Sends through :mod:`pipeline.loadgen.client` and decides only when: which request goes out
next, when a repeat is aborted, which span of time is measured — as GuideLLM keeps its
scheduling strategies (``scheduler/strategies.py``: synchronous, concurrent, throughput,
constant, Poisson) apart from its backends.

Each load kind is one strategy object over one :class:`~pipeline.loadgen.repeatplan.RepeatPlan` (the bodies, the
target, the warm-up, the load, the limits), its counts in a typed :class:`~pipeline.loadgen.repeatplan.LoopState`;
:func:`run_repeat` runs the plan's (:func:`strategy_for`):

- ``closed`` (:class:`ClosedLoop`): exactly N requests in flight; the next goes out when one
  finishes, so the load adapts to the server.
- ``poisson`` / ``constant`` / ``gamma`` / ``trace`` (:class:`OpenLoop`, one class parameterised by its arrival
  schedule, :class:`pipeline.config.arrivals.Load`): send times follow a schedule fixed before the
  repeat (:func:`schedule_gaps`, seeded), never the responses: exponential gaps of mean
  1 / rate (Poisson arrivals, as ``vllm bench serve --request-rate R`` with burstiness 1),
  equal gaps of 1 / rate, gamma gaps of mean 1 / rate (``--burstiness k``), or a trace file's gaps scaled to the
  rate (``trace``: :mod:`pipeline.config.tracefile`).  An optional cap bounds the requests in flight; a request due while
  the cap is full waits in the client's queue (its ``queued_s`` stays the scheduled time, so
  "TTFT including client queueing" counts that wait).  Each request records its scheduled
  time (``scheduled_s``) and the client's own lag behind it (``lag_s``: send time − the time
  it could have gone out, the later of its scheduled time and a free slot); a client that
  falls behind its schedule under-loads the server and hides the waiting it should have
  measured (coordinated omission), which :func:`pipeline.metrics.definitions.schedule_kept` reports.

Shape of one repeat (docs/definitions.md, "output throughput", served backends):

The measured window is first measured send → last measured completion.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, Sequence

from pipeline.config.arrivals import Load, schedule_gaps  # noqa: F401  (re-exported: the open loop's schedule)
from pipeline.loadgen.client import Target, fold, stream_one
from pipeline.loadgen.clientmeter import ClientMeter
from pipeline.loadgen.eventloop import sleep_until
from pipeline.loadgen.repeatplan import Hooks, Limits, LoopResult, LoopState, RepeatPlan  # noqa: F401  (re-exported)
from pipeline.loadgen.streamrecord import RawStream
from pipeline.core.records import RequestRecord
from pipeline.loadgen.loopsizes import (OPEN_LOOP_E2EL_WINDOWS, OPEN_LOOP_MAX_SECONDS, OPEN_LOOP_SECONDS,  # noqa: F401
                                        default_open_requests, default_requests, open_loop_counts)  # (re-exported)


class _Strategy:
    """What both loops share: the plan, the hooks, the typed state, the streams sent (measured and warm-up apart from
    cool-down), the metered send, the stop event, an abort (its first reason kept), a finished request counted
    (:meth:`settle`) and the repeat closed (:meth:`result`)."""

    def __init__(self, session: Any, plan: RepeatPlan, hooks: Hooks | None = None):
        self.plan, self.hooks = plan, hooks or Hooks()
        self.state = LoopState()
        self.streams: list[RawStream] = []
        self.cooled: list[RawStream] = []
        self.send = _metered(self.hooks.meter, session, plan.target, plan.target.headers(), plan.t0)
        self.stop = asyncio.Event()

    def abort(self, reason: str) -> None:
        """Stop the sends, keeping the first reason."""
        if self.state.aborted is None:
            self.state.aborted = reason
        self.stop.set()

    def settle(self, raw: RawStream, all_measured: asyncio.Event) -> None:
        """Count a finished request: failures in a row (abort after the plan's ``max_consecutive_failures``, 0 =
        never) and measured requests done (``all_measured`` set after the last)."""
        state, most = self.state, self.plan.limits.max_consecutive_failures
        if raw.error is None:
            state.fails_in_row = 0
        else:
            state.fails_in_row += 1
            if most and state.fails_in_row >= most:
                self.abort(f"{state.fails_in_row} requests failed in a row (last: {raw.error[:120]})")
        if not raw.warmup:
            state.measured_done += 1
            if state.measured_done >= self.plan.n_measured:
                all_measured.set()

    def result(self) -> LoopResult:
        """Close the repeat: every stream parsed now (:func:`_folded`), requests cut off by an abort failed, unsent
        measured ones recorded as not sent."""
        plan, state, streams = self.plan, self.state, _folded(self.streams, self.plan.target)
        cooled = _folded(self.cooled, plan.target)
        if self.stop.is_set():
            for raw in streams:
                if raw.error is None and not raw.done_seen:
                    raw.error = f"cancelled: {state.aborted}"
        if state.aborted is not None:
            sent = {s.request_id for s in streams}
            perf, t0 = time.perf_counter, plan.t0
            for i in range(plan.n_warmup, plan.n_total):
                if i not in sent:
                    streams.append(RawStream(request_id=i, warmup=False, queued_s=perf() - t0, sent_s=perf() - t0,
                                             error=f"not sent: {state.aborted}"))
        streams.sort(key=lambda s: s.request_id)
        return LoopResult(streams=streams, cooldown_sent=state.cooldown, aborted=state.aborted, cooldown=list(cooled))

    async def run(self) -> LoopResult:
        raise NotImplementedError


class ClosedLoop(_Strategy):
    """Keep exactly the plan's concurrency of requests in flight over its bodies (times in s since its ``t0``).

    ``bodies[:n_warmup]`` are warm-up, the rest measured; after the last body is sent, free slots send cool-down
    requests (re-using bodies from the start) until every measured request has completed, then those are cancelled
    and dropped.  The hooks' ``should_abort`` is polled before each send; a non-None answer (a reason) stops further
    sends.

    A stalled or failing server does not cost ``timeout_s`` per request: after the limits'
    ``max_consecutive_failures`` failed requests in a row (0 = never), or once ``deadline_s`` seconds have passed
    (None = never), the repeat is aborted: nothing more is sent, requests in flight are cancelled and recorded as
    failed with the reason, unsent ones as not sent.  The hooks' ``meter`` is told of every send and every end.  One of
    several client processes (:mod:`pipeline.loadgen.clientprocs`) sets ``own_done`` when its measured requests are
    done and keeps cooling down until ``finished`` (every process's are) is set from outside.
    """

    def __init__(self, session: Any, plan: RepeatPlan, hooks: Hooks | None = None):
        super().__init__(session, plan, hooks)
        self.all_measured = self.hooks.finished if self.hooks.finished is not None else asyncio.Event()
        self.own = self.hooks.own_done if self.hooks.own_done is not None else self.all_measured  # this loop's done
        if plan.n_measured <= 0:
            self.own.set()

    async def slot(self) -> None:
        """One slot: send the next body (or a cool-down request) each time the last one ended."""
        plan, state, should_abort = self.plan, self.state, self.hooks.should_abort
        bodies, n_total, n_warmup, t0, send = plan.bodies, plan.n_total, plan.n_warmup, plan.t0, self.send
        perf = time.perf_counter
        while not self.all_measured.is_set():
            if should_abort is not None and state.aborted is None:
                state.aborted = should_abort()
            if state.aborted is not None:
                return
            i = state.next_index
            state.next_index += 1
            now = perf() - t0
            if i < n_total:
                raw = RawStream(request_id=i, warmup=i < n_warmup, queued_s=now, sent_s=perf() - t0)
                self.streams.append(raw)
                await send(bodies[i], raw)
                self.settle(raw, self.own)
            else:
                state.cooldown += 1
                cool = RawStream(request_id=i, warmup=True, queued_s=now, sent_s=now)
                self.cooled.append(cool)
                await send(bodies[(i - n_total) % n_total], cool)

    async def run(self) -> LoopResult:
        """Run the repeat's slots until every measured request is done or the loop stops; its result."""
        slots = [asyncio.create_task(self.slot()) for _ in range(int(self.plan.load.concurrency or 0))]
        await _run_slots(slots, self.all_measured, self.stop, self.abort, self.plan.limits)
        return self.result()


class OpenLoop(_Strategy):
    """Send the plan's bodies on its load's schedule (Poisson, constant, gamma or trace: :meth:`Load.gaps`) at its
    rate, at most its ``max_concurrency`` in flight (times in s since its ``t0``).

    The first request goes out at once, each next one a gap after the previous one's scheduled time, whatever the
    responses do; a late dispatcher catches up at once (so the mean rate holds) and the lateness is recorded per
    request (``lag_s``).  ``bodies[:n_warmup]`` are warm-up (part of the arrival process, left out of the metrics);
    after the last body the schedule goes on with cool-down requests (re-using bodies from the start) until every
    measured request has finished, so the last measured ones meet the same load as the first; those are then
    cancelled and dropped.  Aborts and the meter work as in :class:`ClosedLoop`.
    """

    def __init__(self, session: Any, plan: RepeatPlan, hooks: Hooks | None = None):
        super().__init__(session, plan, hooks)
        self.all_measured = asyncio.Event()
        if plan.n_measured <= 0:
            self.all_measured.set()
        cap = plan.load.max_concurrency
        self.slots = asyncio.Semaphore(cap) if cap else None
        self.tasks: set[asyncio.Task] = set()
        self.bugs: list[BaseException] = []

    async def one(self, i: int, scheduled_s: float) -> None:
        """Request ``i``, due at ``scheduled_s``: sent once a slot is free (its lag recorded), then read."""
        plan, slots, perf, t0 = self.plan, self.slots, time.perf_counter, self.plan.t0
        ready_s = scheduled_s
        if slots is not None:
            waited = slots.locked()
            await slots.acquire()  # outside the try: a task cancelled while waiting holds no slot
            if waited:
                ready_s = perf() - t0
        try:
            sent = perf() - t0
            if i < plan.n_total:
                raw = RawStream(request_id=i, warmup=i < plan.n_warmup, queued_s=scheduled_s, sent_s=sent,
                                scheduled_s=scheduled_s, lag_s=max(sent - ready_s, 0.0))
                self.streams.append(raw)
                await self.send(plan.bodies[i], raw)
                self.settle(raw, self.all_measured)
            else:
                self.state.cooldown += 1
                cool = RawStream(request_id=i, warmup=True, queued_s=scheduled_s, sent_s=sent)
                self.cooled.append(cool)
                await self.send(plan.bodies[(i - plan.n_total) % plan.n_total], cool)
        finally:
            if slots is not None:
                slots.release()

    async def dispatch(self) -> None:
        """Start each request at its scheduled time until every measured one finished or the loop stops."""
        perf, t0, should_abort, state = time.perf_counter, self.plan.t0, self.hooks.should_abort, self.state
        settle = _settler(self.tasks, self.bugs, self.stop)
        start = perf() - t0
        due = start
        for i, gap in enumerate(self.plan.load.gaps()):
            # always await: a dispatcher behind its schedule must still let the requests it made run
            await sleep_until(due, lambda: perf() - t0)  # never before its time (uvloop's timers may fire early)
            if should_abort is not None and state.aborted is None and (reason := should_abort()):
                self.abort(reason)
            if self.stop.is_set() or self.all_measured.is_set():
                return
            task = asyncio.create_task(self.one(i, due))
            self.tasks.add(task)
            task.add_done_callback(settle)
            due += gap

    async def run(self) -> LoopResult:
        """Run the dispatcher until every measured request is done or the loop stops; its result."""
        await _drive(self.dispatch(), self, self.plan.limits)
        return self.result()


#: The strategy of each load kind (:data:`pipeline.config.arrivals.OPEN_LOADS` share the open loop).
STRATEGIES: dict[str, type[_Strategy]] = {"closed": ClosedLoop, "poisson": OpenLoop, "constant": OpenLoop,
                                          "gamma": OpenLoop, "trace": OpenLoop}


def strategy_for(session: Any, plan: RepeatPlan, hooks: Hooks | None = None) -> _Strategy:
    """The strategy object that runs ``plan`` (its load's kind, :data:`STRATEGIES`) through ``session``.

    Raises:
        ValueError: the load's kind has no strategy (a bug: config and keys check it).
    """
    if plan.load.kind not in STRATEGIES:
        raise ValueError(f"no load strategy {plan.load.kind!r}")
    return STRATEGIES[plan.load.kind](session, plan, hooks)


async def run_repeat(session: Any, plan: RepeatPlan, hooks: Hooks | None = None) -> LoopResult:
    """Run one repeat of ``plan`` through ``session`` (:func:`strategy_for`): its raw streams and what happened."""
    return await strategy_for(session, plan, hooks).run()


async def closed_loop(session: Any, target: Target, bodies: Sequence[bytes], concurrency: int, n_warmup: int,
                      t0: float, hooks: Hooks | None = None) -> LoopResult:
    """:class:`ClosedLoop` of ``bodies`` at ``concurrency`` in flight, no limits (the benchmark's and tests' short
    form of :func:`run_repeat`)."""
    plan = RepeatPlan(target=target, bodies=bodies, n_warmup=n_warmup, t0=t0, load=Load(concurrency=concurrency))
    return await run_repeat(session, plan, hooks)


def _watchdog(limits: Limits, abort: Callable[[str], None]) -> asyncio.Task | None:
    """A task that aborts the loop once ``limits.deadline_s`` seconds have passed; None without a deadline."""
    async def watchdog() -> None:
        await asyncio.sleep(limits.deadline_s)
        abort(limits.deadline_reason or f"deadline of {limits.deadline_s:g} s passed")
    return asyncio.create_task(watchdog()) if limits.deadline_s is not None else None


async def _run_slots(tasks: list[asyncio.Task], all_measured: asyncio.Event, stop: asyncio.Event,
                     abort: Callable[[str], None], limits: Limits) -> None:
    """Wait for the closed loop's slot ``tasks`` until every measured request is done or the loop stops (an abort,
    the limits' deadline passed), then cancel them; re-raise a bug raised inside a slot."""
    waiter = asyncio.create_task(all_measured.wait())
    stopper = asyncio.create_task(stop.wait())
    guard = _watchdog(limits, abort)
    pending = set(tasks)
    while pending and not all_measured.is_set() and not stop.is_set():
        _, pending = await asyncio.wait(pending | {waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        pending.discard(waiter)
        pending.discard(stopper)
    for t in tasks:
        if not t.done():
            t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for t in (waiter, stopper, guard):
        if t is not None:
            t.cancel()
    for t in tasks:  # a bug inside a slot must not pass silently
        if t.done() and not t.cancelled() and t.exception() is not None:
            raise t.exception()


def _folded(streams: list[RawStream], target: Target) -> list[RawStream]:
    """``streams``, each parsed now (:func:`pipeline.loadgen.client.fold`), after the repeat: parsing delayed no read
    and no send."""
    for raw in streams:
        fold(raw, target)
    return streams


def _settler(tasks: set[asyncio.Task], bugs: list[BaseException],
             stop: asyncio.Event) -> Callable[[asyncio.Task], None]:
    """The done-callback of a request task: forget it, and keep (and stop the loop on) a bug raised inside it."""
    def settle(task: asyncio.Task) -> None:
        tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            bugs.append(task.exception())  # a bug inside a request task must not pass silently
            stop.set()
    return settle


async def _drive(dispatch: Any, loop: OpenLoop, limits: Limits) -> None:
    """Run the dispatcher coroutine ``dispatch`` of open ``loop`` until every measured request has finished or the loop
    stops (an abort, the limits' deadline passed), then cancel the dispatcher and the requests still running;
    re-raise the first bug of a request task or of the dispatcher."""
    dispatcher = asyncio.create_task(dispatch)
    waiter = asyncio.create_task(loop.all_measured.wait())
    stopper = asyncio.create_task(loop.stop.wait())
    guard = _watchdog(limits, loop.abort)
    await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
    dispatcher.cancel()
    running = list(loop.tasks)
    for t in running:
        t.cancel()
    await asyncio.gather(dispatcher, *running, return_exceptions=True)
    for t in (waiter, stopper, guard):
        if t is not None:
            t.cancel()
    if dispatcher.done() and not dispatcher.cancelled() and dispatcher.exception() is not None:
        loop.bugs.append(dispatcher.exception())
    if loop.bugs:
        raise loop.bugs[0]


def _metered(meter: ClientMeter | None, session: Any, target: Target, headers: dict[str, str],
             t0: float) -> Callable[[bytes, RawStream], Any]:
    """``stream_one`` for one body, the meter told when it was sent and when its read ended (cancelled too); whole
    streams are left unparsed for the fold after the repeat (``defer``)."""
    if meter is None:
        return lambda body, raw: stream_one(session, target, body, raw, t0, headers, defer=True)

    async def send(body: bytes, raw: RawStream) -> None:
        meter.sent()
        try:
            await stream_one(session, target, body, raw, t0, headers, defer=True)
        finally:
            meter.done()
    return send


def delivered_tokens(chunks: list[list[float]], start: float, end: float) -> int:
    """Tokens of ``chunks`` (``[arrival_s, n_tokens]`` of any stream: warm-up, measured or cool-down) that arrived
    inside ``[start, end]`` (s): what the server delivered in the measured window, whichever request carried it."""
    return int(sum(k for t, k in chunks if start <= t <= end))


def measured_window(records: list[RequestRecord]) -> tuple[float, float]:
    """(first measured send, last measured completion) in s; (0, 0) when nothing was measured."""
    meas = [r for r in records if not r.warmup]
    done = [r.done_s for r in meas if r.ok]
    if not meas or not done:
        return 0.0, 0.0
    return min(r.sent_s for r in meas), max(done)

