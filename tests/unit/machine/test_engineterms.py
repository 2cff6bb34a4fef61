"""Engine terms, the step model they drive, the harnesses and the fit (pipeline.cards.stepcost, pipeline.simulation.harness,
pipeline.predict.enginefit, the Spark profile's engines)."""

from __future__ import annotations

import math

import pytest

from pipeline.cards.registry import load_card
from pipeline.cards.servedformat import served_card
from pipeline.cards.stepcost import (coverage_at, effective_batch, engine_step_s, engine_terms_s, expert_coverage,
                                     kv_bytes_per_step, moe_kernel_factor, prefill_expert_read_s, prefill_flops)
from pipeline.simulation import harness
from pipeline.machine.engineterms import EngineTerms
from pipeline.machine.hardware import load_profile
from pipeline.predict.enginefit import CurveAxis, band, fit_curve, fit_prefill

BW = 273.0


def terms(**kw) -> EngineTerms:
    base = dict(step_overhead_s=0.004, bandwidth_fraction=0.8, compute_fraction=0.2, prefill_tflops={"default": 50.0},
                source="test")
    return EngineTerms(**{**base, **kw})


def test_effective_batch_lies_between_identical_and_uniform_routing():
    """B_eff = 1 + (B−1)/(1 + (B−1)/s): s → ∞ is uniform (B), s = 0 identical (1); s = 30 at B = 32: 1 + 31/(1 + 31/30)
    = 16.24, about half the batch.  Coverage k/E (4/128) at s = 0, uniform 1 − (124/128)^32 = 0.638 at None."""
    assert effective_batch(32, None) == 32
    assert effective_batch(32, 0.0) == 1.0
    assert effective_batch(32, 30.0) == pytest.approx(1 + 31 / (1 + 31 / 30))
    assert coverage_at(32, 4, 128, 0.0) == pytest.approx(4 / 128)
    assert coverage_at(32, 4, 128, None) == pytest.approx(expert_coverage(32, 4, 128)) == pytest.approx(1 - (124 / 128) ** 32)
    lo, mid, hi = (coverage_at(32, 4, 128, s) for s in (0.0, 30.0, None))
    assert lo < mid < hi


def test_the_batched_moe_kernel_grows_with_the_tokens_per_expert():
    """moe_kernel_factor = t^p / e from B = 2 on, t = B k / (E × coverage); worked by hand for gpt-oss-20b (k/E = 4/32),
    p = 0.5, e = 0.5: identical routing at B = 32 (coverage k/E, t = 32): 32^0.5 / 0.5 = 11.31; uniform routing at
    B = 8 (coverage 1 − (7/8)^8 = 0.6564, t = 8 × 0.125 / 0.6564 = 1.523): 1.523^0.5 / 0.5 = 2.468; B = 1: 1 (the
    mat-vec kernel); no exponent: the jump 1 / e alone."""
    card = served_card(load_card("gpt-oss-20b"), engine="llama.cpp")
    t = terms(expert_batched_fraction=0.5, expert_token_exponent=0.5)
    assert moe_kernel_factor(card, 32, 4 / 32, t) == pytest.approx(11.31, rel=1e-3)
    assert moe_kernel_factor(card, 8, 1 - (7 / 8) ** 8, t) == pytest.approx(2.468, rel=1e-3)
    assert moe_kernel_factor(card, 1, 4 / 32, t) == 1.0
    assert moe_kernel_factor(card, 32, 4 / 32, terms(expert_batched_fraction=0.5)) == pytest.approx(2.0)
    assert moe_kernel_factor(load_card("llama-3.1-8b"), 32, 1.0, t) == 1.0


