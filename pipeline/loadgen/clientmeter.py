"""What the client itself did while a repeat ran: requests in flight as it saw them, its event loop's lag, its CPU.

A served point's figures are the server's only while the client kept up.  A client that cannot read
what has arrived (its one event loop busy parsing, or its core given to someone else) stamps chunks
late, sends the next closed-loop request late and so under-loads the server, and reads TTFT high and
ITL low; nothing in the records says so.  AIPerf reports the time-weighted concurrency it achieved and its
own scheduling delay, GuideLLM flags itself as the bottleneck; :class:`ClientMeter` measures the same
three things over one repeat, off nothing but the client's own clocks:

- **in flight**: every send and every end of a stream's read (the scheduler calls :meth:`ClientMeter.sent`
  and :meth:`ClientMeter.done`), so the number of requests in flight is a step function of time and its
  time-weighted mean over the measured window (:func:`time_weighted_mean`) is the concurrency achieved;
- **event-loop lag**: a task that sleeps :data:`LAG_PERIOD_S` and records how much later than asked it woke
  (the time a ready callback — a socket read among them — waited for the loop: the delay from a read's
  data being ready to its timestamp, which the read loop takes at once after the read returns).  An idle
  loop wakes within about 1 ms (epoll's millisecond timeout rounds up); a saturated one as late as the
  work queued before it;
- **CPU share**: the process's CPU time (``time.process_time``: user + system of every thread) over the
  repeat's wall time.  The loop runs on one thread, so a share near 1 means the client had no idle time.

- **HTTP phases** (AIPerf's and GuideLLM's request timings): the time to open a connection (``connect_s``, only
  for requests that opened one: keep-alive reuses them) and from a request's start to its response headers
  (``first_byte_s``: the server's first byte), from the raw reader's own clocks (:mod:`pipeline.loadgen.rawhttp`)
  or aiohttp's request tracing (:func:`phase_trace`).

Pure bookkeeping plus one monitoring task: the meter never changes when anything is sent.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np

#: The lag monitor's sleep (s): 100 wake-ups a second cost the loop well under 1 % of a core.
LAG_PERIOD_S = 0.01


def time_weighted_mean(events: list[tuple[float, int]], start: float, end: float) -> float | None:
    """Time-weighted mean over ``[start, end]`` (s) of a count that changes by ``delta`` at each ``(t, delta)``.

    The count before the first event is 0; events are sorted by time first.  Derived: the integral of the
    step function over the window (the sum of count × the length of each step inside it) / (end − start).
    None when the window is empty.
    """
    if not end > start:
        return None
    if not events:
        return 0.0
    arr = np.asarray(sorted(events), dtype=float)
    t, level = arr[:, 0], np.cumsum(arr[:, 1])
    edges = np.clip(np.append(t, end), start, end)  # step i holds level[i] from t[i] to t[i + 1]
    return float(np.sum(level * np.diff(edges)) / (end - start))


class ClientMeter:
    """One repeat's client-side figures: ``start()`` inside the running loop, ``sent``/``done`` per request, ``stop()``.

    ``stop()`` returns ``{"wall_s", "cpu_s", "cpu_share", "lag_s"}`` (the lag samples in s, one per wake-up) and
    keeps the in-flight events in ``events`` for :meth:`achieved_concurrency` once the measured window is known.
    """

    def __init__(self, period_s: float = LAG_PERIOD_S) -> None:
        self.period_s = period_s
        self.events: list[tuple[float, int]] = []
        self.lags: list[float] = []
        self.connect_s: list[float] = []
        self.first_byte_s: list[float] = []
        self._task: asyncio.Task | None = None
        self._t0 = self._cpu0 = 0.0
        self.result: dict[str, Any] | None = None

    def start(self, t0: float) -> None:
        """Begin measuring (``t0``: the point's time origin, ``time.perf_counter`` s, as the records use)."""
        self.t0 = t0
        self._t0, self._cpu0 = time.perf_counter(), time.process_time()
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        perf, period, lags = time.perf_counter, self.period_s, self.lags
        while True:
            due = perf() + period
            await asyncio.sleep(period)
            lags.append(max(perf() - due, 0.0))

    def sent(self) -> None:
        """A request was sent now."""
        self.events.append((time.perf_counter() - self.t0, 1))

    def done(self) -> None:
        """A request's stream was read to its end (or failed) now."""
        self.events.append((time.perf_counter() - self.t0, -1))

    async def stop(self) -> dict[str, Any]:
        """End measuring; the repeat's ``{"wall_s", "cpu_s", "cpu_share", "lag_s"}``."""
        wall, cpu = time.perf_counter() - self._t0, time.process_time() - self._cpu0
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self.result = {"wall_s": wall, "cpu_s": cpu, "cpu_share": cpu / wall if wall > 0 else None,
                       "lag_s": list(self.lags), "connect_s": list(self.connect_s),
                       "first_byte_s": list(self.first_byte_s)}
        return self.result

    def achieved_concurrency(self, start: float, end: float) -> float | None:
        """Requests in flight as the client saw them, time-weighted over ``[start, end]`` (s since ``t0``)."""
        return time_weighted_mean(self.events, start, end)


def phase_trace(current: Any) -> Any:
    """An ``aiohttp.TraceConfig`` that adds each request's HTTP phases to the meter ``current()`` returns (None: none).

    ``connect_s``: ``on_connection_create_start`` → ``on_connection_create_end``; ``first_byte_s``:
    ``on_request_start`` → ``on_request_end`` (aiohttp calls it when the response's headers have arrived), s.
    """
    import aiohttp

    perf = time.perf_counter
    trace = aiohttp.TraceConfig()

    async def start(_s: Any, ctx: Any, _p: Any) -> None:
        ctx.request_start = perf()

    async def headers(_s: Any, ctx: Any, _p: Any) -> None:
        meter = current()
        if meter is not None and hasattr(ctx, "request_start"):
            meter.first_byte_s.append(perf() - ctx.request_start)

    async def conn_start(_s: Any, ctx: Any, _p: Any) -> None:
        ctx.connect_start = perf()

    async def conn_end(_s: Any, ctx: Any, _p: Any) -> None:
        meter = current()
        if meter is not None and hasattr(ctx, "connect_start"):
            meter.connect_s.append(perf() - ctx.connect_start)

    trace.on_request_start.append(start)
    trace.on_request_end.append(headers)
    trace.on_connection_create_start.append(conn_start)
    trace.on_connection_create_end.append(conn_end)
    return trace
