"""Point summaries + model cards + hardware -> ceilings, roofline, MBU/MFU, the analysis of a run (pure).

Definitions (docs/definitions.md):
- bandwidth ceiling (single stream) = bandwidth / bytes per decode step at B = 1 (tokens/s);
- roofline: step time(B) = max(bytes(B) / bandwidth, FLOPs(B) / peak FLOP/s); predicted
  output throughput = B / step time (Williams, Waterman & Patterson 2009, "Roofline");
- MBU = bytes per step / step time / bandwidth; MFU = FLOPs per step / step time / peak.
An MoE's expert bytes are counted at the routing of :mod:`pipeline.analysis.routing` (identical, k/E, for a static
batch of one prompt repeated; uniform otherwise), for the bytes, MBU and roofline alike.
:func:`analyze` joins these with the knee, its uncertainty and scaling efficiency of each workload's
curve (:mod:`pipeline.analysis.knee`), what each point measured (:mod:`pipeline.analysis.regime`), the open-loop rate
sweeps and SLO limits (:mod:`pipeline.analysis.ratesweep`), and the checks of numbers that cannot be right
(:func:`pipeline.analysis.quality.implausible_point`, :func:`pipeline.analysis.quality.implausible_model`: an MBU above 1,
a single stream above its bandwidth ceiling, means the model card or its weight format does not match
what was served; pages and ``show`` say so instead of printing the figure as a result).
Failed points and caveats: a point with any failed measured request, or any request
whose token count set evidence aside, has *caveats* (``caveats``: their names; not the quality
verdict *flagged* of :mod:`pipeline.analysis.quality`); a point whose failure rate
(failed / measured requests) is above ``max_failure_rate`` (config, default
:data:`pipeline.config.sweepconfig.EXCLUSION_FAILURE_RATE`), or that completed nothing, is *excluded*: it stays
in the tables, marked, but is left out of the knee, the peak, the single-stream figure and the
scaling efficiency, and ``excluded_reason`` says so (:func:`point_quality`); so is a client-bound point
(``PointSummary.client_bound``: the client's CPU or event-loop lag says it, not the server, was the limit,
:mod:`pipeline.metrics.clientside`).
Open loop: points sent at a rate (``poisson``/``constant``) stay out of the knee,
peak, single-stream and scaling figures (those are of the closed-loop concurrency grid) and out of
MBU (their batch varies from step to step).
Contexts: a decode step at a point reads on average input_len + output_len / 2 tokens of KV.
The compute roof of a model is the probe's matmul rate in the dtype it was served in where the probe measured that
dtype (:func:`roof_for_dtype`).  Bandwidth and peak used for ceilings, roofline, MBU and MFU alike: the probed figure where the
run has one, else the spec sheet (``*_spec`` and ``*_probed`` variants are reported beside).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.config.sweepconfig import EXCLUSION_FAILURE_RATE
from pipeline.analysis.knee import KNEE_THRESHOLD, find_knee, knee_uncertainty, kneedle, post_knee, scaling_efficiency
from pipeline.cards.modelcards import ModelCard
from pipeline.analysis.quality import (implausible_mfu, implausible_model, implausible_point, point_verdict,
                                       probe_saw_load, same_format)
from pipeline.analysis.pointquality import EXCLUDING_CAVEATS, point_quality, point_warnings  # noqa: F401 (their home before)
from pipeline.analysis.ratesweep import rate_sweep, slo_limit
from pipeline.core.pointsummary import PointSummary
from pipeline.core.records import Workload, server_key, workload_of
from pipeline.analysis.regime import decode_batch, point_regime, post_knee_cause
from pipeline.analysis.underread import under_read_roofs, under_read_text
from pipeline.analysis.routing import (COVERAGE_NOT_MEASURED, identical_prompts, implausible_mbu, routing_of,
                                      routing_scale_of)
from pipeline.cards.servedformat import bytes_at_b1_range, is_stated
from pipeline.cards.stepcost import (bytes_per_decode_step, flops_per_decode_step, kv_bytes_per_step,
                                    weight_bytes_per_step)


def mean_decode_context(input_len: int, output_len: int) -> float:
    """Mean KV context (tokens) over the decode steps of a request: input + output / 2."""
    return input_len + output_len / 2


def roofline_step_s(card: ModelCard, batch: int, context: float, bandwidth_gb_s: float,
                    peak_tflops: float | None, routing_scale: float | None = None) -> tuple[float, str]:
    """Roofline decode step time (s) and which roof binds (``"memory"`` or ``"compute"``); an MoE's experts counted at
    ``routing_scale`` (None: uniform routing, 0: identical, :func:`pipeline.cards.stepcost.effective_batch`)."""
    mem = bytes_per_decode_step(card, batch, context, routing_scale) / (bandwidth_gb_s * 1e9)
    comp = flops_per_decode_step(card, batch, context) / (peak_tflops * 1e12) if peak_tflops else 0.0
    return (mem, "memory") if mem >= comp else (comp, "compute")


def roof_for_dtype(probe: dict[str, Any] | None, hw: dict[str, Any], dtype: str | None) -> tuple[float | None, str | None]:
    """The compute roof a model served in ``dtype`` is measured against, TFLOP/s, and the dtype it was probed in.

    The probe's matmul rate in that dtype where it measured one (``peak_tflops_by_dtype``: a CPU probes float32
    and bfloat16, whose rates differ by 20× and more either way: AMX runs bfloat16 far faster, AVX2 emulates it far
    slower), else the roof used for every model (``hw["peak_tflops"]``) with the probe's dtype when it is the
    probed one (None: the spec sheet's).
    """
    by = (probe or {}).get("peak_tflops_by_dtype") or {}
    if hw.get("peak_tflops_probed") and dtype:
        for name, tflops in by.items():
            if same_format(name) == same_format(dtype) and tflops:
                return tflops, name
    return hw["peak_tflops"], ((probe or {}).get("dtype") if hw.get("peak_tflops_probed") else None)


def ceiling_tok_s(card: ModelCard, context: float, bandwidth_gb_s: float | None) -> float | None:
    """Single-stream bandwidth ceiling (tokens/s) = bandwidth / bytes per decode step at B = 1."""
    if not bandwidth_gb_s:
        return None
    return bandwidth_gb_s * 1e9 / bytes_per_decode_step(card, 1, context)


def ceiling_range_tok_s(card: ModelCard, context: float, bandwidth_gb_s: float | None) -> list[float] | None:
    """[lowest, highest] single-stream ceiling (tokens/s) over the formats ``card``'s model is plausibly served in
    (:func:`pipeline.cards.servedformat.bytes_at_b1_range`); one value twice when its format is stated."""
    if not bandwidth_gb_s:
        return None
    lo, hi = bytes_at_b1_range(card, lambda k: bytes_per_decode_step(k, 1, context))
    return [bandwidth_gb_s * 1e9 / hi, bandwidth_gb_s * 1e9 / lo]


def hardware_block(hardware: dict[str, Any], probe: dict[str, Any] | None) -> dict[str, Any]:
    """``analysis.json``'s ``hardware`` block (``show --json``'s too): the figures analysis uses (probed first, else
    spec) with both sources beside.

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


