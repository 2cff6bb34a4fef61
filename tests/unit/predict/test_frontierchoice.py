"""Which predicted points could still be on the Pareto frontier (pipeline.predict.frontierchoice), worked by hand."""

from __future__ import annotations

import pytest

from pipeline.predict.frontierchoice import Candidate, contenders, frontier, uncertainty


def test_uncertainty_is_two_spreads_or_the_tolerance_without_one():
    assert uncertainty(0.004, 0.10) == pytest.approx(0.008)
    assert uncertainty(None, 0.10) == 0.10


def test_a_prediction_is_a_contender_unless_a_pessimistic_corner_beats_its_optimistic_one():
    # A measured (exact): 10 tok/s per user, 100 tok/s output.
    # P1 predicted 9 / 95 ± 1 %: optimistic corner 9.09 / 95.95, below A on both axes: beaten, not a contender.
    # P2 predicted 9 / 105 exactly: more output than A: on the frontier, a contender.
    # P3 predicted 9.95 / 99 ± 2 %: optimistic 10.149 / 100.98, above A on both: within its uncertainty, a contender.
    # P4 predicted 8 / 80 ± 1 %, beaten by P2's pessimistic corner (9 / 105, u = 0) as well as by A: not one.
    pts = [Candidate("a", 1, 100.0, 10.0, True), Candidate("b", 1, 95.0, 9.0, False, 0.01),
           Candidate("b", 2, 105.0, 9.0, False, 0.0), Candidate("b", 4, 99.0, 9.95, False, 0.02),
           Candidate("b", 8, 80.0, 8.0, False, 0.01)]
    assert contenders(pts) == [2, 3]
    # the frontier of the central values: A (most per-user) and P2 (most output); P3 is beaten by A at its centre
    assert frontier(pts) == [0, 2]


def test_no_contender_left_means_the_frontier_holds_measured_points_only():
    # P 9.5 / 96 ± 1 %: optimistic 9.595 / 96.96, beaten by the measured 10 / 100: no contender, and the frontier
    # (A alone) is measured.
    pts = [Candidate("a", 1, 100.0, 10.0, True), Candidate("b", 1, 96.0, 9.5, False, 0.01)]
    assert contenders(pts) == [] and frontier(pts) == [0]
