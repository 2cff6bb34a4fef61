"""``batchmark sweep``'s work: check, claim the run folder, plan, run the sweep (published with its derived files,
written by their stages: :func:`pipeline.analysis.stages.write_derived`), clean up after a failure, say the verdict."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pipeline.commands import print  # noqa: A004 (escapes control characters; see pipeline.commands.print)
from pipeline.core.errors import BatchmarkError


def sweep(config: str | Path, *, run_id: str | None = None, resume: str | None = None, model: str | None = None,
          pointer: bool = False, progress: bool = True, **sweep_options: Any) -> int:
    """``batchmark sweep``: measure a config into a new run (or resume one, or one model's part of a run).

    Args:
        config: the sweep config's path.
        run_id: the new run's id (default: a fresh ``YYYYMMDDTHHMMSSZ-<host>`` claimed after the preflight).
        resume: an incomplete run (id or path) to resume.
        model: measure only this model, into its part of ``run_id`` (:mod:`pipeline.sweep.parts`).
        pointer: remember the run as this checkout's run for the config (the Snakefile's).
        progress: show the progress display.
        sweep_options: passed on to :func:`pipeline.sweep.gridwalk.run_sweep` unchanged.

    Returns:
        0, or 1 when every point failed.  Prints the run's folder on stdout, its summary line on stderr.

    Raises:
        BatchmarkError: a complete run measured with another config, a part without ``run_id``, a failed preflight,
            a budget that cannot be planned, or the sweep's own errors.
    """
    from pipeline.analysis import stages
    from pipeline.core import paths
    from pipeline.store import runs
    from pipeline.sweep import parts
    from pipeline.config.sweepconfig import load_config
    from pipeline.sweep.preflight import discard_if_empty, preflight
    from pipeline.sweep.gridwalk import run_sweep
    from pipeline.sweep.point import Planned

    cfg = load_config(config)
    if model:
        return _sweep_part(cfg, config, run_id=run_id, resume=resume, model=model, pointer=pointer, progress=progress,
                           **sweep_options)
    if resume:
        run_dir = runs.resolve_run(resume)
    elif run_id:
        run_dir = paths.runs_dir() / runs.check_run_id(run_id)
    else:
        run_dir = None  # a fresh id is claimed only after the checks below pass
    if run_dir is not None and (run_dir / "run.json").exists() and runs.is_complete(run_dir):
        if runs.read_run_json(run_dir).get("config_digest") != cfg.digest():
            raise BatchmarkError(f"run {run_dir.name} is complete and immutable, and was measured with another config; "
                                 + ("--resume measures nothing into it" if resume else "choose another --run-id"))
        print(f"run {run_dir.name} is complete; nothing to measure", file=sys.stderr)
        print(run_dir)
        return 0
    preflight(cfg, log=lambda msg: print(msg, file=sys.stderr, flush=True))  # before any run folder exists
    if run_dir is None:  # a fresh id, its folder created as the claim: two sweeps in one second never share it
        run_dir = runs.claim_run_dir(paths.runs_dir())
    fresh = not (run_dir / "run.json").exists()
    if pointer:
        parts.write_pointer(cfg.name, run_dir.name)
    plan, budgeted = _sweep_plan(cfg, None)
    try:
        # the run is published with its summaries and analysis, written by their stages
        run_sweep(cfg, run_dir, config_path=str(config), progress=progress, planned=Planned(plan, budgeted),
                  derive=stages.write_derived, **sweep_options)
    except BatchmarkError:
        if fresh and discard_if_empty(run_dir):
            print(f"batchmark: run {run_dir.name} measured nothing and was removed", file=sys.stderr)
        raise
    print(run_dir)
    return _report(run_dir)


def _report(run_dir: Path) -> int:
    """The end of a sweep: its verdict line on stderr, and its exit status (1 when every point failed or nothing was
    measured, each said in one line; else 0)."""
    from pipeline.store import runs
    from pipeline.pages.indexviews import built_site
    from pipeline.views.verdict import summary_line

    if (run_dir / "run.json").is_file():
        try:
            print(summary_line(run_dir, built_site(run_dir.name)), file=sys.stderr)  # the sweep ends with its verdict
        except BatchmarkError as exc:
            print(f"batchmark: run {run_dir.name}: no summary ({exc})", file=sys.stderr)
    meta = runs.read_run_json(run_dir)
    failures = meta.get("failures") or {}  # written by the sweep (absent in older runs)
    if failures.get("points") and failures.get("empty") == failures["points"]:
        print(f"batchmark: error: run {run_dir.name}: every point failed, nothing was measured "
              f"(batchmark show {run_dir.name} lists the errors)", file=sys.stderr)
        return 1
    if not _measured_anything(run_dir):  # every point not run (too long for the server, not fitting): never clean
        from pipeline.analysis.quality import nothing_measured

        stops = sorted(f"{m}: {why}" for m, why in (meta.get("stopped") or {}).items() if why)
        print(f"batchmark: error: run {run_dir.name}: {nothing_measured(stops)}", file=sys.stderr)
        return 1
    return 0


def _measured_anything(run_dir: Path) -> bool:
    """Whether a complete run's summaries hold a point with a completed request (an incomplete run: True, not judged)."""
    from pipeline.store import derivedfiles, runs

    if not runs.is_complete(run_dir) or not (run_dir / "summaries.json").is_file():
        return True
    return any((p.completed or 0) > 0 for p in derivedfiles.read_summaries(run_dir))


