"""The plan's simulated repeats, each simulated once per process (:func:`simulated_repeat`).

A budget plans a config once per rung of its ladder and once per cut (:mod:`pipeline.plan.budget`), and most of those
plans ask for the same repeats again; the simulation is deterministic (no noise, schedule seed 0), so a repeat asked
twice is the same repeat.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from pipeline.core.records import PointKey

#: Repeats simulated by this process, by server and point; cleared past :data:`MAX_REMEMBERED`.
_REPEATS: dict[tuple, Any] = {}
MAX_REMEMBERED = 4096


def server_identity(server) -> tuple:
    """What decides a simulated repeat of ``server`` (a :class:`pipeline.simulation.simserver.ServerModel`): its fields
    but the preemption counter it keeps while it runs."""
    return tuple((f.name, repr(getattr(server, f.name))) for f in fields(server)
                 if f.init and f.name != "preemptions_total")


def simulated_repeat(server, key: PointKey, n_warm: int, n_meas: int, cfg: Any = None):
    """One simulated repeat of ``key`` (:func:`pipeline.simulation.simloop.simulate_repeat`, schedule seed 0) with each
    request's first and last token only (``token_times=False``: TTFT, TPOT, E2EL and throughput exact, all a plan
    reads), remembered for the process.  ``cfg`` (the sweep config): its requests drawn as the sweep draws the point's
    first repeat (:func:`pipeline.config.workload.repeat_lengths`, the point's seed) and its gamma schedule's
    burstiness, or a trace's gaps and lengths; None: every request the shape, as before."""
    from pipeline.config.tracefile import config_trace, trace_gaps
    from pipeline.config.workload import repeat_lengths
    from pipeline.config.arrivals import Load
    from pipeline.simulation.simloop import SimPlan, simulate_repeat
    from pipeline.backends.simulated import point_seed

    burstiness = getattr(getattr(cfg, "open_loop", None), "burstiness", None)
    traced = getattr(getattr(cfg, "open_loop", None), "trace_file", None)  # its gaps, and its lengths where stated
    lengths = getattr(cfg, "lengths", None) or (traced if config_trace(cfg) is not None else None)
    seed = point_seed(cfg.seed, key) if cfg is not None else 0
    reps = cfg.repeats if cfg is not None else 1
    ident = (server_identity(server), key.input_len, key.output_len, n_warm, n_meas, key.concurrency, key.load,
             key.rate_rps, key.max_concurrency, burstiness, traced, repr(lengths), seed if lengths else None, reps if lengths else None)
    if ident not in _REPEATS:
        if len(_REPEATS) >= MAX_REMEMBERED:
            _REPEATS.clear()
        drawn = repeat_lengths(cfg, key, n_warm + n_meas, reps, 0, seed, server.max_model_len) if lengths else None
        load = Load.of(key, 0, burstiness, trace_gaps(cfg, key.load, key.rate_rps))
        _REPEATS[ident] = simulate_repeat(server, SimPlan(key.input_len, key.output_len, n_warm, n_meas, load,
                                                          token_times=False, lengths=drawn))
    return _REPEATS[ident]
