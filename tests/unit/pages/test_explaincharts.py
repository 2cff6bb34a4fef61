"""Explainer chart builders and the numbers they are given (pure; no browser)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pipeline.analysis.capacity import capacity_table
from pipeline.machine.hardware import load_profile
from pipeline.cards.registry import load_card
from pipeline.cards.stepcost import expert_coverage
from pipeline.pages import explain, explaincharts


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


@pytest.mark.parametrize("builder", [explaincharts.roofline_overlay_chart, explaincharts.step_time_chart,
                                     explaincharts.moe_dense_efficiency_chart])
def test_each_line_is_one_workload(builder):
    """Regression (fault kind: merged series): lines of different prompt lengths and runs were joined into one
    polyline with vertical jumps. Expected: 4 workloads x (2 series on the overlay, else 1) lines, each with
    one point per concurrency (1 and 32, from _workload above)."""
    groups = _line_groups(builder(SAME_WORKLOADS))
    assert all(sorted(cs) == [1, 32] for cs in groups.values()), groups
    assert len(groups) == 4 * (2 if builder is explaincharts.roofline_overlay_chart else 1)
    assert {r["workload"] for r in _values(builder(SAME_WORKLOADS))} == {
        "run-a (dgx-spark) · Qwen2.5-Coder-7B (llama.cpp), 512 in / 32 out",
        "run-b (dgx-spark) · Qwen2.5-Coder-7B (llama.cpp), 512 in / 32 out",
        "run-a (dgx-spark) · Qwen2.5-Coder-7B (llama.cpp), 8192 in / 32 out",
        "run-a (dgx-spark) · gpt-oss-20b (llama.cpp), 512 in / 32 out"}


@pytest.mark.parametrize("builder", [explaincharts.roofline_overlay_chart, explaincharts.step_time_chart])
def test_knee_facets_are_legible(builder):
    """Regression (fault kind: unreadable chart): four 260 px panels in one row were drawn with ~5 px text.
    Expected: two panels a row (explaincharts.PANEL_COLUMNS), each at least 350 px wide, axis labels of 12 px."""
    spec = builder(SAME_WORKLOADS)
    assert spec["columns"] == 2 and spec["spec"]["width"] >= 350 and spec["spec"]["height"] >= 240
    assert spec["config"]["axis"]["labelFontSize"] >= 12


def test_coverage_chart_plots_the_formula():
    cards = [load_card("gpt-oss-20b"), load_card("Qwen3-30B-A3B")]
    rows = _values(explaincharts.coverage_chart(cards))
    r = next(v for v in rows if v["model"].startswith("gpt-oss-20b") and v["concurrency"] == 32)
    assert r["coverage"] == pytest.approx(1 - (1 - 4 / 32) ** 32)
    assert all(0 < v["coverage"] <= 1 for v in rows)


def test_overlay_and_efficiency_charts_carry_both_series():
    rows = _values(explaincharts.roofline_overlay_chart([DENSE, MOE]))
    assert {(v["series"], v["concurrency"]) for v in rows if v["model"].startswith("gpt-oss")} == {
        ("measured", 1), ("measured", 32), ("roofline", 1), ("roofline", 32)}
    eff = _values(explaincharts.moe_dense_efficiency_chart([DENSE, MOE]))
    moe32 = next(v for v in eff if v["kind"] == "moe" and v["concurrency"] == 32)
    assert moe32["efficiency"] == pytest.approx(614.82 / (32 * 81.11))


def test_ceiling_rows_by_hand():
    rows = explain.ceiling_rows([load_card("Llama-3.1-8B"), load_card("gpt-oss-20b")], 273, [MOE])
    l8, oss = rows
    assert l8["ceiling_tok_s"] == pytest.approx(273e9 / l8["card"].dense_bytes)
    # an MoE reads its dense part + k/E of its experts at B = 1
    assert oss["bytes_per_token"] == pytest.approx(oss["card"].dense_bytes + oss["card"].expert_bytes * 4 / 32)
    assert oss["measured"][0]["tok_s"] == 81.11
    spec = explaincharts.ceilings_chart(rows)
    assert spec["layer"][0]["data"]["values"]


def test_ceiling_rows_as_vllm_serves_on_a_spark():
    """vLLM's DGX Spark recipe for gpt-oss (--mxfp4-layers moe,qkv,o,lm_head, spark-vllm-docker, as kubis.ai ran
    it): gpt-oss-120b's dense part in MXFP4 is 842,834,304 B (tests/unit/cards/test_servedformat.py, by hand) and
    4 of its 128 experts 60,993,699,840 × 4 / 128 = 1,906,053,120 B: 273e9 / 2,748,887,424 = 99.3 tok/s, above the
    checkpoint's (bf16 attention and head).  A dense bf16 card is served as it is: no such column."""
    rows = explain.ceiling_rows([load_card("gpt-oss-120b"), load_card("Llama-3.1-8B")], 273, hardware="dgx-spark")
    oss, l8 = rows
    assert oss["served"]["ceiling_tok_s"] == pytest.approx(273e9 / (842_834_304 + 1_906_053_120)) \
        == pytest.approx(99.31, abs=0.01)
    assert oss["served"]["ceiling_tok_s"] > oss["ceiling_tok_s"] and "kubis.ai" in oss["served"]["source"]
    assert l8["served"] is None
    assert explain.ceiling_rows([load_card("gpt-oss-120b")], 273)[0]["served"] is None


