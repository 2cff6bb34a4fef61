"""One model's adaptive sweep: the grid points :func:`pipeline.predict.adaptive.walk` chooses are measured (or read back
on a resume), the others predicted from a calibration on the measured ones, and every point's state kept in
``run.json`` (``adaptive``).

Split out of :mod:`pipeline.sweep.gridwalk`, which calls :func:`adaptive_model` for each model of an adaptive config.
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from typing import Callable

from pipeline.store import pointfiles, runs
from pipeline.config.sweepconfig import SweepConfig
from pipeline.engines.base import PointDoesNotFit
from pipeline.metrics.summarize import summarize_point
from pipeline.core.progress import Display
from pipeline.core.records import PointKey
from pipeline.sweep.point import count_point, load_model, measure_point


def adaptive_model(cfg: SweepConfig, spec, engine, run_dir: Path, plan, curve: list[tuple[int, float]],
                    stops: dict[str, str], failures: dict[str, int], display: Display, log: Callable[[str], None],
                    slo: dict | None) -> tuple[bool, int]:
    """One model's adaptive sweep (:func:`pipeline.predict.adaptive.walk`): measure the points it chooses (stored points of a
    resumed run are read, not measured again: the walk is deterministic), keep every grid point's measured/predicted
    state and reason in ``run.json`` (``adaptive.models.<model>``).  Fills ``curve`` with the measured points in grid
    order (the open loop's auto rates).  Returns (whether the model is loaded, points measured or read)."""
    from pipeline.predict import adaptive, calibrate, servedsim
    from pipeline.analysis.analyze import hardware_block, mean_decode_context
    from pipeline.cards.modelcards import ModelCard

    grid = list(cfg.concurrency)
    planned = next((m for m in plan.models if m.model == spec.name), None) if plan is not None else None
    not_fitting: dict[int, str] = {}
    if planned is not None:
        for p in planned.points:
            if p.load == "closed" and not p.fits:
                not_fitting[p.concurrency] = p.fits_reason
    fitting = [c for c in grid if c not in not_fitting]
    summaries: dict[int, object] = {}
    state = {"loaded": False, "card": None, "done": 0}

    def load() -> None:
        if state["loaded"]:
            return
        with display.phase(f"{spec.name}: " + ("server start to healthy" if cfg.engine == "vllm" else "loading the model")):
            load_model(engine, spec, run_dir)
        state["loaded"] = True

    def measure(c: int, reason: str) -> float | None:
        key = PointKey(spec.name, cfg.engine, cfg.input_len, cfg.output_len, c)
        label = f"{spec.name} c={c}"
        resumed = runs.has_point(run_dir, key)
        if resumed:
            display.begin_point(label)
            summ = summarize_point(pointfiles.load_point(pointfiles.point_path(run_dir, key)), slo)
        else:
            load()
            ok, why = engine.fits(key)
            if not ok:
                stops.setdefault(spec.name, f"c={c} not run: {why}")
                return None
            display.begin_point(label)
            try:
                records = measure_point(cfg, engine, key)
            except PointDoesNotFit as exc:
                stops.setdefault(spec.name, f"memory: {exc}")
                return None
            records.meta["adaptive"] = {"measured": True, "reason": reason}  # why this point (predictions: run.json)
            runs.write_point(run_dir, records)
            summ = summarize_point(records, slo)
        count_point(summ, failures, cfg, f"{spec.name} {key.label()}", log)
        display.end_point(summ.output_throughput_tok_s, measured=not resumed)
        state["done"] += 1
        summaries[c] = summ
        return summ.output_throughput_tok_s or None

    def card() -> ModelCard | None:
        if state["card"] is None:  # read once it is stored (not cached before the model is loaded)
            d = runs.load_model_cards(run_dir).get(spec.name)
            state["card"] = ModelCard.from_dict(d) if d else None
        return state["card"]

    def predict():
        usable = sorted((s for s in summaries.values() if s.output_throughput_tok_s and calibrate.point_step_time_s(s)),
                        key=lambda s: s.concurrency)
        mc = card()
        if mc is None:
            raise calibrate.CalibrationError("no model card: the bytes and FLOPs of a step are unknown")
        if len(usable) < 3:
            raise calibrate.CalibrationError(f"{len(usable)} usable measured point(s): three terms need three")
        calibrate.check_consistent([(s.concurrency, s.output_throughput_tok_s) for s in usable],
                                   [s.concurrency for s in usable])
        meta = runs.read_run_json(run_dir)
        hw = hardware_block(meta.get("hardware") or {}, meta.get("probe"))
        if not hw.get("bandwidth_gb_s"):
            raise calibrate.CalibrationError("the run's hardware has no bandwidth figure")
        static = calibrate.is_static(usable[0])
        roofs = calibrate.Roofs(mc, mean_decode_context(cfg.input_len, cfg.output_len), hw["bandwidth_gb_s"],
                                hw.get("peak_tflops"))
        limits = servedsim.ServedLimits.of((((meta.get("engine") or {}).get("servers") or {}).get(spec.name) or {})
                                           .get("limits"))
        if limits.kv_cache_tokens is None and planned is not None and planned.kv_sequences:  # KV: the plan's figure
            limits = dataclasses.replace(limits, kv_cache_tokens=int(planned.kv_sequences * (cfg.input_len + cfg.output_len)))
        caps = [x for x in (limits.max_num_seqs, planned.kv_sequences if planned else None) if x]
        cap = int(min(caps)) if caps else None  # the decode batch the server can hold (stated in the fit)
        requests = {s.concurrency: round((s.completed + s.failed) / s.repeats) for s in usable if s.repeats}
        if static:
            terms, correction = calibrate.fit_points(roofs, usable, static, cfg.input_len), None
        else:  # the served fit: the simulated server reproduces the measured points (as `batchmark predict`'s)
            terms, correction = servedsim.fit_served(roofs, usable, cfg.input_len, cfg.output_len, limits, requests)
        fits = calibrate.per_repeat_fits(roofs, usable, static, cfg.input_len, correction)
        terms = calibrate.with_spread(roofs, usable, static, cfg.input_len, terms, fits)
        args = (grid, static, cfg.input_len, cfg.output_len, limits, requests)
        preds = servedsim.predict_curve(roofs, terms, *args)
        per = [servedsim.predict_curve(roofs, f, *args) for f in fits]
        out = {}
        for i, (c, p) in enumerate(zip(grid, preds)):
            vals = [q[i]["output_throughput_tok_s"] for q in per if q[i]["output_throughput_tok_s"]]
            spread = (float(statistics.stdev(vals) / statistics.fmean(vals)) if len(vals) >= 2 else None)
            out[c] = {**p, "spread": spread}
        words = calibrate.describe_terms(terms, hw["bandwidth_gb_s"], hw.get("peak_tflops"), roofs)
        return out, {**terms.as_dict(), "words": words, "decode_batch_cap": cap}

    mc = card()  # the model's kind chooses the third calibration point: its card is stored when it is loaded
    if mc is None:
        load()
        mc = card()
    res = adaptive.walk(grid, fitting, mc.kind if mc else None, measure, predict, cfg.knee_threshold,
                        cfg.adaptive.tolerance, not_fitting)
    curve.extend((c, summaries[c].output_throughput_tok_s) for c in sorted(summaries)
                 if summaries[c].output_throughput_tok_s)
    block = dict(runs.read_run_json(run_dir).get("adaptive") or {})
    block["tolerance"] = cfg.adaptive.tolerance
    block["knee_threshold"] = cfg.knee_threshold
    block.setdefault("models", {})
    block["models"] = {**block["models"], spec.name: {"model": spec.name, "engine": cfg.engine, "input_len": cfg.input_len,
                                                      "output_len": cfg.output_len, **res.as_dict()}}
    runs.update_run_json(run_dir, adaptive=block)
    measured = [p["concurrency"] for p in res.points if p["measured"]]
    log(f"{spec.name}: adaptive: measured c = {', '.join(map(str, measured))} of {len(grid)} grid points; "
        f"knee {adaptive.knee_text(res.knee_concurrency)} (measured + predicted); {res.stopped}")
    return state["loaded"], state["done"]
