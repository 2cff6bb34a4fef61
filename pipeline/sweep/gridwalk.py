"""The sweep stage: for each model, walk the concurrency grid, then the open-loop rates, measure each point, store its records.

Open loop (``open_loop`` in the config): after the model's concurrency grid, each rate of
``open_loop.rates`` is measured as a ``poisson``/``constant`` point (:func:`pipeline.sweep.ratewalk.open_rates` places
them for ``auto``); with an ``slo`` and ``open_loop.bisect_steps``, extra rates are measured by
bisection between the last rate that met the SLO and the first that did not
(:func:`pipeline.sweep.ratewalk.bisect_rate`).

Resumable: points already stored in the run folder are not measured again.  Escalation
stops for a model once ``stop_after_weak_doublings`` doublings in a row each gained less
than ``knee_threshold`` in output throughput, or when the next point would not fit in memory.
"""

from __future__ import annotations

import os
import platform
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from pipeline.core import scrub
from pipeline.store import pointfiles, runs
from pipeline.sweep.adaptivewalk import adaptive_model
from pipeline.analysis.knee import doubling_gains
from pipeline.config.sweepconfig import SweepConfig
from pipeline.engines import get_engine
from pipeline.engines.base import PointDoesNotFit
from pipeline.machine.hardware import load_profile, probe
from pipeline.metrics.summarize import summarize_point
from pipeline.core.progress import Display, quiet_library_bars, trend_eta_s
from pipeline.sweep.provenance import driver, git_commit, machine_identity, probe_warning, record_server_version, versions
from pipeline.analysis.quality import point_verdict
from pipeline.sweep.ratewalk import rate_sweep
from pipeline.sweep.point import count_point, load_model, measure_point
from pipeline.core.records import PointKey


def stop_for_knee(curve: list[tuple[int, float]], flagged: set[int], threshold: float, needed: int) -> bool:
    """Whether to stop escalating a model: its last ``needed`` doublings were each weak (:func:`weak_doublings`)
    and none of the points they join was flagged by the interference check or the repeats' spread.

    A point measured on a busy machine (:func:`pipeline.analysis.quality.point_verdict`) can look like a plateau that is
    no property of batching; stopping on it cut a dense model's grid at c = 4 and gave it a knee at c = 1.

    Args:
        curve: ``[(concurrency, output tok/s), ...]`` measured so far, in grid order.
        flagged: concurrencies of this model whose point verdict is flagged.
        threshold: a doubling gaining less than this fraction is weak.
        needed: weak doublings in a row that stop the model (0: never stop).
    """
    if not needed or weak_doublings(curve, threshold) < needed:
        return False
    return not any(c in flagged for c, _ in curve[-(needed + 1):])


def weak_doublings(throughputs: list[tuple[int, float]], threshold: float) -> int:
    """How many of the last doublings in a row each gained less than ``threshold``.

    ``throughputs`` is ``[(concurrency, tokens/s), ...]`` in grid order; gains per doubling as
    :func:`pipeline.analysis.knee.doubling_gains` computes them.
    """
    n = 0
    for gain in reversed(doubling_gains(throughputs)):
        if gain >= threshold:
            break
        n += 1
    return n


def _probe(engine):
    """The run's probe: this machine measured, or what a simulated engine states it simulates (its profile's spec figures)."""
    own = getattr(engine, "probe", None)
    return own() if callable(own) else probe(engine.device)


def probe_after(device: str, log: Callable[[str], None], engine=None) -> dict:
    """The bandwidth probe repeated after the sweep (``run.json`` ``probe_after``), with its own spread warning.

    :mod:`pipeline.analysis.quality` compares it with the probe before the sweep: a machine whose bandwidth
    changed while the run was measured (another load came or went) gives a flagged run.
    """
    log("probing again after the sweep …")
    res = _probe(engine) if engine is not None else probe(device)
    log(f"probe after: {res.bandwidth_gb_s:.1f} GB/s read, {res.peak_tflops:.3f} TFLOP/s")
    return {**res.as_dict(), "warning": probe_warning(res.bandwidth_repeats_gb_s, res.tflops_repeats, res.load)}


