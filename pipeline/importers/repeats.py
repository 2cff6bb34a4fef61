"""The repeats of one imported point: grouped by what was configured, joined into one point.

A sweep tool runs one configured point several times (``vllm bench sweep --num-runs``, AIPerf
``--num-profile-runs``); each run measures its own input and output lengths, and two runs of one configuration
can differ by a token (a stop token, a re-tokenized prompt).  Measured lengths are data, not identity: the runs of
one configuration are grouped by that configuration (:func:`configured_key` with the importer's own notion of
"one configuration": a ``vllm bench sweep`` combination folder, AIPerf's ``input_config``), and the joined point's
lengths are the median of its repeats' (:func:`merge_repeats`).
"""

from __future__ import annotations

from statistics import median
from typing import Any

from pipeline.core.lengthstats import joined_lengths
from pipeline.importers.base import summary
from pipeline.core.pointsummary import distribution


def configured_key(pt: Any) -> tuple[Any, ...]:
    """A point's key less its measured lengths: (model, engine, variant, concurrency, load, rate, cap)."""
    k = pt.key
    return (k.model, k.engine, k.variant, k.concurrency, k.load, k.rate_rps, k.max_concurrency)


def _median_len(values: list[int]) -> int:
    """Median of the repeats' lengths (tokens per request), rounded to a whole token (half to even)."""
    return int(round(median(values)))


def merge_repeats(points: list[Any]) -> Any:
    """One point from the results of its repeats (``vllm bench sweep``'s ``run=N.json``, AIPerf's profile runs).

    Output throughput = median over repeats (one sample per repeat, as a measured point keeps them);
    input and output length = median of the repeats' lengths (tokens per request); completed and failed = sums
    (the failure rate unknown when one repeat's is); each latency figure (p50, p90, p99, mean) = median over the
    repeats of that figure; per-user throughput = 1 / that median TPOT p50; the repeats' TTFT and TPOT p50 are kept as
    ``ttft_s_per_repeat`` / ``tpot_s_per_repeat`` (the repeat is the unit of replication).
    """
    first = points[0]
    thr = [p.output_throughput_tok_s for p in points if p.output_throughput_tok_s is not None]

    def med(values: list[float | None]) -> float | None:
        vals = [v for v in values if v is not None]
        return float(median(vals)) if vals else None

    def dist(name: str) -> Any:
        ds = [getattr(p, name) for p in points if getattr(p, name)]
        if not ds:
            return None
        return distribution(**{q: med([d.get(q) for d in ds]) for q in ("p50", "p90", "p99", "mean")})

    tpot = dist("tpot_s")
    completed = sum(p.completed for p in points)
    failed = sum(p.failed for p in points)
    caveats: dict[str, int] = {}
    for p in points:
        for k, v in (p.caveats or {}).items():
            caveats[k] = caveats.get(k, 0) + v
    known = completed + failed and all(p.failure_rate is not None for p in points)
    return summary(first.model, first.engine, _median_len([p.input_len for p in points]),
                   _median_len([p.output_len for p in points]), first.concurrency,
                   variant=first.variant, repeats=len(points), completed=completed, failed=failed, caveats=caveats,
                   failure_rate=failed / (completed + failed) if known else None,
                   output_throughput_tok_s=med(thr), per_user_tok_s=1.0 / tpot["p50"] if tpot and tpot["p50"] else None,
                   ttft_s=dist("ttft_s"), tpot_s=tpot, itl_chunk_s=dist("itl_chunk_s"), e2el_s=dist("e2el_s"),
                   step_time_s=tpot["p50"] if tpot else None,
                   errors=sorted({e for p in points for e in p.errors})[:10],
                   samples={"output_throughput_tok_s": thr,
                            "ttft_s_per_repeat": [p.ttft_s["p50"] for p in points
                                                  if p.ttft_s and p.ttft_s["p50"] is not None],
                            "tpot_s_per_repeat": [p.tpot_s["p50"] for p in points
                                                  if p.tpot_s and p.tpot_s["p50"] is not None]},
                   load=first.load, rate_rps=first.rate_rps, max_concurrency=first.max_concurrency,
                   burstiness=first.burstiness, achieved_rate_rps=med([p.achieved_rate_rps for p in points]),
                   lengths=joined_lengths([p.lengths for p in points]))
