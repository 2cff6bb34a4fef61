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


def _line_groups(spec):
    """Rows of a (faceted, layered) spec grouped as Vega-Lite draws its lines: by facet, colour, strokeDash and detail."""
    inner = spec.get("spec", spec)
    line = next(part for part in [inner, *inner.get("layer", [])]
                if (part.get("mark") or {}) in ("line", {"type": "line"}) or (part.get("mark") or {}).get("type") == "line")
    fields = [spec["facet"]["field"]] if "facet" in spec else []
    fields += [line["encoding"][ch]["field"] for ch in ("color", "strokeDash", "detail") if ch in line["encoding"]]
    groups = {}
    for row in _values(spec):
        groups.setdefault(tuple(row[f] for f in fields), []).append(row["concurrency"])
    return groups


# Two runs of the same model and prompt, and the same model at another prompt length (the imported
# llama.cpp run holds 512, 4096 and 8192-token prompts): each must be a line of its own.
LONG = _workload("Qwen2.5-Coder-7B", "dense", [(1, 27.5), (32, 268.2)], [(1, 30.0), (32, 500.0)])
LONG.model["input_len"] = 8192
SAME_WORKLOADS = [("run-a (dgx-spark)", DENSE), ("run-b (dgx-spark)", DENSE), ("run-a (dgx-spark)", LONG),
                  ("run-a (dgx-spark)", MOE)]


@pytest.mark.parametrize("builder", [explain.roofline_overlay_chart, explain.step_time_chart,
                                     explain.moe_dense_efficiency_chart])
def test_each_line_is_one_workload(builder):
    """Regression (fault kind: merged series): lines of different prompt lengths and runs were joined into one
    polyline with vertical jumps. Expected: 4 workloads x (2 series on the overlay, else 1) lines, each with
    one point per concurrency (1 and 32, from _workload above)."""
    groups = _line_groups(builder(SAME_WORKLOADS))
    assert all(sorted(cs) == [1, 32] for cs in groups.values()), groups
    assert len(groups) == 4 * (2 if builder is explain.roofline_overlay_chart else 1)
    assert {r["workload"] for r in _values(builder(SAME_WORKLOADS))} == {
        "run-a (dgx-spark) · Qwen2.5-Coder-7B (llama.cpp), 512 in / 32 out",
        "run-b (dgx-spark) · Qwen2.5-Coder-7B (llama.cpp), 512 in / 32 out",
        "run-a (dgx-spark) · Qwen2.5-Coder-7B (llama.cpp), 8192 in / 32 out",
        "run-a (dgx-spark) · gpt-oss-20b (llama.cpp), 512 in / 32 out"}


@pytest.mark.parametrize("builder", [explain.roofline_overlay_chart, explain.step_time_chart])
def test_knee_facets_are_legible(builder):
    """Regression (fault kind: unreadable chart): four 260 px panels in one row were drawn with ~5 px text.
    Expected: two panels a row (explain.PANEL_COLUMNS), each at least 350 px wide, axis labels of 12 px."""
    spec = builder(SAME_WORKLOADS)
    assert spec["columns"] == 2 and spec["spec"]["width"] >= 350 and spec["spec"]["height"] >= 240
    assert spec["config"]["axis"]["labelFontSize"] >= 12


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
