"""Request records -> point summaries (pure; no I/O): one point's figures assembled into a
:class:`~pipeline.core.pointsummary.PointSummary`, computed over arrays (:mod:`pipeline.core.arrays`).

The definitions, one function per formula over request and repeat records, are
:mod:`pipeline.metrics.definitions` (TTFT, TPOT, ITL, output throughput, the open-loop send and achieved
rates, schedule kept, a point's caveats); their array forms, one function per metric, are
:mod:`pipeline.metrics.arrayforms`, the per-read figures' :mod:`pipeline.metrics.reads`, the client's
:mod:`pipeline.metrics.clientside`, SLO attainment and goodput :mod:`pipeline.metrics.goodput`; the metric registry
(:mod:`pipeline.metrics.registry`) names each metric's.  Here they are called over a point's arrays, per repeat and per
point, and the server's own view of the point (:func:`server_state`, from the ``/metrics`` scraped around and during
each repeat) is added.  Percentiles use numpy's linear interpolation (as ``vllm bench serve`` does).  No division
here can raise: an empty window, a zero TPOT or a single-token request gives None.
"""

from __future__ import annotations

from statistics import median
from typing import Any

import numpy as np

from pipeline.core.arrays import PointArrays, RequestArrays, from_records
from pipeline.metrics import arrayforms
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


# -- the formulas of pipeline.metrics.definitions over arrays: pipeline.metrics.arrayforms, pipeline.metrics.reads --

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


def _median_or_none(values: np.ndarray) -> float | None:
    return float(np.median(values)) if values.size else None


#: The per-repeat figures of :func:`_repeat_figures`, keyed by the metric registry's names (a repeat's own median or
#: p99 of a latency by its ``samples`` key; ``goodput_duration_s``: the goodput's window).
REPEAT_FIGURES = ("output_throughput_tok_s", "steady_output_throughput_tok_s", "duration_s", "goodput_duration_s",
                  "per_user_tok_s", "ttft_s_per_repeat", "tpot_s_per_repeat", "ttft_p99_s_per_repeat",
                  "tpot_p99_s_per_repeat", "prefill_throughput_tok_s", "send_rate_rps", "schedule_rate_rps",
                  "achieved_rate_rps")


def _repeat_figures(arrays: PointArrays, measured: np.ndarray, ok: np.ndarray, tpot: tuple[np.ndarray, np.ndarray],
                    streamed: tuple[np.ndarray, np.ndarray], ttft_all: np.ndarray, end_all: np.ndarray,
                    not_sent: np.ndarray) -> dict[str, list[float | None]]:
    """Each repeat's own figures, ``{name: one entry per repeat}`` (None where a repeat has none) for each name of
    :data:`REPEAT_FIGURES`, each by its array form (:mod:`pipeline.metrics.arrayforms`): output and steady throughput
    (tok/s), duration and goodput duration (s), per-user throughput, TTFT and TPOT medians and p99s (s), and a static
    batch's prefill throughput and an open-loop point's send, schedule and achieved rates (req/s; empty lists for
    other points).  ``tpot``, ``streamed``: each request's TPOT (s) and where it has one."""
    a, repeats, key = arrays.requests, arrays.repeats, arrays.point
    static = all(rep.batching == "static_batch" for rep in repeats)  # a static-batch point: its prefill figures
    tpot_all, has_tpot = tpot
    streamed_all, has_streamed = streamed
    out: dict[str, list[float | None]] = {name: [] for name in REPEAT_FIGURES}
    for i, rep in enumerate(repeats):
        in_rep = a.repeat == i
        rep_ok = in_rep & ok
        sent = in_rep & measured & ~not_sent
        dur = arrayforms.duration_of(a, sent, end_all)
        rt = tpot_all[rep_ok & has_tpot]
        figures = {
            "output_throughput_tok_s": arrayforms.output_throughput_of(a, rep_ok, rep, dur),
            "steady_output_throughput_tok_s": arrayforms.steady_throughput_of(a, rep_ok, rep),
            "duration_s": dur,
            # goodput's window (pipeline.metrics.goodput.goodput_duration_s): a static batch's decode phase, else
            # the duration
            "goodput_duration_s": (max(rep.window_end_s - rep.window_start_s, 0.0) if rep.batching == "static_batch"
                                   else dur or 0.0),
            "per_user_tok_s": arrayforms.per_user_of(streamed_all[rep_ok & has_streamed]),
            "ttft_s_per_repeat": _median_or_none(ttft_all[rep_ok]),
            "tpot_s_per_repeat": _median_or_none(rt),
            # each repeat's own p99 (the diff tests p99 on one value per repeat, the independent unit)
            "ttft_p99_s_per_repeat": float(np.percentile(ttft_all[rep_ok], 99)) if rep_ok.any() else None,
            "tpot_p99_s_per_repeat": float(np.percentile(rt, 99)) if rt.size else None}
        if static:
            figures["prefill_throughput_tok_s"] = arrayforms.prefill_throughput_of(a, rep_ok, rep)
        if key.open_loop:
            figures.update(send_rate_rps=arrayforms.send_rate_of(a, sent),
                           schedule_rate_rps=arrayforms.schedule_rate_of(a, sent),
                           achieved_rate_rps=arrayforms.achieved_rate_of(rep_ok, rep))
        for name, value in figures.items():
            out[name].append(value)
    return out


