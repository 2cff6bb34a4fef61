"""The plan: what a sweep will cost and predict before anything is measured, and the budget that chooses what to measure.

For each model and point of a config, :func:`make_plan` runs the simulated continuous-batching
server (:mod:`pipeline.backends.simulated`: the model card's roofline on the hardware profile,
vLLM's scheduling rules) on exactly the requests the sweep will send, and reports:

- the predicted output throughput, median TTFT and median TPOT of the point;
- whether it fits: the weights plus the KV cache of ``c`` sequences of ``input_len + output_len``
  tokens within ``memory_gb × gpu_memory_utilization``, and the request within ``max_model_len``
  (and the model's own maximum context).  A point that does not fit still runs where the server
  can take one request (vLLM queues and preempts; the plan says so), not at all where it cannot;
- its wall time on the real hardware.

Wall-time arithmetic (every figure in seconds; a reader can check the total with it):

    point  = repeats × (simulated time of one repeat: its warm-up, measured and cool-down requests
             as the load generator sends them, first send to last measured completion
             + REPEAT_OVERHEAD_S for the scrapes and settling between repeats)
    model  = SERVER_START_S + weight_bytes / LOAD_BYTES_PER_S   (start the server, load the weights)
             + Σ points of the grid (up to the predicted stop after weak doublings)
             + Σ open-loop rates (the ``auto`` rates placed on the predicted curve, the SLO bisection
               counted as ``bisect_steps`` more points at the median rate's cost)
    total  = PROBE_S × 2 (the probe before and after) + Σ models

A simulated repeat is noise-free and the same for every repeat, so one is simulated and counted
``repeats`` times.  The server start and weight loading figures are estimates for vLLM on a GPU
machine (torch.compile, CUDA-graph capture and weights read from a local disk), not measured here.

Budget (:func:`pipeline.plan.budget.fit_budget`): when the total exceeds the budget, the plan steps down the ladder
:data:`pipeline.plan.budget.LADDER` (fewer repeats, then fewer measured requests per repeat), and when even its last
rung is over, drops grid points from the top (the largest concurrency first, for every model),
then the open loop; it says exactly what was dropped and what each step costs in certainty.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from pipeline.config.sweepconfig import SimulatedOptions, SweepConfig
from pipeline.core.contracts import checked
from pipeline.plan.contract import PlanDocument
from pipeline.plan import bounds
from pipeline.plan.bounds import format_duration  # noqa: F401  (importable from here)
from pipeline.config.workload import lengths_words
from pipeline.plan.simrepeats import simulated_repeat
from pipeline.core.errors import BatchmarkError
from pipeline.machine.hardware import HardwareProfile
from pipeline.core.records import PointKey, PointRecords, RepeatRecord

#: Seconds from starting ``vllm serve`` to a healthy server, besides reading the weights (torch.compile,
#: CUDA-graph capture, KV-cache allocation): an estimate for vLLM V1 on one GPU.
SERVER_START_S = 120.0
#: Bytes per second the weights load at (a local NVMe disk, safetensors): an estimate.
LOAD_BYTES_PER_S = 1.0e9
#: Seconds each repeat adds besides its requests (the /metrics scrapes before and after, settling).
REPEAT_OVERHEAD_S = 1.0
#: Seconds of one hardware probe (before the sweep and after it).
PROBE_S = 30.0


@dataclass
class PlanPoint:
    """One point of the plan (closed loop: ``concurrency``; open loop: ``load``, ``rate_rps`` and the cap
    ``max_concurrency``), times in s."""

    concurrency: int | None
    wall_s: float
    fits: bool
    fits_reason: str
    runs: bool
    tpot_s: float | None
    ttft_s: float | None
    output_throughput_tok_s: float | None
    requests_per_repeat: int
    warmup_per_repeat: int
    repeats: int
    load: str = "closed"
    rate_rps: float | None = None
    kv_bytes_needed: float | None = None
    max_concurrency: int | None = None


@dataclass
class PlanModel:
    """One model of the plan: its server start and its points (grid first, then the open-loop rates)."""

    model: str
    wall_s: float
    server_start_s: float
    points: list[PlanPoint]
    stops_after: int | None = None
    note: str | None = None
    #: Sequences of input_len + output_len tokens whose KV cache fits beside the weights (the decode batch the server
    #: can hold; None when the weights do not fit): the adaptive sweep caps its predictions' batch with it.
    kv_sequences: int | None = None
    #: The cell of the tuning space: the variant (its own server) and the shape (tokens in / out per request).
    variant: str = "default"
    input_len: int | None = None
    output_len: int | None = None
    tuned: bool = False  #: one cell of several (variants or shapes): named with them (:attr:`label`)

    @property
    def label(self) -> str:
        """``model``, or ``model [variant, in/out]`` where the cell is one of a tuning space (plan text, budget lines)."""
        return f"{self.model} [{self.variant}, {self.input_len}/{self.output_len}]" if self.tuned else self.model


@dataclass
class Plan:
    """The whole plan: ``wall_s`` (s) over every model, and the budget's choices when a budget was given."""

    config: str
    hardware: str
    backend: str
    wall_s: float
    models: list[PlanModel]
    repeats: int
    requests_per_slot: int
    min_requests: int
    budget_s: float | None = None
    dropped: list[str] = field(default_factory=list)
    certainty: list[str] = field(default_factory=list)
    fits_budget: bool | None = None
    adaptive: bool = False  #: an adaptive config: the plan covers the whole grid, of which the sweep measures a part
    #: Where the hardware figures come from when the profile states none (:func:`pipeline.plan.probed.probed_profile`).
    hardware_note: str | None = None
    step_terms: str | None = None  #: the engine whose terms cost each step, None where the roofline + overhead does
    workload: str | None = None  #: each request's lengths drawn, in words (config.workload.lengths_words); None: fixed
    step_terms_note: str | None = None  #: another engine's terms standing in, the terms that are priors

    def as_dict(self) -> dict[str, Any]:
        """The ``plan --json`` document: ``{"wall_s", "models": [{"model", "wall_s", "points": [{"concurrency", "wall_s",
        "fits", "tpot_s", "ttft_s", "output_throughput_tok_s", …}]}], …}`` (:class:`pipeline.plan.contract.PlanDocument`)."""
        return checked(PlanDocument, asdict(self))

    def not_fitting(self) -> list[str]:
        """One line per point that does not fit, naming the model, the point and the reason."""
        out = []
        for m in self.models:
            for p in m.points:
                if not p.fits:
                    what = f"c = {p.concurrency}" if p.load == "closed" else f"{p.load} {p.rate_rps:g} req/s"
                    out.append(f"{m.label} {what}: {p.fits_reason}")
        return out

    def total_line(self) -> str:
        """The one-line total the sweep prints when it starts."""
        pts = sum(len(m.points) for m in self.models)
        over = ""
        if self.budget_s is not None:
            over = (f" (budget {format_duration(self.budget_s)}" + ("" if self.fits_budget else ", NOT met") + ")")
        where = (f"on a real {self.hardware} (simulated here in virtual time)" if self.backend == "simulated"
                 else f"on {self.hardware}")
        part = (" at most (adaptive: only the grid points that settle the knee are measured)"
                if self.adaptive else "")
        cells = ""
        if any(m.tuned for m in self.models):
            cells = f" ({len(self.models)} cells: model × variant × shape)"
            n_models = len({m.model for m in self.models})
        else:
            n_models = len(self.models)
        return (f"plan: {pts} points of {n_models} model(s){cells}, {self.repeats} repeats each, predicted "
                f"{format_duration(self.wall_s)} {where}{over}{part}")

    def estimate_after(self, models: list[str], grid: list[int]):
        """The progress display's ETA (:attr:`pipeline.core.progress.Display.estimate`): given how many grid points of
        ``models`` × ``grid`` are done, in sweep order, the plan's seconds left.

        Each grid point carries its planned seconds; a model's server start goes with its first point and its
        open-loop rates with its last, where the sweep spends them.
        """
        seq: list[float] = []
        by_model = {m.model: m for m in self.models}
        for name in models:
            m = by_model.get(name)
            closed = {p.concurrency: p.wall_s for p in m.points if p.load == "closed"} if m else {}
            rates = sum(p.wall_s for p in m.points if p.load != "closed") if m else 0.0
            for i, c in enumerate(grid):
                seq.append(closed.get(c, 0.0) + (m.server_start_s if m and i == 0 else 0.0)
                           + (rates if i == len(grid) - 1 else 0.0))

        def left(done: int) -> float:
            return float(sum(seq[done:]))
        return left