def _sweep_part(cfg: Any, config: str | Path, *, run_id: str | None, resume: str | None, model: str, pointer: bool,
                progress: bool, **sweep_options: Any) -> int:
    """``sweep --model M --run-id R``: measure one model into its part of run R (pipeline.sweep.parts)."""
    from pipeline.core import paths
    from pipeline.store import runs
    from pipeline.sweep import parts
    from pipeline.sweep.gridwalk import run_sweep
    from pipeline.sweep.point import Planned

    if not run_id or resume:
        raise BatchmarkError("--model: give --run-id RUN (the run the part belongs to); --resume is for a whole run")
    run_id = runs.check_run_id(run_id)
    model = parts.model_of(cfg, model)  # a model, or model/variant where the config has variants
    name, variant = parts.split_part(model)
    if (paths.runs_dir() / run_id / "run.json").is_file() and runs.is_complete(paths.runs_dir() / run_id):
        print(f"run {run_id} is complete; nothing to measure", file=sys.stderr)
        return 0
    part = parts.part_dir(run_id, model)
    from pipeline.sweep.preflight import discard_if_empty, preflight

    preflight(cfg, [name], log=lambda msg: print(msg, file=sys.stderr, flush=True))  # before the part exists
    if pointer:
        parts.write_pointer(cfg.name, run_id)
    fresh = not (part / "run.json").exists()
    part.mkdir(parents=True, exist_ok=True)
    plan, budgeted = _sweep_plan(cfg, name)
    try:
        run_sweep(cfg, part, config_path=str(config), progress=progress,
                  part=parts.Part(run_id, [name], [variant] if variant else None), planned=Planned(plan, budgeted),
                  **sweep_options)
    except BatchmarkError:
        if fresh:
            discard_if_empty(part)
        raise
    print(part)
    failures = runs.read_run_json(part).get("failures") or {}
    if failures.get("points") and failures.get("empty") == failures["points"]:
        print(f"batchmark: error: run {run_id}, model {model}: every point failed, nothing was measured "
              f"(the records are in {part})", file=sys.stderr)
        return 1
    return 0


def _sweep_plan(cfg, model: str | None):
    """The plan a sweep starts with (None where none can be made: a profile without spec figures) and the
    config its budget chose (None without a budget).  A part plans its own model, unless a budget must be
    fitted over the whole config (then every part makes the same choice).

    Raises:
        BatchmarkError: the config has a budget and no plan can be made (the budget cannot be applied).
    """
    from pipeline.plan.estimate import make_plan
    from pipeline.plan.budget import plan_for

    try:
        if cfg.budget is not None:
            plan, budgeted = plan_for(cfg)
            return plan, budgeted
        scope = cfg if model is None else cfg.model_copy(update={"models": [m for m in cfg.models if m.name == model]})
        return make_plan(scope), None
    except BatchmarkError as exc:
        if cfg.budget is not None:
            raise BatchmarkError(f"budget: cannot plan this sweep ({exc})") from None
        return None, None