def test_crossover_of_a_dense_bf16_model_is_peak_over_bandwidth():
    # compute = memory when 2·B·P / peak = 2·P / bw  ->  B = peak / bw = 125e12 / 273e9 = 457.9
    assert explain.crossover_batch(load_card("Llama-3.1-8B"), 273, 125) == 458
    assert explain.crossover_batch(load_card("Llama-3.1-8B"), 273, None) is None
    # at the DGX Spark's measured 92.3 TFLOP/s (data/hardware/dgx-spark.yaml): 92.3e12 / 273e9 = 338.1
    assert explain.crossover_batch(load_card("Llama-3.1-8B"), 273, 92.3) == 339


def test_crossover_under_vllms_fitted_terms_on_a_spark():
    """The knee page's crossover as ``plan`` costs a step: vLLM's terms of data/hardware/dgx-spark.yaml (reads at
    0.799 × 273 GB/s; routed experts' matmuls at 0.139 × 92.3 TFLOP/s, every other matmul at 1.0 × 92.3), the reads and
    the matmuls added; compute binds from the B at which the matmuls cost at least the reads."""
    from pipeline.pages.explainbasis import served_cards, step_basis

    basis = step_basis(load_profile("dgx-spark").model_dump(mode="json"))
    assert (basis["peak_tflops"], basis["peak_basis"], basis["spec_tflops"]) == (92.3, "measured", 125)
    terms = basis["terms"]
    # Llama-3.1-8B bf16: dense bytes 15,009,849,344 = 2 × its 7,504,924,672 matmul parameters, so the reads
    # 2·P / (0.799 × 273e9) meet the matmuls 2·B·P / (1.0 × 92.3e12) at B = 92.3e12 / (0.799 × 273e9) = 423.2
    assert explain.crossover_batch(load_card("Llama-3.1-8B"), 273, 92.3, terms=terms) == 424
    # gpt-oss-120b as vLLM serves it on a Spark (MXFP4 throughout): dense 842,834,304 B, experts 60,993,699,840 B.
    # Reads: 3.864 ms + 279.63 ms × coverage, coverage 1 − (124/128)^B_eff at the profile's s = 7.84,
    # B_eff = 1 + (B − 1) / (1 + (B − 1) / 7.84).  Matmuls per sequence: the experts' 2 × 114,701,598,720 × 4/128 =
    # 7.169e9 FLOP at 12.83 TFLOP/s = 0.5588 ms, the rest 2 × 5,132,849,472 − 7.169e9 = 3.097e9 at 92.3 = 0.0336 ms.
    #   B = 116: B_eff 8.340, coverage 0.23263, reads 68.91 ms; matmuls 116 × 0.5923 = 68.71 ms (reads larger)
    #   B = 117: B_eff 8.344, coverage 0.23271, reads 68.94 ms; matmuls 117 × 0.5923 = 69.30 ms (matmuls larger)
    oss = served_cards([load_card("gpt-oss-120b")], "dgx-spark")[0]
    assert oss.quantization == "mxfp4,kv:fp8"
    assert explain.crossover_batch(oss, 273, 92.3, terms=terms) == 117
    # the spec roofline of the checkpoint (bf16 + MXFP4 experts) at 125 TFLOP/s, as the knee page's last column
    assert explain.crossover_batch(load_card("gpt-oss-120b"), 273, 125) == 2859