# --------------------------------------------------------------------------------------------
# the plan of a config
# --------------------------------------------------------------------------------------------

def _flag(args: list[str], name: str) -> int | None:
    """The last value of ``name`` in a server's extra arguments (``--flag N`` or ``--flag=N``)."""
    out = None
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            out = args[i + 1]
        elif a.startswith(name + "="):
            out = a.split("=", 1)[1]
    try:
        return int(out) if out is not None else None
    except ValueError:
        return None


def server_options(cfg: SweepConfig) -> SimulatedOptions:
    """The simulated server's options for a config: its own for ``simulated``, else the ``vllm`` engine's flags and
    the client's request counts (so the plan sends what the sweep will send)."""
    if cfg.backend == "simulated":
        return cfg.simulated.model_copy(update={"step_time_cv": 0.0, "repeat_time_cv": 0.0})
    client = cfg.openai if cfg.backend == "openai" else cfg.vllm
    upd: dict[str, Any] = {"requests_per_point": client.requests_per_point, "requests_per_slot": client.requests_per_slot,
                           "min_requests": client.min_requests}
    if cfg.backend == "vllm":
        upd.update(max_num_seqs=cfg.vllm.max_num_seqs, max_model_len=cfg.vllm.max_model_len,
                   gpu_memory_utilization=cfg.vllm.gpu_memory_utilization)
        batched = _flag(cfg.vllm.extra_args, "--max-num-batched-tokens")
        if batched:
            upd["max_num_batched_tokens"] = batched
    return SimulatedOptions().model_copy(update=upd)


