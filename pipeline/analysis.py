"""Point summaries + model cards + hardware -> ceilings, roofline, MBU/MFU, knee, scaling efficiency (pure).

Definitions (docs/definitions.md):
- bandwidth ceiling (single stream) = bandwidth / bytes per decode step at B = 1 (tokens/s);
- roofline: step time(B) = max(bytes(B) / bandwidth, FLOPs(B) / peak FLOP/s); predicted
  output throughput = B / step time (Williams, Waterman & Patterson 2009, "Roofline");
- MBU = bytes per step / step time / bandwidth; MFU = FLOPs per step / step time / peak;
- knee: smallest grid concurrency from which every further doubling raises output
  throughput by less than the threshold; ``None`` ("not reached") when the last doubling
  measured still gains at least the threshold.  Past the knee the curve "declines" when its
  last point is more than 10 % below its peak, else it "plateaus";
- scaling efficiency at c = T(c) / (c × T(1)).
Knee uncertainty (issue 13): the knee above is of the medians over repeats; ``knee_per_repeat`` is
the knee (same definition, same threshold) of each repeat's own curve (repeat i of every point
of the workload), and ``knee_settled`` is True when every repeat gives the reported knee, False
when any differs, None when there are fewer than two repeats (nothing to compare).
Failed and flagged points (issue 12): a point with any failed measured request, or any request
whose token count set evidence aside, is *flagged* (``flags``); a point whose failure rate
(failed / measured requests) is above ``max_failure_rate`` (config, default 0.05), or that
completed nothing, is *excluded*: it stays in the tables, marked, but is left out of the knee,
the peak, the single-stream figure and the scaling efficiency, and ``excluded_reason`` says so.
Impossible numbers: no decode step can read its bytes faster than the memory delivers them, so
an MBU above 1 (or, the same at c = 1, a single stream above its bandwidth ceiling) means the
model card or its weight format (quantisation) does not match what was served.  Such a point
and its workload carry ``implausible`` (the reason, else None); pages and ``show`` say so
instead of printing the MBU or ceiling as a result (:func:`implausible_point`, :func:`implausible_model`).
Open loop (issue 10): points sent at a rate (``poisson``/``constant``) stay out of the knee,
peak, single-stream and scaling figures (those are of the closed-loop concurrency grid) and out of
MBU (their batch varies from step to step).  Per workload, :func:`rate_sweep` relates achieved to
offered rate: the workload is *saturated* from the first offered rate whose achieved rate falls
more than :data:`SATURATION_SHORTFALL` below the rate the client really sent at; ``max_achieved_rps``
is the capacity found.  With an SLO (``PointSummary.slo``), :func:`slo_limit` gives the highest
rate (open loop) and the highest concurrency (closed loop) up to which every point meets it.
Contexts: a decode step at a point reads on average input_len + output_len / 2 tokens of KV.
Bandwidth and peak used for ceilings, roofline, MBU and MFU alike: the probed figure where the
run has one, else the spec sheet (``*_spec`` and ``*_probed`` variants are reported beside).
"""

from __future__ import annotations

import math
from typing import Any

from pipeline.metrics import PointSummary
from pipeline.modelcards import ModelCard
from pipeline.quality import point_verdict
from pipeline.records import workload_of
from pipeline.stepcost import bytes_per_decode_step, flops_per_decode_step

DECLINE_FRACTION = 0.10
KNEE_THRESHOLD = 0.15  # default: a doubling that gains less than 15 % is weak (DESIGN.md)
MAX_FAILURE_RATE = 0.05  # default of the config key max_failure_rate


def mean_decode_context(input_len: int, output_len: int) -> float:
    """Mean KV context (tokens) over the decode steps of a request: input + output / 2."""
    return input_len + output_len / 2


def doubling_gains(points: list[tuple[int, float]]) -> list[float]:
    """Per-doubling throughput gain between successive grid points: (T2/T1)^(1/log2(c2/c1)) − 1."""
    gains = []
    for (c1, t1), (c2, t2) in zip(points, points[1:]):
        gains.append((t2 / t1) ** (1 / math.log2(c2 / c1)) - 1 if t1 > 0 else math.inf)
    return gains