def test_the_card_roofline_labels_the_spec_roof_as_the_spec():
    """The solid lines are the plan's step (vLLM's fitted terms at the measured 92.3 TFLOP/s), the dashed ones the
    roofline at the spec sheet's 125: each series says which it is."""
    from pipeline.pages.explainbasis import step_basis, step_rows

    basis = step_basis(load_profile("dgx-spark").model_dump(mode="json"))
    rows = step_rows([load_card("Llama-3.1-8B")], [1], basis)
    by = {r["series"]: r for r in rows if r["panel"].startswith("step")}
    assert set(by) == {"as plan costs it (vLLM's fitted terms, 92.3 TFLOP/s measured)",
                       "roofline at the spec sheet's 125 TFLOP/s"}
    # plan at B = 1: 3.84 ms + 15,009,849,344 / (0.799 × 273e9) + 2 × 7,504,924,672 / (1.0 × 92.3e12)
    #              = 3.84 + 68.813 + 0.163 = 72.82 ms; the spec roofline: 15,009,849,344 / 273e9 = 54.98 ms
    assert by["as plan costs it (vLLM's fitted terms, 92.3 TFLOP/s measured)"]["tok_s"] == pytest.approx(72.82, abs=0.01)
    assert by["roofline at the spec sheet's 125 TFLOP/s"]["tok_s"] == pytest.approx(54.98, abs=0.01)


def test_capacity_and_kv_charts():
    spark = load_profile("dgx-spark").model_dump(mode="json")
    table = capacity_table(load_card("Llama-3.1-8B"), spark)
    rows = _values(explaincharts.capacity_chart([table]))
    # tests/unit/analysis/test_capacity.py: 108.8 GB usable (gpu_memory_utilization 0.85), 92.74e9 B free for KV
    assert {(r["context"], r["sequences"]) for r in rows} == {(4096, 172), (8192, 86), (32768, 21), (131072, 5)}
    kv = _values(explaincharts.kv_sequence_chart([load_card("gpt-oss-20b")]))
    # GB = 1e9 bytes, as everywhere capacity is shown (one unit system)
    assert next(r for r in kv if r["context"] == 8192)["gb"] == pytest.approx(
        2048 * (12 * 8192 + 12 * 128) / 1e9)


def test_explain_context_without_runs():
    ctx = explain.explain_context([], load_profile("dgx-spark").model_dump(mode="json"), explain.worked_example_model())
    assert ctx["dense"] is None and ctx["moe"] is None and ctx["measured_workloads"] == []
    assert ctx["worked"]["contexts"][1]["max_sequences"] == 86  # tests/unit/analysis/test_capacity.py
    assert [c.name for c, _ in ctx["coverage_examples"]] == [c.name for c in ctx["moe_cards"]]
    assert ctx["coverage"](32, load_card("gpt-oss-20b")) == expert_coverage(32, 4, 32)


def _run(run_id, hardware, workloads):
    return SimpleNamespace(run_id=run_id, meta={}, hardware=hardware, workloads=workloads, flagged=False,
                           quality={"verdict": "clean", "reasons": []})


def _with_roofline(w, bounds):
    for a, bound in zip(w.analysis_points, bounds):
        a["roofline_bound"] = bound
    return w


