"""The ``llamacpp`` backend's config: what it accepts, what it refuses (one line naming the field), the flags a
variant's settings become, and the digests of the configs that do not use it (unchanged by its arrival)."""

from __future__ import annotations

import copy

import pytest

from pipeline.config.llamacppoptions import LlamaCppSettings, setting_flags
from pipeline.config.sweepconfig import load_config, parse_config
from pipeline.config.variants import variant_config
from pipeline.core.errors import BatchmarkError

LLAMA = {"model_type": "llama", "vocab_size": 512, "hidden_size": 256, "intermediate_size": 512,
         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512}
BASE = {"name": "lc", "hardware": "cpu", "backend": "llamacpp", "concurrency": [1, 2, 4],
        "models": [{"name": "tiny", "architecture": LLAMA, "gguf_type": "Q8_0"}]}


def _with(**changes):
    data = copy.deepcopy(BASE)
    data.update(changes)
    return data


def test_a_llamacpp_config_keys_its_points_llama_cpp():
    cfg = parse_config(_with())
    assert cfg.stated_engine() == "llama.cpp"
    assert cfg.models[0].gguf_type == "Q8_0"
    assert cfg.llamacpp.build == ".venv-llamacpp"


def test_the_shipped_config_parses():
    cfg = load_config("config/llamacpp-cpu.yaml")
    assert [m.gguf_type for m in cfg.models] == ["F16", "Q8_0", "Q4_K_M"]
    assert len({str(m.architecture) for m in cfg.models}) == 1  # one model in three formats


@pytest.mark.parametrize("change, field", [
    ({"variants": [{"name": "a"}, {"name": "b", "kv_cache_dtype": "fp8"}]}, "variants[1].kv_cache_dtype"),
    ({"variants": [{"name": "a"}, {"name": "b", "max_num_seqs": 2}]}, "variants[1].max_num_seqs"),
    ({"models": [{"name": "moe", "architecture": {**LLAMA, "model_type": "qwen3_moe"}}]},
     "models[0].architecture.model_type"),
    ({"models": [{"name": "m", "path": "some/folder"}]}, "models[0].path"),
    ({"models": [{"name": "m", "path": "m.gguf"}]}, "models[0].path"),  # no tokenizer for its prompts
    ({"models": [{"name": "m", "architecture": LLAMA, "gguf_type": "Q5_K"}]}, "models.0.gguf_type"),
    ({"llamacpp": {"flash_attn": "yes"}}, "llamacpp.flash_attn"),
    ({"llamacpp": {"cache_type_k": "fp8"}}, "llamacpp.cache_type_k"),
    ({"llamacpp": {"requests_per_point": 2}}, "llamacpp.requests_per_point"),
])
def test_what_llamacpp_cannot_serve_is_refused_naming_the_field(change, field):
    with pytest.raises(BatchmarkError) as err:
        parse_config(_with(**change))
    assert field in str(err.value) and "\n" not in str(err.value)


def test_llamacpp_settings_on_a_vllm_config_are_refused():
    data = _with(backend="vllm", variants=[{"name": "a"}, {"name": "fa", "llamacpp": {"flash_attn": "on"}}])
    with pytest.raises(BatchmarkError, match=r"variants\[1\]\.llamacpp"):
        parse_config(data)


def test_a_variant_s_settings_become_llama_server_flags():
    cfg = parse_config(_with(variants=[{"name": "base"}, {"name": "fa", "args": ["--no-mmap"],
                                                          "llamacpp": {"flash_attn": "on", "cache_type_k": "q8_0",
                                                                       "cache_type_v": "q8_0", "ubatch_size": 128,
                                                                       "parallel": 2}}]))
    base, fa = (variant_config(cfg, v).llamacpp for v in cfg.variants)
    assert setting_flags(base) == [] and base.parallel is None
    assert fa.parallel == 2
    assert setting_flags(fa) == ["--ubatch-size", "128", "--flash-attn", "on", "--cache-type-k", "q8_0",
                                 "--cache-type-v", "q8_0"]
    assert fa.extra_args == ["--no-mmap"]
    assert setting_flags(LlamaCppSettings(threads=2, batch_size=512)) == ["--batch-size", "512", "--threads", "2"]


def test_configs_without_llamacpp_keep_their_digest():
    # the digests main gave these configs before the llamacpp backend existed (`load_config(...).digest()` there)
    assert load_config("config/vllm-cpu.yaml").digest() == "af177273dc82"
    assert load_config("config/transformers-cpu.yaml").digest() == "4c8a3e5170f6"
    assert load_config("config/spark.yaml").digest() == "35d4acd622a5"
    assert load_config("config/vllm-cpu-tuning.yaml").digest() == "b789ef349fbe"  # variants: their unset llamacpp
