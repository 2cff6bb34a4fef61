"""Request records -> point summaries (pure; no I/O).

Definitions (docs/definitions.md, "Terms and definitions", and its table of peer definitions):
- TTFT = first token arrival − send; TTFT with client queueing = first token − queued.
- E2EL = last token arrival − send.
- TPOT (``tpot_s``, vLLM's ``tpot``, ``vllm/benchmarks/serve.py`` ``calculate_metrics``): per
  request with output_tokens > 1, (E2EL − TTFT) / (output_tokens − 1), output_tokens being the
  request's output count (server usage), not its streamed chunks; a request whose tokens all
  arrived at once gives 0, and is kept.
- streamed TPOT (``tpot_streamed_s``, batchmark's decode rate): (E2EL − TTFT) / (streamed
  tokens − 1), streamed tokens = output_tokens − hidden tokens (reasoning a server generated
  but never streamed); None for fewer than 2 streamed tokens or when every token arrived at
  once.  The step time of served points (MBU) and per-user throughput are taken from it.
- ITL (``itl_s``, per token, DESIGN.md): a chunk of k tokens after the previous chunk
  contributes k gaps of (chunk gap / k).  Extra tokens in the first chunk arrived together
  with the first token and contribute gaps of 0, so every request has output_tokens − 1 ITL
  values and their sum is E2EL − TTFT.
- chunk ITL (``itl_chunk_s``, vLLM's ``itl``, ``vllm/benchmarks/lib/endpoint_request_func.py``):
  one gap per chunk after the first, whatever tokens it carries.
- output throughput (``output_throughput_tok_s``).  Static batches: the window is the decode
  phase, tokens = B × (output_len − 1), which is llama.cpp's S_TG; prefill throughput =
  B × input_len / prefill time (S_PP).  Served: vLLM's ``output_throughput``: output tokens of
  the finished measured requests / duration, the duration running from the first measured send
  to the end of the last measured request, failed ones included (vLLM's ``benchmark_duration``
  over the same requests).  batchmark's own window (first measured send → last measured
  completion) gives ``steady_output_throughput_tok_s``.
- per-user throughput = 1 / median streamed TPOT (tokens/s).
Percentiles use numpy's linear interpolation (as ``vllm bench serve`` does).

Open loop (``poisson`` / ``constant`` points):
- send rate = (measured requests sent − 1) / (last measured send − first measured send): the
  rate the client really offered (requests/s);
- achieved rate = completed measured requests / measured window (requests/s, what vLLM calls
  ``request_throughput``): it follows the offered rate below saturation and flattens at the
  server's capacity above it;
- schedule lag = the client's own lateness per request (``RequestRecord.lag_s``); the schedule
  was kept when its p99 is at most :func:`schedule_lag_limit_s` (coordinated omission
  otherwise: the server saw fewer, later requests than the schedule asked for).

SLO and goodput (:func:`slo_goodput`, after vLLM's ``--goodput`` in
``vllm/benchmarks/serve.py``): a request is good when it finished and each of its TTFT, TPOT
and E2EL is at most the SLO's figure (a request with fewer than 2 tokens has TPOT 0, as vLLM
counts it); goodput = good requests / duration (requests/s) and their output tokens /
duration (tokens/s), the duration being the sum of the repeats' vLLM durations
(:func:`repeat_duration_s`).  A point
meets the SLO when the p99 of each given latency over its finished requests is within the
target and at most 1 % of its measured requests failed (a failed request counts as an
infinitely slow one, so more than 1 % of them put the p99 itself out of reach).

Failed and flagged work: a point counts its failed measured requests (``failed``,
``failure_rate`` = failed / measured) and, per flag of :mod:`pipeline.engines.tokencount`, the
requests whose token count set evidence aside (``flags``), and how many requests took their
count from each source (``token_count_sources``).  No division here can raise: an empty
window, a zero TPOT or a single-token request gives None.
"""

from __future__ import annotations

from statistics import median
from typing import Any

import numpy as np

