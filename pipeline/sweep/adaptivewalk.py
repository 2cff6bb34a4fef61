"""One model's adaptive sweep: the grid points :func:`pipeline.predict.adaptive.walk` chooses are measured (or read back
on a resume), the others predicted from a calibration on the measured ones, and every point's state kept in
``run.json`` (``adaptive``).

Split out of :mod:`pipeline.sweep.gridwalk`, which calls :func:`adaptive_model` for each model of an adaptive config.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from typing import Any

from pipeline.store import runs
from pipeline.core.pointsummary import PointSummary
from pipeline.core.records import PointKey, server_key
from pipeline.sweep.point import ModelWalk, SweepState, ensure_loaded, measure_or_resume


def adaptive_model(sweep: SweepState, walk: ModelWalk) -> None:
    """One model's adaptive sweep (:func:`pipeline.predict.adaptive.walk`): measure the points it chooses by the sweep's
    measuring step (:func:`pipeline.sweep.point.measure_or_resume`: stored points of a resumed run are read, not
    measured again: the walk is deterministic), keep every grid point's measured/predicted state and reason in
    ``run.json`` (``adaptive.models.<model>``).  Fills ``walk.curve`` with the measured points in grid order (the open
    loop's auto rates)."""
    from pipeline.predict import adaptive

    cfg, spec = sweep.cfg, walk.spec
    grid = list(cfg.concurrency)
    planned = planned_cell(sweep, spec.name)
    not_fitting = {p.concurrency: p.fits_reason for p in (planned.points if planned is not None else ())
                   if p.load == "closed" and not p.fits}
    fitting = [c for c in grid if c not in not_fitting]
    summaries: dict[int, PointSummary] = {}

    def measure(c: int, reason: str) -> float | None:
        key = PointKey(spec.name, sweep.backend.serving_engine, cfg.input_len, cfg.output_len, c, variant=sweep.variant)
        summ = measure_or_resume(sweep, walk, key, reason)
        if summ is None:
            return None
        summaries[c] = summ
        return summ.output_throughput_tok_s or None

    mc = stored_card(sweep, spec.name)  # the model's kind chooses the third calibration point: stored when loaded
    if mc is None:
        ensure_loaded(sweep, walk)
        mc = stored_card(sweep, spec.name)
    space = len(cfg.variant_list()) > 1 or len(cfg.shapes()) > 1  # knees compared across curves: on measurements
    res = adaptive.walk(grid, fitting, mc.kind if mc else None, measure,
                        lambda: predict_grid(sweep, spec.name, planned, summaries),
                        adaptive.StopRule(cfg.knee_threshold, cfg.adaptive.tolerance, bracket=space), not_fitting)
    walk.curve.extend((c, summaries[c].output_throughput_tok_s) for c in sorted(summaries)
                      if summaries[c].output_throughput_tok_s)
    record_choices(sweep, walk.name, spec.name, res)
    sweep.curves.append(Curve(spec, sweep.variant, cfg, walk.name, planned, summaries, res))
    measured = [p["concurrency"] for p in res.points if p["measured"]]
    sweep.log(f"{walk.name}: adaptive: measured c = {', '.join(map(str, measured))} of {len(grid)} grid points; "
              f"knee {adaptive.knee_text(res.knee_concurrency)} (measured + predicted); {res.stopped}")


@dataclass
class Curve:
    """One curve's adaptive walk (model × variant × shape), kept on the sweep for the frontier walk
    (:mod:`pipeline.sweep.frontierwalk`): the config at its variant and shape, the name its walk goes by (its key
    in ``run.json`` ``adaptive.models``), the plan's cell, its measured summaries by concurrency, the walk's result."""

    spec: Any
    variant: str
    cfg: Any
    name: str
    planned: Any
    summaries: dict[int, Any]
    res: Any


def planned_cell(sweep: SweepState, model: str):
    """The plan's cell (:class:`pipeline.plan.estimate.PlanModel`) of ``model`` at the sweep's variant and shape,
    None without a plan (a plan of one cell states no shape: it is the model's)."""
    if sweep.plan is None:
        return None
    cfg = sweep.cfg
    return next((m for m in sweep.plan.models if m.model == model and m.variant == sweep.variant
                 and m.input_len in (None, cfg.input_len) and m.output_len in (None, cfg.output_len)),
                next((m for m in sweep.plan.models if m.model == model), None))


def stored_card(sweep: SweepState, model: str):
    """The model's card as the run stores it (:class:`pipeline.cards.modelcards.ModelCard`), None before it is loaded:
    the sweep's variant's own where its server stored one (:func:`pipeline.sweep.point.load_model`), else the
    model's."""
    from pipeline.cards.modelcards import ModelCard

    cards = runs.load_model_cards(sweep.run_dir)
    d = cards.get(server_key(model, sweep.variant)) or cards.get(model)
    return ModelCard.from_dict(d) if d else None


def predict_grid(sweep: SweepState, model: str, planned, summaries: dict[int, PointSummary]):
    """The walk's ``predict``: the calibrated per-step model fitted to the measured points, predicted over the grid.

    Returns ``({c: prediction with its spread}, the fitted terms with their words and the decode batch cap)``.

    Raises:
        CalibrationError: no card, fewer than three usable points, inconsistent points, no bandwidth figure.
    """
    from pipeline.predict import calibrate, servedsim
    from pipeline.analysis.analyze import hardware_block, mean_decode_context

    cfg = sweep.cfg
    grid = list(cfg.concurrency)
    usable = sorted((s for s in summaries.values() if s.output_throughput_tok_s and calibrate.point_step_time_s(s)),
                    key=lambda s: s.concurrency)
    mc = stored_card(sweep, model)
    if mc is None:
        raise calibrate.CalibrationError("no model card: the bytes and FLOPs of a step are unknown")
    if len(usable) < 3:
        raise calibrate.CalibrationError(f"{len(usable)} usable measured point(s): three terms need three")
    calibrate.check_consistent([(s.concurrency, s.output_throughput_tok_s) for s in usable],
                               [s.concurrency for s in usable])
    meta = runs.read_run_json(sweep.run_dir)
    hw = hardware_block(meta.get("hardware") or {}, meta.get("probe"))
    if not hw.get("bandwidth_gb_s"):
        raise calibrate.CalibrationError("the run's hardware has no bandwidth figure")
    static = calibrate.is_static(usable[0])
    roofs = calibrate.Roofs(mc, mean_decode_context(cfg.input_len, cfg.output_len), hw["bandwidth_gb_s"],
                            hw.get("peak_tflops"),
                            None if static else calibrate.served_routing_scale(mc, usable[0].engine, hw.get("name")))
    servers = (meta.get("server") or {}).get("servers") or {}
    limits = servedsim.ServedLimits.of((servers.get(server_key(model, sweep.variant)) or servers.get(model) or {})
                                       .get("limits"))
    if limits.kv_cache_tokens is None and planned is not None and planned.kv_sequences:  # KV: the plan's figure
        limits = dataclasses.replace(limits, kv_cache_tokens=int(planned.kv_sequences * (cfg.input_len + cfg.output_len)))
    caps = [x for x in (limits.max_num_seqs, planned.kv_sequences if planned else None) if x]
    cap = int(min(caps)) if caps else None  # the decode batch the server can hold (stated in the fit)
    requests = {s.concurrency: round((s.completed + s.failed) / s.repeats) for s in usable if s.repeats}
    setup = servedsim.ServedSetup(cfg.input_len, cfg.output_len, limits, requests, workload=_drawn(cfg))
    if static:
        terms, correction = calibrate.fit_points(roofs, usable, static, cfg.input_len), None
    else:  # the served fit: the simulated server reproduces the measured points (as `batchmark predict`'s)
        terms, correction = servedsim.fit_served(roofs, usable, setup)
    fits = calibrate.per_repeat_fits(roofs, usable, static, cfg.input_len, correction)
    terms = calibrate.with_spread(roofs, usable, static, cfg.input_len, terms, fits)
    preds = servedsim.predict_curve(roofs, terms, grid, static, setup)
    per = [servedsim.predict_curve(roofs, f, grid, static, setup) for f in fits]
    out = {}
    for i, (c, p) in enumerate(zip(grid, preds)):
        vals = [q[i]["output_throughput_tok_s"] for q in per if q[i]["output_throughput_tok_s"]]
        spread = (float(statistics.stdev(vals) / statistics.fmean(vals)) if len(vals) >= 2 else None)
        out[c] = {**p, "spread": spread}
    words = calibrate.describe_terms(terms, hw["bandwidth_gb_s"], hw.get("peak_tflops"), roofs)
    return out, {**terms.as_dict(), "words": words, "decode_batch_cap": cap}


def record_choices(sweep: SweepState, name: str, model: str, res) -> None:
    """Keep the walk's result for one curve in ``run.json`` (``adaptive``: tolerance, knee threshold,
    ``models.<name>``: ``name`` is the walk's, :func:`pipeline.sweep.gridwalk.walk_name`, the model's own in a run of
    one variant and shape; each entry names its model, variant and shape)."""
    cfg = sweep.cfg
    block = dict(runs.read_run_json(sweep.run_dir).get("adaptive") or {})
    block["tolerance"] = cfg.adaptive.tolerance
    block["knee_threshold"] = cfg.knee_threshold
    block.setdefault("models", {})
    block["models"] = {**block["models"], name: {"model": model, "curve": name, "engine": sweep.backend.serving_engine,
                                                 "variant": sweep.variant, "input_len": cfg.input_len,
                                                 "output_len": cfg.output_len, **res.as_dict()}}
    runs.update_run_json(sweep.run_dir, adaptive=block)


def _drawn(cfg: Any) -> Any:
    """The config whose drawn lengths a prediction sends (as the sweep draws them), None where every request is the
    shape or comes from a prompt file (its lengths only a served backend counts)."""
    lengths = getattr(cfg, "lengths", None)
    return None if lengths is None or lengths.fixed() or lengths.prompt_file else cfg
