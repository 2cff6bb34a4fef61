"""config/gpu-transformers.yaml builds real-size architectures (counted on the meta device, no memory used).

Expected sizes are the published ones: Llama-3.1-8B 8.03 B parameters (Meta's model card), KV 128 KiB per
token in BF16 (32 layers x 8 KV heads x 128 x 2 x 2 bytes); Qwen3-30B-A3B 30.5 B total, 3.3 B activated
(Qwen's model card), KV 48 x 4 x 128 x 2 x 2 = 96 KiB per token.
"""

import pytest

from pipeline.config.sweepconfig import load_config
from pipeline.backends.torchcard import card_from_torch_model
from tests.conftest import REPO


def test_gpu_config_models_have_published_sizes():
    torch = pytest.importorskip("torch")
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = load_config(REPO / "config" / "gpu-transformers.yaml")
    cards = {}
    for m in cfg.models:
        arch = dict(m.architecture)
        model_type = arch.pop("model_type")
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **arch), dtype=torch.bfloat16)
        cards[m.name] = card_from_torch_model(model, m.name)
    dense, moe = cards["llama-3.1-8b-random"], cards["qwen3-30b-a3b-random"]
    assert dense.kind == "dense" and dense.total_params / 1e9 == pytest.approx(8.03, abs=0.01)
    assert dense.kv_bytes_per_token == 128 * 1024
    assert moe.kind == "moe" and moe.total_params / 1e9 == pytest.approx(30.5, abs=0.1)
    assert moe.active_params / 1e9 == pytest.approx(3.3, abs=0.1)
    assert moe.kv_bytes_per_token == 96 * 1024
