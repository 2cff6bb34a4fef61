"""``batchmark predict``: calibrate the per-step model on a few points of a run and predict the rest of each curve.

For every closed-loop workload (model, engine, input length, output length) of a run, measured or
imported, the engine terms of :mod:`pipeline.predict.calibrate` are fitted on the chosen concurrencies
(default: :func:`pipeline.predict.calibrate.default_calibration`) and the output throughput, TPOT p50 and
TTFT p50 are predicted at every grid point (and at the doublings beyond the grid up to
:data:`BEYOND_DOUBLINGS` more), beside the measurement where one exists, with the relative error.
A point more than :data:`pipeline.predict.calibrate.CALL_OUT_FRACTION` off its prediction is called out,
with the server's view when it explains it (the analysis' regime: queueing, KV cache full) and
"unexplained" when nothing does; a calibration point the bounded terms cannot reproduce within that fraction
is called out too (``calibration_missed``: the curve is not a shape the per-step model allows).

The JSON document (``--json``)::

    {"run_id", "source", "models": [{"model", "engine", "input_len", "output_len", "kind",
      "method" ("static_batch": B ÷ T(B); "simulated_server": :mod:`pipeline.predict.servedsim`),
      "calibrated_on", "calibration_reason", "fit": {terms, *_spread, "words"}, "error"
      (null, or why no fit was made), "median_abs_error", "worst_abs_error",
      "points": [{"concurrency", "calibration" (bool), "measured": {"output_throughput_tok_s",
      "tpot_s", "ttft_s"} | null, "predicted": {...}, "error": {metric: relative error},
      "call_out": null | "queueing" | "kv_cache_full" | "unexplained" | "calibration_missed"}]}]}

Pure assembly over :func:`pipeline.analysis.stages.load_run`; reading never writes into the run.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from pipeline.analysis import stages
from pipeline.analysis.analyze import hardware_block, mean_decode_context
from pipeline.predict.calibrate import (CALL_OUT_FRACTION, CalibrationError, Roofs, check_consistent, default_calibration,
                                describe_terms, per_repeat_fits, predict_static, relative_error)
# the fit on point summaries lives in calibrate (layer 6) so that the adaptive sweep (layer 7) uses it too
from pipeline.predict.calibrate import fit_points as _fit  # noqa: F401  (re-exported names of the former private helpers)
from pipeline.predict.calibrate import is_static as _static
from pipeline.predict.calibrate import prefill_bound, prefill_bound_reason, served_routing_scale
from pipeline.predict.calibrate import p50 as _p50
from pipeline.predict.calibrate import point_step_time_s as _step_time
from pipeline.predict.calibrate import rel_spread as _rel_spread  # noqa: F401
from pipeline.predict.calibrate import step_samples as _step_samples  # noqa: F401
from pipeline.predict.calibrate import with_spread as _spread
from pipeline.core.contracts import checked
from pipeline.core.errors import BatchmarkError
from pipeline.cards.modelcards import ModelCard
from pipeline.core.pointsummary import PointSummary
from pipeline.core.records import server_key, workload_of
from pipeline.store.runs import load_model_cards
from pipeline.predict.enginefit import CurveAxis, misfit_note, predict_static_curve
from pipeline.config.workload import stored_workload
from pipeline.predict.servedsim import ServedLimits, ServedSetup, fit_served, predict_served
from pipeline.views.predictcontract import PredictDocument

#: Doublings predicted past the largest measured concurrency.
BEYOND_DOUBLINGS = 1
METRICS = ("output_throughput_tok_s", "tpot_s", "ttft_s")


def parse_calibrate_on(text: str | None) -> list[int] | None:
    """``"1,4,32"`` → ``[1, 4, 32]``; None for None.  Raises BatchmarkError naming the bad value."""
    if text is None:
        return None
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) < 1:
            raise BatchmarkError(f"--calibrate-on: {part!r} is not a concurrency (a positive integer)")
        out.append(int(part))
    return sorted(set(out))


def _calibration_points(by_c: dict[int, PointSummary], calibrate_on: list[int] | None,
                        kind: str | None) -> tuple[list[int], str]:
    """(concurrencies to fit on, why): ``--calibrate-on``'s, each a usable measured point of ``by_c`` and at least
    three, else the default for the model's ``kind`` (:func:`pipeline.predict.calibrate.default_calibration`)."""
    if calibrate_on is None:
        return default_calibration(list(by_c), kind)
    missing = [c for c in calibrate_on if c not in by_c]
    if missing:
        raise CalibrationError(f"--calibrate-on {','.join(map(str, calibrate_on))}: no usable measured point "
                               f"at c = {', '.join(map(str, missing))} (measured: {', '.join(map(str, by_c)) or 'none'})")
    if len(calibrate_on) < 3:
        raise CalibrationError(f"--calibrate-on names {len(calibrate_on)} concurrencies: three terms need three")
    return list(calibrate_on), "chosen with --calibrate-on"


