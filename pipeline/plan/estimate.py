"""The plan: what a sweep will cost and predict before anything is measured, and the budget that chooses what to measure.

For each model and point of a config, :func:`make_plan` runs the simulated continuous-batching
server (:mod:`pipeline.engines.simulated`: the model card's roofline on the hardware profile,
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

import math

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from pipeline.config.sweepconfig import SimulatedOptions, SweepConfig
from pipeline.plan import bounds
from pipeline.plan.bounds import format_duration  # noqa: F401  (importable from here)
from pipeline.core.errors import BatchmarkError
from pipeline.machine.hardware import HardwareProfile, load_profile
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


@dataclass
class Plan:
    """The whole plan: ``wall_s`` (s) over every model, and the budget's choices when a budget was given."""

    config: str
    hardware: str
    engine: str
    wall_s: float
    models: list[PlanModel]
    repeats: int
    requests_per_slot: int
    min_requests: int
    budget_s: float | None = None
    dropped: list[str] = field(default_factory=list)
    certainty: list[str] = field(default_factory=list)
    fits_budget: bool | None = None
    #: An adaptive config (``adaptive:``): the plan covers the whole grid, of which the sweep measures a part.
    adaptive: bool = False
    #: Where the hardware figures come from when the profile states none (:func:`pipeline.plan.probed.probed_profile`).
    hardware_note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The ``plan --json`` document: ``{"wall_s", "models": [{"model", "wall_s", "points": [{"concurrency", "wall_s",
        "fits", "tpot_s", "ttft_s", "output_throughput_tok_s", …}]}], …}``."""
        return asdict(self)

    def not_fitting(self) -> list[str]:
        """One line per point that does not fit, naming the model, the point and the reason."""
        out = []
        for m in self.models:
            for p in m.points:
                if not p.fits:
                    what = f"c = {p.concurrency}" if p.load == "closed" else f"{p.load} {p.rate_rps:g} req/s"
                    out.append(f"{m.model} {what}: {p.fits_reason}")
        return out

    def total_line(self) -> str:
        """The one-line total the sweep prints when it starts."""
        pts = sum(len(m.points) for m in self.models)
        over = ""
        if self.budget_s is not None:
            over = (f" (budget {format_duration(self.budget_s)}" + ("" if self.fits_budget else ", NOT met") + ")")
        where = (f"on a real {self.hardware} (simulated here in virtual time)" if self.engine == "simulated"
                 else f"on {self.hardware}")
        part = (" at most (adaptive: only the grid points that settle the knee are measured)"
                if self.adaptive else "")
        return (f"plan: {pts} points of {len(self.models)} model(s), {self.repeats} repeats each, predicted "
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

    def point_seconds(self) -> dict[tuple[str, str, float | int | None], float]:
        """Predicted wall seconds per (model, load, concurrency or rate): what the sweep's ETA adds up."""
        return {(m.model, p.load, p.concurrency if p.load == "closed" else p.rate_rps): p.wall_s
                for m in self.models for p in m.points}


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
    if cfg.engine == "simulated":
        return cfg.simulated.model_copy(update={"step_time_cv": 0.0, "repeat_time_cv": 0.0})
    client = cfg.openai if cfg.engine == "openai" else cfg.vllm
    upd: dict[str, Any] = {"requests_per_point": client.requests_per_point, "requests_per_slot": client.requests_per_slot,
                           "min_requests": client.min_requests}
    if cfg.engine == "vllm":
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


def _plan_point(server, key: PointKey, opts: SimulatedOptions, repeats: int, warmup: bool, slo: dict | None,
                fits: tuple[bool, str, float | None], expected_e2el_s: float | None = None) -> tuple[PlanPoint, Any]:
    from pipeline.engines.simloop import simulate_repeat
    from pipeline.engines.simserver import refusal
    from pipeline.engines.simulated import request_counts

    n_warm, n_meas = request_counts(key, opts, warmup, expected_e2el_s)  # a rate's window: its expected E2EL
    ok, why, kv_need = fits
    if refusal(server, key.input_len, key.output_len):
        return PlanPoint(key.concurrency, 0.0, False, why, False, None, None, None, n_meas, n_warm, repeats,
                         key.load, key.rate_rps, kv_need, key.max_concurrency), None
    res = simulate_repeat(server, key.input_len, key.output_len, n_warm, n_meas, concurrency=key.concurrency,
                          load=key.load, rate_rps=key.rate_rps, max_concurrency=key.max_concurrency, schedule_seed=0)
    summ = _summary(key, res, slo)
    wall = repeats * (res.end_s + REPEAT_OVERHEAD_S)
    return PlanPoint(key.concurrency, wall, ok, why, True, (summ.tpot_s or {}).get("p50"), (summ.ttft_s or {}).get("p50"),
                     summ.output_throughput_tok_s, n_meas, n_warm, repeats, key.load, key.rate_rps, kv_need,
                     key.max_concurrency), summ


