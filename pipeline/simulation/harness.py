"""What a benchmark harness measures, predicted from an engine's step terms (pure), each figure by the harness's
own definition (:data:`THROUGHPUT`).

A published figure comes from a harness, and the same server gives different figures under each:

- ``static``: one batch of B sequences, prefilled together, then decoded together (llama-bench,
  llama-batched-bench, the transformers backend).  TTFT = the batch's prefill (its FLOPs, and an MoE's expert read
  once per pass of the engine's ``prefill_chunk_tokens``); TPOT = one step at B; every
  sequence decodes the same token ids in llama.cpp's benches, so an MoE's coverage stays k/E;
- ``wave``: c requests sent at once, each ``input_len`` + ``output_len`` (llama-benchy).  The server prefills the
  prompts in steps of ``max_num_batched_tokens`` tokens (vLLM's chunked prefill: a long prompt spans steps, short
  ones share one), the requests already decoding riding along; each request's first token and end come from
  that step-by-step timeline, and the throughputs from llama-benchy's definitions over it (:func:`wave`);
- ``closed``: c requests in flight, each replaced when it completes (vllm bench serve ``--max-concurrency``,
  batchmark's closed loop).  In steady state every step decodes c sequences and prefills the prompts that
  arrive meanwhile: c × input_len / output_len prompt tokens per step on average; TTFT = the request's fixed cost
  + its prompt's FLOPs + the step that carries them (a pass alone at c = 1, else the others' decode step) + half a
  step of waiting for the one in flight (none at c = 1: nothing else is in flight).

A served request (a wave's, a closed loop's) pays its engine's fixed request cost (``request_latency_s``:
:func:`request_fixed_s`), and where the engine states one its prompt's pass costs its weight read *plus* its FLOPs
(:func:`pipeline.cards.stepcost.one_pass_s`, the roofs added as a decode step adds them), one pass per chunk of
``max_num_batched_tokens``; where it states none, the pass is the old floor, max(FLOPs, weight read)
(:func:`pipeline.cards.stepcost.prefill_weight_floor_s`).  A static batch's prompts (the benches' 512 tokens and
more) are bound by their FLOPs, and no request is sent.

Step and prefill times: :func:`pipeline.cards.stepcost.engine_step_s` and :func:`pipeline.cards.stepcost.prefill_s`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.cards.modelcards import ModelCard
from pipeline.cards.stepcost import (engine_step_s, one_pass_s, prefill_compute_s, prefill_expert_read_s, prefill_s,
                                     prefill_weight_floor_s)

HARNESSES = ("static", "wave", "closed")

#: What each harness's headline throughput (``decode_tok_s``) is, as the harness prints it.
THROUGHPUT = {
    "static": "S_TG = B × tg / T_tg (llama-batched-bench; llama-bench's tg t/s at B = 1)",
    "wave": "t/s (total) = all requests' tokens after their first / (last request's end − first request's first "
            "token) (llama-benchy)",
    "closed": "c / TPOT, the streams' decode rate (output_tok_s: vllm bench serve's output tokens / duration, "
              "c × output_len / E2EL in steady state)",
}


def _decode(card, b, ctx, bw, peak, terms, identical):
    return engine_step_s(card, b, ctx, bw, peak, terms, identical)


@dataclass(frozen=True)
class Costing:
    """What a harness's steps are costed with: the model's ``card``, the engine's step ``terms``
    (:class:`pipeline.machine.engineterms.EngineTerms`), the machine's memory bandwidth (GB/s) and compute peak
    (TFLOP/s; None: no compute roof)."""

    card: ModelCard
    terms: Any
    bandwidth_gb_s: float
    peak_tflops: float | None


def static_batch(costing: Costing, batch: int, input_len: int, output_len: int, depth: int = 0,
                 identical_routing: bool = True) -> dict[str, float]:
    """One static batch: ``{"decode_tok_s", "prefill_tok_s", "tpot_s", "ttft_s"}`` as llama-batched-bench prints
    them (ggml-org/llama.cpp ``tools/batched-bench``: S_TG = B × tg / T_tg = B / TPOT, S_PP = B × pp / T_PP; TTFT: the batch's prefill of ``batch`` prompts, their
    ``batch × input_len`` tokens packed into passes of the engine's ``prefill_chunk_tokens``, each reading the experts:
    :func:`pipeline.cards.stepcost.prefill_expert_read_s`)."""
    card, terms, bandwidth_gb_s, peak_tflops = costing.card, costing.terms, costing.bandwidth_gb_s, costing.peak_tflops
    step = _decode(card, batch, depth + input_len + output_len / 2, bandwidth_gb_s, peak_tflops, terms, identical_routing)
    one = prefill_s(card, input_len, depth, terms, peak_tflops) - terms.prefill_overhead_s
    read = prefill_expert_read_s(card, batch * input_len, terms, bandwidth_gb_s)
    ttft = terms.prefill_overhead_s + batch * one + read
    return {"decode_tok_s": batch / step, "prefill_tok_s": batch * input_len / ttft if ttft > 0 else float("inf"),
            "tpot_s": step, "ttft_s": ttft}


def _wave_timelines(costing: Costing, concurrency: int, input_len: int, output_len: int,
                    max_num_batched_tokens: int) -> list[tuple[float, float]]:
    """Each request's ``(first_token_s, done_s)`` in a wave, from the send at 0 (module docstring: step by step).

    A step takes up to ``max_num_batched_tokens`` tokens: one per request decoding, the rest prompt tokens in arrival
    order (a prompt longer than the budget spans steps; the next starts in the step the last one ends in: vLLM's
    chunked prefill).  Its time is the prompt pieces' FLOPs (each after the part of its prompt already done:
    :func:`pipeline.cards.stepcost.prefill_compute_s`), at least one weight read, plus the decode step of the requests
    decoding; a request's first token comes at the end of the step that finishes its prompt."""
    card, terms, bandwidth_gb_s, peak_tflops = costing.card, costing.terms, costing.bandwidth_gb_s, costing.peak_tflops
    c, dec = concurrency, max(output_len - 1, 1)  # tokens after the first (at least one decode step)
    left, done_tok = [input_len] * c, [0] * c
    first: list[float | None] = [None] * c
    done: list[float | None] = [None] * c
    ctx = input_len + output_len / 2
    steps: dict[int, float] = {}
    latency = _states_latency(terms)
    t, nxt = terms.prefill_overhead_s + request_fixed_s(card, terms), 0
    while any(d is None for d in done):
        active = [r for r in range(c) if first[r] is not None and done[r] is None]
        budget, pre_s, pre_tok, ended = max_num_batched_tokens - len(active), 0.0, 0, []
        while nxt < c and budget > 0:
            take = min(budget, left[nxt])
            pre_s += prefill_compute_s(card, take, input_len - left[nxt], terms, peak_tflops)
            left[nxt] -= take
            budget, pre_tok = budget - take, pre_tok + take
            if left[nxt] == 0:
                ended.append(nxt)
                nxt += 1
        dt = _prefill_pass_s(card, terms, bandwidth_gb_s, pre_s, pre_tok, len(active), latency) if pre_tok else 0.0
        if active:
            if len(active) not in steps:
                steps[len(active)] = _decode(card, len(active), ctx, bandwidth_gb_s, peak_tflops, terms, False)
            dt += steps[len(active)]
        t += dt
        for r in active:
            done_tok[r] += 1
            if done_tok[r] == dec:
                done[r] = t
        for r in ended:
            first[r] = t
    return [(f, d) for f, d in zip(first, done)]  # type: ignore[misc]