def _predicted_rows(rows: list[dict[str, Any]], cs: list[int], preds: list[dict[str, Any]],
                    measured: dict[int, PointSummary], chosen: list[int], band_rel: float | None,
                    analysis_points: dict[int, dict[str, Any]]) -> list[float]:
    """Append to ``rows`` one row per concurrency of ``cs``: measured and predicted figures, the band, the relative
    error and the call-out where the prediction misses by more than :data:`CALL_OUT_FRACTION`; returns the absolute
    errors of the points not calibrated on."""
    errors = []
    for c, pred in zip(cs, preds):
        s = measured.get(c)
        meas = None if s is None else {"output_throughput_tok_s": s.output_throughput_tok_s,
                                       "tpot_s": _p50(s.tpot_s), "ttft_s": _p50(s.ttft_s)}
        predicted = {m: pred.get(m) for m in METRICS}
        tok = predicted["output_throughput_tok_s"]
        predicted["band"] = pred.get("band") or ([tok * (1 - band_rel), tok * (1 + band_rel)] if tok and band_rel else None)
        err = {m: relative_error(predicted[m], meas[m]) for m in METRICS} if meas else None
        row = {"concurrency": c, "calibration": c in chosen, "measured": meas, "predicted": predicted,
               "error": err, "call_out": None}
        e = err and err["output_throughput_tok_s"]
        if e is not None and c in chosen and abs(e) > CALL_OUT_FRACTION:
            row["call_out"] = "calibration_missed"  # the bounded terms cannot reproduce a point they were fitted on
        if e is not None and c not in chosen:
            errors.append(abs(e))
            if abs(e) > CALL_OUT_FRACTION:
                regime = (analysis_points.get(c) or {}).get("regime")
                row["call_out"] = regime if regime in ("queueing", "kv_cache_full") else "unexplained"
        rows.append(row)
    return errors


