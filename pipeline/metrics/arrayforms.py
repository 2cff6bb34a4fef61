"""The metrics' array forms: each formula of :mod:`pipeline.metrics.definitions` over a point's arrays
(:class:`~pipeline.core.arrays.RequestArrays`), one function per metric, value for value (pure; no I/O).

The metric registry (:mod:`pipeline.metrics.registry`) names each metric's function here (or in
:mod:`pipeline.metrics.reads` for the per-read figures, :mod:`pipeline.metrics.clientside` for the client's);
:func:`pipeline.metrics.summarize.summarize_point` calls them and assembles the point, computing no formula of its own.
Per request: an array over every row (NaN where the reference form gives None), which the caller masks to the rows
it summarizes.  Per repeat: one figure (None where the reference form gives None) of the rows of one repeat.
No division here can raise: an empty window, a zero TPOT or a single-token request gives None or NaN.
"""

from __future__ import annotations

import numpy as np

from pipeline.core.arrays import RequestArrays
from pipeline.core.records import RepeatRecord

# -- per request: one value per row -----------------------------------------------------------------------------------


def ttft_array(a: RequestArrays) -> np.ndarray:
    """:func:`pipeline.metrics.definitions.ttft_s` of every row: first token − send (s)."""
    return a.first_token_s - a.sent_s


def ttft_with_queue_array(a: RequestArrays) -> np.ndarray:
    """TTFT with the client's queueing of every row: first token − queued (s)."""
    return a.first_token_s - a.queued_s


def e2el_array(a: RequestArrays) -> np.ndarray:
    """:func:`pipeline.metrics.definitions.e2el_s` of every row: last token − send (s)."""
    return a.done_s - a.sent_s


def first_content_array(a: RequestArrays) -> np.ndarray:
    """Time to first content of every row: the first visible (content, not reasoning) token − send (s); NaN where
    none came."""
    return a.first_content_s - a.sent_s


def tpot_streamed_array(a: RequestArrays) -> np.ndarray:
    """:func:`pipeline.metrics.definitions.tpot_streamed_s` of every row (NaN where it is None)."""
    n = a.output_tokens - a.hidden_tokens
    span = a.done_s - a.first_token_s
    with np.errstate(divide="ignore", invalid="ignore"):
        out = span / (n - 1)
    return np.where((n >= 2) & ~np.isnan(span) & (span > 0), out, np.nan)


def tpot_array(a: RequestArrays) -> np.ndarray:
    """:func:`pipeline.metrics.definitions.tpot_s` (vLLM's) of every row (NaN where it is None)."""
    n = a.output_tokens
    span = a.done_s - a.first_token_s
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.maximum(span, 0.0) / (n - 1)
    return np.where((n >= 2) & ~np.isnan(span), out, np.nan)


def request_end_array(a: RequestArrays) -> np.ndarray:
    """:func:`pipeline.metrics.definitions.request_end_s` of every row: its last token, else its first, else its send."""
    return np.where(~np.isnan(a.done_s), a.done_s, np.where(~np.isnan(a.first_token_s), a.first_token_s, a.sent_s))


def not_sent(a: RequestArrays) -> np.ndarray:
    """Bool per row: the request was never sent (its error says ``not sent``)."""
    return np.fromiter(((e or "").startswith("not sent") for e in a.error), dtype=bool, count=len(a))


def mean_tokens(tokens: np.ndarray, ok: np.ndarray) -> float | None:
    """``input_tokens_served`` / ``output_tokens_served``: the mean of ``tokens`` (as the server counted them) over
    the finished rows ``ok``; None without one."""
    n = int(np.count_nonzero(ok))
    return float(int(tokens[ok].sum())) / n if n else None


def failure_rate_of(measured: np.ndarray, failed: np.ndarray) -> float | None:
    """A point's failure rate: failed measured rows / measured rows (``PointSummary.failure_rate``); None without a
    measured row."""
    n = int(np.count_nonzero(measured))
    return int(np.count_nonzero(failed)) / n if n else None


