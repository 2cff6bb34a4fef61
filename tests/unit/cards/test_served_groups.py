"""Served formats per tensor group (pipeline.cards.servedformat, pipeline.cards.weightformats): embeddings,
attention, MLP, experts, head and KV cache stated apart, a weight file's real size, and the formats users serve with
bits per weight from the formats' own block definitions.

Hand arithmetic, Llama-3.1-8B (hidden 4096, 32 layers, 32 heads and 8 KV heads of 128, FFN 14336, vocab 128256,
untied): attention q, o 4096² and k, v 4096 × 1024 a layer, × 32 = 1,342,177,280; MLP 3 × 4096 × 14336 × 32 =
5,637,144,576; head = embedding = 525,336,576; small tensors 266,240 at 16 bits = 532,480 bytes.
"""

from __future__ import annotations

import pytest

from pipeline.cards.registry import load_card
from pipeline.cards.servedformat import KV_BYTES, ServedFormat, card_in_format
from pipeline.cards.weightformats import QUANT_BITS, normalize_quant
from pipeline.config.sweepconfig import parse_config
from pipeline.core.errors import BatchmarkError
from pipeline.backends.simulated import resolve_card

ATTN, MLP, HEAD, SMALL_B = 1_342_177_280, 5_637_144_576, 525_336_576, 532_480


def _cfg(served: dict) -> object:
    return parse_config({"name": "s", "hardware": "dgx-spark", "backend": "simulated", "concurrency": [1],
                         "input_len": 128, "output_len": 16, "repeats": 1,
                         "models": [{"name": "m", "card": "Llama-3.1-8B", "served": served}]}, "s.yaml")


def test_a_dense_nvfp4_checkpoint_with_bf16_attention_is_statable():
    """Fault kind: a served group that cannot be stated ("attention" was every non-expert matrix, the MLP with it:
    ``models.0.served.mlp: unknown key``).  ModelOpt's NVFP4 Llama-3.1-8B keeping every self_attn in BF16:
    bytes read a step = attention × 2 + MLP × 4.5 / 8 + head × 2 + small = 2,684,354,560 + 3,170,893,824
    + 1,050,673,152 + 532,480 = 6,906,454,016 (all of it NVFP4 but the head: 4,977,074,176)."""
    cfg = _cfg({"attention": "bf16", "mlp": "nvfp4", "head": "bf16"})
    card = resolve_card(cfg.models[0], "dgx-spark", "vllm")
    assert card.dense_bytes == ATTN * 2 + MLP * 4.5 / 8 + HEAD * 2 + SMALL_B == 6_906_454_016
    assert card.weight_bytes == card.dense_bytes + HEAD * 2  # + the embedding table, stored, a row read a token
    assert card.quantization == "attention:bf16,mlp:nvfp4,head:bf16"
    every = card_in_format(load_card("llama-3.1-8b"), ServedFormat(attention="nvfp4", head="bf16"))
    assert every.dense_bytes == (ATTN + MLP) * 4.5 / 8 + HEAD * 2 + SMALL_B == 4_977_074_176
    emb = card_in_format(load_card("llama-3.1-8b"), ServedFormat(attention="bf16", head="bf16", embeddings="q8_0"))
    assert emb.weight_bytes - emb.dense_bytes == HEAD * 8.5 / 8  # the embedding group in its own format


@pytest.mark.parametrize("name, block_bytes, block_weights", [
    ("q8_0", 2 + 32, 32), ("q4_0", 2 + 16, 32), ("iq4_nl", 2 + 16, 32), ("q4_k", 2 + 2 + 12 + 128, 256),
    ("q6_k", 128 + 64 + 16 + 2, 256), ("mxfp4", 1 + 16, 32), ("nvfp4", 1 + 8, 16), ("w4a16", 2 + 64, 128)])
def test_bits_per_weight_come_from_the_block_definitions(name, block_bytes, block_weights):
    """Fault kind: formats users serve unknown (``iq4_nl``, ``q4_k``, W4A16 refused).  Bits = a block's bytes × 8 /
    its weights (ggml ``ggml-common.h`` blocks; OCP MX v1.0 for MXFP4, 32 E2M1 + one E8M0; NVFP4 16 E2M1 + one E4M3;
    W4A16 group 128 int4 + one fp16 scale): Q8_0 8.5, Q4_0 4.5, IQ4_NL 4.5, Q4_K 4.5, Q6_K 6.5625, MXFP4 4.25,
    NVFP4 4.5, W4A16 4.125."""
    assert QUANT_BITS[normalize_quant(name)] == block_bytes * 8 / block_weights


def test_names_users_write_read_as_their_format():
    """Fault kind: formats users serve unknown.  Unsloth's ``UD-Q4_K_XL`` is a mixture (no one definition): counted
    at Q4_K_M's 4.9 until its file size is stated; an unknown name still fails in one line naming it."""
    assert normalize_quant("UD-Q4_K_XL") == "q4_k_xl" and QUANT_BITS["q4_k_xl"] == QUANT_BITS["q4_k_m"] == 4.9
    assert normalize_quant("IQ4_NL") == "iq4_nl" and normalize_quant("W4A16") == "w4a16"
    with pytest.raises(BatchmarkError, match="'q3_zz'"):
        normalize_quant("q3_zz")


def test_a_kv_cache_in_q4_0_is_counted_in_its_block_bytes():
    """Fault kind: a KV dtype users serve unknown (llama.cpp ``--cache-type-k q4_0``).  KV bytes a token =
    2 × 32 layers × 8 heads × 128 × 18 / 32 bytes = 36,864 (bf16: 131,072); ``fp8`` 65,536."""
    assert KV_BYTES["q4_0"] == 18 / 32
    base = load_card("llama-3.1-8b")
    for kv, want in (("q4_0", 36_864), ("Q8_0", 69_632), ("fp8", 65_536)):
        card = card_in_format(base, ServedFormat(attention="bf16", head="bf16", kv_cache=kv))
        assert card.kv_bytes_per_token == want
    with pytest.raises(BatchmarkError, match="kv_cache"):
        _cfg({"attention": "bf16", "head": "bf16", "kv_cache": "q3"})


def test_a_gguf_file_size_gives_the_bytes():
    """Fault kind: a weight file's real size cannot be stated (``file_gib: unknown key``; a Q4_K_M or Q4_0 file keeps
    some tensors in higher precision).  gpt-oss-20b as ggml-org's GGUF, 12.11 GiB stated: weight bytes = 12.11 × 2^30
    = 13,003,013,489; the experts in MXFP4 (their parameters × 4.25 / 8), the rest read a step."""
    cfg = _cfg({"attention": "q8_0", "head": "q8_0", "experts": "mxfp4", "file_gib": 12.11})
    assert cfg.models[0].served.file_gib == 12.11
    base = load_card("gpt-oss-20b")
    card = card_in_format(base, cfg.models[0].served)
    assert card.weight_bytes == round(12.11 * 2**30) == 13_003_013_489
    assert card.expert_bytes == round(base.extra["expert_params"] * 4.25 / 8)
    assert card.dense_bytes == card.weight_bytes - card.expert_bytes
    for bad in (0, -1.0, float("nan"), float("inf"), "big"):
        with pytest.raises(BatchmarkError, match="file_gib"):
            _cfg({"attention": "q8_0", "head": "q8_0", "file_gib": bad})