CPU_HW = {"name": "cpu", "bandwidth_gb_s_spec": None, "bandwidth_gb_s": 46.7, "peak_tflops_spec": None, "peak_tflops": 0.217}
SPARK_HW = {"name": "dgx-spark", "bandwidth_gb_s_spec": 273.0, "bandwidth_gb_s": 273.0, "peak_tflops_spec": 125.0,
            "peak_tflops": 125.0}


def test_batching_examples_name_their_hardware_and_flag_a_curve_off_the_bandwidth_picture():
    """Regression (fault kind: mixed hardware): the batching page described the DGX Spark and showed the CPU run
    without saying so, nor that on the CPU the per-user rate halved at B = 2. The CPU curve below is run
    20261129T161329Z-vm's dense-llama-190m (summaries.json: 28.91 tok/s at B = 1, 28.20 at B = 2, 347.60 at B = 64;
    analysis.json: roofline compute-bound from B = 16); the Spark curve is DENSE above."""
    cpu = _with_roofline(_workload("dense-llama-190m", "dense", [(1, 28.91), (2, 28.20), (16, 230.27), (64, 347.60)],
                                   [(1, 75.45), (2, 150.59), (16, 330.0), (64, 330.0)]),
                         ["memory", "memory", "compute", "compute"])
    spark = _with_roofline(_workload("Qwen2.5-Coder-7B", "dense", [(1, 29.24), (32, 593.27)], [(1, 33.6), (32, 963.7)]),
                           ["memory", "memory"])
    examples = explain.batching_examples([_run("20261129T161329Z-vm", CPU_HW, [cpu]),
                                          _run("reference-dgx-spark-llamacpp", SPARK_HW, [spark])], "dgx-spark")
    assert [e["hardware"]["name"] for e in examples] == ["dgx-spark", "cpu"]  # the profile's hardware first
    sp, cp = examples
    assert sp["check"]["follows"] and sp["hardware"]["bandwidth_source"] == "spec sheet"
    assert not cp["check"]["follows"] and cp["hardware"]["bandwidth_source"] == "measured by batchmark probe"
    assert cp["check"]["compute_from"] == 16
    (stall,) = cp["check"]["stalls"]
    assert (stall["a"]["concurrency"], stall["b"]["concurrency"]) == (1, 2)
    # step = B / throughput: (2 / 28.20) / (1 / 28.91) = 2.05; roofline (2 / 150.59) / (1 / 75.45) = 1.00
    assert stall["step_ratio"] == pytest.approx(2 * 28.91 / 28.20)
    assert stall["roofline_step_ratio"] == pytest.approx(2 * 75.45 / 150.59)


def test_batching_page_says_which_hardware_and_why_the_cpu_curve_differs():
    """The template fills every number from the examples: render batching.md.j2 with the two runs above."""
    from pipeline.machine.hardware import load_profile
    from pipeline.pages.render import make_env

    cpu = _with_roofline(_workload("dense-llama-190m", "dense", [(1, 28.91), (2, 28.20), (64, 347.60)],
                                   [(1, 75.45), (2, 150.59), (64, 330.0)]), ["memory", "memory", "compute"])
    cpu.model["engine"] = "transformers"
    spark = _with_roofline(_workload("Qwen2.5-Coder-7B", "dense", [(1, 29.24), (32, 593.27)], [(1, 33.6), (32, 963.7)]),
                           ["memory", "memory"])
    for w in (cpu, spark):
        w.model.update(peak_concurrency=w.points[-1]["concurrency"], single_stream_tok_s=w.points[0]["output_throughput_tok_s"],
                       peak_output_throughput_tok_s=w.points[-1]["output_throughput_tok_s"])
    views = [_run("20261129T161329Z-vm", CPU_HW, [cpu]), _run("reference-dgx-spark-llamacpp", SPARK_HW, [spark])]
    env = make_env(explain.Path(__file__).resolve().parents[3] / "templates")
    ctx = explain.explain_context(views, load_profile("dgx-spark").model_dump(mode="json"), explain.worked_example_model())
    text = env.get_template("explain/batching.md.j2").render(chart=lambda spec: "", **ctx)
    assert "## Measured on dgx-spark: Qwen2.5-Coder-7B" in text and "## Measured on cpu: dense-llama-190m" in text
    assert "on **cpu** (memory bandwidth 46.7 GB/s, measured by batchmark probe" in text
    cpu_part = text[text.index("## Measured on cpu"):]
    assert "**This curve does not follow the bandwidth-bound picture.**" in cpu_part
    assert "From B = 1 to B = 2 the output did not grow\n(28.91 → 28.20 tokens/s)" in cpu_part
    assert "from B = 64 on" in cpu_part  # first compute-bound point of this curve
    spark_part = text[:text.index("## Measured on cpu")]
    assert "This curve follows the bandwidth-bound picture" in spark_part


