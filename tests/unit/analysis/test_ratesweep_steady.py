"""Open-loop windows sized from the expected E2EL, a steady-state check, and saturation and the SLO limit that never
contradict each other.

Regression (fault kind: a rate point too short to be steady): on the simulated gpt-oss-20b a page said both
"Saturated from 1.410 req/s" and "The SLO held up to 8.530 req/s": each rate got about 10 s of arrivals while E2EL
was 8–22 s, so the achieved rate fell below the offered one because requests were still draining, not because the
server saturated.  An unsaturated server completes n arrivals of a window W in W + E2EL: achieved = rate × W /
(W + E2EL) (pipeline/analysis/ratesweep.py).
"""

from __future__ import annotations

import pytest

from pipeline.analysis.ratesweep import expected_e2el_s, rate_sweep, steadiness
from pipeline.core.pointsummary import PointSummary
from pipeline.loadgen.scheduler import open_loop_counts


def test_expected_e2el_by_littles_law():
    """c = 4 completes 400 / 100 = 4 req/s at E2EL 4 × 100 / 400 = 1 s; c = 8: 6 req/s at 8 × 100 / 600 = 1.33 s."""
    curve = [(1, 150.0), (4, 400.0), (8, 600.0)]
    assert expected_e2el_s(curve, 100, 3.0) == pytest.approx(1.0)
    assert expected_e2el_s(curve, 100, 5.0) == pytest.approx(8 * 100 / 600)
    assert expected_e2el_s(curve, 100, 50.0) == pytest.approx(8 * 100 / 600)  # past the curve: its last point
    assert expected_e2el_s([], 100, 1.0) is None


def test_window_is_five_expected_e2els_with_one_of_warm_up():
    """Rate 2 req/s, E2EL 8 s: window max(10, 5 × 8) = 40 s → 80 measured requests; warm-up 2 × 8 = 16; an E2EL of
    60 s would ask for 300 s, capped at 120 s → 240."""
    assert open_loop_counts(2.0, 32, 8.0) == (16, 80)
    assert open_loop_counts(2.0, 32, 60.0) == (120, 240)
    assert open_loop_counts(2.0, 32, None) == (2, 32)  # no expectation: ten seconds (20 < 32) and one second
    assert open_loop_counts(2.0, 32, 8.0, warmup=False) == (0, 80)
    assert open_loop_counts(2.0, 32, 8.0, requests=50) == (16, 50)  # a config's fixed count wins


def _point(rate, achieved, e2el_p50, completed, met=True):
    d = lambda v: {"p50": v, "p90": v, "p99": v, "mean": v}  # noqa: E731
    return PointSummary(model="m", engine="simulated", input_len=1024, output_len=256, concurrency=None, repeats=1,
                        completed=completed, failed=0, output_throughput_tok_s=achieved * 256, per_user_tok_s=None,
                        ttft_s=d(0.5), ttft_with_queue_s=None, tpot_s=d(0.03), itl_s=None, e2el_s=d(e2el_p50),
                        prefill_throughput_tok_s=None, step_time_s=None, load="poisson", rate_rps=rate,
                        send_rate_rps=rate, achieved_rate_rps=achieved,
                        slo={"met": met, "goodput_rps": achieved if met else 0.0})


def test_a_point_that_only_drained_is_marked_never_saturated_nor_slo_met():
    """1.41 req/s for 10 s (14 requests) at E2EL 8 s: draining alone achieves 1.41 × 10 / 18 = 0.78 req/s; the
    point achieved 0.80 — not saturated, not steady (10 s < 3 × 8 s).  8.53 req/s over 80 s at E2EL 2 s: steady."""
    short = _point(1.41, 0.80, 8.0, 14)
    assert steadiness(short) == (False, pytest.approx(14 / 1.41), 8.0)
    rs = rate_sweep([short, _point(8.53, 8.4, 2.0, 683)])
    assert rs["saturation_rate_rps"] is None and rs["unsteady_rates"] == [1.41]
    row = rs["points"][0]
    assert row["saturated"] is None and row["slo_met"] is None and row["steady"] is False
    assert rs["slo"]["max_ok"] == 8.53


def test_saturation_beyond_draining_is_called_and_the_slo_limit_stays_below_it():
    """4 req/s for 80 s (320 requests) at E2EL 2 s: draining would give 4 × 80 / 82 = 3.90; achieved 2.0 is
    saturation (below 0.9 × 3.90), and its met SLO does not count: the queue grows without bound."""
    rs = rate_sweep([_point(1.0, 0.99, 1.0, 80), _point(4.0, 2.0, 2.0, 320, met=True)])
    assert rs["saturation_rate_rps"] == 4.0
    assert rs["points"][1]["slo_met"] is False
    assert rs["slo"] == {"max_ok": 1.0, "first_failing": 4.0}


def test_the_model_page_never_says_saturated_below_an_slo_limit():
    """The rendered model page of the gpt-oss-20b case (the two points above, analysed as the analysis stage does):
    it says the 1.41 req/s point was not steady and never "Saturated from" beside "The SLO held up to"."""
    from pipeline.analysis.analyze import analyze
    from pipeline.pages.indexviews import model_pages
    from pipeline.pages.render import RunView, WorkloadView, make_env

    pts = [_point(1.41, 0.80, 8.0, 14), _point(8.53, 8.4, 2.0, 683)]
    res = analyze(pts, {}, {"name": "dgx-spark", "bandwidth_gb_s_spec": 273, "peak_tflops_spec": 125, "memory_gb": 128})
    model = res["models"][0]
    assert model["rate_sweeps"][0]["saturation_rate_rps"] is None
    view = RunView(run_id="20261201T000000Z-s", meta={"source": "simulated"}, analysis=res)
    view.workloads.append(WorkloadView(model=model, points=[], analysis_points=[], rate_points=[p.as_dict() for p in pts],
                                   run_meta=view.meta))
    page = make_env().get_template("each/model.md.j2").render(runs=[view], chart=lambda spec: "", page="models/m.md",
                                                              mp=model_pages([view])[0])
    flat = " ".join(page.split())
    assert "Saturated from" not in flat and "The SLO held up to **8.530 req/s**" in flat
    assert "Not steady at 1.410 req/s" in flat


def test_an_achieved_rate_that_flattens_is_saturation_though_each_point_drained():
    """Fault kind: a verdict contradicting its own chart ("No rate measured saturated the server" under achieved
    rates 0.95, 1.9, 2.2, 2.25 req/s at 1, 2, 4, 8 offered).  The queue lengthens E2EL (20 s, 40 s at 4 and 8 req/s),
    so each point's draining allowance (W / (W + E2EL): 10 / 30 of 4 = 1.33 req/s) excused its shortfall.  From 2 to
    4 req/s the offered rate rose 100 %, the achieved (2.2 − 1.9) / 1.9 = 16 % < 50 % of it: saturated from 4."""
    pts = [_point(1.0, 0.95, 2.0, 10), _point(2.0, 1.9, 2.0, 20), _point(4.0, 2.2, 20.0, 40), _point(8.0, 2.25, 40.0, 80)]
    rs = rate_sweep(pts)
    assert rs["saturation_rate_rps"] == 4.0
    assert [r["saturated"] for r in rs["points"]] == [False, False, True, True]
    assert rs["unsteady_rates"] == []
