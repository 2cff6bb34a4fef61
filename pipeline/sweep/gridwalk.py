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
from typing import Any, Callable

from pipeline.core import scrub
from pipeline.store import runs
from pipeline.sweep.adaptivewalk import adaptive_model
from pipeline.sweep.frontierwalk import frontier_model
from pipeline.analysis.knee import doubling_gains
from pipeline.config.sweepconfig import SweepConfig
from pipeline.config.variants import Variant, run_variants, shape_config, variant_config, variant_shapes
from pipeline.backends import get_backend
from pipeline.machine.hardware import load_profile, probe
from pipeline.core.progress import Display, quiet_library_bars, trend_eta_s
from pipeline.sweep.provenance import git_commit, gpu_driver, machine_identity, probe_warning, record_server_version, versions
from pipeline.analysis.quality import point_verdict
from pipeline.sweep.ratewalk import rate_walk
from pipeline.sweep.preflight import load_note_now
from pipeline.sweep.parts import Part
from pipeline.sweep.point import ModelWalk, Planned, SweepState, measure_or_resume
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


def _probe(backend):
    """The run's probe: this machine measured, or what a simulated backend states it simulates (its profile's spec figures)."""
    own = getattr(backend, "probe", None)
    return own() if callable(own) else probe(backend.device)


def probe_after(device: str, log: Callable[[str], None], backend=None) -> dict:
    """The bandwidth probe repeated after the sweep (``run.json`` ``probe_after``), with its own spread warning.

    :mod:`pipeline.analysis.quality` compares it with the probe before the sweep: a machine whose bandwidth
    changed while the run was measured (another load came or went) gives a flagged run.
    """
    log("probing again after the sweep …")
    res = _probe(backend) if backend is not None else probe(device)
    log(f"probe after: {res.bandwidth_gb_s:.1f} GB/s read, {res.peak_tflops:.3f} TFLOP/s")
    return {**res.as_dict(), "warning": probe_warning(res.bandwidth_repeats_gb_s, res.tflops_repeats, res.load)}


def engine_config(cfg: SweepConfig, log: Callable[[str], None],
                  display: Display | None = None) -> tuple[SweepConfig, dict[str, str] | None]:
    """The config the sweep measures with, and the fallback taken (None when none).

    A ``vllm`` config whose command runs ``{python}`` needs the server's own environment:
    it is made here when it was never made (:func:`pipeline.machine.serverenv.create_server_env`).
    Where it cannot run, ``vllm.fallback_backend`` (if set) is measured instead, and the
    reason is returned for ``run.json``.

    Raises:
        BatchmarkError: the environment cannot run and there is no fallback backend.
    """
    from pipeline.machine import serverenv
    from pipeline.core.errors import BatchmarkError

    if cfg.backend != "vllm" or "{python}" not in cfg.vllm.command:
        return cfg, None
    python = serverenv.resolve(cfg.vllm.python)
    if serverenv.read_status(python.parent.parent) is None and not python.exists():
        display = display or Display(0, enabled=False)
        with display.phase(f"server environment {python.parent.parent.name}: creating"):  # minutes: a phase of its own
            serverenv.create_server_env(python.parent.parent, cfg.vllm.requirements, log=log)
    ok, why = serverenv.usable(cfg.vllm.python)
    if ok:
        return cfg, None
    fallback = cfg.vllm.fallback_backend
    if fallback is None:
        raise BatchmarkError(f"vllm.python: the server environment cannot run here: {why}")
    log(f"vLLM cannot run on this machine ({why}); measuring with the {fallback} backend instead")
    return cfg.model_copy(update={"backend": fallback}), {"from": "vllm", "to": fallback, "reason": why}


