"""The sweep stage: for each model, walk the concurrency grid, then the open-loop rates, measure each point, store its records.

Open loop (``open_loop`` in the config): after the model's concurrency grid, each rate of
``open_loop.rates`` is measured as a ``poisson``/``constant`` point (:func:`open_rates` places
them for ``auto``); with an ``slo`` and ``open_loop.bisect_steps``, extra rates are measured by
bisection between the last rate that met the SLO and the first that did not
(:func:`bisect_rate`).

Resumable: points already stored in the run folder are not measured again.  Escalation
stops for a model once ``stop_after_weak_doublings`` doublings in a row each gained less
than ``knee_threshold`` in output throughput, or when the next point would not fit in memory.
"""

from __future__ import annotations

import os
import platform
import statistics
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Callable

from pipeline import __version__, paths, pointfiles, runs, scrub
from pipeline.analysis import point_warnings
from pipeline.knee import doubling_gains
from pipeline.ratesweep import slo_limit
from pipeline.config import SweepConfig
from pipeline.engines import get_engine
from pipeline.engines.base import PointDoesNotFit
from pipeline.errors import BatchmarkError
from pipeline.hardware import load_profile, probe
from pipeline.interference import InterferenceMeter
from pipeline.metrics import summarize_point
from pipeline.progress import Display, quiet_library_bars
from pipeline.quality import point_verdict
from pipeline.records import PointKey


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version(), "batchmark": __version__}
    for pkg in ("torch", "transformers", "vllm", "numpy"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=paths.root(), capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _driver() -> str | None:
    try:
        res = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return res.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _cpu_model() -> str | None:
    """The CPU's model name (``/proc/cpuinfo``; ``platform.processor()`` elsewhere), None when unknown."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip() or None
    except OSError:
        pass
    return platform.processor() or None


def _gpu_names() -> list[str]:
    try:
        res = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return [n.strip() for n in res.stdout.splitlines() if n.strip()] if res.returncode == 0 else []
    except (OSError, subprocess.SubprocessError):
        return []


def machine_identity(profile: str) -> dict:
    """What kind of machine measured a part: ``{"profile", "gpus", "cpu"}``.

    ``profile`` is the hardware profile of the config; ``gpus`` the GPU names ``nvidia-smi``
    lists (empty without one), ``cpu`` the CPU model.  Parts of one run must agree on the profile
    and on the device that measures (the GPUs, or the CPU where there is no GPU):
    :func:`pipeline.parts.check_same_hardware`.
    """
    return {"profile": profile, "gpus": _gpu_names(), "cpu": _cpu_model()}


def open_rates(closed: list[tuple[int, float]], output_len: int, n: int, overshoot: float = 1.25) -> list[float]:
    """The ``auto`` rates (requests/s): ``n`` rates evenly spaced from the single-stream request rate to
    ``overshoot`` × the peak request throughput of the closed-loop grid, rounded to 3 significant digits.

    ``closed`` is ``[(concurrency, output tokens/s), ...]``; a closed-loop point serves
    ``tokens/s ÷ output_len`` requests/s (every request generates ``output_len`` tokens).  The low
    end is the rate at the smallest concurrency measured (GuideLLM's synchronous rate), the high end
    past the saturation throughput so the flattening of the achieved rate shows (GuideLLM's sweep
    places its rates between the synchronous and the throughput rate).

    Raises:
        BatchmarkError: no closed-loop point measured a throughput (nothing to place rates by).
    """
    from pipeline.errors import BatchmarkError

    pts = sorted((c, t) for c, t in closed if t and t > 0)
    if not pts:
        raise BatchmarkError("open_loop.rates: auto needs a closed-loop throughput, and no point of the grid measured one")
    low = pts[0][1] / output_len
    high = overshoot * max(t for _, t in pts) / output_len
    if high <= low:
        high = 2 * low
    out = [low + (high - low) * i / (n - 1) for i in range(n)]
    return sorted({float(f"{r:.3g}") for r in out})


def bisect_rate(results: dict[float, bool | None]) -> float | None:
    """The next rate to measure between the highest rate that met the SLO and the first that did not, or None.

    ``results`` maps measured rates to SLO verdicts; the midpoint is rounded to 3 significant digits
    and None is returned when it is already measured (the bracket is as narrow as rounding allows)
    or no bracket exists (every rate passed, or the lowest failed).
    """
    lim = slo_limit(sorted(results.items()))
    if lim["max_ok"] is None or lim["first_failing"] is None:
        return None
    mid = float(f"{(lim['max_ok'] + lim['first_failing']) / 2:.3g}")
    return None if mid in results else mid


def stop_for_knee(curve: list[tuple[int, float]], flagged: set[int], threshold: float, needed: int) -> bool:
    """Whether to stop escalating a model: its last ``needed`` doublings were each weak (:func:`weak_doublings`)
    and none of the points they join was flagged by the interference check or the repeats' spread (issue 24).

    A point measured on a busy machine (:func:`pipeline.quality.point_verdict`) can look like a plateau that is
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
    :func:`pipeline.knee.doubling_gains` computes them.
    """
    n = 0
    for gain in reversed(doubling_gains(throughputs)):
        if gain >= threshold:
            break
        n += 1
    return n


PROBE_SPREAD_LIMIT = 1.25


def probe_warning(bandwidth_gb_s: list[float], tflops: list[float]) -> str | None:
    """A warning when the probe's repeats spread by more than 25 % (max / min): another load shared the machine.

    The medians are still used; the warning is kept in ``run.json`` and shown on the Runs page,
    because ceilings, roofline and MBU all scale with the probed figures.
    """
    spreads = {"bandwidth": max(bandwidth_gb_s) / min(bandwidth_gb_s), "matmul": max(tflops) / min(tflops)}
    bad = {k: v for k, v in spreads.items() if v > PROBE_SPREAD_LIMIT}
    if not bad:
        return None
    what = ", ".join(f"{k} repeats spread {v:.2f}x" for k, v in bad.items())
    return f"noisy probe ({what}): was the machine busy? Ceilings, roofline and MBU of this run are less certain"


def _probe(engine):
    """The run's probe: this machine measured, or what a simulated engine states it simulates (its profile's spec figures)."""
    own = getattr(engine, "probe", None)
    return own() if callable(own) else probe(engine.device)


def probe_after(device: str, log: Callable[[str], None], engine=None) -> dict:
    """The bandwidth probe repeated after the sweep (``run.json`` ``probe_after``), with its own spread warning.

    :mod:`pipeline.quality` compares it with the probe before the sweep: a machine whose bandwidth
    changed while the run was measured (another load came or went) gives a flagged run.
    """
    log("probing again after the sweep …")
    res = _probe(engine) if engine is not None else probe(device)
    log(f"probe after: {res.bandwidth_gb_s:.1f} GB/s read, {res.peak_tflops:.3f} TFLOP/s")
    return {**res.as_dict(), "warning": probe_warning(res.bandwidth_repeats_gb_s, res.tflops_repeats)}


def engine_config(cfg: SweepConfig, log: Callable[[str], None],
                  display: Display | None = None) -> tuple[SweepConfig, dict[str, str] | None]:
    """The config the sweep measures with, and the fallback taken (None when none).

    A ``vllm`` config whose command runs ``{python}`` needs the server's own environment:
    it is made here when it was never made (:func:`pipeline.serverenv.create_server_env`).
    Where it cannot run, ``vllm.fallback_engine`` (if set) is measured instead, and the
    reason is returned for ``run.json``.

    Raises:
        BatchmarkError: the environment cannot run and there is no fallback engine.
    """
    from pipeline import serverenv
    from pipeline.errors import BatchmarkError

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


def record_engine(run_dir: Path, provenance: dict) -> None:
    """Write an engine's provenance into ``run.json`` (``engine``) when it differs from what is there."""
    if runs.read_run_json(run_dir).get("engine") != provenance:
        runs.update_run_json(run_dir, engine=provenance)


@runs.locked_run  # one live process per run: a second sweep into it is refused, naming the holder
def run_sweep(cfg: SweepConfig, run_dir: Path, config_path: str | None = None,
              progress: bool = True, log: Callable[[str], None] | None = None,
              models: list[str] | None = None, part_of: str | None = None, plan=None,
              budgeted: SweepConfig | None = None) -> Path:
    """Measure every point of ``cfg`` into ``run_dir`` (created or resumed) and complete the run.

    ``plan`` (a :class:`pipeline.plan.Plan`, made by the caller: the sweep never imports the plan) gives
    the one-line total printed at the start, the points that do not fit, and the points' ETA of the progress
    display (:attr:`pipeline.progress.Display.estimate`: the plan's seconds of the points left).  ``budgeted`` is ``cfg`` as the budget chose to measure it (:func:`pipeline.plan.fit_budget`):
    the run keeps ``cfg`` and its digest (so parts, resume and merge agree) and states the budget's
    choices in ``run.json`` (``budget``).

    With ``models`` (names of ``cfg.models``), only those models are measured: ``run_dir`` is
    then a part of the run ``part_of`` (:mod:`pipeline.parts`; the merge stage assembles the
    parts into the run).  A part's ``run.json`` is a run's provenance of its own (host, driver,
    versions, probe) plus ``part_of``, ``models`` and ``machine`` (:func:`machine_identity`).

    Returns the run folder.  Raises BatchmarkError for user-caused problems (bad model
    spec, complete run); an engine crash propagates after everything measured is stored.
    """
    display = Display(0, enabled=progress)
    log = log or display.write  # every message above the bar, never onto it (issue 24)
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
            from pipeline.errors import BatchmarkError

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
            "git_commit": _git_commit(), "versions": _versions(), "driver": _driver(),
            # paths relative to the repository, other machine folders replaced (pipeline.scrub): runs are published
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
        warning = probe_warning(res.bandwidth_repeats_gb_s, res.tflops_repeats)
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
    display.start()
    try:
        for spec in specs:
            keys = [PointKey(spec.name, cfg.engine, cfg.input_len, cfg.output_len, c) for c in cfg.concurrency]
            curve: list[tuple[int, float]] = []
            noisy: set[int] = set()  # concurrencies whose point the interference check or the spread flagged
            loaded = False
            done = 0
            if cfg.adaptive is not None:  # measure only the points that settle the knee (pipeline.adaptive)
                loaded, done = _adaptive_model(cfg, spec, engine, run_dir, plan, curve, stops, failures, display, log,
                                               slo)
                keys = []
            for key in keys:  # (each point's summary feeds the curve, the progress bar and the failure count)
                label = f"{spec.name} c={key.concurrency}"
                resumed = runs.has_point(run_dir, key)
                if resumed:
                    display.begin_point(label)
                    summ = summarize_point(pointfiles.load_point(pointfiles.point_path(run_dir, key)), slo)
                else:
                    if stop_for_knee(curve, noisy, cfg.knee_threshold, cfg.stop_after_weak_doublings):
                        stops[spec.name] = f"knee: {cfg.stop_after_weak_doublings} weak doublings in a row before c={key.concurrency}"
                        break
                    if not loaded:  # a phase of its own: a server's start is no point (nor in the points' ETA)
                        with display.phase(f"{spec.name}: " + ("server start to healthy" if cfg.engine == "vllm"
                                                               else "loading the model")):
                            loaded = _load(engine, spec, run_dir)
                    ok, why = engine.fits(key)
                    if not ok:
                        stops[spec.name] = f"c={key.concurrency} not run: {why}"
                        break
                    display.begin_point(label)
                    try:
                        records = _measure(cfg, engine, key)
                    except PointDoesNotFit as exc:
                        stops[spec.name] = f"memory: {exc}"
                        break
                    runs.write_point(run_dir, records)
                    summ = summarize_point(records, slo)
                failures["points"] += 1
                failures["with_failures"] += bool(summ.failed)
                failures["empty"] += summ.completed == 0
                for line in point_warnings(summ, cfg.max_failure_rate):
                    log(f"warning: {spec.name} {key.label()}: {line}")
                if summ.output_throughput_tok_s:
                    curve.append((key.concurrency, summ.output_throughput_tok_s))
                display.end_point(summ.output_throughput_tok_s, measured=not resumed)
                if point_verdict({"samples": summ.samples, "interference": summ.interference})["verdict"] == "flagged":
                    noisy.add(key.concurrency)
                done += 1
            display.skip(len(cfg.concurrency) - done)  # points skipped past a stop (or left to prediction)
            if cfg.open_loop is not None and spec.name not in stops:
                loaded = _rate_sweep(cfg, spec, engine, run_dir, curve, loaded, stops, failures, log) or loaded
            if spec.name in stops:
                log(f"{spec.name}: stopped escalating ({stops[spec.name]})")
            if loaded:
                engine.unload()
        runs.update_run_json(run_dir, stopped=stops, failures=failures)
        _record_server_version(run_dir)
        if "probe_after" not in runs.read_run_json(run_dir):
            runs.update_run_json(run_dir, probe_after=probe_after(engine.device, log, engine))
        runs.complete_run(run_dir)
    finally:
        display.close()
        # explicit, on every way out (an error, Ctrl-C): a served engine's server is stopped here, never left
        # to garbage collection (issue 20); unloading twice is harmless
        engine.unload()
    log(f"{what} complete")
    verdict = failure_verdict(failures["points"], failures["with_failures"], failures["empty"], run_dir.name)
    if verdict:
        log(f"warning: {verdict}")
    return run_dir


def _adaptive_model(cfg: SweepConfig, spec, engine, run_dir: Path, plan, curve: list[tuple[int, float]],
                    stops: dict[str, str], failures: dict[str, int], display: Display, log: Callable[[str], None],
                    slo: dict | None) -> tuple[bool, int]:
    """One model's adaptive sweep (:func:`pipeline.adaptive.walk`): measure the points it chooses (stored points of a
    resumed run are read, not measured again: the walk is deterministic), keep every grid point's measured/predicted
    state and reason in ``run.json`` (``adaptive.models.<model>``).  Fills ``curve`` with the measured points in grid
    order (the open loop's auto rates).  Returns (whether the model is loaded, points measured or read)."""
    from pipeline import adaptive, calibrate
    from pipeline.analysis import hardware_block, mean_decode_context
    from pipeline.modelcards import ModelCard

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
            _load(engine, spec, run_dir)
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
                records = _measure(cfg, engine, key)
            except PointDoesNotFit as exc:
                stops.setdefault(spec.name, f"memory: {exc}")
                return None
            records.meta["adaptive"] = {"measured": True, "reason": reason}  # why this point (predictions: run.json)
            runs.write_point(run_dir, records)
            summ = summarize_point(records, slo)
        failures["points"] += 1
        failures["with_failures"] += bool(summ.failed)
        failures["empty"] += summ.completed == 0
        for line in point_warnings(summ, cfg.max_failure_rate):
            log(f"warning: {spec.name} {key.label()}: {line}")
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
        fits = calibrate.per_repeat_fits(roofs, usable, static, cfg.input_len)
        terms = calibrate.with_spread(roofs, usable, static, cfg.input_len,
                                      calibrate.fit_points(roofs, usable, static, cfg.input_len), fits)
        limits = ((((meta.get("engine") or {}).get("servers") or {}).get(spec.name) or {}).get("limits") or {})
        caps = [x for x in (limits.get("max_num_seqs"), planned.kv_sequences if planned else None) if x]
        cap = int(min(caps)) if caps else None  # the decode batch the server can hold (KV: the plan's figure)
        args = (grid, static, cfg.input_len, cfg.output_len, cap)
        preds = calibrate.predict_curve(roofs, terms, *args)
        per = [calibrate.predict_curve(roofs, f, *args) for f in fits]
        out = {}
        for i, (c, p) in enumerate(zip(grid, preds)):
            vals = [q[i]["output_throughput_tok_s"] for q in per]
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


def _record_server_version(run_dir: Path) -> None:
    """``versions.<engine>`` in ``run.json`` from what the started servers reported, where the package's own was not
    found (issue 24: a vLLM run's ``versions.vllm`` was null while ``engine.servers`` held 0.32.0)."""
    from pipeline.engines.served import server_version

    meta = runs.read_run_json(run_dir)
    eng = meta.get("engine") if isinstance(meta.get("engine"), dict) else {}
    name, versions = eng.get("engine"), dict(meta.get("versions") or {})
    found = server_version(eng)
    if name and found and not versions.get(name):
        runs.update_run_json(run_dir, versions={**versions, name: found})


def _load(engine, spec, run_dir: Path) -> bool:
    """Load ``spec`` into ``engine`` and store its model card; the engine's provenance is recorded even when loading
    fails (a served engine's gains the model's server: command, version, log).  Returns True (loaded)."""
    try:
        card = engine.load(spec)
    finally:
        record_engine(run_dir, engine.provenance())
    if card:
        runs.write_model_card(run_dir, card)
    return True


def _measure(cfg: SweepConfig, engine, key: PointKey):
    """``engine.measure`` of one point with the outside load while it ran in its meta (issue 13).

    A simulated point runs in virtual time: the load on this machine cannot change it, so none is kept.
    """
    if cfg.engine == "simulated":
        records = engine.measure(key, cfg.repeats, cfg.warmup, cfg.seed)
        records.meta["interference"] = None
        return records
    with InterferenceMeter() as meter:
        records = engine.measure(key, cfg.repeats, cfg.warmup, cfg.seed)
    # an endpoint already running (engine "openai") is no process of ours: a server on this
    # machine counts as outside load there, so its points are not judged by it (quality.py)
    records.meta["interference"] = (None if meter.result is None else
                                    {**meter.result, "server_outside_tree": cfg.engine == "openai"})
    return records


def _rate_sweep(cfg: SweepConfig, spec, engine, run_dir: Path, curve: list[tuple[int, float]], loaded: bool,
                stops: dict[str, str], failures: dict[str, int], log: Callable[[str], None]) -> bool:
    """Measure one model's open-loop rates (and the SLO bisection); returns whether the model is loaded."""
    ol = cfg.open_loop
    slo = cfg.slo.model_dump() if cfg.slo else None
    try:
        rates = list(ol.rates) if ol.rates != "auto" else open_rates(curve, cfg.output_len, ol.auto_rates)
    except BatchmarkError as exc:
        # this model's grid measured nothing to place rates by: its reason is recorded and the sweep goes on to
        # the next model; a resume finds it in ``stopped`` and skips it (issue 18, item 9: it stopped the run forever)
        stops[spec.name] = f"open loop not run: {exc}"
        return loaded
    log(f"{spec.name}: open loop ({ol.load}) at {', '.join(f'{r:g}' for r in rates)} requests/s")
    verdicts: dict[float, bool | None] = {}
    extra = ol.bisect_steps if slo else 0
    while rates:
        rate = rates.pop(0)
        key = PointKey(spec.name, cfg.engine, cfg.input_len, cfg.output_len, ol.max_concurrency, ol.load, rate)
        if runs.has_point(run_dir, key):
            summ = summarize_point(pointfiles.load_point(pointfiles.point_path(run_dir, key)), slo)
        else:
            if not loaded:
                loaded = _load(engine, spec, run_dir)
            ok, why = engine.fits(key)
            if not ok:
                stops[spec.name] = f"{key.label()} not run: {why}"
                return loaded
            records = _measure(cfg, engine, key)
            runs.write_point(run_dir, records)
            summ = summarize_point(records, slo)
        failures["points"] += 1
        failures["with_failures"] += bool(summ.failed)
        failures["empty"] += summ.completed == 0
        for line in point_warnings(summ, cfg.max_failure_rate):
            log(f"warning: {spec.name} {key.label()}: {line}")
        verdicts[rate] = (summ.slo or {}).get("met")
        if not rates and extra:
            nxt = bisect_rate(verdicts)
            if nxt is not None:
                extra -= 1
                rates.append(nxt)
                log(f"{spec.name}: SLO bisection at {nxt:g} requests/s")
    return loaded


def failure_verdict(points: int, with_failures: int, empty: int, run_id: str) -> str | None:
    """One line on a run's failed requests, None when every measured request succeeded.

    Issue 9: a run where every request failed ended "complete" with exit 0 and dashes in
    ``show``; the sweep now says so at the end, and the CLI exits 1 when nothing was measured.
    """
    if not with_failures and not empty:
        return None
    return (f"{with_failures} of {points} point(s) had failed requests, {empty} measured nothing "
            f"(batchmark show {run_id} lists the errors)")
