"""The simulated server's discrete-event loop: one repeat of a point in virtual time.

:func:`simulate_repeat` runs the server of :mod:`pipeline.engines.simserver` (its rules are in that
module's docstring) step by step and yields what a measured repeat of a served engine yields:
request records (send, first token, every token's arrival, usage) and the server's view in the
shape of a ``/metrics`` scrape (``before``, ``after``, ``max_during`` with vLLM's metric names).

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
from typing import Any

import numpy as np

from pipeline.engines.simserver import ServerModel, attended_tokens, refusal
from pipeline.core.records import RequestRecord

# Prometheus names of vLLM V1 the metrics stage reads (pipeline.metrics.summarize.server_state).
_RUNNING = "vllm:num_requests_running"
_WAITING = "vllm:num_requests_waiting"
_KV = "vllm:kv_cache_usage_perc"
_PREEMPT = "vllm:num_preemptions_total"


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


def _noise(rng: np.random.Generator | None, cv: float, n: int) -> np.ndarray | None:
    """``n`` log-normal factors of mean 1 and coefficient of variation ``cv`` (None when no noise)."""
    if rng is None or cv <= 0:
        return None
    sigma = math.sqrt(math.log1p(cv * cv))
    return rng.lognormal(-sigma * sigma / 2, sigma, n)


def simulate_repeat(server: ServerModel, input_len: int, output_len: int, n_warm: int, n_meas: int, *,
                    concurrency: int | None, load: str = "closed", rate_rps: float | None = None,
                    max_concurrency: int | None = None, schedule_seed: int = 0, start_s: float = 0.0,
                    rng: np.random.Generator | None = None, id_offset: int = 0,
                    token_times: bool = True) -> RepeatResult:
    """Simulate one repeat of a point: ``n_warm`` warm-up then ``n_meas`` measured requests.

    Closed loop (``load="closed"``): ``concurrency`` requests in flight, each next one sent the moment
    one finishes; after the last body cool-down requests keep the load until every measured request
    has finished.  Open loop (``poisson``/``constant`` at ``rate_rps``): sends on
    :func:`pipeline.engines.scheduler.schedule_gaps` (``schedule_seed``), at most ``max_concurrency``
    in flight when given (``concurrency`` is then None).  Times are s since the point's start; the repeat starts at ``start_s``.

    Returns the recorded requests (bodies, warm-up included; cool-downs dropped), the time the
    repeat ended (the last measured completion), the server's view and the number of steps.
    ``token_times=False``: each record carries its first token and one chunk of the rest at the last token's time
    instead of every token's (TTFT, TPOT, E2EL and throughput exact, ITL the request's mean; much faster to build).
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
    pending: deque[tuple[float, _Req]] = deque()  # sent, reaching the scheduler at the time given (arrival_delay_s)
    delay = server.arrival_delay_s
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
    cap = max_concurrency if open_loop else None

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
        if delay > 0:
            pending.append((r.sent_s + delay, r))
        else:
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

    def finish(done: list[_Req]) -> None:
        """Requests ``done`` (already out of ``running``) finish at time ``t``: their blocks freed, then the client reacts."""
        nonlocal free_blocks, in_flight, measured_done
        for r in done:
            r.done_s = t
            free_blocks += r.blocks
            r.blocks = 0
            in_flight -= 1
            if r.recorded and not r.warmup:
                measured_done += 1
        for r in done:
            after_finish(r)

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
        while pending and pending[0][0] <= t:
            waiting.append(pending.popleft()[1])
        if not running and not waiting:
            if pending:
                t = min(pending[0][0], next_arrival)
                continue
            if not open_loop:
                break  # nothing in flight (every request refused)
            t = next_arrival
            continue
        # ---- fast path: every running request decodes and nothing can be admitted (nothing waits, or, closed loop,
        # every slot is taken until one finishes): advance k steps at once (the same steps and noise draws as one by
        # one; an open loop's arrival may cut the k steps short, so it keeps the slow path while requests wait)
        if (running and (not waiting or (len(running) >= server.max_num_seqs and not open_loop))
                and len(running) <= server.max_num_batched_tokens and all(r.computed == r.total - 1 for r in running)):
            k = min(r.out - r.gen for r in running)
            ctx = np.fromiter((r.computed for r in running), float, len(running))
            need = np.ceil((ctx + k) / bs) - np.fromiter((r.blocks for r in running), float, len(running))
            if need.sum() <= free_blocks and k > 1:
                b = len(running)
                lt = attended_tokens(server.card, ctx[:, None] + 1 + np.arange(k)[None, :]).sum(axis=0)
                per = server.decode_run_s(b, lt)
                f = _noise(rng_steps, server.step_time_cv, k)
                if f is not None:
                    per = per * f
                ends = t + np.cumsum(per * rep_factor)
                horizon = min(next_arrival, pending[0][0]) if pending else next_arrival  # inf: closed loop, no delay
                if horizon < ends[-1]:
                    k = int(np.searchsorted(ends, horizon)) + 1  # up to the first step ending at or after it
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
                max_wait = max(max_wait, len(waiting))
                finished = [r for r in running if r.gen >= r.out]
                if finished:
                    running = [r for r in running if r.gen < r.out]
                    finish(finished)
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
        tokens = prompt_tokens = 0
        kv_lt = attn_lt = prompt_lt = 0.0
        for r, n in sched:
            tokens += n
            end_ctx = r.computed + n
            a_end = float(attended_tokens(server.card, end_ctx))
            kv_lt += a_end
            a = a_end if n == 1 else n * float(attended_tokens(server.card, r.computed + n / 2))
            attn_lt += a
            if r.computed < r.total - 1:  # a prefill chunk (not the one decode token of a running sequence)
                prompt_tokens += n
                prompt_lt += a
        dt = server._time(tokens, kv_lt, attn_lt, prompt_tokens, prompt_lt) * rep_factor
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
            finish(finished)
    end = t
    times = np.round(np.asarray(step_end, dtype=float), 6)
    out: list[RequestRecord] = []
    for r in sorted(reqs, key=lambda q: q.rid):
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
    before = {_RUNNING: 0.0, _WAITING: 0.0, _KV: 0.0, _PREEMPT: float(preempt0)}
    after = {_RUNNING: float(len(running)), _WAITING: float(len(waiting)),
             _KV: 1 - free_blocks / server.num_blocks if server.num_blocks else 0.0,
             _PREEMPT: float(server.preemptions_total)}
    during = {_RUNNING: float(max_run), _WAITING: float(max_wait), _KV: float(max_kv)}
    return RepeatResult(requests=out, end_s=end,
                        server_metrics={"before": before, "after": after, "max_during": during}, steps=steps)