@runs.locked_run  # one live process per run: a second sweep into it is refused, naming the holder
def run_sweep(cfg: SweepConfig, run_dir: Path, config_path: str | None = None, progress: bool = True,
              log: Callable[[str], None] | None = None, part: Part | None = None, planned: Planned | None = None,
              derive: Callable[[Path], None] | None = None) -> Path:
    """Measure every point of ``cfg`` into ``run_dir`` (created or resumed) and complete the run.

    ``derive`` writes the run's derived files at publish (:func:`pipeline.analysis.stages.write_derived`, handed in by the
    caller, ``batchmark sweep``: the sweep comes before the stages and never imports them; a part gets none,
    its merge derives the run's): :func:`pipeline.store.runs.complete_run` runs it before the run says complete.

    ``planned`` (:class:`pipeline.sweep.point.Planned`): its ``plan`` gives the one-line total printed at the start,
    the points that do not fit, and the points' ETA of the progress display
    (:attr:`pipeline.core.progress.Display.estimate`: the plan's seconds of the points left); its ``budgeted`` is
    ``cfg`` as the budget chose to measure it: the run keeps ``cfg`` and its digest (so parts, resume and merge agree)
    and states the budget's choices in ``run.json`` (``budget``).

    With ``part`` (:class:`pipeline.sweep.parts.Part`), only its models (names of ``cfg.models``) and, where it names
    them, its variants are measured: ``run_dir`` is then a part of the run ``part.of`` (the merge stage assembles the
    parts into the run).  A part's ``run.json`` is a run's provenance of its own (host, GPU driver,
    versions, probe) plus ``part_of``, ``models`` and ``machine`` (:func:`pipeline.sweep.provenance.machine_identity`).

    Returns the run folder.  Raises BatchmarkError for user-caused problems (bad model
    spec, complete run); a backend crash propagates after everything measured is stored.
    """
    plan, budgeted = (planned.plan, planned.budgeted) if planned is not None else (None, None)
    models, part_of, variants = (part.models, part.of, part.variants) if part is not None else (None, None, None)
    display = Display(0, enabled=progress)
    log = log or display.write  # every message above the bar, never onto it
    if progress:
        quiet_library_bars()
    what = f"part {run_dir.name} of run {part_of}" if part_of else f"run {run_dir.name}"
    runs.clean_stale_tmp(run_dir.parent)
    hw = load_profile(cfg.hardware)
    complete = (run_dir / "run.json").exists() and runs.is_complete(run_dir)
    if plan is not None and not complete:
        log_plan(plan, log)
    if complete:
        log(f"{what} is complete; nothing to measure")
        return run_dir
    measured_cfg, fallback = engine_config(budgeted or cfg, log, display)  # before the run folder is touched
    open_run(cfg, run_dir, hw, config_path, models, part_of, what, log)
    if fallback:
        runs.update_run_json(run_dir, backend_fallback=fallback)
    if budgeted is not None and plan is not None:
        record_budget(run_dir, plan, budgeted)
    cells = Cells(measured_cfg, run_dir)
    walked = [v for v in measured_cfg.variant_list() if variants is None or v.name in variants]
    backend = cells.backend(walked[0])  # the first variant's: the probe and the first server
    stopped = dict(runs.read_run_json(run_dir).get("stopped", {}))
    if note := load_note_now(measured_cfg):  # before measuring: the machine is shared now
        log(note)
    probe_before(backend, run_dir, display, log)
    sweep = SweepState(measured_cfg, backend, run_dir, display, log, plan, stops=stopped)
    specs = [m for m in measured_cfg.models if models is None or m.name in models]
    show_points(sweep, specs)
    try:
        for spec in specs:
            for variant in walked:
                walk_variant(sweep, cells, spec, variant)
            if measured_cfg.adaptive is not None:  # over variants or shapes: the points that settle the frontier
                frontier_model(sweep, cells, spec)
        sweep.backend = backend
        finish_run(sweep, derive)
    finally:
        display.close()
        # explicit, on every way out (an error, Ctrl-C): a served backend's server is stopped here, never left
        # to garbage collection; unloading twice is harmless
        cells.unload()
    log(f"{what} complete")
    verdict = failure_verdict(sweep.failures["points"], sweep.failures["with_failures"], sweep.failures["empty"],
                              run_dir.name)
    if verdict:
        log(f"warning: {verdict}")
    return run_dir


def log_plan(plan, log: Callable[[str], None]) -> None:
    """The plan's one-line total, the points that do not fit and those the budget dropped, before anything is measured."""
    log(plan.total_line())
    for line in plan.not_fitting():
        log(f"does not fit: {line}")
    for line in plan.dropped:
        log(f"budget: dropped {line}")


def open_run(cfg: SweepConfig, run_dir: Path, hw, config_path: str | None, models: list[str] | None,
             part_of: str | None, what: str, log: Callable[[str], None]) -> None:
    """Create ``run_dir`` with its provenance (:func:`run_provenance`), or resume it when it was started with this config.

    Raises:
        BatchmarkError: the incomplete run in ``run_dir`` was started with another config (it is left as is).
    """
    if not (run_dir / "run.json").exists():
        runs.create_run(run_dir, run_provenance(cfg, hw, config_path, models, part_of))
        return
    meta = runs.read_run_json(run_dir)
    if meta.get("config_digest") != cfg.digest():
        from pipeline.core.errors import BatchmarkError

        raise BatchmarkError(f"{run_dir}: incomplete run was started with another config "
                             f"({meta.get('config_name')}); it is left as is — start a fresh run")
    log(f"resuming {what}")


