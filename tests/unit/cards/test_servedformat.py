"""Served formats: bytes per tensor group as an engine serves them, engine defaults, the ceiling's range (pipeline.cards.servedformat)."""

from __future__ import annotations

import pytest

from pipeline.analysis.analyze import ceiling_range_tok_s, ceiling_tok_s
from pipeline.analysis.quality import implausible_model, implausible_point
from pipeline.cards.registry import load_card
from pipeline.cards.servedformat import (ServedFormat, bytes_at_b1_range, card_in_format, default_format, is_stated,
                                         native_format, served_card)
from pipeline.cards.stepcost import bytes_per_decode_step

# gpt-oss-120b's parameter groups (openai/gpt-oss-120b config.json, counted by pipeline.cards.modelarch.param_counts):
# non-expert matrices 955,514,880, small tensors 13,776,192, LM head 579,133,440.
DENSE_MATRIX, DENSE_SMALL, HEAD = 955_514_880, 13_776_192, 579_133_440


def test_the_cards_own_format_reproduces_its_bytes():
    """Re-counting a card in its own format changes no byte (one formula for both)."""
    card = load_card("gpt-oss-120b")
    again = card_in_format(card, native_format(card))
    assert (again.dense_bytes, again.expert_bytes, again.weight_bytes, again.kv_bytes_per_token) == \
        (card.dense_bytes, card.expert_bytes, card.weight_bytes, card.kv_bytes_per_token)


def test_vllm_on_a_spark_serves_gpt_oss_attention_and_head_in_mxfp4():
    """vLLM's Spark recipe (--mxfp4-layers moe,qkv,o,lm_head --kv-cache-dtype fp8): dense bytes by hand =
    955,514,880 × 4.25 / 8 + 13,776,192 × 2 + 579,133,440 × 4.25 / 8 = 842,834,304; KV halves (fp8)."""
    card = load_card("gpt-oss-120b")
    fmt = default_format("vllm", "dgx-spark", "gpt_oss")
    assert (fmt.attention, fmt.head, fmt.experts, fmt.kv_cache) == ("mxfp4", "mxfp4", "mxfp4", "fp8")
    served = served_card(card, engine="vllm", hardware="dgx-spark")
    assert served.dense_bytes == round(DENSE_MATRIX * 4.25 / 8 + DENSE_SMALL * 2 + HEAD * 4.25 / 8) == 842_834_304
    assert served.expert_bytes == card.expert_bytes
    assert served.kv_bytes_per_token == card.kv_bytes_per_token // 2
    assert not is_stated(served)  # a default, not a statement: the ceiling stays a range
    # elsewhere vLLM loads the checkpoint as it is (bf16 attention and head)
    assert default_format("vllm", "h100-sxm", "gpt_oss").attention == "bf16"
    assert default_format("vllm", "dgx-spark", "llama") is None


def test_a_published_spark_single_stream_is_not_impossible():
    """57.5 tok/s, vLLM gpt-oss-120b on one DGX Spark, llama-benchy pp1024 tg128 (kubis.ai, 2026-03-22), and the
    ~59 tok/s of llama.cpp (NVIDIA developer forum, llama-bench tg32) lie above the checkpoint-format ceiling
    (273 GB/s / 5.05 GB = 54.1 tok/s) but inside the range over plausible formats: not flagged.  A figure above
    the fewest plausible bytes' ceiling (all MXFP4, 98.5 tok/s) still is."""
    card = load_card("gpt-oss-120b")
    ctx = 1024 + 128 / 2
    assert round(ceiling_tok_s(card, ctx, 273), 1) == 54.1
    lo, hi = ceiling_range_tok_s(card, ctx, 273)
    assert lo < 54.1 < 59.05 < hi
    model = {"single_stream_tok_s": 57.5, "ceiling_tok_s": ceiling_tok_s(card, ctx, 273), "ceiling_tok_s_range": [lo, hi]}
    assert implausible_model(model) is None
    assert implausible_model({**model, "single_stream_tok_s": 59.05}) is None
    assert "every plausible served format" in implausible_model({**model, "single_stream_tok_s": hi * 1.05})


def test_a_stated_format_has_one_ceiling():
    """Stated (config ``served:``, the imported file, --quant): the range is one value, and above it is impossible."""
    card = served_card(load_card("gpt-oss-120b"), ServedFormat(attention="bf16", head="bf16", experts="mxfp4"))
    assert is_stated(card)
    lo, hi = bytes_at_b1_range(card, lambda k: bytes_per_decode_step(k, 1, 1088))
    assert lo == hi
    lo_t, hi_t = ceiling_range_tok_s(card, 1088, 273)
    assert implausible_model({"single_stream_tok_s": 57.5, "ceiling_tok_s": hi_t, "ceiling_tok_s_range": [lo_t, hi_t]})


