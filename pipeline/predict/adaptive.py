"""Adaptive sweeps: measure only the concurrencies that settle the knee, predict the rest (pure).

A config with ``adaptive: {tolerance: 0.10}`` keeps its ``concurrency`` grid as the *candidate* points.  Per
model and workload the sweep (:func:`pipeline.sweep.gridwalk.run_sweep`) calls :func:`walk`, which

1. measures the smallest grid concurrency (c = 1: one step's cost), the largest that fits (the plan knows what
   fits: weights + KV of c sequences within the usable memory) and the calibration's third point
   (:func:`pipeline.predict.calibrate.default_calibration` on the fitting grid: an MoE's first doubling, a dense
   model's log2 middle);
2. fits the calibrated per-step model (:mod:`pipeline.predict.calibrate`) on every point measured so far, predicts
   the whole grid and anchors the predictions to the measurements' level (:func:`anchored`); the knee is :func:`pipeline.analysis.knee.find_knee` of the curve made of the measured points
   and the predicted ones;
3. measures the next point (:func:`next_point`): while a point that decides the knee is unmeasured (the knee
   and its two grid neighbours; "not reached": the last doubling), bisect on log2 c between the measured points
   around it; once those are measured, the unmeasured fitting point whose prediction is least certain (largest
   spread over the per-repeat fits; without repeats, farthest in log2 c from any measurement);
4. refits, and stops (:func:`settled`) once a new measurement did not move the knee and agrees with the
   prediction made before it within the tolerance (output throughput), or when no fitting point is left.

Every grid point ends with ``measured`` (bool), the reason it was chosen or left out, and, for predicted ones,
the predicted figures: the run's ``run.json`` keeps them under ``adaptive`` (predictions are never stored as
measurements).  When the points cannot be fitted (:class:`pipeline.predict.calibrate.CalibrationError`: too few, or a
curve that contradicts the model), the rest of the fitting grid is measured, and the reason says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from pipeline.analysis.knee import find_knee
from pipeline.predict.calibrate import CalibrationError, default_calibration

#: What a prediction function returns per concurrency: ``{"output_throughput_tok_s", "spread" (relative sd or None), …}``.
Prediction = dict[int, dict[str, Any]]


def knee_text(knee: int | None) -> str:
    """``c = 16`` or ``not reached``."""
    return f"c = {knee}" if knee is not None else "not reached"


def initial_points(fitting: list[int], kind: str | None) -> list[tuple[int, str]]:
    """The first three measurements (concurrency, reason): the smallest, the largest that fits, the third calibration point.

    ``fitting``: the grid concurrencies that fit, sorted.  With fewer than three, all of them (nothing to predict with).
    """
    cs = sorted(fitting)
    if len(cs) < 3:
        return [(c, f"measured: only {len(cs)} grid point(s) fit, too few to fit three terms") for c in cs]
    chosen, _ = default_calibration(cs, kind)
    mid = chosen[1]
    why_mid = ("the first doubling, where an MoE's expert coverage grows fastest" if kind == "moe"
               else "the middle in log2 c, the slope of a step that is linear in the batch")
    return [(cs[0], f"calibration: c = {cs[0]}, the smallest (one step's cost)"),
            (cs[-1], f"calibration: c = {cs[-1]}, the largest that fits (where compute and KV grow largest)"),
            (mid, f"calibration: c = {mid}, {why_mid}")]


def decisive_points(grid: list[int], knee: int | None) -> list[int]:
    """The grid points whose throughput decides the knee: the knee and its neighbours (the strong doubling into it
    and the weak one out of it); "not reached" (None): the last two (the last doubling, still strong)."""
    g = sorted(grid)
    if knee is None:
        return g[-2:]
    i = g.index(knee)
    return g[max(i - 1, 0):i + 2]


def next_point(grid: list[int], fitting: list[int], measured: list[int], knee: int | None,
               spread: dict[int, float | None] | None = None) -> tuple[int, str] | None:
    """The next concurrency to measure and why, or None when every fitting grid point is measured.

    Rule (module docstring, step 3): let U be the unmeasured fitting points among :func:`decisive_points`.  When U is
    not empty, take its point d nearest the knee in log2 c (the lower on a tie), the measured points lo < d < hi
    around it, and measure the unmeasured fitting grid point between them nearest log2 midpoint (lo·hi)^½ (on a
    tie the one nearer d, then the lower).  Else measure the unmeasured fitting point with the largest prediction
    spread (``spread``: relative sd over per-repeat fits); where no spread is known, the one farthest in log2 c from
    a measured point (the lower on a tie).
    """
    done = set(measured)
    todo = sorted(c for c in fitting if c not in done)
    if not todo:
        return None
    ref = knee if knee is not None else max(grid)
    targets = [c for c in decisive_points(grid, knee) if c in todo]
    if targets and done:
        d = min(targets, key=lambda c: (abs(math.log2(c) - math.log2(ref)), c))
        lo = max((c for c in done if c < d), default=None)
        hi = min((c for c in done if c > d), default=None)
        if lo is None or hi is None:
            return d, f"decides the knee ({knee_text(knee)} predicted): no measured point beyond it to bisect with"
        mid = (math.log2(lo) + math.log2(hi)) / 2
        between = [c for c in todo if lo < c < hi]
        c = min(between, key=lambda x: (abs(math.log2(x) - mid), abs(math.log2(x) - math.log2(d)), x))
        return c, (f"bisecting log2 c between measured c = {lo} and c = {hi}, towards c = {d}, which decides the "
                   f"predicted knee ({knee_text(knee)})")
    known = {c: (spread or {}).get(c) for c in todo}
    if all(v is not None for v in known.values()):
        c = max(todo, key=lambda x: (known[x], -x))
        return c, (f"the least certain prediction left: it spreads {known[c]:.1%} over the per-repeat fits "
                   f"(the knee, {knee_text(knee)}, rests on measured points)")

    def gap(x: int) -> float:
        return min(abs(math.log2(x) - math.log2(m)) for m in done) if done else math.inf
    c = max(todo, key=lambda x: (gap(x), -x))
    return c, (f"the least supported prediction left: {gap(c):g} doublings from the nearest measurement "
               f"(the knee, {knee_text(knee)}, rests on measured points)")


def settled(knee_before: int | None, knee_after: int | None, predicted_tok_s: float | None,
            measured_tok_s: float | None, tolerance: float) -> tuple[bool, str]:
    """The stopping rule: the new measurement did not move the knee, and it is within ``tolerance`` of its prediction.

    Error = (predicted − measured) / measured of output throughput (tok/s).  Returns ``(stop, why)``.
    """
    if predicted_tok_s is None or not measured_tok_s:
        return False, "no prediction to compare the measurement with"
    err = (predicted_tok_s - measured_tok_s) / measured_tok_s
    if knee_after != knee_before:
        return False, f"the knee moved from {knee_text(knee_before)} to {knee_text(knee_after)}"
    if abs(err) > tolerance:
        return False, f"the measurement is {err:+.1%} off its prediction (tolerance {tolerance:.0%})"
    return True, (f"settled: the knee stayed at {knee_text(knee_after)} and the last measurement is {err:+.1%} off "
                  f"its prediction (within {tolerance:.0%})")


def combined_curve(grid: list[int], measured: dict[int, float], predicted: Prediction) -> list[tuple[int, float]]:
    """``[(c, tok/s)]`` over the grid: the measurement where there is one, else the prediction (points with neither left out)."""
    out = []
    for c in sorted(grid):
        v = measured.get(c)
        if v is None:
            v = (predicted.get(c) or {}).get("output_throughput_tok_s")
        if v is not None and v > 0:
            out.append((c, float(v)))
    return out


def anchored(grid: list[int], measured: dict[int, float], predicted: Prediction,
             key: str = "output_throughput_tok_s") -> Prediction:
    """The predictions with the measurements' level: each predicted ``key`` (output throughput unless told; the frontier
    walk anchors per-user throughput too) × the measured / predicted ratio
    at the measured points, interpolated linearly in log2 c between them (the nearest one's beyond them).

    The per-step model gives the curve's shape; where it is biased the same way at the measured neighbours of a
    point (a closed loop's drain at the end of the window, which the model's ``c × output_len / E2EL`` leaves
    out, costs 5-10 % at large c), the bias is carried to the points between them.  At a measured point the
    anchored prediction is the measurement.  ``model_tok_s`` keeps the model's own figure (``model_<key>`` for
    another key).
    """
    ratios = sorted((c, measured[c] / predicted[c][key]) for c in measured if c in predicted and predicted[c].get(key))
    if not ratios:
        return predicted
    out: Prediction = {}
    for c, p in predicted.items():
        x = math.log2(c)
        lo = [(cc, r) for cc, r in ratios if cc <= c]
        hi = [(cc, r) for cc, r in ratios if cc >= c]
        if lo and hi:
            (c0, r0), (c1, r1) = lo[-1], hi[0]
            r = r0 if c1 == c0 else r0 + (r1 - r0) * (x - math.log2(c0)) / (math.log2(c1) - math.log2(c0))
        else:
            r = (lo[-1] if lo else hi[0])[1]
        tok = p.get(key)
        keep = "model_tok_s" if key == "output_throughput_tok_s" else f"model_{key}"
        out[c] = {**p, keep: tok, key: tok * r if tok is not None else None}
    return out


@dataclass
class WalkResult:
    """What :func:`walk` did for one workload: the grid points, measured or predicted, with their reasons."""

    knee_concurrency: int | None
    stopped: str
    points: list[dict[str, Any]]
    steps: list[dict[str, Any]] = field(default_factory=list)
    fit: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON form (``run.json`` ``adaptive.models[i]`` without the workload's names)."""
        return {"knee_concurrency": self.knee_concurrency, "stopped": self.stopped, "points": self.points,
                "steps": self.steps, "fit": self.fit}


