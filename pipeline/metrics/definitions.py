"""Request and repeat records -> the metric definitions, one function per formula (pure; no I/O).

These are the reference forms, over :class:`~pipeline.core.records.RequestRecord` and
:class:`~pipeline.core.records.RepeatRecord` objects; :func:`pipeline.metrics.summarize.summarize_point` computes the same
figures over arrays, value for value (tests check both against values worked by hand).

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
- ITL (``itl_s``, per token, docs/definitions.md): chunks of one socket read are one read
  (:func:`merged_reads`: the client times reads, not the events inside one); a read of k tokens
  after the previous read contributes k gaps of (read gap / k).  Extra tokens in the first read
  arrived together with the first token and contribute gaps of 0, so every request has
  output_tokens − 1 ITL values and their sum is E2EL − TTFT.
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

A point's caveats: it counts its failed measured requests (``failed``,
``failure_rate`` = failed / measured) and, per flag of :mod:`pipeline.loadgen.tokencount`, the
requests whose token count set evidence aside (``caveats``, :func:`point_caveats`), and how many requests took their
count from each source (``token_count_sources``).  No division here can raise: an empty
window, a zero TPOT or a single-token request gives None.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from pipeline.core.records import RepeatRecord, RequestRecord


def merged_reads(chunks: list[list[float]]) -> list[list[float]]:
    """``chunks`` with every chunk that arrived in the same socket read as the chunk before it joined to that chunk.

    The served client stamps a read once (the time it returned), so the events of one read share one
    arrival time exactly and the gaps between them were never measured (the client saw them at once,
    the server sent them apart).  Chunks without tokens are dropped, except the first.  Returns
    ``[[arrival_s, n_tokens], …]``: one entry per read that carried tokens.
    """
    out: list[list[float]] = []
    for i, (t, k) in enumerate(chunks):
        k = int(k)
        if i and k <= 0:
            continue
        if i and out and t == out[-1][0]:
            out[-1][1] += k
        else:
            out.append([t, k])
    return out


def unresolved_chunks(req: RequestRecord) -> tuple[int, int]:
    """(chunks with tokens that arrived in the same read as the chunk before them, chunks with tokens) of a request:
    how many of its chunk gaps the client could not time (:func:`merged_reads`)."""
    with_tokens = [c for c in req.chunks if int(c[1]) > 0]
    return len(with_tokens) - len([c for c in merged_reads(req.chunks) if int(c[1]) > 0]), len(with_tokens)


def itl_values(req: RequestRecord) -> list[float]:
    """Per-token inter-token latencies (s) of one request; ``output_tokens − 1`` values for a complete stream.

    Chunks are ``[arrival_s, n_tokens]``, joined per socket read first (:func:`merged_reads`: the gaps
    inside one read were not timed, so they are never reported as 0); read i (i ≥ 1) with k tokens gives k
    gaps of (t_i − t_{i−1}) / k; the first read's extra tokens give gaps of 0 (they came with the first
    token, which TTFT times).
    """
    out: list[float] = []
    chunks = merged_reads(req.chunks)
    if not chunks:
        return out
    out.extend([0.0] * max(int(chunks[0][1]) - 1, 0))
    t_prev = chunks[0][0]
    for t, k in chunks[1:]:
        k = int(k)
        out.extend([(t - t_prev) / k] * k)
        t_prev = t
    return out


def itl_chunk_values(req: RequestRecord) -> list[float]:
    """vLLM's per-chunk inter-token latencies (s) of one request: one gap per chunk after the first.

    Source: ``vllm/benchmarks/lib/endpoint_request_func.py`` (``output.itl.append(timestamp −
    most_recent_timestamp)`` for every streamed chunk after the first).  A chunk of k tokens gives
    one gap, not k; chunks without a token (never kept by the client) are skipped, and so are the gaps
    inside one socket read (:func:`merged_reads`: not timed, never a gap of 0).
    """
    times = [t for t, k in merged_reads(req.chunks) if int(k) > 0]
    return [b - a for a, b in zip(times, times[1:])]


def ttst_s(req: RequestRecord) -> float | None:
    """Time to second token (s, AIPerf's ``time_to_second_token``): the second token's arrival − the first's.

    None when the second token came in the first token's read (not timed, :func:`merged_reads`) or never came.
    """
    chunks = [c for c in merged_reads(req.chunks) if int(c[1]) > 0]
    if len(chunks) < 2 or int(chunks[0][1]) > 1:
        return None
    return chunks[1][0] - chunks[0][0]


def repeat_ci95(values: list[float]) -> list[float] | None:
    """The 95 % confidence interval ``[low, high]`` of the mean of per-repeat values; None under 2 values.

    Student's t: mean ± t(0.975, n − 1) · s / √n, s the sample standard deviation (ddof 1), as a two-sided
    interval of a mean from n independent repeats (``scipy.stats.t.ppf``, once per n).  Nones and non-finite values
    are left out.  Sums by ``math.fsum`` over plain floats: a diff takes one interval per side of every metric at
    every point (tens of thousands on a site), where a numpy array per call cost more than the arithmetic.
    """
    xs = [float(v) for v in values if v is not None and math.isfinite(v)]
    n = len(xs)
    if n < 2:
        return None
    mean = math.fsum(xs) / n
    half = _t975(n - 1) * math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1) / n)
    return [mean - half, mean + half]


@functools.lru_cache(maxsize=None)
def _t975(df: int) -> float:
    """Student's t quantile t(0.975, ``df``) (``scipy.stats.t.ppf``; 4.302653 at 2 degrees of freedom)."""
    from scipy import stats

    return float(stats.t.ppf(0.975, df))


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


#: The lag (s) a client may run behind its schedule at p99 at any rate (timer and event-loop jitter).
SCHEDULE_LAG_FLOOR_S = 0.01
#: Share of the mean gap between sends the client may lag at p99 above the floor.
SCHEDULE_LAG_SHARE = 0.1


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


def schedule_rate(rep: RepeatRecord) -> float | None:
    """(measured requests sent − 1) / (last measured scheduled time − first): the rate of the schedule itself
    (requests/s; with Poisson gaps it differs from the offered rate by sampling, by about 1/√n); None under 2
    scheduled sends (closed loop, imported points).

    Under a concurrency cap the sends wait for a free slot, so :func:`send_rate` follows the completions and
    cannot show that the offered rate was not sustained; this rate can (``pipeline.analysis.ratesweep``).
    """
    sched = sorted(r.scheduled_s for r in rep.requests
                   if not r.warmup and r.scheduled_s is not None and not (r.error or "").startswith("not sent"))
    if len(sched) < 2 or sched[-1] <= sched[0]:
        return None
    return (len(sched) - 1) / (sched[-1] - sched[0])


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


def point_caveats(measured: list[RequestRecord]) -> tuple[dict[str, int], dict[str, int]]:
    """({caveat: requests with it}, {token count source: requests}) over measured requests (sorted keys).

    A point's caveats (``PointSummary.caveats``): ``failed_requests`` counts the failed ones; every
    token-count flag of a request (``token_count_flags``) counts the requests that carry it.
    """
    caveats: dict[str, int] = {}
    sources: dict[str, int] = {}
    for r in measured:
        if not r.ok:
            caveats["failed_requests"] = caveats.get("failed_requests", 0) + 1
        for f in r.token_count_flags or []:
            caveats[f] = caveats.get(f, 0) + 1
        if r.ok and r.token_count_source:
            sources[r.token_count_source] = sources.get(r.token_count_source, 0) + 1
    return dict(sorted(caveats.items())), dict(sorted(sources.items()))
