"""The figures ``vllm bench serve`` prints beside output throughput (requests/s, total tokens/s, tails, repeat spread),
from a point summary, each by the definition its own throughput has, or unknown.

A request rate is only what the point's figures allow (:func:`request_rate`):

- ``stated``: the source's own rate (an open loop's achieved rate; vLLM's ``request_throughput``);
- ``tokens_over_window``: output tok/s ÷ output_len, where the throughput's window runs from the first send to the last
  completion (``output_throughput_window`` ``send_to_completion``) and every request generates ``output_len`` tokens;
- ``c_over_e2el``: where the throughput counts only the generation (``decode_phase``: a static batch's decode, a
  llama-benchy wave's first token → last token), output tok/s ÷ output_len would leave every prefill out and invent a
  rate no request reached (llama-benchy at c = 1, pp2048 / tg32, 58.71 t/s: 58.71 / 32 = 1.83 req/s where each request
  takes 0.979 + 31 / 58.71 = 1.507 s).  Its c requests start together and each lasts E2EL, so at most c / E2EL
  requests a second (derived; E2EL as stated, else TTFT + (n − 1) × TPOT, docs/definitions.md's TPOT): a static
  batch's exact rate, a wave's upper bound (the wave ends with its slowest request);
- None (unknown, shown as ``–``): nothing above applies.
"""

from __future__ import annotations

import math
from typing import Any

from pipeline.core.pointsummary import throughput_window

#: Where each :func:`request_rate` basis comes from, in words (``show`` and the docs say them).
RATE_BASIS = {
    "stated": "stated by the source",
    "tokens_over_window": "derived: output tok/s ÷ output_len (every request's tokens in a send-to-completion window)",
    "c_over_e2el": "derived: c / E2EL, E2EL as stated, else TTFT + (n − 1) × TPOT (the throughput counts generation "
                   "only, so ÷ output_len would leave each prefill out; a static batch's rate, a wave's upper bound)",
}


def _mid(d: Any) -> float | None:
    """A distribution's median, else its mean (s); None when neither is a finite number."""
    d = d or {}
    v = d.get("p50") if d.get("p50") is not None else d.get("mean")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def request_rate(s: dict[str, Any]) -> tuple[float | None, str | None]:
    """``(requests/s, basis)`` of a point summary (dict) by its throughput's definition (module docstring), or
    ``(None, None)`` when its figures allow none: ``basis`` is a key of :data:`RATE_BASIS`."""
    if s.get("achieved_rate_rps") is not None:
        return s["achieved_rate_rps"], "stated"
    out_tok, n = s.get("output_throughput_tok_s"), s.get("output_len")
    if out_tok is None or not n:
        return None, None
    if (s.get("output_throughput_window") or throughput_window(s)) != "decode_phase":
        return out_tok / n, "tokens_over_window"
    c, e2el = s.get("concurrency"), _mid(s.get("e2el_s"))
    if e2el is None:
        ttft, tpot = _mid(s.get("ttft_s")), _mid(s.get("tpot_s"))
        e2el = ttft + (n - 1) * tpot if ttft is not None and tpot is not None else None
    if not c or e2el is None or e2el <= 0:
        return None, None
    return c / e2el, "c_over_e2el"


def serve_figures(s: dict[str, Any]) -> dict[str, Any]:
    """The figures ``vllm bench serve`` prints beside output throughput, from a point summary (dict).

    - ``request_throughput_rps`` and ``request_throughput_basis``: :func:`request_rate` (None: unknown);
    - ``total_token_throughput_tok_s``: (input_len + output_len) × request throughput (vLLM's
      ``total_token_throughput`` = (input + output tokens) / duration, with every request of the same lengths), on
      the same basis; None where the rate is unknown;
    - ``tails``: ``{"ttft_s", "tpot_s", "itl_s", "itl_chunk_s", "e2el_s"}`` → ``{"p95", "p99_9"}``: the summary's
      ``tails_s`` (:func:`pipeline.core.pointsummary.tails`, over every value of the point: numpy's linear-interpolation
      percentiles, as :func:`pipeline.core.pointsummary.distribution` computes p99); a summary without it: TTFT and TPOT
      of its per-request samples (``samples.ttft_s``, ``samples.tpot_s``), the same percentiles, the others None;
    - ``repeat_spread``: ``{"n", "min", "max", "ratio"}`` of the output throughput over repeats (ratio = max / min).
    """
    import numpy as np

    out_len, in_len = s.get("output_len"), s.get("input_len") or 0
    rps, basis = request_rate(s)
    samples = s.get("samples") or {}
    stored = s.get("tails_s")
    tails = {}
    for k in ("ttft_s", "tpot_s", "itl_s", "itl_chunk_s", "e2el_s"):
        if stored is not None:
            t = stored.get(k.removesuffix("_s")) or {}
            tails[k] = {"p95": t.get("p95"), "p99_9": t.get("p99_9")}
            continue
        xs = [x for x in samples.get(k) or [] if x is not None]
        q95, q999 = (float(v) for v in np.percentile(xs, [95, 99.9])) if xs else (None, None)
        tails[k] = {"p95": q95, "p99_9": q999}
    reps = [x for x in samples.get("output_throughput_tok_s") or [] if x]
    spread = ({"n": len(reps), "min": min(reps), "max": max(reps), "ratio": max(reps) / min(reps)} if reps else None)
    return {"request_throughput_rps": rps, "request_throughput_basis": basis,
            "total_token_throughput_tok_s": (in_len + out_len) * rps if rps is not None and out_len else None,
            "tails": tails, "repeat_spread": spread}
