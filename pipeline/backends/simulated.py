"""The ``simulated`` engine: a discrete-event model of a continuous-batching server (vLLM's scheduling rules) in virtual time.

A prediction, never a measurement: a run of this engine is stored with ``source: simulated``
(:mod:`pipeline.sweep.gridwalk`) and every view labels it so.  It yields exactly what a measured point of a
served backend yields — request records (send, first token, every token's arrival, usage) and the
server's view per repeat in the shape of a ``/metrics`` scrape (``server_metrics``: ``before``,
``after``, ``max_during`` with vLLM's metric names) — closed loop and open loop alike, so the
metrics, analysis, pages and diff stages read it unchanged.

The server and its rules are :mod:`pipeline.simulation.simserver`; the discrete-event loop that runs
one repeat is :mod:`pipeline.simulation.simloop`; this module plugs them into the sweep
(:class:`SimulatedBackend`: the card, the hardware profile, the seeds and request counts of a point).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.config.sweepconfig import ModelSpec, SimulatedOptions, SweepConfig
from pipeline.loadgen.pointrequests import workload_meta
from pipeline.loadgen.repeatplan import point_load
from pipeline.simulation.simloop import SimPlan, simulate_repeat
from pipeline.simulation.simserver import ServerModel, cached_prefix, kv_blocks, refusal
from pipeline.core.errors import BatchmarkError
from pipeline.machine.hardware import HardwareProfile, ProbeResult, load_profile
from pipeline.cards.modelcards import ModelCard
from pipeline.cards.servedformat import with_kv_cache
from pipeline.config.variants import kv_cache_name
from pipeline.config.workload import repeat_lengths, server_len
from pipeline.core.records import DEFAULT_VARIANT, PointKey, PointRecords, RepeatRecord, server_key


def resolve_card(spec: ModelSpec, hardware: str | None = None, engine: str = "vllm") -> ModelCard:
    """The model card the simulated server costs steps with, as served (:func:`pipeline.cards.servedformat.served_card`:
    ``spec.served``, else ``engine``'s default on ``hardware``): ``spec.card``, else a card file named by
    ``spec.path`` / ``spec.served_name``, else one counted from ``spec.architecture``.

    Raises:
        BatchmarkError: none of them gives a card (the model is named).
    """
    from pipeline.cards.registry import find_card_file, load_card
    from pipeline.cards.modelarch import card_from_config
    from pipeline.cards.servedformat import served_card

    if spec.card:
        try:
            return served_card(load_card(spec.card, card_name=spec.name), spec.served, engine, hardware)
        except BatchmarkError as exc:
            raise BatchmarkError(f"models.{spec.name}.card: {exc}") from None
    for ref in (spec.path, spec.served_name):
        if ref and find_card_file(ref) is not None:
            return served_card(load_card(ref, card_name=spec.name), spec.served, engine, hardware)
    if spec.architecture is not None:
        arch = dict(spec.architecture)
        return served_card(card_from_config(spec.name, arch), spec.served, engine, hardware)
    raise BatchmarkError(f"models.{spec.name}: the simulated backend needs a model card (card: a name in data/models/, "
                         f"or an architecture)")


def server_for(card: ModelCard, hw: HardwareProfile, opts: SimulatedOptions, input_len: int, output_len: int,
               largest_concurrency: int, engine: str, cfg: Any = None) -> ServerModel:
    """The simulated server of ``card`` on ``hw`` with the config's options (defaults as the ``vllm`` engine's flags;
    ``max_model_len`` the longest request the sweep config ``cfg``'s ``lengths`` draw at this shape, or its replayed
    trace states, + 64).

    Where the profile states ``engine``'s terms (``engines:``, :mod:`pipeline.machine.engineterms`) and the config sets
    no ``step_overhead_s`` of its own, steps are costed by them against the measured compute peak, and each request
    reaches the scheduler the engine's fixed request cost after its send (``request_latency_s`` of the card:
    :meth:`pipeline.machine.engineterms.EngineTerms.request_fixed_s`, the API server's HTTP and tokenisation beside the
    steps); else by the roofline and the profile's ``step_overhead_s``, no delay.

    Raises:
        BatchmarkError: the profile lacks bandwidth or memory figures (a simulation needs both).
    """
    if not hw.bandwidth_gb_s_spec or not hw.memory_gb:
        raise BatchmarkError(f"hardware: profile {hw.name!r} states no bandwidth_gb_s_spec or memory_gb; "
                             "the simulated backend needs both")
    util = opts.gpu_memory_utilization or hw.gpu_memory_utilization
    terms = hw.engine_terms(engine) if opts.step_overhead_s is None else None
    return ServerModel(
        card=card, bandwidth_gb_s=hw.bandwidth_gb_s_spec,
        peak_tflops=hw.compute_peak_tflops() if terms is not None else hw.peak_tflops_spec, terms=terms,
        step_overhead_s=opts.step_overhead_s if opts.step_overhead_s is not None else (hw.step_overhead_s or 0.0),
        max_num_seqs=opts.max_num_seqs or largest_concurrency or 256,  # none in flight stated: the vllm engine's 256
        max_num_batched_tokens=opts.max_num_batched_tokens,
        max_model_len=opts.max_model_len or server_len(cfg, input_len, output_len),
        num_blocks=kv_blocks(card, hw.memory_gb, util, opts.block_size), block_size=opts.block_size,
        step_time_cv=opts.step_time_cv, repeat_time_cv=opts.repeat_time_cv,
        arrival_delay_s=terms.request_fixed_s(card.name) if terms is not None else 0.0)


def point_seed(seed: int, key: PointKey) -> int:
    """The point's seed, as the served backends derive it (:meth:`pipeline.backends.served.ServedBackend.measure`)."""
    if key.open_loop:
        return (seed * 1_000_003 + (key.max_concurrency or 0) * 7919 + key.input_len * 31 + key.output_len
                + round(key.rate_rps * 1000) * 104_729 + (1 if key.load == "poisson" else 2))
    return seed * 1_000_003 + key.concurrency * 7919 + key.input_len * 31 + key.output_len


