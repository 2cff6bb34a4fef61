"""The closed loop spread over several client processes, when one core cannot read every stream.

Why: one client process reads at least 120,000–170,000 streamed tokens a second on one core (what the bench
server of ``benchmarks/loadgen_overhead.py`` delivered on two cores, docs/reliability.md); past its limit its own
core, not the server, sets the figures, and the point is flagged client-bound
(:mod:`pipeline.metrics.clientside`).  AIPerf spreads its requests over worker processes for the same reason.  ``client_processes: N`` (a served backend's option) runs
the repeat's closed loop as N processes, each on the same event loop and transport as one would use:

- **slots**: the concurrency split as evenly as it goes (:func:`split`), so exactly ``concurrency`` requests
  are in flight in all; each process has its share of the warm-up (one per slot) and of the measured requests
  (in proportion to its slots, taken in turn from the repeat's bodies so each keeps its request ids);
- **one end**: a process whose measured requests are done tells the parent and keeps cooling down
  (:class:`pipeline.loadgen.scheduler.ClosedLoop`'s hooks ``own_done`` and ``finished``) until every process's are
  done, so the load stays at ``concurrency`` to the last measured completion, as in one process;
- **one clock**: every process stamps with ``time.perf_counter`` against the parent's ``t0``: on Linux and macOS
  it is the system's monotonic clock (``CLOCK_MONOTONIC``, ``mach_absolute_time``), one for every process, so
  the records merge as they are;
- **the meter**: the requests in flight are every process's sends and ends together; lag, connect and first-byte
  samples are pooled; the CPU share is the busiest process's (the limit is one core, whichever it is).

The parent's own loop stays free for the server's metrics scrape; an abort the parent sees (``should_abort``)
stops every process's sends.

What holds when a process dies:

- **a client process killed** (an OOM kill, ``kill -9``): the parent sees it end without its records, stops the
  others' sends, and fails the repeat by the process's name (:func:`lost_repeat`): every measured request is
  recorded failed with the reason, the dead process's own ones too, and the repeat is aborted.  The survivors'
  requests after the death ran at less than the point's concurrency, so none of them is kept as a measurement:
  a point is never stored whole with part of its load missing;
- **the parent killed** (a killed sweep): each client process dies with it, never left streaming at the server:
  on Linux the kernel kills it (``prctl(PR_SET_PDEATHSIG, SIGKILL)``, asked for first thing), and elsewhere its
  pipe to the parent reads end-of-file, on which it ends at once (its streams closed with it).  Each process is started per repeat (``spawn``: no copy of the parent's event loop),
which costs 0.16–0.18 s of start-up before the repeat (a spawned process importing this module, timed three times
on the 2-core development machine), outside its measured window.
"""

from __future__ import annotations

import asyncio
import ctypes
import multiprocessing
import os
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from pipeline.loadgen import client, eventloop, scheduler
from pipeline.loadgen.clientmeter import ClientMeter
from pipeline.loadgen.repeatplan import Hooks, RepeatPlan
from pipeline.loadgen.streamrecord import RawStream

#: How often the parent polls ``should_abort`` while the processes run (s).
ABORT_POLL_S = 0.25


