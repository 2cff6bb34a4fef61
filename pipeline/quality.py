"""A run's quality verdict: ``clean`` or ``flagged``, with its reasons (pure; issue 13).

A run is *flagged* when any of these holds, each a reason of its own:

- its bandwidth probe warned (``run.json`` ``probe.warning``: the probe's repeats spread more than
  25 %, see :func:`pipeline.sweep.probe_warning`): another load shared the machine;
- a point's repeats disagree: the output throughput of its slowest and fastest repeat differ by more
  than :data:`REPEAT_SPREAD_LIMIT` (max / min over repeats, ``PointSummary.samples``), which
  batching alone does not do — the machine was busy during that point;
- a workload's numbers cannot be right (``implausible``: an MBU above 1, a single stream above its
  bandwidth ceiling; :func:`pipeline.analysis.implausible_model`).

Pages show the verdict wherever a run appears, and choose a clean run over a flagged one as a
headline or an explainer's example whenever a clean one exists (:func:`prefer_clean`).
"""

from __future__ import annotations

from typing import Any, Iterable, TypeVar

#: A point whose repeats' output throughput spreads more than this (max / min) is noisy.  The
#: committed clean runs spread at most 1.25x; an interfered point reached 2x and more.
REPEAT_SPREAD_LIMIT = 1.5

T = TypeVar("T")


def repeat_spread(samples: Iterable[float] | None) -> float | None:
    """max / min of a point's per-repeat values; None with fewer than two positive values."""
    xs = [x for x in (samples or []) if x and x > 0]
    return max(xs) / min(xs) if len(xs) >= 2 else None


def run_quality(meta: dict[str, Any], points: list[dict[str, Any]], models: list[dict[str, Any]] = (),
                spread_limit: float = REPEAT_SPREAD_LIMIT) -> dict[str, Any]:
    """``{"verdict": "clean" | "flagged", "reasons": [str, ...], "noisy_points": [{"model", "concurrency",
    "spread"}]}`` of one run.

    Args:
        meta: ``run.json`` (its ``probe.warning`` is read).
        points: point summaries as dicts (``samples.output_throughput_tok_s`` is read).
        models: the analysis' models (their ``implausible`` is read).
        spread_limit: max / min of a point's repeats above which the point is noisy.
    """
    reasons = []
    warning = (meta.get("probe") or {}).get("warning")
    if warning:
        reasons.append(f"bandwidth probe: {warning}")
    noisy = []
    for p in sorted(points, key=lambda p: (p.get("model") or "", p.get("input_len") or 0, p.get("concurrency") or 0)):
        spread = repeat_spread((p.get("samples") or {}).get("output_throughput_tok_s"))
        if spread is not None and spread > spread_limit:
            noisy.append({"model": p.get("model"), "concurrency": p.get("concurrency"), "spread": spread})
    if noisy:
        where = ", ".join(f"{n['model']} c = {n['concurrency']} ({n['spread']:.2f}×)" for n in noisy)
        reasons.append(f"repeats of a point disagree by more than {spread_limit:.2f}× (slowest vs fastest output "
                       f"throughput), so the machine was busy while they ran: {where}")
    for m in models:
        if m.get("implausible"):
            reasons.append(f"{m.get('model')}: {m['implausible']}")
    return {"verdict": "flagged" if reasons else "clean", "reasons": reasons, "noisy_points": noisy}


def verdict_text(quality: dict[str, Any]) -> str:
    """One line for tables: ``clean``, or ``⚠ flagged: <first reason>`` (+ how many more)."""
    if quality["verdict"] == "clean":
        return "clean"
    more = len(quality["reasons"]) - 1
    return f"⚠ flagged: {quality['reasons'][0]}" + (f" (+{more} more)" if more > 0 else "")


def prefer_clean(items: list[T], is_clean: Any) -> list[T]:
    """``items`` that are clean when any is, else all of them: a flagged run is never chosen over a clean one."""
    clean = [x for x in items if is_clean(x)]
    return clean or list(items)
