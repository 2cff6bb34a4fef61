"""Model cards from config numbers and card files: parameter counts, bits per weight, KV with sliding windows."""

from __future__ import annotations

import json
import math

import pytest

from pipeline.core.errors import BatchmarkError
from pipeline.cards.registry import card_from_config_file, list_card_files, load_card
from pipeline.backends.torchcard import card_from_torch_model
from pipeline.importers.cardmatch import card_with_file_size
from pipeline.cards.modelarch import card_from_config
from pipeline.cards.weightformats import QUANT_BITS, bits_per_weight
from pipeline.cards.stepcost import bytes_per_decode_step, expert_coverage, kv_bytes_per_sequence


def test_bits_per_weight_include_block_scales():
    # NVFP4: 4-bit values + an FP8 scale per 16 -> 4 + 8/16; MXFP4: + an E8M0 scale per 32 -> 4 + 8/32;
    # GGUF Q8_0: 32 int8 + fp16 scale -> (256 + 16)/32; Q4_0: 32 4-bit + fp16 scale -> (128 + 16)/32.
    assert bits_per_weight("BF16") == 16
    assert bits_per_weight("FP8") == 8
    assert bits_per_weight("NVFP4") == 4 + 8 / 16 == 4.5
    assert bits_per_weight("MXFP4") == 4 + 8 / 32 == 4.25
    assert bits_per_weight("Q8_0") == (32 * 8 + 16) / 32 == 8.5
    assert bits_per_weight("Q4_0") == (32 * 4 + 16) / 32 == 4.5
    with pytest.raises(BatchmarkError, match="unknown format 'q3_k'"):
        bits_per_weight("q3_k")


def test_llama_3_1_8b_by_hand():
    card = load_card("Llama-3.1-8B")
    # embedding and head 128256 x 4096 each; per layer q,o 4096^2, k,v 4096 x 1024, MLP 3 x 4096 x 14336,
    # two norms of 4096; 32 layers; final norm 4096.
    per_layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    total = 2 * 128256 * 4096 + 32 * per_layer + 4096
    assert card.total_params == total == 8_030_261_248
    assert card.weight_bytes == total * 2  # BF16
    assert card.kv_bytes_per_token == 32 * 8 * 128 * 2 * 2 == 128 * 1024
    # a decode step reads everything but the input embedding (B rows are gathered)
    assert card.dense_bytes == (total - 128256 * 4096) * 2
    assert card.kind == "dense" and card.expert_bytes == 0


@pytest.mark.parametrize("name", ["gpt-oss-20b", "gpt-oss-120b", "Qwen3-30B-A3B", "Qwen3-32B", "Llama-3.1-8B",
                                  "Llama-3.1-70B", "Qwen2.5-7B", "Gemma-3-4B", "Mixtral-8x7B"])
def test_cards_match_published_parameter_counts(name):
    card = load_card(name)
    pub = card.extra["published"]
    assert "config.json" in card.source
    assert card.total_params / 1e9 == pytest.approx(pub["total_params_b"], rel=0.015)
    # OpenAI's "active" figures for gpt-oss leave out the input embedding; the others include it.
    active = card.active_params - (card.embedding_params if name.startswith("gpt-oss") else 0)
    assert active / 1e9 == pytest.approx(pub["active_params_b"], rel=0.03)
    assert card.kind == ("moe" if name.startswith(("gpt-oss", "Qwen3-30B", "Mixtral")) else "dense")


def test_every_required_card_exists():
    names = set(list_card_files())
    assert {"gpt-oss-20b", "gpt-oss-120b", "Qwen3-30B-A3B", "Qwen3-32B", "Llama-3.1-8B", "Llama-3.1-70B",
            "Qwen2.5-7B", "Gemma-3-4B", "Mixtral-8x7B"} <= names
    assert load_card("ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF").total_params == load_card("Qwen2.5-7B").total_params


