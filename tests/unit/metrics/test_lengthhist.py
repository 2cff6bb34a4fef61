"""A point's length histograms (pipeline.metrics.lengthhist): whole-token bins worked by hand, and only for drawn
requests (fault kind: a histogram of a fixed-length point, or bins that straddle a token)."""

from __future__ import annotations

import numpy as np

from pipeline.metrics.lengthhist import length_hist


def test_bins_are_whole_tokens_of_at_most_twenty():
    """By hand: 1, 2, 2, 3, 10 span 10 tokens, so width ⌈10 / 20⌉ = 1: edges 1 … 11, counts 1, 2, 1, 0 × 6, 1;
    100 … 139 span 40: width 2, edges 100, 102, … 140 (21), two lengths a bin."""
    h = length_hist(np.array([1, 2, 2, 3, 10]))
    assert h["edges"] == list(range(1, 12)) and h["counts"] == [1, 2, 1, 0, 0, 0, 0, 0, 0, 1]
    assert (h["min"], h["max"], h["mean"]) == (1, 10, 3.6)
    wide = length_hist(np.arange(100, 140))
    assert wide["edges"] == list(range(100, 141, 2)) and wide["counts"] == [2] * 20
    assert length_hist(np.array([7, 7]))["edges"] == [7, 8] and length_hist(np.array([], dtype=np.int64)) is None
