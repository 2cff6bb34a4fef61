"""A served request's fixed cost (``request_latency_s``) and its prompt's passes under vLLM's terms on a DGX Spark.

Fault kind: a served TTFT without the request's own cost (HTTP, tokenisation, scheduling, detokenisation), so a short
prompt's TTFT came out at its FLOPs or its weight read alone (gpt-oss-20b, 256 tokens: 56 ms planned, 92 ms
published); and a long prompt costed as one pass where vLLM chunks it at ``--max-num-batched-tokens``.

Published figures: djangodevreng/dgx-spark-benchmarks (https://github.com/djangodevreng/dgx-spark-benchmarks, vLLM
0.26 on one DGX Spark, llama-benchy 0.4.0, ``--latency-mode generation``, FP8 KV, ``--max-num-batched-tokens 8192``):
gpt-oss-20b pp4096 at c = 1, ttfr 492.81 ms, est_ppt 421.09 ms; Granite-4.1-8B pp4096 at c = 1, ttfr 965.46 ms,
est_ppt 852.06 ms.  ``ttfr − est_ppt`` is llama-benchy's one-token request.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pipeline.backends.simulated import server_for
from pipeline.cards.registry import load_card
from pipeline.cards.servedformat import ServedFormat, card_in_format
from pipeline.cards.stepcost import one_pass_s, prefill_compute_s
from pipeline.config.sweepconfig import SimulatedOptions
from pipeline.machine.engineterms import EngineTerms
from pipeline.machine.hardware import load_profile
from pipeline.simulation import harness

REPO = Path(__file__).resolve().parents[3]
HW = load_profile("dgx-spark")
VLLM = HW.engine_terms("vllm")
GPT = card_in_format(load_card("gpt-oss-20b"), ServedFormat(attention="bf16", head="bf16", experts="mxfp4",
                                                            kv_cache="fp8"))
GRANITE = card_in_format(load_card("granite-4.1-8b"), ServedFormat(attention="bf16", head="bf16", mlp="bf16",
                                                                   kv_cache="fp8"))


def test_a_models_own_latency_else_the_default_else_none():
    t = EngineTerms(step_overhead_s=0.004, bandwidth_fraction=0.8, compute_fraction=0.2, source="test",
                    request_latency_s={"GPT-OSS-20B": 0.01, "default": 0.02})
    assert t.request_fixed_s("gpt-oss-20b") == 0.01  # names lower-cased: a card's name matches whatever its case
    assert t.request_fixed_s("Llama-3.1-8B") == 0.02
    assert t.model_copy(update={"request_latency_s": {}}).request_fixed_s("gpt-oss-20b") == 0.0
    with pytest.raises(ValueError, match="request_latency_s: 'x' not a time"):
        EngineTerms(step_overhead_s=0.004, bandwidth_fraction=0.8, compute_fraction=0.2, source="test",
                    request_latency_s={"x": -1.0})


def test_the_profiles_latency_is_a_one_token_request_less_its_pass():
    """gpt-oss-20b: 492.81 − 421.09 = 71.72 ms a one-token request; its pass 3.84 ms + (2.437 + 10.166 GB of dense and
    expert weights) / (0.799 × 273 GB/s = 218.1 GB/s) = 3.84 + 57.78 = 61.62 ms; left 10.10 ms.  Granite-4.1-8B:
    965.46 − 852.06 = 113.40 ms, its pass 3.84 + 16.761 GB / 218.1 GB/s = 80.68 ms, left 32.72 ms.  Another model: the
    median of the two, 21.4 ms."""
    assert one_pass_s(GPT, 4096, VLLM, 273) == pytest.approx(0.00384 + 12.603e9 / 218.127e9, rel=1e-3)
    assert VLLM.request_fixed_s("gpt-oss-20b") == pytest.approx(0.49281 - 0.42109 - 0.06162, abs=2e-4)
    assert VLLM.request_fixed_s("granite-4.1-8b") == pytest.approx(0.96546 - 0.85206 - 0.08068, abs=2e-4)
    assert VLLM.request_fixed_s("llama-3.1-8b") == pytest.approx((0.0101 + 0.0327) / 2, abs=1e-4)


def test_a_served_single_streams_ttft_is_its_latency_its_pass_and_its_flops():
    """A wave of one request: TTFT = 10.1 ms + one pass (61.6 ms) + the prompt's FLOPs at the fitted rates (84.7 TFLOP/s
    matmuls, 26.5 the attention at head_dim 64: 415.1 ms for 4,096 tokens) = 486.8 ms, published 492.8 ms (−1.2 %);
    256 tokens: 10.1 + 61.6 + 22.3 ms = 94.0 ms, published 92.4 ms (+1.8 %), where the plan had 56 ms (its pass's
    weight read alone, no request cost)."""
    for n, published in ((4096, 0.49281), (256, 0.09239)):
        got = harness.predict("wave", harness.Costing(GPT, VLLM, 273, HW.compute_peak_tflops()), 1, n, 256)["ttft_s"]
        want = 0.0101 + one_pass_s(GPT, n, VLLM, 273) + prefill_compute_s(GPT, n, 0, VLLM, HW.compute_peak_tflops())
        assert got == pytest.approx(want, rel=1e-6)
        assert got == pytest.approx(published, rel=0.03)


def test_a_prompt_longer_than_the_budget_pays_a_pass_per_chunk():
    """25,000 tokens at --max-num-batched-tokens 8192 take 4 passes (8,192 × 3 + 424), at 32,768 one: the FLOPs are the
    same (causal attention over the chunks sums to n² / 2 either way), so the TTFTs differ by 3 passes of 61.6 ms,
    184.9 ms."""
    def ttft(budget):
        return harness.predict("wave", harness.Costing(GPT, VLLM, 273, HW.compute_peak_tflops()), 1, 25000, 256,
                               max_num_batched_tokens=budget)["ttft_s"]

    assert ttft(8192) - ttft(32768) == pytest.approx(3 * one_pass_s(GPT, 8192, VLLM, 273), rel=1e-3)
    assert 3 * one_pass_s(GPT, 8192, VLLM, 273) == pytest.approx(0.1849, abs=5e-4)


def test_a_closed_loop_of_one_pays_no_wait():
    """c = 1: nothing else in flight, so the prompt's pass starts on arrival: TTFT = 32.7 ms + one pass (80.7 ms) +
    256 tokens' FLOPs (256 × 2 × 8.38 GFLOP = 4.29 TFLOP at 84.6 TFLOP/s: 50.7 ms) = 164.3 ms; no half step of
    waiting (published ttfr of this prompt in a wave of one: 202.9 ms)."""
    got = harness.predict("closed", harness.Costing(GRANITE, VLLM, 273, HW.compute_peak_tflops()), 1, 256, 256)["ttft_s"]
    pre = prefill_compute_s(GRANITE, 256, 0, VLLM, HW.compute_peak_tflops())
    assert got == pytest.approx(0.0327 + one_pass_s(GRANITE, 256, VLLM, 273) + pre, rel=1e-6)
    assert pre == pytest.approx(256 * 2 * 8.3806e9 / 84.6e12, rel=0.01)


def test_the_plans_simulated_server_delays_each_request_by_its_latency():
    """The plan's closed loop (the simulated server): each request reaches the scheduler its model's fixed cost after
    its send (the API server beside the steps)."""
    opts = SimulatedOptions()
    for card, want in ((GPT, 0.0101), (GRANITE, 0.0327), (load_card("llama-3.1-8b"), 0.0214)):
        assert server_for(card, HW, opts, 1024, 64, 8, "vllm").arrival_delay_s == pytest.approx(want)
    assert server_for(GPT, load_profile("h100-sxm"), opts, 1024, 64, 8, "vllm").arrival_delay_s == 0.0  # no terms


def test_the_spark_fit_gives_the_profiles_vllm_terms():
    """benchmarks/sparkfit.py over the published vLLM Spark curves gives the terms data/hardware/dgx-spark.yaml states
    (rounded there): the request latencies, the prompt rates, the dense compute fraction (Granite-4.1-8B's TPOTs)."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from sparkdata import load_curves
    from sparkfit import fit_terms

    curves, note = load_curves()
    if note or not any(c.new for c in curves):
        pytest.skip(note or "the djangodevreng reference file is absent")
    got = fit_terms(curves, "vllm")
    for name in ("gpt-oss-20b", "granite-4.1-8b", "default"):
        assert got.request_latency_s[name] == pytest.approx(VLLM.request_latency_s[name], abs=1e-4)
    for key in ("moe", "bf16"):
        assert got.prefill_tflops[key] == pytest.approx(VLLM.prefill_tflops[key], abs=0.05)
    for hd in (64, 128):
        assert got.prefill_attention_tflops[hd] == pytest.approx(VLLM.prefill_attention_tflops[hd], abs=0.05)
    for name in ("bandwidth_fraction", "compute_fraction", "dense_compute_fraction", "step_overhead_s"):
        assert getattr(got, name) == pytest.approx(getattr(VLLM, name), rel=0.01)


def test_a_prompt_in_a_step_with_decoders_adds_only_the_experts_they_do_not_read():
    """A prompt chunk riding a decode step: the step already reads the dense weights and the decoders' experts, so the
    chunk adds its FLOPs and the experts only its tokens touch.  gpt-oss-20b, 256 prompt tokens beside 1 decoder:
    10.166 GB of experts × (coverage of 257 tokens, 1 − (28/32)^257 ≈ 1, less 1 token's 4/32) = 8.895 GB at
    0.799 × 273 GB/s = 40.78 ms; a dense model's chunk adds no read (Granite: 0)."""
    got = harness._prefill_pass_s(GPT, VLLM, 273, 0.0, 256, 1, latency=True)
    assert got == pytest.approx(GPT.expert_bytes * (1 - (28 / 32) ** 257 - 4 / 32) / (0.799 * 273e9), rel=1e-3)
    assert got == pytest.approx(0.04078, abs=2e-4)
    assert harness._prefill_pass_s(GRANITE, VLLM, 273, 0.05, 256, 3, latency=True) == pytest.approx(0.05)
    # alone in its step: the FLOPs + a whole pass; without a request latency (the old floor): the larger of the two
    assert harness._prefill_pass_s(GRANITE, VLLM, 273, 0.05, 256, 0, latency=True) == pytest.approx(
        0.05 + 0.00384 + GRANITE.dense_bytes / (0.799 * 273e9), rel=1e-3)
    assert harness._prefill_pass_s(GRANITE, VLLM, 273, 0.05, 256, 0, latency=False) == pytest.approx(
        GRANITE.dense_bytes / (0.799 * 273e9), rel=1e-3)
