"""Engine terms fitted to a measured curve: the step model of :func:`pipeline.cards.stepcost.engine_step_s` (pure).

`plan` costs a step with the hardware profile's engine terms (:class:`pipeline.machine.engineterms.EngineTerms`,
fitted once to published runs); `predict` fits the same terms to a run's own points, starting from those.
Free terms: the fixed cost of a step, the bandwidth fraction, the compute fraction (the cost of each further
sequence), and for an MoE the one that bends its curve — the routing locality (``routing_scale``) under
distinct prompts, the batched-kernel fraction of the expert reads (``expert_batched_fraction``) and, where the prior
states one, how that kernel's cost grows with the tokens per expert (``expert_token_exponent``) under identical
ones (llama-batched-bench: coverage stays k/E, so locality is not measured there); for a curve over context
depth (one stream, llama-bench's ``@ dN``) the attention factor instead.

Fit: least squares on log step times plus a prior pulling each term towards the profile's value in log space
(weight :data:`PRIOR_WEIGHT` per term), so three points fit four terms without running away and a term the
points do not constrain stays at its published value.  Uncertainty: the Jacobian's covariance of the fit
(``spread``) and the prediction band from it (:func:`band`).  A calibration point the fitted curve misses by more
than :data:`FIT_TOLERANCE` is named with the term that cannot bend that way (:func:`misfit_note`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from scipy.optimize import least_squares

from pipeline.cards.modelcards import ModelCard
from pipeline.machine.engineterms import EngineTerms
from pipeline.cards.stepcost import engine_step_s, prefill_flops

#: Weight of the prior on each term's log (relative to one point's log residual).
PRIOR_WEIGHT = 0.002
#: A calibration point reproduced further off than this (fraction) is reported.
FIT_TOLERANCE = 0.05
#: Bounds of the free terms.  A bandwidth fraction up to 1.2: a card pinned to its weight file's size counts the input
#: embedding as read (pipeline.importers.cardmatch.card_with_file_size), which a step only gathers B rows of.
_BOUNDS = {"step_overhead_s": (0.0, 1.0), "bandwidth_fraction": (0.05, 1.2), "compute_fraction": (1e-4, 1.0),
           "routing_scale": (0.05, 1e4), "expert_batched_fraction": (0.05, 1.0), "attention_factor": (0.2, 10.0),
           "dense_compute_fraction": (1e-4, 1.0), "expert_token_exponent": (0.0, 1.5)}


@dataclass(frozen=True)
class CurveFit:
    """Fitted terms (an :class:`EngineTerms` copy), which were free, the spread of each (log-space sd → relative),
    the calibration points' relative misses, and a one-line note when a point is missed beyond tolerance."""

    terms: EngineTerms
    free: tuple[str, ...]
    spread: dict[str, float] = field(default_factory=dict)
    misses: dict[float, float] = field(default_factory=dict)
    note: str | None = None


@dataclass(frozen=True)
class CurveAxis:
    """What a decode step-time curve runs along: ``card`` on a machine of ``bandwidth_gb_s`` (GB/s) and
    ``peak_tflops`` (TFLOP/s; None: no compute roof); x is the batch at ``context`` tokens, or (``by_depth``) the
    depth added to ``context`` at one ``batch``; ``identical_routing``: every sequence decodes the same tokens."""

    card: ModelCard
    context: float
    bandwidth_gb_s: float
    peak_tflops: float | None
    by_depth: bool = False
    identical_routing: bool = False
    batch: int = 1

    def step_s(self, x: float, terms) -> float:
        """The step (s) at ``x`` under ``terms``: :func:`pipeline.cards.stepcost.engine_step_s`."""
        if self.by_depth:
            return engine_step_s(self.card, self.batch, self.context + x, self.bandwidth_gb_s, self.peak_tflops, terms,
                                 self.identical_routing)
        return engine_step_s(self.card, int(x), self.context, self.bandwidth_gb_s, self.peak_tflops, terms,
                             self.identical_routing)


def free_terms(card: ModelCard, by_depth: bool, identical_routing: bool, prior=None) -> tuple[str, ...]:
    """The terms a curve can move (module docstring): a dense card's compute is ``dense_compute_fraction`` where the
    prior states one, an MoE's the experts' ``compute_fraction``."""
    base = ("step_overhead_s", "bandwidth_fraction")
    if by_depth:
        return base + ("attention_factor",)
    if card.expert_bytes and card.num_experts:
        if not identical_routing:
            return base + ("compute_fraction", "routing_scale")
        kernel = ("expert_token_exponent",) if prior is not None and prior.expert_token_exponent is not None else ()
        return base + ("compute_fraction", "expert_batched_fraction") + kernel
    dense = "dense_compute_fraction" if prior is not None and prior.dense_compute_fraction else "compute_fraction"
    return base + (dense,)


