"""Adaptive sweeps: the choice rule, the stopping rule, the anchoring and a whole walk, on values
worked by hand; and one simulated adaptive sweep in a scratch project (what is stored, what ``show`` prints)."""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

import pytest

from pipeline import cli
from pipeline.predict.adaptive import StopRule, anchored, decisive_points, initial_points, next_point, settled, walk
from pipeline.predict.calibrate import CalibrationError
from pipeline.config.sweepconfig import parse_config
from pipeline.core.errors import BatchmarkError

GRID = [1, 2, 4, 8, 16, 32, 64, 128, 256]


def test_initial_points_are_smallest_largest_fitting_and_the_calibration_middle():
    # dense: log2 middle of [1 .. 128] is 3.5; 8 and 16 tie at 0.5 and default_calibration takes the lower
    assert [c for c, _ in initial_points(GRID[:-1], "dense")] == [1, 128, 8]
    # MoE: the first doubling
    assert [c for c, _ in initial_points(GRID, "moe")] == [1, 256, 2]
    assert [c for c, _ in initial_points([1, 2], "dense")] == [1, 2]


def test_decisive_points():
    assert decisive_points(GRID, 128) == [64, 128, 256]
    assert decisive_points(GRID, 1) == [1, 2]
    assert decisive_points(GRID, None) == [128, 256]  # not reached: the last doubling


def test_next_point_bisects_on_log2_c_towards_the_knee():
    # knee 128 predicted, measured 1, 16, 256: decisive 64, 128, 256; unmeasured 64 and 128, the knee's own is 128;
    # around it measured 16 and 256, log2 midpoint (4 + 8) / 2 = 6 -> c = 64
    c, why = next_point(GRID, GRID, [1, 16, 256], 128)
    assert c == 64 and "between measured c = 16 and c = 256" in why
    # then 64 and 256 around 128: midpoint 7 -> 128
    assert next_point(GRID, GRID, [1, 16, 64, 256], 128)[0] == 128
    # not reached, measured 1, 2, 256: target 128, between 2 and 256 the midpoint 4.5 ties 16 and 32; 32 is nearer 128
    assert next_point(GRID, GRID, [1, 2, 256], None)[0] == 32
    # a non-fitting decisive point is never chosen: qwen3-32b's 256; 64 is the one left, bisected between 8 and 128
    assert next_point(GRID, GRID[:-1], [1, 8, 128], 128)[0] == 32


def test_next_point_after_the_knee_rests_on_measurements():
    measured = [1, 16, 64, 128, 256]
    spread = {2: 0.01, 4: 0.03, 8: 0.02, 32: 0.005}
    c, why = next_point(GRID, GRID, measured, 128, spread)
    assert c == 4 and "3.0%" in why  # the largest spread
    # no spread known: the farthest in log2 c from a measurement: 4 is 2 doublings from 1 and from 16, 2 and 8 one
    c, why = next_point(GRID, GRID, measured, 128, None)
    assert c == 4 and "2 doublings" in why
    assert next_point(GRID, GRID, GRID, 128) is None


def test_stopping_rule():
    assert settled(128, 128, 109.0, 100.0, 0.10)[0]          # +9 %, knee kept
    stop, why = settled(128, 128, 112.0, 100.0, 0.10)       # +12 % > 10 %
    assert not stop and "+12.0%" in why
    stop, why = settled(64, 128, 100.0, 100.0, 0.10)        # exact, but the knee moved
    assert not stop and "moved from c = 64 to c = 128" in why
    stop, why = settled(None, None, 95.0, 100.0, 0.10)     # -5 %, "not reached" both times
    assert stop and "not reached" in why
    assert not settled(16, 16, None, 100.0, 0.10)[0]         # nothing to compare with


def test_anchored_carries_the_measured_ratio_between_measurements():
    # measured/predicted: c = 1: 10 / 12.5 = 0.8, c = 4: 36 / 40 = 0.9; c = 2 is halfway in log2 c: 0.85 × 20 = 17;
    # c = 8 lies beyond the last measurement: its ratio 0.9 × 80 = 72
    pred = {1: {"output_throughput_tok_s": 12.5}, 2: {"output_throughput_tok_s": 20.0},
            4: {"output_throughput_tok_s": 40.0}, 8: {"output_throughput_tok_s": 80.0}}
    out = anchored([1, 2, 4, 8], {1: 10.0, 4: 36.0}, pred)
    assert [round(out[c]["output_throughput_tok_s"], 9) for c in (1, 2, 4, 8)] == [10.0, 17.0, 36.0, 72.0]
    assert out[2]["model_tok_s"] == 20.0


