"""Per-repeat latency samples in point summaries (added for the diff's tests on static batches).

Expected values come from tests/runbuilder.py's timings: in repeat r with multiplier m every
request has TTFT = prefill_s(B, m) and TPOT = step_s(B, m), so the per-repeat medians are
exactly those, one per repeat, while the per-request lists hold B copies of each.
"""

from __future__ import annotations

import pytest

from pipeline.metrics.summarize import summarize_point
from tests.runbuilder import point_records, prefill_s, step_s, three_repeat_served_point


def test_per_repeat_latency_samples():
    s = summarize_point(point_records("dense-a", 4, (1.0, 2.0)))
    assert s.samples["ttft_s_per_repeat"] == pytest.approx([prefill_s(4, 1.0), prefill_s(4, 2.0)])
    assert s.samples["tpot_s_per_repeat"] == pytest.approx([step_s(4, 1.0), step_s(4, 2.0)])
    assert len(s.samples["ttft_s"]) == 8 and len(s.samples["tpot_s"]) == 8
    # Static batch: TPOT of a repeat equals its mean decode step (requestmetrics.repeat_step_time).
    assert s.samples["step_time_s"] == pytest.approx(s.samples["tpot_s_per_repeat"])


def test_per_repeat_itl_e2el_ttst_and_client_samples_with_their_ci95():
    """Worked by hand from :func:`_three_repeats`.  Per repeat the per-token ITLs are g, g, 2g: median g (10, 20,
    30 ms), mean 4g/3 (13.33, 26.67, 40 ms); E2EL 0.1 + 4g (140, 180, 220 ms); TTST (second token − first) g.

    ci95 = mean ± t(0.975, 2) · s / √3, t(0.975, 2) = 4.303 (any t table; scipy gives 4.302653), so the half-width
    is 4.302653 / √3 = 2.484138 × s: ITL median s = 0.01 → 0.02 ± 0.024841; ITL mean s = 0.013333 → 0.026667 ±
    0.033122; E2EL s = 0.04 → 0.18 ± 0.099366; in flight s = 0.1 → 1.0 ± 0.248414; CPU s = 0.1 → 0.3 ±
    0.248414; delivered s = 2 → 10 ± 4.968276 tok/s."""
    s = summarize_point(three_repeat_served_point())
    assert s.samples["itl_s_per_repeat"] == pytest.approx([0.01, 0.02, 0.03])
    assert s.samples["itl_mean_s_per_repeat"] == pytest.approx([0.04 / 3, 0.08 / 3, 0.04])
    assert s.samples["e2el_s_per_repeat"] == pytest.approx([0.14, 0.18, 0.22])
    assert s.samples["ttst_s_per_repeat"] == pytest.approx([0.01, 0.02, 0.03])
    assert s.samples["achieved_concurrency"] == pytest.approx([0.9, 1.0, 1.1])
    assert s.samples["client_cpu_share"] == pytest.approx([0.2, 0.3, 0.4])
    assert s.samples["delivered_output_throughput_tok_s"] == pytest.approx([8.0, 10.0, 12.0])
    expect = {"itl_s_per_repeat": (0.02, 0.024841), "itl_mean_s_per_repeat": (0.08 / 3, 0.033122),
              "e2el_s_per_repeat": (0.18, 0.099366), "ttst_s_per_repeat": (0.02, 0.024841),
              "achieved_concurrency": (1.0, 0.248414), "client_cpu_share": (0.3, 0.248414),
              "delivered_output_throughput_tok_s": (10.0, 4.968276)}
    for key, (mean, half) in expect.items():
        assert s.ci95[key] == pytest.approx([mean - half, mean + half], abs=1e-5), key
    # the medians over repeats the summary shows are of the same per-repeat values
    assert s.achieved_concurrency == pytest.approx(1.0) and s.delivered_output_throughput_tok_s == pytest.approx(10.0)


def test_a_point_without_client_blocks_or_stored_before_has_none_of_the_new_samples():
    """No client block (the in-process backend, an older sweep): no client samples and no CI of them; a summary
    stored before the per-repeat ITL/E2EL/TTST were kept (the keys removed) still loads, with no CI invented."""
    from pipeline.core.pointsummary import PointSummary

    s = summarize_point(three_repeat_served_point(old=True))
    assert not {"achieved_concurrency", "client_cpu_share", "delivered_output_throughput_tok_s"} & (set(s.samples) | set(s.ci95))
    stored = s.as_dict()
    for k in ("itl_s_per_repeat", "itl_mean_s_per_repeat", "e2el_s_per_repeat", "ttst_s_per_repeat"):
        del stored["samples"][k], stored["ci95"][k]
    del stored["ci95"]
    back = PointSummary.from_dict(stored)
    assert back.ci95 is None and "itl_s_per_repeat" not in back.samples