def engine_config(cfg: SweepConfig, log: Callable[[str], None],
                  display: Display | None = None) -> tuple[SweepConfig, dict[str, str] | None]:
    """The config the sweep measures with, and the fallback taken (None when none).

    A ``vllm`` config whose command runs ``{python}`` needs the server's own environment:
    it is made here when it was never made (:func:`pipeline.machine.serverenv.create_server_env`).
    Where it cannot run, ``vllm.fallback_engine`` (if set) is measured instead, and the
    reason is returned for ``run.json``.

    Raises:
        BatchmarkError: the environment cannot run and there is no fallback engine.
    """
    from pipeline.machine import serverenv
    from pipeline.core.errors import BatchmarkError

    if cfg.engine != "vllm" or "{python}" not in cfg.vllm.command:
        return cfg, None
    python = serverenv.resolve(cfg.vllm.python)
    if serverenv.read_status(python.parent.parent) is None and not python.exists():
        display = display or Display(0, enabled=False)
        with display.phase(f"server environment {python.parent.parent.name}: creating"):  # minutes: a phase of its own
            serverenv.create_server_env(python.parent.parent, cfg.vllm.requirements, log=log)
    ok, why = serverenv.usable(cfg.vllm.python)
    if ok:
        return cfg, None
    fallback = cfg.vllm.fallback_engine
    if fallback is None:
        raise BatchmarkError(f"vllm.python: the server environment cannot run here: {why}")
    log(f"vLLM cannot run on this machine ({why}); measuring with the {fallback} engine instead")
    return cfg.model_copy(update={"engine": fallback}), {"from": "vllm", "to": fallback, "reason": why}


