"""One point's failures and caveats (pure): which requests failed or did not measure the workload asked for, whether
the point is excluded from the knee, peak and scaling efficiency, and what the sweep prints about it."""

from __future__ import annotations

from typing import Any

from pipeline.config.sweepconfig import EXCLUSION_FAILURE_RATE
from pipeline.core.pointsummary import PointSummary
from pipeline.metrics.clientside import CLIENT_BOUND_ADVICE


#: The caveats that say a point did not measure what it is labelled with, each with the cause it names; above
#: ``max_failure_rate`` of its requests the point is excluded like a failed one.  Requests that stopped before the
#: asked length although the server accepted ``ignore_eos`` (a server ignoring the field: inference-perf PR #746),
#: a server counting another prompt length than the client built (a tokenizer or chat-template mismatch: vLLM PR
#: #42532), an imported output count that is the client's ``max_tokens`` fallback (SGLang PR #36272).
EXCLUDING_CAVEATS = {
    "count_below_max_tokens": lambda s: (f"stopped before the requested {s.output_len} tokens although the server "
                                         "accepted ignore_eos: not the workload asked for"),
    "input_tokens_mismatch": lambda s: (f"were counted by the server at"
                                        f"{f' {s.input_tokens_served:.0f}' if s.input_tokens_served is not None else ' another number of'}"
                                        f" prompt tokens for the {s.input_len} the client built (a tokenizer or "
                                        "chat-template mismatch): not the workload asked for"),
    "output_count_not_measured": lambda s: ("had an output count that is not what was streamed (generated and "
                                            "re-tokenized counts disagree): its throughput was not measured"),
}


def point_quality(s: PointSummary, max_failure_rate: float = EXCLUSION_FAILURE_RATE) -> dict[str, Any]:
    """``{"failure_rate", "caveats", "excluded", "excluded_reason"}`` of one point (module docstring).

    ``caveats`` are the point's caveat names (``failed_requests`` and the token-count flags of
    :mod:`pipeline.loadgen.tokencount`), sorted.  Imported points without a request count give
    a failure rate from ``completed`` and ``failed`` alone; one whose file states no failed count
    (caveat ``failed_count_unknown``) has none.
    """
    total = (s.completed or 0) + (s.failed or 0)
    rate = s.failure_rate if s.failure_rate is not None else (s.failed / total if total else None)
    caveats = set((s.caveats or {}).keys())
    if "failed_count_unknown" in caveats:  # an import whose file states no failed count: unknown, never 0
        rate = None
    if s.failed:
        caveats.add("failed_requests")
    reason = None
    counts = s.caveats or {}
    if total and not s.completed:
        reason = f"no request completed ({s.failed} failed)"
    elif s.completed == 0 and not s.failed:  # an empty record (zero rows): nothing measured, never a result
        reason = "no request recorded (the point's record holds no rows): nothing measured"
    elif rate is not None and rate > max_failure_rate:
        reason = (f"{s.failed} of {total} requests failed ({rate:.0%}, above max_failure_rate "
                  f"{max_failure_rate:.0%}); left out of knee, peak and scaling efficiency")
    elif s.client_bound:  # the client, not the server, was the limit: no server measurement (metrics.clientside)
        reason = f"{s.client_bound_reason}; left out of knee, peak and scaling efficiency"
    else:
        for flag, cause in EXCLUDING_CAVEATS.items():
            n = counts.get(flag, 0)
            if total and n / total > max_failure_rate:
                reason = (f"{n} of {total} requests {cause(s)} ({n / total:.0%}, above max_failure_rate "
                          f"{max_failure_rate:.0%}); left out of knee, peak and scaling efficiency")
                break
    return {"failure_rate": rate, "caveats": sorted(caveats), "excluded": reason is not None, "excluded_reason": reason}


