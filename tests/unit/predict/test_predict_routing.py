"""predict's engine-terms fit of a decode-phase MoE curve of distinct prompts (pipeline/views/predict.py,
pipeline/predict/enginefit.py): its experts' coverage grows with the batch, not held at k/E.

Fault kind pinned: every decode-phase curve was fitted as llama.cpp's benches decode (identical prompts: coverage k/E,
only the batched-kernel and compute terms grow with B), so a llama-benchy wave on vLLM — each request its own text —
was fitted to a step that grows linearly in B and saturated: calibrated on c = 1, 2, 16, it predicted 250.5 tok/s at
c = 32 against the 318.7 measured (−21 %).
"""

import pytest

from pipeline.cards.registry import load_card
from pipeline.cards.servedformat import ServedFormat, card_in_format
from pipeline.importers.base import summary
from pipeline.machine.hardware import load_profile
from pipeline.views.predict import distinct_prompts, predict_workload

#: kubis.ai, vLLM gpt-oss-120b on one DGX Spark, llama-benchy pp1024 tg128, c × t/s (req) (data/published/dgx-spark.yaml).
KUBIS = {1: 57.5, 2: 78.4, 4: 107.9, 8: 153.5, 16: 218.5, 32: 318.7}


def _predict(calibrate_on, distinct):
    card = card_in_format(load_card("gpt-oss-120b"),
                          ServedFormat(attention="mxfp4", head="mxfp4", experts="mxfp4", kv_cache="fp8", stated=True))
    rows = [summary("gpt-oss-120b", "vllm", 1024, 128, c, output_throughput_tok_s=t, step_time_s=c / t,
                    output_throughput_window="decode_phase") for c, t in KUBIS.items()]
    hw = {"bandwidth_gb_s": 273.0, "peak_tflops": load_profile("dgx-spark").compute_peak_tflops(), "name": "dgx-spark"}
    entry = predict_workload(rows, {}, card, hw, calibrate_on, distinct_prompts=distinct)
    assert entry["error"] is None and entry["method"] == "static_batch_engine_terms"
    return {p["concurrency"]: p for p in entry["points"]}, entry


def test_distinct_prompts_moe_curve_predicts_its_top_from_three_lower_points():
    """Calibrated on c = 1, 2, 16, c = 32 is predicted within 20 % of the 318.7 tok/s measured (the issue's target; the
    fit gives 334.1, +4.8 %), where identical routing gave 250.5 (−21 %).  The measured step's marginal cost falls with
    B (8.1 ms a sequence from 1 to 2, 1.7 ms from 16 to 32: 1 − (1 − 4/128)^B_eff filling), the shape only a growing
    coverage has."""
    got, entry = _predict([1, 2, 16], True)
    assert got[32]["error"]["output_throughput_tok_s"] == pytest.approx(0.048, abs=0.01)
    assert "distinct prompts" in entry["fit"]["words"] and "uniform routing" not in entry["fit"]["words"]
    old, _ = _predict([1, 2, 16], False)
    assert old[32]["error"]["output_throughput_tok_s"] == pytest.approx(-0.214, abs=0.01)


def test_distinct_prompts_default_calibration_within_ten_percent():
    """The default MoE calibration (c = 1, 2, 32) predicts c = 4, 8, 16 within 6 % (worst 5.7 %), where identical
    routing over-predicted them by 21–29 %."""
    got, entry = _predict(None, True)
    assert entry["calibrated_on"] == [1, 2, 32]
    assert entry["worst_abs_error"] == pytest.approx(0.057, abs=0.01)
    _, old = _predict(None, False)
    assert old["worst_abs_error"] == pytest.approx(0.287, abs=0.01)


def test_which_runs_decode_distinct_prompts():
    """A llama-benchy import (``source_tool``) decodes distinct prompts; a llama-batched-bench import and a measured
    run (no source tool) are fitted as identical prompts, as before."""
    assert distinct_prompts({"source_tool": "llama-benchy"})
    assert not distinct_prompts({"source_tool": "llama-batched-bench"})
    assert not distinct_prompts({})


def test_an_imported_llama_benchy_run_is_predicted_as_distinct_prompts(tmp_path):
    """The whole command's path: kubis.ai's curve as a llama-benchy JSON, imported (engine vllm, fp8 KV) and predicted
    by ``predict_run`` with ``--calibrate-on 1,2,16``: c = 32 within 20 % (282.7 tok/s, −11 %, with the card the import
    matched), where the identical-prompts fit gave 256.6 (−19.5 %); the fit's words name the routing."""
    import json

    from pipeline.importers import ImportOptions, import_run
    from pipeline.views.predict import predict_run

    m = lambda v: {"mean": v, "std": 0.0, "values": [v]}  # noqa: E731
    doc = {"version": "0.3.5", "model": "openai/gpt-oss-120b", "benchmarks": [
        {"concurrency": c, "context_size": 0, "prompt_size": 1024, "response_size": 128,
         "is_context_prefill_phase": False, "tg_throughput": m(t), "tg_req_throughput": m(t / c)}
        for c, t in KUBIS.items()]}
    src = tmp_path / "kubis.json"
    src.write_text(json.dumps(doc))
    run = import_run("llama-benchy", [src], "dgx-spark", run_id="kubis", runs_dir=tmp_path / "runs",
                     options=ImportOptions(engine="vllm", kv_cache="fp8"))
    entry = predict_run(run, [1, 2, 16])["models"][0]
    top = {p["concurrency"]: p for p in entry["points"]}[32]
    assert top["error"]["output_throughput_tok_s"] == pytest.approx(-0.113, abs=0.01)
    assert "distinct prompts" in entry["fit"]["words"]