def find_knee(points: list[tuple[int, float]], threshold: float = KNEE_THRESHOLD) -> int | None:
    """The knee concurrency of ``[(c, T(c)), ...]`` (sorted by c), or None when not reached.

    The smallest c_i such that every doubling from c_i onward gains < ``threshold``; at least
    one doubling after c_i must have been measured.  A lone weak step followed by strong
    gains (an MoE's 1 → 2) is therefore not a knee.
    """
    pts = sorted(points)
    gains = doubling_gains(pts)
    knee = None
    for i in range(len(gains) - 1, -1, -1):
        if gains[i] < threshold:
            knee = pts[i][0]
        else:
            break
    return knee


def knee_per_repeat(samples: list[tuple[int, list[float]]], threshold: float = KNEE_THRESHOLD) -> list[int | None]:
    """The knee of each repeat: :func:`find_knee` of ``[(c, samples_c[i]) for each c]`` for repeat i.

    ``samples`` is ``[(c, [T of repeat 0, T of repeat 1, ...]), ...]`` over the workload's knee curve
    (excluded points already left out).  Only repeats measured at every point are compared (the
    shortest list bounds them); fewer than two points or two repeats give ``[]``.
    """
    if len(samples) < 2:
        return []
    n = min(len(v) for _, v in samples)
    if n < 2:
        return []
    return [find_knee([(c, v[i]) for c, v in samples], threshold) for i in range(n)]


def knee_uncertainty(samples: list[tuple[int, list[float]]], knee: int | None,
                     threshold: float = KNEE_THRESHOLD) -> dict[str, Any]:
    """``{"knee_per_repeat": [...], "knee_settled": bool | None}`` (see the module docstring)."""
    per = knee_per_repeat(samples, threshold)
    return {"knee_per_repeat": per, "knee_settled": all(k == knee for k in per) if per else None}


def knee_uncertainty_of(model: dict[str, Any], summaries: list[dict[str, Any]],
                        analysis_points: list[dict[str, Any]]) -> dict[str, Any]:
    """The knee uncertainty of one analysed workload, from its point summaries (dicts) where an older
    ``analysis.json`` lacks ``knee_per_repeat``; the stored fields when present."""
    if "knee_per_repeat" in model:
        return {"knee_per_repeat": model["knee_per_repeat"], "knee_settled": model.get("knee_settled")}
    key = workload_of(model)
    excluded = {a["concurrency"] for a in analysis_points if a.get("excluded") and a.get("load", "closed") == "closed"
                and workload_of(a) == key}
    excluded |= set(model.get("excluded_concurrency") or [])
    samples = sorted((s["concurrency"], list((s.get("samples") or {}).get("output_throughput_tok_s") or []))
                     for s in summaries if workload_of(s) == key
                     and s.get("load", "closed") == "closed"
                     and s.get("output_throughput_tok_s") and s["concurrency"] not in excluded)
    return knee_uncertainty(samples, model.get("knee_concurrency"), model.get("knee_threshold") or KNEE_THRESHOLD)


def knee_words(knee: int | None, per_repeat: list[int | None] | None, settled: bool | None) -> str:
    """The knee with its uncertainty in words: ``"c = 16, not settled: repeats give 16, 32, 16"``,
    ``"c = 16, settled: all 3 repeats give 16"``, ``"not reached"`` (one repeat: nothing more to say)."""
    return (f"c = {knee}" if knee is not None else "not reached") + knee_spread_words(knee, per_repeat, settled)


def knee_spread_words(knee: int | None, per_repeat: list[int | None] | None, settled: bool | None) -> str:
    """What follows the knee in :func:`knee_words` (``", not settled: repeats give 16, 32, 16"``; ``""`` for one repeat)."""
    if not per_repeat or settled is None:
        return ""
    if settled:
        return (f", settled: all {len(per_repeat)} repeats give {knee}" if knee is not None
                else f", settled: reached in none of the {len(per_repeat)} repeats")
    return ", not settled: repeats give " + ", ".join("not reached" if k is None else str(k) for k in per_repeat)


def post_knee(points: list[tuple[int, float]], knee: int | None) -> str:
    """``"decline"`` (last point > 10 % below peak), ``"plateau"``, or ``"not_reached"`` (no knee)."""
    if knee is None:
        return "not_reached"
    peak = max(t for _, t in points)
    last = sorted(points)[-1][1]
    return "decline" if last < (1 - DECLINE_FRACTION) * peak else "plateau"


KV_FULL_FRACTION = 0.95
REGIME_TEXT = {"batching": "batching", "queueing": "queueing (more in flight than the server batches)",
               "kv_cache_full": "KV cache full / preemption", "limits_unknown": "server limits unknown",
               "interference": "busy machine: not attributed to batching"}
