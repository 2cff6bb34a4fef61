"""``batchmark predict`` of a committed run as a user runs it (a process): JSON, a bad option, too few points.

The unit tests of the calibrated model are tests/unit/predict/test_calibrate.py; this one starts
``python -m pipeline predict``, three times.
"""

import json
import subprocess
import sys


def test_cli_predict_committed_run_json_and_bad_option(tmp_path):
    run = "data/runs/20261130T010035Z-vm"
    out = subprocess.run([sys.executable, "-m", "pipeline", "predict", run, "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["run_id"] == "20261130T010035Z-vm"
    for m in doc["models"]:
        assert m["calibrated_on"] == ([1, 8, 64] if m["kind"] == "dense" else [1, 2, 64])
        assert {"concurrency", "calibration", "measured", "predicted"} <= set(m["points"][0])
    bad = subprocess.run([sys.executable, "-m", "pipeline", "predict", run, "--calibrate-on", "1,x"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "--calibrate-on: 'x'" in bad.stderr
    few = subprocess.run([sys.executable, "-m", "pipeline", "predict", run, "--calibrate-on", "1,64"],
                         capture_output=True, text=True)
    assert few.returncode == 0 and "three terms need three" in few.stdout


def test_predict_reproduces_the_simulated_spark_runs_moe_curves():
    """`batchmark predict` of the committed simulated Spark run (data/runs/20261202T030252Z-vm, made by the simulated
    server at the profile's routing prior): each MoE curve predicted from three of its points within 10 % at every
    other point.  Fault kind: a served MoE fitted at uniform routing, whose bytes grow faster than the curve's, missed
    gpt-oss-120b by up to 43 % and Qwen3-30B-A3B by 38 % (the fit cannot bend that way)."""
    from pipeline.analysis import stages
    from pipeline.analysis.analyze import hardware_block
    from pipeline.cards.modelcards import ModelCard
    from pipeline.store.runs import load_model_cards
    from pipeline.views.predict import predict_workload

    res = stages.load_run("20261202T030252Z-vm")
    hw = hardware_block(res.meta.get("hardware") or {}, res.meta.get("probe"))
    cards = {n: ModelCard.from_dict(d) for n, d in load_model_cards(res.run_dir).items()}
    servers = res.meta["server"]["servers"]
    checked = []
    for model in ("gpt-oss-120b", "qwen3-30b-a3b"):
        pts = [s for s in res.summaries if s.load == "closed" and s.model == model]
        rows = {r["concurrency"]: r for r in res.analysis["points"]
                if r.get("model") == model and r.get("concurrency") is not None}
        w = predict_workload(pts, rows, cards[model], hw, None, servers[model].get("limits"))
        assert w["kind"] == "moe" and w["error"] is None, w["error"]
        assert w["worst_abs_error"] <= 0.10, (model, w["worst_abs_error"])
        checked.append(model)
    assert checked == ["gpt-oss-120b", "qwen3-30b-a3b"]