def _summary(key: PointKey, res, slo: dict | None):
    from pipeline.metrics.summarize import summarize_point

    meas = [q for q in res.requests if not q.warmup]
    done = [q.done_s for q in meas if q.ok]
    start, end = (min(q.sent_s for q in meas), max(done)) if meas and done else (0.0, 0.0)
    rep = RepeatRecord(repeat=0, batching="served", window_start_s=start, window_end_s=end, requests=res.requests,
                       server_metrics=res.server_metrics)
    return summarize_point(PointRecords(point=key, repeats=[rep]), slo)


@dataclass(frozen=True)
class _Cell:
    """What prices one model × variant × shape: ``cfg`` at that variant and shape, its model and variant's names, the
    card and hardware, the simulated server's options, the repeats per point."""

    cfg: SweepConfig
    model: str
    variant: str
    card: Any
    hw: HardwareProfile
    opts: SimulatedOptions
    reps: int


def _plan_point(server, key: PointKey, cell: _Cell, fits: tuple[bool, str, float | None],
                expected_e2el_s: float | None = None) -> tuple[PlanPoint, Any]:
    from pipeline.simulation.simserver import refusal
    from pipeline.backends.simulated import request_counts

    cfg, repeats, slo = cell.cfg, cell.reps, cell.cfg.slo.model_dump() if cell.cfg.slo else None
    n_warm, n_meas = request_counts(key, cell.opts, cfg.warmup, expected_e2el_s)  # a rate's window: its expected E2EL
    ok, why, kv_need = fits
    if refusal(server, key.input_len, key.output_len):
        return PlanPoint(key.concurrency, 0.0, False, why, False, None, None, None, n_meas, n_warm, repeats,
                         key.load, key.rate_rps, kv_need, key.max_concurrency), None
    res = simulated_repeat(server, key, n_warm, n_meas, cfg)  # cfg: its lengths and burstiness, as the sweep draws
    summ = _summary(key, res, slo)
    wall = repeats * (res.end_s + REPEAT_OVERHEAD_S)
    return PlanPoint(key.concurrency, wall, ok, why, True, (summ.tpot_s or {}).get("p50"), (summ.ttft_s or {}).get("p50"),
                     summ.output_throughput_tok_s, n_meas, n_warm, repeats, key.load, key.rate_rps, kv_need,
                     key.max_concurrency), summ


