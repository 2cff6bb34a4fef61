"""The expert routing an MoE point's bytes are counted at (pipeline.analysis.routing), worked by hand.

Regression (fault kind: impossible figure shown as a result): the published llama-batched-bench file for gpt-oss-20b
on a DGX Spark (ggml-org/llama.cpp ``benches/dgx-spark.md``, build 6918) imported with MBU 1.02 at pp 512 / tg 32,
B = 8 and 16, unmarked, its caveats empty: its bytes were counted at uniform routing, but llama-batched-bench decodes
the same token ids in every sequence, so they all route to the same experts (coverage k/E at every B).

Hand arithmetic, from data/models/gpt-oss-20b.yaml (config.json numbers) and data/hardware/dgx-spark.yaml (273 GB/s):
- expert params = 24 layers × 32 experts × (3 × 2880² + 3 × 2880) = 19,116,933,120; bytes = the weights at MXFP4's
  4.25 bits (24 × 32 × 3 × 2880² × 4.25 / 8 = 10,152,345,600) + the biases in bf16 (24 × 32 × 8640 × 2 = 13,271,040)
  = 10,165,616,640;
- dense bytes = (20,914,757,184 total − 19,116,933,120 experts − 201,088 × 2880 = 579,133,440 embedding) × 2
  = 2,437,381,248 (bf16; the embedding is one row per token, not read);
- KV per token and layer = 8 KV heads × 64 × 2 (K, V) × 2 bytes = 2048; a step at pp 512, tg 32 reads a context of
  512 + 32 / 2 = 528: 12 full layers × 528 + 12 sliding layers × 128 = 7872 tokens × 2048 = 16,121,856 B a sequence;
- identical routing reads 4 of 32 experts: 10,165,616,640 / 8 = 1,270,702,080;
- B = 8: 2,437,381,248 + 1,270,702,080 + 8 × 16,121,856 = 3,837,058,176 B in T_TG / TG = 1.008 / 32 = 0.0315 s:
  121.81 GB/s, MBU 121.81 / 273 = 0.4462; roofline 8 / (3,837,058,176 / 273e9) = 569.19 tok/s;
- B = 16: 3,966,033,024 B in 1.277 / 32 = 0.03990625 s: 99.38 GB/s, MBU 0.3640;
- at uniform routing B = 8 would read 1 − (7/8)^8 = 0.6564 of the experts: 9,238,976,224 B in 0.0315 s, MBU 1.074.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.analysis.analyze import analyze
from pipeline.analysis.checksmade import clean_claims
from pipeline.analysis.routing import COVERAGE_NOT_MEASURED, implausible_mbu
from pipeline.cards.registry import load_card
from pipeline.importers.base import summary
from pipeline.importers.llama_batched_bench import Row, point_from_row
from pipeline.machine.hardware import load_profile
from pipeline.views.show import build_show, format_table

#: ggml-org/llama.cpp benches/dgx-spark.md, gpt-oss-20b MXFP4, rows PP 512, TG 32: B, T_PP s, S_PP t/s, T_TG s, S_TG t/s
ROWS = [(1, 0.390, 1311.72, 0.395, 81.11), (8, 1.025, 3994.63, 1.008, 254.09), (16, 2.054, 3988.71, 1.277, 400.94)]


@pytest.fixture(scope="module")
def card():
    return load_card("gpt-oss-20b")


@pytest.fixture(scope="module")
def spark():
    return load_profile("dgx-spark").model_dump()


def _batched_bench():
    return [point_from_row(Path("dgx-spark.md"), i, "gpt-oss-20b", Row(512, 32, b, t_pp, s_pp, t_tg, s_tg))
            for i, (b, t_pp, s_pp, t_tg, s_tg) in enumerate(ROWS)]


def test_the_card_numbers_the_hand_arithmetic_starts_from(card):
    assert card.expert_bytes == 10_165_616_640 and card.dense_bytes == 2_437_381_248
    assert card.experts_per_token == 4 and card.num_experts == 32 and card.kv_bytes_per_token == 24 * 2048


def test_batched_bench_moe_is_counted_at_identical_routing(card, spark):
    doc = analyze(_batched_bench(), {"gpt-oss-20b": card}, spark)
    by_c = {p["concurrency"]: p for p in doc["points"]}
    assert {p["routing"] for p in doc["points"]} == {"identical"}
    assert by_c[8]["bytes_per_step"] == pytest.approx(3_837_058_176)
    assert by_c[8]["mbu"] == pytest.approx(0.4462, abs=1e-4) and by_c[16]["mbu"] == pytest.approx(0.3640, abs=1e-4)
    assert by_c[8]["roofline_tok_s"] == pytest.approx(569.19, abs=0.01)
    assert all(by_c[c]["implausible"] is None and by_c[c]["mbu_implausible"] is None for c in (8, 16))
    # B = 1 (k/E either way): 2,437,381,248 + 1,270,702,080 + 16,121,856 = 3,724,205,184 B in 0.395 / 32 s: MBU 1.105,
    # since this card's bf16 non-expert bytes are more than the GGUF file (11.27 GiB in all) holds; its fewest
    # plausible bytes are under 1, so it is marked, not called impossible
    assert by_c[1]["mbu"] == pytest.approx(1.1052, abs=1e-4) and by_c[1]["implausible"] is None
    assert by_c[1]["mbu_implausible"].startswith("MBU 1.11 at c = 1 is above 1 at the bytes counted (identical routing")
    assert doc["models"][0]["coverage_not_measured"] == COVERAGE_NOT_MEASURED


def test_show_says_which_routing_and_that_coverage_was_not_measured(card, spark):
    rows = _batched_bench()
    doc = build_show({"run_id": "r", "source": "imported:llama-batched-bench"}, [s.as_dict() for s in rows],
                     analyze(rows, {"gpt-oss-20b": card}, spark))
    assert doc["models"][0]["coverage_not_measured"] == COVERAGE_NOT_MEASURED
    assert [p["routing"] for p in doc["points"]] == ["identical"] * 3
    text = format_table(doc)
    assert "coverage not measured, MBU and roofline at identical routing (k/E): static batch" in text
    assert " 0.45 " in text and " 0.36 " in text and " 1.11! " in text


def test_a_served_moe_stays_at_uniform_routing_and_its_mbu_above_one_is_marked(card, spark):
    """vLLM's continuous batch of distinct requests, step 0.0315 s at c = 8: uniform routing counts 1.074 (above 1),
    but tokens may share experts, so it is not impossible (identical routing gives 0.446): marked, as MFU above 1."""
    served = [summary("gpt-oss-20b", "vllm", 512, 32, 8, output_throughput_tok_s=254.0, step_time_s=0.0315,
                      output_throughput_window="send_to_completion")]
    doc = analyze(served, {"gpt-oss-20b": card}, spark)
    p = doc["points"][0]
    assert p["routing"] == "uniform" and p["mbu"] == pytest.approx(1.0744, abs=1e-4)
    assert p["implausible"] is None and p["mbu_min"] < 1
    assert p["mbu_implausible"].startswith("MBU 1.07 at c = 8 is above 1 at the bytes counted (uniform routing")
    assert "coverage_not_measured" not in doc["models"][0]
    text = format_table(build_show({"run_id": "r"}, [s.as_dict() for s in served], doc))
    assert "1.07!" in text and "MBU marked ! is not a result: MBU 1.07 at c = 8" in text


def test_llama_benchy_static_batch_is_not_one_prompt_repeated(card, spark):
    """llama-benchy's points are decode-phase figures of distinct requests to a server (the Spark profile's locality
    prior was fitted to one): uniform routing, no coverage caveat."""
    benchy = [summary("gpt-oss-20b", "openai", 512, 32, b, output_throughput_tok_s=80.0 * b, step_time_s=1 / 80.0,
                      output_throughput_window="decode_phase") for b in (1, 2)]
    doc = analyze(benchy, {"gpt-oss-20b": card}, spark)
    assert [p["routing"] for p in doc["points"]] == ["uniform", "uniform"]
    assert "coverage_not_measured" not in doc["models"][0]


def test_implausible_mbu_only_above_one():
    assert implausible_mbu({"mbu": 1.0, "concurrency": 2}) is None and implausible_mbu({"mbu": None}) is None
    assert implausible_mbu({"mbu": 1.5, "concurrency": 2, "routing": None}) == (
        "MBU 1.50 at c = 2 is above 1 at the bytes counted (the card's bytes): the step read fewer bytes than counted")


def test_an_import_claims_only_the_checks_it_allowed():
    one = [{"concurrency": 1, "samples": {"output_throughput_tok_s": [81.11]}, "interference": None}]
    assert clean_claims({"source": "imported:llama-batched-bench"}, one, 1.5) == (
        "clean: numbers plausible; not checked (not possible for an import): no probe, one repeat, no machine data")
    full = [{"concurrency": 1, "samples": {"output_throughput_tok_s": [80.0, 81.0]}, "interference": {"outside_share": 0.01}}]
    assert clean_claims({"source": "measured", "probe": {"bandwidth_gb_s": 250.0}}, full, 1.5) == (
        "clean: probe steady, repeats agree within 1.5×, machine not busy while points ran, numbers plausible")


def test_a_clean_line_never_calls_a_figure_marked_not_a_result_plausible():
    """Fault kind: a verdict contradicting its own page: a run read "clean: numbers plausible" on the same page that
    marks its MBU "above 1 at the bytes counted, not a result".  The clean line names those figures instead."""
    one = [{"concurrency": 1, "samples": {"output_throughput_tok_s": [81.11]}, "interference": None}]
    models = [{"model": "gpt-oss-20b", "not_a_result": ["MBU at c = 8", "MBU at c = 16"]}]
    text = clean_claims({"source": "imported:llama-benchy"}, one, 1.5, models)
    assert text.startswith("clean: numbers plausible but gpt-oss-20b MBU at c = 8, gpt-oss-20b MBU at c = 16 (above 1 "
                           "at the bytes counted: not a result); not checked")
    assert clean_claims({"source": "imported:llama-benchy"}, one, 1.5, [{"model": "m", "not_a_result": []}]).startswith(
        "clean: numbers plausible; not checked")
