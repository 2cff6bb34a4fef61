"""The closed-loop scheduler of the served engines: N requests in flight, warm-up, cool-down, the measured window.

Sends through :mod:`pipeline.engines.client` and decides only when: which request goes out
next, when a repeat is aborted, which span of time is measured.

Shape of one repeat (docs/definitions.md, "output throughput", served engines):

The measured window is first measured send → last measured completion.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Callable

from pipeline.engines.client import RawStream, Target, stream_one
from pipeline.records import RequestRecord


def default_requests(concurrency: int, per_slot: int = 4, minimum: int = 32) -> int:
    """Measured requests per repeat by default: ``max(per_slot·N, minimum)`` (``max(4·N, 32)``)."""
    return max(per_slot * concurrency, minimum)


@dataclass
class LoopResult:
    """Raw streams of one closed-loop repeat plus what happened around them."""

    streams: list[RawStream]
    cooldown_sent: int
    aborted: str | None


async def closed_loop(session: Any, target: Target, bodies: list[bytes], concurrency: int, n_warmup: int,
                      t0: float, should_abort: Callable[[], str | None] | None = None,
                      max_consecutive_failures: int = 0, deadline_s: float | None = None,
                      deadline_reason: str | None = None) -> LoopResult:
    """Keep exactly ``concurrency`` requests in flight over ``bodies`` (times in s since ``t0``).

    ``bodies[:n_warmup]`` are warm-up, the rest measured; after the last body is sent, free
    slots send cool-down requests (re-using bodies from the start) until every measured
    request has completed, then those are cancelled and dropped.  ``should_abort`` is polled
    before each send; a non-None answer (a reason) stops further sends.

    A stalled or failing server does not cost ``timeout_s`` per request: after
    ``max_consecutive_failures`` failed requests in a row (0 = never), or once ``deadline_s``
    seconds have passed (None = never), the repeat is aborted: nothing more is sent, requests
    in flight are cancelled and recorded as failed with the reason, unsent ones as not sent.
    """
    headers = target.headers()
    n_total = len(bodies)
    n_measured = n_total - n_warmup
    streams: list[RawStream] = []
    state: dict[str, Any] = {"next": 0, "measured_done": 0, "cooldown": 0, "aborted": None, "fails_in_row": 0}
    all_measured = asyncio.Event()
    stop = asyncio.Event()
    if n_measured <= 0:
        all_measured.set()
    perf = time.perf_counter

    def abort(reason: str) -> None:
        if state["aborted"] is None:
            state["aborted"] = reason
        stop.set()

    def count(raw: RawStream) -> None:
        if raw.error is None:
            state["fails_in_row"] = 0
            return
        state["fails_in_row"] += 1
        if max_consecutive_failures and state["fails_in_row"] >= max_consecutive_failures:
            abort(f"{state['fails_in_row']} requests failed in a row (last: {raw.error[:120]})")

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
                await stream_one(session, target, bodies[i], raw, t0, headers)
                count(raw)
                if not raw.warmup:
                    state["measured_done"] += 1
                    if state["measured_done"] >= n_measured:
                        all_measured.set()
            else:
                state["cooldown"] += 1
                cool = RawStream(request_id=i, warmup=True, queued_s=now, sent_s=now)
                await stream_one(session, target, bodies[(i - n_total) % n_total], cool, t0, headers)

    async def watchdog() -> None:
        await asyncio.sleep(deadline_s)
        abort(deadline_reason or f"deadline of {deadline_s:g} s passed")

    tasks = [asyncio.create_task(slot()) for _ in range(concurrency)]
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
    if stop.is_set():  # requests cut off by the abort failed: they never finished
        for raw in streams:
            if raw.error is None and not raw.done_seen:
                raw.error = f"cancelled: {state['aborted']}"
    for t in tasks:  # a bug inside a slot must not pass silently
        if t.done() and not t.cancelled() and t.exception() is not None:
            raise t.exception()
    if state["aborted"] is not None:
        sent = {s.request_id for s in streams}
        for i in range(n_warmup, n_total):
            if i not in sent:
                streams.append(RawStream(request_id=i, warmup=False, queued_s=perf() - t0, sent_s=perf() - t0,
                                         error=f"not sent: {state['aborted']}"))
    streams.sort(key=lambda s: s.request_id)
    return LoopResult(streams=streams, cooldown_sent=state["cooldown"], aborted=state["aborted"])


def measured_window(records: list[RequestRecord]) -> tuple[float, float]:
    """(first measured send, last measured completion) in s; (0, 0) when nothing was measured."""
    meas = [r for r in records if not r.warmup]
    done = [r.done_s for r in meas if r.ok]
    if not meas or not done:
        return 0.0, 0.0
    return min(r.sent_s for r in meas), max(done)