def split(concurrency: int, n_procs: int) -> list[int]:
    """Slots per process: ``concurrency`` over ``min(n_procs, concurrency)`` processes, the first ones one more
    where it does not divide (``split(10, 4) == [3, 3, 2, 2]``)."""
    n = max(1, min(n_procs, concurrency))
    return [concurrency // n + (i < concurrency % n) for i in range(n)]


def processes_used(concurrency: int, n_procs: int) -> int:
    """How many client processes a closed-loop point of ``concurrency`` runs over with ``client_processes:
    n_procs``: ``min(n_procs, concurrency)`` (at least 1; :func:`split`), what the point's meta states."""
    return len(split(concurrency, n_procs))


def assign(n_warmup: int, n_total: int, slots: list[int]) -> list[list[int]]:
    """The body indices of each process: its warm-up (its slots' share of ``n_warmup``, in order) and its measured
    requests (the measured indices dealt in turn, each process taking as many per round as it has slots)."""
    warm = split(n_warmup, len(slots)) if n_warmup >= len(slots) else [1] * n_warmup + [0] * (len(slots) - n_warmup)
    out, k = [], 0
    for w in warm:
        out.append(list(range(k, k + w)))
        k += w
    rounds = [p for p, n in enumerate(slots) for _ in range(n)]
    for j, i in enumerate(range(n_warmup, n_total)):
        out[rounds[j % len(rounds)]].append(i)
    return out


@dataclass
class Job:
    """What one client process runs (picklable): its share of the repeat's plan (its bodies, slots and warm-up:
    :meth:`RepeatPlan.share`), their indices in the repeat (``ids``), its transport and event loop, and the parent's
    pid."""

    plan: RepeatPlan
    ids: list[int]
    transport: str
    event_loop: str
    parent_pid: int = 0


#: ``PR_SET_PDEATHSIG`` of Linux's ``prctl(2)`` (``linux/prctl.h``): the signal a process gets when its parent dies.
PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)``;
    elsewhere a no-op, the pipe's end-of-file stops it), and end at once if the parent ``parent_pid`` is already
    gone (it died before the request was made: ``prctl(2)``'s own advice)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if parent_pid and os.getppid() != parent_pid:
        os._exit(1)


def _work(job: Job, pipe: Any) -> None:
    """A client process: the closed loop over its bodies; tells ``pipe`` "measured" when its own are done, stops at
    "stop", stops sending at ("abort", reason), ends at once when the pipe ends (the parent gone); sends back (its
    LoopResult, its meter's result and events)."""
    die_with_parent(job.parent_pid)

    async def main() -> tuple[Any, dict, list]:
        loop = asyncio.get_running_loop()
        finished, own, said = asyncio.Event(), asyncio.Event(), {"abort": None}

        def heard() -> None:
            try:
                msg = pipe.recv()
            except (EOFError, OSError):  # the parent is gone: nobody to send the records to, no request to keep
                os._exit(1)  # open, so end now: the kernel closes every stream (die_with_parent's fallback)
            if msg == "stop":
                finished.set()
            else:
                said["abort"] = msg[1]

        loop.add_reader(pipe.fileno(), heard)
        meter = ClientMeter()
        meter.start(job.plan.t0)
        tell = loop.create_task(_tell_when(own, pipe))
        hooks = Hooks(should_abort=lambda: said["abort"], meter=meter, finished=finished, own_done=own)
        try:
            async with client.make_session(job.plan.load.concurrency, phases=lambda: meter,
                                           transport=job.transport) as session:
                res = await scheduler.run_repeat(session, job.plan, hooks)
        finally:
            tell.cancel()
            await meter.stop()
            loop.remove_reader(pipe.fileno())
            os.set_blocking(pipe.fileno(), True)  # add_reader made it non-blocking: the records are megabytes
        return res, meter.result, meter.events

    out: list = []

    async def keep() -> None:  # the result kept aside (https://github.com/python/cpython/issues/112559, as ServedBackend.measure does)
        out.append(await main())

    eventloop.run(keep(), job.event_loop)
    res, meter_result, events = out[0]
    for s in res.streams:  # back to the repeat's request ids
        s.request_id = job.ids[s.request_id]
    try:
        pipe.send((res, meter_result, events))
    except OSError:  # the parent died as the records were sent
        pass


async def _tell_when(own: asyncio.Event, pipe: Any) -> None:
    await own.wait()
    try:
        pipe.send("measured")
    except OSError:  # the parent is gone: the pipe's reader stops the loop
        pass


async def closed_loop(plan: RepeatPlan, n_procs: int, transport: str = "auto", event_loop: str = "auto",
                      should_abort: Callable[[], str | None] | None = None
                      ) -> tuple[scheduler.LoopResult, ClientMeter]:
    """The closed loop of ``plan`` (:class:`pipeline.loadgen.scheduler.ClosedLoop`) over ``n_procs`` client processes
    (module docstring): the merged LoopResult (streams in request-id order, cool-down streams and counts summed, the
    first abort) and a meter holding every process's figures (:func:`merged_meter`).  A process that died without
    its records fails the repeat by its name (:func:`lost_repeat`)."""
    slots = split(int(plan.load.concurrency or 0), n_procs)
    ids = assign(plan.n_warmup, plan.n_total, slots)
    ctx = multiprocessing.get_context("spawn")
    pipes, procs = [], []
    for k, (n, mine) in enumerate(zip(slots, ids)):
        ours, theirs = ctx.Pipe()
        job = Job(plan.share(mine, n), mine, transport, event_loop, os.getpid())
        proc = ctx.Process(target=_work, args=(job, theirs), daemon=True, name=f"batchmark-client-{k}")
        proc.start()
        theirs.close()  # the child's end: held here too, a dead child's pipe would never read end-of-file
        pipes.append(ours)
        procs.append(proc)
    try:
        results, lost = await _gather(pipes, procs, should_abort)
    finally:
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
    done = [results[k] for k in sorted(results)]
    streams = sorted((s for res, _, _ in done for s in res.streams), key=lambda s: s.request_id)
    aborted = next((res.aborted for res, _, _ in done if res.aborted), None)
    merged = scheduler.LoopResult(streams=streams, cooldown_sent=sum(res.cooldown_sent for res, _, _ in done),
                                  aborted=aborted, cooldown=[s for res, _, _ in done for s in res.cooldown])
    if lost:
        merged = lost_repeat(merged, lost, {k: ids[k] for k in lost}, plan.n_warmup, plan.t0)
    return merged, merged_meter([(m, e) for _, m, e in done], processes=len(procs))


def lost_repeat(res: scheduler.LoopResult, lost: dict[int, str], lost_ids: dict[int, list[int]], n_warmup: int,
                t0: float) -> scheduler.LoopResult:
    """A repeat whose client processes ``lost`` (process index → why) died without their records, failed by name:
    aborted with the first reason, each measured request the survivors sent recorded failed with it (after the death
    they ran below the point's concurrency: no measurement of the point), and each measured request of a dead process
    (``lost_ids``, body indices) added as failed ("lost: …")."""
    reason = lost[min(lost)]
    for s in res.streams:
        if not s.warmup and s.error is None:
            s.error = f"repeat failed: {reason}"
    now = time.perf_counter() - t0
    gone = [RawStream(request_id=i, warmup=False, queued_s=now, sent_s=now, error=f"lost: {lost[k]}")
            for k, mine in lost_ids.items() for i in mine if i >= n_warmup]
    return scheduler.LoopResult(streams=sorted(res.streams + gone, key=lambda s: s.request_id),
                                cooldown_sent=res.cooldown_sent, aborted=reason, cooldown=res.cooldown)


def _ended(proc: Any) -> str:
    """How a client process ended, for the point's failure: ``client process batchmark-client-1 ended without its
    records (killed by signal SIGKILL)`` or ``(exit code 1)``."""
    code = proc.exitcode
    how = (f"killed by signal {signal.Signals(-code).name}" if code is not None and code < 0 and
           -code in signal.valid_signals() else f"exit code {code}")
    return f"client process {proc.name} ended without its records ({how})"


def _send_all(pipes: list[Any], msg: Any, skip: set[int]) -> None:
    """Send ``msg`` ("stop", or ``("abort", reason)``: stop sending) to every client process not in ``skip``; a dead
    one's pipe is passed over."""
    for k, p in enumerate(pipes):
        if k not in skip:
            try:
                p.send(msg)
            except OSError:
                pass


async def _gather(pipes: list[Any], procs: list[Any],
                  should_abort: Callable[[], str | None] | None) -> tuple[dict[int, tuple], dict[int, str]]:
    """Wait for every process: "stop" to all once each said "measured"; an abort passed on; a process that ended
    without its records (:func:`_ended`) makes the others stop.  Returns (index → its results, index → why it was
    lost)."""
    measured, results, lost, aborted = set(), {}, {}, None
    while len(results) + len(lost) < len(pipes):
        for k, pipe in enumerate(pipes):
            ended = False
            try:
                while k not in results and k not in lost and pipe.poll():
                    msg = pipe.recv()
                    if msg == "measured":
                        measured.add(k)
                        if len(measured) == len(pipes):
                            _send_all(pipes, "stop", set())
                    else:
                        results[k] = msg
            except (EOFError, OSError):  # its end closed with no whole message left: the process died
                ended = True
            if k not in results and k not in lost and (ended or not procs[k].is_alive() and not pipe.poll()):
                procs[k].join(timeout=5)
                lost[k] = _ended(procs[k])
                _send_all(pipes, ("abort", lost[k]), set(results) | set(lost))
        if aborted is None and should_abort is not None and (aborted := should_abort()) is not None:
            _send_all(pipes, ("abort", aborted), set(results) | set(lost))
        await asyncio.sleep(0.01 if measured else ABORT_POLL_S / 10)
    return results, lost


def merged_meter(parts: list[tuple[dict[str, Any] | None, list[tuple[float, int]]]],
                 processes: int | None = None) -> ClientMeter:
    """One meter of several processes' (result, in-flight events): events, lag, connect and first-byte samples
    pooled; ``wall_s`` the longest, ``cpu_s`` the sum, ``cpu_share`` the busiest process's share of its core (the
    limit is one core: a client-bound process makes the point client-bound whatever the others did).

    The lag samples are pooled in process order, and ``process_lag_counts`` / ``process_wall_s`` say how many are
    each process's and over what wall time: a ready read's wait is a figure of one event loop
    (:func:`pipeline.metrics.clientside.read_wait_s` per process, the busiest kept), never of the pool, where four
    loops each waiting 4 ms would add up to 16.  ``processes``: how many ran (default: the parts given)."""
    meter = ClientMeter()
    meter.events = [e for _, events in parts for e in events]
    results = [r for r, _ in parts if r]
    shares = [r["cpu_share"] for r in results if r.get("cpu_share") is not None]
    meter.result = {"wall_s": max((r["wall_s"] for r in results), default=None),
                    "cpu_s": sum(r["cpu_s"] for r in results) if results else None,
                    "cpu_share": max(shares) if shares else None,
                    "lag_s": [x for r in results for x in r.get("lag_s", [])],
                    "connect_s": [x for r in results for x in r.get("connect_s", [])],
                    "first_byte_s": [x for r in results for x in r.get("first_byte_s", [])],
                    "process_lag_counts": [len(r.get("lag_s", [])) for r in results],
                    "process_wall_s": [r["wall_s"] for r in results],
                    "processes": len(parts) if processes is None else processes}
    return meter