POST_KNEE_TEXT = {"plateau": "plateaus", "decline": "declines", "not_reached": "knee not reached"}


def post_knee_words(value: str | None) -> str:
    """The post-knee behaviour in words (``"not_reached"`` → ``"knee not reached"``), never the raw enum."""
    return "-" if value is None else POST_KNEE_TEXT.get(value, str(value).replace("_", " "))


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


def post_knee_cause(regimes: dict[int, str], knee: int | None, post: str, interfered: bool = False) -> str | None:
    """Why the curve does what it does past the knee; None before a knee is reached.

    ``"queueing"`` or ``"kv_cache_full"`` when any point past the knee measured that (the
    server's own limit, not batching, set those points), ``"limits_unknown"`` when a served
    endpoint's limits and metrics are unknown, ``"interference"`` when ``interfered`` (a point of
    the workload was flagged by the interference check or its repeats' spread, or the run's probe
    warned: issue 24, a busy machine's plateau is no finding about batching), else ``"batching"``:
    a plateau or a decline of batching itself (the bandwidth-to-compute cross-over, kernels that
    stop scaling).
    """
    if knee is None or post == "not_reached":
        return None
    past = [r for c, r in sorted(regimes.items()) if c > knee]
    for cause in ("queueing", "kv_cache_full", "limits_unknown"):
        if cause in past:
            return cause
    return "interference" if interfered else "batching"


def kneedle(points: list[tuple[int, float]]) -> int | None:
    """Second opinion: Kneedle (``kneed.KneeLocator``) on (log2 c, T), concave increasing; None if none."""
    if len(points) < 3:
        return None
    from kneed import KneeLocator

    pts = sorted(points)
    xs = [math.log2(c) for c, _ in pts]
    ys = [t for _, t in pts]
    try:
        loc = KneeLocator(xs, ys, curve="concave", direction="increasing", online=False)
    except (ValueError, ZeroDivisionError):
        return None
    if loc.knee is None or loc.knee in (xs[0], xs[-1]):
        return None  # an end point is no knee: the curve never bends inside the grid
    return int(round(2 ** loc.knee))


def scaling_efficiency(points: list[tuple[int, float]]) -> dict[int, float]:
    """``{c: T(c) / (c × T(1))}``; relative to the smallest c (c / c0 in the denominator) when 1 is absent."""
    pts = sorted(points)
    if not pts or pts[0][1] <= 0:
        return {}
    c0, t0 = pts[0]
    return {c: t / ((c / c0) * t0) for c, t in pts}


def roofline_step_s(card: ModelCard, batch: int, context: float, bandwidth_gb_s: float,
                    peak_tflops: float | None) -> tuple[float, str]:
    """Roofline decode step time (s) and which roof binds (``"memory"`` or ``"compute"``)."""
    mem = bytes_per_decode_step(card, batch, context) / (bandwidth_gb_s * 1e9)
    comp = flops_per_decode_step(card, batch, context) / (peak_tflops * 1e12) if peak_tflops else 0.0
    return (mem, "memory") if mem >= comp else (comp, "compute")


def ceiling_tok_s(card: ModelCard, context: float, bandwidth_gb_s: float | None) -> float | None:
    """Single-stream bandwidth ceiling (tokens/s) = bandwidth / bytes per decode step at B = 1."""
    if not bandwidth_gb_s:
        return None
    return bandwidth_gb_s * 1e9 / bytes_per_decode_step(card, 1, context)


def hardware_figures(hardware: dict[str, Any], probe: dict[str, Any] | None) -> dict[str, Any]:
    """The hardware block of ``show --json`` plus the figures analysis uses (probed first, else spec).

    ``*_probed``: what this machine's probe measured (``run.json``'s ``probe``; None when the run
    has no probe, e.g. an import); ``*_spec``: the hardware profile's spec sheet.  (Called
    ``*_measured`` before analysis schema version 2: "measured" is a run's source, not the probe.)
    """
    bw_probed = probe.get("bandwidth_gb_s") if probe else None
    tf_probed = probe.get("peak_tflops") if probe else None
    return {
        "name": hardware.get("name"),
        "bandwidth_gb_s_spec": hardware.get("bandwidth_gb_s_spec"),
        "bandwidth_gb_s_probed": bw_probed,
        "peak_tflops_spec": hardware.get("peak_tflops_spec"),
        "peak_tflops_probed": tf_probed,
        "memory_gb": hardware.get("memory_gb"),
        "bandwidth_gb_s": bw_probed or hardware.get("bandwidth_gb_s_spec"),
        "peak_tflops": tf_probed or hardware.get("peak_tflops_spec"),
    }