# A synthetic curve: what the "hardware" measures, and the model's shape, which overestimates the top.
TRUE = {1: 10.0, 2: 19.0, 4: 36.0, 8: 64.0, 16: 100.0, 32: 110.0, 64: 112.0}
MODEL = {1: 10.0, 2: 20.0, 4: 40.0, 8: 80.0, 16: 120.0, 32: 130.0, 64: 132.0}


def _walk(tolerance: float, bracket: bool = False):
    calls = []

    def measure(c: int, reason: str) -> float:
        calls.append(c)
        return TRUE[c]

    def predict():
        return {c: {"output_throughput_tok_s": v, "spread": None} for c, v in MODEL.items()}, {"terms": "fake"}
    return walk(sorted(TRUE), sorted(TRUE), "dense", measure, predict, StopRule(0.15, tolerance, bracket)), calls


def test_walk_on_a_synthetic_curve_chooses_what_is_worked_by_hand():
    # Worked by hand:
    # 1. measure 1, 64 (the largest), 8 (log2 middle of 0 and 6): ratios 1.0, 0.8, 112/132 = 0.84848.
    # 2. anchored: 16 at log2 4, a third of the way from 8 to 64: 0.8 + 0.04848 / 3 = 0.81616 -> 97.94;
    #    32: 0.8 + 0.04848 · 2/3 = 0.83232 -> 108.20.  Gains 8->16 +53 %, 16->32 +10.5 %, 32->64 +3.5 %: knee 16.
    # 3. decisive 8, 16, 32; unmeasured 16, 32; the knee's own is 16; around it 8 and 64, log2 midpoint 4.5 ties 16
    #    and 32, 16 is nearer the knee -> measure 16: 100 against 97.94 predicted (-2.06 %).
    # 4. refit: 32 now between 16 (0.8333) and 64 (0.84848): 0.84091 -> 109.32; knee still 16; |-2.06 %| <= 10 %: stop.
    res, calls = _walk(0.10)
    assert calls == [1, 64, 8, 16]
    assert res.knee_concurrency == 16
    rows = {p["concurrency"]: p for p in res.points}
    assert [c for c in rows if rows[c]["measured"]] == [1, 8, 16, 64]
    assert rows[16]["predicted_before_tok_s"] == pytest.approx(120 * (0.8 + (112 / 132 - 0.8) / 3))
    assert rows[16]["error"] == pytest.approx((97.9394 - 100) / 100, abs=1e-5)
    assert rows[32]["output_throughput_tok_s"] == pytest.approx(130 * (100 / 120 + (112 / 132 - 100 / 120) / 2))
    assert not rows[32]["measured"] and rows[32]["reason"] == "not needed (the knee settled without it)"
    assert res.stopped.startswith("settled: the knee stayed at c = 16")
    assert [s["settled"] for s in res.steps] == [True]


def test_walk_goes_on_while_the_measurement_is_off_its_prediction():
    # tolerance 1 %: step 4's -2.06 % is too far; the next decisive point 32 (between 16 and 64) is measured:
    # 110 against 109.32 predicted (-0.62 %), knee still 16: stop.
    res, calls = _walk(0.01)
    assert calls == [1, 64, 8, 16, 32]
    assert [s["settled"] for s in res.steps] == [False, True]
    assert res.steps[1]["predicted_tok_s"] == pytest.approx(130 * (100 / 120 + (112 / 132 - 100 / 120) / 2))


def test_walk_with_bracket_stops_only_once_the_knee_rests_on_measurements():
    # As worked above, step 4 settles (knee 16, -2.06 %) but 32, a deciding point of the knee (8, 16, 32), is
    # unmeasured: the walk goes on to 32 (the one decisive point left, between 16 and 64): 110 against 109.32
    # (-0.62 %), knee still 16, every deciding point measured: stop.  (The tuning space's curves walk so.)
    res, calls = _walk(0.10, bracket=True)
    assert calls == [1, 64, 8, 16, 32]
    assert [s["settled"] for s in res.steps] == [False, True]
    assert res.steps[0]["why"].endswith("but c = 32, which decides it, is not measured")
    assert res.knee_concurrency == 16


