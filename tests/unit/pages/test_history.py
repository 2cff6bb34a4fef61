"""Steps in a lab's history: the penalized least-squares step finder (pipeline/diff/stats.py) and the
history views of the Changes page (pipeline/pages/history.py), with values worked by hand."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from pipeline.analysis import stages
from pipeline.diff.stats import detect_steps, segment_cost, step_penalty
from pipeline.pages.history import FIGURE_LABEL, history_views, levels, run_figures
from tests.runbuilder import H200_PROFILE, NOISE_A, NOISE_B, make_run, step_s


def test_detect_steps_hand_worked():
    """1, 1, 1, 2, 2, 2: one level costs Σ (v − 1.5)² = 6 × 0.25 = 1.5; two levels (a step at index 3) cost 0 + the
    penalty.  Penalty 1: 1 < 1.5, a step at 3; penalty 2: 2 > 1.5, no step (a tie, 1.5, keeps one level)."""
    v = [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]
    assert segment_cost(v, 0, 6) == pytest.approx(1.5)
    assert detect_steps(v, 1.0) == [3]
    assert detect_steps(v, 2.0) == [] and detect_steps(v, 1.5) == []
    # two steps: 0, 0, 5, 5, 1, 1 with penalty 1: levels 0 | 5 | 1 cost 2 (two steps), any fewer costs more
    # (one level: Σ(v − 2)² = 4 + 4 + 9 + 9 + 1 + 1 = 28)
    assert detect_steps([0.0, 0.0, 5.0, 5.0, 1.0, 1.0], 1.0) == [2, 4]
    assert detect_steps([3.0], 1.0) == [] and detect_steps([], 1.0) == []


def test_step_penalty_hand_worked():
    """100, 101, 99, 100, 80, 81, 79, 80, 80 (n = 9): successive |differences| 1, 2, 1, 20, 1, 2, 1, 0, median 1, so
    the robust σ = 1 / (0.6745 × √2) = 1.0484; the 2 % floor of the median |value| 81 is 1.62, larger: σ = 1.62 and
    the penalty is 2 × 1.62² × ln 9 = 11.533.  The drop from 100 to 80 (one level: Σ(v − 88.9)² ≈ 889) is a step at 4."""
    h = [100.0, 101.0, 99.0, 100.0, 80.0, 81.0, 79.0, 80.0, 80.0]
    assert step_penalty(h) == pytest.approx(2 * 1.62 ** 2 * math.log(9)) == pytest.approx(11.533, abs=1e-3)
    assert detect_steps(h, step_penalty(h)) == [4]
    assert levels(h, [4]) == pytest.approx([100.0] * 4 + [80.0] * 5)
    # noise alone (±2 %) is no step
    quiet = [100.0, 101.0, 99.0, 100.0, 102.0, 98.0, 100.0]
    assert detect_steps(quiet, step_penalty(quiet)) == []


def test_run_figures_of_a_hand_made_run(tmp_path: Path):
    # runbuilder: throughput at c = B is B / step_s(B) with step_s(B) = 0.01 × (1 + B / 8) (median multiplier 1.0);
    # the peak over c = 1, 2, 4 is at 4: 4 / 0.015 = 266.7 tok/s; per-user at c = 1: 1 / step_s(1) = 1 / 0.01125.
    r = stages.load_run(make_run(tmp_path, "a", models=("dense-a",), concurrency=(1, 2, 4)))
    figs = run_figures(r.summaries)[("dense-a", "transformers", "default", 64, 16)]
    assert figs["peak_tok_s"] == pytest.approx(4 / step_s(4))
    assert figs["single_stream_tok_s"] == pytest.approx(1 / step_s(1))
    assert figs["tpot_p50_ms"] == pytest.approx(step_s(1) * 1e3)


def test_history_finds_the_step_of_a_slowed_run(tmp_path: Path):
    """Five runs of one CPU config; from the fourth on, dense-a is 25 % slower at every concurrency (times × 1.25):
    its peak throughput steps down at run 4, moe-b has no step, and the h200 run (one run on its hardware) has no
    history.  Runs alternate B's and A's noise (median multipliers 0.995 and 1.0, throughput ∝ 1 / multiplier), so the
    level before is (1/0.995 + 1 + 1/0.995) / 3 = 1.00335 and after (1 + 1/0.995) / 2 / 1.25 = 0.80201 (× 4 / step_s(4)):
    0.80201 / 1.00335 − 1 = −20.1 %."""
    conc = (1, 2, 4)
    ids = [f"20261129T1{i}0000Z-r" for i in range(5)]
    for i, rid in enumerate(ids):
        slow = {("dense-a", c): 1.25 for c in conc} if i >= 3 else None
        make_run(tmp_path, rid, noise=NOISE_A if i % 2 else NOISE_B, slow=slow, concurrency=conc)
    make_run(tmp_path, "20261129T190000Z-h200", hardware=H200_PROFILE, concurrency=conc)
    loaded = {p.name: stages.load_run(p) for p in sorted(tmp_path.iterdir())}
    views = history_views(loaded)
    assert len(views) == 1 and views[0].runs == ids and views[0].hardware == "cpu"
    peak = [s for s in views[0].steps if s["figure"] == FIGURE_LABEL["peak_tok_s"]]
    assert [(s["workload"].split(" ·")[0], s["run"], s["change"]) for s in peak] == [("dense-a", ids[3], "-20.1%")]
    assert not [s for s in views[0].steps if s["workload"].startswith("moe-b")]
    rows = views[0].spec["datasets"] if "datasets" in views[0].spec else None
    data = rows or views[0].spec["data"]["values"]
    # 2 workloads × 4 figures × 5 runs, one row each
    assert len(data) == 2 * 4 * 5


def test_no_step_at_a_run_measured_on_a_busy_machine(tmp_path: Path):
    """No finding from a flagged run: the same five runs as above, but the slowed ones (4 and 5) were
    measured while other processes kept 90 % of the CPUs busy (tests/runbuilder.py ``busy``): they are drawn, with
    no level, and no step is found at them (the three quiet runs alone have none)."""
    conc = (1, 2, 4)
    ids = [f"20261129T1{i}0000Z-r" for i in range(5)]
    for i, rid in enumerate(ids):
        slow = {("dense-a", c): 1.25 for c in conc} if i >= 3 else None
        busy = {(m, c): 0.9 for m in ("dense-a", "moe-b") for c in conc} if i >= 3 else None
        make_run(tmp_path, rid, noise=NOISE_A if i % 2 else NOISE_B, slow=slow, concurrency=conc, busy=busy)
    loaded = {p.name: stages.load_run(p) for p in sorted(tmp_path.iterdir())}
    (view,) = history_views(loaded)
    assert view.runs == ids and view.steps == []
    data = view.spec["datasets"] if "datasets" in view.spec else view.spec["data"]["values"]
    data = next(iter(data.values())) if isinstance(data, dict) else data
    busy_rows = [r for r in data if r["run_id"] in ids[3:]]
    assert len(busy_rows) == 2 * 4 * 2 and all(r["level_pct"] is None for r in busy_rows)
