"""What a benchmark harness measures, predicted from an engine's step terms (pure).

A published figure comes from a harness, and the same server gives different figures under each:

- ``static``: one batch of B sequences, prefilled together, then decoded together (llama-bench,
  llama-batched-bench, the transformers backend).  TTFT = the batch's prefill (its FLOPs, and an MoE's expert read
  once per pass of the engine's ``prefill_chunk_tokens``); TPOT = one step at B; every
  sequence decodes the same token ids in llama.cpp's benches, so an MoE's coverage stays k/E;
- ``wave``: c requests sent at once, each ``input_len`` + ``output_len`` (llama-benchy).  The server prefills the
  prompts in chunks of ``max_num_batched_tokens`` (vLLM's chunked prefill); a request prefilled in chunk j decodes
  one token per remaining chunk step, then at the decode step of c; its decode rate is
  ``output_len / (e2e − TTFT)`` and the wave's throughput c × their mean (llama-benchy's ``tg``);
- ``closed``: c requests in flight, each replaced when it completes (vllm bench serve ``--max-concurrency``,
  batchmark's closed loop).  In steady state every step decodes c sequences and prefills the prompts that
  arrive meanwhile: c × input_len / output_len prompt tokens per step on average; TTFT = one prompt's prefill
  plus half a step (the step it arrives in).

A wave's and a closed loop's TTFT count a prefill pass at no less than its weight read
(:func:`pipeline.cards.stepcost.prefill_weight_floor_s`: a short prompt is bound by it); a static batch's prompts (the
benches' 512 tokens and more) are bound by their FLOPs.

Step and prefill times: :func:`pipeline.cards.stepcost.engine_step_s` and :func:`pipeline.cards.stepcost.prefill_s`.
"""

from __future__ import annotations

import math

from pipeline.cards.modelcards import ModelCard
from pipeline.cards.stepcost import engine_step_s, prefill_expert_read_s, prefill_s, prefill_weight_floor_s

HARNESSES = ("static", "wave", "closed")


def _decode(card, b, ctx, bw, peak, terms, identical):
    return engine_step_s(card, b, ctx, bw, peak, terms, identical)


def static_batch(card: ModelCard, terms, bandwidth_gb_s: float, peak_tflops: float | None, batch: int,
                 input_len: int, output_len: int, depth: int = 0, identical_routing: bool = True) -> dict[str, float]:
    """One static batch: ``{"decode_tok_s", "tpot_s", "ttft_s"}`` (TTFT: the batch's prefill of ``batch`` prompts, their
    ``batch × input_len`` tokens packed into passes of the engine's ``prefill_chunk_tokens``, each reading the experts:
    :func:`pipeline.cards.stepcost.prefill_expert_read_s`)."""
    step = _decode(card, batch, depth + input_len + output_len / 2, bandwidth_gb_s, peak_tflops, terms, identical_routing)
    one = prefill_s(card, input_len, depth, terms, peak_tflops) - terms.prefill_overhead_s
    read = prefill_expert_read_s(card, batch * input_len, terms, bandwidth_gb_s)
    return {"decode_tok_s": batch / step, "tpot_s": step, "ttft_s": terms.prefill_overhead_s + batch * one + read}


def wave(card: ModelCard, terms, bandwidth_gb_s: float, peak_tflops: float | None, concurrency: int, input_len: int,
         output_len: int, max_num_batched_tokens: int = 8192) -> dict[str, float]:
    """A wave of ``concurrency`` requests sent at once (module docstring): aggregate decode tok/s, mean TPOT, median TTFT."""
    c = concurrency
    per_chunk = max(1, max_num_batched_tokens // max(input_len, 1))  # whole prompts per prefill step
    chunks = math.ceil(c / per_chunk)
    one = prefill_s(card, input_len, 0, terms, peak_tflops) - terms.prefill_overhead_s
    step = _decode(card, c, input_len + output_len / 2, bandwidth_gb_s, peak_tflops, terms, False)
    rates, tpots, ttfts = [], [], []
    for j in range(1, chunks + 1):
        n = min(per_chunk, c - (j - 1) * per_chunk)
        chunk_s = min(per_chunk, c) * one  # a prefill step of a chunk (its decoders ride along)
        floor = prefill_weight_floor_s(card, min(per_chunk, c) * input_len, terms, bandwidth_gb_s)
        ttft = terms.prefill_overhead_s + j * max(chunk_s, floor)  # a pass reads the weights at least once
        mixed = min(chunks - j, output_len - 1)  # tokens this request decodes while later chunks prefill
        window = mixed * (chunk_s + step) + (output_len - 1 - mixed) * step
        for _ in range(n):
            ttfts.append(ttft)
            tpots.append(window / max(output_len - 1, 1))
            rates.append((output_len - 1) / window if window > 0 else float("inf"))
    ttfts.sort()
    return {"decode_tok_s": c * sum(rates) / len(rates), "tpot_s": sum(tpots) / len(tpots),
            "ttft_s": ttfts[len(ttfts) // 2]}


def closed_loop(card: ModelCard, terms, bandwidth_gb_s: float, peak_tflops: float | None, concurrency: int,
                input_len: int, output_len: int) -> dict[str, float]:
    """A closed loop of ``concurrency`` in flight, steady state (module docstring)."""
    c = concurrency
    one = prefill_s(card, input_len, 0, terms, peak_tflops) - terms.prefill_overhead_s
    step = _decode(card, c, input_len + output_len / 2, bandwidth_gb_s, peak_tflops, terms, False)
    mixed = step + (c / max(output_len, 1)) * one  # each step also prefills the prompts that arrive meanwhile
    first = max(one, prefill_weight_floor_s(card, input_len, terms, bandwidth_gb_s))  # its pass reads the weights
    return {"decode_tok_s": c / mixed, "tpot_s": mixed, "ttft_s": terms.prefill_overhead_s + first + mixed / 2}


def predict(harness: str, card: ModelCard, terms, bandwidth_gb_s: float, peak_tflops: float | None, concurrency: int,
            input_len: int, output_len: int, depth: int = 0, identical_routing: bool = True,
            max_num_batched_tokens: int = 8192) -> dict[str, float]:
    """The figures ``harness`` would measure (``static``, ``wave``, ``closed``).

    Raises:
        ValueError: an unknown harness (the known ones named).
    """
    if harness == "static":
        return static_batch(card, terms, bandwidth_gb_s, peak_tflops, concurrency, input_len, output_len, depth,
                            identical_routing)
    if harness == "wave":
        return wave(card, terms, bandwidth_gb_s, peak_tflops, concurrency, input_len, output_len, max_num_batched_tokens)
    if harness == "closed":
        return closed_loop(card, terms, bandwidth_gb_s, peak_tflops, concurrency, input_len, output_len)
    raise ValueError(f"harness: unknown {harness!r} (known: {', '.join(HARNESSES)})")
