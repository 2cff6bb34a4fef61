"""The Pareto frontier of a tuning run (pipeline.analysis.frontier), on hand-worked point sets.

Every expected frontier below is worked by hand from the definition (a point dominates another when it is at
least as good on both axes, output throughput and per-user throughput, and better on one; Kung, Luccio &
Preparata 1975): the comment beside each set says which point beats which.
"""

from __future__ import annotations

import pytest

from pipeline.analysis.frontier import best_under_slo, dominates, frontier_points, frontiers, non_dominated
from pipeline.core.pointsummary import PointSummary


def _s(variant: str, c: int, out: float | None, user: float | None, *, failed: int = 0, met: bool | None = None,
       busy: float | None = None, client_bound: bool = False, input_len: int = 64) -> PointSummary:
    """A closed-loop summary of 10 requests with the two axes set by hand (output, per-user tok/s)."""
    return PointSummary(model="m", engine="vllm", variant=variant, input_len=input_len, output_len=16, concurrency=c,
                        repeats=2, completed=10 - failed, failed=failed, output_throughput_tok_s=out,
                        per_user_tok_s=user, ttft_s=None, ttft_with_queue_s=None, tpot_s=None, itl_s=None,
                        e2el_s=None, prefill_throughput_tok_s=None, step_time_s=None,
                        slo={"met": met} if met is not None else None,
                        interference=({"wall_s": 2.0, "cpu_count": 2, "outside_share": busy,
                                       "outside_load_cpus": 2 * busy, "server_outside_tree": False}
                                      if busy is not None else None),
                        client_bound=client_bound or None,
                        client_bound_reason="client-bound: its event loop lagged" if client_bound else None)


def test_dominance_is_strict_on_one_axis():
    # (2, 2) beats (2, 1) (equal first axis, higher second); equal values beat neither
    assert dominates((2, 2), (2, 1)) and not dominates((2, 1), (2, 2))
    assert not dominates((2, 2), (2, 2))
    assert not dominates((3, 1), (1, 3)) and not dominates((1, 3), (3, 1))


def test_non_dominated_hand_worked():
    # (per-user, output): A (10, 100) B (20, 80) C (15, 70) D (30, 40) E (5, 120) F (20, 60)
    # C is beaten by B (20 >= 15, 80 >= 70); F by B (same 20, 80 > 60); A, B, D, E trade one axis for the other
    vals = [(10, 100), (20, 80), (15, 70), (30, 40), (5, 120), (20, 60)]
    assert non_dominated(vals) == [0, 1, 3, 4]


def test_ties_both_stay():
    # two points equal on both axes dominate neither: both on the frontier; a third equal on one axis and lower on
    # the other is beaten by them
    vals = [(10, 50), (10, 50), (10, 40)]
    assert non_dominated(vals) == [0, 1]
    # equal output throughput, per-user differs: only the higher per-user one stays
    assert non_dominated([(10, 50), (12, 50)]) == [1]


def test_one_point_is_its_own_frontier():
    pts = frontier_points([_s("default", 1, 50.0, 50.0)])
    assert [p.on_frontier for p in pts] == [True]
    assert non_dominated([]) == []


def test_all_dominated_but_one():
    # the fp8 point at c = 4 (per-user 60, output 240) is at or above every other on both axes
    ss = [_s("default", 1, 50.0, 50.0), _s("default", 2, 90.0, 45.0), _s("default", 4, 160.0, 40.0),
          _s("fp8", 1, 60.0, 60.0), _s("fp8", 4, 240.0, 60.0)]
    front = [(p.variant, p.concurrency) for p in frontier_points(ss) if p.on_frontier]
    assert front == [("fp8", 4)]


def test_excluded_point_that_would_dominate_stays_out_and_says_why():
    # default c = 8 (per-user 100, output 1000) would beat all; 6 of 10 requests failed (60 % > the 5 % limit),
    # so it is left out and the frontier is worked over the rest: c = 1 (50, 50) and c = 4 (40, 160) trade
    ss = [_s("default", 1, 50.0, 50.0), _s("default", 4, 160.0, 40.0), _s("default", 8, 1000.0, 100.0, failed=6)]
    pts = {p.concurrency: p for p in frontier_points(ss)}
    assert pts[8].excluded_reason and "6 of 10 requests failed" in pts[8].excluded_reason
    assert not pts[8].on_frontier and pts[1].on_frontier and pts[4].on_frontier


@pytest.mark.parametrize("kind", ["busy", "client_bound"])
def test_busy_and_client_bound_points_stay_out(kind):
    # a point whose machine had 90 % of its CPUs busy elsewhere (above the 25 % limit), or a client-bound one
    bad = _s("fp8", 8, 1000.0, 100.0, busy=0.9) if kind == "busy" else _s("fp8", 8, 1000.0, 100.0, client_bound=True)
    pts = frontier_points([_s("default", 1, 50.0, 50.0), bad])
    reason = pts[1].excluded_reason
    assert reason and ("machine busy" in reason if kind == "busy" else "client-bound" in reason)
    assert [p.on_frontier for p in pts] == [True, False]


def test_best_under_slo_is_the_highest_output_that_met_it():
    # c = 4 met the SLO at 160 tok/s; c = 8 (300 tok/s) did not; c = 2 met it at 90: best is c = 4
    ss = [_s("default", 2, 90.0, 45.0, met=True), _s("default", 4, 160.0, 40.0, met=True),
          _s("default", 8, 300.0, 20.0, met=False)]
    best, words = best_under_slo(frontier_points(ss))
    assert best is not None and best.concurrency == 4
    assert words == "best under the SLO: default at c = 4, 160.0 tok/s output, 40.0 tok/s per user"


def test_best_under_slo_none_without_slo_or_when_none_met():
    assert best_under_slo(frontier_points([_s("default", 1, 50.0, 50.0)]))[0] is None
    assert "no SLO" in best_under_slo(frontier_points([_s("default", 1, 50.0, 50.0)]))[1]
    none_met = best_under_slo(frontier_points([_s("default", 1, 50.0, 50.0, met=False)]))
    assert none_met == (None, "no included point met the SLO")


def test_frontiers_one_per_shape():
    # two shapes (input 64 and 1024): the frontier of each is of its own points only
    ss = [_s("default", 1, 50.0, 50.0), _s("fp8", 1, 70.0, 70.0),
          _s("default", 1, 30.0, 30.0, input_len=1024), _s("fp8", 1, 20.0, 35.0, input_len=1024)]
    fs = frontiers(ss)
    assert [f["input_len"] for f in fs] == [64, 1024]
    assert [(p["variant"], p["concurrency"]) for p in fs[0]["frontier"]] == [("fp8", 1)]
    # at 1024: default (30, 30) and fp8 (35, 20) trade; sorted by per-user throughput
    assert [p["variant"] for p in fs[1]["frontier"]] == ["default", "fp8"]
    assert fs[0]["variants"] == ["default", "fp8"]
