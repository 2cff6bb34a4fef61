"""How a streamed request's output tokens spread over its chunks (pure): the readings of a server's per-chunk usage,
and per-chunk counts scaled to a total.  :mod:`pipeline.loadgen.tokencount` decides which count to trust with them."""

from __future__ import annotations

import math


def per_chunk_layouts(values: list[int | None], texts: list[str]) -> dict[str, list[int]]:
    """Per-chunk token counts under each reading of the per-chunk usage (only readings with no negative count).

    ``values`` are the ``completion_tokens`` of each chunk; every chunk with text must carry
    one, else there is no per-chunk usage and the result is empty.  Chunks without a value
    count 0.  Readings (derived: v is what the server sent, c the true running total):

    - ``cumulative``: v_i = c_i, so chunk i carries v_i − v_{i−1};
    - ``per_chunk``: v_i is chunk i's own count;
    - ``running_sum``: v_i = c_1 + … + c_i, so c_i = v_i − v_{i−1} and chunk i carries
      c_i − c_{i−1} (16 one-token chunks give v = 1, 3, 6, …, 136).
    """
    if not any(t for t in texts) or any(t and v is None for t, v in zip(texts, values)):
        return {}
    idx = [i for i, v in enumerate(values) if v is not None]
    if len(idx) < 2:
        return {}
    vals = [values[i] for i in idx]
    out: dict[str, list[int]] = {}

    def spread(local: list[int]) -> list[int] | None:
        if any(k < 0 for k in local):
            return None
        full = [0] * len(values)
        for i, k in zip(idx, local):
            full[i] = k
        return full

    cum = spread([v - p for v, p in zip(vals, [0] + vals[:-1])])
    if cum is not None:
        out["cumulative"] = cum
    own = spread(list(vals))
    if own is not None:
        out["per_chunk"] = own
    running = [v - p for v, p in zip(vals, [0] + vals[:-1])]
    rs = spread([c - p for c, p in zip(running, [0] + running[:-1])]) if all(c >= 0 for c in running) else None
    if rs is not None:
        out["running_sum"] = rs
    return out


def reconcile_counts(counts: list[int], total: int) -> list[int]:
    """Scale per-chunk token counts to sum to ``total`` (largest remainder).

    Chunks with a positive count keep at least 1 when ``total`` allows it; the result has the
    same length as ``counts`` and sums to ``total`` (for ``total ≥ 0``).
    """
    n = len(counts)
    if n == 0 or sum(counts) == total:
        return list(counts)
    positive = [i for i, c in enumerate(counts) if c > 0] or list(range(n))
    base = [0] * n
    budget = total
    if total >= len(positive):
        for i in positive:
            base[i] = 1
        budget -= len(positive)
    weights = [max(counts[i], 0) for i in range(n)]
    wsum = sum(weights) or n
    if not sum(weights):
        weights = [1] * n
    shares = [budget * w / wsum for w in weights]
    floors = [math.floor(s) for s in shares]
    rest = budget - sum(floors)
    order = sorted(range(n), key=lambda i: (shares[i] - floors[i], -i), reverse=True)
    for i in order[:rest]:
        floors[i] += 1
    return [b + f for b, f in zip(base, floors)]
