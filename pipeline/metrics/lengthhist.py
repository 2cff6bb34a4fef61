"""The length distribution of a point's requests as histograms (:class:`pipeline.core.pointsummary.LengthHist`): what
the pages draw beside a point's figures, computed once by the metrics stage from the records' drawn lengths.

Bins are whole tokens: the width is ⌈(max − min + 1) / :data:`MAX_BINS`⌉ tokens (at least 1), the first edge the
least length, so each of at most :data:`MAX_BINS` bins [eᵢ, eᵢ + width) holds whole lengths and none straddles a
token (derived: integer lengths, ``numpy.histogram`` on integer edges).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pipeline.core.arrays import PointArrays
from pipeline.core.pointsummary import LengthHist

#: Most bins of a length's histogram (a small chart beside a point's figures).
MAX_BINS = 20


def length_hist(values: np.ndarray) -> LengthHist | None:
    """The histogram of integer ``values`` (tokens) in whole-token bins (module docstring); None for none."""
    v = np.asarray(values, dtype=np.int64)
    if not v.size:
        return None
    lo, hi = int(v.min()), int(v.max())
    width = max(math.ceil((hi - lo + 1) / MAX_BINS), 1)
    edges = np.arange(lo, hi + width + 1, width, dtype=np.int64)
    edges = edges[: int(np.searchsorted(edges, hi, side="right")) + 1]  # the last edge the first above the max
    counts, _ = np.histogram(v, bins=edges)
    return {"edges": [int(e) for e in edges], "counts": [int(c) for c in counts], "min": lo, "max": hi,
            "mean": float(v.mean())}


def point_length_hists(arrays: PointArrays, measured: np.ndarray, ok: np.ndarray) -> dict[str, LengthHist] | None:
    """A point's ``length_hist`` (:class:`pipeline.core.pointsummary.PointSummary`): the measured requests' drawn
    prompt (``input``) and output (``output``) lengths and, where its meta's ``lengths.ignore_eos`` is false, the
    output tokens each finished one got (``got``); None where no request was drawn (fixed lengths, imports)."""
    a = arrays.requests
    drawn = measured & (a.drawn_input_len >= 0) & (a.drawn_output_len >= 0)
    if not drawn.any():
        return None
    out: dict[str, Any] = {"input": length_hist(a.drawn_input_len[drawn]),
                           "output": length_hist(a.drawn_output_len[drawn])}
    meta = arrays.meta if isinstance(arrays.meta, dict) else {}
    lengths = meta.get("lengths") if isinstance(meta.get("lengths"), dict) else {}
    got = drawn & ok
    if lengths.get("ignore_eos") is False and got.any():
        out["got"] = length_hist(a.output_tokens[got])
    return out