def card_of(cards: dict[str, Any], model: str, variant: str) -> Any:
    """A model's card under a variant: the variant's own where its server counts other bytes (an FP8 KV cache: the
    card stored as :func:`pipeline.core.records.server_key`), else the model's."""
    return cards.get(server_key(model, variant)) or cards.get(model)


def limits_of(limits: dict[str, Any] | None, model: str, variant: str) -> Any:
    """A model's server limits under a variant (``run.json`` ``server.servers`` by :func:`pipeline.core.records.server_key`)."""
    return (limits or {}).get(server_key(model, variant))


def ratio(num: float | None, den: float | None) -> float | None:
    """``num`` ÷ ``den``, or None when ``num`` is missing or ``den`` is missing or 0 (MBU, MFU, the explainers' ratios)."""
    return num / den if num is not None and den else None


def analyze(summaries: list[PointSummary], cards: dict[str, ModelCard], hardware: dict[str, Any],
            probe: dict[str, Any] | None = None, knee_threshold: float = KNEE_THRESHOLD,
            max_failure_rate: float = EXCLUSION_FAILURE_RATE,
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
            ``pipeline.backends.vllm.server_limits``); used with each point's server state to
            say what a point past the knee measured (:func:`point_regime`).

    Returns:
        ``{"hardware": {...}, "points": [...], "models": [...]}``: points carry MBU/MFU and
        the roofline prediction; models carry ceiling, knee, post-knee, peak and efficiency.
    """
    hw = hardware_block(hardware, probe)
    bw = hw["bandwidth_gb_s"]
    # MBU/MFU use the same figures as the ceiling and the roofline (probed first, else spec), so that
    # single stream / ceiling = MBU at c = 1 in every table; mbu_spec and mbu_probed are given beside.
    bw_mbu = bw  # the compute roof is each model's dtype's where the probe measured it (roof_for_dtype)

    def rows(under: dict[str | None, str]) -> list[dict[str, Any]]:
        return [_point_row(s, card_of(cards, s.model, s.variant), hw, probe, bw_mbu, limits, max_failure_rate, under)
                if s.load == "closed" else
                {**s.key.as_dict(), **point_quality(s, max_failure_rate), "mbu": None, "mfu": None, "regime": None,
                 "server": s.server, "implausible": None} for s in summaries]

    points_out = rows({})
    # a roof a point beat is under-read (analysis.underread): every point against it again, on the bandwidth alone
    under = under_read_roofs([(row, s.output_throughput_tok_s, row.get("roof_dtype"))
                              for s, row in zip(summaries, points_out) if s.load == "closed"],
                             ((probe or {}).get("cpu") or {}).get("native_dtype"))
    if under:
        points_out = rows(under)

    models_out = []
    # group once by workload (linear in the points: a scan per workload was quadratic at a lab's scale)
    by_workload: dict[Workload, list[tuple[PointSummary, dict[str, Any]]]] = {}
    for s, row in zip(summaries, points_out):  # one curve per workload (its variant a part of it)
        by_workload.setdefault(workload_of(s), []).append((s, row))
    for workload, all_pairs in sorted(by_workload.items(), key=lambda kv: kv[0]):
        judged = _Judged(hw, probe, knee_threshold, max_failure_rate, limits, under)
        models_out.append(_model_row(workload, all_pairs, card_of(cards, workload.model, workload.variant), judged))
        # the figures a page marks "not a result" (above 1 at the bytes counted): the run's clean line never calls
        # them plausible (analysis.checksmade.clean_claims)
        models_out[-1]["not_a_result"] = [f"{name} at c = {row.get('concurrency')}" for _, row in all_pairs
                                          for name in ("MBU", "MFU") if row.get(f"{name.lower()}_implausible")]
    return {"hardware": hw, "points": points_out, "models": models_out}


def _point_row(s: PointSummary, card: ModelCard | None, hw: dict[str, Any], probe: dict[str, Any] | None,
               bw_mbu: float | None, limits: dict[str, dict[str, Any]] | None, max_failure_rate: float,
               under: dict[str | None, str]) -> dict[str, Any]:
    """One closed-loop point's analysis row: bytes and FLOPs per decode step, MBU (of ``bw_mbu`` GB/s, the spec's
    and the probe's), MFU, the roofline's throughput (tok/s) and bound, its quality, regime and plausibility.
    Against a roof in ``under`` (:func:`pipeline.analysis.underread.under_read_roofs`) the roofline is the
    bandwidth's alone and MFU is withheld (``mfu_withheld`` says why)."""
    bw = hw["bandwidth_gb_s"]
    ctx = mean_decode_context(s.input_len, s.output_len)
    row: dict[str, Any] = {"model": s.model, "engine": s.engine, "variant": s.variant, "input_len": s.input_len,
                           "output_len": s.output_len, "concurrency": s.concurrency,
                           "bytes_per_step": None, "flops_per_step": None, "mbu": None, "mbu_spec": None,
                           "mbu_probed": None, "mfu": None, "roofline_tok_s": None, "roofline_bound": None,
                           "achieved_gb_s": None, "routing": None, **point_quality(s, max_failure_rate),
                           "regime": point_regime(s.concurrency, s.server, limits_of(limits, s.model, s.variant), s.engine),
                           "server": s.server}
    batch = decode_batch(s.concurrency, row["regime"], s.server, limits_of(limits, s.model, s.variant))
    row["batch"] = batch
    peak_c, roof_c = roof_for_dtype(probe, hw, card.quantization if card is not None else None)
    row["roof_dtype"] = roof_c
    if roof_c in under:  # an under-read roof: no MFU against it, no roofline bound by it
        peak_c, row["mfu_withheld"] = None, under_read_text(roof_c, None, under[roof_c])
    if card is not None:
        row["routing"] = routing_of(s, card.expert_bytes)  # a static batch of one prompt repeated: k/E (routing.py)
        scale = routing_scale_of(row["routing"])
        nbytes = bytes_per_decode_step(card, batch, ctx, scale)
        flops = flops_per_decode_step(card, batch, ctx)
        row.update(bytes_per_step=nbytes, flops_per_step=flops)
        if s.step_time_s:
            achieved = nbytes / s.step_time_s / 1e9
            row.update(achieved_gb_s=achieved, mbu=ratio(achieved, bw_mbu),
                       mbu_spec=ratio(achieved, hw["bandwidth_gb_s_spec"]),
                       mbu_probed=ratio(achieved, hw["bandwidth_gb_s_probed"]),
                       mfu=ratio(flops / s.step_time_s / 1e12, peak_c))
            if not is_stated(card) or card.expert_bytes:  # the MBU of the fewest plausible bytes: above 1 only if
                # every format is (one when stated) and every routing: an MoE's tokens may share experts (down to
                # identical routing, coverage k/E: stepcost.effective_batch), as vLLM's gpt-oss-120b Spark curve
                # does (routing_scale 8) and llama-batched-bench's identical prompts do, in a stated format too
                fewest, _ = bytes_at_b1_range(card, lambda k: weight_bytes_per_step(k, batch, 0.0 if k.expert_bytes
                                                                                    else None)
                                              + kv_bytes_per_step(k, batch, ctx))
                row["mbu_min"] = ratio(fewest / s.step_time_s / 1e9, bw_mbu)
        if bw:
            step, bound = roofline_step_s(card, batch, ctx, bw, peak_c, scale)
            row.update(roofline_tok_s=batch / step, roofline_bound=bound)
    row["implausible"] = implausible_point(row)
    row["mbu_implausible"] = None if row["implausible"] else implausible_mbu(row)
    row["mfu_implausible"] = implausible_mfu(row, roof_c, card.quantization if card is not None else None)
    return row


