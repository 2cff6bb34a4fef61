"""One point of a sweep: load a model into the engine (recording its provenance and card), measure a point with
the outside load while it ran.

Shared by the closed-loop grid and adaptive walk (:mod:`pipeline.sweep.gridwalk`) and the open-loop rates
(:mod:`pipeline.sweep.ratewalk`); split out of :mod:`pipeline.sweep.gridwalk`.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.store import runs
from pipeline.analysis.analyze import point_warnings
from pipeline.config.sweepconfig import SweepConfig
from pipeline.machine.interference import InterferenceMeter
from pipeline.sweep.provenance import record_engine
from pipeline.core.pointsummary import PointSummary
from pipeline.core.records import PointKey


def load_model(engine, spec, run_dir: Path) -> bool:
    """Load ``spec`` into ``engine`` and store its model card; the engine's provenance is recorded even when loading
    fails (a served engine's gains the model's server: command, version, log).  Returns True (loaded)."""
    try:
        card = engine.load(spec)
    finally:
        record_engine(run_dir, engine.provenance())
    if card:
        runs.write_model_card(run_dir, card)
    return True


def measure_point(cfg: SweepConfig, engine, key: PointKey):
    """``engine.measure`` of one point with the outside load while it ran in its meta.

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


def count_point(summ: PointSummary, failures: dict[str, int], cfg: SweepConfig, where: str, log) -> None:
    """Count a stored point in ``failures`` (``points``, ``with_failures``, ``empty``) and log its warnings
    (:func:`pipeline.analysis.analyze.point_warnings`), each line ``warning: <where>: …``; the grid, the adaptive walk
    and the open-loop rates all account for a point this way."""
    failures["points"] += 1
    failures["with_failures"] += bool(summ.failed)
    failures["empty"] += summ.completed == 0
    for line in point_warnings(summ, cfg.max_failure_rate):
        log(f"warning: {where}: {line}")
