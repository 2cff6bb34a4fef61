"""Per-repeat latency samples in point summaries (added for the diff's tests on static batches).

Expected values come from tests/runbuilder.py's timings: in repeat r with multiplier m every
request has TTFT = prefill_s(B, m) and TPOT = step_s(B, m), so the per-repeat medians are
exactly those, one per repeat, while the per-request lists hold B copies of each.
"""

from __future__ import annotations

import pytest

from pipeline.metrics.summarize import summarize_point
from tests.runbuilder import point_records, prefill_s, step_s


def test_per_repeat_latency_samples():
    s = summarize_point(point_records("dense-a", 4, (1.0, 2.0)))
    assert s.samples["ttft_s_per_repeat"] == pytest.approx([prefill_s(4, 1.0), prefill_s(4, 2.0)])
    assert s.samples["tpot_s_per_repeat"] == pytest.approx([step_s(4, 1.0), step_s(4, 2.0)])
    assert len(s.samples["ttft_s"]) == 8 and len(s.samples["tpot_s"]) == 8
    # Static batch: TPOT of a repeat equals its mean decode step (requestmetrics.repeat_step_time).
    assert s.samples["step_time_s"] == pytest.approx(s.samples["tpot_s_per_repeat"])
