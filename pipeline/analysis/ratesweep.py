"""Open-loop rate sweeps: achieved against offered rate, saturation, and the SLO limit of a sweep (pure).

Points sent at a rate (``poisson``/``constant``) are kept apart from the closed-loop
concurrency grid.  Per workload, :func:`rate_sweep` relates achieved to offered rate: the workload
is *saturated* from the first offered rate whose achieved rate falls more than
:data:`SATURATION_SHORTFALL` below the rate the client really sent at, beyond what draining explains or with the
achieved rate flattened against the rate below it (:func:`flattened`); ``max_achieved_rps`` is the
capacity found.  Under a concurrency cap the client holds requests back until a slot frees, so it sends
only as fast as requests complete and that comparison could never fail: there the achieved rate is held
against the rate of the schedule (``schedule_rate_rps``, the offered rate as drawn), and a cap that keeps
the offered rate from being sustained is saturation.  (Uncapped, a client that falls behind its own schedule
is its own fault, shown by ``schedule_kept``, not the server's: there the sent rate stays the reference.)  With an SLO (``PointSummary.slo``), :func:`slo_limit` gives the highest rate (open
loop) and the highest concurrency (closed loop) up to which every point meets it.
"""

from __future__ import annotations

from typing import Any

from pipeline.core.pointsummary import PointSummary


#: Achieved rate this far below the sent rate marks saturation.  Derived: below saturation
#: achieved = n / ((n − 1) / rate + service time), within 3 % of the rate for n ≥ 30 requests whose
#: service time is under a gap; 10 % leaves room for the tail of a short point.
SATURATION_SHORTFALL = 0.10

#: A rate point is steady when its arrivals lasted at least this many of its median E2EL: shorter, its requests were
#: still draining when the window closed, so its achieved rate and its tail latencies describe the start-up, not
#: the rate.  (Sized windows last five expected E2ELs: :data:`pipeline.loadgen.scheduler.OPEN_LOOP_E2EL_WINDOWS`.)
STEADY_E2EL_WINDOWS = 3.0


def expected_e2el_s(curve: list[tuple[int, float]], output_len: int, rate_rps: float) -> float | None:
    """The E2EL (s) a rate point should expect, from the closed-loop curve ``[(concurrency, output tok/s), ...]``.

    Little's law (in flight = rate × E2EL): at concurrency c the server completes ``tput / output_len`` requests per
    second, each taking ``c × output_len / tput`` seconds; the rate point expects the E2EL of the smallest c that
    completes at least ``rate_rps`` (the largest c measured where none does).  None without a curve.
    """
    pts = sorted((c, t) for c, t in curve if c and t and t > 0)
    if not pts or rate_rps <= 0 or output_len <= 0:
        return None
    c, t = next(((c, t) for c, t in pts if t / output_len >= rate_rps), pts[-1])
    return c * output_len / t


def steadiness(s: PointSummary) -> tuple[bool | None, float | None, float | None]:
    """(steady, arrival window s, median E2EL s) of a rate point (:data:`STEADY_E2EL_WINDOWS`); steady is None
    where the summary lacks the figures (an import without E2EL).  The window is the measured requests of a repeat
    over the rate they were sent at."""
    sent = s.send_rate_rps or s.rate_rps
    e2el = (s.e2el_s or {}).get("p50")
    if not sent or not e2el or not s.repeats or not s.completed:
        return None, None, e2el
    window = (s.completed + (s.failed or 0)) / s.repeats / sent
    return window >= STEADY_E2EL_WINDOWS * e2el, window, e2el


def slo_limit(points: list[tuple[float, bool | None]]) -> dict[str, float | None]:
    """``{"max_ok", "first_failing"}`` over ``[(rate or concurrency, SLO met), ...]``: the highest x up to which
    every point met the SLO, and the first x that did not (None when none / all met); points with
    no verdict (None) are skipped."""
    max_ok = first_fail = None
    for x, met in sorted(points):
        if met is None:
            continue
        if not met:
            first_fail = x
            break
        max_ok = x
    return {"max_ok": max_ok, "first_failing": first_fail}


#: A higher offered rate whose achieved rate rose by less than this share of the offered rate's rise has flattened.
#: Derived: below saturation achieved = rate × W / (W + E2EL) (draining), and windows of at least five expected
#: E2ELs keep W / (W + E2EL) within 0.83–1 from point to point, so doubling the rate raises the achieved rate by at
#: least 0.83 × 2 − 1 = 66 % of the rise; a saturated server's stays flat (0 %).  Half lies between.
FLATTENING_SHARE = 0.5


