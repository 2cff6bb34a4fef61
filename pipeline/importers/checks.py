"""What an imported point must satisfy before it is stored: figures in range, its concurrency measured, one row per point.

Checked at the boundary, once parsed: every number of every point
(:func:`check_ranges`); enough completed requests and few enough failed ones
(:func:`check_completion`, :data:`REFUSAL_FAILURE_RATE`); no two rows for one point (:func:`check_unique`); a stated
rate that its own count and duration contradict (:func:`rate_disagreement`); figures that contradict each other,
like compared with like (:func:`flag_impossible_rate`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pipeline.config.sweepconfig import EXCLUSION_FAILURE_RATE
from pipeline.core.errors import BatchmarkError
from pipeline.importers.parsing import fail, is_unicode_text
from pipeline.core.pointsummary import PointSummary
from pipeline.core.records import PointKey


#: Largest fraction of a point's requests that may have failed for it to be imported as a
#: measurement (failed / (completed + failed)).  Above it the point is refused, naming the
#: counts; ``batchmark import --max-failure-rate`` changes it for one import.  The analysis's
#: exclusion default (:data:`pipeline.config.sweepconfig.EXCLUSION_FAILURE_RATE`): an import never holds a point
#: the analysis would leave out.
REFUSAL_FAILURE_RATE = EXCLUSION_FAILURE_RATE


#: Largest figure an imported point may hold (tokens, tokens/s, requests, seconds): 10^15.  No
#: benchmark measures more; a larger one is a corrupt or hostile file.
MAX_IMPORTED_VALUE = 1e15
#: Count and length fields of a point: whole numbers ≥ 0 (``concurrency`` ≥ 1 where given).
_COUNT_FIELDS = ("input_len", "output_len", "concurrency", "repeats", "completed", "failed")
#: Figures of a point that are ≥ 0: throughputs (tokens/s), rates (requests/s), times (s).
_FIGURE_FIELDS = ("output_throughput_tok_s", "per_user_tok_s", "prefill_throughput_tok_s", "step_time_s",
                  "rate_rps", "achieved_rate_rps", "send_rate_rps", "burstiness", "failure_rate")
_DISTRIBUTION_FIELDS = ("ttft_s", "ttft_with_queue_s", "tpot_s", "itl_s", "e2el_s", "time_to_first_content_s")


def _out_of_range(v: Any, whole: bool) -> str | None:
    """Why ``v`` is not an imported figure (None when it is one): not a number, not finite, negative, too large."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"{v!r} is not a number"
    if isinstance(v, float) and not math.isfinite(v):
        return f"{v} is not a finite number"
    if v < 0:
        return f"{v:g} is negative"
    if v > MAX_IMPORTED_VALUE:
        return f"{v:.3g} is out of range (above {MAX_IMPORTED_VALUE:g})"
    if whole and isinstance(v, float) and not v.is_integer():
        return f"{v:g} is not a whole number"
    return None


def check_ranges(path: str | Path, summaries: list[PointSummary]) -> None:
    """Every number of every imported point range-checked at the boundary.

    Counts and lengths are whole numbers ≥ 0 (concurrency ≥ 1 where given), throughputs, rates,
    times and every latency percentile finite, ≥ 0 and at most :data:`MAX_IMPORTED_VALUE`; the
    samples kept for diffs too.  A negative TTFT or ``failed: -100`` was once stored and shown
    as "peak −52.8 tok/s" and "-100 of -68 requests failed (147 %)".

    Raises:
        BatchmarkError: one line naming the file, the point and the field.
    """
    for s in summaries:
        for what, name in (("model", s.model), ("engine", s.engine)):
            if not is_unicode_text(name):
                raise fail(path, f"{what} name {name!r}", "not Unicode text (a lone surrogate)")
        where = f"point ({s.model}, {s.key.label()})"
        checks: list[tuple[str, Any, bool]] = [(f, getattr(s, f), True) for f in _COUNT_FIELDS]
        for f in _DISTRIBUTION_FIELDS:  # before the figures derived from them (per-user = 1 / median TPOT)
            checks += [(f"{f}.{k}", v, False) for k, v in (getattr(s, f, None) or {}).items()]
        checks += [(f, getattr(s, f, None), False) for f in _FIGURE_FIELDS]
        for name, values in (s.samples or {}).items():
            checks += [(f"samples.{name}[{i}]", v, False) for i, v in enumerate(values)]
        for name, value, whole in checks:
            if value is None:
                continue
            why = _out_of_range(value, whole)
            if why is None and name == "concurrency" and value < 1:
                why = f"{value} is not a positive concurrency"
            if why is not None:
                raise fail(path, f"{where} field {name}", why)


