"""What a closed-loop point measured (its regime), the batch it really decoded, and why a curve does what it does
past its knee (pure).

A served point past the server's own limits measures queueing or KV-cache pressure, not batching: the
point's regime is read from the server's limits (``--max-num-seqs``) and the state its ``/metrics``
showed while the point ran (``PointSummary.server``, :func:`pipeline.metrics.summarize.server_state`).
Words for readers of each regime are :data:`pipeline.core.words.REGIME_TEXT`.
"""

from __future__ import annotations

from typing import Any

KV_FULL_FRACTION = 0.95


def point_regime(concurrency: int, server: dict[str, Any] | None, limits: dict[str, Any] | None,
                 engine: str) -> str:
    """What a point measured: ``"batching"``, ``"queueing"``, ``"kv_cache_full"`` or ``"limits_unknown"``.

    - ``"queueing"``: more requests in flight than the server decodes together — the
      concurrency exceeds its ``--max-num-seqs``, or its ``/metrics`` showed requests waiting
      while fewer than ``concurrency`` ran; latency then grows with the queue, not the batch;
    - ``"kv_cache_full"``: the server preempted requests, or its KV cache was ≥ 95 % full;
    - ``"batching"``: every request was decoded in the batch (an in-process static batch
      always is; a served point whose server state shows neither of the above);
    - ``"limits_unknown"``: a served point with neither ``/metrics`` nor known limits.
    """
    if engine == "transformers":
        return "batching"
    server = server or {}
    limits = limits or {}
    max_seqs = limits.get("max_num_seqs")
    waiting, running = server.get("requests_waiting_max"), server.get("requests_running_max")
    if max_seqs and concurrency > max_seqs:
        return "queueing"
    if waiting is not None and waiting >= 1 and running is not None and running < concurrency:
        return "queueing"
    if (server.get("preemptions") or 0) > 0 or (server.get("kv_cache_usage_max") or 0) >= KV_FULL_FRACTION:
        return "kv_cache_full"
    if not server and not max_seqs:
        return "limits_unknown"
    return "batching"


def decode_batch(concurrency: int, regime: str | None, server: dict[str, Any] | None,
                 limits: dict[str, Any] | None) -> int:
    """The batch a closed-loop point really decoded: the concurrency, except at a ``queueing`` point.

    Past the server's limit the requests beyond it wait in its queue and are not read per step,
    so the batch is the server's highest running count from ``/metrics`` when scraped, else its
    ``--max-num-seqs``, each capped at the concurrency (derived: bytes per step count the
    sequences decoded together, docs/definitions.md "MBU").
    """
    if regime != "queueing":
        return concurrency
    running = (server or {}).get("requests_running_max")
    if running is not None and running >= 1:
        return max(1, min(concurrency, int(round(running))))
    max_seqs = (limits or {}).get("max_num_seqs")
    if max_seqs:
        return max(1, min(concurrency, int(max_seqs)))
    return concurrency


def post_knee_cause(regimes: dict[int, str], knee: int | None, post: str, interfered: bool = False,
                    bounds: dict[int, str] | None = None) -> str | None:
    """Why the curve does what it does past the knee; None before a knee is reached.

    ``"queueing"`` or ``"kv_cache_full"`` when any point past the knee measured that (the
    server's own limit, not batching, set those points), ``"limits_unknown"`` when a served
    endpoint's limits and metrics are unknown, ``"interference"`` when ``interfered`` (a point of
    the workload was flagged by the interference check or its repeats' spread, or the run's probe
    saw another load: a busy machine's plateau is no finding about batching), ``"compute"`` when the
    roofline of every point past the knee is bound by the compute roof (``bounds``: concurrency → ``"memory"`` or
    ``"compute"``, analysis' ``roofline_bound``; a CPU that emulates the served dtype is compute-bound from c = 1),
    else ``"batching"``: a plateau or a decline of batching itself (the bandwidth-to-compute cross-over, kernels
    that stop scaling).
    """
    if knee is None or post == "not_reached":
        return None
    past = [r for c, r in sorted(regimes.items()) if c > knee]
    for cause in ("queueing", "kv_cache_full", "limits_unknown"):
        if cause in past:
            return cause
    if interfered:
        return "interference"
    bounds = bounds or {}
    later = [c for c in bounds if c > knee]
    if later and all(bounds[c] == "compute" for c in later):
        return "compute"
    return "batching"
