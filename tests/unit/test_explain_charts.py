"""Explainer chart builders and the numbers they are given (pure; no browser)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pipeline.capacity import capacity_table
from pipeline.hardware import load_profile
from pipeline.modelcards import expert_coverage, load_card
from pipeline.pages import explain


def _workload(model, kind, curve, roof):
    pts = [{"concurrency": c, "output_throughput_tok_s": t, "per_user_tok_s": t / c, "step_time_s": c / t}
           for c, t in curve]
    aps = [{"concurrency": c, "roofline_tok_s": r, "mbu": 0.8} for c, r in roof]
    m = {"model": model, "kind": kind, "engine": "llama.cpp", "input_len": 512, "output_len": 32,
         "scaling_efficiency": {str(c): t / (c * curve[0][1]) for c, t in curve}, "knee_threshold": 0.15}
    return SimpleNamespace(model=m, points=pts, analysis_points=aps, mbu=lambda c: 0.8)


DENSE = _workload("Qwen2.5-Coder-7B", "dense", [(1, 29.24), (32, 593.27)], [(1, 33.6), (32, 963.7)])
MOE = _workload("gpt-oss-20b", "moe", [(1, 81.11), (32, 614.82)], [(1, 84.5), (32, 700.3)])


def _values(spec):
    """Every inline data row of a (layered) Vega-Lite spec."""
    out = []
    for part in [spec, *spec.get("layer", [])]:
        out.extend((part.get("data") or {}).get("values", []))
    return out


def test_coverage_chart_plots_the_formula():
    cards = [load_card("gpt-oss-20b"), load_card("Qwen3-30B-A3B")]
    rows = _values(explain.coverage_chart(cards))
    r = next(v for v in rows if v["model"].startswith("gpt-oss-20b") and v["concurrency"] == 32)
    assert r["coverage"] == pytest.approx(1 - (1 - 4 / 32) ** 32)
    assert all(0 < v["coverage"] <= 1 for v in rows)


def test_overlay_and_efficiency_charts_carry_both_series():
    rows = _values(explain.roofline_overlay_chart([DENSE, MOE]))
    assert {(v["series"], v["concurrency"]) for v in rows if v["model"].startswith("gpt-oss")} == {
        ("measured", 1), ("measured", 32), ("roofline", 1), ("roofline", 32)}
    eff = _values(explain.moe_dense_efficiency_chart([DENSE, MOE]))
    moe32 = next(v for v in eff if v["kind"] == "moe" and v["concurrency"] == 32)
    assert moe32["efficiency"] == pytest.approx(614.82 / (32 * 81.11))


def test_ceiling_rows_by_hand():
    rows = explain.ceiling_rows([load_card("Llama-3.1-8B"), load_card("gpt-oss-20b")], 273, [MOE])
    l8, oss = rows
    assert l8["ceiling_tok_s"] == pytest.approx(273e9 / l8["card"].dense_bytes)
    # an MoE reads its dense part + k/E of its experts at B = 1
    assert oss["bytes_per_token"] == pytest.approx(oss["card"].dense_bytes + oss["card"].expert_bytes * 4 / 32)
    assert oss["measured"][0]["tok_s"] == 81.11
    spec = explain.ceilings_chart(rows)
    assert spec["layer"][0]["data"]["values"]


def test_crossover_of_a_dense_bf16_model_is_peak_over_bandwidth():
    # compute = memory when 2·B·P / peak = 2·P / bw  ->  B = peak / bw = 125e12 / 273e9 = 457.9
    assert explain.crossover_batch(load_card("Llama-3.1-8B"), 273, 125) == 458
    assert explain.crossover_batch(load_card("Llama-3.1-8B"), 273, None) is None


def test_capacity_and_kv_charts():
    spark = load_profile("dgx-spark").model_dump(mode="json")
    table = capacity_table(load_card("Llama-3.1-8B"), spark)
    rows = _values(explain.capacity_chart([table]))
    assert {(r["context"], r["sequences"]) for r in rows} == {(4096, 193), (8192, 96), (32768, 24), (131072, 6)}
    kv = _values(explain.kv_sequence_chart([load_card("gpt-oss-20b")]))
    assert next(r for r in kv if r["context"] == 8192)["gib"] == pytest.approx(
        2048 * (12 * 8192 + 12 * 128) / 2**30)


def test_explain_context_without_runs():
    ctx = explain.explain_context([], load_profile("dgx-spark").model_dump(mode="json"))
    assert ctx["dense"] is None and ctx["moe"] is None and ctx["measured_workloads"] == []
    assert ctx["worked"]["contexts"][1]["max_sequences"] == 96
    assert [c.name for c, _ in ctx["coverage_examples"]] == [c.name for c in ctx["moe_cards"]]
    assert ctx["coverage"](32, load_card("gpt-oss-20b")) == expert_coverage(32, 4, 32)
