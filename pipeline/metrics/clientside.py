"""The client's own figures of a served point, and the check that the client, not the server, was the limit (pure).

The served backends keep, per repeat, what :class:`pipeline.loadgen.clientmeter.ClientMeter` measured (the point's
``meta["client"]``: CPU time and wall time, event-loop lag samples, the requests in flight time-weighted over the
measured window, the tokens every stream delivered inside that window).  This module turns them into a point's
figures (docs/definitions.md, "The client's own figures"):

- ``achieved_concurrency``: requests in flight as the client saw them, time-weighted over the measured window,
  median over repeats (AIPerf's "effective concurrency");
- ``client_lag_s``: the event loop's lag (how late its timer woke, s) over every sample of every repeat;
- ``client_read_wait_s``: the mean time a read that became ready at a random moment waited for the loop, median
  over repeats (:func:`read_wait_s`): the lag weighted by the time it lasted, since a loop blocked for a second
  wakes once, late by a second, and a median over wake-ups would hide it among the prompt ones; over several client
  processes, the busiest process's (:func:`block_read_wait_s`);
- ``client_cpu_share``: the client process's CPU time / wall time, median over repeats (1 = a core saturated:
  the client runs its loop on one thread);
- ``delivered_output_throughput_tok_s``: tokens any stream (warm-up, measured, cool-down) received inside the
  measured window / the window, median over repeats: what the server delivered there, which the measured
  requests' own tokens / the same window undercount by the warm-up still finishing at its start and the
  cool-down already streaming at its end;
- ``connect_s`` / ``first_byte_s``: the HTTP phases of every request of every repeat (opening a connection, where
  one was opened; a request's start to its response headers), s;
- ``client_bound`` / ``client_bound_reason`` (:func:`client_bound_reason`): the point is the client's limit, not
  a server measurement.

The per-repeat values of the three figures taken per repeat (achieved concurrency, CPU share, delivered throughput)
go to the point's ``samples`` (:func:`client_repeat_samples`), which give their confidence intervals (``ci95``).
"""

from __future__ import annotations

from statistics import median
from typing import Any

import numpy as np

from pipeline.core.pointsummary import distribution

#: CPU time / wall time of the client process at or above which it had no idle time: its one event loop
#: thread was busy the whole repeat, so what arrived waited for it.  GuideLLM warns at a comparable
#: saturation of its worker processes; 0.9 leaves the loop's own sleeps and the kernel's tick accounting
#: (10 ms per CPU, USER_HZ = 100) room below 1.
CLIENT_CPU_LIMIT = 0.9

#: Mean wait of a ready read (s, :func:`read_wait_s`) at or above which the client read late.  An idle loop wakes
#: within about 1 ms of every 10 ms timer (epoll's timeout is in whole milliseconds, rounded up): a wait of
#: 0.5 · 1² / 11 ≈ 0.05 ms; a machine whose scheduler holds the client off 5 ms a period gives ≈ 0.8 ms; 10 ms is
#: one decode step of a fast server (the fake test server's token time), so a client this late stamps chunks a
#: step late and merges steps into one read.
CLIENT_LAG_LIMIT_S = 0.010

#: What to do about a client-bound point (the sweep prints it, ``show`` and the pages carry the reason).
CLIENT_BOUND_ADVICE = ("give the client a core of its own (nothing else on it), spread the load over more "
                       "client processes (client_processes: N, one core each) or machines, or measure a smaller grid "
                       "(lower concurrency)")


def read_wait_s(lags_s: list[float], wall_s: float | None) -> float | None:
    """The mean time (s) a read that became ready at a random moment of a repeat waited for the event loop.

    Derived: a wake-up late by L means the loop was busy at least the last L before it, and a read ready inside
    that stretch waited on average L / 2; over the repeat's ``wall_s`` that is Σ L² / 2 / wall (a lower bound:
    the loop may have been busy longer than its timer shows).  None without samples or wall time.
    """
    if not lags_s or not wall_s or wall_s <= 0:
        return None
    arr = np.asarray(lags_s, dtype=float)
    return float(np.sum(arr * arr) / 2 / wall_s)


def block_read_wait_s(block: dict[str, Any]) -> float | None:
    """One repeat's read wait (s, :func:`read_wait_s`) from its ``meta["client"]`` block: of its one event loop, or,
    over several client processes (``process_lag_counts``, ``process_wall_s``: which of the pooled ``lag_s`` are each
    process's, and its wall time), the busiest process's.  A wait is a figure of one loop: four processes each
    waiting 4 ms are a client that waits 4 ms, never 16.  None without samples."""
    lags = [float(x) if _number(x) is not None else None for x in (block.get("lag_s") or [])]
    counts, walls = block.get("process_lag_counts"), block.get("process_wall_s")
    per_process = (isinstance(counts, list) and isinstance(walls, list) and len(counts) == len(walls) > 0
                   and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts))
    if per_process and sum(counts) == len(lags):
        edges = np.cumsum([0, *counts])
        waits = [read_wait_s([x for x in lags[a:b] if x is not None], _number(w))
                 for a, b, w in zip(edges[:-1], edges[1:], walls)]
        return max((w for w in waits if w is not None), default=None)
    return read_wait_s([x for x in lags if x is not None], _number(block.get("wall_s")))