@dataclass(frozen=True)
class _Judged:
    """What every workload of a run is judged against: the hardware block and the probe, the knee's threshold, the
    failure rate past which a point is excluded, the server's limits by model and the roofs a point under-read
    (:func:`analyze`'s arguments of the same names)."""

    hw: dict[str, Any]
    probe: dict[str, Any] | None
    knee_threshold: float
    max_failure_rate: float
    limits: dict[str, dict[str, Any]] | None
    under: dict[str | None, str] | None = None


def _model_row(workload: Workload, all_pairs: list[tuple[PointSummary, dict[str, Any]]], card: ModelCard | None,
               judged: _Judged) -> dict[str, Any]:
    """One workload's (model, engine, variant, input, output length) analysis from its points and their rows: ceilings,
    knee, post-knee and its cause, peak, scaling efficiency, rate sweeps, SLO limit, plausibility."""
    hw, probe, knee_threshold, max_failure_rate, limits, under = (judged.hw, judged.probe, judged.knee_threshold,
                                                                  judged.max_failure_rate, judged.limits, judged.under)
    model, engine, variant, inp, out = workload
    bw = hw["bandwidth_gb_s"]
    opened = [s for s, _ in all_pairs if s.load != "closed"]
    pairs = [(s, row) for s, row in all_pairs if s.load == "closed"]
    mine = sorted((s for s, _ in pairs), key=lambda s: s.concurrency)
    quality = {s.concurrency: point_quality(s, max_failure_rate) for s in mine}
    excluded = [s.concurrency for s in mine if quality[s.concurrency]["excluded"]]
    curve = [(s.concurrency, s.output_throughput_tok_s) for s in mine
             if s.output_throughput_tok_s and not quality[s.concurrency]["excluded"]]
    ctx = mean_decode_context(inp, out)
    knee = find_knee(curve, knee_threshold) if len(curve) >= 2 else None
    curve_c = {c for c, _ in curve}
    uncertainty = knee_uncertainty([(s.concurrency, list(s.samples.get("output_throughput_tok_s") or []))
                                    for s in mine if s.concurrency in curve_c], knee, knee_threshold)
    peak_pt = max(curve, key=lambda p: p[1]) if curve else None
    regimes = {row["concurrency"]: row["regime"] for _, row in pairs}
    post = post_knee(curve, knee)
    interfered = probe_saw_load(probe) or any(
        point_verdict({"samples": s.samples, "interference": s.interference})["verdict"] == "flagged" for s in mine if s.concurrency in curve_c)
    single = next((t for c, t in curve if c == 1), None)
    roof = roof_for_dtype(probe, hw, card.quantization if card else None)
    m = {
        "model": model, "engine": engine, "variant": variant, "input_len": inp, "output_len": out,
        "kind": card.kind if card else None,
        "total_params": card.total_params if card else None,
        "active_params": card.active_params if card else None,
        "weight_bytes": card.weight_bytes if card else None,
        "kv_bytes_per_token": card.kv_bytes_per_token if card else None,
        "ceiling_tok_s": ceiling_tok_s(card, ctx, bw) if card else None,
        "ceiling_tok_s_spec": ceiling_tok_s(card, ctx, hw["bandwidth_gb_s_spec"]) if card else None,
        "ceiling_tok_s_probed": ceiling_tok_s(card, ctx, hw["bandwidth_gb_s_probed"]) if card else None,
        # the format unstated: the ceiling over every plausible served format (pipeline.cards.servedformat)
        "ceiling_tok_s_range": ceiling_range_tok_s(card, ctx, bw) if card else None,
        "format_stated": is_stated(card) if card else None,
        "served_format": (card.extra or {}).get("served_format") if card else None,
        "single_stream_tok_s": single,
        "knee_concurrency": knee,
        "knee_kneedle": kneedle(curve),
        "knee_threshold": knee_threshold,
        **uncertainty,
        "post_knee": post,
        "post_knee_cause": post_knee_cause(regimes, knee, post, interfered,
                                           {row["concurrency"]: row["roofline_bound"] for _, row in pairs
                                            if row.get("roofline_bound")}),
        "compute_roof_tflops": roof[0], "compute_roof_dtype": roof[1],
        "compute_roof_under_read": (under_read_text(roof[1], roof[0], (under or {})[roof[1]], card.quantization if card else None)
                                    if roof[1] in (under or {}) else None),
        "regimes": {str(c): r for c, r in sorted(regimes.items())},
        "server_limits": limits_of(limits, model, variant),
        "peak_output_throughput_tok_s": peak_pt[1] if peak_pt else None,
        "peak_concurrency": peak_pt[0] if peak_pt else None,
        "scaling_efficiency": {str(c): v for c, v in scaling_efficiency(curve).items()},
        "max_failure_rate": max_failure_rate,
        "excluded_concurrency": excluded,
        "caveat_concurrency": [s.concurrency for s in mine if quality[s.concurrency]["caveats"]],
    }
    if opened:
        sweeps = {}
        for s in opened:
            sweeps.setdefault((s.load, s.max_concurrency or 0), []).append(s)
        m["rate_sweeps"] = [rate_sweep(v) for _, v in sorted(sweeps.items())]
    if any(s.slo for s in mine):
        m["slo_concurrency"] = slo_limit([(s.concurrency, (s.slo or {}).get("met")) for s in mine])
    if card is not None and card.expert_bytes and mine and all(identical_prompts(s) for s in mine):
        m["coverage_not_measured"] = COVERAGE_NOT_MEASURED
    mine_rows = [row for _, row in pairs]
    m["implausible"] = implausible_model(m, mine_rows)
    return m
