"""What a plan refuses to simulate or calls not fitting before it costs anything, and how it writes a duration.

Bounds at the entry of :func:`pipeline.plan.estimate.make_plan`, so a config that asks for what no hardware holds
is answered at once, in one line, instead of simulated for minutes (concurrency 100,000 took 94 s and 1.9 GB;
1,000,000 over 10 minutes, silently):

- a closed-loop point of more than :data:`QUEUE_DEPTH_MAX` times the sequences whose KV cache the memory holds
  at once is not simulated: each request would wait behind that many others before it is scheduled (a queue,
  not a batch), and the simulation's cost grows with the concurrency;
- an open-loop point whose requests take longer to send than one measuring job may run (``cluster.runtime_min``)
  does not fit (an offered rate of 1e-9 req/s: 32 requests in a thousand years);
- a closed-loop point fits (:func:`memory_fits`) when the weights and the KV cache of its sequences
  (:func:`kv_sequences`) are within ``memory_gb × gpu_memory_utilization`` and its requests within ``max_model_len``;
- a duration past :data:`HOURS_IN_FULL` hours is written in powers of ten (a bandwidth of 1e-300 GB/s made a
  300-digit number of hours).
"""

from __future__ import annotations

import math

#: Most sequences in line per sequence the KV cache holds at once, of a point the plan simulates.
QUEUE_DEPTH_MAX = 16
#: Past this many hours a duration is written in powers of ten.
HOURS_IN_FULL = 1e6


def format_duration(seconds: float) -> str:
    """``9 h 41 min``, ``12 min``, ``40 s``; beyond :data:`HOURS_IN_FULL` hours ``2.8e+296 h``; ``forever`` for an
    infinite one."""
    if not math.isfinite(seconds):
        return "forever" if seconds > 0 else "–"
    if seconds >= 3600 * HOURS_IN_FULL:
        return f"{seconds / 3600:.2g} h"
    if seconds >= 3600:
        h, rest = divmod(round(seconds / 60), 60)
        return f"{h} h {rest:02d} min"
    if seconds >= 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds:.0f} s"


def beyond_memory(concurrency: int, held: int | None, tokens: int) -> str | None:
    """Why a closed-loop point of ``concurrency`` is not simulated (None: it is), when the KV cache holds ``held``
    sequences of ``tokens`` at once (None: unknown, or the weights alone do not fit, which the plan says itself)."""
    if not held or concurrency <= QUEUE_DEPTH_MAX * held:
        return None
    return (f"c = {concurrency} is over {QUEUE_DEPTH_MAX}x the {held} sequences of {tokens} tokens whose KV cache the "
            f"memory holds at once: not simulated (a queue, not a batch)")


def too_long(wall_s: float, runtime_min: int, rate_rps: float) -> str | None:
    """Why an open-loop point at ``rate_rps`` does not fit (None: it does): its ``wall_s`` exceeds one measuring job's
    time limit, ``runtime_min`` minutes."""
    if wall_s <= runtime_min * 60:
        return None
    return (f"at {rate_rps:g} req/s its requests take {format_duration(wall_s)}, more than a measuring job's time "
            f"limit (cluster.runtime_min {runtime_min} min)")


def memory_fits(card, hw, server, util: float, c: int, input_len: int, output_len: int) -> tuple[bool, str, float]:
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


def kv_sequences(card, hw, util: float, tokens: int) -> int | None:
    """Sequences of ``tokens`` whose KV cache fits beside the weights in ``memory_gb × util`` (as :func:`memory_fits`)."""
    from pipeline.cards.stepcost import kv_bytes_per_sequence

    usable = (hw.memory_gb or 0.0) * 1e9 * util
    per_seq = kv_bytes_per_sequence(card, tokens)
    if card.weight_bytes >= usable or per_seq <= 0:
        return None
    return int((usable - card.weight_bytes) // per_seq)