def check_completion(path: str | Path, where: str, completed: int, failed: int, concurrency: int,
                     max_failure_rate: float = REFUSAL_FAILURE_RATE, total: int | None = None) -> None:
    """Refuse a point that did not measure its concurrency: too few completed requests, or too many failures.

    A closed-loop point at concurrency c measures c requests in flight only when at least c
    requests completed; failure rate = failed / (completed + failed), or (total − completed) /
    total where the source states a total.  The message names the counts.

    Raises:
        BatchmarkError: completed < concurrency, or failure rate > ``max_failure_rate``.
    """
    for name, n in (("completed", completed), ("failed", failed), ("total", total)):
        if n is not None and n < 0:
            raise fail(path, where, f"{name} count {n} is negative")
    if total is not None and total > completed + failed:
        failed = total - completed
    attempted = completed + failed
    rate = failed / attempted if attempted else 1.0
    if completed < 1:
        raise fail(path, where, f"no request completed ({failed} failed); nothing was measured")
    if completed < concurrency:
        raise fail(path, where, f"only {completed} request(s) completed ({failed} failed) at concurrency {concurrency}; "
                                "a closed-loop point needs at least as many completed requests as its concurrency")
    if rate > max_failure_rate:
        raise fail(path, where, f"{failed} of {attempted} requests failed ({rate:.0%}, above the "
                                f"{max_failure_rate:.0%} limit); not a measurement of the server "
                                "(--max-failure-rate raises the limit)")


def refuse_open_loop(path: str | Path, where: str, rate: float, cap: int | None) -> BatchmarkError:
    """The one-line refusal of an open-loop (rate-limited) result."""
    capped = f" capped at {cap} in flight" if cap else ""
    return fail(path, where, f"open loop at {rate:g} req/s{capped}; its throughput is set by the request rate, not "
                             "the server; batchmark imports closed-loop runs (a fixed number of requests in flight)")


def check_unique(path: str | Path, summaries: list[PointSummary]) -> None:
    """Refuse two rows for the same point (its :class:`~pipeline.core.records.PointKey`)."""
    seen: set[PointKey] = set()
    for s in summaries:
        if s.key in seen:
            raise fail(path, None, f"two results for the same point ({s.model}, {s.engine}, in {s.input_len}, "
                                   f"out {s.output_len}, {s.key.label()})")
        seen.add(s.key)


#: Relative slack of :func:`rate_disagreement` (2 %), beyond the rounding of a printed duration.
RATE_SLACK = 0.02
#: The caveat of a point whose file's own figures disagree (:func:`flag_rate`); the run's verdict is then flagged.
FIGURES_DISAGREE = "figures_disagree"


def rate_disagreement(stated: Any, count: Any, count_field: str, duration_s: Any, duration_field: str, unit: str,
                      printed_step_s: float = 0.005) -> str | None:
    """Why a stated rate is not its own file's count / duration (None when it is, or a figure is missing).

    Every peer defines its throughput as count / duration over the same window (vLLM ``serve.py``: ``output_throughput
    = sum(actual_output_lens) / dur_s``; SGLang ``bench_serving.py`` alike; AIPerf ``output_token_throughput`` = total
    output sequence length / benchmark duration), so a file stating all three must agree: ``stated`` within
    :data:`RATE_SLACK` of ``count`` / ``duration_s``, the duration taken as printed to ``printed_step_s`` (a printed
    block's two decimals).  Nothing is checked where a figure is missing, not a finite number, or the duration is not
    positive.
    """
    figures = (stated, count, duration_s)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in figures):
        return None
    if duration_s <= 0 or count < 0 or stated < 0:  # a negative figure is check_ranges' to refuse
        return None
    lo = count / (duration_s + printed_step_s) * (1 - RATE_SLACK)
    hi = count / max(duration_s - printed_step_s, duration_s / 2) * (1 + RATE_SLACK)
    if lo <= stated <= hi:
        return None
    return (f"{stated:g} {unit}, but {count_field} {count:g} in {duration_field} {duration_s:g} s is "
            f"{count / duration_s:.4g} {unit}: the file's own figures disagree")


def flag_rate(path: str | Path, field: str, why: str | None, stated: float, caveats: dict[str, int],
              errors: list[str], requests: int) -> None:
    """Act on :func:`rate_disagreement`: a stated 0 beside a positive count is refused (an output throughput of 0
    beside 256 tokens in 2.08 s is no measured 0); any other disagreement is kept with the caveat
    :data:`FIGURES_DISAGREE` over the point's ``requests`` and the reason (naming ``field``) in its errors, which
    flags the run (:func:`pipeline.analysis.quality.run_quality`).

    Raises:
        BatchmarkError: the stated rate is 0 (naming the file and ``field``).
    """
    if why is None:
        return
    if stated == 0:
        raise fail(path, f"field {field}", f"{why}; not imported (edited or corrupt)")
    caveats[FIGURES_DISAGREE] = requests
    errors.append(f"{field}: {why}")


#: Slack of :func:`flag_impossible_rate` (5 %): stated figures rounded to two decimals stay within it.
LATENCY_SLACK = 0.05
#: Half the last printed digit of a figure printed to two decimals (tok/s, req/s).
PRINTED_HALF_STEP = 0.005