def predict_workload(points: list[PointSummary], analysis_points: dict[int, dict[str, Any]], card: ModelCard | None,
                     hw: dict[str, Any], calibrate_on: list[int] | None,
                     limits: dict[str, Any] | None = None, workload: Any = None,
                     distinct_prompts: bool = False) -> dict[str, Any]:
    """Calibrate on one workload's closed-loop points and predict every point (module docstring's model entry);
    ``workload``: the run's drawn lengths (:func:`pipeline.config.workload.stored_workload`; None: fixed);
    ``distinct_prompts``: a decode-phase curve whose sequences decode distinct prompts (:func:`distinct_prompts`),
    its MoE experts' coverage growing with the batch, not held at k/E as llama.cpp's benches hold it.

    ``points``: the workload's closed-loop summaries; ``analysis_points``: the analysis' point rows
    by concurrency (``excluded``, ``regime``); ``hw``: :func:`pipeline.analysis.analyze.hardware_block`;
    ``limits``: the server's (``run.json`` ``server.servers.<model>.limits``) for a served run's simulated
    server (:mod:`pipeline.predict.servedsim`), with each measured point's requests per repeat.
    A workload that cannot be fitted gets ``"error"`` (the reason, one line) and no predictions.
    """
    first = points[0]
    entry: dict[str, Any] = {"model": first.model, "engine": first.engine, "variant": first.variant,
                             "input_len": first.input_len,
                             "output_len": first.output_len, "kind": card.kind if card else None,
                             "method": "static_batch" if _static(first) else "simulated_server",
                             "calibrated_on": None, "calibration_reason": None, "fit": None, "error": None,
                             "median_abs_error": None, "worst_abs_error": None, "points": []}
    usable = [s for s in sorted(points, key=lambda s: s.concurrency)
              if not (analysis_points.get(s.concurrency) or {}).get("excluded") and _step_time(s)
              and s.output_throughput_tok_s]
    try:
        if card is None:
            raise CalibrationError("no model card: the bytes and FLOPs of a step are unknown")
        if not hw.get("bandwidth_gb_s"):
            raise CalibrationError("the run's hardware has no bandwidth figure")
        by_c = {s.concurrency: s for s in usable}
        chosen, reason = _calibration_points(by_c, calibrate_on, card.kind)
        if usable and prefill_bound(usable[0]):  # its throughput may fall with c: no contradiction, no fit either
            raise CalibrationError(prefill_bound_reason(usable[0]))
        check_consistent([(s.concurrency, s.output_throughput_tok_s) for s in usable], chosen)
        static = _static(first)
        roofs = Roofs(card, mean_decode_context(first.input_len, first.output_len), hw["bandwidth_gb_s"],
                      hw.get("peak_tflops"),
                      None if static else served_routing_scale(card, first.engine, hw.get("name")))
        cal = [by_c[c] for c in chosen]
        requests = {s.concurrency: round((s.completed + s.failed) / s.repeats) for s in points if s.repeats}
        setup = ServedSetup(first.input_len, first.output_len, ServedLimits.of(limits), requests, workload=workload)
        if static:
            terms = _spread(roofs, cal, static, first.input_len, _fit(roofs, cal, static, first.input_len))
            engine_preds = _static_engine_fit(card, first, hw, cal, not distinct_prompts)
        else:  # fitted so that the simulated server reproduces the calibration points (servedsim.fit_served)
            terms, correction = fit_served(roofs, cal, setup)
            terms = _spread(roofs, cal, static, first.input_len, terms,
                            per_repeat_fits(roofs, cal, static, first.input_len, correction))
    except CalibrationError as exc:
        entry["error"] = str(exc)
        return entry
    if not static:
        engine_preds = None
    entry.update(calibrated_on=chosen, calibration_reason=reason,
                 fit={**terms.as_dict(), "words": describe_terms(terms, hw["bandwidth_gb_s"], hw.get("peak_tflops"), roofs)})
    grid = sorted({s.concurrency for s in points})
    beyond = [grid[-1] * 2 ** (i + 1) for i in range(BEYOND_DOUBLINGS)]
    cs = grid + beyond
    preds = (predict_static(roofs, terms, cs) if static else
             predict_served(roofs, terms, cs, setup))
    if engine_preds is not None:  # the engine-terms fit (pipeline.predict.enginefit): the one used where it fits
        preds = _use_engine_fit(entry, card, engine_preds(cs), preds, distinct_prompts)
    band_rel = _band_fraction(terms)
    errors = _predicted_rows(entry["points"], cs, preds, {s.concurrency: s for s in points}, chosen, band_rel,
                             analysis_points)
    if errors:
        entry["median_abs_error"] = statistics.median(errors)
        entry["worst_abs_error"] = max(errors)
    misses = {r["concurrency"]: r["error"]["output_throughput_tok_s"] for r in entry["points"]
              if r["calibration"] and r["error"] and r["error"]["output_throughput_tok_s"] is not None}
    free = tuple(entry["fit"].get("engine_terms") or ("overhead_s", "bandwidth_fraction", "compute_fraction"))
    entry["fit_note"] = misfit_note(misses, free)
    return entry


#: Tools whose decode-phase figures come from requests of distinct prompts sent to a server (llama-benchy: each
#: request its own text), so an MoE batch's tokens route apart; llama-batched-bench and the transformers backend's
#: static batches are fitted as identical routing (coverage k/E).
DISTINCT_PROMPT_TOOLS = frozenset({"llama-benchy"})