from pipeline.arrays import PointArrays, RequestArrays, from_records
from pipeline.records import PointRecords, PointSummary, RepeatRecord, RequestRecord, distribution  # noqa: F401  (PointSummary: importable from here)


def itl_values(req: RequestRecord) -> list[float]:
    """Per-token inter-token latencies (s) of one request; ``output_tokens − 1`` values for a complete stream.

    Chunks are ``[arrival_s, n_tokens]``; chunk i (i ≥ 1) with k tokens gives k gaps of
    (t_i − t_{i−1}) / k; the first chunk's extra tokens give gaps of 0.
    """
    out: list[float] = []
    if not req.chunks:
        return out
    out.extend([0.0] * max(int(req.chunks[0][1]) - 1, 0))
    t_prev = req.chunks[0][0]
    for t, k in req.chunks[1:]:
        k = int(k)
        if k <= 0:  # a chunk without tokens: the gap runs on to the next chunk that carries some
            continue
        out.extend([(t - t_prev) / k] * k)
        t_prev = t
    return out


def itl_chunk_values(req: RequestRecord) -> list[float]:
    """vLLM's per-chunk inter-token latencies (s) of one request: one gap per chunk after the first.

    Source: ``vllm/benchmarks/lib/endpoint_request_func.py`` (``output.itl.append(timestamp −
    most_recent_timestamp)`` for every streamed chunk after the first).  A chunk of k tokens gives
    one gap, not k; chunks without a token (never kept by the client) are skipped.
    """
    times = [t for t, k in req.chunks if int(k) > 0]
    return [b - a for a, b in zip(times, times[1:])]


def ttft_s(req: RequestRecord) -> float:
    """First token arrival − send (s)."""
    return req.first_token_s - req.sent_s


def e2el_s(req: RequestRecord) -> float:
    """Last token arrival − send (s)."""
    return req.done_s - req.sent_s


def tpot_s(req: RequestRecord) -> float | None:
    """vLLM's TPOT (s): (E2EL − TTFT) / (output_tokens − 1) for output_tokens > 1, else None.

    Source: ``vllm/benchmarks/serve.py`` ``calculate_metrics`` (``tpot = (latency − ttft) /
    (output_len − 1)`` when ``output_len > 1``, output_len being the server's completion tokens).
    A request whose tokens all arrived at one instant gives 0 (kept, as vLLM keeps it).
    """
    n = req.output_tokens
    if n < 2 or req.done_s is None or req.first_token_s is None:
        return None
    return max(req.done_s - req.first_token_s, 0.0) / (n - 1)


def tpot_streamed_s(req: RequestRecord) -> float | None:
    """batchmark's decode rate (s): (E2EL − TTFT) / (streamed tokens − 1) (hidden reasoning tokens left out).

    None for fewer than 2 streamed tokens, or when the whole output arrived at one instant
    (no decode was observed, so no rate can be given).
    """
    n = req.streamed_tokens
    if n < 2 or req.done_s is None or req.first_token_s is None:
        return None
    span = req.done_s - req.first_token_s
    if span <= 0:
        return None
    return span / (n - 1)


def request_end_s(req: RequestRecord) -> float:
    """When a request ended (s): its last token, else (failed before any) the last thing known of it."""
    for t in (req.done_s, req.first_token_s):
        if t is not None:
            return t
    return req.sent_s


def repeat_duration_s(rep: RepeatRecord) -> float | None:
    """vLLM's benchmark duration over one served repeat's measured requests (s); None when empty.

    First measured send → end of the last measured request, failed ones included (derived from
    ``vllm/benchmarks/serve.py``: ``benchmark_duration`` runs from before the first send until
    every request returned, success or not).  Requests never sent are left out.
    """
    meas = [r for r in rep.requests if not r.warmup and not (r.error or "").startswith("not sent")]
    if not meas:
        return None
    span = max(request_end_s(r) for r in meas) - min(r.sent_s for r in meas)
    return span if span > 0 else None