def request_counts(key: PointKey, opts: SimulatedOptions, warmup: bool,
                   expected_e2el_s: float | None = None) -> tuple[int, int]:
    """(warm-up, measured) requests per repeat, as the served backends count them (an open-loop point's window sized
    from its expected E2EL, s: :func:`pipeline.loadgen.scheduler.open_loop_counts`)."""
    from pipeline.loadgen.scheduler import default_requests, open_loop_counts

    if key.open_loop:
        return open_loop_counts(key.rate_rps, opts.min_requests, expected_e2el_s, warmup, opts.requests_per_point)
    n_meas = opts.requests_per_point or default_requests(key.concurrency, opts.requests_per_slot, opts.min_requests)
    return (key.concurrency if warmup else 0), n_meas


class SimulatedBackend:
    """The :class:`pipeline.backends.base.Backend` of a simulated continuous-batching server (see the module docstring).

    ``device`` is ``simulated``: the sweep takes the hardware profile's spec figures as the run's
    probe (:meth:`probe`) instead of measuring this machine.
    """

    name = "simulated"
    serving_engine = "simulated"
    device = "simulated"

    def __init__(self, cfg: SweepConfig):
        self.cfg = cfg
        self.opts = cfg.simulated
        self.hw = load_profile(cfg.hardware)
        self.run_dir: Path | None = None
        self.server: ServerModel | None = None
        self.spec: ModelSpec | None = None
        self.servers: dict[str, dict[str, Any]] = {}
        #: the server setting simulated (:class:`pipeline.config.variants.Variant`, set by the sweep; None: ``default``)
        self.variant: Any = None
        if not self.hw.bandwidth_gb_s_spec or not self.hw.memory_gb:
            raise BatchmarkError(f"hardware: profile {self.hw.name!r} states no bandwidth_gb_s_spec or memory_gb; "
                                 "the simulated backend needs both")

    def attach_run(self, run_dir: Path) -> None:
        """The run folder (the simulation keeps no side files)."""
        self.run_dir = Path(run_dir)

    def probe(self) -> ProbeResult:
        """The run's "probe": the profile's spec figures, stated as such (nothing of this machine is measured)."""
        bw = float(self.hw.bandwidth_gb_s_spec or 0.0)
        tf = float(self.hw.peak_tflops_spec or 0.0)
        return ProbeResult(device=f"simulated:{self.hw.name}", dtype="bfloat16", bandwidth_gb_s=bw, peak_tflops=tf,
                           bandwidth_repeats_gb_s=[bw], tflops_repeats=[tf], buffer_bytes=0, matmul_n=0, threads=0)

    def load(self, spec: ModelSpec) -> dict[str, Any]:
        """Build the model's simulated server; its card as a dict."""
        card = resolve_card(spec, self.hw.name)
        kv = kv_cache_name(self.variant) if self.variant is not None else None
        if kv is not None:  # the variant's --kv-cache-dtype fp8: one byte per KV element (simserver.kv_blocks)
            card = with_kv_cache(card, kv)
        self.spec = spec
        self.server = server_for(card, self.hw, self.opts, self.cfg.input_len, self.cfg.output_len,
                                 self.cfg.max_in_flight(), "vllm", cfg=self.cfg)  # vLLM's flags and terms
        if getattr(self.variant, "prefix_caching", None) and self.cfg.lengths is not None:  # the prefix's full blocks
            self.server = dataclasses.replace(self.server, cached_prefix_tokens=cached_prefix(
                self.cfg.lengths.prefix_len, self.server.block_size, True))
        s = self.server
        name = self.variant.name if self.variant is not None else DEFAULT_VARIANT
        self.servers[server_key(spec.name, name)] = {
            "command": "simulated continuous-batching server (pipeline.backends.simulated)",
            "server_version": None,
            "limits": {"max_num_seqs": s.max_num_seqs, "max_model_len": s.max_model_len,
                       "max_num_batched_tokens": s.max_num_batched_tokens, "num_gpu_blocks": s.num_blocks,
                       "block_size": s.block_size, "kv_cache_size_tokens": s.num_blocks * s.block_size,
                       "kv_cache_max_concurrency": s.num_blocks * s.block_size / s.max_model_len},
            "cached_prefix_tokens": s.cached_prefix_tokens,
            "step_overhead_s": s.step_overhead_s, "bandwidth_gb_s": s.bandwidth_gb_s, "peak_tflops": s.peak_tflops}
        return card.as_dict()

    def fits(self, key: PointKey) -> tuple[bool, str]:
        """False when the server refuses every request of the point (:func:`refusal`)."""
        if self.server is None:
            raise RuntimeError("load() a model before fits()")
        why = refusal(self.server, key.input_len, key.output_len)
        return (False, why) if why else (True, "")

    def measure(self, key: PointKey, repeats: int, warmup: bool, seed: int) -> PointRecords:
        """Simulate one point: ``repeats`` repeats one after another in virtual time (seeded by the point's seed)."""
        if self.server is None:
            raise RuntimeError("load() a model before measure()")
        n_warm, n_meas = request_counts(key, self.opts, warmup, getattr(self, "expected_e2el_s", None))
        pseed = point_seed(seed, key)
        rng = np.random.default_rng(pseed)
        reps: list[RepeatRecord] = []
        t = 0.0
        per = n_warm + n_meas
        steps = 0
        for r in range(repeats):
            lens = repeat_lengths(self.cfg, key, per, repeats, r, pseed, self.server.max_model_len)
            plan = SimPlan(key.input_len, key.output_len, n_warm, n_meas, point_load(self.cfg, key, pseed + r),
                           start_s=t, id_offset=r * per, lengths=lens)
            res = simulate_repeat(self.server, plan, rng)
            steps += res.steps
            for q in res.requests if lens is not None else ():  # each record its drawn lengths
                q.drawn_input_len, q.drawn_output_len = int(lens[0][q.request_id - r * per]), int(lens[1][q.request_id - r * per])
            meas = [q for q in res.requests if not q.warmup]
            done = [q.done_s for q in meas if q.ok]
            start, end = (min(q.sent_s for q in meas), max(done)) if meas and done else (0.0, 0.0)
            reps.append(RepeatRecord(repeat=r, batching="served", window_start_s=start, window_end_s=end,
                                     requests=res.requests, server_metrics=res.server_metrics))
            t = res.end_s
        meta = {"seed": pseed, "simulated": True, "requests_per_repeat": n_meas, "warmup_per_repeat": n_warm,
                "steps": steps, "virtual_s": round(t, 6), "cooldown_sent": [], "aborted": None,
                **workload_meta(self.cfg, key.load)}
        return PointRecords(point=key, repeats=reps, meta=meta)

    def unload(self) -> None:
        """Forget the model's server."""
        self.server = None
        self.spec = None

    def provenance(self) -> dict[str, Any]:
        """The engine for ``run.json``: the simulator, its options, each model's server limits."""
        return {"engine": "simulated", "simulator": "pipeline.backends.simulated (discrete-event, vLLM V1 scheduling rules)",
                "options": self.opts.model_dump(mode="json"), "servers": dict(self.servers),
                "client": "simulated closed/open loop (the load generator's rules, no network)"}
