"""Walking one model's open-loop rates: the ``auto`` rates placed from the closed-loop grid (:func:`open_rates`),
each rate measured as a ``poisson``/``constant`` point, and with an ``slo`` and ``open_loop.bisect_steps`` extra
rates bisected between the last rate that met the SLO and the first that did not (:func:`bisect_rate`).

Split out of :mod:`pipeline.sweep.gridwalk`, which calls :func:`rate_sweep` after each model's grid.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from pipeline.store import pointfiles, runs
from pipeline.config.sweepconfig import SweepConfig
from pipeline.core.errors import BatchmarkError
from pipeline.metrics.summarize import summarize_point
from pipeline.analysis.ratesweep import expected_e2el_s, slo_limit
from pipeline.core.records import PointKey
from pipeline.sweep.point import count_point, load_model, measure_point


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
    from pipeline.core.errors import BatchmarkError

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


def rate_sweep(cfg: SweepConfig, spec, engine, run_dir: Path, curve: list[tuple[int, float]], loaded: bool,
                stops: dict[str, str], failures: dict[str, int], log: Callable[[str], None]) -> bool:
    """Measure one model's open-loop rates (and the SLO bisection); returns whether the model is loaded."""
    ol = cfg.open_loop
    slo = cfg.slo.model_dump() if cfg.slo else None
    try:
        rates = list(ol.rates) if ol.rates != "auto" else open_rates(curve, cfg.output_len, ol.auto_rates)
    except BatchmarkError as exc:
        # this model's grid measured nothing to place rates by: its reason is recorded and the sweep goes on to
        # the next model; a resume finds it in ``stopped`` and skips it (it stopped the run forever)
        stops[spec.name] = f"open loop not run: {exc}"
        return loaded
    log(f"{spec.name}: open loop ({ol.load}) at {', '.join(f'{r:g}' for r in rates)} requests/s")
    verdicts: dict[float, bool | None] = {}
    extra = ol.bisect_steps if slo else 0
    while rates:
        rate = rates.pop(0)
        key = PointKey(spec.name, cfg.engine, cfg.input_len, cfg.output_len, None, ol.load, rate, ol.max_concurrency)
        if runs.has_point(run_dir, key):
            summ = summarize_point(pointfiles.load_point(pointfiles.point_path(run_dir, key)), slo)
        else:
            if not loaded:
                loaded = load_model(engine, spec, run_dir)
            ok, why = engine.fits(key)
            if not ok:
                stops[spec.name] = f"{key.label()} not run: {why}"
                return loaded
            engine.expected_e2el_s = expected_e2el_s(curve, cfg.output_len, rate)  # the window's size (scheduler)
            records = measure_point(cfg, engine, key)
            runs.write_point(run_dir, records)
            summ = summarize_point(records, slo)
        count_point(summ, failures, cfg, f"{spec.name} {key.label()}", log)
        verdicts[rate] = (summ.slo or {}).get("met")
        if not rates and extra:
            nxt = bisect_rate(verdicts)
            if nxt is not None:
                extra -= 1
                rates.append(nxt)
                log(f"{spec.name}: SLO bisection at {nxt:g} requests/s")
    return loaded