@runs.locked_run  # one live process per run: a second sweep into it is refused, naming the holder
def run_sweep(cfg: SweepConfig, run_dir: Path, config_path: str | None = None,
              progress: bool = True, log: Callable[[str], None] | None = None,
              models: list[str] | None = None, part_of: str | None = None, plan=None,
              budgeted: SweepConfig | None = None, derive: Callable[[Path], None] | None = None) -> Path:
    """Measure every point of ``cfg`` into ``run_dir`` (created or resumed) and complete the run.

    ``derive`` writes the run's derived files at publish (:func:`pipeline.analysis.stages.write_derived`, handed in by the
    caller, ``batchmark sweep``: the sweep comes before the stages and never imports them; a part gets none,
    its merge derives the run's): :func:`pipeline.store.runs.complete_run` runs it before the run says complete.

    ``plan`` (a :class:`pipeline.plan.estimate.Plan`, made by the caller: the sweep never imports the plan) gives
    the one-line total printed at the start, the points that do not fit, and the points' ETA of the progress
    display (:attr:`pipeline.core.progress.Display.estimate`: the plan's seconds of the points left).  ``budgeted`` is ``cfg`` as the budget chose to measure it (:func:`pipeline.plan.budget.fit_budget`):
    the run keeps ``cfg`` and its digest (so parts, resume and merge agree) and states the budget's
    choices in ``run.json`` (``budget``).

    With ``models`` (names of ``cfg.models``), only those models are measured: ``run_dir`` is
    then a part of the run ``part_of`` (:mod:`pipeline.sweep.parts`; the merge stage assembles the
    parts into the run).  A part's ``run.json`` is a run's provenance of its own (host, driver,
    versions, probe) plus ``part_of``, ``models`` and ``machine`` (:func:`pipeline.sweep.provenance.machine_identity`).

    Returns the run folder.  Raises BatchmarkError for user-caused problems (bad model
    spec, complete run); an engine crash propagates after everything measured is stored.
    """
    display = Display(0, enabled=progress)
    log = log or display.write  # every message above the bar, never onto it
    if progress:
        quiet_library_bars()
    what = f"part {run_dir.name} of run {part_of}" if part_of else f"run {run_dir.name}"
    runs.clean_stale_tmp(run_dir.parent)
    hw = load_profile(cfg.hardware)
    if plan is not None and not ((run_dir / "run.json").exists() and runs.is_complete(run_dir)):
        log(plan.total_line())
        for line in plan.not_fitting():
            log(f"does not fit: {line}")
        for line in plan.dropped:
            log(f"budget: dropped {line}")
    if not (run_dir / "run.json").exists() or not runs.is_complete(run_dir):
        measured_cfg, fallback = engine_config(budgeted or cfg, log, display)  # before the run folder is touched
    if (run_dir / "run.json").exists():
        if runs.is_complete(run_dir):
            log(f"{what} is complete; nothing to measure")
            return run_dir
        meta = runs.read_run_json(run_dir)
        if meta.get("config_digest") != cfg.digest():
            from pipeline.core.errors import BatchmarkError

            raise BatchmarkError(f"{run_dir}: incomplete run was started with another config "
                                 f"({meta.get('config_name')}); it is left as is — start a fresh run")
        log(f"resuming {what}")
    else:
        runs.create_run(run_dir, {
            "source": "simulated" if cfg.engine == "simulated" else "measured", "config_name": cfg.name,
            "config_digest": cfg.digest(),
            "config_path": scrub.relative_path(config_path), "config": cfg.model_dump(mode="json"),
            "hardware": hw.model_dump(mode="json"), "host": platform.node(),
            "platform": platform.platform(), "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "git_commit": git_commit(), "versions": versions(), "driver": driver(),
            # paths relative to the repository, other machine folders replaced (pipeline.core.scrub): runs are published
            "command": "batchmark " + " ".join(shlex.quote(scrub.relative_path(a) if os.path.isabs(a) else
                                                           scrub.scrub_paths(a) or a) for a in sys.argv[1:]),
            **({"part_of": part_of, "models": list(models or []), "machine": machine_identity(cfg.hardware)}
               if part_of else {})})
    if fallback:
        runs.update_run_json(run_dir, engine_fallback=fallback)
    if budgeted is not None and plan is not None and "budget" not in runs.read_run_json(run_dir):
        runs.update_run_json(run_dir, budget={"budget_s": plan.budget_s, "predicted_wall_s": plan.wall_s,
                                              "met": plan.fits_budget, "dropped": plan.dropped,
                                              "certainty": plan.certainty, "repeats": budgeted.repeats,
                                              "concurrency": list(budgeted.concurrency),
                                              "open_loop": budgeted.open_loop is not None})
    cfg = measured_cfg
    engine = get_engine(cfg)
    engine.attach_run(run_dir)  # served engines keep server logs in the run folder
    meta = runs.read_run_json(run_dir)
    if "probe" not in meta:
        with display.phase("probing memory bandwidth and matmul rate"):
            res = _probe(engine)
        log(f"probe: {res.bandwidth_gb_s:.1f} GB/s read, {res.peak_tflops:.3f} TFLOP/s ({res.device})")
        warning = probe_warning(res.bandwidth_repeats_gb_s, res.tflops_repeats, res.load)
        if warning:
            log(f"warning: {warning}")
        runs.update_run_json(run_dir, probe={**res.as_dict(), "warning": warning}, engine=engine.provenance())
    stops: dict[str, str] = dict(meta.get("stopped", {}))
    # counted from the summaries the loop computes anyway; kept in run.json for the CLI's exit status
    failures = {"points": 0, "with_failures": 0, "empty": 0}
    slo = cfg.slo.model_dump() if cfg.slo else None
    specs = [m for m in cfg.models if models is None or m.name in models]
    total = len(specs) * len(cfg.concurrency)
    display.total = total
    # hardware time: a simulation's own ETA is its median rule; an adaptive sweep's points are not known in advance
    if plan is not None and cfg.engine != "simulated" and cfg.adaptive is None:
        display.estimate = plan.estimate_after([s.name for s in specs], list(cfg.concurrency))
    elif cfg.adaptive is None:  # no plan: the measured points' trend in concurrency (progress.trend_eta_s)
        order = [c for _ in specs for c in cfg.concurrency]
        display.estimate = lambda done: trend_eta_s(display.measured, order[done:])
    display.start()
    try:
        for spec in specs:
            keys = [PointKey(spec.name, cfg.engine, cfg.input_len, cfg.output_len, c) for c in cfg.concurrency]
            curve: list[tuple[int, float]] = []
            noisy: set[int] = set()  # concurrencies whose point the interference check or the spread flagged
            loaded = False
            done = 0
            if cfg.adaptive is not None:  # measure only the points that settle the knee (pipeline.predict.adaptive)
                loaded, done = adaptive_model(cfg, spec, engine, run_dir, plan, curve, stops, failures, display, log,
                                               slo)
                keys = []
            for key in keys:  # (each point's summary feeds the curve, the progress bar and the failure count)
                label = f"{spec.name} c={key.concurrency}"
                resumed = runs.has_point(run_dir, key)
                if resumed:
                    display.begin_point(label, key.concurrency)
                    summ = summarize_point(pointfiles.load_point(pointfiles.point_path(run_dir, key)), slo)
                else:
                    if stop_for_knee(curve, noisy, cfg.knee_threshold, cfg.stop_after_weak_doublings):
                        stops[spec.name] = f"knee: {cfg.stop_after_weak_doublings} weak doublings in a row before c={key.concurrency}"
                        break
                    if not loaded:  # a phase of its own: a server's start is no point (nor in the points' ETA)
                        with display.phase(f"{spec.name}: " + ("server start to healthy" if cfg.engine == "vllm"
                                                               else "loading the model")):
                            loaded = load_model(engine, spec, run_dir)
                    ok, why = engine.fits(key)
                    if not ok:
                        stops[spec.name] = f"c={key.concurrency} not run: {why}"
                        break
                    display.begin_point(label, key.concurrency)
                    try:
                        records = measure_point(cfg, engine, key)
                    except PointDoesNotFit as exc:
                        stops[spec.name] = f"memory: {exc}"
                        break
                    runs.write_point(run_dir, records)
                    summ = summarize_point(records, slo)
                count_point(summ, failures, cfg, f"{spec.name} {key.label()}", log)
                if summ.output_throughput_tok_s:
                    curve.append((key.concurrency, summ.output_throughput_tok_s))
                display.end_point(summ.output_throughput_tok_s, measured=not resumed)
                if point_verdict({"samples": summ.samples, "interference": summ.interference})["verdict"] == "flagged":
                    noisy.add(key.concurrency)
                done += 1
            display.skip(len(cfg.concurrency) - done)  # points skipped past a stop (or left to prediction)
            if cfg.open_loop is not None and spec.name not in stops:
                loaded = rate_sweep(cfg, spec, engine, run_dir, curve, loaded, stops, failures, log) or loaded
            if spec.name in stops:
                log(f"{spec.name}: stopped escalating ({stops[spec.name]})")
            if loaded:
                engine.unload()
        runs.update_run_json(run_dir, stopped=stops, failures=failures)
        record_server_version(run_dir)
        if "probe_after" not in runs.read_run_json(run_dir):
            runs.update_run_json(run_dir, probe_after=probe_after(engine.device, log, engine))
        runs.complete_run(run_dir, derive=derive)
    finally:
        display.close()
        # explicit, on every way out (an error, Ctrl-C): a served engine's server is stopped here, never left
        # to garbage collection; unloading twice is harmless
        engine.unload()
    log(f"{what} complete")
    verdict = failure_verdict(failures["points"], failures["with_failures"], failures["empty"], run_dir.name)
    if verdict:
        log(f"warning: {verdict}")
    return run_dir


def failure_verdict(points: int, with_failures: int, empty: int, run_id: str) -> str | None:
    """One line on a run's failed requests, None when every measured request succeeded.

    a run where every request failed ended "complete" with exit 0 and dashes in
    ``show``; the sweep now says so at the end, and the CLI exits 1 when nothing was measured.
    """
    if not with_failures and not empty:
        return None
    return (f"{with_failures} of {points} point(s) had failed requests, {empty} measured nothing "
            f"(batchmark show {run_id} lists the errors)")