def test_the_batched_moe_kernel_costs_active_expert_bytes_not_flops():
    """Under the Spark profile's llama.cpp terms, Qwen3-30B-A3B in Q8_0 (48 layers × 8 of 128 experts: 1.93 GB active,
    3.6 GFLOP a token) and gpt-oss-120b in MXFP4 (36 × 4 of 128: 1.91 GB, 7.2 GFLOP) pay batched-kernel terms in the
    ratio of their active expert bytes at B = 32 of identical prompts, not of their FLOPs — as llama-batched-bench on a
    DGX Spark measured (B = 2 → 32 adds 62 and 69 ms: ggml-org/llama.cpp benches/dgx-spark.md)."""
    from pipeline.cards.servedformat import ServedFormat, card_in_format

    hw = load_profile("dgx-spark")
    t = hw.engine_terms("llama.cpp")
    qwen = card_in_format(load_card("qwen3-30b-a3b"), ServedFormat(attention="q8_0", head="q8_0", experts="q8_0"))
    oss = served_card(load_card("gpt-oss-120b"), engine="llama.cpp")
    kern = {c.name: engine_terms_s(c, 32, 528, BW, 92.3, t, identical_routing=True)["moe_kernel"] for c in (qwen, oss)}
    active = {c.name: c.expert_bytes * c.experts_per_token / c.num_experts for c in (qwen, oss)}
    assert kern[qwen.name] / kern[oss.name] == pytest.approx(active[qwen.name] / active[oss.name], rel=1e-9)
    assert 0.95 < active[qwen.name] / active[oss.name] < 1.05


def test_engine_step_is_its_terms_added():
    """A dense card at B = 1: T = overhead + (dense + a × KV) / (f_bw × bw) + FLOPs / (f_c × peak), worked here."""
    card = load_card("llama-3.1-8b")
    t = terms(attention_factor=1.5)
    ctx = 2048
    mem = (card.dense_bytes + 1.5 * kv_bytes_per_step(card, 1, ctx)) / (BW * 1e9) / 0.8
    flops = 2 * (card.active_params - card.embedding_params) + 4 * ctx * card.num_layers * card.num_attention_heads * card.head_dim
    assert engine_step_s(card, 1, ctx, BW, 92.3, t) == pytest.approx(0.004 + mem + flops / (92.3e12 * 0.2))
    parts = engine_terms_s(card, 1, ctx, BW, 92.3, t)
    assert sum(parts.values()) == pytest.approx(engine_step_s(card, 1, ctx, BW, 92.3, t))
    assert parts["dense"] + parts["kv"] == pytest.approx(mem) and parts["experts"] == parts["moe_kernel"] == 0.0


def test_identical_routing_and_the_batched_moe_kernel():
    """llama-batched-bench: coverage stays k/E, and from B = 2 the experts read at expert_batched_fraction of the
    B = 1 speed — the jump of its MoE curves (B = 2 costs 1.7–1.9× B = 1 in the reference)."""
    card = served_card(load_card("gpt-oss-20b"), engine="llama.cpp")
    t = terms(expert_batched_fraction=0.3, compute_fraction=1.0, step_overhead_s=0.0)
    one = engine_step_s(card, 1, 512, BW, 92.3, t, identical_routing=True)
    two = engine_step_s(card, 2, 512, BW, 92.3, t, identical_routing=True)
    experts_s = card.expert_bytes * 4 / 32 / (BW * 1e9) / 0.8
    assert two - one == pytest.approx(experts_s * (1 / 0.3 - 1), rel=0.05)  # + KV and FLOPs of one sequence


def test_harnesses_differ_as_their_definitions_say():
    """One wave of c prompts waits for the prompts before it (TTFT grows with c), a static batch's TTFT is the whole
    batch's prefill, and a closed loop's step carries the prompts that arrive meanwhile (slower than a pure step)."""
    card = load_card("llama-3.1-8b")
    t = terms()
    static = harness.predict("static", harness.Costing(card, t, BW, 92.3), 8, 1024, 128)
    one = prefill_flops(card, 1024, 0) / 50e12
    assert static["ttft_s"] == pytest.approx(8 * one)
    assert static["decode_tok_s"] == pytest.approx(8 / static["tpot_s"])
    closed = harness.predict("closed", harness.Costing(card, t, BW, 92.3), 8, 1024, 128)
    pure = engine_step_s(card, 8, 1024 + 64, BW, 92.3, t)
    assert closed["tpot_s"] == pytest.approx(pure + 8 / 128 * one)
    w8 = harness.predict("wave", harness.Costing(card, t, BW, 92.3), 8, 1024, 128)
    w64 = harness.predict("wave", harness.Costing(card, t, BW, 92.3), 64, 1024, 128)
    assert w64["ttft_s"] > w8["ttft_s"]
    with pytest.raises(ValueError, match="harness"):
        harness.predict("open", harness.Costing(card, t, BW, 92.3), 8, 1024, 128)