def make_plan(cfg: SweepConfig, *, repeats: int | None = None, requests_per_slot: int | None = None,
              min_requests: int | None = None, drop_top: int = 0, open_loop: bool = True) -> Plan:
    """The plan of ``cfg`` (see the module docstring), optionally with fewer repeats / requests / grid points.

    Every cell is priced: model × variant (its own server start and weight load, its engine options:
    :func:`pipeline.config.variants.variant_config`: its own grid where it states one) × shape (its own or the config's,
    sharing the variant's server) × point; ``drop_top`` drops that many points from the top of every cell's grid.

    Raises:
        BatchmarkError: a transformers config (static batches, not a server); the hardware profile lacks bandwidth
            or memory figures; a model has no card.
    """
    from pipeline.cards.servedformat import with_kv_cache
    from pipeline.config.variants import kv_cache_name, shape_config, variant_config, variant_shapes
    from pipeline.backends.simulated import resolve_card

    if cfg.backend == "transformers":
        raise BatchmarkError(f"{cfg.name}: backend transformers runs static batches in process; the plan models a "
                             "continuous-batching server (backends vllm, openai, simulated)")
    from pipeline.plan.probed import plan_hardware

    hw, hw_note = plan_hardware(cfg)
    upd: dict[str, Any] = {}
    if requests_per_slot is not None:
        upd["requests_per_slot"] = requests_per_slot
    if min_requests is not None:
        upd["min_requests"] = min_requests
    reps = repeats or cfg.repeats
    models: list[PlanModel] = []
    opts = server_options(cfg).model_copy(update=upd)
    engine = cfg.stated_engine() if cfg.backend != "simulated" else "vllm"  # whose terms price the steps
    for spec in cfg.models:
        for v in cfg.variant_list():
            vcfg = variant_config(cfg, v)
            opts = server_options(vcfg).model_copy(update=upd)
            card = resolve_card(spec, hw.name, engine)
            if kv_cache_name(v):
                card = with_kv_cache(card, kv_cache_name(v))
            grid = list(vcfg.concurrency)[:max(len(vcfg.concurrency) - drop_top, 1)] if drop_top else list(vcfg.concurrency)
            for si, shape in enumerate(variant_shapes(cfg, v)):
                cell = _plan_cell(_Cell(shape_config(vcfg, shape), spec.name, v.name, card, hw, opts, reps), grid,
                                  open_loop, engine)
                if si:  # shapes share the variant's server: started once
                    cell.wall_s -= cell.server_start_s
                    cell.server_start_s = 0.0
                cell.tuned = len(cfg.variant_list()) > 1 or len(cfg.shapes()) > 1
                models.append(cell)
    total = 2 * PROBE_S + sum(m.wall_s for m in models)
    priced = opts.step_overhead_s is None and hw.engine_terms(engine) is not None
    return Plan(cfg.name, hw.name, cfg.backend, total, models, reps, opts.requests_per_slot, opts.min_requests,
                adaptive=cfg.adaptive is not None, hardware_note=hw_note,
                step_terms=hw.terms_owner(engine) if priced else None,
                step_terms_note=hw.engine_terms_note(engine) if priced else None,
                workload=lengths_words(cfg.lengths.model_dump(mode="json")) if cfg.lengths else None)


