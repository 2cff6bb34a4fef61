"""A calibrated per-step model: the roofline's bytes and FLOPs plus the few terms real engines add (pure).

The roofline (:mod:`pipeline.analysis.analyze`) is an upper bound: it assumes kernels that read at the
full probed bandwidth, compute at the full peak and cost nothing else.  Real engines reach a
fraction of each and pay a fixed cost per step (scheduling, kernel launches, sampling).  This
module fits those terms to a few measured points of a workload and predicts the rest of its
curve, so a reader learns *how far* an engine is from the arithmetic and *why*.

Step time at batch B (derived; the terms as Vidur, Agrawal et al., MLSys 2024, splits a step
into operator costs, with one fitted fraction per roof instead of per-operator profiles)::

    T(B) = overhead_s + bytes(B) / (bandwidth_fraction × bandwidth)
                      + FLOPs(B) / (compute_fraction × peak)

``bytes(B)`` and ``FLOPs(B)`` are :mod:`pipeline.cards.stepcost`'s (weights with the MoE expert
coverage ``1 − (1 − k/E)^B``, KV at the mean decode context; ``2 × B × params`` + attention).
The two roofs are *added*, not maxed: measured on the llama.cpp DGX Spark reference
(``../shared/reference/``), calibrated on three points, the additive form predicted the
other points with a median error of 4.9 % against 10.2 % for ``max`` (the max form's
compute roof never binds below B = 32 there, so it cannot bend the curve the way the
measured one bends: memory and compute phases of a step overlap only partly).

Predictions:
- static batch (the transformers backend, llama-batched-bench; ``output_throughput_window``
  ``"decode_phase"``): output throughput = B / T(B), TPOT = T(B);
- served, closed loop (continuous batching): the simulated server driven by these terms
  (:mod:`pipeline.predict.servedsim`): queueing past max_num_seqs, chunked prefill waves and the KV cache are
  the server's, the step time is T above for the step's own tokens and contexts.

Fit: least squares on log step times (each point weighted by the inverse of its relative spread
over repeats), with a weak prior pulling towards the roofline (no overhead, fractions 1) so that
three points fit three terms without running away; the prefill terms by linear least squares on
TTFT − T(B).  Identifiable: a dense model's step is linear in B (weights once, KV and FLOPs per sequence), so
its points tell apart only two numbers, the cost of a step before any sequence (overhead + weights)
and what each sequence adds (KV + compute); the prior splits each between its terms.  An MoE's
expert coverage bends the curve and a compute-bound top adds a kink, which separate more of the
terms; :func:`describe_terms` therefore states both identifiable numbers beside the fractions.
Uncertainty: the same fit on each repeat's own values; ``*_spread`` is the
standard deviation over repeats (None with one repeat).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from scipy.optimize import least_squares

from pipeline.cards.modelcards import ModelCard
from pipeline.core.pointsummary import PointSummary
from pipeline.cards.stepcost import (calibrated_step_s, flops_per_decode_step, kv_bytes_per_step,
                                     weight_bytes_per_step)

#: A prediction this far off its measurement (fraction) is called out.
CALL_OUT_FRACTION = 0.15
#: Throughput at a calibration point below c = 1's by more than this contradicts the model.
CONTRADICTION_FRACTION = 0.10
#: Weight of the roofline prior in the fit (relative to one point's log residual).
PRIOR_WEIGHT = 0.01
MAX_FRACTION = 1.0  # bound of the fitted fractions: no kernel reads faster than the bandwidth or computes past the peak


class CalibrationError(ValueError):
    """The points cannot be fitted: too few, or they contradict the per-step model (message says which)."""


@dataclass(frozen=True)
class StepTerms:
    """Fitted engine terms of one workload.

    ``overhead_s``: fixed cost per decode step (s); ``bandwidth_fraction``: fraction of the
    bandwidth the kernels reach (0–1.5; above 1 the card overstates the bytes);
    ``compute_fraction``: fraction of peak FLOP/s reached; ``prefill_tok_s`` and
    ``prefill_overhead_s``: served runs' prefill rate (tokens/s) and fixed TTFT cost (s), None
    for static batches.  ``spread``: standard deviation of each term over per-repeat fits.
    """

    overhead_s: float
    bandwidth_fraction: float
    compute_fraction: float
    prefill_tok_s: float | None = None
    prefill_overhead_s: float | None = None
    spread: dict[str, float | None] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON form: the terms and their ``*_spread``."""
        out: dict[str, Any] = {"overhead_s": self.overhead_s, "bandwidth_fraction": self.bandwidth_fraction,
                               "compute_fraction": self.compute_fraction, "prefill_tok_s": self.prefill_tok_s,
                               "prefill_overhead_s": self.prefill_overhead_s}
        for k, v in self.spread.items():
            out[f"{k}_spread"] = v
        return out