def test_an_moe_prefill_reads_its_experts_once_a_pass():
    """Static batch of an MoE with passes of 2,048 tokens: 8 prompts of 512 tokens = 4,096 tokens = 2 passes, each
    reading every expert (coverage 1 − (28/32)^2048 = 1 to 1e-100), at the bandwidth fraction:
    TTFT = 8 × FLOPs(512) / rate + 2 × expert bytes / (0.8 × 273 GB/s).  A dense card, or no pass size, adds nothing
    (the term's source: ggml-org/llama.cpp benches/dgx-spark.md, stepcost.prefill_expert_read_s's docstring)."""
    card = served_card(load_card("gpt-oss-20b"), engine="llama.cpp")
    t = terms(prefill_chunk_tokens=2048)
    read = card.expert_bytes / (0.8 * BW * 1e9)
    assert prefill_expert_read_s(card, 4096, t, BW) == pytest.approx(2 * read)
    assert prefill_expert_read_s(card, 2049, t, BW) == pytest.approx(2 * read)
    static = harness.predict("static", harness.Costing(card, t, BW, 92.3), 8, 512, 32)
    assert static["ttft_s"] == pytest.approx(8 * prefill_flops(card, 512, 0) / 50e12 + 2 * read)
    assert prefill_expert_read_s(card, 4096, terms(), BW) == 0.0
    assert prefill_expert_read_s(load_card("llama-3.1-8b"), 4096, t, BW) == 0.0


def test_fit_reproduces_its_calibration_points():
    """Three points made by known terms (a routing locality of 12) are fitted back within 5 %, the fit names no misfit,
    and its band holds the prediction."""
    card = served_card(load_card("gpt-oss-120b"), engine="vllm", hardware="dgx-spark")
    true = terms(routing_scale=12.0)
    xs = [1, 2, 32]
    steps = [engine_step_s(card, b, 1088, BW, 92.3, true) for b in xs]
    axis = CurveAxis(card, 1088, BW, 92.3)
    fit = fit_curve(axis, xs, steps, terms(routing_scale=30.0))
    assert fit.note is None and all(abs(m) < 0.05 for m in fit.misses.values())
    lo, mid, hi = band(axis, fit, 8)
    assert lo <= mid <= hi
    assert mid == pytest.approx(engine_step_s(card, 8, 1088, BW, 92.3, true), rel=0.10)


def test_prefill_rate_fit_is_the_flops_over_seconds():
    """Two batches at 10 TFLOP/s and 0.1 s fixed cost are fitted back exactly (linear least squares)."""
    card = load_card("llama-3.1-8b")
    pts = [(b, 512, 0, 0.1 + b * prefill_flops(card, 512, 0) / 10e12) for b in (1, 8)]
    rate, fixed = fit_prefill(card, pts)
    assert rate == pytest.approx(10.0) and fixed == pytest.approx(0.1)


def test_the_spark_profile_states_each_number_with_its_source():
    """The Spark profile: a measured BF16 peak beside the spec, and every engine's terms with their source."""
    hw = load_profile("dgx-spark")
    assert hw.peak_tflops_measured and hw.peak_tflops_measured < hw.peak_tflops_spec
    assert "huggingface/kernels" in hw.peak_tflops_measured_source
    assert hw.compute_peak_tflops() == hw.peak_tflops_measured
    for name, t in hw.engines.items():
        assert t.source and "fitted" in t.source, name
        assert 0 < t.bandwidth_fraction <= 1, name
    llama = hw.engines["llama.cpp"]
    # an MoE prompt at the one MoE rate whatever its experts' format, a dense one at its format's, attention at its own
    assert llama.prefill_rate_tflops("q8_0", None, moe=True) == llama.prefill_tflops["moe"]
    assert llama.prefill_rate_tflops("q8_0", None) == llama.prefill_tflops["q8_0"] != llama.prefill_tflops["moe"]
    assert math.isfinite(llama.prefill_attention_tflops[128])


