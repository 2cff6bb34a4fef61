"""A point's length distribution as its summary keeps it (``PointSummary.lengths``): per request the prompt and
output tokens summarized (mean, p50, min, max), and the distribution the source states it drew them from.

``lengths`` = ``{"input": LengthStats | None, "output": LengthStats | None, "stated": dict | None}``:

- ``input`` / ``output``: over the requests whose lengths are known (a measured point's drawn lengths, the
  ``drawn_input_len`` / ``drawn_output_len`` columns; an import's per-request lists or its stated statistics).
- ``stated``: the distribution in ``lengths:``'s JSON form where the source says it (``{"input": {"distribution":
  "uniform", "range_ratio": 0.9}, "output": …}``; vLLM's ``--random-range-ratio``, AIPerf's ``--isl-stddev``,
  GuideLLM's ``prompt_tokens_stdev``), with only the parts it says; None where it says nothing.

Pure: no I/O; the importers and the metrics stage fill it, the diff and the pages read it.
"""

from __future__ import annotations

import math
from typing import Any, TypedDict

import numpy as np


class LengthStats(TypedDict):
    """One length's distribution over a point's requests, tokens: mean, median (numpy's linear interpolation),
    min and max."""

    mean: float
    p50: float
    min: float
    max: float


def length_stats(values: "list[float] | np.ndarray | None") -> LengthStats | None:
    """:class:`LengthStats` of per-request ``values`` (tokens); None when there are none or one is not finite."""
    if values is None or len(values) == 0:
        return None
    arr = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(arr)):
        return None
    return {"mean": float(arr.mean()), "p50": float(np.median(arr)), "min": float(arr.min()), "max": float(arr.max())}


def stated_stats(mean: Any = None, p50: Any = None, low: Any = None, high: Any = None) -> LengthStats | None:
    """:class:`LengthStats` of a source's stated figures (tokens); None unless all four are finite numbers ≥ 0."""
    vals = (mean, p50, low, high)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0 for v in vals):
        return None
    return {"mean": float(mean), "p50": float(p50), "min": float(low), "max": float(high)}


def point_lengths(input_stats: LengthStats | None, output_stats: LengthStats | None,
                  stated: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """A summary's ``lengths`` (module docstring); None when nothing is known of them."""
    if input_stats is None and output_stats is None and not stated:
        return None
    return {"input": input_stats, "output": output_stats, "stated": stated or None}


def uniform_stated(ratio: Any, sglang: bool = False) -> dict[str, Any] | None:
    """The ``lengths:`` JSON form of a random dataset's range ratio, for both lengths (``stated``).

    vLLM (``--random-range-ratio`` r in [0, 1)): r = 0 is fixed, else uniform with that range ratio, batchmark's
    definition.  SGLang's ``bench_serving`` (``random_range_ratio``): lengths uniform on [L·r, L], so r = 1 is fixed
    and any other r a distribution batchmark does not draw (``sglang_uniform``, its ratio kept).  None for a ratio
    that is not a finite number in [0, 1]."""
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not math.isfinite(ratio) or not 0 <= ratio <= 1:
        return None
    if sglang:
        one = {"distribution": "fixed"} if ratio == 1 else {"distribution": "sglang_uniform", "range_ratio": float(ratio)}
    elif ratio >= 1:
        return None
    else:
        one = {"distribution": "fixed"} if ratio == 0 else {"distribution": "uniform", "range_ratio": float(ratio)}
    return {"input": dict(one), "output": dict(one)}


def normal_stated(input_std: Any, output_std: Any) -> dict[str, Any] | None:
    """The ``lengths:`` JSON form of stated standard deviations (tokens) of the input and output lengths (AIPerf's
    ``--isl-stddev`` / ``--osl-stddev``, GuideLLM's ``prompt_tokens_stdev`` / ``output_tokens_stdev``): 0 is fixed, a
    positive one normal with that std; a length whose std is not stated is left out.  None when neither is."""
    out: dict[str, Any] = {}
    for name, std in (("input", input_std), ("output", output_std)):
        if isinstance(std, bool) or not isinstance(std, (int, float)) or not math.isfinite(std) or std < 0:
            continue
        out[name] = {"distribution": "fixed"} if std == 0 else {"distribution": "normal", "std": float(std)}
    return out or None


def joined_lengths(each: "list[dict[str, Any] | None]") -> dict[str, Any] | None:
    """The ``lengths`` of repeats joined into one point: per length the means' and medians' median, the lowest min
    and the highest max (the repeats send equal numbers of requests, so the mean of means is the mean); ``stated``
    the first repeat's.  None when no repeat has any."""
    known = [x for x in each if x]
    if not known:
        return None
    out: dict[str, Any] = {"stated": known[0].get("stated")}
    for name in ("input", "output"):
        ss = [x[name] for x in known if x.get(name)]
        out[name] = None if not ss else {
            "mean": float(np.mean([s["mean"] for s in ss])), "p50": float(np.median([s["p50"] for s in ss])),
            "min": min(s["min"] for s in ss), "max": max(s["max"] for s in ss)}
    return point_lengths(out["input"], out["output"], out["stated"])


def drawn_lengths(drawn_in: np.ndarray, drawn_out: np.ndarray, measured: np.ndarray,
                  stated: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """A measured point's ``lengths``: its measured requests' drawn lengths (the records' ``drawn_input_len`` /
    ``drawn_output_len``, −1 where a request is its point's shape) and ``stated`` (the point meta's ``lengths:``,
    JSON); None where no request was drawn (a point at fixed lengths, as every point before lengths: existed)."""
    keep = measured & (drawn_in >= 0) & (drawn_out >= 0)
    if not keep.any():
        return None
    return point_lengths(length_stats(drawn_in[keep]), length_stats(drawn_out[keep]), stated)