def _plan_cell(cell: _Cell, grid: list[int], open_loop: bool, engine: str) -> PlanModel:
    """One model × variant × shape (:class:`_Cell`): its server start, its grid points up to the predicted stop, then
    its open-loop rates; steps costed by ``engine``'s terms where the profile states them."""
    from pipeline.backends.simulated import server_for
    from pipeline.analysis.ratesweep import expected_e2el_s
    from pipeline.sweep.ratewalk import open_rates
    from pipeline.sweep.gridwalk import weak_doublings

    cfg, model, variant, card, hw, opts, reps = cell.cfg, cell.model, cell.variant, cell.card, cell.hw, cell.opts, cell.reps
    util = opts.gpu_memory_utilization or hw.gpu_memory_utilization
    tokens = cfg.input_len + cfg.output_len
    # sized for the config's whole grid even where the budget drops its top, as the budgeted sweep keeps it
    server = server_for(card, hw, opts, cfg.input_len, cfg.output_len, cfg.max_in_flight(), engine, cfg)
    start = SERVER_START_S + card.weight_bytes / LOAD_BYTES_PER_S
    points: list[PlanPoint] = []
    curve: list[tuple[int, float]] = []
    stops_after = None
    for c in grid:
        if cfg.stop_after_weak_doublings and cfg.adaptive is None:  # an adaptive sweep chooses its own points
            if weak_doublings(curve, cfg.knee_threshold) >= cfg.stop_after_weak_doublings:
                stops_after = curve[-1][0]
                break
        key = PointKey(model, cfg.stated_engine(), cfg.input_len, cfg.output_len, c, variant=variant)
        held = bounds.kv_sequences(card, hw, util, tokens)
        if (why := bounds.beyond_memory(c, held, tokens)) is not None:
            points.append(PlanPoint(c, 0.0, False, why, False, None, None, None, 0, 0, reps))  # not simulated
            break
        fits = bounds.memory_fits(card, hw, server, util, c, cfg.input_len, cfg.output_len)
        pt, summ = _plan_point(server, key, cell, fits)
        points.append(pt)
        if not pt.runs:
            break
        if pt.output_throughput_tok_s:
            curve.append((c, pt.output_throughput_tok_s))
    if open_loop and cfg.open_loop is not None and (curve or cfg.open_loop.rates != "auto"):  # rates given: no grid
        ol = cfg.open_loop
        rates = open_rates(curve, cfg.output_len, ol.auto_rates) if ol.rates == "auto" else list(ol.rates)
        rate_points = []
        for rate in rates:
            key = PointKey(model, cfg.stated_engine(), cfg.input_len, cfg.output_len, None, ol.load, rate, ol.max_concurrency,
                           variant=variant)
            pt, _ = _plan_point(server, key, cell,
                                bounds.memory_fits(card, hw, server, util, ol.max_concurrency or 1, cfg.input_len,
                                                   cfg.output_len),
                                expected_e2el_s(curve, cfg.output_len, rate))
            pt.fits, pt.fits_reason = True, ""  # an open-loop point holds what arrives; its queue is the measurement
            if (why := bounds.too_long(pt.wall_s, cfg.cluster.runtime_min, rate)) is not None:
                pt.fits, pt.fits_reason = False, why  # a rate of 1e-9 req/s: 20 million hours in one job
            rate_points.append(pt)
        if cfg.slo and ol.bisect_steps and rate_points:
            mid = statistics.median(p.wall_s for p in rate_points)
            for _ in range(ol.bisect_steps):
                rate_points.append(PlanPoint(None, mid, True, "SLO bisection (a rate not known before "
                                             "the sweep; counted at the median rate's cost)", True, None, None,
                                             None, 0, 0, reps, ol.load, None, max_concurrency=ol.max_concurrency))
        points.extend(rate_points)
    return PlanModel(model, start + sum(p.wall_s for p in points), start, points, stops_after,
                     kv_sequences=bounds.kv_sequences(card, hw, util, tokens), variant=variant,
                     input_len=cfg.input_len, output_len=cfg.output_len)