def repeat_steady_throughput(rep: RepeatRecord) -> float | None:
    """batchmark's own output throughput of a served repeat (tokens/s): tokens / (first measured send → last measured completion)."""
    ok = [r for r in rep.requests if r.ok and not r.warmup]
    span = rep.window_end_s - rep.window_start_s
    if rep.batching == "static_batch" or not ok or span <= 0:
        return None
    return sum(r.output_tokens for r in ok) / span


def repeat_output_throughput(rep: RepeatRecord) -> float | None:
    """Output throughput of one repeat (tokens/s), per the module docstring; None if no window.

    Static batch: B × (output_len − 1) / decode phase (llama.cpp's S_TG).  Served: vLLM's
    ``output_throughput`` = output tokens of finished measured requests / :func:`repeat_duration_s`.
    """
    ok = [r for r in rep.requests if r.ok and not r.warmup]
    if rep.batching == "static_batch":
        span = rep.window_end_s - rep.window_start_s
        if not ok or span <= 0:
            return None
        return sum(r.output_tokens - 1 for r in ok) / span
    dur = repeat_duration_s(rep)
    if not ok or dur is None:
        return None
    return sum(r.output_tokens for r in ok) / dur


def repeat_step_time(rep: RepeatRecord) -> float | None:
    """Mean decode step time of a static-batch repeat (s) = decode window / decode steps."""
    if rep.batching != "static_batch" or not rep.step_end_s or len(rep.step_end_s) < 2:
        return None
    return (rep.step_end_s[-1] - rep.step_end_s[0]) / (len(rep.step_end_s) - 1)


def repeat_prefill_throughput(rep: RepeatRecord) -> float | None:
    """Prefill throughput of a static-batch repeat (tokens/s) = B × input tokens / prefill time."""
    if rep.batching != "static_batch" or rep.prefill_start_s is None or not rep.step_end_s:
        return None
    prefill = rep.step_end_s[0] - rep.prefill_start_s
    ok = [r for r in rep.requests if r.ok and not r.warmup]
    return sum(r.input_tokens for r in ok) / prefill if prefill > 0 and ok else None




# Prometheus names per server for the state that explains a point (vLLM v1, vLLM v0, SGLang).
_KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage")
_WAITING = ("vllm:num_requests_waiting", "sglang:num_queue_reqs")
_RUNNING = ("vllm:num_requests_running", "sglang:num_running_reqs")
_PREEMPTIONS = ("vllm:num_preemptions_total", "vllm:num_preemptions")


def _first(sample: dict[str, Any] | None, names: tuple[str, ...]) -> float | None:
    for n in names:
        v = (sample or {}).get(n)
        if isinstance(v, (int, float)) and np.isfinite(v):
            return float(v)
    return None


def server_state(records: PointRecords) -> dict[str, float | None] | None:
    """The server's own view of a point, from the ``/metrics`` scraped around and during each repeat.

    Returns ``{"kv_cache_usage_max"`` (fraction 0–1 of the KV cache in use, highest sample),
    ``"requests_waiting_max"`` (requests queued in the server, highest sample),
    ``"requests_running_max"`` (requests decoded together, highest sample),
    ``"preemptions"`` (increase of the preemption counter over the repeats)``}``, each None
    when the server does not export it; None when nothing was scraped (in-process engines,
    endpoints without ``/metrics``).  Samples are taken every 0.25 s, so a shorter peak
    can be missed; non-finite values are ignored.
    """
    reps = [rep.server_metrics for rep in records.repeats if rep.server_metrics]
    if not reps:
        return None

    def peak(names: tuple[str, ...]) -> float | None:
        vals = [v for sm in reps for part in ("max_during", "before", "after")
                if (v := _first(sm.get(part), names)) is not None]
        return max(vals) if vals else None

    deltas = [a - b for sm in reps
              if (a := _first(sm.get("after"), _PREEMPTIONS)) is not None
              and (b := _first(sm.get("before"), _PREEMPTIONS)) is not None]
    return {"kv_cache_usage_max": peak(_KV_USAGE), "requests_waiting_max": peak(_WAITING),
            "requests_running_max": peak(_RUNNING), "preemptions": float(sum(deltas)) if deltas else None}


