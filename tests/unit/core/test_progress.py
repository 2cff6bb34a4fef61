"""The sweep's progress display: phases with elapsed time, the points' ETA without start-up, lines above.

Regression (fault kind: start-up counted as a point): creating the server environment printed one line and then
nothing for ~7 minutes; the bar sat at ``c=1: 0/7`` while the server started (~4 min), then showed
``309.63s/point`` and an ETA of 31 minutes, because the start-up was timed as the first point.
"""

from __future__ import annotations

import io
import re
import time

import pytest

from pipeline.core.progress import Display, fmt_duration, points_eta_s, trend_eta_s


def test_fmt_duration_by_hand():
    assert fmt_duration(12.34) == "12.3 s"
    assert fmt_duration(242) == "4 min 02 s"  # 4 × 60 + 2
    assert fmt_duration(3900) == "1 h 05 min"  # 65 min


def test_points_eta_is_the_median_point_times_the_points_left():
    assert points_eta_s([], 5) is None
    assert points_eta_s([2.0, 3.0, 100.0], 4) == pytest.approx(3.0 * 4)  # median 3 s, one stalled point ignored
    assert points_eta_s([2.0], 0) == 0.0


def test_trend_eta_follows_the_points_time_in_concurrency():
    """Regression (new-user trial on the vLLM CPU config): c = 1 … 32 took 2-10 s a point, the median
    rule said "ETA 10.1 s" before c = 64, which took 40.7 s.  Worked by hand in log2 c: measured 4 s at c = 8,
    8 s at c = 16, 16 s at c = 32 (slope 1: each doubling doubles a point's time, as a wave's latency does past
    the knee); c = 64 is extrapolated to 32 s, c = 12 interpolated to 4 · 2^(log2 1.5) = 6 s, c = 1 below the
    smallest measured c takes its 4 s."""
    measured = [(8, 4.0), (16, 8.0), (32, 16.0)]
    assert trend_eta_s(measured, [64]) == pytest.approx(32.0)
    assert trend_eta_s(measured, [12]) == pytest.approx(6.0)
    assert trend_eta_s(measured, [1, 64]) == pytest.approx(36.0)
    # the slope is clamped to [0, 1]: a point's time never falls with c, nor grows faster than c
    assert trend_eta_s([(1, 10.0), (2, 5.0)], [4]) == pytest.approx(5.0)  # slope -1 -> 0
    assert trend_eta_s([(1, 1.0), (2, 4.0)], [4]) == pytest.approx(8.0)  # slope 2 -> 1
    # two models' points at one c pool by their median; one measured c gives its time to every point
    assert trend_eta_s([(4, 2.0), (4, 4.0), (4, 3.0)], [8, 16]) == pytest.approx(6.0)
    assert trend_eta_s([], [1]) is None


def test_display_feeds_the_trend_from_the_points_it_timed():
    """The sweep's wiring (pipeline/sweep/gridwalk.py without a plan): ``begin_point(label, c)`` records each measured
    point's concurrency and time; a resumed point (``measured=False``) is not timed."""
    d = Display(4, stream=io.StringIO(), mode="lines")
    order = [1, 2, 4, 8]
    d.estimate = lambda done: trend_eta_s(d.measured, order[done:])
    assert d.eta_s() is None  # before any point: "ETA after the first point"
    d.begin_point("m c=1", 1)
    d.end_point(10.0, measured=False)  # read back on resume
    assert d.measured == []
    d.begin_point("m c=2", 2)
    time.sleep(0.05)
    d.end_point(20.0)
    (c, sec), = d.measured
    assert c == 2 and sec >= 0.05
    assert d.eta_s() == pytest.approx(2 * sec)  # c = 4 and 8 at c = 2's time (one measured c: slope 0)


def test_phases_and_points_in_lines_mode():
    out = io.StringIO()
    d = Display(3, stream=out, mode="lines", heartbeat_s=0.05)
    with d.phase("m: server start to healthy"):
        time.sleep(0.3)  # start-up: ~6 heartbeats, and no part of any point
    d.start()
    for c in (1, 2):
        d.begin_point(f"m c={c}")
        time.sleep(0.02)
        d.end_point(100.0 * c)
    text = out.getvalue()
    lines = text.splitlines()
    assert lines[0] == "m: server start to healthy …"
    assert any(line.startswith("  … m: server start to healthy: still running, 0.") for line in lines)
    # the phase's own time, at least its 0.3 s of sleep (more on a loaded machine: a sleep only ever runs long)
    done = [re.fullmatch(r"m: server start to healthy: done in (\d+\.\d) s", line) for line in lines]
    assert [float(m.group(1)) for m in done if m] and all(float(m.group(1)) >= 0.3 for m in done if m)
    point_lines = [line for line in lines if line.startswith("m c=")]
    assert re.match(r"m c=1: 100\.0 tok/s, \d+\.\d s \(1/3 points; ETA ", point_lines[0]), point_lines[0]
    assert re.match(r"m c=2: 200\.0 tok/s, \d+\.\d s \(2/3 points; ETA ", point_lines[1]), point_lines[1]
    # the ETA counts the points alone (one 0.02 s point left), never the start-up's 0.3 s or more
    assert d.eta_s() < 0.3
    d.estimate = lambda done: 60.0 * (3 - done)  # a plan's estimate replaces the median rule
    assert d.eta_s() == 60.0


def test_a_failed_phase_says_so_and_raises():
    out = io.StringIO()
    d = Display(1, stream=out, mode="lines")
    with pytest.raises(RuntimeError):
        with d.phase("env: creating"):
            raise RuntimeError("pip failed")
    assert out.getvalue().splitlines()[-1].startswith("env: creating: failed after 0.0 s")


def test_bar_mode_writes_messages_above_the_bar():
    out = io.StringIO()
    d = Display(2, stream=out, mode="bar")
    d.start()
    d.begin_point("m c=1")
    d.write("m: stopped escalating (knee)")
    d.end_point(10.0)
    d.close()
    text = out.getvalue()
    # the message is a line of its own: tqdm clears the bar, prints it and a newline, then redraws the bar
    assert "\nm: stopped escalating (knee)\n" in text.replace("\r", "\n")


def test_library_bars_are_switched_off(monkeypatch):
    """The Hugging Face libraries' own bars (checkpoint shards, downloads) printed onto the sweep's bar."""
    import huggingface_hub.utils as hf_utils

    from pipeline.core.progress import quiet_library_bars

    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "0")  # recorded, so the teardown restores the variable
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS")
    hf_utils.enable_progress_bars()
    try:
        quiet_library_bars()
        assert hf_utils.are_progress_bars_disabled()
        import os

        assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
    finally:
        hf_utils.enable_progress_bars()
