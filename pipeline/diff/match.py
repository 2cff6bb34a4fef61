"""Run vs run, which points pair: closed-loop points by their whole key, open-loop points by their place in the rate sweep (pure)."""

from __future__ import annotations

from typing import Any

from pipeline.core.errors import BatchmarkError
from pipeline.core.pointsummary import PointSummary
from pipeline.core.records import DEFAULT_VARIANT, PointKey

#: Open-loop points of sweeps with different rate counts match when their offered rates, as fractions of their
#: sweep's highest rate, are within this of each other (absolute, on the 0–1 fraction).
RATE_FRACTION_TOLERANCE = 0.05


def _sweep_group(k: PointKey) -> tuple[Any, ...]:
    """An open-loop point's rate sweep: workload, load pattern and cap (the rate left out)."""
    return (*k.workload, k.load, k.max_concurrency)


def match_open_loop(keys_a: list[PointKey], keys_b: list[PointKey]) -> list[tuple[PointKey, PointKey]]:
    """Open-loop points of A and B matched by their place in the rate sweep, not by the float rate.

    ``rates: auto`` places rates from each run's own measured peak, so two runs of one config share no rate
    (matched by rate alone, they were never compared).  Within one sweep (workload, load pattern, cap): a rate both runs measured pairs with
    itself; of the others, when both runs have the same number left, the i-th lowest rate of A matches the
    i-th lowest of B (rank); otherwise a rate matches the rate
    of the other run whose fraction of its sweep's highest rate (the rate sweep's top, a proxy for the measured
    saturation rate) is nearest, within ``RATE_FRACTION_TOLERANCE``, each point used once.

    Args:
        keys_a / keys_b: the open-loop point keys of each run (closed-loop keys are ignored).

    Returns:
        ``[(key in A, key in B)]`` in sweep order of B.
    """
    groups: dict[tuple[Any, ...], tuple[list[PointKey], list[PointKey]]] = {}
    for side, keys in ((0, keys_a), (1, keys_b)):
        for k in keys:
            if k.open_loop:
                groups.setdefault(_sweep_group(k), ([], []))[side].append(k)
    pairs: list[tuple[PointKey, PointKey]] = []
    for ga, gb in groups.values():
        if not ga or not gb:
            continue
        top_a, top_b = max(k.rate_rps or 0.0 for k in ga) or 1.0, max(k.rate_rps or 0.0 for k in gb) or 1.0
        same = set(ga) & set(gb)  # the very same rate (explicit rates: configured alike) pairs first
        pairs += [(k, k) for k in same]
        ga = sorted(set(ga) - same, key=lambda k: k.rate_rps or 0.0)
        gb = sorted(set(gb) - same, key=lambda k: k.rate_rps or 0.0)
        if len(ga) == len(gb):
            pairs += list(zip(ga, gb))
            continue
        free = list(ga)
        for kb in gb:
            fb = (kb.rate_rps or 0.0) / top_b
            best = min(free, key=lambda ka: abs((ka.rate_rps or 0.0) / top_a - fb), default=None)
            if best is not None and abs((best.rate_rps or 0.0) / top_a - fb) <= RATE_FRACTION_TOLERANCE:
                pairs.append((best, kb))
                free.remove(best)
    return sorted(pairs, key=lambda p: p[1])



def match_points(sa_list: list[PointSummary], sb_list: list[PointSummary]
                 ) -> tuple[dict[PointKey, PointSummary], dict[PointKey, PointSummary], list[tuple[PointKey, PointKey]]]:
    """Points of A and B by key, and the matched pairs ``(key in A, key in B)`` in sweep order.

    Closed-loop points match by their whole key (workload and concurrency); open-loop points by their
    place in the rate sweep (:func:`match_open_loop`).
    """
    sa = {s.key: s for s in sa_list}
    sb = {s.key: s for s in sb_list}
    closed = [(k, k) for k in sorted(set(sa) & set(sb)) if not k.open_loop]
    return sa, sb, sorted(closed + match_open_loop(list(sa), list(sb)), key=lambda p: p[1])



def variant_sides(res: Any, variant_a: str, variant_b: str) -> tuple[Any, Any]:
    """Two sides of one run to diff, variant A's points against variant B's (``batchmark diff RUN --variants A B``).

    Each side holds one variant's summaries and analysis rows with the variant set to one shared label
    (``A vs B``), so :func:`match_points` pairs A's point with B's of the same shape and concurrency (and an open-loop
    point by its place in its rate sweep) and the analysis models by workload; everything else of the run is the same
    on both sides (one run: one machine, one config), but its run id, which names the side: ``RUN/variant`` (the
    report's ``A = …, B = …`` said the run's id for both, and a reader could not tell which side was which variant).

    Args:
        res: the run (:class:`pipeline.analysis.stages.RunResults`).

    Raises:
        BatchmarkError: a variant the run does not hold (its variants named), or the same variant twice.
    """
    import dataclasses

    held = sorted({s.variant for s in res.summaries})
    for v in (variant_a, variant_b):
        if v not in held:
            raise BatchmarkError(f"--variants {v!r}: run {res.run_dir.name} holds no such variant "
                                 f"(its variants: {', '.join(held) or DEFAULT_VARIANT})")
    if variant_a == variant_b:
        raise BatchmarkError(f"--variants: {variant_a!r} twice; give two variants of the run")
    label = f"{variant_a} vs {variant_b}"

    def side(v: str) -> Any:
        analysis = dict(res.analysis)
        for part in ("points", "models"):
            analysis[part] = [{**r, "variant": label} for r in res.analysis.get(part) or []
                              if (r.get("variant") or DEFAULT_VARIANT) == v]
        summaries = [dataclasses.replace(s, variant=label) for s in res.summaries if s.variant == v]
        return dataclasses.replace(res, meta={**res.meta, "run_id": f"{res.run_id}/{v}"}, summaries=summaries,
                                   analysis=analysis)
    return side(variant_a), side(variant_b)