def _with(terms, names: Sequence[str], values: Sequence[float]):
    return terms.model_copy(update={n: float(v) for n, v in zip(names, values)})


def _start(terms, name: str) -> float:
    v = getattr(terms, name)
    if v is None:  # uniform routing as the starting prior: a large scale
        return 1e3
    return max(float(v), 1e-4) if name == "step_overhead_s" else float(v)


def fit_curve(axis: CurveAxis, xs: Sequence[float], step_times_s: Sequence[float], prior) -> CurveFit:
    """Fit the free terms of ``prior`` to measured decode step times (s) at ``xs`` along ``axis`` (batches, or depths
    when ``axis.by_depth``: one batch at context ``context + depth``)."""
    names = free_terms(axis.card, axis.by_depth, axis.identical_routing, prior)
    t = np.asarray(step_times_s, dtype=float)
    if len(t) == 0 or not np.all(np.isfinite(t)) or np.any(t <= 0):
        raise ValueError("step times must be positive and finite")

    def model(values: Sequence[float]) -> np.ndarray:
        terms = _with(prior, names, values)
        return np.array([axis.step_s(x, terms) for x in xs])

    x0 = np.array([_start(prior, n) for n in names])
    lo = np.array([_BOUNDS[n][0] for n in names])
    hi = np.array([_BOUNDS[n][1] for n in names])
    x0 = np.clip(x0, lo + 1e-9, hi)
    scale = np.maximum(np.abs(x0), 1e-3)

    def residuals(z: np.ndarray) -> np.ndarray:
        v = z * scale
        prior_r = PRIOR_WEIGHT * (np.log(np.maximum(v, 1e-6)) - np.log(np.maximum(x0, 1e-6)))
        return np.concatenate([np.log(model(v)) - np.log(t), prior_r])

    fit = least_squares(residuals, x0 / scale, bounds=(lo / scale, hi / scale))
    values = fit.x * scale
    terms = _with(prior, names, values)
    got = model(values)
    misses = {float(x): float(g / m - 1) for x, g, m in zip(xs, got, t)}
    return CurveFit(terms, names, _spread(fit, names, scale), misses, misfit_note(misses, names))


def _spread(fit, names: Sequence[str], scale: np.ndarray) -> dict[str, float]:
    """Standard deviation of each term (its own units) from the fit's Jacobian: residual variance × (JᵀJ)⁻¹ of the
    scaled terms, times their scale; the prior's rows count as observations (they bound an unconstrained term)."""
    j = fit.jac
    dof = max(len(fit.fun) - len(names), 1)
    s2 = max(float(np.sum(fit.fun ** 2) / dof), 1e-6)  # a perfect fit still carries a 0.1 % floor
    try:
        cov = np.linalg.pinv(j.T @ j) * s2
    except np.linalg.LinAlgError:
        return {}
    return {n: float(math.sqrt(max(cov[i, i], 0.0)) * scale[i]) for i, n in enumerate(names)}


def misfit_note(misses: dict[float, float], names: Sequence[str]) -> str | None:
    """One line naming the calibration points missed beyond :data:`FIT_TOLERANCE` and why, None when all fit."""
    bad = {x: m for x, m in misses.items() if abs(m) > FIT_TOLERANCE}
    if not bad:
        return None
    pts = ", ".join(f"{x:g} ({m:+.0%})" for x, m in sorted(bad.items()))
    return (f"calibration points {pts} are missed beyond {FIT_TOLERANCE:.0%}: the free terms ({', '.join(names)}) "
            "cannot bend the curve that way (a step that is not linear in the batch or the context)")


def band(axis: CurveAxis, fit: CurveFit, x: float) -> tuple[float, float, float]:
    """(low, predicted, high) step time (s) at ``x`` along ``axis``: the fitted curve, and its band of one standard
    deviation of each free term moved (in the direction that moves the step most, terms combined in quadrature)."""
    def step(terms) -> float:
        return axis.step_s(x, terms)

    mid = step(fit.terms)
    var = 0.0
    for n in fit.free:
        v = getattr(fit.terms, n)
        if v is None or n not in fit.spread:
            continue
        lo_b, hi_b = _BOUNDS[n]
        moved = min(max(v + fit.spread[n], lo_b), hi_b)  # one standard deviation up, inside the term's bounds
        if moved == v:
            moved = min(max(v - fit.spread[n], lo_b), hi_b)
        var += (step(fit.terms.model_copy(update={n: moved})) - mid) ** 2
    d = math.sqrt(var)
    return max(mid - d, 0.0), mid, mid + d