def run_provenance(cfg: SweepConfig, hw, config_path: str | None, models: list[str] | None,
                   part_of: str | None) -> dict:
    """A new run's ``run.json`` fields: the config and its digest, the hardware profile, host, platform, start time,
    git commit, versions, GPU driver, the command (paths scrubbed: runs are published); a part's ``part_of``, ``models``
    and ``machine`` besides."""
    return {
        "source": "simulated" if cfg.backend == "simulated" else "measured", "config_name": cfg.name,
        "config_digest": cfg.digest(),
        "config_path": scrub.relative_path(config_path), "config": cfg.model_dump(mode="json"),
        "hardware": hw.model_dump(mode="json"), "host": platform.node(),
        "platform": platform.platform(), "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git_commit": git_commit(), "versions": versions(), "gpu_driver": gpu_driver(), "variants": run_variants(cfg),
        # paths relative to the repository, other machine folders replaced (pipeline.core.scrub): runs are published
        "command": "batchmark " + " ".join(shlex.quote(scrub.relative_path(a) if os.path.isabs(a) else
                                                       scrub.scrub_paths(a) or a) for a in sys.argv[1:]),
        **({"part_of": part_of, "models": list(models or []), "machine": machine_identity(cfg.hardware)}
           if part_of else {})}


def record_budget(run_dir: Path, plan, budgeted: SweepConfig) -> None:
    """The budget's choices in ``run.json`` (``budget``), once: a resumed run keeps the block it started with."""
    if "budget" in runs.read_run_json(run_dir):
        return
    runs.update_run_json(run_dir, budget={"budget_s": plan.budget_s, "predicted_wall_s": plan.wall_s,
                                          "met": plan.fits_budget, "dropped": plan.dropped,
                                          "certainty": plan.certainty, "repeats": budgeted.repeats,
                                          "concurrency": list(budgeted.concurrency),
                                          "open_loop": budgeted.open_loop is not None})


def probe_before(backend, run_dir: Path, display: Display, log: Callable[[str], None]) -> None:
    """The bandwidth and matmul probe before the sweep, with its spread warning and the backend's provenance, in
    ``run.json`` (``probe``, ``server``); a resumed run that has one is not probed again."""
    if "probe" in runs.read_run_json(run_dir):
        return
    with display.phase("probing memory bandwidth and matmul rate"):
        res = _probe(backend)
    log(f"probe: {res.bandwidth_gb_s:.1f} GB/s read, {res.peak_tflops:.3f} TFLOP/s ({res.device})")
    warning = probe_warning(res.bandwidth_repeats_gb_s, res.tflops_repeats, res.load)
    if warning:
        log(f"warning: {warning}")
    runs.update_run_json(run_dir, probe={**res.as_dict(), "warning": warning}, server=backend.provenance())


def show_points(sweep: SweepState, specs: list) -> None:
    """Open the display over the models' grid points with the ETA rule that fits: the plan's seconds on hardware, the
    measured points' trend in concurrency without a plan (:func:`pipeline.core.progress.trend_eta_s`), the median
    rule for a simulation or an adaptive sweep (whose points are not known in advance).  Both ETA rules count grid
    points only (:meth:`SweepState.grid_done`): the plan gives a model's open-loop seconds to its last grid point."""
    cfg, display = sweep.cfg, sweep.display
    grids = [variant_config(cfg, v).concurrency for v in cfg.variant_list() for _ in variant_shapes(cfg, v)]
    cells = len(grids)  # each model's variants × shapes walk their grid
    display.total = len(specs) * sum(len(g) for g in grids)
    if sweep.plan is not None and cfg.backend != "simulated" and cfg.adaptive is None and cells == 1:
        left = sweep.plan.estimate_after([s.name for s in specs], list(cfg.concurrency))
        display.estimate = lambda done: left(sweep.grid_done(done))
    elif cfg.adaptive is None:
        order = [c for _ in specs for g in grids for c in g]
        display.estimate = lambda done: trend_eta_s(display.measured, order[sweep.grid_done(done):])
    display.start()


class Cells:
    """The engines of a sweep's variants, one each (a served variant starts its own server), made when first walked
    with the variant's options (:func:`pipeline.config.variants.variant_config`) and unloaded at the end."""

    def __init__(self, cfg: SweepConfig, run_dir: Path):
        self.cfg, self.run_dir = cfg, run_dir
        self.engines: dict[str, Any] = {}  # backends, each told its variant (``variant``, not of the protocol)

    def backend(self, variant: Variant):
        """The backend of ``variant`` (made once, attached to the run, told its variant)."""
        if variant.name not in self.engines:
            eng = get_backend(variant_config(self.cfg, variant))
            eng.attach_run(self.run_dir)  # served backends keep server logs in the run folder
            eng.variant = variant
            self.engines[variant.name] = eng
        return self.engines[variant.name]

    def unload(self) -> None:
        """Unload every backend (a served one stops its server; twice is harmless)."""
        for eng in self.engines.values():
            eng.unload()


