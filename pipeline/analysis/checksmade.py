"""What a clean run's verdict can claim: only the checks its files let it make (pure).

A run is *clean* when no check flagged it (:func:`pipeline.analysis.quality.run_quality`), but a check needs its
data: the probe's steadiness needs a probe (``run.json`` ``probe``), the repeats' agreement two repeats of a point
(``samples.output_throughput_tok_s``), a quiet machine the interference meter's reading of a point
(``interference.outside_share``, :mod:`pipeline.machine.interference`).  An import has none of them (its file states
one figure per point, no probe and nothing of the machine), so its clean line says so instead of claiming them.
"""

from __future__ import annotations

from typing import Any, Iterable


def clean_claims(meta: dict[str, Any], points: list[dict[str, Any]], spread_limit: float,
                 models: Iterable[dict[str, Any]] = ()) -> str:
    """The run page's line for a clean run: the checks made, then those its files made impossible.

    Args:
        meta: ``run.json`` (``probe``, ``source`` are read).
        points: point summaries as dicts (``samples``, ``interference``, ``load``).
        spread_limit: max / min of a point's repeats above which it is noisy (``quality.REPEAT_SPREAD_LIMIT``).
        models: the analysis' models: their ``not_a_result`` (an MBU or MFU above 1 at the bytes counted, which the
            pages mark "not a result") is named, never called plausible.

    Returns:
        e.g. ``"clean: numbers plausible; not checked (not possible for an import): no probe, one repeat, no machine
        data"``, or every claim when each check was made.
    """
    probed = (meta.get("probe") or {}).get("bandwidth_gb_s") is not None
    repeated = any(len((p.get("samples") or {}).get("output_throughput_tok_s") or []) >= 2
                   for p in points if p.get("load", "closed") == "closed")
    watched = any((p.get("interference") or {}).get("outside_share") is not None for p in points)
    made: list[str] = []
    missing: list[str] = []
    for ok, claim, lack in ((probed, "probe steady", "no probe"),
                            (repeated, f"repeats agree within {spread_limit:g}×", "one repeat"),
                            (watched, "machine not busy while points ran", "no machine data")):
        (made if ok else missing).append(claim if ok else lack)
    unsure = [f"{m.get('model')} {x}" for m in models for x in (m.get("not_a_result") or [])]
    made.append("numbers plausible" if not unsure else
                f"numbers plausible but {', '.join(unsure[:3])}{' …' if len(unsure) > 3 else ''} (above 1 at the bytes "
                "counted: not a result)")
    text = "clean: " + ", ".join(made)
    if missing:
        why = "not possible for an import" if str(meta.get("source", "")).startswith("imported:") else "no data"
        text += f"; not checked ({why}): " + ", ".join(missing)
    return text
