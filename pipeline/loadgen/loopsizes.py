"""How many requests a served repeat sends: the closed loop's default count and the open loop's, sized from the
expected E2EL (pure arithmetic; :mod:`pipeline.loadgen.scheduler` sends them and re-exports these names)."""

from __future__ import annotations

import math

from pipeline.config.options import MAX_REQUESTS_PER_REPEAT, OPEN_LOOP_MIN_SECONDS


def default_requests(concurrency: int, per_slot: int = 4, minimum: int = 32) -> int:
    """Measured requests per repeat by default: ``max(per_slot·N, minimum)`` (``max(4·N, 32)``)."""
    return max(per_slot * concurrency, minimum)


#: Seconds of arrivals an open-loop repeat measures by default.
OPEN_LOOP_SECONDS = OPEN_LOOP_MIN_SECONDS


def default_open_requests(rate_rps: float, minimum: int = 32, seconds: float = OPEN_LOOP_SECONDS) -> int:
    """Measured requests per open-loop repeat by default: ``max(⌈seconds · rate⌉, minimum)`` (ten seconds of arrivals).

    Derived: a rate estimated from n Poisson arrivals has a relative standard error of 1 / √n,
    so 32 requests give ±18 % and 100 give ±10 %; ten seconds of arrivals keep a slow point short
    and give a fast one hundreds of samples for its p99.
    """
    return max(math.ceil(seconds * rate_rps), minimum)


#: An open-loop repeat's arrivals last this many expected E2ELs (at least :data:`OPEN_LOOP_SECONDS`, at most
#: :data:`OPEN_LOOP_MAX_SECONDS`).  Derived: an unsaturated server completes n arrivals of a window W in W + E2EL, so
#: its achieved rate is W / (W + E2EL) of the offered one, 0.83 at five E2ELs; the saturation test allows for exactly
#: that (:func:`pipeline.analysis.ratesweep.rate_sweep`) and the steady-state check asks for three
#: (:data:`pipeline.analysis.ratesweep.STEADY_E2EL_WINDOWS`).  A gpt-oss-20b point with 10 s of arrivals and an
#: E2EL of 8–22 s achieved a third to a half of its rate by draining alone, and was called saturated.
OPEN_LOOP_E2EL_WINDOWS = 5.0
#: The longest window of arrivals a repeat is given (s): a rate past saturation expects the E2EL of the largest
#: concurrency, which can be minutes; its point is saturated whatever its length.
OPEN_LOOP_MAX_SECONDS = 120.0


def open_loop_counts(rate_rps: float, minimum: int, expected_e2el_s: float | None = None, warmup: bool = True,
                     requests: int | None = None) -> tuple[int, int]:
    """(warm-up, measured) requests of one open-loop repeat, sized from the expected E2EL (s).

    Measured: ``requests`` where the config fixes them, else ``max(⌈rate · W⌉, minimum)`` with the window
    ``W = min(OPEN_LOOP_MAX_SECONDS, max(OPEN_LOOP_SECONDS, OPEN_LOOP_E2EL_WINDOWS × E2EL))``; warm-up: the arrivals of one E2EL (at least one
    second), which bring the server to its steady occupancy (Little's law: in flight = rate × E2EL), at most the
    measured count; both together at most :data:`pipeline.config.options.MAX_REQUESTS_PER_REPEAT` (warm-up at most
    half of it).  Without an expected E2EL: ten seconds and one second, as before.
    """
    e2el = expected_e2el_s if expected_e2el_s and math.isfinite(expected_e2el_s) and expected_e2el_s > 0 else 0.0
    window_s = min(OPEN_LOOP_MAX_SECONDS, max(OPEN_LOOP_SECONDS, OPEN_LOOP_E2EL_WINDOWS * e2el))
    n_meas = requests or default_open_requests(rate_rps, minimum, window_s)
    n_warm = min(max(math.ceil(rate_rps * max(1.0, e2el)), 1), n_meas) if warmup else 0
    # a long window at a fast rate (or rates: auto past what the config may state) is bounded: one client's memory
    n_warm = min(n_warm, MAX_REQUESTS_PER_REPEAT // 2)
    return n_warm, min(n_meas, MAX_REQUESTS_PER_REPEAT - n_warm)
