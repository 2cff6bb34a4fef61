"""Each harness's throughput by its own definition (pipeline.simulation.harness): llama-benchy's ``t/s (total)`` over one
window and ``t/s (req)`` per request, llama-batched-bench's S_TG and S_PP, vllm bench serve's output tokens / duration.

The published check reads ``../shared/reference/spark-published-djangodevreng.md`` (``BATCHMARK_SHARED`` names another
shared folder) and skips, saying so, where it is absent."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from pipeline.cards.registry import load_card
from pipeline.cards.servedformat import served_card
from pipeline.simulation import harness
from pipeline.machine.engineterms import EngineTerms
from pipeline.machine.hardware import load_profile

REPO = Path(__file__).resolve().parents[3]
DJANGO = Path(os.environ.get("BATCHMARK_SHARED", REPO / ".." / "shared")) / "reference" / \
    "spark-published-djangodevreng.md"


def _terms() -> EngineTerms:
    return EngineTerms(step_overhead_s=0.0, bandwidth_fraction=1.0, compute_fraction=1.0,
                       prefill_tflops={"default": 50.0}, source="test")


def test_a_wave_reports_llama_benchys_window_and_per_request_rates(monkeypatch):
    """Fault kind: a harness's throughput by another definition (a wave's was c × the mean per-request rate).

    Worked by hand with a decode step of 0.1 s, prefill 1 ms a token, steps of 8,192 tokens, 2 requests of 8,192 + 3:
    step 1 prefills request 0 (8.192 s: its first token); step 2 decodes it and prefills 8,191 tokens of request 1
    (8.291 s, t = 16.483); step 3 decodes request 0's last token and request 1's last prompt token (0.101 s,
    t = 16.584: request 0 done, request 1's first token); steps 4–5 decode request 1 (done 16.784).
    t/s (total) = 2 × 2 / (16.784 − 8.192) = 0.46555; t/s (req) = (2 / 8.392 + 2 / 0.2) / 2 = 5.11916 (c × it 10.24:
    22 × the window's); pp t/s (total) = 2 × 8,192 / 16.584 = 987.94; TPOT = (8.392 + 0.2) / 4 = 2.148."""
    monkeypatch.setattr(harness, "_decode", lambda *a: 0.1)
    monkeypatch.setattr(harness, "prefill_compute_s", lambda card, tokens, before, terms, peak: tokens * 1e-3)
    monkeypatch.setattr(harness, "prefill_weight_floor_s", lambda *a: 0.0)
    got = harness.predict("wave", harness.Costing(load_card("llama-3.1-8b"), _terms(), 273.0, 100.0), 2, 8192, 3)
    assert got["decode_tok_s"] == pytest.approx(4 / 8.592)
    assert got["per_request_tok_s"] == pytest.approx((2 / 8.392 + 10.0) / 2)
    assert got["prefill_tok_s"] == pytest.approx(2 * 8192 / 16.584)
    assert got["tpot_s"] == pytest.approx((8.392 + 0.2) / 4)
    assert got["ttft_s"] == pytest.approx(16.584)


def test_static_and_closed_report_their_harness_figures(monkeypatch):
    """Fault kind: a harness's throughput by another definition.  llama-batched-bench: S_TG = B / TPOT and
    S_PP = B × pp / T_PP; vllm bench serve's output tokens / duration, in a closed loop's steady state by Little's law
    c × g / E2EL, beside the streams' decode rate c / TPOT.  Worked by hand: step 0.1 s, prefill 1 ms a token, B = c = 4, 1,000 + 11 tokens: static T_PP = 4 s,
    S_PP 1,000, S_TG 40; closed TPOT = 0.1 + 4 / 11 × 1 s = 0.46364, TTFT = 1 + 0.23182, E2EL = TTFT + 10 × TPOT
    = 5.86818, output throughput 4 × 11 / 5.86818 = 7.4981 (decode rate c / TPOT = 8.627)."""
    monkeypatch.setattr(harness, "_decode", lambda *a: 0.1)
    monkeypatch.setattr(harness, "prefill_s", lambda card, tokens, before, terms, peak: tokens * 1e-3)
    monkeypatch.setattr(harness, "prefill_expert_read_s", lambda *a: 0.0)
    monkeypatch.setattr(harness, "prefill_weight_floor_s", lambda *a: 0.0)
    card = load_card("llama-3.1-8b")
    static = harness.predict("static", harness.Costing(card, _terms(), 273.0, 100.0), 4, 1000, 11)
    assert (static["decode_tok_s"], static["prefill_tok_s"]) == pytest.approx((40.0, 1000.0))
    closed = harness.predict("closed", harness.Costing(card, _terms(), 273.0, 100.0), 4, 1000, 11)
    tpot = 0.1 + 4 / 11
    assert closed["tpot_s"] == pytest.approx(tpot)
    assert closed["output_tok_s"] == pytest.approx(44 / (1 + tpot / 2 + 10 * tpot))
    assert closed["decode_tok_s"] == pytest.approx(4 / tpot)  # the streams' decode rate, as a chat client prints it


def _published_tg(text: str, pp: int, c: int) -> tuple[float, float]:
    """Part 1's (gpt-oss-20b) ``tg256`` row after ``pp{pp} (c{c})``: its ``t/s (total)`` and ``t/s (req)`` means."""
    part1 = text.split("# Part 2")[0]
    m = re.search(rf"\|\s*pp{pp} \(c{c}\)\s*\|[^\n]*\n\|[^|]*\|\s*tg256 \(c{c}\)\s*\|\s*([\d.]+) ±[^|]*\|\s*([\d.]+)",
                  part1)
    assert m, f"pp{pp} (c{c}) not found in {DJANGO.name}"
    return float(m.group(1)), float(m.group(2))


def test_a_long_prompt_wave_parts_its_two_rates_as_published():
    """Fault kind: a harness's throughput by another definition.  gpt-oss-20b on vLLM 0.26 on a DGX Spark, 25,000-token
    prompts, tg256, c = 10 (djangodevreng/dgx-spark-benchmarks, llama-benchy 0.4.0): t/s (total) 44.19 against
    c × t/s (req) = 10 × 9.79 = 97.9, a ratio of 0.451 (the prefills stagger the requests: the first decodes alone
    while the others wait).  The plan's ratio of its two figures is within 15 % of it (c × the mean per-request
    rate, the old wave figure, is 1 by construction); the ratio does not hang on the single stream's own error."""
    if not DJANGO.is_file():
        pytest.skip(f"reference data absent: {DJANGO} (it lives beside the repository, never in it)")
    total, per_request = _published_tg(DJANGO.read_text(encoding="utf-8"), 25000, 10)
    assert (total, per_request) == (44.19, 9.79)
    hw = load_profile("dgx-spark")
    card = served_card(load_card("gpt-oss-20b"), None, "vllm", hw.name)
    costing = harness.Costing(card, hw.engine_terms("vllm"), hw.bandwidth_gb_s_spec, hw.compute_peak_tflops())
    ten = harness.predict("wave", costing, 10, 25000, 256)
    assert ten["decode_tok_s"] / (10 * ten["per_request_tok_s"]) == pytest.approx(total / (10 * per_request), rel=0.15)