@dataclass(frozen=True)
class Roofs:
    """What the step model costs against: a card at a mean decode context on a bandwidth and peak.

    ``context``: mean KV tokens a decode step reads (tokens); ``bandwidth_gb_s`` (GB/s);
    ``peak_tflops`` (TFLOP/s, None when unknown: the compute term is then left out); ``routing_scale``: an MoE's
    routing locality, the experts a step of B tokens reads counted at their effective batch
    (:func:`pipeline.cards.stepcost.effective_batch`; None: uniform routing, the upper bound; 0: identical routing).
    """

    card: ModelCard
    context: float
    bandwidth_gb_s: float
    peak_tflops: float | None
    routing_scale: float | None = None

    def costs(self, batches: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Memory seconds at full bandwidth and compute seconds at full peak per step, arrays over ``batches``."""
        mem = np.array([weight_bytes_per_step(self.card, int(b), self.routing_scale)
                        + kv_bytes_per_step(self.card, int(b), self.context) for b in batches]) / (self.bandwidth_gb_s * 1e9)
        if self.peak_tflops:
            comp = np.array([flops_per_decode_step(self.card, int(b), self.context) for b in batches]) / (self.peak_tflops * 1e12)
        else:
            comp = np.zeros(len(batches))
        return mem, comp


def served_routing_scale(card: ModelCard, engine: str | None, hardware_name: str | None) -> float | None:
    """The routing locality a served MoE curve is fitted at: the hardware profile's prior for ``engine``
    (``engines.<engine>.routing_scale`` in ``data/hardware/``: distinct prompts share experts more the larger the
    batch; on a DGX Spark under vLLM s = 7.84, fitted to a published gpt-oss-120b curve), as ``plan`` and the simulated
    server count it.  None — uniform routing, the upper bound — for a dense model, an unknown profile or one that
    states no prior for the engine."""
    if not card.expert_bytes or not hardware_name:
        return None
    from pipeline.core.errors import BatchmarkError
    from pipeline.machine.hardware import load_profile

    try:
        terms = load_profile(hardware_name).engine_terms(engine)
    except BatchmarkError:
        return None
    return terms.routing_scale if terms is not None else None


def step_time_s(roofs: Roofs, terms: StepTerms, batches: Sequence[int]) -> np.ndarray:
    """Calibrated decode step time (s) at each batch of ``batches``: overhead + memory/fraction + compute/fraction
    (:func:`pipeline.cards.stepcost.calibrated_step_s`, at the mean decode context)."""
    mem, comp = roofs.costs(batches)
    return calibrated_step_s(mem, comp, terms.overhead_s, terms.bandwidth_fraction, terms.compute_fraction)


def default_calibration(concurrencies: Sequence[int], kind: str | None = "dense") -> tuple[list[int], str]:
    """The concurrencies to calibrate on by default, and why: the smallest, one between and the largest.

    The smallest pins the cost of one step (overhead + weights); the largest pins the compute and
    KV terms that grow with the batch.  Between them: for an MoE the next concurrency after the
    smallest (the first doubling), where expert coverage ``1 - (1 - k/E)^B`` changes fastest and
    bends the curve; for a dense model, whose step is linear in B, the grid point nearest the
    middle in log2(c), which pins the slope against the noise of one point better than a neighbour
    of the smallest.  Three terms, three points; every other point is then a test of the model.

    Raises:
        CalibrationError: fewer than three distinct concurrencies.
    """
    cs = sorted(set(int(c) for c in concurrencies))
    if len(cs) < 3:
        raise CalibrationError(f"{len(cs)} concurrencies measured ({', '.join(map(str, cs)) or 'none'}): "
                               "a fit of three terms needs at least three")
    if kind == "moe":
        mid = cs[1]
        why = f"c = {mid} (the first doubling: where expert coverage grows fastest)"
    else:
        centre = (math.log2(cs[0]) + math.log2(cs[-1])) / 2
        mid = min(cs[1:-1], key=lambda c: (abs(math.log2(c) - centre), c))
        why = f"c = {mid} (the middle in log2 c: the slope of a step that is linear in the batch)"
    return [cs[0], mid, cs[-1]], f"c = {cs[0]} (one step's cost), {why} and c = {cs[-1]} (where compute and KV grow largest)"


def check_consistent(curve: Sequence[tuple[int, float]], calibrate_on: Sequence[int]) -> None:
    """Refuse a calibration curve that contradicts the per-step model.

    A batched step reads the weights once for all its sequences, so B sequences never take longer
    than B single steps: output throughput at any c must not fall below c = 1's (the smallest c's).
    ``curve``: (concurrency, output throughput tok/s) pairs.

    The premise is of decode steps: where prefill dominates a served request (:func:`prefill_bound`: a long prompt,
    few output tokens; chunked prefill spreads each prompt over steps the others decode in), its prefill, which
    batching does not shorten, sets output throughput, which may then fall with c; ``batchmark predict`` refuses such
    a curve first, with that reason (:func:`prefill_bound_reason`), never calling it a contradiction.

    Raises:
        CalibrationError: a calibration point's throughput is more than
            :data:`CONTRADICTION_FRACTION` below the smallest concurrency's.
    """
    pts = dict(curve)
    c0 = min(pts)
    base = pts[c0]
    for c in sorted(calibrate_on):
        if c > c0 and c in pts and pts[c] < base * (1 - CONTRADICTION_FRACTION):
            raise CalibrationError(
                f"the points contradict the model: output throughput falls from {base:.1f} tok/s at c = {c0} "
                f"to {pts[c]:.1f} at c = {c}; a batched step cannot cost more than its sequences' single steps "
                "(a disturbed measurement, or a server limit: see the run's flags)")


def prefill_bound(s: PointSummary) -> bool:
    """Whether a served point's requests spent at least half their time before the first token (TTFT p50 ≥ E2EL p50
    / 2): prefill, not batched decode, then sets output throughput (:func:`check_consistent`).  False for a static
    batch (its window is the decode phase) and where either latency is unknown."""
    ttft, e2el = p50(s.ttft_s), p50(s.e2el_s)
    return not is_static(s) and bool(ttft and e2el) and ttft >= 0.5 * e2el


def prefill_bound_reason(s: PointSummary) -> str:
    """Why a prefill-bound served curve (:func:`prefill_bound`) gets no calibrated prediction, in one line."""
    return (f"prefill-bound: at c = {s.concurrency} the first token took {p50(s.ttft_s) * 1e3:,.0f} ms of a request's "
            f"{p50(s.e2el_s) * 1e3:,.0f} ms, so prefill, which batching does not shorten, sets this curve (its "
            "throughput may fall with c); the per-step model fits decode steps and cannot fit it "
            "(`batchmark plan` predicts it from the engine's prefill rate)")


def fit_step_terms(roofs: Roofs, batches: Sequence[int], step_times_s: Sequence[float],
                   rel_spread: Sequence[float] | None = None) -> StepTerms:
    """Fit overhead, bandwidth fraction and compute fraction to measured step times (s) at ``batches``.

    Least squares on ``log T(B) − log measured``; a point's residual is divided by its relative
    spread over repeats (floored at 2 %) when given.  A weak prior (:data:`PRIOR_WEIGHT`) pulls
    towards the roofline: overhead 0 (relative to the smallest measured step), fractions 1.

    Raises:
        CalibrationError: no positive step time.
    """
    b = np.asarray(batches, dtype=float)
    t = np.asarray(step_times_s, dtype=float)
    if len(t) == 0 or not np.all(np.isfinite(t)) or np.any(t <= 0):
        raise CalibrationError("step times must be positive and finite")
    w = np.ones_like(t) if rel_spread is None else 1.0 / np.maximum(np.asarray(rel_spread, dtype=float), 0.02)
    w = w / w.max()
    mem, comp = roofs.costs([int(x) for x in b])
    has_comp = bool(np.any(comp > 0))
    t_min = float(t.min())

    def model(p: np.ndarray) -> np.ndarray:
        return calibrated_step_s(mem, comp if has_comp else 0.0, p[0], p[1], p[2])

    def residuals(p: np.ndarray) -> np.ndarray:
        r = w * (np.log(model(p)) - np.log(t))
        prior = PRIOR_WEIGHT * np.array([p[0] / t_min, math.log(p[1]), math.log(p[2]) if has_comp else 0.0])
        return np.concatenate([r, prior])

    x0 = np.array([0.0, min(1.0, float(mem[0] / t[0])) or 0.5, 0.5])
    x0[1] = min(max(x0[1], 1e-3), MAX_FRACTION)
    fit = least_squares(residuals, x0, bounds=([0.0, 1e-3, 1e-4], [t_min, MAX_FRACTION, MAX_FRACTION]))
    o, fb, fc = (float(v) for v in fit.x)
    return StepTerms(overhead_s=o, bandwidth_fraction=fb, compute_fraction=fc if has_comp else 1.0)


def fit_prefill(batches: Sequence[int], input_len: int, ttft_s: Sequence[float],
                decode_step_s: Sequence[float]) -> tuple[float | None, float]:
    """Prefill rate (tokens/s) and fixed TTFT cost (s) of a served closed loop, from TTFT at ``batches``.

    Model: a wave of B prompts prefilled in one step before their first token, TTFT − T(B) =
    prefill_overhead_s + B × input_len / prefill_tok_s (what the simulated server of :mod:`pipeline.predict.servedsim`
    gives a closed loop in lock step); linear least squares.  Returns ``(None, mean residual)`` when the slope is not positive (TTFT
    does not grow with the batch: prefill is too fast to see).
    """
    b = np.asarray(batches, dtype=float)
    y = np.asarray(ttft_s, dtype=float) - np.asarray(decode_step_s, dtype=float)
    if len(b) < 2:
        return None, float(max(y.mean(), 0.0))
    a = np.vstack([np.ones_like(b), b * input_len]).T
    (intercept, inv_rate), *_ = np.linalg.lstsq(a, y, rcond=None)
    if inv_rate <= 0:
        return None, float(max(y.mean(), 0.0))
    return float(1.0 / inv_rate), float(max(intercept, 0.0))


def predict_static(roofs: Roofs, terms: StepTerms, concurrencies: Sequence[int]) -> list[dict[str, float]]:
    """Static batch predictions per concurrency: ``{"output_throughput_tok_s": B / T, "tpot_s": T, "step_time_s": T}``."""
    steps = step_time_s(roofs, terms, concurrencies)
    return [{"output_throughput_tok_s": c / s, "tpot_s": float(s), "step_time_s": float(s)}
            for c, s in zip(concurrencies, steps)]


def relative_error(predicted: float | None, measured: float | None) -> float | None:
    """(predicted − measured) / measured, None when either is missing or measured is 0."""
    if predicted is None or not measured:
        return None
    return (predicted - measured) / measured


def describe_terms(terms: StepTerms, bandwidth_gb_s: float, peak_tflops: float | None,
                   roofs: Roofs | None = None) -> str:
    """The fitted terms in words a reader understands (one sentence); with ``roofs`` also the two identifiable costs."""
    parts = []
    if roofs is not None:
        t1, t2 = step_time_s(roofs, terms, [1, 2])
        parts.append(f"a step costs {t1 * 1e3:.1f} ms at B = 1 and each further sequence adds about "
                     f"{(t2 - t1) * 1e3:.2f} ms")
    parts += [f"the kernels reach {terms.bandwidth_fraction:.0%} of the {bandwidth_gb_s:.0f} GB/s bandwidth"]
    if peak_tflops:
        parts.append(f"{terms.compute_fraction:.0%} of the {peak_tflops:.3g} TFLOP/s peak")
    parts.append(f"each step adds {terms.overhead_s * 1e3:.1f} ms")
    if terms.prefill_tok_s:
        parts.append(f"prefill runs at {terms.prefill_tok_s:,.0f} tokens/s")
    if roofs is not None and roofs.card.expert_bytes:
        parts.append("experts counted under uniform routing" if roofs.routing_scale is None else
                     f"experts counted at the profile's routing locality s = {roofs.routing_scale:g} (an effective batch)")
    return "; ".join(parts)


# --------------------------------------------------------------------------------------------
# fitting on point summaries (used by ``batchmark predict`` and by the adaptive sweep)
# --------------------------------------------------------------------------------------------

def p50(dist: dict[str, Any] | None) -> float | None:
    """The median of a latency distribution dict (``{"p50", ...}``), None when absent."""
    return dist.get("p50") if dist else None


def is_static(s: PointSummary) -> bool:
    """Whether a point is a static batch (its output throughput window is the decode phase)."""
    return s.output_throughput_window == "decode_phase"


def step_samples(s: PointSummary) -> list[float]:
    """Per-repeat step times (s) of a point: B / throughput for a static batch, TPOT medians for a served one."""
    if is_static(s):
        return [s.concurrency / t for t in (s.samples.get("output_throughput_tok_s") or []) if t and t > 0]
    return [t for t in (s.samples.get("tpot_s_per_repeat") or []) if t and t > 0]


def point_step_time_s(s: PointSummary) -> float | None:
    """A point's decode step time (s): B / output throughput (static batch), median TPOT (served), None when unknown."""
    if is_static(s):
        return s.concurrency / s.output_throughput_tok_s if s.output_throughput_tok_s else None
    return p50(s.tpot_s) or s.step_time_s