def walk_name(cfg: SweepConfig, model: str, variant: str, shape) -> str:
    """What the progress lines and ``run.json`` ``stopped`` call one model × variant × shape: the model's name when the
    run has one variant and one shape (as every run before them), else ``model [variant, in/out]``."""
    if len(cfg.variant_list()) == 1 and len(cfg.shapes()) == 1:
        return model
    return f"{model} [{variant}, {shape.input_len}/{shape.output_len}]"


def walk_variant(sweep: SweepState, cells: Cells, spec, variant: Variant) -> None:
    """One model under one variant: its server (the variant's backend) started once, every shape walked on it
    (:func:`walk_model`), then stopped."""
    base = sweep.cfg
    sweep.backend, sweep.variant = cells.backend(variant), variant.name
    vcfg = variant_config(base, variant)
    loaded = False
    try:
        for shape in variant_shapes(base, variant):
            sweep.cfg = shape_config(vcfg, shape)
            walk = ModelWalk(spec, loaded=loaded, name=walk_name(base, spec.name, variant.name, shape))
            walk_model(sweep, walk)
            loaded = walk.loaded
    finally:
        sweep.cfg = base
    if loaded:
        sweep.backend.unload()


def walk_model(sweep: SweepState, walk: ModelWalk) -> None:
    """One model at one variant and shape: its grid (or its adaptive walk), then its open-loop rates unless it
    stopped (its server is unloaded by :func:`walk_variant`, after its last shape)."""
    if sweep.cfg.adaptive is not None:  # measure only the points that settle the knee (pipeline.predict.adaptive)
        adaptive_model(sweep, walk)
    else:
        grid_walk(sweep, walk)
    sweep.display.skip(len(sweep.cfg.concurrency) - walk.done)  # points skipped past a stop (or left to prediction)
    if sweep.cfg.open_loop is not None and walk.name not in sweep.stops:
        rate_walk(sweep, walk)
    if walk.name in sweep.stops:
        sweep.log(f"{walk.name}: stopped escalating ({sweep.stops[walk.name]})")


def grid_walk(sweep: SweepState, walk: ModelWalk) -> None:
    """One model's concurrency grid, each point by the measuring step (:func:`pipeline.sweep.point.measure_or_resume`),
    until the end, a point that cannot be measured, or the knee (:func:`stop_for_knee`, before a point not stored)."""
    cfg, spec = sweep.cfg, walk.spec
    noisy: set[int] = set()  # concurrencies whose point the interference check or the spread flagged
    for c in cfg.concurrency:
        key = PointKey(spec.name, sweep.backend.serving_engine, cfg.input_len, cfg.output_len, c, variant=sweep.variant)
        if not runs.has_point(sweep.run_dir, key) and stop_for_knee(walk.curve, noisy, cfg.knee_threshold,
                                                                    cfg.stop_after_weak_doublings):
            sweep.stop(walk.name, f"knee: {cfg.stop_after_weak_doublings} weak doublings in a row before c={c}")
            return
        summ = measure_or_resume(sweep, walk, key)
        if summ is None:
            return
        if summ.output_throughput_tok_s:
            walk.curve.append((c, summ.output_throughput_tok_s))
        if point_verdict({"samples": summ.samples, "interference": summ.interference,
                          "client_bound": summ.client_bound, "client_bound_reason": summ.client_bound_reason})["verdict"] == "flagged":
            noisy.add(c)


def finish_run(sweep: SweepState, derive: Callable[[Path], None] | None) -> None:
    """What the sweep found (``stopped``, ``failures``), the server's version, the probe after the sweep, then the run
    completed (its derived files written by ``derive`` first)."""
    run_dir = sweep.run_dir
    runs.update_run_json(run_dir, stopped=sweep.stops, failures=sweep.failures)
    record_server_version(run_dir)
    if "probe_after" not in runs.read_run_json(run_dir):
        runs.update_run_json(run_dir, probe_after=probe_after(sweep.backend.device, sweep.log, sweep.backend))
    runs.complete_run(run_dir, derive=derive)


def failure_verdict(points: int, with_failures: int, empty: int, run_id: str) -> str | None:
    """One line on a run's failed requests, None when every measured request succeeded.

    a run where every request failed ended "complete" with exit 0 and dashes in
    ``show``; the sweep now says so at the end, and the CLI exits 1 when nothing was measured.
    """
    if not with_failures and not empty:
        return None
    return (f"{with_failures} of {points} point(s) had failed requests, {empty} measured nothing "
            f"(batchmark show {run_id} lists the errors)")
