"""One point of a sweep and the sweep's state: the measuring step every walk calls (:func:`measure_or_resume`: read a
stored point back, or load the model, measure the point with the outside load while it ran, and store it), and the
state it works in (:class:`SweepState`, :class:`ModelWalk`).

Shared by the closed-loop grid (:mod:`pipeline.sweep.gridwalk`), the adaptive walk (:mod:`pipeline.sweep.adaptivewalk`)
and the open-loop rates (:mod:`pipeline.sweep.ratewalk`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from pipeline.store import pointfiles, runs
from pipeline.analysis.analyze import point_warnings
from pipeline.config.sweepconfig import SweepConfig
from pipeline.core.progress import Display
from pipeline.backends.base import PointDoesNotFit
from pipeline.machine.interference import InterferenceMeter
from pipeline.metrics.summarize import summarize_point
from pipeline.sweep.provenance import record_server
from pipeline.core.pointsummary import PointSummary
from pipeline.core.records import DEFAULT_VARIANT, PointKey, server_key


def load_model(backend, spec, run_dir: Path, variant: str = DEFAULT_VARIANT, baseline: bool = True) -> bool:
    """Load ``spec`` into ``backend`` and store its model card; the backend's provenance is recorded even when loading
    fails (a served backend's gains the model's server: command, version, log).  Returns True (loaded).

    The baseline variant's server writes the model's card; any other variant's stores its own beside it, named
    :func:`pipeline.core.records.server_key` (its server may count other bytes: an FP8 KV cache; the analysis reads
    it first), so a part of one model × variant never writes another variant's card."""
    try:
        card = backend.load(spec)
    finally:
        record_server(run_dir, backend.provenance())
    if card:
        runs.write_model_card(run_dir, card if baseline else {**card, "name": server_key(card["name"], variant)})
    return True


def measure_point(cfg: SweepConfig, backend, key: PointKey):
    """``backend.measure`` of one point with the outside load while it ran in its meta.

    A simulated point runs in virtual time: the load on this machine cannot change it, so none is kept.
    """
    if cfg.backend == "simulated":
        records = backend.measure(key, cfg.repeats, cfg.warmup, cfg.seed)
        records.meta["interference"] = None
        return records
    with InterferenceMeter() as meter:
        records = backend.measure(key, cfg.repeats, cfg.warmup, cfg.seed)
    # an endpoint already running (backend "openai") is no process of ours: a server on this
    # machine counts as outside load there, so its points are not judged by it (quality.py)
    records.meta["interference"] = (None if meter.result is None else
                                    {**meter.result, "server_outside_tree": cfg.backend == "openai"})
    return records


def count_point(summ: PointSummary, failures: dict[str, int], cfg: SweepConfig, where: str, log) -> None:
    """Count a stored point in ``failures`` (``points``, ``with_failures``, ``empty``) and log its warnings
    (:func:`pipeline.analysis.analyze.point_warnings`), each line ``warning: <where>: …``; the grid, the adaptive walk
    and the open-loop rates all account for a point this way."""
    failures["points"] += 1
    failures["with_failures"] += bool(summ.failed)
    failures["empty"] += summ.completed == 0
    for line in point_warnings(summ, cfg.max_failure_rate):
        log(f"warning: {where}: {line}")


@dataclass(frozen=True)
class Planned:
    """What the plan made of a sweep before it ran (made by the caller: the sweep never imports the plan): the
    ``plan`` (a :class:`pipeline.plan.estimate.Plan`) and ``budgeted``, the config as the budget chose to measure it
    (:func:`pipeline.plan.budget.fit_budget`; None: the config as it is)."""

    plan: Any = None
    budgeted: SweepConfig | None = None


