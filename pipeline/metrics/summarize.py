"""Request records -> point summaries (pure; no I/O): one point's figures assembled into a
:class:`~pipeline.core.pointsummary.PointSummary`, computed over arrays (:mod:`pipeline.core.arrays`).

The definitions, one function per formula over request and repeat records, are
:mod:`pipeline.metrics.definitions` (TTFT, TPOT, ITL, output throughput, the open-loop send and achieved
rates, schedule kept, a point's caveats); SLO attainment and goodput are :mod:`pipeline.metrics.goodput`; the
per-read figures over arrays (ITL, TTST, chunks) :mod:`pipeline.metrics.reads`.
Here the same formulas run over a point's arrays, value for value, and the server's own view of the
point (:func:`server_state`, from the ``/metrics`` scraped around and during each repeat) is added.
Percentiles use numpy's linear interpolation (as ``vllm bench serve`` does).  No division here can
raise: an empty window, a zero TPOT or a single-token request gives None.
"""

from __future__ import annotations

from statistics import median
from typing import Any

import numpy as np

from pipeline.core.arrays import PointArrays, RequestArrays, from_records
from pipeline.metrics.goodput import slo_goodput_arrays
from pipeline.metrics.lengthhist import point_length_hists
from pipeline.core.lengthstats import drawn_lengths
from pipeline.core.pointsummary import PointSummary, distribution, tails
from pipeline.core.records import PointRecords
from pipeline.metrics.clientside import client_figures, client_repeat_samples
from pipeline.metrics.definitions import repeat_ci95, repeat_step_time, schedule_kept
from pipeline.metrics.reads import itl_array, itl_chunk_array, read_figures, ttst_array

# Prometheus names per server for the state that explains a point (vLLM v1, vLLM v0, SGLang).
_KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage")
_WAITING = ("vllm:num_requests_waiting", "sglang:num_queue_reqs")
_RUNNING = ("vllm:num_requests_running", "sglang:num_running_reqs")
_PREEMPTIONS = ("vllm:num_preemptions_total", "vllm:num_preemptions")


def _first(sample: dict[str, Any] | None, names: tuple[str, ...], top: float = np.inf) -> float | None:
    """The first of ``names`` that ``sample`` holds as a finite number in [0, ``top``] (a KV fraction above 1 is no
    fraction: a sum over engines stored before they were kept apart, or a server's own fault; never shown)."""
    for n in names:
        v = (sample or {}).get(n)
        if isinstance(v, (int, float)) and np.isfinite(v) and 0 <= v <= top:
            return float(v)
    return None


