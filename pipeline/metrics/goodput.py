"""SLO attainment and goodput of a point (:func:`slo_goodput`, after vLLM's ``--goodput`` in
``vllm/benchmarks/serve.py``).  The SLO (:class:`pipeline.config.options.SLO`) has two kinds of limit:
a request is good when it finished and each of its TTFT, TPOT and E2EL is at most its per-request
goodput limit (``goodput_ttft_ms`` …; a request with fewer than 2 tokens has TPOT 0, as vLLM
counts it); goodput = good requests / duration (requests/s) and their output tokens /
duration (tokens/s), the duration being the sum of the repeats' vLLM durations
(:func:`pipeline.metrics.definitions.repeat_duration_s`).  A point meets the SLO when the p99 of each
bounded latency over its finished requests is within its p99 bound (``ttft_p99_max_ms`` …) and at
most 1 % of its measured requests failed (a failed request counts as an infinitely slow one, so
more than 1 % of them put the p99 itself out of reach).  :func:`slo_goodput_arrays` is the same over a point's arrays (what
:func:`pipeline.metrics.summarize.summarize_point` calls).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pipeline.core.arrays import PointArrays
from pipeline.core.records import PointRecords, RepeatRecord, RequestRecord
from pipeline.metrics.definitions import e2el_s, repeat_duration_s, tpot_s, ttft_s

#: Share of failed requests above which a point's p99 cannot meet an SLO (failed = infinitely slow).
SLO_MAX_FAILED = 0.01
#: The latencies an SLO limits (as :data:`pipeline.config.options.SLO_METRICS`).
METRICS = ("ttft", "tpot", "e2el")


def _limits(slo: dict[str, float | None]) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """(per-request goodput limits, p99 bounds) of an SLO mapping, ms by metric (None = not checked)."""
    return ({m: slo.get(f"goodput_{m}_ms") for m in METRICS}, {m: slo.get(f"{m}_p99_max_ms") for m in METRICS})


def _echo(limits: dict[str, float | None], bounds: dict[str, float | None]) -> dict[str, float | None]:
    """The SLO's figures as a point's ``slo`` repeats them: ``goodput_<m>_ms`` and ``<m>_p99_max_ms``."""
    return {**{f"goodput_{m}_ms": v for m, v in limits.items()}, **{f"{m}_p99_max_ms": v for m, v in bounds.items()}}


def goodput_duration_s(rep: RepeatRecord) -> float:
    """The time goodput divides by for one repeat (s): vLLM's duration
    (:func:`pipeline.metrics.definitions.repeat_duration_s`) for a served repeat, the measured window for a static batch;
    0 when empty."""
    if rep.batching == "static_batch":
        return max(rep.window_end_s - rep.window_start_s, 0.0)
    return repeat_duration_s(rep) or 0.0


def slo_goodput(records: PointRecords, slo: dict[str, float | None]) -> dict[str, Any]:
    """SLO attainment and goodput of one point.

    Args:
        records: the point's records (warm-up requests are left out).
        slo: ``{"goodput_ttft_ms", "goodput_tpot_ms", "goodput_e2el_ms"}`` (per-request limits) and
            ``{"ttft_p99_max_ms", "tpot_p99_max_ms", "e2el_p99_max_ms"}`` (p99 bounds), each in ms or None
            (not checked).

    Returns:
        ``{the six figures of the SLO, "good": requests within every goodput limit, "measured": measured
        requests, "share_ok": good / measured, "goodput_rps": good / Σ durations (requests/s,
        :func:`goodput_duration_s`), "goodput_tok_s": their output tokens / Σ durations (tokens/s),
        "p99_ok": {metric: p99 within its bound}, "met": every bounded p99 within its bound and at most
        1 % failed}``; shares and rates are None when nothing was measured.  Source: vLLM's
        goodput (``vllm/benchmarks/serve.py``, ``calculate_metrics``: a request is good when
        every given latency is ≤ its limit; request goodput = good / duration).
    """
    limits, bounds = _limits(slo)
    measured = [r for rep in records.repeats for r in rep.requests if not r.warmup]
    ok = [r for r in measured if r.ok]

    def lat(r: RequestRecord) -> dict[str, float]:
        return {"ttft": ttft_s(r), "tpot": tpot_s(r) or 0.0, "e2el": e2el_s(r)}

    good = [r for r in ok if all(v is None or lat(r)[m] <= v / 1000.0 for m, v in limits.items())]
    span = sum(goodput_duration_s(rep) for rep in records.repeats)
    p99_ok: dict[str, bool] = {}
    for m, v in bounds.items():
        if v is not None:
            vals = [lat(r)[m] for r in ok]
            p99_ok[m] = bool(vals) and float(np.percentile(vals, 99)) <= v / 1000.0
    failed_share = (len(measured) - len(ok)) / len(measured) if measured else None
    return {**_echo(limits, bounds), "good": len(good), "measured": len(measured),
            "share_ok": len(good) / len(measured) if measured else None,
            "goodput_rps": len(good) / span if span > 0 else None,
            "goodput_tok_s": sum(r.output_tokens for r in good) / span if span > 0 else None,
            "p99_ok": p99_ok,
            "met": bool(measured) and failed_share is not None and failed_share <= SLO_MAX_FAILED and all(p99_ok.values())}


def slo_goodput_arrays(arrays: PointArrays, slo: dict[str, float | None], measured: np.ndarray, ok: np.ndarray,
                        tpot: np.ndarray, durations: list[float]) -> dict[str, Any]:
    """:func:`slo_goodput` over arrays (same formulas)."""
    a = arrays.requests
    limits, bounds = _limits(slo)
    lat = {"ttft": a.first_token_s - a.sent_s, "tpot": np.where(np.isnan(tpot), 0.0, tpot), "e2el": a.done_s - a.sent_s}
    good = ok.copy()
    for m, v in limits.items():
        if v is not None:
            good &= lat[m] <= v / 1000.0
    n_measured, n_ok, n_good = int(np.count_nonzero(measured)), int(np.count_nonzero(ok)), int(np.count_nonzero(good))
    span = sum(durations)  # goodput_duration_s of each repeat
    p99_ok: dict[str, bool] = {}
    for m, v in bounds.items():
        if v is not None:
            vals = lat[m][ok]
            p99_ok[m] = bool(vals.size) and float(np.percentile(vals, 99)) <= v / 1000.0
    failed_share = (n_measured - n_ok) / n_measured if n_measured else None
    return {**_echo(limits, bounds), "good": n_good, "measured": n_measured,
            "share_ok": n_good / n_measured if n_measured else None,
            "goodput_rps": n_good / span if span > 0 else None,
            "goodput_tok_s": int(a.output_tokens[good].sum()) / span if span > 0 else None,
            "p99_ok": p99_ok,
            "met": bool(n_measured) and failed_share is not None and failed_share <= SLO_MAX_FAILED and all(p99_ok.values())}
