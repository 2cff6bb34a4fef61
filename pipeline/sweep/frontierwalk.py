"""An adaptive sweep over a tuning space: after every curve's knee is settled (:mod:`pipeline.sweep.adaptivewalk`,
one curve per model × variant × shape), the points that could be on each model × shape's Pareto frontier over its
variants are measured, until none is left or ``adaptive.frontier_points`` are spent.

Each round refits every curve (:func:`pipeline.sweep.adaptivewalk.predict_grid`), predicts its unmeasured fitting
points on both axes (output throughput and per-user throughput, each anchored to the curve's measurements), and
measures every contender (:func:`pipeline.predict.frontierchoice.contenders`) by the sweep's one measuring step
(:func:`pipeline.sweep.point.measure_or_resume`: a resumed run reads its stored points back; the rounds are
deterministic, so a resume measures only what is missing), a variant's contenders together so that its server starts
once a round.  What it chose and why, and the frontier over measured and predicted points, are kept in ``run.json``
(``adaptive.models.<curve>.points`` and ``adaptive.frontiers``); predictions are never stored as measurements.
"""

from __future__ import annotations

import math
from typing import Any

from pipeline.analysis.frontier import exclusion
from pipeline.core.records import PointKey
from pipeline.predict.frontierchoice import Candidate, contenders, frontier, uncertainty
from pipeline.store import runs
from pipeline.sweep.adaptivewalk import Curve, predict_grid, record_choices
from pipeline.sweep.point import ModelWalk, SweepState, measure_or_resume

#: One point to measure: (the curve, its concurrency, why).
Pick = tuple[Curve, int, str]


def curve_predictions(sweep: SweepState, cv: Curve) -> dict[int, dict[str, Any]]:
    """The curve's prediction of each grid point, anchored to its measurements on both axes
    (:func:`pipeline.predict.adaptive.anchored`): ``{c: {"output_throughput_tok_s", "per_user_tok_s" (1 / the
    predicted median TPOT), "spread"}}``; ``{}`` when the curve's points cannot be fitted (its walk then measured
    every fitting point)."""
    from pipeline.predict import adaptive
    from pipeline.predict.calibrate import CalibrationError

    sweep.cfg, sweep.variant = cv.cfg, cv.variant
    try:
        pred, _ = predict_grid(sweep, cv.spec.name, cv.planned, cv.summaries)
    except CalibrationError:
        return {}
    grid = list(cv.cfg.concurrency)
    out_tok = adaptive.anchored(grid, {c: s.output_throughput_tok_s for c, s in cv.summaries.items()
                                       if s.output_throughput_tok_s}, pred)
    per_user = adaptive.anchored(grid, {c: s.per_user_tok_s for c, s in cv.summaries.items() if s.per_user_tok_s},
                                 {c: {"per_user_tok_s": 1.0 / p["tpot_s"]} for c, p in pred.items()
                                  if p.get("tpot_s")}, key="per_user_tok_s")
    return {c: {"output_throughput_tok_s": p.get("output_throughput_tok_s"),
                "per_user_tok_s": (per_user.get(c) or {}).get("per_user_tok_s"), "spread": p.get("spread")}
            for c, p in out_tok.items()}


def _ok(v: float | None) -> bool:
    """A figure the frontier can place: finite and above 0."""
    return v is not None and math.isfinite(v) and v > 0


def candidates(curves: list[Curve], preds: dict[str, dict[int, dict[str, Any]]], left_out: set[tuple[str, int]],
               tolerance: float) -> list[tuple[Curve, Candidate]]:
    """Every point of one model × shape's curves as the frontier sees it: the measured ones the frontier takes
    (:func:`pipeline.analysis.frontier.exclusion`), the unmeasured fitting ones with both predicted figures
    (not those in ``left_out``: chosen before and not measured), each with its uncertainty."""
    out = []
    for cv in curves:
        rate = cv.cfg.max_failure_rate
        for c, s in sorted(cv.summaries.items()):
            if exclusion(s, rate) is None:
                out.append((cv, Candidate(cv.variant, c, s.output_throughput_tok_s, s.per_user_tok_s, True)))
        fitting = {p["concurrency"] for p in cv.res.points if not str(p.get("reason", "")).startswith("does not fit")}
        for c, p in sorted(preds.get(cv.name, {}).items()):
            if c in cv.summaries or c not in fitting or (cv.name, c) in left_out:
                continue
            if _ok(p["output_throughput_tok_s"]) and _ok(p["per_user_tok_s"]):
                out.append((cv, Candidate(cv.variant, c, p["output_throughput_tok_s"], p["per_user_tok_s"], False,
                                          uncertainty(p.get("spread"), tolerance))))
    return out