@dataclass
class SweepState:
    """What a sweep carries from point to point: the config it measures with, the backend, the run folder, the display
    and log, the plan, and what the walks record for ``run.json`` (``stopped``, ``failures``).

    One object handed to the grid walk, the adaptive walk and the rate walk (:mod:`pipeline.sweep.gridwalk`,
    :mod:`pipeline.sweep.adaptivewalk`, :mod:`pipeline.sweep.ratewalk`) in place of loose dicts threaded through them.
    """

    cfg: SweepConfig
    backend: Any
    run_dir: Path
    display: Display
    log: Callable[[str], None]
    plan: Any = None
    #: model -> why it stopped before the end of its grid or rates (``run.json`` ``stopped``).
    stops: dict[str, str] = field(default_factory=dict)
    #: points counted, those with failed requests, those that measured nothing (``run.json`` ``failures``).
    failures: dict[str, int] = field(default_factory=lambda: {"points": 0, "with_failures": 0, "empty": 0})
    #: open-loop points shown so far: the display counts them beyond the grid's, the grid's ETA does not.
    rate_points: int = 0
    #: the variant being walked (:attr:`pipeline.core.records.PointKey.variant`; the walks build their keys with it).
    variant: str = DEFAULT_VARIANT
    #: the adaptive walk's curves so far (:class:`pipeline.sweep.adaptivewalk.Curve`): the frontier walk's input.
    curves: list = field(default_factory=list)
    #: the config's SLO as :func:`pipeline.metrics.summarize.summarize_point` takes it (None without one).
    slo: dict | None = field(init=False)

    def __post_init__(self) -> None:
        self.slo = self.cfg.slo.model_dump() if self.cfg.slo else None

    def stop(self, model: str, reason: str) -> None:
        """Record why ``model`` stopped; the first reason stands (the adaptive walk goes on past a point that does not
        fit, and the point that stopped the model first is the one to name)."""
        self.stops.setdefault(model, reason)

    def place_rates(self, n: int) -> None:
        """``n`` open-loop points placed: the display's total grows by them (their number is known only as the rate
        walk goes: ``auto`` rates, bisection)."""
        self.place_points(n)

    def place_points(self, n: int) -> None:
        """``n`` points beyond the grid's placed on the display (open-loop rates, the frontier walk's points)."""
        self.display.total += n
        if self.display.bar is not None:
            self.display.bar.total = self.display.total
            self.display.bar.refresh()

    def skip_rates(self, n: int) -> None:
        """``n`` placed open-loop points will not be measured (the model's rates stopped)."""
        self.rate_points += n
        self.display.skip(n)

    def grid_done(self, done: int) -> int:
        """The display's points done, less the open-loop ones: what the grid's ETA rules count."""
        return done - self.rate_points


@dataclass
class ModelWalk:
    """One model's walk at one variant and shape: its spec, whether its server is loaded, the points measured or read,
    and its closed-loop curve ``[(concurrency, output tok/s), ...]`` in grid order (the open loop's ``auto`` rates are
    placed by it).  ``name`` is what the progress lines and ``run.json`` ``stopped`` call it: the model's name when the
    run has one variant and one shape (as every run before them), else ``model [variant, in/out]``."""

    spec: Any
    loaded: bool = False
    done: int = 0
    curve: list[tuple[int, float]] = field(default_factory=list)
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or self.spec.name


def ensure_loaded(sweep: SweepState, walk: ModelWalk) -> None:
    """Load the walk's model unless it is loaded: a phase of its own on the display (a server's start is no point,
    nor part of the points' ETA)."""
    if walk.loaded:
        return
    what = "server start to healthy" if sweep.cfg.backend in ("vllm", "llamacpp") else "loading the model"
    with sweep.display.phase(f"{walk.name}: {what}"):
        walk.loaded = load_model(sweep.backend, walk.spec, sweep.run_dir, sweep.variant,
                                 baseline=sweep.variant == sweep.cfg.variant_list()[0].name)


def measure_or_resume(sweep: SweepState, walk: ModelWalk, key: PointKey,
                      reason: str | None = None) -> PointSummary | None:
    """The measuring step of every walk: one point read back when it is stored (a resume measures nothing again),
    else measured and stored; counted, its warnings logged, shown on the display.  Returns its summary, or None when
    the point could not be measured: the backend says it does not fit, or it ran out of memory
    (:class:`pipeline.backends.base.PointDoesNotFit`); the reason is recorded with :meth:`SweepState.stop`.

    ``reason`` (the adaptive walk's): why this point is measured, kept in its meta (``adaptive``; the predictions'
    reasons go to ``run.json``).  An open-loop point is shown as a point too (the rate walk adds it to the display's
    total when it places it: :meth:`SweepState.place_rates`).
    """
    display = sweep.display
    where = key.label() if key.open_loop else f"c={key.concurrency}"
    resumed = runs.has_point(sweep.run_dir, key)
    if resumed:
        display.begin_point(f"{walk.name} {where}", key.concurrency)
        summ = summarize_point(pointfiles.load_point(pointfiles.point_path(sweep.run_dir, key)), sweep.slo)
    else:
        ensure_loaded(sweep, walk)
        ok, why = sweep.backend.fits(key)
        if not ok:
            sweep.stop(walk.name, f"{where} not run: {why}")
            return None
        display.begin_point(f"{walk.name} {where}", key.concurrency)
        try:
            records = measure_point(sweep.cfg, sweep.backend, key)
        except PointDoesNotFit as exc:
            sweep.stop(walk.name, f"memory: {exc}")
            return None
        if reason is not None:
            records.meta["adaptive"] = {"measured": True, "reason": reason}  # why this point (predictions: run.json)
        runs.write_point(sweep.run_dir, records)
        summ = summarize_point(records, sweep.slo)
    count_point(summ, sweep.failures, sweep.cfg, f"{walk.name} {key.label()}", sweep.log)
    if key.open_loop:
        sweep.rate_points += 1
    display.end_point(summ.output_throughput_tok_s, measured=not resumed)
    walk.done += 1
    return summ