@pytest.mark.parametrize("builder", [explaincharts.roofline_overlay_chart, explaincharts.step_time_chart])
def test_knee_charts_colour_what_differs(builder):
    """Regression (fault kind: colour encodes a constant): the knee charts coloured by prompt / output
    length, which was the same for every committed run: three runs shared one colour and one legend entry.
    Expected: with one prompt length the colour is the run (3 runs, 3 colours); when prompt lengths differ too,
    run and prompt (SAME_WORKLOADS: run-a 512, run-b 512, run-a 8192 -> 3 colours; run-a's MoE shares run-a 512's)."""
    runs3 = [("r1 (cpu)", DENSE), ("r2 (cpu)", DENSE), ("r3 (cpu)", DENSE)]
    spec = builder(runs3)
    line = spec["spec"]["layer"][0] if "layer" in spec["spec"] else spec["spec"]
    assert line["encoding"]["color"]["field"] == "colour"
    assert line["encoding"]["color"]["legend"]["title"] == "run (hardware)"
    assert {r["colour"] for r in _values(spec)} == {"r1 (cpu)", "r2 (cpu)", "r3 (cpu)"}
    mixed = builder(SAME_WORKLOADS)
    assert {r["colour"] for r in _values(mixed)} == {
        "run-a (dgx-spark) · 512 in / 32 out", "run-b (dgx-spark) · 512 in / 32 out", "run-a (dgx-spark) · 8192 in / 32 out"}


def test_batching_page_says_why_per_user_times_b_is_not_the_total():
    """Regression (fault kind: arithmetic a reader cannot reconcile): the Batching explainer showed 5.36 tok/s per
    user and 184.6 tok/s for all users at B = 64, but 5.36 × 64 = 343: per-user throughput is 1 / TPOT, output
    throughput counts prefill and queueing too.  The same figures, rendered: 5.36 × 64 = 343.0 tok/s is said."""
    from pipeline.machine.hardware import load_profile
    from pipeline.pages.render import make_env

    cpu = _with_roofline(_workload("dense-llama-190m", "dense", [(1, 28.91), (2, 28.20), (64, 184.6)],
                                   [(1, 75.45), (2, 150.59), (64, 330.0)]), ["memory", "memory", "compute"])
    cpu.model.update(engine="vllm", peak_concurrency=64, single_stream_tok_s=28.91, peak_output_throughput_tok_s=184.6)
    cpu.points[0]["per_user_tok_s"], cpu.points[-1]["per_user_tok_s"] = 28.91, 5.36
    env = make_env(explain.Path(__file__).resolve().parents[3] / "templates")
    ctx = explain.explain_context([_run("20261129T161329Z-vm", CPU_HW, [cpu])],
                                  load_profile("dgx-spark").model_dump(mode="json"), explain.worked_example_model())
    text = " ".join(env.get_template("explain/batching.md.j2").render(chart=lambda spec: "", **ctx).split())
    assert "Why each user's rate × B is not the total: per-user throughput is 1 / TPOT" in text
    assert "(5.36 × 64 = 343.0 tok/s at B = 64)" in text and "(184.60 tok/s here)" in text