def shape_groups(curves: list[Curve]) -> dict[tuple[int, int], list[Curve]]:
    """The curves by shape (input_len, output_len), config order: one frontier each."""
    out: dict[tuple[int, int], list[Curve]] = {}
    for cv in curves:
        out.setdefault((cv.cfg.input_len, cv.cfg.output_len), []).append(cv)
    return out


def frontier_model(sweep: SweepState, cells, spec) -> None:
    """The frontier walk of one model (module docstring); nothing for a model of one curve (its knee is all)."""
    curves = [cv for cv in sweep.curves if cv.spec.name == spec.name]
    if len(curves) < 2:
        return
    base = sweep.cfg
    tolerance, budget = base.adaptive.tolerance, base.adaptive.frontier_points
    chosen: dict[tuple[str, int], tuple[str, float | None]] = {}  # (curve, c) -> (why, predicted output before)
    left_out: set[tuple[str, int]] = set()
    fitted: dict[str, tuple[tuple[int, ...], dict]] = {}  # a curve is refitted only when it gained a point
    try:
        while True:
            for cv in curves:
                if fitted.get(cv.name, ((),))[0] != tuple(sorted(cv.summaries)):
                    fitted[cv.name] = (tuple(sorted(cv.summaries)), curve_predictions(sweep, cv))
            preds = {name: p for name, (_, p) in fitted.items()}
            todo = [(cv, cand.concurrency, _why(cand)) for group in shape_groups(curves).values()
                    for cv, cand in _contenders(candidates(group, preds, left_out, tolerance))]
            spent = len(chosen)
            if not todo or (budget is not None and spent >= budget):
                break
            todo = todo if budget is None else todo[:budget - spent]
            for cv, c, why in todo:
                chosen[(cv.name, c)] = (why, preds[cv.name][c]["output_throughput_tok_s"])
            left_out |= measure_picks(sweep, cells, spec, todo)
    finally:
        sweep.cfg = base
    stopped = (f"settled: no predicted point can be on the frontier within its uncertainty "
               f"({len(chosen)} point(s) measured for it)" if not todo else
               f"budget spent: adaptive.frontier_points = {budget}; {len(todo)} predicted point(s) could still be on it")
    record_frontier(sweep, spec.name, curves, preds, chosen, stopped)
    sweep.log(f"{spec.name}: adaptive frontier: {stopped}")


def _contenders(cands: list[tuple[Curve, Candidate]]) -> list[tuple[Curve, Candidate]]:
    """The (curve, point) pairs whose point is a contender (:func:`pipeline.predict.frontierchoice.contenders`)."""
    return [cands[i] for i in contenders([c for _, c in cands])]


def _why(c: Candidate) -> str:
    """Why a contender is measured (kept in its record's meta and on its row in ``run.json``)."""
    return (f"may be on the frontier: predicted {c.output_tok_s:,.1f} tok/s output and {c.per_user_tok_s:,.1f} tok/s "
            f"per user (± {c.uncertainty:.1%}), dominated by no other point within the uncertainties")


def measure_picks(sweep: SweepState, cells, spec, todo: list[Pick]) -> set[tuple[str, int]]:
    """Measure ``todo`` a variant at a time (its server started once, stopped after); each summary joins its curve.
    Returns the (curve, c) that could not be measured (they leave the frontier's candidates)."""
    failed: set[tuple[str, int]] = set()
    sweep.place_points(len(todo))
    for variant in list(sweep.cfg.variant_list()):
        mine = [t for t in todo if t[0].variant == variant.name]
        if not mine:
            continue
        sweep.backend, sweep.variant = cells.backend(variant), variant.name
        loaded = False
        for cv, c, why in mine:
            sweep.cfg = cv.cfg
            walk = ModelWalk(spec, loaded=loaded, name=cv.name)
            key = PointKey(spec.name, sweep.backend.serving_engine, cv.cfg.input_len, cv.cfg.output_len, c, variant=cv.variant)
            summ = measure_or_resume(sweep, walk, key, why)
            loaded = walk.loaded
            if summ is None:
                failed.add((cv.name, c))
                sweep.display.skip(1)
            else:
                cv.summaries[c] = summ
        if loaded:
            sweep.backend.unload()
    return failed


