"""Knee, post-knee and scaling efficiency (knee.py), worked by hand."""

from __future__ import annotations

import pytest

from pipeline.analysis.knee import doubling_gains, find_knee, post_knee, scaling_efficiency

QWEN_PP512 = [(1, 29.24), (2, 54.46), (4, 104.33), (8, 195.67), (16, 335.01), (32, 593.27)]
OSS_PP512 = [(1, 81.11), (2, 95.00), (4, 151.90), (8, 254.09), (16, 400.94), (32, 614.82)]


def test_reference_curves_have_no_knee():
    # last doublings gain 593.27/335.01 - 1 = 77 % and 614.82/400.94 - 1 = 53 %, far above 15 %
    assert find_knee(QWEN_PP512) is None and find_knee(OSS_PP512) is None
    assert post_knee(QWEN_PP512, None) == "not_reached"


def test_moe_weak_first_step_is_not_a_knee():
    # gpt-oss 1 -> 2 gains 95.00/81.11 - 1 = 17 %; with a 20 % threshold that lone step is weak,
    # but every later doubling gains > 50 %, so there is no knee
    assert doubling_gains(OSS_PP512)[0] == pytest.approx(95.00 / 81.11 - 1)
    assert find_knee(OSS_PP512, threshold=0.20) is None


def test_knee_plateau_and_decline():
    curve = [(1, 10.0), (2, 19.0), (4, 36.0), (8, 40.0), (16, 42.0), (32, 43.0)]
    # 4 -> 8 gains 11 %, 8 -> 16 5 %, 16 -> 32 2 %: knee at 4, last point within 10 % of peak
    assert find_knee(curve) == 4 and post_knee(curve, 4) == "plateau"
    falling = curve[:-1] + [(32, 35.0)]  # 35 < 0.9 x 42
    assert find_knee(falling) == 4 and post_knee(falling, 4) == "decline"


def test_scaling_efficiency_by_hand():
    eff = scaling_efficiency(QWEN_PP512)
    assert eff[1] == 1.0 and eff[32] == pytest.approx(593.27 / (32 * 29.24))
    # without c = 1 the smallest c is the base: T(c) / ((c / c0) x T(c0))
    assert scaling_efficiency([(2, 10.0), (8, 20.0)])[8] == pytest.approx(20.0 / (4 * 10.0))