def test_card_roofline_leaves_out_a_model_that_does_not_fit():
    """Regression (fault kind: a chart that contradicts the Sizing page): the roofline chart drew Llama-3.1-70B in bf16
    on the DGX Spark, which the Sizing page says does not fit (141 GB of weights against 108.8 GB usable:
    min(128 × 0.85, 128 − 8), pipeline/analysis/capacity.py)."""
    from pipeline.analysis.capacity import usable_memory_gb
    from pipeline.cards.registry import load_card
    from pipeline.machine.hardware import load_profile

    hw = load_profile("dgx-spark").model_dump(mode="json")
    usable = usable_memory_gb(hw)["usable_gb"]
    assert usable == pytest.approx(108.8)
    cards = [load_card("Llama-3.1-8B"), load_card("Llama-3.1-70B")]
    from pipeline.pages.explainbasis import step_basis

    spec = explaincharts.card_roofline_chart(cards, step_basis(hw), "dgx-spark", usable_gb=usable)
    models = {r["model"] for r in _values(spec)}
    assert any(m.startswith("Llama-3.1-8B") for m in models) and not any("70B" in m for m in models)
    import json

    assert "Llama-3.1-70B (bf16) left out: weights 141 GB exceed 108.8 GB usable" in json.dumps(spec)


def test_a_profile_without_engine_terms_draws_the_spec_roofline_once_and_says_so():
    """data/hardware/h100-sxm.yaml states a spec peak (989 TFLOP/s) and no engine terms: the model-card chart is the
    roofline at that spec peak alone, labelled as the spec, and its crossover is the roofline's: a dense bf16 model
    meets it at B = peak / bandwidth = 989e12 / 3350e9 = 295.2 -> 296."""
    from pipeline.pages.explainbasis import step_basis, step_rows

    basis = step_basis(load_profile("h100-sxm").model_dump(mode="json"))
    assert basis["terms"] is None and (basis["peak_tflops"], basis["peak_basis"]) == (989, "spec")
    assert {r["series"] for r in step_rows([load_card("Llama-3.1-8B")], [1, 2], basis)} == {"roofline (989 TFLOP/s spec)"}
    assert explain.crossover_batch(load_card("Llama-3.1-8B"), 3350, 989) == 296


@pytest.mark.parametrize("name", ["gpt-oss-120b", "Llama-3.1-8B"])
def test_the_explainers_step_is_the_plans(name):
    """The model-card chart and the crossovers cost a decode step as ``batchmark plan``'s simulated server does (the
    server of config/spark.yaml's models: vLLM's terms of data/hardware/dgx-spark.yaml, the card as served), context 0;
    e.g. gpt-oss-120b at B = 1: 3.84 ms + 842,834,304 B / (0.799 × 273e9) = 3.864 ms + 60,993,699,840 B × 4/128 at
    that rate = 8.738 ms + the experts' 7.169e9 FLOP at 0.139 × 92.3e12 = 0.559 ms + the rest's 3.097e9 at 92.3e12 =
    0.034 ms, 17.035 ms."""
    import numpy as np

    from pipeline.config.sweepconfig import SimulatedOptions
    from pipeline.backends.simulated import server_for
    from pipeline.pages.explainbasis import served_cards, step_basis, step_s

    hw = load_profile("dgx-spark")
    basis = step_basis(hw.model_dump(mode="json"))
    card = served_cards([load_card(name)], "dgx-spark")[0]
    server = server_for(card, hw, SimulatedOptions(), 1024, 256, 64, "vllm")
    for b in (1, 8, 64):
        assert step_s(card, b, 0.0, 273, 92.3, basis["terms"])[0] == pytest.approx(
            server.decode_run_s(b, np.array([0.0]))[0], rel=1e-12)
    if name == "gpt-oss-120b":
        assert step_s(card, 1, 0.0, 273, 92.3, basis["terms"])[0] == pytest.approx(0.017035, abs=1e-6)
