"""A prompt's cost under an engine's terms (pipeline.cards.stepcost ``prefill_compute_s``, ``prefill_weight_floor_s``,
pipeline.machine.engineterms): the attention at its own rate, one rate for every MoE prompt, a pass never shorter than
its weight read; and the Spark fit of those rates (benchmarks/sparkfit.py)."""

from __future__ import annotations

import sys

import pytest

from pipeline.cards.registry import load_card
from pipeline.cards.stepcost import prefill_attention_flops, prefill_compute_s, prefill_flops, prefill_weight_floor_s
from pipeline.simulation import harness
from pipeline.machine.engineterms import EngineTerms
from pipeline.machine.hardware import load_profile
from tests.conftest import REPO

BW = 273.0


def terms(**kw) -> EngineTerms:
    base = dict(step_overhead_s=0.0, bandwidth_fraction=0.8, compute_fraction=0.2, prefill_tflops={"default": 50.0},
                source="test")
    return EngineTerms(**{**base, **kw})


def test_a_prompts_attention_runs_at_its_own_rate():
    """Llama-3.1-8B (32 layers, 32 heads of 128), 1,024 tokens after none: the attention is 4 × 1,024 × 32 × 512 (the
    mean causal context) × 32 × 128 = 274,877,906,944 FLOPs; at 25 TFLOP/s it takes 11.0 ms beside the matmuls at 50."""
    card = load_card("llama-3.1-8b")
    attn = prefill_attention_flops(card, 1024, 0)
    assert attn == 4 * 1024 * 32 * 512 * 32 * 128 == 274_877_906_944
    matmul = prefill_flops(card, 1024, 0) - attn
    assert matmul == 2 * 1024 * (8_030_261_248 - 525_336_576)
    t = terms(prefill_attention_tflops={128: 25.0})
    assert prefill_compute_s(card, 1024, 0, t, None) == pytest.approx(matmul / 50e12 + attn / 25e12)
    # no rate stated for head_dim 128: every FLOP at the matmul rate, as before the attention had its own
    assert prefill_compute_s(card, 1024, 0, terms(prefill_attention_tflops={64: 25.0}), None) == pytest.approx(
        prefill_flops(card, 1024, 0) / 50e12)


def test_an_moe_prompt_takes_the_moe_rate_whatever_its_experts_format():
    """``prefill_tflops: {moe: 28.9, q8_0: 33.8}``: gpt-oss-20b (an MoE) at 28.9, Qwen2.5-7B (dense) at its format's."""
    t = terms(prefill_tflops={"moe": 28.9, "q8_0": 33.8, "default": 31.0})
    assert t.prefill_rate_tflops("q8_0", None, moe=True) == 28.9
    assert t.prefill_rate_tflops("q8_0", None) == 33.8
    assert t.prefill_rate_tflops("fp8", None) == 31.0
    assert terms().prefill_rate_tflops("mxfp4", None, moe=True) == 50.0  # no moe entry: the format's, else default


def test_a_short_prompt_costs_at_least_its_weight_read():
    """A 29-token prompt of Llama-3.1-8B in bf16: 29 × 15.0 GFLOP at 50 TFLOP/s is 8.7 µs, but its one pass reads the
    15,009,849,344 bytes of its matrices: 15.01 GB / (0.8 × 273 GB/s) = 68.7 ms, which the closed loop's TTFT carries
    (and half a decode step: the step it arrives in).  A 2,048-token prompt is bound by its FLOPs, not the read."""
    card = load_card("llama-3.1-8b")
    t = terms()
    floor = prefill_weight_floor_s(card, 29, t, BW)
    assert floor == pytest.approx(15_009_849_344 / (0.8 * 273e9)) == pytest.approx(0.0687, abs=1e-4)
    closed = harness.predict("closed", harness.Costing(card, t, BW, 92.3), 1, 29, 200)
    assert closed["ttft_s"] == pytest.approx(floor + closed["tpot_s"] / 2)
    assert prefill_compute_s(card, 2048, 0, t, None) > prefill_weight_floor_s(card, 2048, t, BW)
    assert prefill_weight_floor_s(card, 29, t, None) == 0.0


def test_the_spark_fit_gives_the_profiles_prefill_rates():
    """benchmarks/sparkfit.py over every published llama.cpp Spark curve gives the rates data/hardware/dgx-spark.yaml
    states: attention 35.0 TFLOP/s at head_dim 64 (gpt-oss depth rows), 38.8 at 128 (Qwen2.5-Coder-7B's); prompts
    28.9 for every MoE, 33.8 for dense Q8_0, 43.9 for dense Q4_K_M (DandinPower's Qwen3-32B)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from sparkdata import load_curves
    from sparkfit import fit_terms

    curves, note = load_curves()
    if note:
        pytest.skip(note)
    got = fit_terms(curves, "llama.cpp")
    stated = load_profile("dgx-spark").engine_terms("llama.cpp")
    for hd in (64, 128):
        assert got.prefill_attention_tflops[hd] == pytest.approx(stated.prefill_attention_tflops[hd], abs=0.05)
    for key in ("moe", "q8_0", "q4_k_m"):
        assert got.prefill_tflops[key] == pytest.approx(stated.prefill_tflops[key], abs=0.05), key