def rel_spread(values: Sequence[float]) -> float:
    """Relative standard deviation of ``values`` (sample sd / mean); 0.02 with fewer than two."""
    if len(values) < 2:
        return 0.02
    return float(np.std(values, ddof=1) / np.mean(values))


def fit_points(roofs: Roofs, cal: list[PointSummary], static: bool, input_len: int,
               repeat: int | None = None, correction: dict[int, tuple[float, float]] | None = None) -> StepTerms:
    """Fit the terms on calibration points (``repeat``: that repeat's own values only); prefill terms for served points.

    ``correction``: per concurrency (TPOT ÷ decode step, TTFT − wave TTFT in s) of the simulated server, which
    the measured TPOT and TTFT are divided by and reduced by first (:func:`pipeline.predict.servedsim.fit_served`).

    Raises:
        CalibrationError: no positive step time; IndexError / TypeError when ``repeat`` is missing at a point.
    """
    if repeat is None:
        steps = [point_step_time_s(s) for s in cal]
        spreads = [rel_spread(step_samples(s)) for s in cal]
        ttfts = [p50(s.ttft_s) for s in cal]
    else:
        steps = [step_samples(s)[repeat] for s in cal]
        spreads = None
        ttfts = [(s.samples.get("ttft_s_per_repeat") or [None] * (repeat + 1))[repeat] for s in cal]
    batches = [s.concurrency for s in cal]
    if correction:
        steps = [t / correction.get(c, (1.0, 0.0))[0] for c, t in zip(batches, steps)]
        ttfts = [None if t is None else t - correction.get(c, (1.0, 0.0))[1] for c, t in zip(batches, ttfts)]
    terms = fit_step_terms(roofs, batches, steps, spreads)
    if static or any(t is None for t in ttfts):
        return terms
    rate, overhead = fit_prefill(batches, input_len, ttfts, [float(x) for x in step_time_s(roofs, terms, batches)])
    return StepTerms(terms.overhead_s, terms.bandwidth_fraction, terms.compute_fraction, rate, overhead)


