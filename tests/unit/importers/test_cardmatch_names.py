"""Model names in result files resolve to the card of the same architecture.

Fault kind pinned: a variant name (``…-Instruct``, ``…-Coder-…``, ``-it-qat``, ``-GGUF``, a
quantisation suffix, an ``org/`` prefix, an Ollama ``name:tag``) found no card, and the
model's kind and MBU were dropped without saying why.  Expected cards are those of
data/models/ whose aliases list the same architecture (e.g. qwen2.5-7b.yaml: "Qwen2.5-Coder-7B
has the same architecture numbers").
"""

from __future__ import annotations

import json

import pytest

from pipeline.importers import import_run
from pipeline.importers.cardmatch import ModelInfo, match_card, model_key
from pipeline.views.show import show_run

from tests.conftest import DATA


@pytest.mark.parametrize("raw, card_file", [
    ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama-3.1-8b.yaml"),
    ("bartowski/Meta-Llama-3.1-8B-Instruct-Q8_0.gguf", "llama-3.1-8b.yaml"),
    ("Qwen/Qwen2.5-Coder-7B-Instruct-GGUF", "qwen2.5-7b.yaml"),
    ("qwen2.5-coder:7b", "qwen2.5-7b.yaml"),
    ("google/gemma-3-4b-it-qat-q4_0-gguf", "gemma-3-4b.yaml"),
    ("gemma3:4b-it-qat", "gemma-3-4b.yaml"),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507-FP8", "qwen3-30b-a3b.yaml"),
    ("unsloth/gpt-oss-20b-GGUF", "gpt-oss-20b.yaml"),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b.yaml"),
])
def test_variants_resolve_to_the_card_of_their_architecture(raw, card_file, scratch_root):
    found = match_card(raw.split("/")[-1], ModelInfo(raw_name=raw))
    assert found.card is not None, found.how
    assert card_file in found.how


@pytest.mark.parametrize("raw", ["Qwen2.5-Coder-32B-Instruct", "Llama-3.2-3B-Instruct", "dense-llama", "Qwen3-8B"])
def test_other_sizes_and_unknown_models_get_no_card(raw, scratch_root):
    found = match_card(raw, ModelInfo(raw_name=raw))
    assert found.card is None and "no card" in found.how


def test_keys_drop_variant_words_but_keep_family_version_size():
    assert model_key("llama3.1:8b-instruct-q4_K_M") == model_key("Llama-3.1-8B") == ("llama", "3.1", "8b")
    assert model_key("Qwen3-30B-A3B-Instruct-2507") == ("qwen", "3", "30b", "a3b")
    assert model_key("Qwen3-32B") != model_key("Qwen3-30B-A3B")


def test_what_the_file_states_checks_the_card(scratch_root):
    # llama.cpp states 20.91 B params for gpt-oss-20b (the reference batched-bench file): the card agrees
    ok = match_card("gpt-oss 20B MXFP4 MoE", ModelInfo(raw_name="gpt-oss 20B MXFP4 MoE", quant="mxfp4",
                                                      file_bytes=int(11.27 * 2**30), params=20_910_000_000))
    assert ok.card is not None and ok.card.num_experts and "file size" in ok.how
    # a 14.77 B model named like Qwen2.5-7B (a renamed Qwen2.5-14B) is another architecture
    bad = match_card("Qwen2.5-7B-Instruct", ModelInfo(raw_name="Qwen2.5-7B-Instruct", params=14_770_000_000))
    assert bad.card is None and "14.77 B" in bad.how


def test_quant_without_bits_or_size_leaves_bytes_unknown(scratch_root):
    found = match_card("llama3.1:8b-instruct-q5_K_M", ModelInfo(raw_name="llama3.1:8b-instruct-q5_K_M"))
    assert found.card is None and "q5_k_m" in found.how
    # Q4_K_M has a stated file average (4.9 bits per weight, pipeline.cards.weightformats.QUANT_BITS)
    found = match_card("llama3.1:8b-instruct-q4_K_M", ModelInfo(raw_name="llama3.1:8b-instruct-q4_K_M"))
    assert found.card is not None and found.card.quantization == "q4_k_m"


def test_import_records_the_card_used_and_what_is_unknown(scratch_root, tmp_path):
    d = json.loads((DATA / "vllm-bench" / "llama-3.1-8b-c4.json").read_text())
    known, unknown = dict(d, model_id="meta-llama/Meta-Llama-3.1-8B-Instruct-FP8"), dict(d, model_id="acme/Foo-13B-Chat")
    (tmp_path / "a.json").write_text(json.dumps(known))
    (tmp_path / "b.json").write_text(json.dumps(unknown))
    run = import_run("vllm-bench", [tmp_path / "a.json", tmp_path / "b.json"], "h200", run_id="names")
    meta = json.loads((run / "run.json").read_text())
    assert "llama-3.1-8b.yaml" in meta["model_cards_used"]["meta-llama/Meta-Llama-3.1-8B-Instruct-FP8"]
    assert "weights in fp8" in meta["model_cards_used"]["meta-llama/Meta-Llama-3.1-8B-Instruct-FP8"]
    assert "acme/Foo-13B-Chat" in meta["models_unknown"] and meta["models_without_card"] == ["acme/Foo-13B-Chat"]
    doc = show_run(run)
    models = {m["model"]: m for m in doc["models"]}
    assert models["meta-llama/Meta-Llama-3.1-8B-Instruct-FP8"]["kind"] == "dense"
    assert models["acme/Foo-13B-Chat"]["kind"] is None  # imported anyway, unknown said as null
    assert {p["model"] for p in doc["points"]} == {"meta-llama/Meta-Llama-3.1-8B-Instruct-FP8", "acme/Foo-13B-Chat"}  # as named; the -FP8 suffix gives the weight format
