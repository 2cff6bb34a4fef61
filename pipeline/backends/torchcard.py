"""A model card counted from an instantiated Hugging Face model: its real tensors, their dtype.

The backends that load a model (``transformers``; served backends counting a card on the
meta device from a model's config) count its card here; models batchmark never loads get theirs
from architecture numbers (:mod:`pipeline.cards.modelarch`).
"""

from __future__ import annotations

from typing import Any

from pipeline.cards.modelarch import kv_bytes_per_token, layer_types
from pipeline.cards.modelcards import ModelCard


def _is_routed_expert(name: str) -> bool:
    return ".experts." in name or name.endswith(".experts") or ".experts_" in name


def card_from_torch_model(model: Any, name: str) -> ModelCard:
    """Count a card from an instantiated Hugging Face causal LM (its real tensors).

    Routed-expert tensors are recognised by ``.experts.`` in their name (Qwen3-MoE, Mixtral,
    gpt-oss); shared experts and routers count as dense.  The input embedding counts in
    ``total_params`` but not in the bytes a decode step reads, unless tied to the output head.
    The card's ``quantization`` is the parameters' torch dtype (``float32``, ``bfloat16``).
    """
    cfg = model.config
    text_cfg = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    total = expert = embed = 0
    total_bytes = expert_bytes = embed_bytes = 0
    dtype = None
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    tied = head is not None and head.weight.data_ptr() == emb.data_ptr()
    for pname, p in model.named_parameters():  # tied parameters appear once
        n, b = p.numel(), p.numel() * p.element_size()
        dtype = dtype or p.dtype
        total += n
        total_bytes += b
        if _is_routed_expert(pname):
            expert += n
            expert_bytes += b
        elif p is emb and not tied:
            embed += n
            embed_bytes += b
    num_experts = getattr(text_cfg, "num_experts", None) or getattr(text_cfg, "num_local_experts", None)
    k = getattr(text_cfg, "num_experts_per_tok", None)
    moe = bool(expert and num_experts and k)
    active = total - expert + (expert * k // num_experts if moe else 0)
    heads = text_cfg.num_attention_heads
    kv_heads = getattr(text_cfg, "num_key_value_heads", None) or heads
    head_dim = getattr(text_cfg, "head_dim", None) or text_cfg.hidden_size // heads
    layers = text_cfg.num_hidden_layers
    elem = emb.element_size()
    cfg_dict = text_cfg.to_dict() if hasattr(text_cfg, "to_dict") else {}
    types = layer_types(cfg_dict)
    window = cfg_dict.get("sliding_window") if "sliding_attention" in types else None
    return ModelCard(
        name=name, kind="moe" if moe else "dense", total_params=total, active_params=active,
        embedding_params=embed, weight_bytes=total_bytes,
        dense_bytes=total_bytes - expert_bytes - embed_bytes, expert_bytes=expert_bytes,
        num_layers=layers, num_attention_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
        kv_bytes_per_token=kv_bytes_per_token(layers, kv_heads, head_dim, elem),
        num_experts=num_experts if moe else None, experts_per_token=k if moe else None,
        source=f"counted from the instantiated {type(model).__name__} ({text_cfg.model_type})",
        sliding_window=int(window) if window else None,
        sliding_layers=sum(t == "sliding_attention" for t in types) if window else 0,
        max_context=cfg_dict.get("max_position_embeddings"),
        quantization=str(dtype).removeprefix("torch."))