def distinct_prompts(meta: dict[str, Any]) -> bool:
    """Whether a run's decode-phase curves decode distinct prompts: its ``source_tool`` (``run.json``) is one of
    :data:`DISTINCT_PROMPT_TOOLS`."""
    return meta.get("source_tool") in DISTINCT_PROMPT_TOOLS


def _routing_words(card: ModelCard, efit, distinct: bool) -> str:
    """How the engine-terms fit counted an MoE's experts, in words (a dense card: none routed)."""
    if not card.expert_bytes:
        return "engine terms fitted (no experts routed)"
    if not distinct:
        return "engine terms fitted as identical prompts (every sequence the same experts, coverage k/E)"
    s = getattr(efit.terms, "routing_scale", None)
    return ("engine terms fitted on distinct prompts: experts' coverage grows with the batch"
            + (f" at a routing locality s = {s:.3g}" if s else " (uniform routing)"))


def _use_engine_fit(entry: dict[str, Any], card: ModelCard, fit_e, preds: list[dict[str, Any]],
                    distinct: bool) -> list[dict[str, Any]]:
    """The engine-terms predictions where that fit ran (``fit_e``: (predictions, fit), None when it failed), its terms
    and routing said in ``entry["fit"]``; else ``preds`` (the calibrate fit's) unchanged."""
    if fit_e is None:
        return preds
    out, efit = fit_e
    entry["method"] = "static_batch_engine_terms"
    entry["fit"]["engine_terms"] = {n: getattr(efit.terms, n) for n in efit.free}
    entry["fit"]["engine_terms_spread"] = efit.spread
    words = entry["fit"]["words"].replace("; experts counted under uniform routing", "")  # the calibrate fit's
    entry["fit"]["words"] = f"{words}; {_routing_words(card, efit, distinct)}"
    return out


def _static_engine_fit(card: ModelCard, first: PointSummary, hw: dict[str, Any], cal: list[PointSummary],
                       identical_routing: bool = True):
    """A function of the concurrencies to predict: the static batch's engine-terms predictions and fit
    (:func:`pipeline.predict.enginefit.predict_static_curve`, ``identical_routing`` as it takes it), None when that fit
    fails (the calibrate fit stands)."""
    pts = [(s.concurrency, _step_time(s), _p50(s.ttft_s)) for s in cal]

    def run(cs: list[int]):
        try:
            axis = CurveAxis(card, first.input_len + first.output_len / 2, hw["bandwidth_gb_s"], hw.get("peak_tflops"),
                             identical_routing=identical_routing)
            return predict_static_curve(axis, first.engine, hw.get("name"), pts, cs, first.input_len)
        except (ValueError, ZeroDivisionError):
            return None
    return run


def _band_fraction(terms) -> float | None:
    """The relative half-width of a prediction band from the calibrate fit: the bandwidth fraction's spread over
    repeats relative to it (None with one repeat)."""
    sd = (terms.spread or {}).get("bandwidth_fraction")
    return sd / terms.bandwidth_fraction if sd and terms.bandwidth_fraction else None