def per_repeat_fits(roofs: Roofs, cal: list[PointSummary], static: bool, input_len: int,
                    correction: dict[int, tuple[float, float]] | None = None) -> list[StepTerms]:
    """The same fit on each repeat's own values (the repeats every calibration point has; ``correction`` as
    :func:`fit_points`'); those that fail are left out."""
    n = min((len(step_samples(s)) for s in cal), default=0)
    fits = []
    for r in range(n):
        try:
            fits.append(fit_points(roofs, cal, static, input_len, repeat=r, correction=correction))
        except (CalibrationError, IndexError, TypeError):
            continue
    return fits


def with_spread(roofs: Roofs, cal: list[PointSummary], static: bool, input_len: int, terms: StepTerms,
                fits: list[StepTerms] | None = None) -> StepTerms:
    """``terms`` with their standard deviation over per-repeat fits (None where under two repeats fit)."""
    fits = per_repeat_fits(roofs, cal, static, input_len) if fits is None else fits
    spread: dict[str, float | None] = {}
    for name in ("overhead_s", "bandwidth_fraction", "compute_fraction", "prefill_tok_s"):
        vals = [getattr(f, name) for f in fits if getattr(f, name) is not None]
        spread[name] = float(np.std(vals, ddof=1)) if len(vals) >= 2 else None
    return StepTerms(terms.overhead_s, terms.bandwidth_fraction, terms.compute_fraction, terms.prefill_tok_s,
                     terms.prefill_overhead_s, spread)