def request_fixed_s(card: ModelCard, terms) -> float:
    """A served request's fixed cost (s) under ``terms`` (:meth:`pipeline.machine.engineterms.EngineTerms.request_fixed_s`
    of the card's name; 0 for terms that state none)."""
    fixed = getattr(terms, "request_fixed_s", None)
    return fixed(card.name) if fixed is not None else 0.0


def _states_latency(terms) -> bool:
    """Whether ``terms`` state a request latency (then a served prompt's pass is added to its FLOPs: module docstring)."""
    return bool(getattr(terms, "request_latency_s", None))


def _prefill_pass_s(card: ModelCard, terms, bandwidth_gb_s: float, compute_s: float, prompt_tokens: int,
                    decoding: int, latency: bool) -> float:
    """The prompt part of one step (s): its FLOPs (``compute_s``) and, where the engine states a request latency, the
    pass added (:func:`pipeline.cards.stepcost.one_pass_s`: overhead and weights read, or with ``decoding`` sequences
    in the step only the experts its prompt tokens add to theirs); else the old floor, max(FLOPs, weights read)."""
    if not latency:
        return max(compute_s, prefill_weight_floor_s(card, prompt_tokens, terms, bandwidth_gb_s))
    if not decoding:
        return compute_s + one_pass_s(card, prompt_tokens, terms, bandwidth_gb_s)
    more = (prefill_weight_floor_s(card, prompt_tokens + decoding, terms, bandwidth_gb_s)
            - prefill_weight_floor_s(card, decoding, terms, bandwidth_gb_s))
    return compute_s + max(more, 0.0)