def curve_rows(cv: Curve, pred: dict[int, dict[str, Any]], chosen: dict[tuple[str, int], tuple[str, float | None]],
               threshold: float) -> Any:
    """The curve's walk result after the frontier walk: the points it measured join the measured (in the order
    chosen, with why and their prediction's error), the predicted ones carry the last prediction on both axes, the
    knee is that of the measured + predicted curve (:func:`pipeline.analysis.knee.find_knee`)."""
    import dataclasses

    from pipeline.analysis.knee import find_knee
    from pipeline.predict.adaptive import combined_curve

    order = max((p.get("order") or 0 for p in cv.res.points), default=0)
    mine = [c for (name, c) in chosen if name == cv.name]
    rows = []
    for p in cv.res.points:
        c, s = p["concurrency"], cv.summaries.get(p["concurrency"])
        if c in mine and s is not None:
            why, before = chosen[(cv.name, c)]
            tok = s.output_throughput_tok_s
            p = {**p, "measured": True, "order": order + 1 + mine.index(c), "reason": why, "output_throughput_tok_s": tok,
                 "predicted_before_tok_s": before, "error": (before - tok) / tok if before is not None and tok else None}
        elif c in mine:
            p = {**p, "reason": f"chosen ({chosen[(cv.name, c)][0]}) but nothing was measured"}
        elif not p["measured"] and c in pred:
            p = {**p, "output_throughput_tok_s": pred[c]["output_throughput_tok_s"],
                 "per_user_tok_s": pred[c]["per_user_tok_s"]}
        if p["measured"] and s is not None:
            p["per_user_tok_s"] = s.per_user_tok_s
        rows.append(p)
    meas = {c: s.output_throughput_tok_s for c, s in cv.summaries.items() if s.output_throughput_tok_s}
    knee = find_knee(combined_curve(list(cv.cfg.concurrency), meas, pred), threshold)
    stopped = cv.res.stopped if knee == cv.res.knee_concurrency else (
        f"{cv.res.stopped}; knee c = {knee} once the frontier's points were measured")
    return dataclasses.replace(cv.res, points=rows, knee_concurrency=knee, stopped=stopped)


def record_frontier(sweep: SweepState, model: str, curves: list[Curve], preds: dict[str, dict[int, dict[str, Any]]],
                    chosen: dict[tuple[str, int], tuple[str, float | None]], stopped: str) -> None:
    """Each curve's points after the frontier walk (``run.json`` ``adaptive.models.<curve>``, :func:`curve_rows`) and
    each shape's frontier over measured and predicted points (``adaptive.frontiers.<model> <in>/<out>``: its points
    with ``measured``, the predicted points that could still be on it, why the walk stopped)."""
    base = sweep.cfg
    try:
        for cv in curves:
            sweep.cfg, sweep.variant = cv.cfg, cv.variant
            record_choices(sweep, cv.name, model, curve_rows(cv, preds.get(cv.name, {}), chosen, cv.cfg.knee_threshold))
    finally:
        sweep.cfg = base
    blocks = {}
    for (i, o), group in shape_groups(curves).items():
        cands = [c for _, c in candidates(group, preds, set(), base.adaptive.tolerance)]
        front = sorted((cands[j] for j in frontier(cands)), key=lambda c: (c.per_user_tok_s, -c.output_tok_s))
        blocks[f"{model} {i}/{o}"] = {
            "model": model, "engine": sweep.backend.serving_engine, "input_len": i, "output_len": o,
            "variants": list(dict.fromkeys(cv.variant for cv in group)), "stopped": stopped,
            "frontier": [{"variant": c.variant, "concurrency": c.concurrency, "measured": c.measured,
                          "output_tok_s": c.output_tok_s, "per_user_tok_s": c.per_user_tok_s,
                          "uncertainty": c.uncertainty} for c in front],
            "open": [cands[j].label() for j in contenders(cands)]}
    block = dict(runs.read_run_json(sweep.run_dir).get("adaptive") or {})
    block["frontiers"] = {**(block.get("frontiers") or {}), **blocks}
    runs.update_run_json(sweep.run_dir, adaptive=block)