def fit_prefill(card: ModelCard, points: Sequence[tuple[int, int, float, float]]) -> tuple[float, float]:
    """(TFLOP/s, fixed s) of prefill from measured ``(prompts, tokens each, context_before, seconds)``: linear least
    squares of seconds = fixed + prompts × FLOPs / rate (:func:`pipeline.cards.stepcost.prefill_flops`); one point:
    the rate alone."""
    f = np.array([b * prefill_flops(card, int(n), c) for b, n, c, _ in points])
    y = np.array([s for *_, s in points])
    if len(points) < 2:
        return float(f[0] / y[0] / 1e12), 0.0
    a = np.vstack([np.ones_like(f), f]).T
    (fixed, inv), *_ = np.linalg.lstsq(a, y, rcond=None)
    if inv <= 0:
        return float(np.median(f / y) / 1e12), 0.0
    if fixed < 0:  # no negative fixed cost: the rate through the origin
        return float(np.sum(f * f) / np.sum(f * y) / 1e12), 0.0
    return float(1.0 / inv / 1e12), float(fixed)


#: The prior where a hardware profile states no terms for the engine: no fixed cost, the roofs at 80 % and 30 %,
#: no batched-kernel penalty, uniform routing (a neutral start the fit moves from).
NEUTRAL = dict(step_overhead_s=0.0, bandwidth_fraction=0.8, compute_fraction=0.3, source="neutral prior")


def prior_terms(hardware_name: str | None, engine: str):
    """The hardware profile's terms for ``engine`` (:mod:`pipeline.machine.engineterms`), else :data:`NEUTRAL`."""
    from pipeline.core.errors import BatchmarkError
    from pipeline.machine.engineterms import EngineTerms
    from pipeline.machine.hardware import load_profile

    try:
        hw = load_profile(hardware_name) if hardware_name else None
    except BatchmarkError:
        hw = None
    if hw is not None and hw.engine_terms(engine) is not None:
        return hw.engine_terms(engine), hw.compute_peak_tflops()
    return EngineTerms(**NEUTRAL), (hw.compute_peak_tflops() if hw is not None else None)


def predict_static_curve(axis: CurveAxis, engine: str, hardware_name: str | None,
                         cal: Sequence[tuple[int, float, float | None]], batches: Sequence[int],
                         input_len: int) -> tuple[list[dict], CurveFit]:
    """Static-batch predictions at ``batches`` from calibration points ``(B, step s, TTFT s or None)`` along ``axis``
    (batches at the shape's mean decode context, ``input_len + output_len / 2``; its compute peak where
    ``hardware_name``'s profile states none), prompts of ``input_len`` tokens: the engine terms fitted, each point ``{"output_throughput_tok_s", "tpot_s", "step_time_s", "ttft_s", "band": [low, high] tok/s}``;
    TTFT from the prefill rate fitted on the calibration TTFTs (None where they are missing).

    ``axis.identical_routing``: every sequence decodes the same tokens (llama.cpp's benches), so an MoE's expert coverage
    stays k/E and the batched-kernel terms bend the curve; False for a decode-phase curve of distinct prompts (a
    llama-benchy wave on a server: each request its own text), whose experts' coverage grows with the batch
    (``1 − (1 − k/E)^B_eff`` at the fitted routing locality, :func:`pipeline.cards.stepcost.effective_batch`), the
    shape that lets such a step's cost grow ever slower per sequence as the experts fill."""
    prior, peak = prior_terms(hardware_name, engine)
    card, axis = axis.card, dataclasses.replace(axis, peak_tflops=peak or axis.peak_tflops)
    fit = fit_curve(axis, [b for b, _, _ in cal], [t for _, t, _ in cal], prior)
    ttfts = [(b, input_len, 0, t) for b, _, t in cal if t]
    pre = fit_prefill(card, ttfts) if len(ttfts) == len(cal) else None
    out = []
    for b in batches:
        lo, step, hi = band(axis, fit, b)
        ttft = pre[1] + b * prefill_flops(card, input_len, 0) / (pre[0] * 1e12) if pre else None
        out.append({"output_throughput_tok_s": b / step, "tpot_s": step, "step_time_s": step, "ttft_s": ttft,
                    "band": [b / hi, b / lo if lo > 0 else None]})
    return out, fit