def point_quality(s: PointSummary, max_failure_rate: float = MAX_FAILURE_RATE) -> dict[str, Any]:
    """``{"failure_rate", "flags", "excluded", "excluded_reason"}`` of one point (module docstring).

    ``flags`` are the point's flag names (``failed_requests`` and the token-count flags of
    :mod:`pipeline.engines.tokencount`), sorted.  Imported points without a request count give
    a failure rate from ``completed`` and ``failed`` alone.
    """
    total = (s.completed or 0) + (s.failed or 0)
    rate = s.failure_rate if s.failure_rate is not None else (s.failed / total if total else None)
    flags = set((s.flags or {}).keys())
    if s.failed:
        flags.add("failed_requests")
    reason = None
    early = (s.flags or {}).get("count_below_max_tokens", 0)
    if total and not s.completed:
        reason = f"no request completed ({s.failed} failed)"
    elif rate is not None and rate > max_failure_rate:
        reason = (f"{s.failed} of {total} requests failed ({rate:.0%}, above max_failure_rate "
                  f"{max_failure_rate:.0%}); left out of knee, peak and scaling efficiency")
    elif total and early / total > max_failure_rate:
        reason = (f"{early} of {total} requests stopped before the requested {s.output_len} tokens although the server "
                  f"accepted ignore_eos ({early / total:.0%}, above max_failure_rate {max_failure_rate:.0%}); "
                  "left out of knee, peak and scaling efficiency")
    return {"failure_rate": rate, "flags": sorted(flags), "excluded": reason is not None, "excluded_reason": reason}


def point_warnings(s: PointSummary, max_failure_rate: float = MAX_FAILURE_RATE) -> list[str]:
    """What the sweep prints about one measured point's streams (issue 23), one line each; [] when nothing.

    - requests that stopped before ``max_tokens`` although the server accepted ``ignore_eos`` /
      ``min_tokens`` (``count_below_max_tokens``): the server does not honour them, and the point
      is not of the requested output length (left out of the analysis when widespread,
      :func:`point_quality`);
    - requests whose prompt the server counted differently from the one the client built
      (``input_tokens_mismatch``, :func:`pipeline.engines.tokencount.input_mismatch`): a tokenizer
      or chat-template mismatch; the records keep the server's count.
    """
    total = (s.completed or 0) + (s.failed or 0)
    flags = s.flags or {}
    out = []
    early = flags.get("count_below_max_tokens", 0)
    if early:
        got = f" (mean {s.output_tokens_served:.0f})" if s.output_tokens_served is not None else ""
        left = "; left out of the analysis" if total and early / total > max_failure_rate else ""
        out.append(f"{early} of {total} requests stopped before the requested {s.output_len} output tokens{got} "
                   f"although the server accepted ignore_eos: it does not honour it{left}")
    mism = flags.get("input_tokens_mismatch", 0)
    if mism:
        got = f" {s.input_tokens_served:.0f}" if s.input_tokens_served is not None else " another number of"
        out.append(f"{mism} of {total} requests: the server counted{got} prompt tokens for the {s.input_len} the "
                   "client built (a tokenizer or chat-template mismatch); check the model's tokenizer")
    return out


#: What an impossible MBU says about its inputs (shown wherever the flag is).
IMPLAUSIBLE_CAUSE = "the model card or its weight format (quantisation) does not match what was served"


def implausible_point(point: dict[str, Any]) -> str | None:
    """Why an analysed point's numbers cannot be right (MBU above 1), or None.

    Derived: MBU = bytes per step / step time / bandwidth; a step that reads its bytes faster than
    the memory's bandwidth would need MBU > 1, which no hardware does.
    """
    mbu = point.get("mbu")
    if mbu is not None and mbu > 1:
        return f"MBU {mbu:.2f} at c = {point['concurrency']} is above 1: {IMPLAUSIBLE_CAUSE}"
    return None