def test_mbu_above_one_only_below_every_plausible_format():
    """An unstated format's point carries mbu_min (its fewest plausible bytes); MBU above 1 at the assumed format
    but below 1 at the fewest is not impossible."""
    assert implausible_point({"mbu": 1.05, "mbu_min": 0.6, "concurrency": 1}) is None
    assert implausible_point({"mbu": 1.05, "concurrency": 1})


def test_unknown_formats_are_refused_in_one_line():
    """A served format batchmark has no bits for, or a KV dtype it does not know, is a one-line error naming it."""
    with pytest.raises(ValueError, match="iq3_xs"):
        ServedFormat(attention="iq3_xs", head="bf16")
    with pytest.raises(ValueError, match="kv_cache"):
        ServedFormat(attention="bf16", head="bf16", kv_cache="int3")


def test_the_analysis_of_a_first_night_is_not_impossible():
    """The whole analysis: a served vLLM gpt-oss-120b single stream of 57.5 tok/s (kubis.ai, one Spark, llama-benchy
    pp1024 tg128; TPOT 1/57.5 s) with the card in its checkpoint format, unstated: no implausible flag, the range beside."""
    from pipeline.analysis.analyze import analyze
    from pipeline.importers.base import summary
    from pipeline.machine.hardware import load_profile

    rows = [summary("gpt-oss-120b", "vllm", 1024, 128, 1, output_throughput_tok_s=57.5, step_time_s=1 / 57.5)]
    doc = analyze(rows, {"gpt-oss-120b": load_card("gpt-oss-120b")}, load_profile("dgx-spark").model_dump())
    model, point = doc["models"][0], doc["points"][0]
    assert model["single_stream_tok_s"] == 57.5 > model["ceiling_tok_s"]
    assert model["format_stated"] is False and model["ceiling_tok_s_range"][1] > 57.5
    assert model["implausible"] is None and point["implausible"] is None
    assert point["mbu"] > 1 > point["mbu_min"]


def test_an_moe_batch_sharing_experts_is_not_impossible():
    """Regression (fault kind: a bound that is not the least): an MoE point's fewest plausible bytes counted uniform
    routing (every token its own experts), the most a step reads, so a batch whose tokens share experts read as
    MBU above 1 at every format.  vLLM gpt-oss-120b on one Spark, c = 32: 318.7 tok/s (kubis.ai, llama-benchy pp1024
    tg128), TPOT 32 / 318.7 = 0.100 s; with uniform routing and the fewest bytes (all MXFP4) a step reads ~40 GB, at
    0.100 s 400 GB/s > 273; with identical routing (coverage k/E = 4/128, the least) it reads the B = 1 experts."""
    from pipeline.analysis.analyze import analyze
    from pipeline.importers.base import summary
    from pipeline.machine.hardware import load_profile

    rows = [summary("gpt-oss-120b", "vllm", 1024, 128, 32, output_throughput_tok_s=318.7, step_time_s=32 / 318.7)]
    doc = analyze(rows, {"gpt-oss-120b": load_card("gpt-oss-120b")}, load_profile("dgx-spark").model_dump())
    point = doc["points"][0]
    assert point["mbu"] > 1 > point["mbu_min"] and point["implausible"] is None
    assert doc["models"][0]["implausible"] is None


def test_a_stated_format_moe_batch_sharing_experts_is_not_impossible():
    """Regression (fault kind: a bound that is not the least, in a stated format): a card pinned to its file size is
    stated, and its MoE points were judged at uniform routing, the most a step reads.  llama-batched-bench on one
    Spark (ggml-org/llama.cpp benches/dgx-spark.md, build 6918), gpt-oss-20b GGUF of 11.27 GiB, pp512 tg32, B = 8:
    S_TG 254.09 tok/s, step 8 / 254.09 = 0.0315 s.  By hand: experts 10,155,870,720 B (MXFP4), the rest of the file
    1,945,199,636 B; uniform coverage 1 − (28/32)^8 = 0.656 reads 8.74 GB, MBU 8.74e9 / 0.0315 / 273e9 = 1.02;
    identical routing (the sources' identical prompts; coverage 4/32) reads 3.34 GB, MBU 0.39: not impossible."""
    from pipeline.analysis.analyze import analyze
    from pipeline.importers.base import summary
    from pipeline.importers.cardmatch import card_with_file_size
    from pipeline.machine.hardware import load_profile

    card = card_with_file_size(load_card("gpt-oss-20b"), round(11.27 * 2**30), expert_quant="mxfp4")
    assert is_stated(card) and (card.expert_bytes, card.dense_bytes) == (10_155_870_720, 1_945_199_636)
    rows = [summary("gpt-oss-20b", "llama.cpp", 512, 32, 8, output_throughput_tok_s=254.09, step_time_s=8 / 254.09)]
    doc = analyze(rows, {"gpt-oss-20b": card}, load_profile("dgx-spark").model_dump())
    point = doc["points"][0]
    assert point["mbu"] == pytest.approx(1.02, abs=0.005) and point["mbu_min"] == pytest.approx(0.39, abs=0.005)
    assert point["implausible"] is None and doc["models"][0]["implausible"] is None