# -- per repeat: one figure of the rows of one repeat ------------------------------------------------------------------


def duration_of(a: RequestArrays, sent: np.ndarray, end: np.ndarray) -> float | None:
    """:func:`pipeline.metrics.definitions.repeat_duration_s` of one repeat: its rows ``sent`` (measured and sent),
    first send → the last's end (``end``: :func:`request_end_array`), s; None when empty or not positive."""
    if not sent.any():
        return None
    span = float(end[sent].max()) - float(a.sent_s[sent].min())
    return span if span > 0 else None


def output_throughput_of(a: RequestArrays, ok: np.ndarray, rep: RepeatRecord, duration: float | None) -> float | None:
    """:func:`pipeline.metrics.definitions.repeat_output_throughput` of one repeat over its finished measured rows
    ``ok`` (tok/s): a static batch's decode tokens / its window (llama.cpp's S_TG), a served repeat's output tokens /
    ``duration`` (vLLM's ``output_throughput``)."""
    n_ok = int(np.count_nonzero(ok))
    span = rep.window_end_s - rep.window_start_s
    out_tokens = a.output_tokens[ok]
    if rep.batching == "static_batch":
        return int((out_tokens - 1).sum()) / span if n_ok and span > 0 else None
    return int(out_tokens.sum()) / duration if n_ok and duration is not None else None


def steady_throughput_of(a: RequestArrays, ok: np.ndarray, rep: RepeatRecord) -> float | None:
    """:func:`pipeline.metrics.definitions.repeat_steady_throughput` of one served repeat (tok/s): output tokens of
    ``ok`` / the measured window; None for a static batch."""
    span = rep.window_end_s - rep.window_start_s
    if rep.batching == "static_batch":
        return None
    return int(a.output_tokens[ok].sum()) / span if ok.any() and span > 0 else None


def prefill_throughput_of(a: RequestArrays, ok: np.ndarray, rep: RepeatRecord) -> float | None:
    """:func:`pipeline.metrics.definitions.repeat_prefill_throughput` of one static-batch repeat (tok/s): input tokens
    of ``ok`` / prefill time; None for a served repeat."""
    if rep.batching != "static_batch" or rep.prefill_start_s is None or not rep.step_end_s:
        return None
    pf = rep.step_end_s[0] - rep.prefill_start_s
    return int(a.input_tokens[ok].sum()) / pf if pf > 0 and ok.any() else None


def _rate(times: np.ndarray) -> float | None:
    """(n − 1) / (last − first) of ``times`` (requests/s); None under 2 or over no span."""
    s = np.sort(times)
    return None if len(s) < 2 or s[-1] <= s[0] else (len(s) - 1) / float(s[-1] - s[0])


def send_rate_of(a: RequestArrays, sent: np.ndarray) -> float | None:
    """:func:`pipeline.metrics.definitions.send_rate` of one repeat's measured sent rows ``sent`` (requests/s)."""
    return _rate(a.sent_s[sent])


def schedule_rate_of(a: RequestArrays, sent: np.ndarray) -> float | None:
    """:func:`pipeline.metrics.definitions.schedule_rate` of one repeat's measured sent rows ``sent`` that have a
    scheduled time (requests/s)."""
    return _rate(a.scheduled_s[sent & ~np.isnan(a.scheduled_s)])


def achieved_rate_of(ok: np.ndarray, rep: RepeatRecord) -> float | None:
    """:func:`pipeline.metrics.definitions.achieved_rate` of one repeat: finished measured rows ``ok`` / the measured
    window (requests/s); None for an empty window."""
    span = rep.window_end_s - rep.window_start_s
    return int(np.count_nonzero(ok)) / span if span > 0 else None


def per_user_of(streamed: np.ndarray) -> float | None:
    """Per-user throughput (tok/s): 1 / the median of ``streamed`` (streamed TPOTs, s); None without one or at a
    median of 0."""
    if not streamed.size:
        return None
    m = float(np.median(streamed))
    return 1.0 / m if m > 0 else None
