"""Model cards: architecture numbers -> parameters, bytes read per decode step, KV bytes per token.

A :class:`ModelCard` holds byte counts, so any quantisation is already folded in.  Cards come
from a model batchmark instantiated (:func:`card_from_torch_model`, counting the real tensors)
or, for models it never loads, from architecture numbers (see issue 5's card files).

Formulas (DESIGN.md, "bytes per decode step"):
- expert coverage under uniform top-k routing of B tokens over E experts:
  ``1 - (1 - k/E)**B`` (the probability that a given expert is picked by at least one of B
  independent tokens, each picking k of E);
- weight bytes read per step = dense bytes + routed-expert bytes × coverage(B);
- KV bytes read per step = B × context × KV bytes per token;
- KV bytes per token = 2 (K and V) × layers × kv_heads × head_dim × bytes per element;
- FLOPs per step ≈ 2 × B × matmul params per token + attention 4 × B × context × layers ×
  heads × head_dim (QKᵀ and AV, 2 FLOPs per multiply-add each) — Kaplan et al. 2020,
  "Scaling Laws for Neural Language Models", table 1.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class ModelCard:
    """Architecture numbers of one model, in parameters and bytes.

    Attributes:
        total_params: every parameter (tied weights counted once).
        active_params: parameters used per token (routed experts counted k of E).
        embedding_params: input-embedding parameters that a decode step does not read
            (only B rows are gathered); 0 when tied to the output head.
        weight_bytes: bytes of all weights.
        dense_bytes: weight bytes read by every decode step whatever B is (attention,
            norms, router, shared experts, output head) — excludes the input embedding.
        expert_bytes: bytes of all routed experts over all layers (0 for a dense model).
        kv_bytes_per_token: KV-cache bytes one token occupies over all layers.
    """

    name: str
    kind: Literal["dense", "moe"]
    total_params: int
    active_params: int
    embedding_params: int
    weight_bytes: int
    dense_bytes: int
    expert_bytes: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    kv_bytes_per_token: int
    num_experts: int | None = None
    experts_per_token: int | None = None
    dtype: str = "bfloat16"
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelCard":
        """Inverse of :meth:`as_dict`."""
        return cls(**data)


def expert_coverage(batch: int, experts_per_token: int | None, num_experts: int | None) -> float:
    """Expected fraction of a layer's routed experts touched by ``batch`` tokens: ``1 - (1 - k/E)**B``.

    Derived: under uniform routing one token misses a given expert with probability 1 - k/E;
    B independent tokens all miss it with probability (1 - k/E)**B.  Returns 1.0 for a dense
    model (no experts).  Raises ValueError for batch < 1 or k > E.
    """
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    if not num_experts or not experts_per_token:
        return 1.0
    if experts_per_token > num_experts:
        raise ValueError(f"experts_per_token {experts_per_token} > num_experts {num_experts}")
    return 1.0 - (1.0 - experts_per_token / num_experts) ** batch


def weight_bytes_per_step(card: ModelCard, batch: int) -> float:
    """Weight bytes read by one decode step of ``batch`` sequences (bytes): dense + experts × coverage."""
    return card.dense_bytes + card.expert_bytes * expert_coverage(batch, card.experts_per_token, card.num_experts)


def kv_bytes_per_step(card: ModelCard, batch: int, context: float) -> float:
    """KV-cache bytes read by one decode step (bytes) = B × context tokens × KV bytes per token."""
    return batch * context * card.kv_bytes_per_token


def bytes_per_decode_step(card: ModelCard, batch: int, context: float) -> float:
    """Total bytes read by one decode step at batch B and mean context (tokens): weights + KV."""
    return weight_bytes_per_step(card, batch) + kv_bytes_per_step(card, batch, context)


def flops_per_decode_step(card: ModelCard, batch: int, context: float) -> float:
    """FLOPs of one decode step: 2 × B × (active − embedding) params + 4 × B × context × layers × heads × head_dim."""
    matmul_params = card.active_params - card.embedding_params
    attention = 4.0 * batch * context * card.num_layers * card.num_attention_heads * card.head_dim
    return 2.0 * batch * matmul_params + attention


def kv_bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int, bytes_per_element: float) -> int:
    """KV bytes per token = 2 × layers × kv_heads × head_dim × bytes per element (K and V)."""
    return int(round(2 * num_layers * num_kv_heads * head_dim * bytes_per_element))


def _is_routed_expert(name: str) -> bool:
    return ".experts." in name or name.endswith(".experts") or ".experts_" in name


def card_from_torch_model(model: Any, name: str) -> ModelCard:
    """Count a card from an instantiated Hugging Face causal LM (its real tensors).

    Routed-expert tensors are recognised by ``.experts.`` in their name (Qwen3-MoE, Mixtral,
    gpt-oss); shared experts and routers count as dense.  The input embedding counts in
    ``total_params`` but not in the bytes a decode step reads, unless tied to the output head.
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
    return ModelCard(
        name=name, kind="moe" if moe else "dense", total_params=total, active_params=active,
        embedding_params=embed, weight_bytes=total_bytes,
        dense_bytes=total_bytes - expert_bytes - embed_bytes, expert_bytes=expert_bytes,
        num_layers=layers, num_attention_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
        kv_bytes_per_token=kv_bytes_per_token(layers, kv_heads, head_dim, elem),
        num_experts=num_experts if moe else None, experts_per_token=k if moe else None,
        dtype=str(dtype).removeprefix("torch."),
        source=f"counted from the instantiated {type(model).__name__} ({text_cfg.model_type})")