def wave(costing: Costing, concurrency: int, input_len: int, output_len: int,
         max_num_batched_tokens: int = 8192) -> dict[str, float]:
    """A wave of ``concurrency`` requests sent at once, the figures as llama-benchy prints them (tok/s, s).

    From each request's timeline (:func:`_wave_timelines`), with llama-benchy's own definitions (eugr/llama-benchy
    ``src/llama_benchy/results.py``, ``_process_batch``), n = ``concurrency`` requests, g = ``output_len``:

    - ``decode_tok_s``, its tg row's ``t/s (total)``: n × (g − 1) / (last request's end − first request's first token);
    - ``per_request_tok_s``, ``t/s (req)``: the mean over requests of (g − 1) / (end − first token);
    - ``prefill_tok_s``, its pp row's ``t/s (total)``: n × ``input_len`` / (last first token − send);
    - ``tpot_s`` the mean of (end − first token) / (g − 1); ``ttft_s`` the median first token.

    With long prompts the prefills stagger the requests: the first decodes alone while the others wait, and the two
    throughputs part ways (gpt-oss-20b, 25,000-token prompts, c = 10 on a DGX Spark: 44.2 against c × 9.79)."""
    times = _wave_timelines(costing, concurrency, input_len, output_len, max_num_batched_tokens)
    dec, n = max(output_len - 1, 1), len(times)
    spans = [d - f for f, d in times]
    window = max(d for _, d in times) - min(f for f, _ in times)
    ttfts = sorted(f for f, _ in times)
    return {"decode_tok_s": n * dec / window, "per_request_tok_s": sum(dec / s for s in spans) / n,
            "prefill_tok_s": n * input_len / ttfts[-1], "tpot_s": sum(spans) / n / dec, "ttft_s": ttfts[n // 2]}


def closed_loop(costing: Costing, concurrency: int, input_len: int, output_len: int) -> dict[str, float]:
    """A closed loop of ``concurrency`` in flight, steady state (module docstring), as vllm bench serve prints it.

    ``decode_tok_s`` = c / TPOT, the streams' decode rate (what a chat client's "tok/s" and a single stream's
    published figure are); ``output_tok_s`` vllm bench serve's ``Output token throughput``, total output tokens /
    benchmark duration (vllm ``benchmarks/serve.py``, ``calculate_metrics``): with c requests always in flight, each
    lasting E2EL = TTFT + (g − 1) × TPOT for its g = ``output_len`` tokens, Little's law gives c / E2EL requests a
    second, so c × g / E2EL (derived; the ramp-up and the tail of a finite run are left out: num_prompts ≫ c)."""
    card, terms, bandwidth_gb_s, peak_tflops = costing.card, costing.terms, costing.bandwidth_gb_s, costing.peak_tflops
    c = concurrency
    one = prefill_s(card, input_len, 0, terms, peak_tflops) - terms.prefill_overhead_s
    step = _decode(card, c, input_len + output_len / 2, bandwidth_gb_s, peak_tflops, terms, False)
    mixed = step + (c / max(output_len, 1)) * one  # each step also prefills the prompts that arrive meanwhile
    if _states_latency(terms):  # the prompt's step: a pass (or the others' decode step) + its FLOPs, after the wait
        carry = max(step, one_pass_s(card, input_len, terms, bandwidth_gb_s)) if c > 1 else \
            one_pass_s(card, input_len, terms, bandwidth_gb_s)
        ttft = request_fixed_s(card, terms) + one + carry + (mixed / 2 if c > 1 else 0.0)
    else:
        first = max(one, prefill_weight_floor_s(card, input_len, terms, bandwidth_gb_s))  # its pass reads the weights
        ttft = terms.prefill_overhead_s + first + mixed / 2
    g = max(output_len, 1)
    return {"decode_tok_s": c / mixed, "output_tok_s": c * g / (ttft + (g - 1) * mixed), "tpot_s": mixed,
            "ttft_s": ttft}


def predict(harness: str, costing: Costing, concurrency: int, input_len: int, output_len: int, depth: int = 0,
            identical_routing: bool = True, max_num_batched_tokens: int = 8192) -> dict[str, float]:
    """The figures ``harness`` would measure (``static``, ``wave``, ``closed``) of ``costing``'s model and machine.

    Raises:
        ValueError: an unknown harness (the known ones named).
    """
    if harness == "static":
        return static_batch(costing, concurrency, input_len, output_len, depth, identical_routing)
    if harness == "wave":
        return wave(costing, concurrency, input_len, output_len, max_num_batched_tokens)
    if harness == "closed":
        return closed_loop(costing, concurrency, input_len, output_len)
    raise ValueError(f"harness: unknown {harness!r} (known: {', '.join(HARNESSES)})")