@dataclass(frozen=True)
class StopRule:
    """When an adaptive walk stops: the knee's ``threshold`` (a doubling gaining less is weak), the stopping rule's
    ``tolerance`` (fraction of output throughput), and ``bracket``: stop only once the knee's deciding points that
    fit (:func:`decisive_points`) are all measured, so that the knee rests on measurements alone (an adaptive sweep
    over variants or shapes compares knees across curves: :mod:`pipeline.sweep.frontierwalk`)."""

    threshold: float
    tolerance: float
    bracket: bool = False


def walk(grid: list[int], fitting: list[int], kind: str | None, measure: Callable[[int, str], float | None],
         predict: Callable[[], tuple[Prediction, dict[str, Any] | None]], rule: StopRule,
         not_fitting: dict[int, str] | None = None) -> WalkResult:
    """Run an adaptive sweep of one workload (module docstring).

    Args:
        grid: every candidate concurrency (the config's grid).
        fitting: those that fit (measured only among these).
        kind: ``"moe"`` or ``"dense"`` (the third calibration point).
        measure: ``measure(c, reason)`` measures a concurrency and returns its output throughput (tok/s; None when
            nothing was measured: the point is then dropped from ``fitting``).  Called once per concurrency, in the
            order chosen, with the reason it was chosen.
        predict: fits on everything measured so far and predicts every grid point; returns the predictions and the
            fitted terms (JSON); raises :class:`pipeline.predict.calibrate.CalibrationError` when no fit can be made.
        rule: when to stop (:class:`StopRule`: the knee's threshold, the tolerance, whether to bracket the knee).
        not_fitting: reasons of the grid points that do not fit (kept on their predicted rows).
    """
    threshold, tolerance, bracket = rule.threshold, rule.tolerance, rule.bracket
    fitting = sorted(fitting)
    meas: dict[int, float] = {}
    order: dict[int, tuple[int, str]] = {}
    before: dict[int, float | None] = {}
    steps: list[dict[str, Any]] = []

    def take(c: int, reason: str, predicted: float | None = None) -> bool:
        order[c] = (len(order) + 1, reason)
        before[c] = predicted
        v = measure(c, reason)
        if v is None:
            fitting.remove(c)
            return False
        meas[c] = v
        return True

    for c, reason in initial_points(fitting, kind):
        take(c, reason)
    pred: Prediction = {}
    fit = None
    knee = None
    stopped = None
    last: int | None = None
    while True:
        try:
            pred, fit = predict()
            pred = anchored(grid, meas, pred)
        except CalibrationError as exc:
            for c in [x for x in fitting if x not in meas]:
                take(c, f"measured: the points cannot be fitted ({exc})")
            pred, fit, stopped = {}, None, f"no fit ({exc}): every fitting grid point measured"
            knee = find_knee(combined_curve(grid, meas, {}), threshold)
            break
        new_knee = find_knee(combined_curve(grid, meas, pred), threshold)
        if last is not None:
            ok, why = settled(knee, new_knee, before[last], meas.get(last), tolerance)
            open_ = [c for c in decisive_points(grid, new_knee) if c in fitting and c not in meas] if bracket else []
            if ok and open_:
                ok, why = False, f"{why}, but c = {', '.join(map(str, open_))}, which decides it, is not measured"
            steps.append({"concurrency": last, "predicted_tok_s": before[last], "measured_tok_s": meas.get(last),
                          "knee_before": knee, "knee_after": new_knee, "settled": ok, "why": why})
            knee = new_knee
            if ok:
                stopped = why
                break
        knee = new_knee
        nxt = next_point(grid, fitting, list(meas), knee, {c: p.get("spread") for c, p in pred.items()})
        if nxt is None:
            stopped = f"every fitting grid point measured; knee {knee_text(knee)}"
            break
        c, reason = nxt
        last = c if take(c, reason, (pred.get(c) or {}).get("output_throughput_tok_s")) else None
    return WalkResult(knee, stopped or "", _walk_points(grid, pred, meas, order, before, not_fitting), steps, fit)


