"""When the served backends send: the closed loop (N in flight), the open loop (a Poisson, constant, gamma or trace
schedule), the measured window.

Sends through :mod:`pipeline.loadgen.client` and decides only when: which request goes out
next, when a repeat is aborted, which span of time is measured — as GuideLLM keeps its
scheduling strategies (``scheduler/strategies.py``: synchronous, concurrent, throughput,
constant, Poisson) apart from its backends.

- ``closed`` (:func:`closed_loop`): exactly N requests in flight; the next goes out when one
  finishes, so the load adapts to the server.
- ``poisson`` / ``constant`` / ``gamma`` (:func:`open_loop`): send times follow a schedule fixed before the
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
from dataclasses import dataclass, field
from typing import Any, Callable


from pipeline.config.arrivals import schedule_gaps  # noqa: F401  (re-exported: the open loop's schedule)
from pipeline.loadgen.client import Target, fold, stream_one
from pipeline.loadgen.clientmeter import ClientMeter
from pipeline.loadgen.eventloop import sleep_until
from pipeline.loadgen.streamrecord import RawStream
from pipeline.core.records import RequestRecord
from pipeline.loadgen.loopsizes import (OPEN_LOOP_E2EL_WINDOWS, OPEN_LOOP_MAX_SECONDS, OPEN_LOOP_SECONDS,  # noqa: F401
                                        default_open_requests, default_requests, open_loop_counts)  # (re-exported)


@dataclass
class LoopResult:
    """Raw streams of one closed-loop repeat plus what happened around them."""

    streams: list[RawStream]
    cooldown_sent: int
    aborted: str | None
    #: the cool-down requests' streams (warm-up like: left out of the metrics), kept so that what the server
    #: delivered inside the measured window can be counted (:func:`delivered_tokens`)
    cooldown: list[RawStream] = field(default_factory=list)


async def closed_loop(session: Any, target: Target, bodies: list[bytes], concurrency: int, n_warmup: int,
                      t0: float, should_abort: Callable[[], str | None] | None = None,
                      max_consecutive_failures: int = 0, deadline_s: float | None = None,
                      deadline_reason: str | None = None, meter: ClientMeter | None = None,
                      finished: asyncio.Event | None = None, own_done: asyncio.Event | None = None) -> LoopResult:
    """Keep exactly ``concurrency`` requests in flight over ``bodies`` (times in s since ``t0``).

    ``bodies[:n_warmup]`` are warm-up, the rest measured; after the last body is sent, free
    slots send cool-down requests (re-using bodies from the start) until every measured
    request has completed, then those are cancelled and dropped.  ``should_abort`` is polled
    before each send; a non-None answer (a reason) stops further sends.

    A stalled or failing server does not cost ``timeout_s`` per request: after
    ``max_consecutive_failures`` failed requests in a row (0 = never), or once ``deadline_s``
    seconds have passed (None = never), the repeat is aborted: nothing more is sent, requests
    in flight are cancelled and recorded as failed with the reason, unsent ones as not sent.
    ``meter`` (:class:`~pipeline.loadgen.clientmeter.ClientMeter`) is told of every send and every end.  One of
    several client processes (:mod:`pipeline.loadgen.clientprocs`) sets ``own_done`` when its measured requests are
    done and keeps cooling down until ``finished`` (every process's are) is set from outside.
    """
    headers = target.headers()
    n_total = len(bodies)
    n_measured = n_total - n_warmup
    streams: list[RawStream] = []
    cooled: list[RawStream] = []
    send = _metered(meter, session, target, headers, t0)
    state: dict[str, Any] = {"next": 0, "measured_done": 0, "cooldown": 0, "aborted": None, "fails_in_row": 0}
    all_measured = finished if finished is not None else asyncio.Event()
    own, stop = own_done if own_done is not None else all_measured, asyncio.Event()  # own: this loop's are done
    if n_measured <= 0:
        own.set()
    perf = time.perf_counter

    def abort(reason: str) -> None:
        if state["aborted"] is None:
            state["aborted"] = reason
        stop.set()

    async def slot() -> None:
        while not all_measured.is_set():
            if should_abort is not None and state["aborted"] is None:
                state["aborted"] = should_abort()
            if state["aborted"] is not None:
                return
            i = state["next"]
            state["next"] += 1
            now = perf() - t0
            if i < n_total:
                raw = RawStream(request_id=i, warmup=i < n_warmup, queued_s=now, sent_s=perf() - t0)
                streams.append(raw)
                await send(bodies[i], raw)
                _settle(raw, state, n_measured, own, abort, max_consecutive_failures)
            else:
                state["cooldown"] += 1
                cool = RawStream(request_id=i, warmup=True, queued_s=now, sent_s=now)
                cooled.append(cool)
                await send(bodies[(i - n_total) % n_total], cool)

    await _run_slots([asyncio.create_task(slot()) for _ in range(concurrency)], all_measured, stop, abort,
                     deadline_s, deadline_reason)
    return _finish(_folded(streams, target), state, stop.is_set(), n_warmup, n_total, perf, t0, _folded(cooled, target))


async def _run_slots(tasks: list[asyncio.Task], all_measured: asyncio.Event, stop: asyncio.Event,
                     abort: Callable[[str], None], deadline_s: float | None, deadline_reason: str | None) -> None:
    """Wait for the closed loop's slot ``tasks`` until every measured request is done or the loop stops (an abort,
    ``deadline_s`` seconds passed), then cancel them; re-raise a bug raised inside a slot."""
    async def watchdog() -> None:
        await asyncio.sleep(deadline_s)
        abort(deadline_reason or f"deadline of {deadline_s:g} s passed")

    waiter = asyncio.create_task(all_measured.wait())
    stopper = asyncio.create_task(stop.wait())
    guard = asyncio.create_task(watchdog()) if deadline_s is not None else None
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


async def open_loop(session: Any, target: Target, bodies: list[bytes], load: str, rate_rps: float,
                    max_concurrency: int | None, n_warmup: int, t0: float, seed: int,
                    should_abort: Callable[[], str | None] | None = None, max_consecutive_failures: int = 0,
                    deadline_s: float | None = None, deadline_reason: str | None = None,
                    meter: ClientMeter | None = None, burstiness: float | None = None, trace: Any = None) -> LoopResult:
    """Send ``bodies`` on a ``load`` schedule at ``rate_rps`` (times in s since ``t0``), at most ``max_concurrency`` in flight.

    The first request goes out at once, each next one a gap (:func:`schedule_gaps`, ``burstiness`` for ``gamma``,
    ``trace``'s gaps for ``trace``) after the previous one's scheduled time, whatever the responses do; a late
    dispatcher catches up at once (so the mean rate holds) and the lateness is recorded per request (``lag_s``).
    ``bodies[:n_warmup]`` are warm-up (part of the arrival process, left out of the metrics); after the last body
    the schedule goes on with cool-down requests (re-using bodies from the start) until every measured request has
    finished, so the last measured ones meet the same load as the first; those are then cancelled and dropped.  Aborts (``should_abort``,
    ``max_consecutive_failures``, ``deadline_s``) and ``meter`` work as in :func:`closed_loop`.
    """
    headers = target.headers()
    n_total = len(bodies)
    n_measured = n_total - n_warmup
    streams: list[RawStream] = []
    cooled: list[RawStream] = []
    send = _metered(meter, session, target, headers, t0)
    state: dict[str, Any] = {"measured_done": 0, "cooldown": 0, "aborted": None, "fails_in_row": 0}
    all_measured = asyncio.Event()
    stop = asyncio.Event()
    if n_measured <= 0:
        all_measured.set()
    perf = time.perf_counter
    slots = asyncio.Semaphore(max_concurrency) if max_concurrency else None
    tasks: set[asyncio.Task] = set()

    def abort(reason: str) -> None:
        if state["aborted"] is None:
            state["aborted"] = reason
        stop.set()

    async def one(i: int, scheduled_s: float) -> None:
        ready_s = scheduled_s
        if slots is not None:
            waited = slots.locked()
            await slots.acquire()  # outside the try: a task cancelled while waiting holds no slot
            if waited:
                ready_s = perf() - t0
        try:
            sent = perf() - t0
            if i < n_total:
                raw = RawStream(request_id=i, warmup=i < n_warmup, queued_s=scheduled_s, sent_s=sent,
                                scheduled_s=scheduled_s, lag_s=max(sent - ready_s, 0.0))
                streams.append(raw)
                await send(bodies[i], raw)
                _settle(raw, state, n_measured, all_measured, abort, max_consecutive_failures)
            else:
                state["cooldown"] += 1
                cool = RawStream(request_id=i, warmup=True, queued_s=scheduled_s, sent_s=sent)
                cooled.append(cool)
                await send(bodies[(i - n_total) % n_total], cool)
        finally:
            if slots is not None:
                slots.release()

    bugs: list[BaseException] = []
    settle = _settler(tasks, bugs, stop)

    async def dispatch() -> None:
        start = perf() - t0
        due = start
        for i, gap in enumerate(schedule_gaps(load, rate_rps, seed, burstiness, trace)):
            # always await: a dispatcher behind its schedule must still let the requests it made run
            await sleep_until(due, lambda: perf() - t0)  # never before its time (uvloop's timers may fire early)
            if should_abort is not None and state["aborted"] is None and (reason := should_abort()):
                abort(reason)
            if stop.is_set() or all_measured.is_set():
                return
            task = asyncio.create_task(one(i, due))
            tasks.add(task)
            task.add_done_callback(settle)
            due += gap

    await _drive(dispatch(), tasks, all_measured, stop, abort, deadline_s, deadline_reason, bugs)
    return _finish(_folded(streams, target), state, stop.is_set(), n_warmup, n_total, perf, t0, _folded(cooled, target))


def _settler(tasks: set[asyncio.Task], bugs: list[BaseException],
             stop: asyncio.Event) -> Callable[[asyncio.Task], None]:
    """The done-callback of a request task: forget it, and keep (and stop the loop on) a bug raised inside it."""
    def settle(task: asyncio.Task) -> None:
        tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            bugs.append(task.exception())  # a bug inside a request task must not pass silently
            stop.set()
    return settle


async def _drive(dispatch: Any, tasks: set[asyncio.Task], all_measured: asyncio.Event, stop: asyncio.Event,
                 abort: Callable[[str], None], deadline_s: float | None, deadline_reason: str | None,
                 bugs: list[BaseException]) -> None:
    """Run the dispatcher coroutine ``dispatch`` until every measured request has finished or the loop stops (an
    abort, ``deadline_s`` seconds passed), then cancel the dispatcher and the requests still running; re-raise the
    first bug of a request task or of the dispatcher."""
    async def watchdog() -> None:
        await asyncio.sleep(deadline_s)
        abort(deadline_reason or f"deadline of {deadline_s:g} s passed")

    dispatcher = asyncio.create_task(dispatch)
    waiter = asyncio.create_task(all_measured.wait())
    stopper = asyncio.create_task(stop.wait())
    guard = asyncio.create_task(watchdog()) if deadline_s is not None else None
    await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
    dispatcher.cancel()
    running = list(tasks)
    for t in running:
        t.cancel()
    await asyncio.gather(dispatcher, *running, return_exceptions=True)
    for t in (waiter, stopper, guard):
        if t is not None:
            t.cancel()
    if dispatcher.done() and not dispatcher.cancelled() and dispatcher.exception() is not None:
        bugs.append(dispatcher.exception())
    if bugs:
        raise bugs[0]


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


def _settle(raw: RawStream, state: dict[str, Any], n_measured: int, all_measured: asyncio.Event,
            abort: Callable[[str], None], max_consecutive_failures: int) -> None:
    """Count a finished request: failures in a row (abort after ``max_consecutive_failures``, 0 = never) and
    measured requests done (``all_measured`` set after the last)."""
    if raw.error is None:
        state["fails_in_row"] = 0
    else:
        state["fails_in_row"] += 1
        if max_consecutive_failures and state["fails_in_row"] >= max_consecutive_failures:
            abort(f"{state['fails_in_row']} requests failed in a row (last: {raw.error[:120]})")
    if not raw.warmup:
        state["measured_done"] += 1
        if state["measured_done"] >= n_measured:
            all_measured.set()


def _finish(streams: list[RawStream], state: dict[str, Any], stopped: bool, n_warmup: int, n_total: int,
            perf: Callable[[], float], t0: float, cooled: list[RawStream] | None = None) -> LoopResult:
    """Close a repeat: requests cut off by an abort failed, unsent measured ones are recorded as not sent."""
    if stopped:
        for raw in streams:
            if raw.error is None and not raw.done_seen:
                raw.error = f"cancelled: {state['aborted']}"
    if state["aborted"] is not None:
        sent = {s.request_id for s in streams}
        for i in range(n_warmup, n_total):
            if i not in sent:
                streams.append(RawStream(request_id=i, warmup=False, queued_s=perf() - t0, sent_s=perf() - t0,
                                         error=f"not sent: {state['aborted']}"))
    streams.sort(key=lambda s: s.request_id)
    return LoopResult(streams=streams, cooldown_sent=state["cooldown"], aborted=state["aborted"],
                      cooldown=list(cooled or []))


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

