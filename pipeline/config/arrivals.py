"""An open-loop schedule's gaps between sends (pure): Poisson, constant, gamma with vLLM's burstiness, or a trace's
own gaps, from one seed.  The one draw the load generator's open loop (:mod:`pipeline.loadgen.scheduler`) and the
simulated server (:mod:`pipeline.simulation.simloop`) share, so a simulated point is sent as a measured one is."""

from __future__ import annotations

import math
from typing import Iterator

import numpy as np


def schedule_gaps(load: str, rate_rps: float, seed: int, burstiness: float | None = None,
                  trace: np.ndarray | None = None) -> Iterator[float]:
    """Endless gaps (s) between successive sends of an open-loop schedule at ``rate_rps`` requests/s.

    ``constant``: every gap is 1 / rate.  ``poisson``: independent exponential gaps of mean
    1 / rate from ``numpy.random.default_rng(seed)`` (a Poisson process; the same seed gives the
    same schedule), as vLLM's ``get_request`` draws them with burstiness 1.  ``gamma``: independent gamma gaps of
    shape k = ``burstiness`` and scale 1 / (rate · k), mean 1 / rate and coefficient of variation 1 / √k (vLLM's
    ``get_request``: ``np.random.gamma(shape=burstiness, scale=1 / (request_rate * burstiness))``).  ``trace``:
    the gaps ``trace`` gives (one round of a trace file's, scaled to the rate:
    :meth:`pipeline.config.tracefile.Trace.gaps_s`), round and round.

    Raises:
        ValueError: ``load`` is not ``poisson``/``constant``/``gamma``/``trace``, the rate is not finite and
            positive, a gamma schedule's burstiness is not, or a trace schedule has no gaps (a bug: config and keys
            check them).
    """
    if not (math.isfinite(rate_rps) and rate_rps > 0):
        raise ValueError(f"rate_rps must be finite and positive, got {rate_rps!r}")
    mean = 1.0 / rate_rps
    if load == "constant":
        while True:
            yield mean
    if load == "trace":
        if trace is None or not len(trace):
            raise ValueError("a trace schedule needs its gaps")
        while True:
            yield from (float(g) for g in trace)
    if load not in ("poisson", "gamma"):
        raise ValueError(f"no open-loop schedule {load!r}")
    if load == "gamma" and not (burstiness is not None and math.isfinite(burstiness) and burstiness > 0):
        raise ValueError(f"a gamma schedule needs a finite positive burstiness, got {burstiness!r}")
    rng = np.random.default_rng(seed)
    while True:
        if load == "gamma":
            yield from (float(g) for g in rng.gamma(burstiness, mean / burstiness, 256))
        else:
            yield from (float(g) for g in rng.exponential(mean, 256))
