"""The bandwidth probed before and after a sweep: whether it moved beyond the probe's own noise, and what a move can
explain (pure).

A sweep's two probes run with its own server beside them (its weights resident, its threads parked), so they differ
by more than probes in a row on an idle machine do: three sweeps of one server on a quiet 2-core machine read
+12 %, +10 % and −18 % between their two probes, where six probes in a row agreed within ±3 %.  A drift is judged
against the probes' own repeats: it has moved only beyond both :data:`PROBE_DRIFT_LIMIT` and the spread of either
probe's repeats.  A moved probe makes every figure computed from the bandwidth uncertain (ceilings, roofline, MBU),
always; a measured throughput or latency only when the drift is as large as the change itself (the machine's memory
speed, not the software, could have made it) — the repeats measure those, and points whose repeats disagree are
flagged on their own.
"""

from __future__ import annotations

from typing import Any

#: The probe after the sweep may differ from the probe before it by this share of the latter before the
#: run is flagged; the same 10 % at which ``diff`` stops comparing two runs' bandwidths.
PROBE_DRIFT_LIMIT = 0.10


def probe_drift(meta: dict[str, Any]) -> float | None:
    """after / before − 1 of the probed bandwidth (``run.json`` ``probe_after`` vs ``probe``); None without both."""
    before = (meta.get("probe") or {}).get("bandwidth_gb_s")
    after = (meta.get("probe_after") or {}).get("bandwidth_gb_s")
    if not isinstance(before, (int, float)) or not isinstance(after, (int, float)) or before <= 0:
        return None
    return after / before - 1


def repeat_noise(probe: dict[str, Any] | None) -> float | None:
    """A probe's own repeat noise: max / min − 1 of its bandwidth repeats (``bandwidth_repeats_gb_s``), None with
    fewer than two positive finite repeats (an older or a simulated probe)."""
    xs = [float(x) for x in (probe or {}).get("bandwidth_repeats_gb_s") or []
          if isinstance(x, (int, float)) and 0 < x < float("inf")]
    return max(xs) / min(xs) - 1 if len(xs) >= 2 else None


def drift_limit(meta: dict[str, Any]) -> float:
    """The share the two probes may differ by before the drift counts: the larger of :data:`PROBE_DRIFT_LIMIT` and
    either probe's repeat noise (:func:`repeat_noise`)."""
    noise = [n for n in (repeat_noise(meta.get("probe")), repeat_noise(meta.get("probe_after"))) if n is not None]
    return max([PROBE_DRIFT_LIMIT, *noise])


def probe_moved(meta: dict[str, Any]) -> float | None:
    """The drift (:func:`probe_drift`) when it exceeds :func:`drift_limit`, else None (no second probe, or a drift
    within the probes' own noise)."""
    drift = probe_drift(meta)
    return drift if drift is not None and abs(drift) > drift_limit(meta) else None


def drift_explains(drift: float | None, change: float | None) -> bool:
    """Whether a probe's drift could have made a measured relative ``change`` (a throughput's or a latency's): it is
    as large as the change or larger (|drift| ≥ |change|).  No drift explains nothing; an unknown change is
    explained by any drift."""
    if drift is None:
        return False
    return change is None or abs(drift) >= abs(change) * (1 - 1e-9)  # 40 / 50 − 1 is −0.19999…: as large as −0.2
