"""Served-run predictions: the simulated continuous-batching server driven by the calibrated terms (pure).

A served closed loop is more than a decode step: requests queue once ``max_num_seqs`` run, prompts are
prefilled in waves of at most ``max_num_batched_tokens`` tokens a step (chunked prefill) that stall the
decoding sequences, and a KV cache that is full makes requests wait or be preempted.  Instead of a closed
form of each, the prediction runs the simulated server of :mod:`pipeline.simulation.simserver` (vLLM V1's
scheduling rules) through its discrete-event loop (:func:`pipeline.simulation.simloop.simulate_repeat`) with:

- the step time of :mod:`pipeline.predict.calibrate`, written once in :func:`pipeline.cards.stepcost.calibrated_step_s`:
  ``overhead_s + bytes / (bandwidth_fraction × bandwidth) + FLOPs / (compute_fraction × peak)`` with the
  bytes and FLOPs of the step's own tokens and contexts (``ServerModel(calibrated=True)``);
- the fitted prefill rate: a step's prompt tokens cost tokens ÷ ``prefill_tok_s`` (by their FLOPs when no
  rate was fitted); the fitted fixed TTFT cost ``prefill_overhead_s`` as the delay from a request's send to
  the scheduler (``arrival_delay_s``);
- the server's limits as the run states them (``run.json`` ``server.servers.<model>.limits``:
  ``max_num_seqs``, ``max_num_batched_tokens``, ``max_model_len``, the KV cache in tokens and its block
  size); a limit the run does not state is taken as not binding (max_num_seqs: the largest concurrency
  predicted; KV: every sequence fits), except the token budget: vLLM's default for the OpenAI server,
  :data:`DEFAULT_MAX_NUM_BATCHED_TOKENS`;
- the run's workload: input and output lengths, the measured requests per repeat of each point (elsewhere
  the served backends' default, ``max(4 × c, 32)``), ``c`` warm-up requests first, as the served backends send.

Deterministic: no noise, one repeat per point.  The predicted output throughput, TPOT p50, TTFT p50 and E2EL
p50 are computed from the simulated requests by :func:`pipeline.metrics.summarize.summarize_point`, the definitions
every measured point is summarized by.  For a closed loop of c ≤ max_num_seqs whose prompts fit one step's
budget every wave runs in lock step, and this reduces to the closed form ``TTFT = delay + prefill step``,
``E2EL = TTFT + (output_len − 1) × T(c)`` (the tests work it by hand).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from pipeline.predict.calibrate import Roofs, StepTerms, fit_points, p50, predict_static, step_time_s
from pipeline.config.sweepconfig import SimulatedOptions
from pipeline.loadgen.scheduler import default_requests
from pipeline.config.workload import longest, repeat_lengths
from pipeline.config.arrivals import Load
from pipeline.simulation.simloop import SimPlan, simulate_repeat
from pipeline.backends.simulated import point_seed
from pipeline.simulation.simserver import BLOCK_SIZE, ServerModel, refusal
from pipeline.metrics.summarize import summarize_point
from pipeline.core.pointsummary import PointSummary
from pipeline.core.records import PointKey, PointRecords, RepeatRecord

#: Most rounds of the fit's correction by the simulated server, and the agreement that ends them (:func:`fit_served`).
REFINE_ROUNDS = 8
REFINE_TOLERANCE = 0.02

#: Token budget per step where the run does not state one: vLLM's default for its OpenAI server on a GPU
#: (``vllm/engine/arg_utils.py``), the simulated backend's default too (tokens).
DEFAULT_MAX_NUM_BATCHED_TOKENS: int = SimulatedOptions.model_fields["max_num_batched_tokens"].default


@dataclass(frozen=True)
class ServedLimits:
    """A served run's limits (None: not stated, not binding; see the module docstring).

    ``max_num_seqs`` (sequences), ``max_num_batched_tokens`` (tokens per step), ``max_model_len`` (tokens per
    sequence), ``kv_cache_tokens`` (tokens the KV cache holds), ``block_size`` (tokens per KV block).
    """

    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None
    kv_cache_tokens: int | None = None
    block_size: int | None = None

    @classmethod
    def of(cls, limits: dict[str, Any] | None) -> "ServedLimits":
        """From ``run.json``'s ``server.servers.<model>.limits`` (vLLM's own figures; the KV cache from
        ``kv_cache_size_tokens``, else ``num_gpu_blocks × block_size``); None or {} → no limit stated."""
        d = limits or {}

        def num(name: str) -> int | None:
            v = d.get(name)
            return int(v) if isinstance(v, (int, float)) and math.isfinite(v) and 0 < v < 2 ** 31 else None

        kv = num("kv_cache_size_tokens")
        if kv is None and num("num_gpu_blocks") and num("block_size"):
            kv = num("num_gpu_blocks") * num("block_size")
        return cls(num("max_num_seqs"), num("max_num_batched_tokens"), num("max_model_len"), kv, num("block_size"))


@dataclass(frozen=True)
class ServedSetup:
    """How the served points of a prediction are sent: requests of ``input_len`` prompt and ``output_len`` output
    tokens (or as ``workload``, the run's config or what has its ``lengths`` and ``seed``, draws them; None: every
    request the shape), on a server of ``limits``, ``requests[c]`` measured requests at concurrency c (default
    ``max(4 × c, 32)``) after c warm-up ones where ``warmup``."""

    input_len: int
    output_len: int
    limits: ServedLimits | None = None
    requests: dict[int, int] | None = None
    warmup: bool = True
    workload: Any = None


def calibrated_server(roofs: Roofs, terms: StepTerms, limits: ServedLimits, input_len: int, output_len: int,
                      largest_concurrency: int, lengths: Any = None) -> ServerModel:
    """The simulated server of ``roofs.card`` on ``roofs``' bandwidth and peak, driven by ``terms`` (module docstring).

    Limits not stated: max_num_seqs = ``largest_concurrency``; KV blocks for ``largest_concurrency`` whole sequences;
    max_model_len = the longest request ``lengths`` (a :class:`pipeline.config.workload.Lengths`, None: fixed) draws
    (input_len + output_len when fixed); the token budget :data:`DEFAULT_MAX_NUM_BATCHED_TOKENS`.
    """
    need = longest(lengths, input_len, output_len)
    bs = limits.block_size or BLOCK_SIZE
    blocks = (limits.kv_cache_tokens // bs if limits.kv_cache_tokens
              else max(largest_concurrency, 1) * math.ceil(need / bs))
    return ServerModel(
        card=roofs.card, bandwidth_gb_s=roofs.bandwidth_gb_s, peak_tflops=roofs.peak_tflops,
        step_overhead_s=terms.overhead_s, max_num_seqs=limits.max_num_seqs or max(largest_concurrency, 1),
        max_num_batched_tokens=limits.max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS,
        max_model_len=limits.max_model_len or need, num_blocks=blocks, block_size=bs, calibrated=True,
        bandwidth_fraction=terms.bandwidth_fraction, compute_fraction=terms.compute_fraction,
        prefill_tok_s=terms.prefill_tok_s, arrival_delay_s=terms.prefill_overhead_s or 0.0,
        routing_scale=roofs.routing_scale)


def predict_served(roofs: Roofs, terms: StepTerms, concurrencies: Sequence[int],
                   setup: ServedSetup) -> list[dict[str, float | None]]:
    """Served closed-loop predictions per concurrency, from the simulated server driven by ``terms``.

    Each dict: ``output_throughput_tok_s`` (tok/s), ``tpot_s``, ``ttft_s``, ``e2el_s`` (p50s, s) of one simulated
    repeat of ``setup.requests[c]`` measured requests (default ``max(4 × c, 32)``) after ``c`` warm-up ones
    (``setup.warmup``), summarized as a measured point is; ``step_time_s``: the calibrated decode step at the batch the
    server can run, ``T(min(c, max_num_seqs))`` (s).  Every value None where the server refuses the requests
    (longer than max_model_len, or one sequence over the KV cache).  ``workload`` (the run's config, or what has its
    ``lengths`` and ``seed``): each point's requests drawn as a one-repeat sweep of it draws them
    (:func:`pipeline.config.workload.repeat_lengths`, the point's seed); None: every request the shape.
    """
    input_len, output_len, requests, warmup, workload = (setup.input_len, setup.output_len, setup.requests,
                                                         setup.warmup, setup.workload)
    limits = setup.limits or ServedLimits()
    top = max([int(c) for c in concurrencies] + [1])
    out: list[dict[str, float | None]] = []
    for c in concurrencies:
        c = int(c)
        server = calibrated_server(roofs, terms, limits, input_len, output_len, top, getattr(workload, "lengths", None))
        step = float(step_time_s(roofs, terms, [min(c, server.max_num_seqs)])[0])
        if refusal(server, input_len, output_len):
            out.append({"output_throughput_tok_s": None, "tpot_s": None, "ttft_s": None, "e2el_s": None,
                        "step_time_s": step})
            continue
        n_meas = (requests or {}).get(c) or default_requests(c)
        key = PointKey(roofs.card.name, "simulated", input_len, output_len, c)
        drawn = None if workload is None else repeat_lengths(workload, key, (c if warmup else 0) + n_meas, 1, 0,
                                                             point_seed(workload.seed, key), server.max_model_len)
        res = simulate_repeat(server, SimPlan(input_len, output_len, c if warmup else 0, n_meas, Load(concurrency=c),
                                              token_times=False, lengths=drawn))
        meas = [q for q in res.requests if not q.warmup]
        done = [q.done_s for q in meas if q.ok]
        rep = RepeatRecord(repeat=0, batching="served", window_start_s=min(q.sent_s for q in meas),
                           window_end_s=max(done) if done else 0.0, requests=res.requests,
                           server_metrics=res.server_metrics)
        s = summarize_point(PointRecords(point=key, repeats=[rep]))
        out.append({"output_throughput_tok_s": s.output_throughput_tok_s, "tpot_s": p50(s.tpot_s),
                    "ttft_s": p50(s.ttft_s), "e2el_s": p50(s.e2el_s), "step_time_s": step})
    return out


def fit_served(roofs: Roofs, cal: list[PointSummary],
               setup: ServedSetup) -> tuple[StepTerms, dict[int, tuple[float, float]]]:
    """Fit the terms on served calibration points (sent as ``setup`` says) so that the simulated server reproduces
    them.

    :func:`pipeline.predict.calibrate.fit_points` reads a measured TPOT p50 as the decode step T(c) and a TTFT p50 as one
    wave, ``T(c) + prefill_overhead_s + c × input_len / prefill_tok_s``.  The server is more than that: in a
    staggered closed loop the prompts of arriving requests are prefilled in the decoding sequences' steps (TPOT =
    T(c) + their share), past ``max_num_batched_tokens`` a wave is prefilled over several steps, past max_num_seqs
    only max_num_seqs decode and the rest queue.  So: fit, simulate the calibration points with the fitted
    terms (:func:`predict_served`), and fit again on the measured values corrected by what the simulation adds to
    the closed forms, per point: TPOT ÷ (simulated TPOT ÷ T(c)), TTFT − (simulated TTFT − wave TTFT); until the
    simulation is within :data:`REFINE_TOLERANCE` of every calibration point's TPOT and TTFT, at most
    :data:`REFINE_ROUNDS` rounds.  Its fixed point (derived): the simulation's TPOT and TTFT equal the measured
    ones at the calibration points.

    Returns (terms, correction: the last {c: (TPOT factor, TTFT excess s)}, for the per-repeat fits).  Measured on
    a served curve the server made from known terms (tests/unit/predict/test_servedsim.py): the first fit alone predicts
    its throughput up to 38 % off past max_num_seqs; four rounds bring every point within 1 %.

    Raises:
        CalibrationError: as :func:`pipeline.predict.calibrate.fit_points`.
    """
    cs, input_len = [s.concurrency for s in cal], setup.input_len
    correction: dict[int, tuple[float, float]] = {}
    terms = fit_points(roofs, cal, False, input_len)
    for _ in range(REFINE_ROUNDS):
        sim = predict_served(roofs, terms, cs, setup)
        steps = step_time_s(roofs, terms, cs)
        off = [abs(p[m] / p50(getattr(s, m)) - 1) for s, p in zip(cal, sim) for m in ("tpot_s", "ttft_s")
               if p[m] and p50(getattr(s, m))]
        if off and max(off) <= REFINE_TOLERANCE:
            break
        correction = {}
        for c, step, p in zip(cs, steps, sim):
            prefill = c * input_len / terms.prefill_tok_s if terms.prefill_tok_s else 0.0
            wave = step + (terms.prefill_overhead_s or 0.0) + prefill
            correction[c] = (p["tpot_s"] / step if p["tpot_s"] else 1.0,
                             p["ttft_s"] - wave if p["ttft_s"] is not None else 0.0)
        terms = fit_points(roofs, cal, False, input_len, correction=correction)
    return terms, correction


def predict_curve(roofs: Roofs, terms: StepTerms, concurrencies: Sequence[int], static: bool,
                  setup: ServedSetup) -> list[dict[str, float | None]]:
    """:func:`pipeline.predict.calibrate.predict_static` (``static``: a static batch, B / T(B)) or :func:`predict_served`
    (``setup.workload``: its requests drawn as the sweep of it draws them)."""
    if static:
        return predict_static(roofs, terms, concurrencies)
    return predict_served(roofs, terms, concurrencies, setup)
