"""The simulated server's discrete-event loop: one repeat of a point in virtual time.

:func:`simulate_repeat` runs one :class:`SimPlan` on the server of :mod:`pipeline.simulation.simserver` (its rules
are in that module's docstring) step by step and yields what a measured repeat of a served backend yields: request
records (send, first token, every token's arrival, usage) and the server's view in the shape of a ``/metrics``
scrape (``before``, ``after``, ``max_during`` with vLLM's metric names).

The client is the load generator's (:mod:`pipeline.loadgen.scheduler`): closed loop keeps N in flight (the next sent
when one finishes, cool-down requests after the last body until every measured one finished, then dropped); open
loop sends on the seeded schedule of :class:`pipeline.config.arrivals.Load` (the same seeds as a served point),
queued behind an optional cap.  The client is exact: no network, no lag (``lag_s`` 0).  Times are virtual seconds
since the point's start, repeats one after another; a Spark day takes seconds.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipeline.config.arrivals import Load
from pipeline.simulation.simserver import ServerModel, attended_tokens, noise, one_sequence_attended, refusal
from pipeline.core.records import RequestRecord

# Prometheus names of vLLM V1 the metrics stage reads (pipeline.metrics.summarize.server_state).
_RUNNING, _WAITING = "vllm:num_requests_running", "vllm:num_requests_waiting"
_KV, _PREEMPT = "vllm:kv_cache_usage_perc", "vllm:num_preemptions_total"


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


@dataclass(frozen=True)
class SimPlan:
    """One simulated repeat: ``n_warm`` warm-up then ``n_meas`` measured requests of ``input_len`` / ``output_len``
    tokens (or ``lengths``: (prompt, output tokens) per body as :func:`pipeline.config.workload.draw_lengths` draws
    them, a cool-down re-using a body's), sent on ``load`` (:class:`pipeline.config.arrivals.Load`), times in s since
    the point's start from ``start_s``, ids from ``id_offset``.  ``token_times=False``: each record carries its first
    token and one chunk of the rest at the last token's time (TTFT, TPOT, E2EL, throughput exact; ITL the mean)."""

    input_len: int
    output_len: int
    n_warm: int
    n_meas: int
    load: Load
    start_s: float = 0.0
    id_offset: int = 0
    token_times: bool = True
    lengths: tuple[Any, Any] | None = field(default=None, compare=False, repr=False)


def simulate_repeat(server: ServerModel, plan: SimPlan, rng: np.random.Generator | None = None) -> RepeatResult:
    """Simulate one repeat of ``plan`` on ``server`` (``rng``: the noise of its step and repeat times, None: none).

    Closed loop: the load's concurrency in flight, the next sent the moment one finishes, cool-down requests after the
    last body until every measured one finished.  Open loop: sends on the load's schedule, at most its cap in flight.
    Returns the recorded requests (bodies, warm-up included; cool-downs dropped), the time the repeat ended (the last
    measured completion), the server's view and the number of steps.
    """
    rep_factor = float(noise(rng, server.repeat_time_cv, 1)[0]) if (rng is not None and server.repeat_time_cv > 0) else 1.0
    refused = refusal(server, plan.input_len, plan.output_len)
    if refused:  # vLLM answers every such request with an error at once
        recs = [RequestRecord(request_id=i + plan.id_offset, queued_s=plan.start_s, sent_s=plan.start_s,
                              first_token_s=None, done_s=None, chunks=[], input_tokens=plan.input_len, output_tokens=0,
                              error=refused, warmup=i < plan.n_warm) for i in range(plan.n_warm + plan.n_meas)]
        return RepeatResult(requests=recs, end_s=plan.start_s, server_metrics={}, steps=0)
    loop = _Loop(server, plan, rng if server.step_time_cv > 0 else None, rep_factor)
    loop.run(plan.load.concurrency)
    return RepeatResult(requests=loop.records(plan.id_offset, plan.token_times), end_s=loop.t,
                        server_metrics=loop.server_view(), steps=loop.steps)


class _Loop:
    """One repeat in virtual time: the client (closed loop's slots, open loop's schedule and cap), the server's queues
    (``pending``, ``waiting``, ``running``), KV blocks, clock ``t``, step ends and a scrape's maxima, and its steps."""

    def __init__(self, server: ServerModel, plan: SimPlan, rng_steps: np.random.Generator | None, rep_factor: float):
        self.server, self.input_len, self.output_len, self.lengths = server, plan.input_len, plan.output_len, plan.lengths
        self.n_warm, self.n_meas, self.n_total = plan.n_warm, plan.n_meas, plan.n_warm + plan.n_meas
        self.rng_steps, self.rep_factor = rng_steps, rep_factor
        self.free_blocks = server.num_blocks
        self.running: list[_Req] = []
        self.waiting: deque[_Req] = deque()
        self.client_q: deque[_Req] = deque()        # open loop behind a cap
        self.pending: deque[tuple[float, _Req]] = deque()  # sent, reaching the scheduler at the time given (arrival_delay_s)
        self.delay = server.arrival_delay_s
        self.reqs: list[_Req] = []  # the recorded ones (bodies, warm-up included)
        self.step_end: list[float] = []
        self.t = plan.start_s
        self.sent = self.in_flight = self.measured_done = self.steps = 0
        self.preempt0, self._attended = server.preemptions_total, one_sequence_attended(server.card)
        self.max_run, self.max_wait, self.max_kv = 0, 0, 0.0
        self.prefix_cached = False  # a request of this repeat has computed the cached prefix (server.cached_prefix_tokens)
        self.open_loop = plan.load.open_loop
        self.next_arrival = plan.start_s if self.open_loop else math.inf
        self.gaps = plan.load.gaps() if self.open_loop else iter(())  # the load generator's schedule
        self.cap = plan.load.max_concurrency if self.open_loop else None

    def new_request(self, i: int, now: float, scheduled: float | None) -> _Req:
        ins, outs = self.lengths or ((self.input_len,), (self.output_len,))
        r = _Req(rid=i, prompt=int(ins[i % len(ins)]), out=int(outs[i % len(outs)]), warmup=i >= self.n_total or i < self.n_warm,
                 queued_s=scheduled if scheduled is not None else now, sent_s=now, scheduled_s=scheduled,
                 recorded=i < self.n_total)
        if r.recorded:
            self.reqs.append(r)
        return r

    def send(self, r: _Req) -> None:
        self.in_flight += 1
        if self.delay > 0:
            self.pending.append((r.sent_s + self.delay, r))
        else:
            self.waiting.append(r)

    def send_next(self) -> None:
        """Closed loop: the next body (or cool-down request) goes out now."""
        self.send(self.new_request(self.sent, self.t, None))
        self.sent += 1

    def after_finish(self, r: _Req) -> None:
        """The client's reaction to a finished request at time ``t``: closed loop sends the next one."""
        if not self.open_loop and self.measured_done < self.n_meas:
            self.send_next()
        elif self.open_loop and self.client_q and (self.cap is None or self.in_flight < self.cap):
            q = self.client_q.popleft()
            q.sent_s = self.t
            self.send(q)

    def finish(self, done: list[_Req]) -> None:
        """Requests ``done`` (already out of ``running``) finish at time ``t``: their blocks freed, then the client reacts."""
        for r in done:
            r.done_s = self.t
            self.free_blocks += r.blocks
            r.blocks = 0
            self.in_flight -= 1
            if r.recorded and not r.warmup:
                self.measured_done += 1
        for r in done:
            self.after_finish(r)

    def arrive(self) -> None:
        """Open loop: every request scheduled up to now is sent, or queued at the client behind the cap."""
        while self.next_arrival <= self.t:
            r = self.new_request(self.sent, self.next_arrival, self.next_arrival)
            self.sent += 1
            if self.cap is not None and self.in_flight >= self.cap:
                self.client_q.append(r)
            else:
                r.sent_s = max(self.next_arrival, r.sent_s)
                self.send(r)
            self.next_arrival += next(self.gaps)

    def run(self, concurrency: int | None) -> None:
        """Step until every measured request finished (or, closed loop, nothing is left in flight)."""
        if not self.open_loop:  # closed loop: the first N go out at once
            for _ in range(concurrency):
                self.send_next()
        while self.measured_done < self.n_meas:
            if self.open_loop:
                self.arrive()
                if self.measured_done >= self.n_meas:
                    break
            while self.pending and self.pending[0][0] <= self.t:
                self.waiting.append(self.pending.popleft()[1])
            if not self.running and not self.waiting:
                if self.pending:
                    self.t = min(self.pending[0][0], self.next_arrival)
                    continue
                if not self.open_loop:
                    break  # nothing in flight (every request refused)
                self.t = self.next_arrival
                continue
            if self.decode_steps():
                continue
            sched = self.schedule()
            self.max_wait = max(self.max_wait, len(self.waiting))  # what a scrape sees: the queue after this step's scheduling
            if not sched:  # nothing can run: the head of the queue can never get its blocks
                self.drop_head()
                continue
            self.step(sched)

    def decode_steps(self) -> bool:
        """The fast path, True when taken: every running request decodes and nothing can be admitted (nothing waits,
        or, closed loop, every slot is taken until one finishes): k steps at once (the same steps and noise draws as one
        by one; an open loop's arrival may cut the k steps short, so it keeps the slow path while requests wait)."""
        server, running = self.server, self.running
        if not (running and (not self.waiting or (len(running) >= server.max_num_seqs and not self.open_loop))
                and len(running) <= server.max_num_batched_tokens and all(r.computed == r.total - 1 for r in running)):
            return False
        bs = server.block_size
        k = min(r.out - r.gen for r in running)
        ctx = np.fromiter((r.computed for r in running), float, len(running))
        need = np.ceil((ctx + k) / bs) - np.fromiter((r.blocks for r in running), float, len(running))
        if not (need.sum() <= self.free_blocks and k > 1):
            return False
        b = len(running)
        lt = attended_tokens(server.card, ctx[:, None] + 1 + np.arange(k)[None, :]).sum(axis=0)
        per = server.decode_run_s(b, lt)
        f = noise(self.rng_steps, server.step_time_cv, k)
        if f is not None:
            per = per * f
        ends = self.t + np.cumsum(per * self.rep_factor)
        horizon = min(self.next_arrival, self.pending[0][0]) if self.pending else self.next_arrival  # inf: closed loop, no delay
        if horizon < ends[-1]:
            k = int(np.searchsorted(ends, horizon)) + 1  # up to the first step ending at or after it
            ends = ends[:k]
        s0 = len(self.step_end)
        self.step_end.extend(ends.tolist())
        for r in running:
            r.tok_steps.append((s0, k))
            r.gen += k
            r.computed += k
            nb = -(-r.computed // bs)
            self.free_blocks -= nb - r.blocks
            r.blocks = nb
        self.t = float(ends[-1])
        self.steps += k
        self.max_kv = max(self.max_kv, 1 - self.free_blocks / server.num_blocks)
        self.max_run = max(self.max_run, len(running))
        self.max_wait = max(self.max_wait, len(self.waiting))
        finished = [r for r in running if r.gen >= r.out]
        if finished:
            self.running = [r for r in running if r.gen < r.out]
            self.finish(finished)
        return True

    def schedule(self) -> list[tuple[_Req, int]]:
        """One step's batch ``[(request, tokens), ...]`` by vLLM's rules: running requests first, in admission order, in
        the token budget (the last admitted preempted while the KV cache cannot grow), then waiting ones unless one was."""
        server, running, waiting, bs = self.server, self.running, self.waiting, self.server.block_size
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
            while nb > self.free_blocks:
                victim = running.pop()  # the request admitted last (vLLM's lowest priority)
                self.free_blocks += victim.blocks
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
            self.free_blocks -= nb
            r.blocks += nb
            sched.append((r, n))
            budget -= n
            i += 1
        if not preempted:
            while waiting and len(running) < server.max_num_seqs and budget > 0:
                r = waiting[0]
                if self.prefix_cached and r.blocks == 0:  # admitted: the cached prefix is its (at least 1 left to compute)
                    r.computed = max(r.computed, min(server.cached_prefix_tokens, r.total - 1))
                n = min(r.total - r.computed, budget)
                nb = -(-(r.computed + n) // bs) - r.blocks
                if nb > self.free_blocks:
                    break
                waiting.popleft()
                self.free_blocks -= nb
                r.blocks += nb
                running.append(r)
                sched.append((r, n))
                budget -= n
        return sched

    def drop_head(self) -> None:
        """The head of the queue can never get its blocks: it fails (as vLLM's error), the client reacts."""
        r = self.waiting.popleft()
        r.error = "server: the KV cache cannot hold this request"
        self.in_flight -= 1
        if r.recorded and not r.warmup:
            self.measured_done += 1
        self.after_finish(r)

    def step(self, sched: list[tuple[_Req, int]]) -> None:
        """One step of ``sched``: its time (``ServerModel._time``, noise), a token per computed prompt; finished ones out."""
        server = self.server
        tokens, prompt_tokens, kv_lt, attn_lt, prompt_lt = 0, 0, 0.0, 0.0, 0.0
        attended = self._attended
        for r, n in sched:
            tokens += n
            end_ctx = r.computed + n
            a_end = attended(end_ctx)
            kv_lt += a_end
            a = a_end if n == 1 else n * attended(r.computed + n / 2)
            attn_lt += a
            if r.computed < r.total - 1:  # a prefill chunk (not the one decode token of a running sequence)
                prompt_tokens += n
                prompt_lt += a
        dt = server._time(tokens, kv_lt, attn_lt, prompt_tokens, prompt_lt) * self.rep_factor
        f = noise(self.rng_steps, server.step_time_cv, 1)
        if f is not None:
            dt *= float(f[0])
        self.t += dt
        self.step_end.append(self.t)
        si = len(self.step_end) - 1
        self.steps += 1
        self.max_run = max(self.max_run, len(self.running))
        self.max_kv = max(self.max_kv, 1 - self.free_blocks / server.num_blocks)
        finished = []
        for r, n in sched:
            r.computed += n
            self.prefix_cached = self.prefix_cached or 0 < server.cached_prefix_tokens <= r.computed
            if r.computed == r.total:
                r.gen += 1
                if r.first_s is None:
                    r.first_s = self.t
                if r.tok_steps and sum(r.tok_steps[-1]) == si:
                    s0, c = r.tok_steps[-1]
                    r.tok_steps[-1] = (s0, c + 1)
                else:
                    r.tok_steps.append((si, 1))
                if r.gen >= r.out:
                    finished.append(r)
        if finished:
            done = set(map(id, finished))
            self.running = [r for r in self.running if id(r) not in done]
            self.finish(finished)

    def records(self, id_offset: int, token_times: bool) -> list[RequestRecord]:
        """The recorded requests in body order, each token at its step's end (rounded to the µs), as a served backend's."""
        times = np.round(np.asarray(self.step_end, dtype=float), 6)
        out: list[RequestRecord] = []
        for r in sorted(self.reqs, key=lambda q: q.rid):
            if token_times or not r.tok_steps:
                tok = np.concatenate([times[s0:s0 + c] for s0, c in r.tok_steps]) if r.tok_steps else np.empty(0)
                chunks = [[x, 1] for x in tok.tolist()]
            else:
                s0, _ = r.tok_steps[0]
                s1, c1 = r.tok_steps[-1]
                chunks = [[float(times[s0]), 1]] + ([[float(times[s1 + c1 - 1]), r.gen - 1]] if r.gen > 1 else [])
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
        return out

    def server_view(self) -> dict[str, Any]:
        """The server's view in a ``/metrics`` scrape's shape: ``before``, ``after`` and ``max_during`` (vLLM's names)."""
        server = self.server
        before = {_RUNNING: 0.0, _WAITING: 0.0, _KV: 0.0, _PREEMPT: float(self.preempt0)}
        after = {_RUNNING: float(len(self.running)), _WAITING: float(len(self.waiting)),
                 _KV: 1 - self.free_blocks / server.num_blocks if server.num_blocks else 0.0,
                 _PREEMPT: float(server.preemptions_total)}
        during = {_RUNNING: float(self.max_run), _WAITING: float(self.max_wait), _KV: float(self.max_kv)}
        return {"before": before, "after": after, "max_during": during}
