"""Walking one model's open-loop rates: the ``auto`` rates placed from the closed-loop grid (:func:`open_rates`),
each rate measured as a ``poisson``/``constant`` point, and with an ``slo`` and ``open_loop.bisect_steps`` extra
rates bisected between the last rate that met the SLO and the first that did not (:func:`bisect_rate`).

Split out of :mod:`pipeline.sweep.gridwalk`, which calls :func:`rate_walk` after each model's grid.
"""

from __future__ import annotations

from pipeline.core.errors import BatchmarkError
from pipeline.analysis.ratesweep import expected_e2el_s, slo_limit
from pipeline.core.records import PointKey
from pipeline.sweep.point import ModelWalk, SweepState, measure_or_resume


def open_rates(closed: list[tuple[int, float]], output_len: int, n: int, overshoot: float = 1.25) -> list[float]:
    """The ``auto`` rates (requests/s): ``n`` rates evenly spaced from the single-stream request rate to
    ``overshoot`` × the peak request throughput of the closed-loop grid, rounded to 3 significant digits.

    ``closed`` is ``[(concurrency, output tokens/s), ...]``; a closed-loop point serves
    ``tokens/s ÷ output_len`` requests/s (every request generates ``output_len`` tokens).  The low
    end is the rate at the smallest concurrency measured (GuideLLM's synchronous rate), the high end
    past the saturation throughput so the flattening of the achieved rate shows (GuideLLM's sweep
    places its rates between the synchronous and the throughput rate).

    Raises:
        BatchmarkError: no closed-loop point measured a throughput (nothing to place rates by).
    """
    pts = sorted((c, t) for c, t in closed if t and t > 0)
    if not pts:
        raise BatchmarkError("open_loop.rates: auto needs a closed-loop throughput, and no point of the grid measured one")
    low = pts[0][1] / output_len
    high = overshoot * max(t for _, t in pts) / output_len
    if high <= low:
        high = 2 * low
    out = [low + (high - low) * i / (n - 1) for i in range(n)]
    return sorted({float(f"{r:.3g}") for r in out})


def bisect_rate(results: dict[float, bool | None]) -> float | None:
    """The next rate to measure between the highest rate that met the SLO and the first that did not, or None.

    ``results`` maps measured rates to SLO verdicts; the midpoint is rounded to 3 significant digits
    and None is returned when it is already measured (the bracket is as narrow as rounding allows)
    or no bracket exists (every rate passed, or the lowest failed).
    """
    lim = slo_limit(sorted(results.items()))
    if lim["max_ok"] is None or lim["first_failing"] is None:
        return None
    mid = float(f"{(lim['max_ok'] + lim['first_failing']) / 2:.3g}")
    return None if mid in results else mid


def rate_walk(sweep: SweepState, walk: ModelWalk) -> None:
    """Measure one model's open-loop rates (and the SLO bisection), each by the sweep's measuring step
    (:func:`pipeline.sweep.point.measure_or_resume`); a rate that cannot be measured stops the model's rates."""
    cfg, spec, log = sweep.cfg, walk.spec, sweep.log
    ol = cfg.open_loop
    try:
        rates = list(ol.rates) if ol.rates != "auto" else open_rates(walk.curve, cfg.output_len, ol.auto_rates)
    except BatchmarkError as exc:
        # this model's grid measured nothing to place rates by: its reason is recorded and the sweep goes on to
        # the next model; a resume finds it in ``stopped`` and skips it (it stopped the run forever)
        sweep.stop(walk.name, f"open loop not run: {exc}")
        return
    log(f"{walk.name}: open loop ({ol.load}) at {', '.join(f'{r:g}' for r in rates)} requests/s")
    sweep.place_rates(len(rates))
    verdicts: dict[float, bool | None] = {}
    extra = ol.bisect_steps if sweep.slo else 0
    while rates:
        rate = rates.pop(0)
        key = PointKey(spec.name, sweep.backend.serving_engine, cfg.input_len, cfg.output_len, None, ol.load, rate, ol.max_concurrency,
                       variant=sweep.variant)
        sweep.backend.expected_e2el_s = expected_e2el_s(walk.curve, cfg.output_len, rate)  # the window's size (scheduler)
        summ = measure_or_resume(sweep, walk, key)
        if summ is None:
            sweep.skip_rates(len(rates) + 1)
            return
        verdicts[rate] = (summ.slo or {}).get("met")
        if not rates and extra:
            nxt = bisect_rate(verdicts)
            if nxt is not None:
                extra -= 1
                rates.append(nxt)
                sweep.place_rates(1)
                log(f"{walk.name}: SLO bisection at {nxt:g} requests/s")
