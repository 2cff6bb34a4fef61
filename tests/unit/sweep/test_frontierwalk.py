"""The frontier walk's loop (pipeline.sweep.frontierwalk.frontier_model) on hand-made curves: what it measures, when
it stops (settled, or adaptive.frontier_points spent) and what run.json keeps.  The fits and the measuring are
stood in for (predictions and "true" figures given below), so the arithmetic is worked by hand.

One shape, variants a and b.  Measured: a c = 1 (50 tok/s per user, 50 output), a c = 4 (40, 160); b c = 1 (50, 50),
b c = 4 (30, 100).  Predicted, spread 1 % (uncertainty 2 %): a c = 2 (45, 100): optimistic corner (45.9, 102),
beaten by no pessimistic corner (a c = 1 has 50 output, a c = 4 40 per user): a contender; b c = 2 (40, 90):
optimistic (40.8, 91.8), beaten by a c = 2's pessimistic (44.1, 98): none.  Measuring a c = 2 (true: 45, 100)
settles it: b c = 2 is beaten by the measurement too.  The frontier: a c = 1 and b c = 1 (equal: both stay), a c = 2,
a c = 4.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import yaml

from pipeline.config.sweepconfig import parse_config
from pipeline.core.pointsummary import PointSummary
from pipeline.predict.adaptive import WalkResult
from pipeline.store import runs
from pipeline.sweep import frontierwalk
from pipeline.sweep.adaptivewalk import Curve

GRID = [1, 2, 4]
MEASURED = {"a": {1: (50.0, 50.0), 4: (40.0, 160.0)}, "b": {1: (50.0, 50.0), 4: (30.0, 100.0)}}
PREDICTED = {"a": {2: (45.0, 100.0)}, "b": {2: (40.0, 90.0)}}
TRUE = {("a", 2): (45.0, 100.0), ("b", 2): (40.0, 90.0)}


def _s(variant: str, c: int, per_user: float, out: float) -> PointSummary:
    return PointSummary(model="m", engine="simulated", variant=variant, input_len=64, output_len=16, concurrency=c,
                        repeats=2, completed=32, failed=0, output_throughput_tok_s=out, per_user_tok_s=per_user,
                        ttft_s=None, ttft_with_queue_s=None, tpot_s=None, itl_s=None, e2el_s=None,
                        prefill_throughput_tok_s=None, step_time_s=None, samples={})


def _sweep(tmp_path, frontier_points):
    cfg = parse_config(yaml.safe_load(
        "name: a\nhardware: dgx-spark\nbackend: simulated\nconcurrency: [1, 2, 4]\ninput_len: 64\noutput_len: 16\n"
        f"adaptive: {{frontier_points: {frontier_points}}}\nvariants: [{{name: a}}, {{name: b}}]\n"
        "models:\n  - name: m\n    card: Llama-3.1-8B\n"))
    run_dir = tmp_path / "run"
    runs.create_run(run_dir, {"source": "simulated"})
    curves = []
    for v in ("a", "b"):
        rows = [{"concurrency": c, "measured": c in MEASURED[v], "order": GRID.index(c) + 1 if c in MEASURED[v] else None,  # 1, 3
                 "reason": "calibration" if c in MEASURED[v] else "not needed (the knee settled without it)",
                 "output_throughput_tok_s": (MEASURED[v].get(c) or PREDICTED[v][c])[1]} for c in GRID]
        curves.append(Curve(SimpleNamespace(name="m"), v, cfg, f"m [{v}, 64/16]", None,
                            {c: _s(v, c, *pu_out) for c, pu_out in MEASURED[v].items()},
                            WalkResult(None, "settled", rows)))
    logged: list[str] = []
    return SimpleNamespace(cfg=cfg, curves=curves, run_dir=run_dir, log=logged.append, variant="a",
                           backend=SimpleNamespace(serving_engine=cfg.backend)), logged


@pytest.fixture
def stand_ins(monkeypatch):
    picked = []

    def predictions(sweep, cv):
        return {c: {"output_throughput_tok_s": out, "per_user_tok_s": pu, "spread": 0.01}
                for c, (pu, out) in PREDICTED[cv.variant].items() if c not in cv.summaries}

    def measure(sweep, cells, spec, todo):
        for cv, c, why in todo:
            picked.append((cv.variant, c, why))
            cv.summaries[c] = _s(cv.variant, c, *TRUE[(cv.variant, c)])
        return set()

    monkeypatch.setattr(frontierwalk, "curve_predictions", predictions)
    monkeypatch.setattr(frontierwalk, "measure_picks", measure)
    return picked


def test_the_walk_measures_the_contender_and_stops_once_the_frontier_is_measured(tmp_path, stand_ins):
    sweep, logged = _sweep(tmp_path, "null")
    frontierwalk.frontier_model(sweep, None, SimpleNamespace(name="m"))
    assert [(v, c) for v, c, _ in stand_ins] == [("a", 2)]
    assert stand_ins[0][2].startswith("may be on the frontier: predicted 100.0 tok/s output and 45.0 tok/s per user (± 2.0%)")
    block = json.loads((sweep.run_dir / "run.json").read_text())["adaptive"]
    f = block["frontiers"]["m 64/16"]
    assert [(p["variant"], p["concurrency"], p["measured"]) for p in f["frontier"]] == [
        ("a", 4, True), ("a", 2, True), ("a", 1, True), ("b", 1, True)]
    assert f["open"] == [] and f["stopped"].startswith("settled")
    row = next(p for p in block["models"]["m [a, 64/16]"]["points"] if p["concurrency"] == 2)
    assert row["measured"] and row["order"] == 4 and row["error"] == 0.0 and row["per_user_tok_s"] == 45.0
    b2 = next(p for p in block["models"]["m [b, 64/16]"]["points"] if p["concurrency"] == 2)
    assert not b2["measured"] and b2["per_user_tok_s"] == 40.0  # left a prediction, with both figures
    assert logged[-1].startswith("m: adaptive frontier: settled")


def test_a_spent_budget_stops_the_walk_and_says_what_could_still_be_on_the_frontier(tmp_path, stand_ins):
    sweep, _ = _sweep(tmp_path, 0)
    frontierwalk.frontier_model(sweep, None, SimpleNamespace(name="m"))
    assert stand_ins == []
    f = json.loads((sweep.run_dir / "run.json").read_text())["adaptive"]["frontiers"]["m 64/16"]
    assert f["stopped"] == ("budget spent: adaptive.frontier_points = 0; 1 predicted point(s) could still be on it")
    assert ("a", 2, False) in [(p["variant"], p["concurrency"], p["measured"]) for p in f["frontier"]]
    assert f["open"] == ["a at c = 2"]