def implausible_mfu(point: dict[str, Any], roof_dtype: str | None = None, model_dtype: str | None = None) -> str | None:
    """Why an analysed point's MFU cannot be right (above 1), or None (issue 24).

    Derived: MFU = FLOPs per step / step time / peak FLOP/s; no step does more arithmetic per second than the
    peak it is measured against, so an MFU above 1 means the roof is too low for what ran: most often a peak
    probed in one dtype (the CPU probe multiplies float32 matrices) while the model ran in another (bfloat16
    in the committed vLLM run: MFU 1.016 at c = 32).  Unlike an MBU above 1 the memory figures stay valid, so
    the MFU is marked, not the workload.

    Args:
        point: an analysed point (``mfu``, ``concurrency``).
        roof_dtype: the dtype the compute roof was probed in (``run.json`` ``probe.dtype``), None when unknown
            or when the roof is the spec sheet's.
        model_dtype: the dtype the model ran in (its card's ``quantization``).
    """
    mfu = point.get("mfu")
    if mfu is None or mfu <= 1:
        return None
    if roof_dtype and model_dtype and roof_dtype != model_dtype:
        why = f"the compute roof was probed in {roof_dtype} while the model ran in {model_dtype}"
    else:
        why = "the peak FLOP/s it is measured against is below what the model reached (a roof of another dtype, or a wrong FLOP count)"
    return f"MFU {mfu:.2f} at c = {point.get('concurrency')} is above 1: {why}"


def implausible_model(model: dict[str, Any], points: list[dict[str, Any]] = ()) -> str | None:
    """Why a workload's numbers cannot be right, or None: a single stream above its bandwidth ceiling,
    or any of its analysed ``points`` with an MBU above 1 (:func:`implausible_point`)."""
    reasons = []
    single, ceiling = model.get("single_stream_tok_s"), model.get("ceiling_tok_s")
    if single is not None and ceiling and single > ceiling:
        reasons.append(f"single stream {single:.1f} tok/s is above its bandwidth ceiling {ceiling:.1f} tok/s")
    bad = sorted(p["concurrency"] for p in points if implausible_point(p))
    if bad:
        top = max((p["mbu"] for p in points if implausible_point(p)))
        reasons.append(f"MBU above 1 at c = {', '.join(map(str, bad))} (up to {top:.2f})")
    return f"{'; '.join(reasons)}: {IMPLAUSIBLE_CAUSE}" if reasons else None


#: Achieved rate this far below the sent rate marks saturation.  Derived: below saturation
#: achieved = n / ((n − 1) / rate + service time), within 3 % of the rate for n ≥ 30 requests whose
#: service time is under a gap; 10 % leaves room for the tail of a short point.
SATURATION_SHORTFALL = 0.10


def slo_limit(points: list[tuple[float, bool | None]]) -> dict[str, float | None]:
    """``{"max_ok", "first_failing"}`` over ``[(rate or concurrency, SLO met), ...]``: the highest x up to which
    every point met the SLO, and the first x that did not (None when none / all met); points with
    no verdict (None) are skipped."""
    max_ok = first_fail = None
    for x, met in sorted(points):
        if met is None:
            continue
        if not met:
            first_fail = x
            break
        max_ok = x
    return {"max_ok": max_ok, "first_failing": first_fail}


