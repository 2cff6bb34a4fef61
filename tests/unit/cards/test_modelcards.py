"""Model-card formulas against hand-computed values."""

import pytest

from pipeline.backends.torchcard import card_from_torch_model
from pipeline.cards.modelarch import kv_bytes_per_token
from pipeline.cards.modelcards import ModelCard
from pipeline.cards.stepcost import bytes_per_decode_step, expert_coverage, flops_per_decode_step


def test_expert_coverage_by_hand():
    # k=4 of E=32: one token touches 4/32 = 0.125; 8 tokens: 1 - 0.875^8 = 0.656391...
    assert expert_coverage(1, 4, 32) == pytest.approx(0.125)
    assert expert_coverage(8, 4, 32) == pytest.approx(1 - 0.875**8)
    assert expert_coverage(8, 4, 32) == pytest.approx(0.6563916, rel=1e-6)
    assert expert_coverage(5, None, None) == 1.0
    with pytest.raises(ValueError):
        expert_coverage(0, 4, 32)


def test_kv_bytes_llama_31_8b_bf16():
    # Llama-3.1-8B: 32 layers x 8 KV heads x 128 head dim x 2 (K,V) x 2 bytes = 131072 = 128 KiB
    assert kv_bytes_per_token(32, 8, 128, 2) == 128 * 1024


def _moe_card():
    return ModelCard(name="m", kind="moe", total_params=1000, active_params=400, embedding_params=100,
                     weight_bytes=2000, dense_bytes=400, expert_bytes=1200, num_layers=2, num_attention_heads=4,
                     num_kv_heads=2, head_dim=8, kv_bytes_per_token=kv_bytes_per_token(2, 2, 8, 2),
                     num_experts=8, experts_per_token=2)


def test_bytes_per_step_moe_by_hand():
    card = _moe_card()
    # KV/token = 2*2*2*8*2 = 128 bytes. B=2, context 10: coverage 1-(6/8)^2 = 0.4375
    # weights 400 + 1200*0.4375 = 925; KV 2*10*128 = 2560; total 3485
    assert bytes_per_decode_step(card, 2, 10) == pytest.approx(3485)


def test_flops_per_step_by_hand():
    card = _moe_card()
    # 2*B*(active - embedding) = 2*2*300 = 1200; attention 4*B*ctx*layers*heads*head_dim = 4*2*10*2*4*8 = 5120
    assert flops_per_decode_step(card, 2, 10) == pytest.approx(6320)


def test_card_counts_a_real_llama():
    torch = pytest.importorskip("torch")
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model("llama", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=2, vocab_size=256, tie_word_embeddings=False)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    card = card_from_torch_model(model, "t")
    # per layer: q 64*64 + k 64*32 + v 64*32 + o 64*64 = 12288; mlp 3*64*128 = 24576; 2 norms 128 -> 36992
    # 2 layers 73984 + final norm 64 + embed 256*64 + head 256*64 (untied) = 73984 + 64 + 32768 = 106816
    assert card.total_params == 106816
    assert card.embedding_params == 256 * 64
    assert card.dense_bytes == (106816 - 16384) * 4
    assert card.kind == "dense" and card.expert_bytes == 0
    # KV: 2 * 2 layers * 2 kv heads * 16 head dim * 4 bytes = 512
    assert card.kv_bytes_per_token == 512


def test_card_counts_a_real_qwen3_moe():
    torch = pytest.importorskip("torch")
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model("qwen3_moe", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                               num_key_value_heads=2, head_dim=16, vocab_size=256, num_experts=8,
                               num_experts_per_tok=2, moe_intermediate_size=32, intermediate_size=128,
                               tie_word_embeddings=False)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    card = card_from_torch_model(model, "t")
    # routed experts: 8 experts x 3 matrices x 64 x 32 = 49152 per layer, 2 layers = 98304
    assert card.kind == "moe"
    assert card.expert_bytes == 98304 * 4
    assert card.active_params == card.total_params - 98304 + 98304 * 2 // 8
