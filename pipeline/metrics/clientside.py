"""The client's own figures of a served point, and the check that the client, not the server, was the limit (pure).

The served engines keep, per repeat, what :class:`pipeline.engines.clientmeter.ClientMeter` measured (the point's
``meta["client"]``: CPU time and wall time, event-loop lag samples, the requests in flight time-weighted over the
measured window, the tokens every stream delivered inside that window).  This module turns them into a point's
figures (docs/definitions.md, "The client's own figures"):

- ``achieved_concurrency``: requests in flight as the client saw them, time-weighted over the measured window,
  median over repeats (AIPerf's "effective concurrency");
- ``client_lag_s``: the event loop's lag (how late its timer woke, s) over every sample of every repeat;
- ``client_cpu_share``: the client process's CPU time / wall time, median over repeats (1 = a core saturated:
  the client runs its loop on one thread);
- ``delivered_output_throughput_tok_s``: tokens any stream (warm-up, measured, cool-down) received inside the
  measured window / the window, median over repeats: what the server delivered there, which the measured
  requests' own tokens / the same window undercount by the warm-up still finishing at its start and the
  cool-down already streaming at its end;
- ``client_bound`` / ``client_bound_reason`` (:func:`client_bound_reason`): the point is the client's limit, not
  a server measurement.
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

#: Median event-loop lag (s) at or above which the client read late.  An idle loop wakes within about 1 ms
#: (epoll's timeout is in whole milliseconds, rounded up); a busy machine's preemptions move the tail, not
#: the median; 10 ms is one decode step of a fast server (the fake test server's token time), so a client
#: this late stamps chunks a step late and merges steps into one read.
CLIENT_LAG_LIMIT_S = 0.010

#: What to do about a client-bound point (the sweep prints it, ``show`` and the pages carry the reason).
CLIENT_BOUND_ADVICE = ("give the client a core of its own (nothing else on it), spread the load over more "
                       "client machines, or measure a smaller grid (lower concurrency)")


def client_bound_reason(cpu_share: float | None, lag_p50_s: float | None,
                        cpu_limit: float = CLIENT_CPU_LIMIT, lag_limit_s: float = CLIENT_LAG_LIMIT_S) -> str | None:
    """Why the client was the limit of a point (one line), or None when it kept up or nothing was measured.

    Client-bound when its CPU share reached ``cpu_limit`` (a saturated core) or its event loop's median lag
    reached ``lag_limit_s`` (it read late, whatever took its core); module constants give the sources.
    """
    said = []
    if cpu_share is not None and cpu_share >= cpu_limit:
        said.append(f"its CPU was busy {cpu_share:.0%} of the time (at least {cpu_limit:.0%}: a saturated core)")
    if lag_p50_s is not None and lag_p50_s >= lag_limit_s:
        said.append(f"its event loop ran {lag_p50_s * 1e3:.1f} ms late at the median (at least "
                    f"{lag_limit_s * 1e3:.0f} ms)")
    if not said:
        return None
    return "client-bound: " + " and ".join(said) + "; the figures are the client's limit, not the server's"


def _med(values: list[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return float(median(vals)) if vals else None


def client_figures(blocks: list[dict[str, Any]] | None, windows: list[tuple[float, float]]) -> dict[str, Any]:
    """A point's client figures (the :class:`~pipeline.core.pointsummary.PointSummary` fields of the module docstring)
    from its per-repeat ``meta["client"]`` blocks and its repeats' measured windows (s); every field None for a
    point without them (in-process engines, imports, points measured before they were kept)."""
    out: dict[str, Any] = {"achieved_concurrency": None, "client_lag_s": None, "client_cpu_share": None,
                           "delivered_output_throughput_tok_s": None, "client_bound": None, "client_bound_reason": None}
    if not blocks or not isinstance(blocks, list):
        return out
    blocks = [b for b in blocks if isinstance(b, dict)]
    delivered = []
    for b, (start, end) in zip(blocks, windows):
        tokens = b.get("delivered_tokens")
        delivered.append(tokens / (end - start) if isinstance(tokens, (int, float)) and end > start else None)
    lags = [float(x) for b in blocks for x in (b.get("lag_s") or []) if isinstance(x, (int, float)) and np.isfinite(x)]
    lag = distribution(lags)
    cpu = _med([b.get("cpu_share") for b in blocks if isinstance(b.get("cpu_share"), (int, float))])
    reason = client_bound_reason(cpu, lag["p50"] if lag else None)
    out.update(achieved_concurrency=_med([b.get("achieved_concurrency") for b in blocks]), client_lag_s=lag,
               client_cpu_share=cpu, delivered_output_throughput_tok_s=_med(delivered),
               client_bound=None if cpu is None and lag is None else reason is not None, client_bound_reason=reason)
    return out
