"""``plan --harness static|wave`` prices each cell of a tuning plan at its own shape and server (fault kind: a
setting of one cell read from the config for every cell: over 64/16 and 4096/16 both were priced at 64/16, and an
FP8 KV variant at the baseline's KV bytes)."""

from __future__ import annotations

import pytest

from pipeline.cards.servedformat import with_kv_cache
from pipeline.config.sweepconfig import parse_config
from pipeline.simulation import harness
from pipeline.machine.hardware import load_profile
from pipeline.plan.estimate import make_plan
from pipeline.plan.harnessplan import with_harness


@pytest.mark.parametrize("kind", ["static", "wave"])
def test_each_cell_is_priced_at_its_own_shape_and_kv_cache(kind):
    """Each cell's c = 4 point equals the harness's own prediction at that cell's (input, output) and KV dtype
    (:func:`pipeline.simulation.harness.predict`, the reference), and the 4096-token prompt's TTFT is longer."""
    cfg = parse_config({"name": "t", "hardware": "dgx-spark", "backend": "simulated", "concurrency": [1, 4],
                        "repeats": 1, "workloads": [{"input_len": 64, "output_len": 16},
                                                    {"input_len": 4096, "output_len": 16}],
                        "variants": [{"name": "base"}, {"name": "fp8", "kv_cache_dtype": "fp8"}],
                        "models": [{"name": "m", "card": "llama-3.1-8b"}]}, "c.yaml")
    plan = with_harness(make_plan(cfg), cfg, kind)
    hw = load_profile("dgx-spark")
    terms = hw.engine_terms("vllm")
    from pipeline.backends.simulated import resolve_card

    base_card = resolve_card(cfg.models[0], hw.name, "vllm")
    ttft = {}
    for m in plan.models:
        card = with_kv_cache(base_card, "fp8") if m.variant == "fp8" else base_card
        costing = harness.Costing(card, terms, hw.bandwidth_gb_s_spec, hw.compute_peak_tflops())
        want = harness.predict(kind, costing, 4, m.input_len, m.output_len)
        p = next(p for p in m.points if p.concurrency == 4)
        assert p.ttft_s == pytest.approx(want["ttft_s"]) and p.tpot_s == pytest.approx(want["tpot_s"]), m.label
        ttft[(m.variant, m.input_len)] = p.ttft_s
    assert ttft[("base", 4096)] > ttft[("base", 64)]


def test_a_wave_chunks_each_cells_prompts_at_its_own_budget():
    """A variant's --max-num-batched-tokens is the wave's prefill chunk: one request of 4,096 tokens takes one pass at
    the default 8,192 and two at 2,048, so its TTFT is one pass longer there (vLLM's terms: 3.84 ms + Llama-3.1-8B's
    15,009,849,344 bytes of bf16 weights at 0.799 × 273 GB/s = 68.81 ms, 72.65 ms; the FLOPs are the same, causal
    attention over the chunks summing to the one pass's)."""
    cfg = parse_config({"name": "t", "hardware": "dgx-spark", "backend": "simulated", "concurrency": [1],
                        "repeats": 1, "input_len": 4096, "output_len": 16,
                        "variants": [{"name": "base"}, {"name": "small", "max_num_batched_tokens": 2048}],
                        "models": [{"name": "m", "card": "llama-3.1-8b"}]}, "c.yaml")
    plan = with_harness(make_plan(cfg, open_loop=False), cfg, "wave")
    ttft = {m.variant: m.points[0].ttft_s for m in plan.models}
    assert ttft["small"] - ttft["base"] == pytest.approx(0.00384 + 15_009_849_344 / (0.799 * 273e9), rel=1e-3)