def test_gpt_oss_native_weights_and_sliding_kv():
    card = load_card("gpt-oss-20b")
    assert card.quantization == "bf16+experts:mxfp4"
    # 24 layers x 32 experts x (3 x 2880 x 2880 matrices at 4.25 bits + 2 x 2880 + 2880 biases at 16 bits)
    experts = 24 * 32 * (3 * 2880 * 2880 * 4.25 / 8 + (2 * 2880 + 2880) * 2)
    assert card.expert_bytes == pytest.approx(experts, abs=1)
    assert (card.sliding_window, card.sliding_layers) == (128, 12)
    per_layer = 2 * 8 * 64 * 2  # K and V, 8 KV heads of 64, bf16
    assert card.kv_bytes_per_token == 24 * per_layer
    # at 8192 tokens: 12 full layers hold 8192 tokens, 12 sliding layers 128
    assert kv_bytes_per_sequence(card, 8192) == per_layer * (12 * 8192 + 12 * 128)
    assert kv_bytes_per_sequence(card, 100) == per_layer * 24 * 100


def test_gemma3_counts_5_global_layers_of_34():
    card = load_card("Gemma-3-4B")
    assert (card.sliding_window, card.sliding_layers) == (1024, 29)
    assert card.embedding_params == 0  # tied: the head reads the embedding matrix every step


def test_quantisations_scale_the_bytes():
    bf16, fp8, nvfp4 = (load_card("Llama-3.1-70B", quant=q) for q in ("bf16", "fp8", "nvfp4"))
    emb = 2 * 128256 * 8192  # embedding + head stay bf16 outside GGUF
    small = 80 * 2 * 8192 + 8192  # norms stay 16-bit
    matrices = bf16.total_params - emb - small
    assert fp8.weight_bytes == emb * 2 + matrices * 1 + small * 2
    assert nvfp4.weight_bytes == emb * 2 + matrices * 4.5 / 8 + small * 2
    assert nvfp4.weight_bytes < fp8.weight_bytes < bf16.weight_bytes
    q8 = load_card("Qwen2.5-7B", quant="q8_0")
    # GGUF quantises the embedding and head too: ~8.5/16 of bf16
    assert q8.weight_bytes / load_card("Qwen2.5-7B").weight_bytes == pytest.approx(8.5 / 16, rel=0.001)


def test_ceiling_from_the_reference_file_size():
    # a 7.54 GiB dense Q8_0 model at 273 GB/s: 273e9 / (7.54 x 2^30) = 33.7 tok/s
    card = card_with_file_size(load_card("Qwen2.5-Coder-7B", quant="q8_0"), int(round(7.54 * 2**30)))
    assert card.dense_bytes == card.weight_bytes == int(round(7.54 * 2**30))
    weights_only = 273e9 / card.dense_bytes
    assert weights_only == pytest.approx(33.72, abs=0.01)
    # 29.24 tok/s measured -> MBU = 29.24 / 33.72 = 0.867
    assert 29.24 / weights_only == pytest.approx(0.87, abs=0.005)


def test_file_size_of_an_moe_keeps_mxfp4_experts():
    base = load_card("gpt-oss-20b")
    card = card_with_file_size(base, int(11.27 * 2**30), expert_quant="mxfp4")
    experts = card.extra["expert_params"] * 4.25 / 8
    assert card.expert_bytes == pytest.approx(experts, abs=1)
    assert card.dense_bytes == pytest.approx(11.27 * 2**30 - experts, abs=1)
    with pytest.raises(BatchmarkError, match="smaller than the expert weights"):
        card_with_file_size(base, 10**9, expert_quant="mxfp4")


def test_expert_coverage_by_hand():
    # k = 4 of E = 32: one token misses an expert with p = 28/32; 32 tokens all miss it with 0.875^32
    assert expert_coverage(1, 4, 32) == pytest.approx(4 / 32)
    assert expert_coverage(32, 4, 32) == pytest.approx(1 - 0.875**32) == pytest.approx(0.98606, abs=1e-5)
    card = load_card("gpt-oss-20b")
    assert bytes_per_decode_step(card, 2, 0) - bytes_per_decode_step(card, 1, 0) == pytest.approx(
        card.expert_bytes * ((1 - 0.875**2) - 0.125))