def _med(values: list[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return float(median(vals)) if vals else None


def _mean(values: list[int]) -> float | None:
    """Arithmetic mean, None for no values."""
    return float(sum(values)) / len(values) if values else None


def _inverse(value: float) -> float | None:
    """1 / value, None when value is not positive."""
    return 1.0 / value if value > 0 else None


#: The lag (s) a client may run behind its schedule at p99 at any rate (timer and event-loop jitter).
SCHEDULE_LAG_FLOOR_S = 0.01
#: Share of the mean gap between sends the client may lag at p99 above the floor.
SCHEDULE_LAG_SHARE = 0.1
#: Share of failed requests above which a point's p99 cannot meet an SLO (failed = infinitely slow).
SLO_MAX_FAILED = 0.01


def schedule_lag_limit_s(rate_rps: float) -> float:
    """Largest p99 client lag (s) at which a schedule at ``rate_rps`` counts as kept: max(10 ms, 0.1 / rate).

    Derived: a send late by a tenth of the mean gap still leaves the arrivals in order and the
    rate within the per-cent accuracy a sweep reports; below 10 ms the lag is the event loop's
    timer granularity on a busy machine, not the client falling behind.
    """
    return max(SCHEDULE_LAG_FLOOR_S, SCHEDULE_LAG_SHARE / rate_rps)


def send_rate(rep: RepeatRecord) -> float | None:
    """(measured requests sent − 1) / (last measured send − first): the rate the client offered (requests/s); None under 2 sends."""
    sends = sorted(r.sent_s for r in rep.requests if not r.warmup and not (r.error or "").startswith("not sent"))
    if len(sends) < 2 or sends[-1] <= sends[0]:
        return None
    return (len(sends) - 1) / (sends[-1] - sends[0])


def achieved_rate(rep: RepeatRecord) -> float | None:
    """Completed measured requests / measured window (requests/s); None for an empty window."""
    span = rep.window_end_s - rep.window_start_s
    done = sum(1 for r in rep.requests if r.ok and not r.warmup)
    return done / span if span > 0 else None


def schedule_kept(lags_s: list[float], rate_rps: float) -> bool | None:
    """Whether the client kept its schedule: p99 of ``lags_s`` ≤ :func:`schedule_lag_limit_s`; None without lags."""
    if not lags_s:
        return None
    return bool(float(np.percentile(lags_s, 99)) <= schedule_lag_limit_s(rate_rps))


def goodput_duration_s(rep: RepeatRecord) -> float:
    """The time goodput divides by for one repeat (s): vLLM's duration (:func:`repeat_duration_s`) for a served
    repeat, the measured window for a static batch; 0 when empty."""
    if rep.batching == "static_batch":
        return max(rep.window_end_s - rep.window_start_s, 0.0)
    return repeat_duration_s(rep) or 0.0


def slo_goodput(records: PointRecords, slo: dict[str, float | None]) -> dict[str, Any]:
    """SLO attainment and goodput of one point.

    Args:
        records: the point's records (warm-up requests are left out).
        slo: ``{"ttft_p99_ms", "tpot_p99_ms", "e2el_p99_ms"}``, each a limit in ms or None (not checked).

    Returns:
        ``{**slo, "good": requests meeting every limit, "measured": measured requests,
        "share_ok": good / measured, "goodput_rps": good / Σ durations (requests/s, :func:`goodput_duration_s`),
        "goodput_tok_s": their output tokens / Σ durations (tokens/s),
        "p99_ok": {metric: p99 within its limit}, "met": every p99 within its limit and at most
        1 % failed}``; shares and rates are None when nothing was measured.  Source: vLLM's
        goodput (``vllm/benchmarks/serve.py``, ``calculate_metrics``: a request is good when
        every given latency is ≤ its limit; request goodput = good / duration).
    """
    limits = {m: slo.get(f"{m}_p99_ms") for m in ("ttft", "tpot", "e2el")}
    measured = [r for rep in records.repeats for r in rep.requests if not r.warmup]
    ok = [r for r in measured if r.ok]

    def lat(r: RequestRecord) -> dict[str, float]:
        return {"ttft": ttft_s(r), "tpot": tpot_s(r) or 0.0, "e2el": e2el_s(r)}

    good = [r for r in ok if all(v is None or lat(r)[m] <= v / 1000.0 for m, v in limits.items())]
    span = sum(goodput_duration_s(rep) for rep in records.repeats)
    p99_ok: dict[str, bool] = {}
    for m, v in limits.items():
        if v is not None:
            vals = [lat(r)[m] for r in ok]
            p99_ok[m] = bool(vals) and float(np.percentile(vals, 99)) <= v / 1000.0
    failed_share = (len(measured) - len(ok)) / len(measured) if measured else None
    return {**{f"{m}_p99_ms": v for m, v in limits.items()}, "good": len(good), "measured": len(measured),
            "share_ok": len(good) / len(measured) if measured else None,
            "goodput_rps": len(good) / span if span > 0 else None,
            "goodput_tok_s": sum(r.output_tokens for r in good) / span if span > 0 else None,
            "p99_ok": p99_ok,
            "met": bool(measured) and failed_share is not None and failed_share <= SLO_MAX_FAILED and all(p99_ok.values())}


def point_flags(measured: list[RequestRecord]) -> tuple[dict[str, int], dict[str, int]]:
    """({flag: requests with it}, {token count source: requests}) over measured requests (sorted keys).

    ``failed_requests`` counts the failed ones; every token-count flag counts the requests
    that carry it.
    """
    flags: dict[str, int] = {}
    sources: dict[str, int] = {}
    for r in measured:
        if not r.ok:
            flags["failed_requests"] = flags.get("failed_requests", 0) + 1
        for f in r.token_count_flags or []:
            flags[f] = flags.get(f, 0) + 1
        if r.ok and r.token_count_source:
            sources[r.token_count_source] = sources.get(r.token_count_source, 0) + 1
    return dict(sorted(flags.items())), dict(sorted(sources.items()))


# -- the same formulas over arrays (pipeline.arrays): what summarize_point computes from ------------

def _point_flags_arrays(a: RequestArrays, measured: np.ndarray, ok: np.ndarray) -> tuple[dict[str, int], dict[str, int]]:
    """:func:`point_flags` over the measured rows of ``a``."""
    flags: dict[str, int] = {}
    n_failed = int(np.count_nonzero(measured & ~ok))
    if n_failed:
        flags["failed_requests"] = n_failed
    for fl in a.token_count_flags[measured]:
        for f in fl or ():
            flags[f] = flags.get(f, 0) + 1
    sources: dict[str, int] = {}
    for src in a.token_count_source[ok]:
        if src:
            sources[src] = sources.get(src, 0) + 1
    return dict(sorted(flags.items())), dict(sorted(sources.items()))


def itl_array(a: RequestArrays, rows: np.ndarray) -> np.ndarray:
    """Per-token ITLs (s) of the requests selected by the bool mask ``rows``, in row order: :func:`itl_values`
    of each, concatenated, computed over the flat chunk arrays (same operations, same values)."""
    counts = np.diff(a.chunk_offsets)
    owner = np.repeat(np.arange(len(a)), counts)
    is_first = np.zeros(len(a.chunk_t_s), dtype=bool)
    is_first[a.chunk_offsets[:-1][counts > 0]] = True
    keep = rows[owner] & (is_first | (a.chunk_tokens > 0))
    t, k, first = a.chunk_t_s[keep], a.chunk_tokens[keep], is_first[keep]
    # a kept chunk that is not its request's first follows the previous kept chunk of the same request
    prev = np.empty_like(t)
    prev[1:] = t[:-1]
    prev[:1] = t[:1]
    with np.errstate(divide="ignore", invalid="ignore"):
        vals = np.where(first, 0.0, (t - prev) / np.where(first, 1, k))
    reps = np.where(first, np.maximum(k - 1, 0), k)
    return np.repeat(vals, reps)


def _tpot_streamed_array(a: RequestArrays) -> np.ndarray:
    """:func:`tpot_streamed_s` of every row (NaN where it is None)."""
    n = a.output_tokens - a.hidden_tokens
    span = a.done_s - a.first_token_s
    with np.errstate(divide="ignore", invalid="ignore"):
        out = span / (n - 1)
    return np.where((n >= 2) & ~np.isnan(span) & (span > 0), out, np.nan)


def _tpot_array(a: RequestArrays) -> np.ndarray:
    """:func:`tpot_s` (vLLM's) of every row (NaN where it is None)."""
    n = a.output_tokens
    span = a.done_s - a.first_token_s
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.maximum(span, 0.0) / (n - 1)
    return np.where((n >= 2) & ~np.isnan(span), out, np.nan)


def itl_chunk_array(a: RequestArrays, rows: np.ndarray) -> np.ndarray:
    """:func:`itl_chunk_values` of the requests selected by ``rows``, concatenated in row order (one gap per chunk
    with tokens after the first such chunk of the same request)."""
    counts = np.diff(a.chunk_offsets)
    owner = np.repeat(np.arange(len(a)), counts)
    keep = rows[owner] & (a.chunk_tokens > 0)
    t, own = a.chunk_t_s[keep], owner[keep]
    return (t[1:] - t[:-1])[own[1:] == own[:-1]]


def _request_end_array(a: RequestArrays) -> np.ndarray:
    """:func:`request_end_s` of every row: its last token, else its first, else its send."""
    return np.where(~np.isnan(a.done_s), a.done_s, np.where(~np.isnan(a.first_token_s), a.first_token_s, a.sent_s))


def _not_sent(a: RequestArrays) -> np.ndarray:
    return np.fromiter(((e or "").startswith("not sent") for e in a.error), dtype=bool, count=len(a))


def _duration_array(a: RequestArrays, in_rep: np.ndarray, measured: np.ndarray, not_sent: np.ndarray,
                    end: np.ndarray) -> float | None:
    """:func:`repeat_duration_s` of one repeat (rows ``in_rep``)."""
    meas = in_rep & measured & ~not_sent
    if not meas.any():
        return None
    span = float(end[meas].max()) - float(a.sent_s[meas].min())
    return span if span > 0 else None


def _median_or_none(values: np.ndarray) -> float | None:
    return float(np.median(values)) if values.size else None


def _slo_goodput_arrays(arrays: PointArrays, slo: dict[str, float | None], measured: np.ndarray, ok: np.ndarray,
                        tpot: np.ndarray, durations: list[float]) -> dict[str, Any]:
    """:func:`slo_goodput` over arrays (same formulas)."""
    a = arrays.requests
    limits = {m: slo.get(f"{m}_p99_ms") for m in ("ttft", "tpot", "e2el")}
    lat = {"ttft": a.first_token_s - a.sent_s, "tpot": np.where(np.isnan(tpot), 0.0, tpot), "e2el": a.done_s - a.sent_s}
    good = ok.copy()
    for m, v in limits.items():
        if v is not None:
            good &= lat[m] <= v / 1000.0
    n_measured, n_ok, n_good = int(np.count_nonzero(measured)), int(np.count_nonzero(ok)), int(np.count_nonzero(good))
    span = sum(durations)  # goodput_duration_s of each repeat
    p99_ok: dict[str, bool] = {}
    for m, v in limits.items():
        if v is not None:
            vals = lat[m][ok]
            p99_ok[m] = bool(vals.size) and float(np.percentile(vals, 99)) <= v / 1000.0
    failed_share = (n_measured - n_ok) / n_measured if n_measured else None
    return {**{f"{m}_p99_ms": v for m, v in limits.items()}, "good": n_good, "measured": n_measured,
            "share_ok": n_good / n_measured if n_measured else None,
            "goodput_rps": n_good / span if span > 0 else None,
            "goodput_tok_s": int(a.output_tokens[good].sum()) / span if span > 0 else None,
            "p99_ok": p99_ok,
            "met": bool(n_measured) and failed_share is not None and failed_share <= SLO_MAX_FAILED and all(p99_ok.values())}


def summarize_point(records: PointRecords | PointArrays, slo: dict[str, float | None] | None = None) -> PointSummary:
    """Compute a :class:`PointSummary` from one point's records (warm-up requests excluded); with ``slo``, its :func:`slo_goodput`.

    ``records`` as per-request objects are converted to arrays first (:func:`pipeline.arrays.from_records`);
    every figure is computed over arrays, by the formulas of the per-request functions above
    (:func:`tpot_s`, :func:`itl_values`, :func:`repeat_output_throughput`, …), value for value.
    """
    arrays = records if isinstance(records, PointArrays) else from_records(records)
    key, a, repeats = arrays.point, arrays.requests, arrays.repeats
    measured = ~a.warmup
    ok_all = a.ok
    ok = measured & ok_all
    failed = measured & ~ok_all
    tpot_all = _tpot_array(a)
    streamed_all = _tpot_streamed_array(a)
    has_tpot = ok & ~np.isnan(tpot_all)
    has_streamed = ok & ~np.isnan(streamed_all)
    tpots = tpot_all[has_tpot]
    streamed = streamed_all[has_streamed]
    ttft_all = a.first_token_s - a.sent_s
    end_all = _request_end_array(a)
    not_sent = _not_sent(a)
    static = all(rep.batching == "static_batch" for rep in repeats)
    thr, steady, durs, goodput_durs = [], [], [], []
    per_user_rep, ttft_rep, tpot_rep, prefill, sends, achieved = [], [], [], [], [], []
    ttft_p99_rep, tpot_p99_rep = [], []
    for i, rep in enumerate(repeats):
        in_rep = a.repeat == i
        rep_ok = in_rep & ok
        n_ok = int(np.count_nonzero(rep_ok))
        span = rep.window_end_s - rep.window_start_s
        out_tokens = a.output_tokens[rep_ok]
        dur = _duration_array(a, in_rep, measured, not_sent, end_all)  # repeat_duration_s
        if rep.batching == "static_batch":  # repeat_output_throughput, repeat_steady_throughput, goodput_duration_s
            thr.append(int((out_tokens - 1).sum()) / span if n_ok and span > 0 else None)
            steady.append(None)
            goodput_durs.append(max(span, 0.0))
        else:
            thr.append(int(out_tokens.sum()) / dur if n_ok and dur is not None else None)
            steady.append(int(out_tokens.sum()) / span if n_ok and span > 0 else None)
            goodput_durs.append(dur or 0.0)
        durs.append(dur)
        rt = tpot_all[rep_ok & has_tpot]
        rs = streamed_all[rep_ok & has_streamed]
        per_user_rep.append(_inverse(float(np.median(rs))) if rs.size else None)
        tpot_rep.append(float(np.median(rt)) if rt.size else None)
        ttft_rep.append(float(np.median(ttft_all[rep_ok])) if n_ok else None)
        # each repeat's own p99 (issue 22: the diff tests p99 on one value per repeat, the independent unit)
        tpot_p99_rep.append(float(np.percentile(rt, 99)) if rt.size else None)
        ttft_p99_rep.append(float(np.percentile(ttft_all[rep_ok], 99)) if n_ok else None)
        if static:  # repeat_prefill_throughput
            if rep.batching != "static_batch" or rep.prefill_start_s is None or not rep.step_end_s:
                prefill.append(None)
            else:
                pf = rep.step_end_s[0] - rep.prefill_start_s
                prefill.append(int(a.input_tokens[rep_ok].sum()) / pf if pf > 0 and n_ok else None)
        if key.open_loop:
            s = np.sort(a.sent_s[in_rep & measured & ~not_sent])
            sends.append(None if len(s) < 2 or s[-1] <= s[0] else (len(s) - 1) / float(s[-1] - s[0]))  # send_rate
            achieved.append(n_ok / span if span > 0 else None)  # achieved_rate
    steps = [repeat_step_time(rep) for rep in repeats]
    step_time = _med(steps) if static else _median_or_none(streamed)
    per_user = _inverse(float(np.median(streamed))) if streamed.size else None
    flags, sources = _point_flags_arrays(a, measured, ok)
    firsts = (a.first_content_s - a.sent_s)[ok & ~np.isnan(a.first_content_s)]
    open_loop = key.open_loop
    lags = a.lag_s[measured & ~np.isnan(a.lag_s)].tolist()
    ttfts = ttft_all[ok]
    errors = sorted({e for e in a.error[failed] if e})[:10]
    return PointSummary(
        load=key.load, rate_rps=key.rate_rps, send_rate_rps=_med(sends) if open_loop else None,
        achieved_rate_rps=_med(achieved) if open_loop else None,
        schedule_lag_s=distribution(lags) if open_loop else None,
        schedule_kept=schedule_kept(lags, key.rate_rps) if open_loop and key.rate_rps else None,
        slo=_slo_goodput_arrays(arrays, slo, measured, ok, tpot_all, goodput_durs) if slo else None,
        failure_rate=int(np.count_nonzero(failed)) / int(np.count_nonzero(measured)) if measured.any() else None,
        flags=flags, token_count_sources=sources,
        time_to_first_content_s=distribution(firsts),
        model=key.model, engine=key.engine, input_len=key.input_len, output_len=key.output_len,
        concurrency=key.concurrency, repeats=len(repeats), completed=int(np.count_nonzero(ok)),
        failed=int(np.count_nonzero(failed)),
        output_throughput_tok_s=_med(thr), per_user_tok_s=per_user,
        output_throughput_window=("decode_phase" if static else "send_to_completion") if _med(thr) is not None else None,
        ttft_s=distribution(ttfts),
        ttft_with_queue_s=distribution((a.first_token_s - a.queued_s)[ok]),
        tpot_s=distribution(tpots),
        tpot_streamed_s=distribution(streamed),
        itl_s=distribution(itl_array(a, ok)),
        itl_chunk_s=distribution(itl_chunk_array(a, ok)),
        steady_output_throughput_tok_s=None if static else _med(steady),
        duration_s=None if static else _med(durs),
        input_tokens_served=float(int(a.input_tokens[ok].sum())) / int(np.count_nonzero(ok)) if ok.any() else None,
        output_tokens_served=float(int(a.output_tokens[ok].sum())) / int(np.count_nonzero(ok)) if ok.any() else None,
        e2el_s=distribution((a.done_s - a.sent_s)[ok]),
        prefill_throughput_tok_s=_med(prefill) if static else None,
        step_time_s=step_time,
        errors=errors,
        server=server_state(arrays),  # type: ignore[arg-type]  (reads .repeats only)
        interference=arrays.meta.get("interference") if isinstance(arrays.meta, dict) else None,
        samples={
            "output_throughput_tok_s": [v for v in thr if v is not None],
            "per_user_tok_s": [v for v in per_user_rep if v is not None],
            "step_time_s": [v for v in steps if v is not None],
            "ttft_s": ttfts.tolist(),
            "tpot_s": tpots.tolist(),
            "ttft_s_per_repeat": [v for v in ttft_rep if v is not None],
            "tpot_s_per_repeat": [v for v in tpot_rep if v is not None],
            "ttft_p99_s_per_repeat": [v for v in ttft_p99_rep if v is not None],
            "tpot_p99_s_per_repeat": [v for v in tpot_p99_rep if v is not None],
        })


def summarize_run(points: list[PointRecords] | list[PointArrays], slo: dict[str, float | None] | None = None) -> list[PointSummary]:
    """Summaries of every point in sweep order (``PointKey.sort_key``), each with its SLO check when ``slo`` is given."""
    return [summarize_point(p, slo) for p in sorted(points, key=lambda p: p.point.sort_key())]
