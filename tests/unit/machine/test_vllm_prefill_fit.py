"""vLLM's prefill terms on a DGX Spark (data/hardware/dgx-spark.yaml engines.vllm) are the fit of the published
single-stream prompts: per model (the MoE gpt-oss-20b, the dense bf16 Granite-4.1-8B) a matmul rate and the attention's
own rate at its head dimension, so a prompt's time grows with its context (attention was costed at the matmul rate, a
prompt's rate the same at 256 and 25,000 tokens), less the passes of its chunks after the first.

Fault kind: a prefill rate that does not depend on context.  The source: djangodevreng/dgx-spark-benchmarks
(``../shared/reference/spark-published-djangodevreng.md``; ``BATCHMARK_SHARED`` names another shared folder; skips,
saying so, where it is absent), gpt-oss-20b on vLLM 0.26, llama-benchy's ``est_ppt`` (ttfr less the one-token
latency) at c = 1 for prompts of 256 to 25,000 tokens.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from pipeline.cards.registry import load_card
from pipeline.cards.servedformat import ServedFormat, card_in_format
from pipeline.cards.stepcost import prefill_attention_flops, prefill_compute_s, prefill_flops
from pipeline.machine.hardware import load_profile

REPO = Path(__file__).resolve().parents[3]
DJANGO = Path(os.environ.get("BATCHMARK_SHARED", REPO / ".." / "shared")) / "reference" / \
    "spark-published-djangodevreng.md"
CARD = card_in_format(load_card("gpt-oss-20b"), ServedFormat(attention="bf16", head="bf16", experts="mxfp4",
                                                             kv_cache="fp8"))


def _est_ppt_c1() -> dict[int, float]:
    """Part 1's ``ppN (c1)`` rows (test 04's ``@ d4`` rows left out): prompt tokens → est_ppt mean in s."""
    part1 = DJANGO.read_text(encoding="utf-8").split("# Part 2")[0]
    rows = re.findall(r"\|\s*gpt-oss-20b-mxfp4\s*\|\s*pp(\d+) \(c1\)\s*\|(?:[^|]*\|){4}[^|]*\|\s*([\d.]+)", part1)
    return {int(n): float(ms) / 1000 for n, ms in rows}


def _est_ppt_with_sd_c1(model: str) -> dict[int, tuple[float, float]]:
    """``model``'s ``ppN (c1)`` rows (test 04's ``@ d4`` rows left out): prompt tokens → (est_ppt mean, its ± sd) in s."""
    rows = re.findall(rf"\|\s*{re.escape(model)}\s*\|\s*pp(\d+) \(c1\)\s*\|(?:[^|]*\|){{5}}\s*([\d.]+) ± ([\d.]+)",
                      DJANGO.read_text(encoding="utf-8"))
    return {int(n): (float(ms) / 1000, float(sd) / 1000) for n, ms, sd in rows}


@pytest.mark.parametrize("model, card, key, head_dim", [
    ("gpt-oss-20b-mxfp4", CARD, "moe", 64),
    ("granite-4-1-8b-bf16", card_in_format(load_card("granite-4.1-8b"), ServedFormat(
        attention="bf16", head="bf16", mlp="bf16", kv_cache="fp8")), "bf16", 128)])
def test_the_profiles_vllm_prefill_rates_are_the_published_fit(model, card, key, head_dim):
    """Weighted least squares of est_ppt − the passes after the first = matmul TFLOP / R + attention TFLOP / A over the
    six prompts, each row over its stated ± (Granite's pp1024 spreads 338 ± 102 ms).  A prompt of n > 8,192 tokens
    takes ceil(n / 8192) passes (vLLM's chunked prefill at --max-num-batched-tokens 8192), each reading the weights:
    25,000 tokens, 3 extra passes of 3.84 ms + 12.60 GB / (0.799 × 273 GB/s) = 57.8 ms each for gpt-oss-20b, 185 ms."""
    if not DJANGO.is_file():
        pytest.skip(f"reference data absent: {DJANGO} (it lives beside the repository, never in it)")
    ppt = _est_ppt_with_sd_c1(model)
    assert len(ppt) == 6 and sorted(ppt)[0] == 256 and sorted(ppt)[-1] == 25000
    terms = load_profile("dgx-spark").engine_terms("vllm")
    one = terms.step_overhead_s + (card.dense_bytes + card.expert_bytes) / (terms.bandwidth_fraction * 273e9)
    ns = sorted(ppt)
    w = np.array([1 / max(ppt[n][1], 0.01 * ppt[n][0]) for n in ns])
    x = np.array([[(prefill_flops(card, n, 0) - prefill_attention_flops(card, n, 0)) / 1e12,
                   prefill_attention_flops(card, n, 0) / 1e12] for n in ns]) * w[:, None]
    y = np.array([ppt[n][0] - (-(-n // 8192) - 1) * one for n in ns]) * w
    inv, *_ = np.linalg.lstsq(x, y, rcond=None)
    assert terms.prefill_tflops[key] == pytest.approx(1 / inv[0], rel=0.01)  # 84.7 (gpt-oss), 84.6 (Granite)
    assert terms.prefill_attention_tflops[head_dim] == pytest.approx(1 / inv[1], rel=0.01)  # 26.5 at 64, 119.0 at 128


def test_a_vllm_prompts_rate_falls_with_its_context():
    """By the profile's terms alone (no reference needed): 25,000 tokens take more than 100 × 250 tokens' time (the
    attention grows with the context), within 10 % of the published 4.646 s against 100 × 20 ms at 256 tokens.
    The matmul-rate-only cost (no attention rate) gave 2.63 s for 25,000 tokens, 1.33 × 100 × 250 tokens'."""
    terms = load_profile("dgx-spark").engine_terms("vllm")
    long_s = prefill_compute_s(CARD, 25000, 0, terms, 100.0)
    assert long_s > 100 * prefill_compute_s(CARD, 250, 0, terms, 100.0) * 1.5
    assert long_s == pytest.approx(4.646, rel=0.10)