def _fits(card, hw: HardwareProfile, server, util: float, c: int, input_len: int, output_len: int) -> tuple[bool, str, float]:
    """(fits, reason, KV bytes needed) of ``c`` sequences of ``input_len + output_len`` tokens beside the weights."""
    from pipeline.cards.stepcost import kv_bytes_per_sequence

    tokens = input_len + output_len
    usable = (hw.memory_gb or 0.0) * 1e9 * util
    kv = c * kv_bytes_per_sequence(card, tokens)
    if tokens > server.max_model_len:
        return False, f"{tokens} tokens per request exceed max_model_len {server.max_model_len}: every request is refused", kv
    if card.max_context and tokens > card.max_context:
        return False, f"{tokens} tokens per request exceed the model's context of {card.max_context}", kv
    if card.weight_bytes >= usable:
        return (False, f"weights {card.weight_bytes / 1e9:.1f} GB exceed {usable / 1e9:.1f} GB "
                       f"({hw.memory_gb:g} GB x {util:g}): the server cannot start", kv)
    if card.weight_bytes + kv > usable:
        seqs = int((usable - card.weight_bytes) // (kv / c))
        return (False, f"weights {card.weight_bytes / 1e9:.1f} GB + KV of {c} sequences of {tokens} tokens "
                       f"{kv / 1e9:.1f} GB exceed {usable / 1e9:.1f} GB: about {seqs} run at once, the rest wait "
                       "or are preempted", kv)
    return True, "", kv


def _kv_sequences(card, hw: HardwareProfile, util: float, tokens: int) -> int | None:
    """Sequences of ``tokens`` whose KV cache fits beside the weights in ``memory_gb × util`` (as :func:`_fits`)."""
    from pipeline.cards.stepcost import kv_bytes_per_sequence

    usable = (hw.memory_gb or 0.0) * 1e9 * util
    per_seq = kv_bytes_per_sequence(card, tokens)
    if card.weight_bytes >= usable or per_seq <= 0:
        return None
    return int((usable - card.weight_bytes) // per_seq)


def _rate_points(cfg: SweepConfig, spec: Any, card: Any, hw: Any, server: Any, opts: Any, util: float, reps: int,
                 slo: dict[str, Any] | None, curve: list[tuple[int, float]]) -> list[PlanPoint]:
    """The planned open-loop points of one model: one per rate (``auto``: from its closed-loop ``curve`` of
    (concurrency, tok/s)), and the SLO bisection's steps at the median rate's cost."""
    from pipeline.analysis.ratesweep import expected_e2el_s
    from pipeline.sweep.ratewalk import open_rates

    ol = cfg.open_loop
    if ol.rates == "auto":
        rates = open_rates(curve, cfg.output_len, ol.auto_rates)
    else:
        rates = list(ol.rates)
    rate_points = []
    for rate in rates:
        key = PointKey(spec.name, cfg.engine, cfg.input_len, cfg.output_len, None, ol.load, rate, ol.max_concurrency)
        pt, _ = _plan_point(server, key, opts, reps, cfg.warmup, slo,
                            _fits(card, hw, server, util, ol.max_concurrency or 1, cfg.input_len, cfg.output_len),
                            expected_e2el_s(curve, cfg.output_len, rate))
        pt.fits, pt.fits_reason = True, ""  # an open-loop point holds what arrives; its queue is the measurement
        if (why := bounds.too_long(pt.wall_s, cfg.cluster.runtime_min, rate)) is not None:
            pt.fits, pt.fits_reason = False, why  # a rate of 1e-9 req/s: 20 million hours in one job
        rate_points.append(pt)
    if slo and ol.bisect_steps and rate_points:
        mid = statistics.median(p.wall_s for p in rate_points)
        for _ in range(ol.bisect_steps):
            rate_points.append(PlanPoint(None, mid, True, "SLO bisection (a rate not known before "
                                         "the sweep; counted at the median rate's cost)", True, None, None,
                                         None, 0, 0, reps, ol.load, None, max_concurrency=ol.max_concurrency))
    return rate_points


def make_plan(cfg: SweepConfig, *, repeats: int | None = None, requests_per_slot: int | None = None,
              min_requests: int | None = None, drop_top: int = 0, open_loop: bool = True) -> Plan:
    """The plan of ``cfg`` (see the module docstring), optionally with fewer repeats / requests / grid points.

    Raises:
        BatchmarkError: a transformers config (static batches, not a server); the hardware profile lacks bandwidth
            or memory figures; a model has no card.
    """
    from pipeline.engines.simulated import resolve_card, server_for
    from pipeline.sweep.gridwalk import weak_doublings

    if cfg.engine == "transformers":
        raise BatchmarkError(f"{cfg.name}: engine transformers runs static batches in process; the plan models a "
                             "continuous-batching server (engines vllm, openai, simulated)")
    from pipeline.plan.probed import plan_hardware

    hw, hw_note = plan_hardware(cfg)
    opts = server_options(cfg)
    upd: dict[str, Any] = {}
    if requests_per_slot is not None:
        upd["requests_per_slot"] = requests_per_slot
    if min_requests is not None:
        upd["min_requests"] = min_requests
    opts = opts.model_copy(update=upd)
    reps = repeats or cfg.repeats
    grid = list(cfg.concurrency)[:len(cfg.concurrency) - drop_top] if drop_top else list(cfg.concurrency)
    slo = cfg.slo.model_dump() if cfg.slo else None
    util = opts.gpu_memory_utilization or hw.gpu_memory_utilization
    models: list[PlanModel] = []
    for spec in cfg.models:
        card = resolve_card(spec, hw.name, cfg.engine if cfg.engine != "simulated" else "vllm")
        # sized for the config's whole grid even where the budget drops its top, as the budgeted sweep keeps it
        server = server_for(card, hw, opts, cfg.input_len, cfg.output_len, max(list(cfg.concurrency) + [1]))
        start = SERVER_START_S + card.weight_bytes / LOAD_BYTES_PER_S
        points: list[PlanPoint] = []
        curve: list[tuple[int, float]] = []
        stops_after = None
        for c in grid:
            if cfg.stop_after_weak_doublings and cfg.adaptive is None:  # an adaptive sweep chooses its own points
                if weak_doublings(curve, cfg.knee_threshold) >= cfg.stop_after_weak_doublings:
                    stops_after = curve[-1][0]
                    break
            key = PointKey(spec.name, cfg.engine, cfg.input_len, cfg.output_len, c)
            held = _kv_sequences(card, hw, util, cfg.input_len + cfg.output_len)
            if (why := bounds.beyond_memory(c, held, cfg.input_len + cfg.output_len)) is not None:
                points.append(PlanPoint(c, 0.0, False, why, False, None, None, None, 0, 0, reps))  # not simulated
                break
            pt, summ = _plan_point(server, key, opts, reps, cfg.warmup, slo,
                                   _fits(card, hw, server, util, c, cfg.input_len, cfg.output_len))
            points.append(pt)
            if not pt.runs:
                break
            if pt.output_throughput_tok_s:
                curve.append((c, pt.output_throughput_tok_s))
        if open_loop and cfg.open_loop is not None and curve:
            points.extend(_rate_points(cfg, spec, card, hw, server, opts, util, reps, slo, curve))
        wall = start + sum(p.wall_s for p in points)
        models.append(PlanModel(spec.name, wall, start, points, stops_after,
                                kv_sequences=_kv_sequences(card, hw, util, cfg.input_len + cfg.output_len)))
    total = 2 * PROBE_S + sum(m.wall_s for m in models)
    return Plan(cfg.name, hw.name, cfg.engine, total, models, reps, opts.requests_per_slot, opts.min_requests,
                adaptive=cfg.adaptive is not None, hardware_note=hw_note)


def plan_text(plan: Plan) -> str:
    """The plan as a text table per model, with the budget's choices and the points that do not fit."""
    from pipeline.core.texttable import text_table

    def f(v: float | None, scale: float = 1.0, fmt: str = ".3g") -> str:
        return "-" if v is None else format(v * scale, fmt)

    lines = [f"plan of {plan.config} ({plan.engine}) on {plan.hardware}: {format_duration(plan.wall_s)} in all "
             f"({plan.repeats} repeats, measured requests per repeat max({plan.requests_per_slot}·c, {plan.min_requests}))"]
    lines += ([plan.hardware_note] if plan.hardware_note else []) + [""]
    for m in plan.models:
        rows = [[p.concurrency if p.load == "closed" else f"{p.load} {p.rate_rps:g}/s" if p.rate_rps else "bisection",
                 f(p.output_throughput_tok_s, 1, ".1f"), f(p.ttft_s, 1000, ".0f"), f(p.tpot_s, 1000, ".1f"),
                 "yes" if p.fits else "NO", format_duration(p.wall_s)] for p in m.points]
        lines.append(f"{m.model}: {format_duration(m.wall_s)} (server start {format_duration(m.server_start_s)})"
                     + (f"; stops after c = {m.stops_after} (weak doublings)" if m.stops_after else ""))
        lines.extend(text_table(["point", "tok/s", "TTFT ms", "TPOT ms", "fits", "wall"], rows, "rrrrlr"))
        lines.append("")
    for line in plan.not_fitting():
        lines.append(f"does not fit: {line}")
    if plan.budget_s is not None:
        lines.append(f"budget {format_duration(plan.budget_s)}: " + ("met" if plan.fits_budget else "NOT met even so"))
        for d in plan.dropped:
            lines.append(f"  dropped: {d}")
        for c in plan.certainty:
            lines.append(f"  costs: {c}")
    lines.append("predicted by the simulated server (roofline of the model cards on the hardware profile): "
                 "a prediction, not a measurement")
    return "\n".join(lines)
