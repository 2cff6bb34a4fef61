"""Outside load measured while a point runs, and the verdicts it gives (interference during the sweep).

Regression (fault kind: interference after the probe): a load that started after the bandwidth probe slowed the
sweep's points and nothing said so; only the probe's own spread was checked.
"""

from __future__ import annotations

import time

import pytest

from pipeline.machine.interference import MIN_WALL_S, OUTSIDE_SHARE_LIMIT, InterferenceMeter, outside_load
from pipeline.analysis.quality import PROBE_DRIFT_LIMIT, point_verdict, probe_drift, run_quality


def test_outside_load_by_hand():
    # 2 s of wall time on 4 CPUs; the machine was busy 5 CPU-seconds, of which the measuring tree 2:
    # outside 5 − 2 = 3 CPU-s, 3 / 2 s = 1.5 CPUs on average, 1.5 / 4 = 37.5 % of the machine
    r = outside_load(2.0, 5.0, 2.0, 4)
    assert r["outside_cpu_s"] == pytest.approx(3.0)
    assert r["outside_load_cpus"] == pytest.approx(1.5)
    assert r["outside_share"] == pytest.approx(0.375)
    # own time read above the machine's (tick granularity) is clipped to no outside load, never negative
    assert outside_load(1.0, 0.9, 1.0, 2)["outside_cpu_s"] == 0.0
    assert outside_load(0.0, 1.0, 0.0, 2) is None and outside_load(1.0, float("nan"), 0.0, 2) is None


def test_meter_counts_its_own_busy_loop_as_its_own():
    """A busy loop in this process is the measuring tree's CPU time, not outside load: own ≈ wall (one CPU)."""
    with InterferenceMeter() as m:
        t0 = time.process_time()
        while time.process_time() - t0 < 0.6:
            pass
    r = m.result
    assert r is not None and r["wall_s"] >= 0.6
    # 0.6 s of CPU by this thread, read in 10 ms ticks (a few ticks of slack for the interpreter's own threads)
    assert r["own_cpu_s"] == pytest.approx(0.6, abs=0.1)
    assert r["machine_busy_cpu_s"] >= r["own_cpu_s"] - 0.05


def _point(c, thr, share=None, wall=2.0):
    inter = None if share is None else {"wall_s": wall, "cpu_count": 2, "outside_load_cpus": 2 * share,
                                        "outside_share": share}
    return {"model": "m", "engine": "transformers", "input_len": 8, "output_len": 6, "concurrency": c,
            "samples": {"output_throughput_tok_s": thr}, "interference": inter}


def test_point_verdict_reasons():
    assert OUTSIDE_SHARE_LIMIT == 0.25
    v = point_verdict(_point(1, [10.0, 10.5], share=0.8))
    # 0.8 × 2 CPUs = 1.6 CPUs of 2 busy outside, 80 % > 25 %
    assert v["verdict"] == "flagged" and v["reasons"] == [
        "machine busy: other processes kept 1.6 of 2 CPUs busy (80%, more than 25%) while it ran"]
    assert point_verdict(_point(1, [10.0, 10.5], share=0.2))["verdict"] == "clean"
    # too short to judge the load (ticks of 10 ms): no verdict from it
    assert point_verdict(_point(1, [10.0, 10.5], share=0.8, wall=MIN_WALL_S / 2))["verdict"] == "clean"
    # 16 / 10 = 1.6× > 1.5× and 80 % busy: two reasons
    assert len(point_verdict(_point(2, [10.0, 16.0], share=0.8))["reasons"]) == 2
    assert point_verdict({"model": "m", "concurrency": 1})["verdict"] == "clean"  # older runs, imports: nothing to judge


def test_run_quality_busy_points_and_probe_after():
    pts = [_point(1, [10.0, 10.2], share=0.05), _point(2, [19.0, 19.5], share=0.6)]
    q = run_quality({"probe": {"warning": None, "bandwidth_gb_s": 40.0}}, pts)
    assert q["verdict"] == "flagged"
    assert q["busy_points"] == [{"model": "m", "concurrency": 2, "outside_share": 0.6}]
    assert [p["concurrency"] for p in q["points"]] == [2]
    assert q["reasons"] == ["other processes kept more than 25% of the machine's CPUs busy while points ran: m c = 2 (60%)"]
    # the probe after the sweep: 35 / 40 − 1 = −12.5 %, beyond the 10 % limit
    meta = {"probe": {"bandwidth_gb_s": 40.0}, "probe_after": {"bandwidth_gb_s": 35.0, "warning": None}}
    assert probe_drift(meta) == pytest.approx(-0.125) and PROBE_DRIFT_LIMIT == 0.10
    q = run_quality(meta, pts[:1])
    assert q["verdict"] == "flagged" and q["reasons"] == [
        "the bandwidth probed after the sweep (35.0 GB/s) differs from the one before it (40.0 GB/s) by -12% "
        "(more than 10%, the probes' own noise or 10 %): the machine changed while the run was measured"]  # -12.5 % rounds half to even
    # 38 / 40 − 1 = −5 %: within the limit, clean
    assert run_quality({**meta, "probe_after": {"bandwidth_gb_s": 38.0}}, pts[:1])["verdict"] == "clean"
    warned = {**meta, "probe_after": {"bandwidth_gb_s": 40.0, "warning": "noisy probe (bandwidth repeats spread 1.40x)"}}
    assert run_quality(warned, pts[:1])["reasons"] == [
        "bandwidth probe after the sweep: noisy probe (bandwidth repeats spread 1.40x)"]


def test_a_server_outside_the_sweeps_tree_is_not_judged_as_outside_load():
    """Engine ``openai``: the endpoint is no process of the sweep's, so its own CPU time would read as outside load."""
    p = _point(4, [30.0, 30.5], share=0.9)
    p["interference"]["server_outside_tree"] = True
    v = point_verdict(p)
    assert v["verdict"] == "clean" and v["outside_share"] is None