def test_implied_coverage_reads_a_curve_as_its_experts():
    """A curve whose MBU stays at its c = 1 value implies the uniform coverage it was counted with; one whose MBU halves
    at B = 8 implies the expert bytes of twice the bytes: (2 × bytes(8) − non-expert) / expert bytes, clipped to 1."""
    from pipeline.pages.explaincharts import implied_coverage
    from pipeline.cards.stepcost import bytes_per_decode_step

    card = load_card("gpt-oss-120b")
    pts = [{"concurrency": b, "mbu": 0.5, "bytes_per_step": bytes_per_decode_step(card, b, 1088)} for b in (1, 8)]
    got = dict(implied_coverage(pts, card))
    assert got[8] == pytest.approx(expert_coverage(8, 4, 128))
    pts[1]["mbu"] = 0.25
    non_expert = pts[1]["bytes_per_step"] - card.expert_bytes * expert_coverage(8, 4, 128)
    assert dict(implied_coverage(pts, card))[8] == pytest.approx((2 * pts[1]["bytes_per_step"] - non_expert) / card.expert_bytes)


def test_a_static_moe_batch_says_its_coverage_was_not_measured():
    """llama-batched-bench decodes one prompt repeated: the analysis of such an MoE curve says coverage was not measured."""
    from pipeline.analysis.analyze import COVERAGE_NOT_MEASURED, analyze
    from pipeline.importers.base import summary

    card = load_card("gpt-oss-20b")
    rows = [summary("gpt-oss-20b", "llama.cpp", 512, 32, b, output_throughput_tok_s=80.0 * b ** 0.5,
                    step_time_s=b / (80.0 * b ** 0.5), output_throughput_window="decode_phase") for b in (1, 2, 4)]
    doc = analyze(rows, {"gpt-oss-20b": card}, load_profile("dgx-spark").model_dump())
    assert doc["models"][0]["coverage_not_measured"] == COVERAGE_NOT_MEASURED


def test_plan_predicts_the_harness_that_measured_a_figure():
    """`plan --harness`: a wave's TTFT grows with c (the prompts before it), a static batch's is the whole batch's
    prefill, and the closed loop stays the simulated server's own figures."""
    from pipeline.config.sweepconfig import parse_config
    from pipeline.plan.estimate import make_plan
    from pipeline.plan.harnessplan import with_harness

    cfg = parse_config({"name": "h", "hardware": "dgx-spark", "backend": "simulated", "concurrency": [1, 8],
                        "input_len": 1024, "output_len": 64, "repeats": 1,
                        "models": [{"name": "m", "card": "Llama-3.1-8B"}]}, "h.yaml")
    plan = make_plan(cfg, open_loop=False)
    assert with_harness(plan, cfg, "closed") is plan
    static = with_harness(plan, cfg, "static")
    s1, s8 = (p for p in static.models[0].points if p.load == "closed")
    assert s8.ttft_s == pytest.approx(8 * s1.ttft_s, rel=0.01)
    wave = with_harness(plan, cfg, "wave")
    w1, w8 = (p for p in wave.models[0].points if p.load == "closed")
    assert w8.ttft_s > w1.ttft_s
    assert [p.wall_s for p in wave.models[0].points] == [p.wall_s for p in plan.models[0].points]


@pytest.mark.parametrize("exponent", [None, 0.5])
def test_predict_of_a_static_moe_batch_reproduces_its_calibration_points(exponent):
    """`predict` of a static batch (identical routing): three points made by known llama.cpp-like terms — a batched MoE
    kernel at 0.3, its cost flat in the tokens per expert (None) or growing as t^0.5 — are reproduced within 5 % from
    the profile's prior (t^0.361), and the band of every prediction holds it."""
    from pipeline.predict.enginefit import predict_static_curve

    card = served_card(load_card("gpt-oss-20b"), engine="llama.cpp")
    true = terms(expert_batched_fraction=0.3, dense_compute_fraction=0.25, expert_token_exponent=exponent)
    steps = {b: engine_step_s(card, b, 512 + 16, BW, 92.3, true, identical_routing=True) for b in (1, 2, 4, 8, 32)}
    cal = [(b, steps[b], None) for b in (1, 2, 32)]
    axis = CurveAxis(card, 512 + 32 / 2, BW, None, identical_routing=True)
    preds, fit = predict_static_curve(axis, "llama.cpp", "dgx-spark", cal, [1, 2, 4, 8, 32], 512)
    assert fit.note is None
    for b, p in zip([1, 2, 4, 8, 32], preds):
        if b in (1, 2, 32):
            assert p["tpot_s"] == pytest.approx(steps[b], rel=0.05)
        lo, hi = p["band"]
        assert lo <= p["output_throughput_tok_s"] <= hi