def client_bound_reason(cpu_share: float | None, read_wait: float | None,
                        cpu_limit: float = CLIENT_CPU_LIMIT, lag_limit_s: float = CLIENT_LAG_LIMIT_S) -> str | None:
    """Why the client was the limit of a point (one line), or None when it kept up or nothing was measured.

    Client-bound when its CPU share reached ``cpu_limit`` (a saturated core) or a ready read waited
    ``lag_limit_s`` or more for its event loop on average (:func:`read_wait_s`: it read late, whatever took its
    core); module constants give the sources.
    """
    said = []
    if cpu_share is not None and cpu_share >= cpu_limit:
        said.append(f"its CPU was busy {cpu_share:.0%} of the time (at least {cpu_limit:.0%}: a saturated core)")
    if read_wait is not None and read_wait >= lag_limit_s:
        said.append(f"a ready read waited {read_wait * 1e3:.1f} ms for its event loop on average (at least "
                    f"{lag_limit_s * 1e3:.0f} ms)")
    if not said:
        return None
    return "client-bound: " + " and ".join(said) + "; the figures are the client's limit, not the server's"


def _med(values: list[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return float(median(vals)) if vals else None


def _pooled(blocks: list[dict[str, Any]], name: str) -> list[float]:
    """Every finite value of list ``name`` over the repeats' blocks."""
    return [float(x) for b in blocks for x in (b.get(name) or []) if isinstance(x, (int, float)) and np.isfinite(x)]


def _number(v: Any) -> float | None:
    """``v`` as a float when it is a finite number (not a bool), else None."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and np.isfinite(v)
    return float(v) if ok else None


def client_repeat_samples(blocks: list[dict[str, Any]] | None, windows: list[tuple[float, float]]) -> dict[str, list[float]]:
    """Each repeat's own client figures, one value per repeat that has it (a repeat without it left out):
    ``achieved_concurrency`` (requests in flight), ``client_cpu_share`` (CPU time / wall time) and
    ``delivered_output_throughput_tok_s`` (tokens delivered inside the repeat's measured window / the window, tok/s),
    from the per-repeat ``meta["client"]`` blocks and the repeats' measured windows (s).  ``{}`` without blocks.
    What a point's ``samples`` keep of the client (its confidence intervals, ``ci95``)."""
    if not blocks or not isinstance(blocks, list):
        return {}
    blocks = [b for b in blocks if isinstance(b, dict)]
    delivered = []
    for b, (start, end) in zip(blocks, windows):
        tokens = _number(b.get("delivered_tokens"))
        delivered.append(tokens / (end - start) if tokens is not None and end > start else None)
    per = {"achieved_concurrency": [_number(b.get("achieved_concurrency")) for b in blocks],
           "client_cpu_share": [_number(b.get("cpu_share")) for b in blocks],
           "delivered_output_throughput_tok_s": delivered}
    return {k: [v for v in vals if v is not None] for k, vals in per.items()}


def client_figures(blocks: list[dict[str, Any]] | None, windows: list[tuple[float, float]]) -> dict[str, Any]:
    """A point's client figures (the :class:`~pipeline.core.pointsummary.PointSummary` fields of the module docstring)
    from its per-repeat ``meta["client"]`` blocks and its repeats' measured windows (s); every field None for a
    point without them (the in-process backend, imports, points measured before they were kept).  The medians over
    repeats are of :func:`client_repeat_samples`."""
    out: dict[str, Any] = {"achieved_concurrency": None, "client_lag_s": None, "client_read_wait_s": None,
                           "client_cpu_share": None, "connect_s": None, "first_byte_s": None,
                           "delivered_output_throughput_tok_s": None, "client_bound": None, "client_bound_reason": None}
    if not blocks or not isinstance(blocks, list):
        return out
    per = client_repeat_samples(blocks, windows)
    blocks = [b for b in blocks if isinstance(b, dict)]
    lag = distribution(_pooled(blocks, "lag_s"))
    cpu = _med(per["client_cpu_share"])
    wait = _med([block_read_wait_s(b) for b in blocks])
    reason = client_bound_reason(cpu, wait)
    out.update(achieved_concurrency=_med(per["achieved_concurrency"]), client_lag_s=lag,
               client_read_wait_s=wait, connect_s=distribution(_pooled(blocks, "connect_s")),
               first_byte_s=distribution(_pooled(blocks, "first_byte_s")),
               client_cpu_share=cpu, delivered_output_throughput_tok_s=_med(per["delivered_output_throughput_tok_s"]),
               client_bound=None if cpu is None and wait is None else reason is not None, client_bound_reason=reason)
    return out
