"""The ``simulated`` engine: a discrete-event model of a continuous-batching server (vLLM's scheduling rules) in virtual time.

A prediction, never a measurement: a run of this engine is stored with ``source: simulated``
(:mod:`pipeline.sweep`) and every view labels it so.  It yields exactly what a measured point of a
served engine yields — request records (send, first token, every token's arrival, usage) and the
server's view per repeat in the shape of a ``/metrics`` scrape (``server_metrics``: ``before``,
``after``, ``max_during`` with vLLM's metric names) — closed loop and open loop alike, so the
metrics, analysis, pages and diff stages read it unchanged.

The server (:class:`ServerModel`), after vLLM V1's scheduler (``vllm/v1/core/sched/scheduler.py``):

- at most ``max_num_seqs`` requests run; each step has a token budget of
  ``max_num_batched_tokens``.  Running requests are scheduled first, in the order they were
  admitted: a decoding request takes 1 token, one still in prefill takes the rest of its prompt up
  to the budget left (chunked prefill).  Then, if no request was preempted in this step, waiting
  requests are admitted first come first served while a slot, budget and KV blocks are free;
- KV cache: blocks of ``block_size`` tokens; ``num_blocks`` = ⌊(memory × gpu_memory_utilization −
  weight bytes) / (KV bytes per token × block_size)⌋ (vLLM sizes its cache from what is left of
  ``--gpu-memory-utilization`` after the weights; derived, activations and graphs left out).  A
  request holds ⌈computed tokens / block_size⌉ blocks.  A waiting request is not admitted while
  its blocks are not free; when a running request needs a block and none is free, the request
  admitted last is preempted (vLLM's recompute: its blocks are freed, it goes to the front of the
  queue, and when admitted again it prefills its prompt and the tokens generated so far, then
  goes on generating);
- a step that completes a request's prefill, or decodes it, gives it one token at the step's end
  (every token is streamed as one chunk, as vLLM streams with ``stream_interval`` 1);
- step time = max(bytes ÷ bandwidth, FLOPs ÷ peak) + ``step_overhead_s`` (the roofline of
  :mod:`pipeline.stepcost`, the same per-step bytes and FLOPs the analysis uses) with the
  batch's tokens: weight bytes at the step's token count (an MoE's expert coverage), KV bytes of
  every scheduled sequence at its context, FLOPs 2 × tokens × matmul params + attention
  (:meth:`ServerModel._time`).  Optional noise: every step time × a log-normal factor of mean 1 and
  coefficient of variation ``step_time_cv``, and every repeat × one of ``repeat_time_cv``.

The client is the load generator's (:mod:`pipeline.engines.scheduler`): closed loop keeps N in
flight (the next sent when one finishes, cool-down requests after the last body until every
measured one finished, then dropped); open loop sends on the seeded Poisson/constant schedule of
:func:`pipeline.engines.scheduler.schedule_gaps` (the same seeds as a served point), queued behind
an optional cap.  The client is exact: no network, no lag (``lag_s`` 0).  Times are virtual
seconds since the point's start, repeats one after another; a Spark day takes seconds.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pipeline.config import ModelSpec, SimulatedOptions, SweepConfig
from pipeline.errors import BatchmarkError
from pipeline.hardware import HardwareProfile, ProbeResult, load_profile
from pipeline.modelcards import ModelCard
from pipeline.records import PointKey, PointRecords, RepeatRecord, RequestRecord
from pipeline.stepcost import weight_bytes_per_step

#: vLLM's default KV block size (tokens per block) on CUDA.
BLOCK_SIZE = 16

# Prometheus names of vLLM V1 the metrics stage reads (pipeline.metrics.server_state).
_RUNNING = "vllm:num_requests_running"
_WAITING = "vllm:num_requests_waiting"
_KV = "vllm:kv_cache_usage_perc"
_PREEMPT = "vllm:num_preemptions_total"


# --------------------------------------------------------------------------------------------
# the server's arithmetic
# --------------------------------------------------------------------------------------------

def attended_tokens(card: ModelCard, context: np.ndarray | float) -> np.ndarray | float:
    """Tokens a sequence of ``context`` tokens holds over all layers, in layer-tokens: full layers × n + sliding × min(n, window).

    Derived from :func:`pipeline.stepcost.kv_bytes_per_sequence` (KV bytes = per-layer bytes × this)
    and :func:`pipeline.stepcost.flops_per_decode_step` (attention reads this many keys/values per
    head), vectorised over numpy arrays.
    """
    sliding = card.sliding_layers if card.sliding_window else 0
    full = card.num_layers - sliding
    if not sliding:
        return full * np.asarray(context, dtype=float) if isinstance(context, np.ndarray) else full * float(context)
    return full * context + sliding * np.minimum(context, card.sliding_window)


def kv_blocks(card: ModelCard, memory_gb: float, gpu_memory_utilization: float, block_size: int = BLOCK_SIZE) -> int:
    """KV blocks of the server: ⌊(memory_gb × 1e9 × utilisation − weight bytes) / (KV bytes per token × block size)⌋, ≥ 0.

    Derived: vLLM gives the KV cache what ``--gpu-memory-utilization`` of the device leaves after
    the weights (activation peaks and CUDA graphs, a few per cent, are left out here).  KV bytes
    per token count every layer as full attention (the card's figure), as vLLM's single-type cache does.
    """
    free = memory_gb * 1e9 * gpu_memory_utilization - card.weight_bytes
    per_block = card.kv_bytes_per_token * block_size
    return max(0, math.floor(free / per_block)) if per_block > 0 else 0


@dataclass
class ServerModel:
    """The simulated server of one model on one machine (see the module docstring for the rules).

    Attributes:
        card: the model; bandwidth_gb_s, peak_tflops: the machine (GB/s, TFLOP/s; None = no compute roof).
        step_overhead_s: fixed time added to every step (s).
        max_num_seqs, max_num_batched_tokens, max_model_len: vLLM's limits of the same names.
        num_blocks, block_size: the KV cache.
        step_time_cv, repeat_time_cv: noise (coefficients of variation; 0 = none).
    """

    card: ModelCard
    bandwidth_gb_s: float
    peak_tflops: float | None
    step_overhead_s: float
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    num_blocks: int
    block_size: int = BLOCK_SIZE
    step_time_cv: float = 0.0
    repeat_time_cv: float = 0.0
    preemptions_total: int = 0
    _per_layer: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        c = self.card
        self._per_layer = c.kv_bytes_per_token / c.num_layers if c.num_layers else 0.0
        self._mem_s = 1.0 / (self.bandwidth_gb_s * 1e9)
        self._comp_s = 1.0 / (self.peak_tflops * 1e12) if self.peak_tflops else 0.0
        self._matmul = 2.0 * (c.active_params - c.embedding_params)
        self._attn = 4.0 * c.num_attention_heads * c.head_dim
        self._wcache: dict[int, float] = {}

    def _weights(self, tokens: int) -> float:
        w = self._wcache.get(tokens)
        if w is None:
            w = self._wcache[tokens] = weight_bytes_per_step(self.card, max(tokens, 1))
        return w

    def _time(self, tokens: int, kv_lt: float, attn_lt: float) -> float:
        """One step of the server (s) = max(bytes / bandwidth, FLOPs / peak) + overhead.

        Args:
            tokens: tokens computed in the step (decoding sequences + prefill chunk tokens).
            kv_lt: Σ :func:`attended_tokens` of every scheduled sequence's context (its KV read), layer-tokens.
            attn_lt: Σ over computed tokens of the context each attends to, in layer-tokens (a decoding
                sequence: its :func:`attended_tokens`; a prefill chunk of n tokens from s: n × attended(s + n/2)).

        bytes = weight bytes at ``tokens`` (:func:`pipeline.stepcost.weight_bytes_per_step`: experts by
        coverage) + KV bytes per layer-token × ``kv_lt``; FLOPs = 2 × tokens × (active − embedding) params +
        4 × heads × head_dim × ``attn_lt`` (Kaplan et al. 2020, table 1).  At B decoding sequences of context n
        this is exactly :func:`pipeline.analysis.roofline_step_s` (B, n) + overhead (:meth:`decode_step_s`).
        """
        mem = (self._weights(tokens) + self._per_layer * kv_lt) * self._mem_s
        comp = (self._matmul * tokens + self._attn * attn_lt) * self._comp_s
        return (mem if mem >= comp else comp) + self.step_overhead_s

    def decode_step_s(self, batch: int, context: float) -> float:
        """Step time (s) of ``batch`` sequences decoding at ``context`` tokens each, no noise."""
        a = batch * float(attended_tokens(self.card, context))
        return self._time(batch, a, a)

    def fits_one(self, tokens: int) -> bool:
        """Whether one sequence of ``tokens`` tokens fits the KV cache at all."""
        return math.ceil(tokens / self.block_size) <= self.num_blocks


@dataclass
class _Req:
    rid: int            # index in the repeat's bodies (cool-downs past them)
    prompt: int
    out: int
    warmup: bool
    queued_s: float
    sent_s: float
    scheduled_s: float | None = None
    gen: int = 0        # tokens generated so far
    computed: int = 0   # tokens whose KV is computed
    blocks: int = 0
    first_s: float | None = None
    done_s: float | None = None
    tok_steps: list = field(default_factory=list)  # (first step index, count) runs of emitted tokens
    recorded: bool = True
    error: str | None = None

    @property
    def total(self) -> int:
        return self.prompt + self.gen


@dataclass
class RepeatResult:
    """One simulated repeat: its requests (recorded ones), step end times and the server's view."""

    requests: list[RequestRecord]
    end_s: float
    server_metrics: dict[str, Any]
    steps: int


def refusal(server: ServerModel, input_len: int, output_len: int) -> str | None:
    """Why the server refuses every request of these lengths (None when it takes them): longer than
    ``max_model_len``, or one sequence needs more KV blocks than the cache has."""
    need = input_len + output_len
    if need > server.max_model_len:
        return f"server: {need} tokens per request exceed max_model_len {server.max_model_len}"
    if not server.fits_one(need):
        return (f"server: one sequence of {need} tokens needs {math.ceil(need / server.block_size)} KV blocks, "
                f"the cache has {server.num_blocks}")
    return None


def _noise(rng: np.random.Generator | None, cv: float, n: int) -> np.ndarray | None:
    """``n`` log-normal factors of mean 1 and coefficient of variation ``cv`` (None when no noise)."""
    if rng is None or cv <= 0:
        return None
    sigma = math.sqrt(math.log1p(cv * cv))
    return rng.lognormal(-sigma * sigma / 2, sigma, n)


def simulate_repeat(server: ServerModel, input_len: int, output_len: int, n_warm: int, n_meas: int, *,
                    concurrency: int | None, load: str = "closed", rate_rps: float | None = None,
                    schedule_seed: int = 0, start_s: float = 0.0, rng: np.random.Generator | None = None,
                    id_offset: int = 0) -> RepeatResult:
    """Simulate one repeat of a point: ``n_warm`` warm-up then ``n_meas`` measured requests.

    Closed loop (``load="closed"``): ``concurrency`` requests in flight, each next one sent the moment
    one finishes; after the last body cool-down requests keep the load until every measured request
    has finished.  Open loop (``poisson``/``constant`` at ``rate_rps``): sends on
    :func:`pipeline.engines.scheduler.schedule_gaps` (``schedule_seed``), at most ``concurrency``
    in flight when given.  Times are s since the point's start; the repeat starts at ``start_s``.

    Returns the recorded requests (bodies, warm-up included; cool-downs dropped), the time the
    repeat ended (the last measured completion), the server's view and the number of steps.
    """
    rng_steps = rng if server.step_time_cv > 0 else None
    rep_factor = float(_noise(rng, server.repeat_time_cv, 1)[0]) if (rng is not None and server.repeat_time_cv > 0) else 1.0
    n_total = n_warm + n_meas
    refused = refusal(server, input_len, output_len)
    if refused:  # vLLM answers every such request with an error at once
        recs = [RequestRecord(request_id=i + id_offset, queued_s=start_s, sent_s=start_s, first_token_s=None,
                              done_s=None, chunks=[], input_tokens=input_len, output_tokens=0, error=refused,
                              warmup=i < n_warm) for i in range(n_total)]
        return RepeatResult(requests=recs, end_s=start_s, server_metrics={}, steps=0)
    bs = server.block_size
    free_blocks = server.num_blocks
    running: list[_Req] = []
    waiting: deque[_Req] = deque()
    client_q: deque[_Req] = deque()        # open loop behind a cap
    reqs: list[_Req] = []
    step_end: list[float] = []
    t = start_s
    sent = 0
    in_flight = 0
    measured_done = 0
    preempt0 = server.preemptions_total
    max_run = max_wait = 0
    max_kv = 0.0
    open_loop = load != "closed"
    if open_loop:
        from pipeline.engines.scheduler import schedule_gaps

        gaps = schedule_gaps(load, float(rate_rps), schedule_seed)
        next_arrival = start_s
    else:
        next_arrival = math.inf
    cap = concurrency if open_loop else None

    def new_request(i: int, now: float, scheduled: float | None) -> _Req:
        r = _Req(rid=i, prompt=input_len, out=output_len, warmup=i >= n_total or i < n_warm,
                 queued_s=scheduled if scheduled is not None else now, sent_s=now, scheduled_s=scheduled,
                 recorded=i < n_total)
        if r.recorded:
            reqs.append(r)
        return r

    def send(r: _Req) -> None:
        nonlocal in_flight
        in_flight += 1
        waiting.append(r)

    def after_finish(r: _Req) -> None:
        """The client's reaction to a finished request at time ``t``: closed loop sends the next one."""
        nonlocal sent
        if not open_loop and measured_done < n_meas:
            send(new_request(sent, t, None))
            sent += 1
        elif open_loop and client_q and (cap is None or in_flight < cap):
            q = client_q.popleft()
            q.sent_s = t
            send(q)

    # closed loop: the first N go out at once
    if not open_loop:
        for _ in range(concurrency):
            send(new_request(sent, t, None))
            sent += 1
    steps = 0
    while measured_done < n_meas:
        # open-loop arrivals up to now
        if open_loop:
            while next_arrival <= t:
                r = new_request(sent, next_arrival, next_arrival)
                sent += 1
                if cap is not None and in_flight >= cap:
                    client_q.append(r)
                else:
                    r.sent_s = max(next_arrival, r.sent_s)
                    send(r)
                next_arrival += next(gaps)
            if measured_done >= n_meas:
                break
        if not running and not waiting:
            if not open_loop:
                break  # nothing in flight (every request refused)
            t = next_arrival
            continue
        # ---- fast path: every running request decodes, nothing waits: advance k steps at once
        if not waiting and running and all(r.computed == r.total - 1 for r in running):
            k = min(r.out - r.gen for r in running)
            ctx = np.fromiter((r.computed for r in running), float, len(running))
            need = np.ceil((ctx + k) / bs) - np.fromiter((r.blocks for r in running), float, len(running))
            if need.sum() <= free_blocks and k > 1:
                b = len(running)
                lt = attended_tokens(server.card, ctx[:, None] + 1 + np.arange(k)[None, :]).sum(axis=0)
                per = np.maximum((server._weights(b) + server._per_layer * lt) * server._mem_s,
                                 (server._matmul * b + server._attn * lt) * server._comp_s) + server.step_overhead_s
                f = _noise(rng_steps, server.step_time_cv, k)
                if f is not None:
                    per = per * f
                ends = t + np.cumsum(per * rep_factor)
                if open_loop and next_arrival < ends[-1]:
                    k = int(np.searchsorted(ends, next_arrival)) + 1  # up to the first step ending at or after it
                    ends = ends[:k]
                s0 = len(step_end)
                step_end.extend(ends.tolist())
                for r in running:
                    r.tok_steps.append((s0, k))
                    r.gen += k
                    r.computed += k
                    nb = -(-r.computed // bs)
                    free_blocks -= nb - r.blocks
                    r.blocks = nb
                t = float(ends[-1])
                steps += k
                max_kv = max(max_kv, 1 - free_blocks / server.num_blocks)
                max_run = max(max_run, len(running))
                finished = [r for r in running if r.gen >= r.out]
                if finished:
                    running = [r for r in running if r.gen < r.out]
                    for r in finished:
                        r.done_s = t
                        free_blocks += r.blocks
                        r.blocks = 0
                        in_flight -= 1
                        if r.recorded and not r.warmup:
                            measured_done += 1
                    for r in finished:
                        after_finish(r)
                continue
        # ---- one step: running requests first, in admission order
        budget = server.max_num_batched_tokens
        sched: list[tuple[_Req, int]] = []
        preempted = False
        i = 0
        while i < len(running):
            r = running[i]
            if budget <= 0:
                break
            n = min(r.total - r.computed, budget)
            nb = -(-(r.computed + n) // bs) - r.blocks
            self_preempted = False
            while nb > free_blocks:
                victim = running.pop()  # the request admitted last (vLLM's lowest priority)
                free_blocks += victim.blocks
                victim.blocks = 0
                victim.computed = 0
                server.preemptions_total += 1
                preempted = True
                waiting.appendleft(victim)
                if victim is r:
                    self_preempted = True
                    break
            if self_preempted:
                break
            free_blocks -= nb
            r.blocks += nb
            sched.append((r, n))
            budget -= n
            i += 1
        if not preempted:
            while waiting and len(running) < server.max_num_seqs and budget > 0:
                r = waiting[0]
                n = min(r.total - r.computed, budget)
                nb = -(-(r.computed + n) // bs) - r.blocks
                if nb > free_blocks:
                    break
                waiting.popleft()
                free_blocks -= nb
                r.blocks += nb
                running.append(r)
                sched.append((r, n))
                budget -= n
        max_wait = max(max_wait, len(waiting))  # what a scrape sees: the queue after this step's scheduling
        if not sched:  # nothing can run: the head of the queue can never get its blocks
            r = waiting.popleft()
            r.error = "server: the KV cache cannot hold this request"
            in_flight -= 1
            if r.recorded and not r.warmup:
                measured_done += 1
            after_finish(r)
            continue
        tokens = 0
        kv_lt = 0.0
        attn_lt = 0.0
        for r, n in sched:
            tokens += n
            end_ctx = r.computed + n
            a_end = float(attended_tokens(server.card, end_ctx))
            kv_lt += a_end
            attn_lt += a_end if n == 1 else n * float(attended_tokens(server.card, r.computed + n / 2))
        dt = server._time(tokens, kv_lt, attn_lt) * rep_factor
        f = _noise(rng_steps, server.step_time_cv, 1)
        if f is not None:
            dt *= float(f[0])
        t += dt
        step_end.append(t)
        si = len(step_end) - 1
        steps += 1
        max_run = max(max_run, len(running))
        max_kv = max(max_kv, 1 - free_blocks / server.num_blocks)
        finished = []
        for r, n in sched:
            r.computed += n
            if r.computed == r.total:
                r.gen += 1
                if r.first_s is None:
                    r.first_s = t
                if r.tok_steps and sum(r.tok_steps[-1]) == si:
                    s0, c = r.tok_steps[-1]
                    r.tok_steps[-1] = (s0, c + 1)
                else:
                    r.tok_steps.append((si, 1))
                if r.gen >= r.out:
                    finished.append(r)
        if finished:
            done = set(map(id, finished))
            running = [r for r in running if id(r) not in done]
            for r in finished:
                r.done_s = t
                free_blocks += r.blocks
                r.blocks = 0
                in_flight -= 1
                if r.recorded and not r.warmup:
                    measured_done += 1
            for r in finished:
                after_finish(r)
    end = t
    times = np.round(np.asarray(step_end, dtype=float), 6)
    out: list[RequestRecord] = []
    for r in sorted(reqs, key=lambda q: q.rid):
        tok = np.concatenate([times[s0:s0 + c] for s0, c in r.tok_steps]) if r.tok_steps else np.empty(0)
        chunks = [[x, 1] for x in tok.tolist()]
        ok = r.error is None and r.done_s is not None
        first = chunks[0][0] if chunks else None
        out.append(RequestRecord(
            request_id=r.rid + id_offset, queued_s=round(r.queued_s, 6), sent_s=round(r.sent_s, 6),
            first_token_s=first, done_s=chunks[-1][0] if ok else None, chunks=chunks,
            input_tokens=r.prompt, output_tokens=r.gen, usage_reported=True, error=r.error, warmup=r.warmup,
            first_content_s=first, token_count_source="usage",
            token_count_reason="the simulated server counts the tokens it generates",
            scheduled_s=None if r.scheduled_s is None else round(r.scheduled_s, 6),
            lag_s=0.0 if r.scheduled_s is not None else None))
    before = {_RUNNING: 0.0, _WAITING: 0.0, _KV: 0.0, _PREEMPT: float(preempt0)}
    after = {_RUNNING: float(len(running)), _WAITING: float(len(waiting)),
             _KV: 1 - free_blocks / server.num_blocks if server.num_blocks else 0.0,
             _PREEMPT: float(server.preemptions_total)}
    during = {_RUNNING: float(max_run), _WAITING: float(max_wait), _KV: float(max_kv)}
    return RepeatResult(requests=out, end_s=end,
                        server_metrics={"before": before, "after": after, "max_during": during}, steps=steps)



# --------------------------------------------------------------------------------------------
# the engine
# --------------------------------------------------------------------------------------------

def resolve_card(spec: ModelSpec) -> ModelCard:
    """The model card the simulated server costs steps with: ``spec.card``, else a card file named by
    ``spec.path`` / ``spec.served_name``, else one counted from ``spec.architecture``.

    Raises:
        BatchmarkError: none of them gives a card (the model is named).
    """
    from pipeline.cardregistry import find_card_file, load_card
    from pipeline.modelarch import card_from_config

    if spec.card:
        try:
            return load_card(spec.card, card_name=spec.name)
        except BatchmarkError as exc:
            raise BatchmarkError(f"models.{spec.name}.card: {exc}") from None
    for ref in (spec.path, spec.served_name):
        if ref and find_card_file(ref) is not None:
            return load_card(ref, card_name=spec.name)
    if spec.architecture is not None:
        arch = dict(spec.architecture)
        return card_from_config(spec.name, arch)
    raise BatchmarkError(f"models.{spec.name}: the simulated engine needs a model card (card: a name in data/models/, "
                         f"or an architecture)")


def server_for(card: ModelCard, hw: HardwareProfile, opts: SimulatedOptions, input_len: int, output_len: int,
               max_concurrency: int) -> ServerModel:
    """The simulated server of ``card`` on ``hw`` with the config's options (defaults as the ``vllm`` engine's flags).

    Raises:
        BatchmarkError: the profile lacks bandwidth or memory figures (a simulation needs both).
    """
    if not hw.bandwidth_gb_s_spec or not hw.memory_gb:
        raise BatchmarkError(f"hardware: profile {hw.name!r} states no bandwidth_gb_s_spec or memory_gb; "
                             "the simulated engine needs both")
    util = opts.gpu_memory_utilization or hw.gpu_memory_utilization
    return ServerModel(
        card=card, bandwidth_gb_s=hw.bandwidth_gb_s_spec, peak_tflops=hw.peak_tflops_spec,
        step_overhead_s=opts.step_overhead_s if opts.step_overhead_s is not None else (hw.step_overhead_s or 0.0),
        max_num_seqs=opts.max_num_seqs or max(max_concurrency, 1),
        max_num_batched_tokens=opts.max_num_batched_tokens,
        max_model_len=opts.max_model_len or input_len + output_len + 64,
        num_blocks=kv_blocks(card, hw.memory_gb, util, opts.block_size), block_size=opts.block_size,
        step_time_cv=opts.step_time_cv, repeat_time_cv=opts.repeat_time_cv)


def point_seed(seed: int, key: PointKey) -> int:
    """The point's seed, as the served engines derive it (:meth:`pipeline.engines.served.ServedEngine.measure`)."""
    if key.open_loop:
        return (seed * 1_000_003 + (key.concurrency or 0) * 7919 + key.input_len * 31 + key.output_len
                + round(key.rate_rps * 1000) * 104_729 + (1 if key.load == "poisson" else 2))
    return seed * 1_000_003 + key.concurrency * 7919 + key.input_len * 31 + key.output_len


def request_counts(key: PointKey, opts: SimulatedOptions, warmup: bool) -> tuple[int, int]:
    """(warm-up, measured) requests per repeat, as the served engines count them."""
    from pipeline.engines.scheduler import default_open_requests, default_requests

    if key.open_loop:
        n_meas = opts.requests_per_point or default_open_requests(key.rate_rps, opts.min_requests)
        return (min(max(round(key.rate_rps), 1), n_meas) if warmup else 0), n_meas
    n_meas = opts.requests_per_point or default_requests(key.concurrency, opts.requests_per_slot, opts.min_requests)
    return (key.concurrency if warmup else 0), n_meas


class SimulatedEngine:
    """The :class:`pipeline.engines.base.Engine` of a simulated continuous-batching server (see the module docstring).

    ``device`` is ``simulated``: the sweep takes the hardware profile's spec figures as the run's
    probe (:meth:`probe`) instead of measuring this machine.
    """

    name = "simulated"
    device = "simulated"

    def __init__(self, cfg: SweepConfig):
        self.cfg = cfg
        self.opts = cfg.simulated
        self.hw = load_profile(cfg.hardware)
        self.run_dir: Path | None = None
        self.server: ServerModel | None = None
        self.spec: ModelSpec | None = None
        self.servers: dict[str, dict[str, Any]] = {}
        if not self.hw.bandwidth_gb_s_spec or not self.hw.memory_gb:
            raise BatchmarkError(f"hardware: profile {self.hw.name!r} states no bandwidth_gb_s_spec or memory_gb; "
                                 "the simulated engine needs both")

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
        card = resolve_card(spec)
        self.spec = spec
        self.server = server_for(card, self.hw, self.opts, self.cfg.input_len, self.cfg.output_len,
                                 self.cfg.max_in_flight())
        s = self.server
        self.servers[spec.name] = {
            "command": "simulated continuous-batching server (pipeline.engines.simulated)",
            "server_version": None,
            "limits": {"max_num_seqs": s.max_num_seqs, "max_model_len": s.max_model_len,
                       "max_num_batched_tokens": s.max_num_batched_tokens, "num_gpu_blocks": s.num_blocks,
                       "block_size": s.block_size, "kv_cache_size_tokens": s.num_blocks * s.block_size,
                       "kv_cache_max_concurrency": s.num_blocks * s.block_size / s.max_model_len},
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
        n_warm, n_meas = request_counts(key, self.opts, warmup)
        pseed = point_seed(seed, key)
        rng = np.random.default_rng(pseed)
        reps: list[RepeatRecord] = []
        t = 0.0
        per = n_warm + n_meas
        steps = 0
        for r in range(repeats):
            res = simulate_repeat(self.server, key.input_len, key.output_len, n_warm, n_meas,
                                  concurrency=key.concurrency, load=key.load, rate_rps=key.rate_rps,
                                  schedule_seed=pseed + r, start_s=t, rng=rng, id_offset=r * per)
            steps += res.steps
            meas = [q for q in res.requests if not q.warmup]
            done = [q.done_s for q in meas if q.ok]
            start, end = (min(q.sent_s for q in meas), max(done)) if meas and done else (0.0, 0.0)
            reps.append(RepeatRecord(repeat=r, batching="served", window_start_s=start, window_end_s=end,
                                     requests=res.requests, server_metrics=res.server_metrics))
            t = res.end_s
        meta = {"seed": pseed, "simulated": True, "requests_per_repeat": n_meas, "warmup_per_repeat": n_warm,
                "steps": steps, "virtual_s": round(t, 6), "cooldown_sent": [], "aborted": None}
        return PointRecords(point=key, repeats=reps, meta=meta)

    def unload(self) -> None:
        """Forget the model's server."""
        self.server = None
        self.spec = None

    def provenance(self) -> dict[str, Any]:
        """The engine for ``run.json``: the simulator, its options, each model's server limits."""
        return {"engine": "simulated", "simulator": "pipeline.engines.simulated (discrete-event, vLLM V1 scheduling rules)",
                "options": self.opts.model_dump(mode="json"), "servers": dict(self.servers),
                "client": "simulated closed/open loop (the load generator's rules, no network)"}