def predict_run(ref: str | Path, calibrate_on: list[int] | None = None) -> dict[str, Any]:
    """The ``predict --json`` document of a run (id or path); see the module docstring.

    Raises:
        BatchmarkError: unknown or unreadable run; a run without a closed-loop workload.
    """
    res = stages.load_run(ref)
    hw = hardware_block(res.meta.get("hardware") or {}, res.meta.get("probe"))
    cards: dict[str, ModelCard] = {}
    for name, d in load_model_cards(res.run_dir).items():
        try:
            cards[name] = ModelCard.from_dict(d)
        except TypeError as exc:
            raise BatchmarkError(f"{res.run_dir}: malformed model card {name!r} ({exc})") from None
    servers = (res.meta.get("server") or {}).get("servers") or {}
    rows_by_workload: dict[tuple, dict[int, dict[str, Any]]] = {}
    for row in (res.analysis.get("points") or []):
        if row.get("concurrency") is not None and row.get("regime", "x") is not None:
            rows_by_workload.setdefault(workload_of(row), {})[row["concurrency"]] = row
    groups: dict[tuple, list[PointSummary]] = {}
    for s in res.summaries:
        if s.load == "closed":
            groups.setdefault(workload_of(s), []).append(s)
    if not groups:
        raise BatchmarkError(f"run {res.run_dir.name}: no closed-loop points to calibrate on")
    models = []
    for wl, pts in sorted(groups.items()):
        server = servers.get(server_key(wl.model, wl.variant))  # each variant's own server and card (FP8 KV)
        limits = server.get("limits") if isinstance(server, dict) else None
        card = cards.get(server_key(wl.model, wl.variant)) or cards.get(wl.model)
        models.append(predict_workload(pts, rows_by_workload.get(wl, {}), card, hw, calibrate_on, limits,
                                       stored_workload(res.meta, f"{res.run_dir}/run.json"), distinct_prompts(res.meta)))
    from pipeline.analysis.quality import run_quality, short_reasons

    quality = run_quality(res.meta, [x.as_dict() for x in res.summaries], res.analysis.get("models") or [])
    return checked(PredictDocument, {"run_id": res.run_dir.name, "source": res.meta.get("source", "measured"),
                                     "models": models, "flagged": short_reasons(quality) or None})


def _num(v: float | None, scale: float = 1.0, spec: str = "{:.1f}") -> str:
    return "-" if v is None else spec.format(v * scale)


def format_predict(doc: dict[str, Any]) -> str:
    """The ``predict`` document as text: per workload the fitted terms in words, then measured vs predicted per point."""
    from pipeline.core.texttable import text_table
    lines = [f"run {doc['run_id']} ({doc['source']}): calibrated per-step model (predictions, not measurements)"]
    if doc.get("flagged"):  # a fit to a flagged run's points fits its interference too
        lines.append(f"FLAGGED RUN: {'; '.join(doc['flagged'])}: its points, and so the fit and its errors, may "
                     "show the machine's load, not the model")
    for m in doc["models"]:
        lines.append("")
        variant = f", variant {m['variant']}" if m.get("variant") not in (None, "default") else ""
        head = f"{m['model']} ({m['kind'] or '?'}, {m['engine']}{variant}, in {m['input_len']} / out {m['output_len']})"
        if m["error"]:
            lines.append(f"{head}: no prediction: {m['error']}")
            continue
        lines.append(f"{head}: calibrated on c = {', '.join(map(str, m['calibrated_on']))}: {m['calibration_reason']}")
        lines.append(f"  fit: {m['fit']['words']}")
        rows = []
        for p in m["points"]:
            meas, pred, err = p["measured"] or {}, p["predicted"], p["error"] or {}
            if p["calibration"]:
                note = ("calibration, which the fit misses by more than "
                        f"{CALL_OUT_FRACTION:.0%}" if p["call_out"] == "calibration_missed" else "calibration")
            else:
                note = (f"off by more than {CALL_OUT_FRACTION:.0%}: {p['call_out'].replace('_', ' ')}"
                        if p["call_out"] else "")
            rows.append([p["concurrency"], _num(meas.get("output_throughput_tok_s")),
                         _num(pred["output_throughput_tok_s"]),
                         _num(err.get("output_throughput_tok_s"), 100, "{:+.0f}%"),
                         _num(meas.get("tpot_s"), 1e3), _num(pred["tpot_s"], 1e3),
                         _num(meas.get("ttft_s"), 1e3), _num(pred["ttft_s"], 1e3), note])
        lines.extend("  " + line for line in text_table(
            ["c", "measured tok/s", "predicted tok/s", "error", "TPOT ms", "pred. TPOT ms", "TTFT ms",
             "pred. TTFT ms", "note"], rows, align="rrrrrrrrl"))
        if m["median_abs_error"] is not None:
            lines.append(f"  output throughput at the {sum(1 for p in m['points'] if p['measured'] and not p['calibration'])} "
                         f"other measured points: median error {m['median_abs_error']:.1%}, worst {m['worst_abs_error']:.1%}")
    return "\n".join(lines)