def test_card_from_config_file(tmp_path):
    cfg = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
           "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": False,
           "max_position_embeddings": 131072}
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg))
    card = card_from_config_file(tmp_path / "m")
    assert card.name == "m" and card.total_params == 8_030_261_248
    del cfg["vocab_size"]
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(BatchmarkError, match=r"config.json: missing vocab_size"):
        card_from_config_file(tmp_path / "m")
    (tmp_path / "bad.json").write_text('{"model_type": ')
    with pytest.raises(BatchmarkError, match=r"bad.json: corrupt JSON at line 1"):
        card_from_config_file(tmp_path / "bad.json")


SMALL = dict(hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
             head_dim=16, vocab_size=128, max_position_embeddings=256)


@pytest.mark.parametrize("model_type,extra", [
    ("llama", dict(tie_word_embeddings=False)),
    ("qwen2", dict(tie_word_embeddings=False)),
    ("qwen3", dict(tie_word_embeddings=False)),
    ("qwen3_moe", dict(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, tie_word_embeddings=False,
                       decoder_sparse_step=1, mlp_only_layers=[])),
    ("mixtral", dict(num_local_experts=4, num_experts_per_tok=2, tie_word_embeddings=False)),
    ("gpt_oss", dict(num_local_experts=4, num_experts_per_tok=2, sliding_window=8, tie_word_embeddings=False,
                     attention_bias=True)),
    ("gemma3_text", dict(sliding_window=8, sliding_window_pattern=2, tie_word_embeddings=True)),
])
def test_config_arithmetic_matches_the_instantiated_tensors(model_type, extra):
    """The card arithmetic of each family counts exactly what transformers instantiates."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = {"model_type": model_type, **SMALL, **extra}
    arith = card_from_config(model_type, cfg)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **{k: v for k, v in cfg.items()
                                                                                  if k != "model_type"}))
    counted = card_from_torch_model(model, model_type)
    assert arith.total_params == counted.total_params
    assert arith.active_params == counted.active_params
    assert arith.embedding_params == counted.embedding_params
    assert (arith.sliding_window, arith.sliding_layers) == (counted.sliding_window, counted.sliding_layers)
    assert math.isclose(arith.kv_bytes_per_token * 2, counted.kv_bytes_per_token)  # float32 model vs bf16 card


def test_quant_table_is_documented():
    assert set(QUANT_BITS) >= {"bf16", "fp8", "nvfp4", "mxfp4", "q8_0", "q4_0"}


def test_resolve_card_from_the_hugging_face_cache(tmp_path, monkeypatch):
    """A repo id that no card file knows is read from the local Hugging Face cache, never downloaded."""
    from pipeline.cards.registry import resolve_card

    snap = tmp_path / "hub" / "models--acme--tiny-llama" / "snapshots" / ("0" * 40)
    snap.mkdir(parents=True)
    (tmp_path / "hub" / "models--acme--tiny-llama" / "refs").mkdir()
    (tmp_path / "hub" / "models--acme--tiny-llama" / "refs" / "main").write_text("0" * 40)
    (snap / "config.json").write_text(json.dumps({"model_type": "llama", **SMALL, "tie_word_embeddings": False}))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    import huggingface_hub.constants as c

    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path / "hub"))
    card = resolve_card("acme/tiny-llama")
    assert card.name == "tiny-llama" and "Hugging Face cache" in card.source
    assert card.total_params == card_from_config("x", {"model_type": "llama", **SMALL, "tie_word_embeddings": False}).total_params
    assert resolve_card("Llama-3.1-8B").total_params == 8_030_261_248
    with pytest.raises(BatchmarkError, match="no card for 'acme/unknown'"):
        resolve_card("acme/unknown")