def _kept(values: list[float | None]) -> list[float]:
    """``values`` without their Nones."""
    return [v for v in values if v is not None]


def _samples(per_repeat: dict[str, list[float | None]], steps: list[float | None], ttfts: np.ndarray,
             tpots: np.ndarray) -> dict[str, list[float]]:
    """A point's samples: one value per repeat (``per_repeat``'s throughputs in tok/s and TTFT and TPOT medians and
    p99s in s, the step time, Nones left out), and every request's TTFT and TPOT (s)."""
    return {
        "output_throughput_tok_s": _kept(per_repeat["output_throughput_tok_s"]),
        "per_user_tok_s": _kept(per_repeat["per_user_tok_s"]),
        "step_time_s": _kept(steps),
        "ttft_s": ttfts.tolist(),
        "tpot_s": tpots.tolist(),
        **{name: _kept(per_repeat[name]) for name in ("ttft_s_per_repeat", "tpot_s_per_repeat", "ttft_p99_s_per_repeat",
                                                      "tpot_p99_s_per_repeat")},
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
    e2el = arrayforms.e2el_array(a)
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
    tpot_all = arrayforms.tpot_array(a)
    streamed_all = arrayforms.tpot_streamed_array(a)
    has_tpot = ok & ~np.isnan(tpot_all)
    has_streamed = ok & ~np.isnan(streamed_all)
    tpots = tpot_all[has_tpot]
    streamed = streamed_all[has_streamed]
    ttft_all = arrayforms.ttft_array(a)
    end_all = arrayforms.request_end_array(a)
    not_sent = arrayforms.not_sent(a)
    static = all(rep.batching == "static_batch" for rep in repeats)
    per_repeat = _repeat_figures(arrays, measured, ok, (tpot_all, has_tpot), (streamed_all, has_streamed), ttft_all,
                                 end_all, not_sent)
    med = {name: _med(values) for name, values in per_repeat.items()}  # each figure's median over repeats
    steps = [repeat_step_time(rep) for rep in repeats]
    step_time = _med(steps) if static else _median_or_none(streamed)
    per_user = arrayforms.per_user_of(streamed)
    caveats, sources = _point_caveats_arrays(a, measured, ok)
    firsts = arrayforms.first_content_array(a)[ok & ~np.isnan(a.first_content_s)]
    open_loop = key.open_loop
    lags = a.lag_s[measured & ~np.isnan(a.lag_s)].tolist()
    ttfts = ttft_all[ok]
    itls, itl_chunks, e2els = itl_array(a, ok), itl_chunk_array(a, ok), arrayforms.e2el_array(a)[ok]
    errors = sorted({e for e in a.error[failed] if e})[:10]
    meta = arrays.meta if isinstance(arrays.meta, dict) else {}
    windows = [(rep.window_start_s, rep.window_end_s) for rep in repeats]
    client = client_figures(meta.get("client"), windows)
    samples = {**_samples(per_repeat, steps, ttfts, tpots),
               **repeat_latencies(a, ok, len(repeats)), **client_repeat_samples(meta.get("client"), windows)}
    ci95 = {k: ci for k, v in samples.items() if k not in ("ttft_s", "tpot_s") and (ci := repeat_ci95(v)) is not None}
    return PointSummary(
        **client, **read_figures(a, ok), ci95=ci95 or None,
        load=key.load, rate_rps=key.rate_rps,
        **{name: med[name] if open_loop else None for name in ("send_rate_rps", "achieved_rate_rps", "schedule_rate_rps")},
        schedule_lag_s=distribution(lags) if open_loop else None,
        schedule_kept=schedule_kept(lags, key.rate_rps) if open_loop and key.rate_rps else None,
        slo=slo_goodput_arrays(arrays, slo, measured, ok, tpot_all, per_repeat["goodput_duration_s"]) if slo else None,
        failure_rate=arrayforms.failure_rate_of(measured, failed),
        caveats=caveats, token_count_sources=sources,
        time_to_first_content_s=distribution(firsts),
        model=key.model, engine=key.engine, variant=key.variant, input_len=key.input_len, output_len=key.output_len,
        concurrency=key.concurrency, max_concurrency=key.max_concurrency, repeats=len(repeats), completed=int(np.count_nonzero(ok)),
        failed=int(np.count_nonzero(failed)),
        output_throughput_tok_s=med["output_throughput_tok_s"], per_user_tok_s=per_user,
        output_throughput_window=(("decode_phase" if static else "send_to_completion")
                                  if med["output_throughput_tok_s"] is not None else None),
        ttft_s=distribution(ttfts),
        ttft_with_queue_s=distribution(arrayforms.ttft_with_queue_array(a)[ok]),
        tpot_s=distribution(tpots),
        tpot_streamed_s=distribution(streamed),
        itl_s=distribution(itls),
        itl_chunk_s=distribution(itl_chunks),
        steady_output_throughput_tok_s=None if static else med["steady_output_throughput_tok_s"],
        duration_s=None if static else med["duration_s"],
        input_tokens_served=arrayforms.mean_tokens(a.input_tokens, ok),
        output_tokens_served=arrayforms.mean_tokens(a.output_tokens, ok),
        e2el_s=distribution(e2els),
        tails_s={"ttft": tails(ttfts), "tpot": tails(tpots), "itl": tails(itls), "itl_chunk": tails(itl_chunks),
                 "e2el": tails(e2els)},
        prefill_throughput_tok_s=med["prefill_throughput_tok_s"] if static else None,
        step_time_s=step_time,
        errors=errors,
        server=server_state(arrays),  # type: ignore[arg-type]  # reads .repeats only
        interference=meta.get("interference"), burstiness=meta.get("burstiness") if key.load == "gamma" else None,
        samples=samples, length_hist=point_length_hists(arrays, measured, ok),
        lengths=drawn_lengths(a.drawn_input_len, a.drawn_output_len, measured, meta.get("lengths")))


def summarize_run(points: list[PointRecords] | list[PointArrays], slo: dict[str, float | None] | None = None) -> list[PointSummary]:
    """Summaries of every point in sweep order (``PointKey.sort_key``), each with its SLO check when ``slo`` is given."""
    return [summarize_point(p, slo) for p in sorted(points, key=lambda p: p.point.sort_key())]