def point_warnings(s: PointSummary, max_failure_rate: float = EXCLUSION_FAILURE_RATE) -> list[str]:
    """What the sweep prints about one measured point's streams, one line each; [] when nothing.

    - requests that stopped before ``max_tokens`` although the server accepted ``ignore_eos`` /
      ``min_tokens`` (``count_below_max_tokens``): the server does not honour them, and the point
      is not of the requested output length (left out of the analysis when widespread,
      :func:`point_quality`);
    - a client-bound point (:func:`pipeline.metrics.clientside.client_bound_reason`): what the client's CPU or lag
      said, and what to do (:data:`pipeline.metrics.clientside.CLIENT_BOUND_ADVICE`);
    - requests whose prompt the server counted differently from the one the client built
      (``input_tokens_mismatch``, :func:`pipeline.loadgen.tokencount.input_mismatch`): a tokenizer
      or chat-template mismatch; the records keep the server's count (left out when widespread);
    - requests whose tokens arrived in bursts (``timed_by_intermediary``,
      :func:`pipeline.loadgen.streamrecord.arrived_in_bursts`): the latencies are a buffer's, not the server's.
    """
    total = (s.completed or 0) + (s.failed or 0)
    caveats = s.caveats or {}
    out = []
    early = caveats.get("count_below_max_tokens", 0)
    if early:
        got = f" (mean {s.output_tokens_served:.0f})" if s.output_tokens_served is not None else ""
        left = "; left out of the analysis" if total and early / total > max_failure_rate else ""
        out.append(f"{early} of {total} requests stopped before the requested {s.output_len} output tokens{got} "
                   f"although the server accepted ignore_eos: it does not honour it{left}")
    if s.client_bound:
        out.append(f"{s.client_bound_reason}: left out of the knee, peak and diff; {CLIENT_BOUND_ADVICE}")
    mism = caveats.get("input_tokens_mismatch", 0)
    if mism:
        got = f" {s.input_tokens_served:.0f}" if s.input_tokens_served is not None else " another number of"
        left = "; left out of the analysis" if total and mism / total > max_failure_rate else ""
        out.append(f"{mism} of {total} requests: the server counted{got} prompt tokens for the {s.input_len} the "
                   f"client built (a tokenizer or chat-template mismatch); check the model's tokenizer{left}")
    burst = caveats.get("timed_by_intermediary", 0)
    if burst:
        out.append(f"{burst} of {total} requests arrived in bursts of many events per read: a buffer between the "
                   "server and the client (a proxy, or a server writing at the end) timed them, so TTFT, TPOT and "
                   "ITL are not the server's")
    return out


def point_reasons(points: list[dict[str, Any]]) -> list[str]:
    """The run's reasons from its points' own records: an imported file's figures that disagree, client-bound points,
    points with an empty record (a run of only empty points is "nothing measured", said by :func:`pipeline.analysis.quality.run_quality`)."""
    reasons: list[str] = []
    bound = [p for p in points if p.get("client_bound")]
    disagree = [p for p in points if (p.get("caveats") or {}).get("figures_disagree")]  # importers.checks.flag_rate
    if disagree:
        reasons.append("an imported file's own figures disagree (a rate against its count and duration, or a time "
                       "no request can take), so its numbers are not all measured: " + ", ".join(
                           f"{p.get('model')} c = {p.get('concurrency')}" for p in disagree))
    if bound:
        reasons.append("the client, not the server, was the limit (client-bound) at "
                       + ", ".join(f"{p.get('model')} c = {p.get('concurrency')}" for p in bound)
                       + ": those points are no server measurement")
    empty = [p for p in points if p.get("completed") == 0 and not p.get("failed")]
    if empty and len(empty) < len(points):  # every point empty: nothing measured, said below
        reasons.append(f"{len(empty)} point(s) recorded no request (an empty record: nothing measured there, left out "
                       "of knee, peak and scaling): " + ", ".join(f"{p.get('model')} c = {p.get('concurrency')}"
                                                                   for p in empty))
    return reasons