def _walk_points(grid: list[int], pred: Prediction, meas: dict[int, float], order: dict[int, tuple[int, str]],
                 before: dict[int, float | None], not_fitting: dict[int, str] | None) -> list[dict[str, Any]]:
    """One row per grid point of an adaptive walk: measured (its order, the reason it was chosen, its throughput in
    tok/s and the prediction's error before it), or predicted with why it was not measured."""
    points = []
    for c in sorted(grid):
        p = pred.get(c) or {}
        predicted = {k: p.get(k) for k in ("output_throughput_tok_s", "tpot_s", "ttft_s")} if p else None
        if c in meas:
            n, reason = order[c]
            b = before.get(c)
            points.append({"concurrency": c, "measured": True, "order": n, "reason": reason,
                           "output_throughput_tok_s": meas[c], "predicted_before_tok_s": b,
                           "error": (b - meas[c]) / meas[c] if b is not None and meas[c] else None,
                           "predicted": predicted, "spread": p.get("spread")})
        else:
            why = ((not_fitting or {}).get(c) and f"does not fit ({(not_fitting or {})[c]})") or (
                f"chosen ({order[c][1]}) but nothing was measured" if c in order else
                "not needed (the knee settled without it)")
            points.append({"concurrency": c, "measured": False, "order": None, "reason": why,
                           "output_throughput_tok_s": p.get("output_throughput_tok_s"), "predicted_before_tok_s": None,
                           "error": None, "predicted": predicted, "spread": p.get("spread")})
    return points