def rate_sweep(summaries: list[PointSummary]) -> dict[str, Any] | None:
    """The open-loop view of one workload's rate points (one load pattern and cap), or None without any.

    Returns ``{"load", "max_concurrency", "points": [{"rate_rps", "send_rate_rps",
    "achieved_rate_rps", "ttft_p99_s", "tpot_p99_s", "e2el_p99_s", "goodput_rps", "slo_met",
    "schedule_kept", "saturated"}], "saturation_rate_rps": first saturated offered rate or None,
    "max_achieved_rps", "slo": slo_limit over rates or None}``.
    """
    pts = sorted((s for s in summaries if s.load != "closed" and s.rate_rps), key=lambda s: s.rate_rps)
    if not pts:
        return None
    rows, saturation = [], None
    for s in pts:
        sent = s.send_rate_rps or s.rate_rps
        sat = s.achieved_rate_rps is not None and s.achieved_rate_rps < (1 - SATURATION_SHORTFALL) * sent
        if sat and saturation is None:
            saturation = s.rate_rps
        p99 = lambda d: (d or {}).get("p99")  # noqa: E731
        rows.append({"rate_rps": s.rate_rps, "send_rate_rps": s.send_rate_rps, "achieved_rate_rps": s.achieved_rate_rps,
                     "ttft_p99_s": p99(s.ttft_s), "tpot_p99_s": p99(s.tpot_s), "e2el_p99_s": p99(s.e2el_s),
                     "goodput_rps": (s.slo or {}).get("goodput_rps"), "slo_met": (s.slo or {}).get("met"),
                     "schedule_kept": s.schedule_kept, "saturated": sat})
    achieved = [r["achieved_rate_rps"] for r in rows if r["achieved_rate_rps"] is not None]
    has_slo = any(s.slo for s in pts)
    return {"load": pts[0].load, "max_concurrency": pts[0].concurrency, "points": rows,
            "saturation_rate_rps": saturation, "max_achieved_rps": max(achieved) if achieved else None,
            "slo": slo_limit([(r["rate_rps"], r["slo_met"]) for r in rows]) if has_slo else None}


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def analyze(summaries: list[PointSummary], cards: dict[str, ModelCard], hardware: dict[str, Any],
            probe: dict[str, Any] | None = None, knee_threshold: float = KNEE_THRESHOLD,
            max_failure_rate: float = MAX_FAILURE_RATE,
            limits: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """Analyse a run.

    Args:
        summaries: point summaries of the run.
        cards: model cards by model name (a model without a card gets nulls, never guesses).
        hardware: the run's hardware profile (``HardwareProfile.model_dump()``).
        probe: the run's probe result, when measured on this machine.
        knee_threshold: fractional gain per doubling below which a doubling is weak.
        max_failure_rate: failure rate above which a point is excluded from knee, peak and scaling.
        limits: the server's limits by model name (``--max-num-seqs`` …, see
            ``pipeline.engines.vllm.server_limits``); used with each point's server state to
            say what a point past the knee measured (:func:`point_regime`).

    Returns:
        ``{"hardware": {...}, "points": [...], "models": [...]}``: points carry MBU/MFU and
        the roofline prediction; models carry ceiling, knee, post-knee, peak and efficiency.
    """
    hw = hardware_figures(hardware, probe)
    bw, peak = hw["bandwidth_gb_s"], hw["peak_tflops"]
    # MBU/MFU use the same figures as the ceiling and the roofline (probed first, else spec), so that
    # single stream / ceiling = MBU at c = 1 in every table; mbu_spec and mbu_probed are given beside.
    bw_mbu, tf_mfu = bw, peak
    # the dtype of the compute roof: the probe's, when its peak is the one used (issue 24: an fp32 roof for a bf16 model)
    roof_dtype = (probe or {}).get("dtype") if hw["peak_tflops_probed"] else None
    points_out = []
    for s in summaries:
        if s.load != "closed":
            points_out.append({**s.key.as_dict(), **point_quality(s, max_failure_rate), "mbu": None, "mfu": None,
                               "regime": None, "server": s.server, "implausible": None})
            continue
        card = cards.get(s.model)
        ctx = mean_decode_context(s.input_len, s.output_len)
        row: dict[str, Any] = {"model": s.model, "engine": s.engine, "input_len": s.input_len,
                               "output_len": s.output_len, "concurrency": s.concurrency,
                               "bytes_per_step": None, "flops_per_step": None, "mbu": None, "mbu_spec": None,
                               "mbu_probed": None, "mfu": None, "roofline_tok_s": None, "roofline_bound": None,
                               "achieved_gb_s": None, **point_quality(s, max_failure_rate),
                               "regime": point_regime(s.concurrency, s.server, (limits or {}).get(s.model), s.engine),
                               "server": s.server}
        batch = decode_batch(s.concurrency, row["regime"], s.server, (limits or {}).get(s.model))
        row["batch"] = batch
        if card is not None:
            nbytes = bytes_per_decode_step(card, batch, ctx)
            flops = flops_per_decode_step(card, batch, ctx)
            row.update(bytes_per_step=nbytes, flops_per_step=flops)
            if s.step_time_s:
                achieved = nbytes / s.step_time_s / 1e9
                row.update(achieved_gb_s=achieved, mbu=_ratio(achieved, bw_mbu),
                           mbu_spec=_ratio(achieved, hw["bandwidth_gb_s_spec"]),
                           mbu_probed=_ratio(achieved, hw["bandwidth_gb_s_probed"]),
                           mfu=_ratio(flops / s.step_time_s / 1e12, tf_mfu))
            if bw:
                step, bound = roofline_step_s(card, batch, ctx, bw, peak)
                row.update(roofline_tok_s=batch / step, roofline_bound=bound)
        row["implausible"] = implausible_point(row)
        row["mfu_implausible"] = implausible_mfu(row, roof_dtype, card.quantization if card is not None else None)
        points_out.append(row)

    models_out = []
    # group once by workload (linear in the points; issue 9 "Scale": a scan per workload was quadratic)
    by_workload: dict[tuple[str, str, int, int], list[tuple[PointSummary, dict[str, Any]]]] = {}
    for s, row in zip(summaries, points_out):
        by_workload.setdefault(workload_of(s), []).append((s, row))
    for (model, engine, inp, out), all_pairs in sorted(by_workload.items(), key=lambda kv: kv[0]):
        opened = [s for s, _ in all_pairs if s.load != "closed"]
        pairs = [(s, row) for s, row in all_pairs if s.load == "closed"]
        mine = sorted((s for s, _ in pairs), key=lambda s: s.concurrency)
        quality = {s.concurrency: point_quality(s, max_failure_rate) for s in mine}
        excluded = [s.concurrency for s in mine if quality[s.concurrency]["excluded"]]
        curve = [(s.concurrency, s.output_throughput_tok_s) for s in mine
                 if s.output_throughput_tok_s and not quality[s.concurrency]["excluded"]]
        card = cards.get(model)
        ctx = mean_decode_context(inp, out)
        knee = find_knee(curve, knee_threshold) if len(curve) >= 2 else None
        curve_c = {c for c, _ in curve}
        uncertainty = knee_uncertainty([(s.concurrency, list(s.samples.get("output_throughput_tok_s") or []))
                                        for s in mine if s.concurrency in curve_c], knee, knee_threshold)
        peak_pt = max(curve, key=lambda p: p[1]) if curve else None
        regimes = {row["concurrency"]: row["regime"] for _, row in pairs}
        post = post_knee(curve, knee)
        interfered = bool((probe or {}).get("warning")) or any(
            point_verdict({"samples": s.samples, "interference": s.interference})["verdict"] == "flagged" for s in mine if s.concurrency in curve_c)
        single = next((t for c, t in curve if c == 1), None)
        models_out.append({
            "model": model, "engine": engine, "input_len": inp, "output_len": out,
            "kind": card.kind if card else None,
            "total_params": card.total_params if card else None,
            "active_params": card.active_params if card else None,
            "weight_bytes": card.weight_bytes if card else None,
            "kv_bytes_per_token": card.kv_bytes_per_token if card else None,
            "ceiling_tok_s": ceiling_tok_s(card, ctx, bw) if card else None,
            "ceiling_tok_s_spec": ceiling_tok_s(card, ctx, hw["bandwidth_gb_s_spec"]) if card else None,
            "ceiling_tok_s_probed": ceiling_tok_s(card, ctx, hw["bandwidth_gb_s_probed"]) if card else None,
            "single_stream_tok_s": single,
            "knee_concurrency": knee,
            "knee_kneedle": kneedle(curve),
            "knee_threshold": knee_threshold,
            **uncertainty,
            "post_knee": post,
            "post_knee_cause": post_knee_cause(regimes, knee, post, interfered),
            "regimes": {str(c): r for c, r in sorted(regimes.items())},
            "server_limits": (limits or {}).get(model),
            "peak_output_throughput_tok_s": peak_pt[1] if peak_pt else None,
            "peak_concurrency": peak_pt[0] if peak_pt else None,
            "scaling_efficiency": {str(c): v for c, v in scaling_efficiency(curve).items()},
            "max_failure_rate": max_failure_rate,
            "excluded_concurrency": excluded,
            "flagged_concurrency": [s.concurrency for s in mine if quality[s.concurrency]["flags"]],
        })
        if opened:
            sweeps = {}
            for s in opened:
                sweeps.setdefault((s.load, s.concurrency or 0), []).append(s)
            models_out[-1]["rate_sweeps"] = [rate_sweep(v) for _, v in sorted(sweeps.items())]
        if any(s.slo for s in mine):
            models_out[-1]["slo_concurrency"] = slo_limit([(s.concurrency, (s.slo or {}).get("met")) for s in mine])
        mine_rows = [row for _, row in pairs]
        models_out[-1]["implausible"] = implausible_model(models_out[-1], mine_rows)
    return {"hardware": hw, "points": points_out, "models": models_out}