def flattened(prev: PointSummary | None, s: PointSummary) -> bool:
    """Whether ``s``'s achieved rate flattened against the lower rate point ``prev``'s: it rose by less than
    :data:`FLATTENING_SHARE` of the offered rate's rise, (a − a₀) / a₀ < share × (r − r₀) / r₀.  Saturation seen
    across rates, which draining cannot explain: a saturated server's E2EL is its queue, so the draining allowance
    of a point alone (W / (W + E2EL)) grows with the very queue it should call."""
    if prev is None or not prev.achieved_rate_rps or not s.achieved_rate_rps or s.rate_rps <= prev.rate_rps:
        return False
    rise = (s.rate_rps - prev.rate_rps) / prev.rate_rps
    return (s.achieved_rate_rps - prev.achieved_rate_rps) / prev.achieved_rate_rps < FLATTENING_SHARE * rise


def rate_sweep(summaries: list[PointSummary]) -> dict[str, Any] | None:
    """The open-loop view of one workload's rate points (one load pattern and cap), or None without any.

    Returns ``{"load", "max_concurrency", "points": [{"rate_rps", "send_rate_rps",
    "achieved_rate_rps", "ttft_p99_s", "tpot_p99_s", "e2el_p99_s", "goodput_rps", "slo_met",
    "schedule_kept", "saturated", "steady", "window_s", "e2el_p50_s"}], "saturation_rate_rps": first saturated
    offered rate or None, 
    "max_achieved_rps", "slo": slo_limit over rates or None, "unsteady_rates": [offered rates not steady]}``.

    A point that is not steady (:func:`steadiness`) and whose shortfall draining explains is neither saturated nor
    SLO-met (both None, listed in ``unsteady_rates``); a saturated point never meets the SLO, so the SLO limit
    always lies below the saturation rate.
    """
    pts = sorted((s for s in summaries if s.load != "closed" and s.rate_rps), key=lambda s: s.rate_rps)
    if not pts:
        return None
    rows, saturation, prev = [], None, None
    for s in pts:
        sent = s.send_rate_rps or s.rate_rps
        ref = (s.schedule_rate_rps or sent) if s.max_concurrency else sent  # summaries before it: the sent rate
        steady, window, e2el = steadiness(s)
        # draining alone achieves W / (W + E2EL) of the rate (SATURATION_SHORTFALL's derivation): only a shortfall
        # beyond it is saturation; a point that is not steady and shows no more is marked, never called either way
        drained = ref * window / (window + e2el) if window and e2el else ref
        short = s.achieved_rate_rps is not None and s.achieved_rate_rps < (1 - SATURATION_SHORTFALL) * ref
        sat = short and (s.achieved_rate_rps < (1 - SATURATION_SHORTFALL) * drained or flattened(prev, s))
        prev = s if s.achieved_rate_rps else prev
        unsteady = steady is False and not sat
        if sat and saturation is None:
            saturation = s.rate_rps
        met = (s.slo or {}).get("met")
        p99 = lambda d: (d or {}).get("p99")  # noqa: E731
        rows.append({"rate_rps": s.rate_rps, "send_rate_rps": s.send_rate_rps, "achieved_rate_rps": s.achieved_rate_rps,
                     "ttft_p99_s": p99(s.ttft_s), "tpot_p99_s": p99(s.tpot_s), "e2el_p99_s": p99(s.e2el_s),
                     "goodput_rps": (s.slo or {}).get("goodput_rps"),
                     # a saturated server's queue grows without bound: it holds no SLO at that rate
                     "slo_met": None if unsteady or met is None else (met and not sat),
                     "schedule_kept": s.schedule_kept, "saturated": None if unsteady else sat,
                     "steady": steady, "window_s": window, "e2el_p50_s": e2el})
    achieved = [r["achieved_rate_rps"] for r in rows if r["achieved_rate_rps"] is not None]
    has_slo = any(s.slo for s in pts)
    return {"load": pts[0].load, "max_concurrency": pts[0].max_concurrency, "points": rows,
            "saturation_rate_rps": saturation, "max_achieved_rps": max(achieved) if achieved else None,
            "slo": slo_limit([(r["rate_rps"], r["slo_met"]) for r in rows]) if has_slo else None,
            "unsteady_rates": [r["rate_rps"] for r in rows if r["steady"] is False and r["saturated"] is None]}