def test_walk_without_a_fit_measures_every_fitting_point():
    calls = []

    def measure(c: int, reason: str) -> float:
        calls.append(c)
        return TRUE[c]

    def predict():
        raise CalibrationError("the points contradict the model")
    res = walk(sorted(TRUE), [1, 2, 4, 8, 16, 32], "dense", measure, predict, StopRule(0.15, 0.1), {64: "KV full"})
    assert calls == [1, 32, 4, 2, 8, 16]
    rows = {p["concurrency"]: p for p in res.points}
    assert rows[64] == {**rows[64], "measured": False, "reason": "does not fit (KV full)"}
    assert "contradict" in res.stopped and res.knee_concurrency == 16  # knee of the measured points 1 .. 32


def _cfg(extra: str, grid: str = "[1, 2, 4]") -> str:
    return (f"name: a\nhardware: dgx-spark\nbackend: simulated\nconcurrency: {grid}\n"
            f"models:\n  - name: m\n    card: Llama-3.1-8B\n{extra}")


def test_config_adaptive_validated_with_the_field_named():
    import yaml
    cfg = parse_config(yaml.safe_load(_cfg("adaptive:\n  tolerance: 0.05\n")))
    assert cfg.adaptive.tolerance == 0.05
    assert parse_config(yaml.safe_load(_cfg("adaptive: {}\n"))).adaptive.tolerance == 0.10
    with pytest.raises(BatchmarkError, match="adaptive"):
        parse_config(yaml.safe_load(_cfg("adaptive: {}\n", "[1, 2]")))
    with pytest.raises(BatchmarkError, match="tolerance"):
        parse_config(yaml.safe_load(_cfg("adaptive:\n  tolerance: 0\n")))
    with pytest.raises(BatchmarkError, match="toleranse"):
        parse_config(yaml.safe_load(_cfg("adaptive:\n  toleranse: 0.1\n")))


SIM = """name: sim-adaptive
hardware: dgx-spark
backend: simulated
input_len: 128
output_len: 16
concurrency: [1, 2, 4, 8, 16, 32, 64]
repeats: 2
adaptive:
  tolerance: 0.10
simulated:
  step_time_cv: 0.02
models:
  - name: llama-3.1-8b-instruct
    card: Llama-3.1-8B
"""


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(list(args))
    return rc, out.getvalue(), err.getvalue()


def test_a_simulated_adaptive_sweep_stores_measurements_only_and_show_says_which_is_which(scratch_root: Path):
    cfg = scratch_root / "config" / "sim-adaptive.yaml"
    cfg.write_text(SIM)
    rc, out, err = run_cli("sweep", "--config", str(cfg), "--run-id", "20261201T000000Z-ad", "--no-progress")
    assert rc == 0, err
    run = Path(out.strip().splitlines()[-1])
    block = json.loads((run / "run.json").read_text())["adaptive"]
    m = block["models"]["llama-3.1-8b-instruct"]
    assert block["tolerance"] == 0.10 and [p["concurrency"] for p in m["points"]] == [1, 2, 4, 8, 16, 32, 64]
    measured = [p["concurrency"] for p in m["points"] if p["measured"]]
    # dense: 1, the largest (64) and the log2 middle (8) first
    first3 = sorted((p["order"], p["concurrency"]) for p in m["points"] if p["measured"])[:3]
    assert [c for _, c in first3] == [1, 64, 8]
    assert len(measured) < 7 and m["stopped"]
    # predictions are never stored as measurements: only measured points have record files, each saying why
    files = {json.loads(f.read_text())["point"]["concurrency"]: json.loads(f.read_text())
             for f in (run / "points").rglob("*.json")}
    assert sorted(files) == sorted(measured)
    assert all(files[c]["meta"]["adaptive"]["reason"] for c in measured)
    for p in m["points"]:
        if not p["measured"]:
            assert p["predicted"]["output_throughput_tok_s"] > 0 and p["reason"]
    rc, text, err = run_cli("show", run.name)
    assert rc == 0, err
    assert "adaptive sweep (tolerance 10%)" in text
    assert text.count("PREDICTED") == 7 - len(measured)
    rc, js, err = run_cli("show", run.name, "--json")
    doc = json.loads(js)
    assert doc["models"][0]["adaptive"]["knee_concurrency"] == m["knee_concurrency"]
    assert math.isfinite(doc["models"][0]["adaptive"]["points"][0]["output_throughput_tok_s"])