def server_state(records: PointRecords) -> dict[str, float | None] | None:
    """The server's own view of a point, from the ``/metrics`` scraped around and during each repeat.

    Returns ``{"kv_cache_usage_max"`` (fraction 0–1 of the KV cache in use, highest sample),
    ``"requests_waiting_max"`` (requests queued in the server, highest sample),
    ``"requests_running_max"`` (requests decoded together, highest sample),
    ``"preemptions"`` (increase of the preemption counter over the repeats)``}``, each None
    when the server does not export it; None when nothing was scraped (the in-process backend,
    endpoints without ``/metrics``).  A data-parallel server's KV usage is its fullest engine's
    (:data:`pipeline.backends.scrape.FRACTION`); a KV value outside 0–1 is ignored, never shown above 100 %.  Samples are taken about once a second
    (:data:`pipeline.backends.scrape.EVERY_S`), so a shorter peak can be missed; non-finite values are ignored.
    """
    reps = [rep.server_metrics for rep in records.repeats if rep.server_metrics]
    if not reps:
        return None

    def peak(names: tuple[str, ...], top: float = np.inf) -> float | None:
        vals = [v for sm in reps for part in ("max_during", "before", "after")
                if (v := _first(sm.get(part), names, top)) is not None]
        return max(vals) if vals else None

    deltas = [a - b for sm in reps
              if (a := _first(sm.get("after"), _PREEMPTIONS)) is not None
              and (b := _first(sm.get("before"), _PREEMPTIONS)) is not None]
    return {"kv_cache_usage_max": peak(_KV_USAGE, 1.0), "requests_waiting_max": peak(_WAITING),
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


# -- the formulas of pipeline.metrics.definitions over arrays (pipeline.core.arrays): what summarize_point computes from --

def _point_caveats_arrays(a: RequestArrays, measured: np.ndarray, ok: np.ndarray) -> tuple[dict[str, int], dict[str, int]]:
    """:func:`pipeline.metrics.definitions.point_caveats` over the measured rows of ``a``."""
    caveats: dict[str, int] = {}
    n_failed = int(np.count_nonzero(measured & ~ok))
    if n_failed:
        caveats["failed_requests"] = n_failed
    for fl in a.token_count_flags[measured]:
        for f in fl or ():
            caveats[f] = caveats.get(f, 0) + 1
    sources: dict[str, int] = {}
    for src in a.token_count_source[ok]:
        if src:
            sources[src] = sources.get(src, 0) + 1
    return dict(sorted(caveats.items())), dict(sorted(sources.items()))


def _tpot_streamed_array(a: RequestArrays) -> np.ndarray:
    """:func:`pipeline.metrics.definitions.tpot_streamed_s` of every row (NaN where it is None)."""
    n = a.output_tokens - a.hidden_tokens
    span = a.done_s - a.first_token_s
    with np.errstate(divide="ignore", invalid="ignore"):
        out = span / (n - 1)
    return np.where((n >= 2) & ~np.isnan(span) & (span > 0), out, np.nan)


def _tpot_array(a: RequestArrays) -> np.ndarray:
    """:func:`pipeline.metrics.definitions.tpot_s` (vLLM's) of every row (NaN where it is None)."""
    n = a.output_tokens
    span = a.done_s - a.first_token_s
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.maximum(span, 0.0) / (n - 1)
    return np.where((n >= 2) & ~np.isnan(span), out, np.nan)


def _request_end_array(a: RequestArrays) -> np.ndarray:
    """:func:`pipeline.metrics.definitions.request_end_s` of every row: its last token, else its first, else its send."""
    return np.where(~np.isnan(a.done_s), a.done_s, np.where(~np.isnan(a.first_token_s), a.first_token_s, a.sent_s))


def _not_sent(a: RequestArrays) -> np.ndarray:
    return np.fromiter(((e or "").startswith("not sent") for e in a.error), dtype=bool, count=len(a))


def _duration_array(a: RequestArrays, in_rep: np.ndarray, measured: np.ndarray, not_sent: np.ndarray,
                    end: np.ndarray) -> float | None:
    """:func:`pipeline.metrics.definitions.repeat_duration_s` of one repeat (rows ``in_rep``)."""
    meas = in_rep & measured & ~not_sent
    if not meas.any():
        return None
    span = float(end[meas].max()) - float(a.sent_s[meas].min())
    return span if span > 0 else None


def _median_or_none(values: np.ndarray) -> float | None:
    return float(np.median(values)) if values.size else None


def _repeat_figures(arrays: PointArrays, measured: np.ndarray, ok: np.ndarray, tpot: tuple[np.ndarray, np.ndarray],
                    streamed: tuple[np.ndarray, np.ndarray], ttft_all: np.ndarray, end_all: np.ndarray,
                    not_sent: np.ndarray, static: bool) -> tuple[list, ...]:
    """Each repeat's own figures, one list per figure and one entry per repeat (None where it has none): output throughput (tok/s) and
    steady throughput, duration (s) and goodput duration, per-user throughput, TTFT and TPOT medians and p99s (s),
    prefill throughput of a static batch, and of an open-loop point the send, schedule and achieved rates (req/s).
    ``tpot``, ``streamed``: each request's TPOT (s) and where it has one.  In the order (thr, steady, durs,
    goodput_durs, per_user_rep, ttft_rep, tpot_rep, prefill, sends, achieved, scheds, ttft_p99_rep, tpot_p99_rep)."""
    a, repeats, key = arrays.requests, arrays.repeats, arrays.point
    tpot_all, has_tpot = tpot
    streamed_all, has_streamed = streamed
    thr, steady, durs, goodput_durs = [], [], [], []
    per_user_rep, ttft_rep, tpot_rep, prefill, sends, achieved, scheds = [], [], [], [], [], [], []
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
        # each repeat's own p99 (the diff tests p99 on one value per repeat, the independent unit)
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
            q = np.sort(a.scheduled_s[in_rep & measured & ~not_sent & ~np.isnan(a.scheduled_s)])
            scheds.append(None if len(q) < 2 or q[-1] <= q[0] else (len(q) - 1) / float(q[-1] - q[0]))  # schedule_rate
            achieved.append(n_ok / span if span > 0 else None)  # achieved_rate
    return (thr, steady, durs, goodput_durs, per_user_rep, ttft_rep, tpot_rep, prefill, sends, achieved, scheds,
            ttft_p99_rep, tpot_p99_rep)


def _samples(thr: list, per_user_rep: list, steps: list, ttfts: np.ndarray, tpots: np.ndarray,
             per_repeat: tuple[list, list, list, list]) -> dict[str, list[float]]:
    """A point's samples: one value per repeat (throughputs in tok/s, step time, and ``per_repeat``'s TTFT and TPOT
    medians and p99s in s, Nones left out), and every request's TTFT and TPOT (s)."""
    ttft_rep, tpot_rep, ttft_p99_rep, tpot_p99_rep = per_repeat
    return {
        "output_throughput_tok_s": [v for v in thr if v is not None],
        "per_user_tok_s": [v for v in per_user_rep if v is not None],
        "step_time_s": [v for v in steps if v is not None],
        "ttft_s": ttfts.tolist(),
        "tpot_s": tpots.tolist(),
        "ttft_s_per_repeat": [v for v in ttft_rep if v is not None],
        "tpot_s_per_repeat": [v for v in tpot_rep if v is not None],
        "ttft_p99_s_per_repeat": [v for v in ttft_p99_rep if v is not None],
        "tpot_p99_s_per_repeat": [v for v in tpot_p99_rep if v is not None],
    }


def repeat_latencies(a: RequestArrays, ok: np.ndarray, n_repeats: int) -> dict[str, list[float]]:
    """Each repeat's own ITL, E2EL and TTST over its successful measured requests ``ok``, one value per repeat that
    has any (s): ``itl_s_per_repeat`` (median per-token ITL, :func:`pipeline.metrics.reads.itl_array`),
    ``itl_mean_s_per_repeat`` (mean per-token ITL: Σ (E2EL − TTFT) / Σ (streamed tokens − 1) over the repeat's
    requests, since a request's per-token gaps sum to its E2EL − TTFT), ``e2el_s_per_repeat`` (median E2EL) and ``ttst_s_per_repeat`` (median time to second token,
    :func:`pipeline.metrics.reads.ttst_array`); a figure no repeat has is left out.  Medians, like
    ``ttft_s_per_repeat``: the repeat, not the request, is the independent sample (docs/diff-statistics.md)."""
    out: dict[str, list[float]] = {"itl_s_per_repeat": [], "itl_mean_s_per_repeat": [], "e2el_s_per_repeat": [],
                                   "ttst_s_per_repeat": []}
    e2el = a.done_s - a.sent_s
    for i in range(n_repeats):
        rows = ok & (a.repeat == i)
        itl, ttst = itl_array(a, rows), ttst_array(a, rows)
        for name, values, stat in (("itl_s_per_repeat", itl, np.median), ("itl_mean_s_per_repeat", itl, np.mean),
                                   ("e2el_s_per_repeat", e2el[rows], np.median), ("ttst_s_per_repeat", ttst, np.median)):
            if values.size:
                out[name].append(float(stat(values)))
    return {k: v for k, v in out.items() if v}


def summarize_point(records: PointRecords | PointArrays, slo: dict[str, float | None] | None = None) -> PointSummary:
    """Compute a :class:`PointSummary` from one point's records (warm-up requests excluded); with ``slo``, its
    :func:`pipeline.metrics.goodput.slo_goodput`.

    ``records`` as per-request objects are converted to arrays first (:func:`pipeline.core.arrays.from_records`);
    every figure is computed over arrays, by the formulas of the per-request functions of
    :mod:`pipeline.metrics.definitions` (:func:`~pipeline.metrics.definitions.tpot_s`, :func:`~pipeline.metrics.definitions.itl_values`,
    :func:`~pipeline.metrics.definitions.repeat_output_throughput`, …), value for value.
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
    (thr, steady, durs, goodput_durs, per_user_rep, ttft_rep, tpot_rep, prefill, sends, achieved, scheds,
     ttft_p99_rep, tpot_p99_rep) = _repeat_figures(arrays, measured, ok, (tpot_all, has_tpot),
                                                   (streamed_all, has_streamed), ttft_all, end_all, not_sent, static)
    steps = [repeat_step_time(rep) for rep in repeats]
    step_time = _med(steps) if static else _median_or_none(streamed)
    per_user = _inverse(float(np.median(streamed))) if streamed.size else None
    caveats, sources = _point_caveats_arrays(a, measured, ok)
    firsts = (a.first_content_s - a.sent_s)[ok & ~np.isnan(a.first_content_s)]
    open_loop = key.open_loop
    lags = a.lag_s[measured & ~np.isnan(a.lag_s)].tolist()
    ttfts = ttft_all[ok]
    itls, itl_chunks, e2els = itl_array(a, ok), itl_chunk_array(a, ok), (a.done_s - a.sent_s)[ok]
    errors = sorted({e for e in a.error[failed] if e})[:10]
    meta = arrays.meta if isinstance(arrays.meta, dict) else {}
    windows = [(rep.window_start_s, rep.window_end_s) for rep in repeats]
    client = client_figures(meta.get("client"), windows)
    samples = {**_samples(thr, per_user_rep, steps, ttfts, tpots, (ttft_rep, tpot_rep, ttft_p99_rep, tpot_p99_rep)),
               **repeat_latencies(a, ok, len(repeats)), **client_repeat_samples(meta.get("client"), windows)}
    ci95 = {k: ci for k, v in samples.items() if k not in ("ttft_s", "tpot_s") and (ci := repeat_ci95(v)) is not None}
    return PointSummary(
        **client, **read_figures(a, ok), ci95=ci95 or None,
        load=key.load, rate_rps=key.rate_rps, send_rate_rps=_med(sends) if open_loop else None,
        achieved_rate_rps=_med(achieved) if open_loop else None,
        schedule_rate_rps=_med(scheds) if open_loop else None,
        schedule_lag_s=distribution(lags) if open_loop else None,
        schedule_kept=schedule_kept(lags, key.rate_rps) if open_loop and key.rate_rps else None,
        slo=slo_goodput_arrays(arrays, slo, measured, ok, tpot_all, goodput_durs) if slo else None,
        failure_rate=int(np.count_nonzero(failed)) / int(np.count_nonzero(measured)) if measured.any() else None,
        caveats=caveats, token_count_sources=sources,
        time_to_first_content_s=distribution(firsts),
        model=key.model, engine=key.engine, variant=key.variant, input_len=key.input_len, output_len=key.output_len,
        concurrency=key.concurrency, max_concurrency=key.max_concurrency, repeats=len(repeats), completed=int(np.count_nonzero(ok)),
        failed=int(np.count_nonzero(failed)),
        output_throughput_tok_s=_med(thr), per_user_tok_s=per_user,
        output_throughput_window=("decode_phase" if static else "send_to_completion") if _med(thr) is not None else None,
        ttft_s=distribution(ttfts),
        ttft_with_queue_s=distribution((a.first_token_s - a.queued_s)[ok]),
        tpot_s=distribution(tpots),
        tpot_streamed_s=distribution(streamed),
        itl_s=distribution(itls),
        itl_chunk_s=distribution(itl_chunks),
        steady_output_throughput_tok_s=None if static else _med(steady),
        duration_s=None if static else _med(durs),
        input_tokens_served=float(int(a.input_tokens[ok].sum())) / int(np.count_nonzero(ok)) if ok.any() else None,
        output_tokens_served=float(int(a.output_tokens[ok].sum())) / int(np.count_nonzero(ok)) if ok.any() else None,
        e2el_s=distribution(e2els),
        tails_s={"ttft": tails(ttfts), "tpot": tails(tpots), "itl": tails(itls), "itl_chunk": tails(itl_chunks),
                 "e2el": tails(e2els)},
        prefill_throughput_tok_s=_med(prefill) if static else None,
        step_time_s=step_time,
        errors=errors,
        server=server_state(arrays),  # type: ignore[arg-type]  # reads .repeats only
        interference=meta.get("interference"), burstiness=meta.get("burstiness") if key.load == "gamma" else None,
        samples=samples, length_hist=point_length_hists(arrays, measured, ok),
        lengths=drawn_lengths(a.drawn_input_len, a.drawn_output_len, measured, meta.get("lengths")))


def summarize_run(points: list[PointRecords] | list[PointArrays], slo: dict[str, float | None] | None = None) -> list[PointSummary]:
    """Summaries of every point in sweep order (``PointKey.sort_key``), each with its SLO check when ``slo`` is given."""
    return [summarize_point(p, slo) for p in sorted(points, key=lambda p: p.point.sort_key())]