def _mid(d: Any) -> float | None:
    """A distribution's median where stated, else its mean; None when neither is a finite number."""
    d = d or {}
    v = d.get("p50") if d.get("p50") is not None else d.get("mean")
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def generation_rate_disagreement(pt: PointSummary, what: str, per_request: str) -> str | None:
    """Why a generation-window throughput is not what its own per-request generation rate allows (None when it is,
    or a figure is missing).

    Derived from llama-benchy's definitions (``results.py`` ``_process_batch``): a request generates at
    r = (n − 1) / (end − first token) (``t/s (req)``, their mean r̄), the wave at Σ (n − 1) / (last token − first
    first token) (``t/s (total)``), a window that holds every request's generation, so the total is at most
    Σ r = c × r̄; at c = 1 both are the one request's rate (llama-benchy prints ``t/s (req)`` = ``t/s (total)``).  A
    static batch alike (S_TG = B / step, per user 1 / step).  Beyond :data:`LATENCY_SLACK` and the printed rounding
    (:data:`PRINTED_HALF_STEP`) the file's own figures disagree.  No lower bound at c > 1: staggered prefills can
    spread the wave's window far beyond any request's own.
    """
    tput, req, c = pt.output_throughput_tok_s, pt.per_user_tok_s, pt.concurrency
    if None in (tput, req, c) or c < 1:
        return None
    hi = (c * (req + PRINTED_HALF_STEP)) * (1 + LATENCY_SLACK) + PRINTED_HALF_STEP
    lo = (req - PRINTED_HALF_STEP) * (1 - LATENCY_SLACK) - PRINTED_HALF_STEP if c == 1 else -math.inf
    if lo <= tput <= hi:
        return None
    if tput > hi:
        return (f"{what} {tput:g} tok/s is above c = {c} × {per_request} {req:g} = {c * req:.4g} tok/s: {c} request(s) "
                "each generating at that rate cannot generate more together over a window that holds all their "
                "generation; the file's own figures disagree")
    return (f"{what} {tput:g} tok/s differs from {per_request} {req:g} tok/s at c = 1, where both are the one "
            "request's generation rate; the file's own figures disagree")


def request_rate_disagreement(pt: PointSummary, what: str) -> str | None:
    """Why a whole-request rate is more than the point's own latencies allow (None when it is not, or a figure is
    missing): its stated ``achieved_rate_rps``, else its output throughput T over n tokens per request, T / n (a
    send-to-completion window, where every request's tokens count).

    Derived: a request cannot finish sooner than TTFT + (n − 1) × TPOT after it was sent (docs/definitions.md: TPOT
    = (E2EL − TTFT) / (n − 1)), so c in flight finish at most c / (TTFT + (n − 1) × TPOT) per second; above that
    by more than :data:`LATENCY_SLACK` the file's figures disagree.  Medians where stated, else means.
    """
    ttft, tpot, tput, c, n = _mid(pt.ttft_s), _mid(pt.tpot_s), pt.output_throughput_tok_s, pt.concurrency, pt.output_len
    stated = pt.achieved_rate_rps
    if None in (ttft, tpot, c) or (stated is None and tput is None) or n < 1 or ttft < 0 or tpot < 0:
        return None
    e2el_s = ttft + (n - 1) * tpot
    if e2el_s <= 0:
        return None
    bound, implied = c / e2el_s, stated if stated is not None else tput / n
    if implied <= bound * (1 + LATENCY_SLACK):
        return None
    said = f"{implied:g} req/s" if stated is not None else f"{what} {tput:g} tok/s over {n} tokens per request is {implied:.3g} req/s"
    return (f"{said}, but each request takes at least TTFT {ttft:.4g} s + {n - 1} × TPOT {tpot:.4g} s = "
            f"{e2el_s:.4g} s: at c = {c} at most {bound:.3g} req/s; the file's own figures disagree")


def flag_impossible_rate(pt: PointSummary, what: str, per_request: str = "per-user tok/s") -> None:
    """Flag a closed-loop point whose figures contradict each other, like compared with like: a generation-window
    throughput (``output_throughput_window`` ``decode_phase``: llama-benchy's ``t/s (total)``, a static batch's
    S_TG) against its per-request generation rate (:func:`generation_rate_disagreement`; ``per_request``: that
    rate's name in the file), never against the whole requests' time it leaves out; a whole-request rate against its
    latencies (:func:`request_rate_disagreement`).  A disagreement adds the caveat :data:`FIGURES_DISAGREE` over the
    point's requests and the arithmetic (``what``: the throughput's name in the file) to its errors, which flags the
    run (:func:`pipeline.analysis.quality.run_quality`).
    """
    why = (generation_rate_disagreement(pt, what, per_request) if pt.output_throughput_window == "decode_phase"
           else request_rate_disagreement(pt, what))
    if why is None:
        return
    pt.caveats = {**(pt.caveats or {}), FIGURES_DISAGREE: pt.completed or pt.concurrency}
    pt.errors = [*pt.errors, why]
