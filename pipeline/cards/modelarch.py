"""Architecture arithmetic: Hugging Face config numbers -> parameter counts, layer types, a model card.

The numbers a ``config.json`` gives (hidden size, layers, heads, experts, …) are checked first
(:func:`check_arch_numbers`, bounds :data:`DIM_MAX` …), then counted into parameters per part
(:func:`param_counts`) and bytes in a weight format (:func:`card_from_config`, bits per weight
from :mod:`pipeline.cards.weightformats`).  Where the numbers come from (card files, a local
``config.json``, the Hugging Face cache) is :mod:`pipeline.cards.registry`'s concern.

Formulas:
- KV bytes per token = 2 (K and V) × layers × kv_heads × head_dim × bytes per element
  (docs/definitions.md, "bytes per decode step");
- parameters per layer: :func:`param_counts`; bytes: :func:`card_from_config`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from pipeline.core.errors import BatchmarkError
from pipeline.cards.modelcards import ModelCard
from pipeline.cards.weightformats import GGUF_QUANTS, QUANT_BITS, SMALL_TENSOR_BITS, normalize_quant


def kv_bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int, bytes_per_element: float) -> int:
    """KV bytes per token = 2 × layers × kv_heads × head_dim × bytes per element (K and V)."""
    return int(round(2 * num_layers * num_kv_heads * head_dim * bytes_per_element))



def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The language-model part of a config (multimodal configs nest it under ``text_config``)."""
    cfg = dict(config)
    if isinstance(cfg.get("text_config"), dict):
        inner = dict(cfg["text_config"])
        inner.setdefault("model_type", cfg.get("model_type"))
        inner.setdefault("tie_word_embeddings", cfg.get("tie_word_embeddings"))
        cfg = inner
    return cfg


#: Upper bounds of architecture numbers, each far above any model (a 400-digit ``hidden_size`` ended
#: in OverflowError and 10^30 layers in a loop that never ended).  Largest today: ~10^4 hidden, ~10^2 layers,
#: ~10^6 vocabulary, ~10^3 experts, ~10^7 context.
DIM_MAX = 10_000_000
LAYERS_MAX = 100_000
VOCAB_MAX = 1_000_000_000
EXPERTS_MAX = 1_000_000
CONTEXT_MAX = 10_000_000_000


class ArchNumbers(BaseModel):
    """The config.json numbers the arithmetic reads, checked before any is used.

    Counts are strict integers (a bool or a string is refused) and at least 1 where a zero
    would divide by zero or make a size negative or meaningless (heads, layers, dimensions);
    expert counts may be 0 (a dense model); each at most its bound (:data:`DIM_MAX`, …).  Keys the
    arithmetic does not read pass unchecked.
    """

    model_config = ConfigDict(extra="allow")

    hidden_size: StrictInt | None = Field(default=None, ge=1, le=DIM_MAX)
    num_hidden_layers: StrictInt | None = Field(default=None, ge=1, le=LAYERS_MAX)
    num_attention_heads: StrictInt | None = Field(default=None, ge=1, le=DIM_MAX)
    num_key_value_heads: StrictInt | None = Field(default=None, ge=1, le=DIM_MAX)
    head_dim: StrictInt | None = Field(default=None, ge=1, le=DIM_MAX)
    vocab_size: StrictInt | None = Field(default=None, ge=1, le=VOCAB_MAX)
    intermediate_size: StrictInt | None = Field(default=None, ge=1, le=DIM_MAX)
    moe_intermediate_size: StrictInt | None = Field(default=None, ge=1, le=DIM_MAX)
    shared_expert_intermediate_size: StrictInt | None = Field(default=None, ge=0, le=DIM_MAX)
    num_local_experts: StrictInt | None = Field(default=None, ge=0, le=EXPERTS_MAX)
    num_experts: StrictInt | None = Field(default=None, ge=0, le=EXPERTS_MAX)
    num_experts_per_tok: StrictInt | None = Field(default=None, ge=0, le=EXPERTS_MAX)
    decoder_sparse_step: StrictInt | None = Field(default=None, ge=1, le=LAYERS_MAX)
    sliding_window: StrictInt | None = Field(default=None, ge=0, le=CONTEXT_MAX)
    sliding_window_pattern: StrictInt | None = Field(default=None, ge=1, le=LAYERS_MAX)
    max_window_layers: StrictInt | None = Field(default=None, ge=0, le=LAYERS_MAX)
    max_position_embeddings: StrictInt | None = Field(default=None, ge=1, le=CONTEXT_MAX)


def validation_message(where: str, err: ValidationError) -> str:
    """One line naming the file (``where``), the first bad field and its value, of a card's pydantic check."""
    first = err.errors()[0]
    loc = ".".join(str(x) for x in first["loc"]) or "(top level)"
    msg = first["msg"].removeprefix("Value error, ")
    got = "" if first["type"] == "missing" else f" (got {first.get('input')!r})"
    return " ".join(f"{where}: {loc}: {msg}{got}".split())[:400]


def check_arch_numbers(cfg: dict[str, Any], where: str) -> None:
    """Refuse architecture numbers the arithmetic cannot use (0 heads, negative layers, a string count).

    Raises:
        BatchmarkError: ``<where>: <field>: Input should be greater than or equal to 1 (got 0)``.
    """
    try:
        ArchNumbers.model_validate(cfg)
    except ValidationError as err:
        raise BatchmarkError(validation_message(where, err)) from None
    experts = cfg.get("num_local_experts") or cfg.get("num_experts")
    k = cfg.get("num_experts_per_tok")
    if experts and k and k > experts:
        raise BatchmarkError(f"{where}: num_experts_per_tok: {k} is more than the {experts} experts")
    heads, kv = cfg.get("num_attention_heads"), cfg.get("num_key_value_heads")
    if heads and kv and (kv > heads or heads % kv):  # grouped-query attention: each KV head serves heads / kv queries
        raise BatchmarkError(f"{where}: num_key_value_heads: {kv} does not divide the {heads} attention heads "
                             f"(grouped-query attention shares each KV head among a whole number of query heads)")


def _need(cfg: dict[str, Any], key: str, where: str) -> Any:
    if cfg.get(key) is None:
        raise BatchmarkError(f"{where}: missing {key}")
    return cfg[key]


def layer_types(config: dict[str, Any]) -> list[str]:
    """``"full_attention"`` or ``"sliding_attention"`` per layer, as transformers derives it.

    ``layer_types`` when the config lists it; gpt-oss alternates sliding/full starting with
    sliding; Gemma 3 makes every ``sliding_window_pattern``-th layer (default 6) full;
    Mistral/Mixtral slide on every layer when ``sliding_window`` is set; Qwen2-family only
    with ``use_sliding_window``.  Every other model: all full.
    """
    cfg = text_config(config)
    n = int(cfg.get("num_hidden_layers") or 0)
    if isinstance(cfg.get("layer_types"), list):
        return [str(t) for t in cfg["layer_types"]]
    mt = str(cfg.get("model_type") or "")
    window = cfg.get("sliding_window")
    if not window:
        return ["full_attention"] * n
    if mt == "gpt_oss":
        return ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    if mt.startswith("gemma3") or mt.startswith("gemma2"):
        pattern = int(cfg.get("sliding_window_pattern") or (2 if mt.startswith("gemma2") else 6))
        return ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n)]
    if mt in ("mistral", "mixtral"):
        return ["sliding_attention"] * n
    if mt.startswith("qwen") and cfg.get("use_sliding_window"):
        start = int(cfg.get("max_window_layers") or 0)
        return ["sliding_attention" if i >= start else "full_attention" for i in range(n)]
    return ["full_attention"] * n


def _attention_params(mt: str, cfg: dict[str, Any], h: int, heads: int, kv_heads: int,
                      head_dim: int) -> tuple[int, int, int]:
    """(attention matrix parameters, attention biases, sinks and q/k norms, layer norms) of one layer of model type
    ``mt`` (the formulas of :func:`param_counts`)."""
    q, kv = heads * head_dim, kv_heads * head_dim
    attn_matrix = 2 * h * q + 2 * h * kv
    attn_small = 0
    if mt == "gpt_oss" or (cfg.get("attention_bias") and mt != "qwen2"):
        attn_small += q + 2 * kv + h
    elif mt.startswith("qwen2"):
        attn_small += q + 2 * kv
    if mt == "gpt_oss":
        attn_small += heads  # attention sinks
    if mt.startswith("qwen3") or mt.startswith("gemma3"):
        attn_small += 2 * head_dim  # q_norm, k_norm
    norms = (4 if mt.startswith("gemma") else 2) * h
    return attn_matrix, attn_small, norms


def _layer_params(cfg: dict[str, Any], where: str, h: int, n_layers: int, n_experts: Any, attn_matrix: int,
                  attn_small: int) -> tuple[int, int, int, int]:
    """(dense matrix, dense small, expert matrix, expert small) parameters of all layers: each layer's attention
    (``attn_matrix``, ``attn_small`` with its norms) and its MLP, a dense one or (``n_experts`` set, on the MoE
    layers of ``decoder_sparse_step`` and ``mlp_only_layers``) routed experts, router and shared expert."""
    mt = str(cfg.get("model_type") or "")
    dense_matrix = dense_small = expert_matrix = expert_small = 0
    sparse_step = int(cfg.get("decoder_sparse_step") or 1)
    mlp_only = set(cfg.get("mlp_only_layers") or [])
    for i in range(n_layers):
        dense_matrix += attn_matrix
        dense_small += attn_small
        layer_moe = n_experts is not None and i not in mlp_only and (i + 1) % sparse_step == 0
        if layer_moe:
            inter = int(cfg.get("moe_intermediate_size") or _need(cfg, "intermediate_size", where))
            expert_matrix += int(n_experts) * 3 * h * inter
            dense_small += h * int(n_experts)  # router
            if mt == "gpt_oss":
                expert_small += int(n_experts) * (2 * inter + h)
                dense_small += int(n_experts)  # router bias
            shared = cfg.get("shared_expert_intermediate_size")
            if shared:
                dense_matrix += 3 * h * int(shared)
                dense_small += h  # shared-expert gate
        else:
            dense_matrix += 3 * h * int(_need(cfg, "intermediate_size", where))
    return dense_matrix, dense_small, expert_matrix, expert_small


def param_counts(config: dict[str, Any], where: str = "config") -> dict[str, Any]:
    """Parameter counts of a decoder-only LM from its Hugging Face config numbers.

    Supports the families of the card files: llama, mistral, mixtral, qwen2, qwen3,
    qwen3_moe, gpt_oss, gemma3 (text part).  Derived, per layer:
    attention q/o = hidden × heads × head_dim each, k/v = hidden × kv_heads × head_dim each
    (+ biases: q/k/v for qwen2, q/k/v/o and one sink per head for gpt-oss), q/k norms of
    head_dim (qwen3, gemma3); a gated MLP or expert = 3 × hidden × intermediate (+ gate/up and
    down biases for gpt-oss); router = hidden × experts (+ bias for gpt-oss); norms = 2
    (gemma3: 4) × hidden; plus the embedding (vocab × hidden), the output head (the same,
    unless tied) and the final norm.

    Returns:
        dict with ``embedding``, ``head`` (0 when tied), ``dense_matrix`` and ``dense_small``
        (read by every step: attention, dense MLP, router, norms, biases), ``attention_matrix`` (the attention's
        q/k/v/o matrices of every layer, a part of ``dense_matrix``: the rest is the MLP), ``expert_matrix``
        and ``expert_small`` (routed experts of all layers), ``total``, ``active``,
        ``num_experts``, ``experts_per_token`` and the attention shape.

    Raises:
        BatchmarkError: a number the count needs is missing (names the field and ``where``).
    """
    cfg = text_config(config)
    check_arch_numbers(cfg, where)
    mt = str(cfg.get("model_type") or "")
    h = int(_need(cfg, "hidden_size", where))
    n_layers = int(_need(cfg, "num_hidden_layers", where))
    heads = int(_need(cfg, "num_attention_heads", where))
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or h // heads)
    vocab = int(_need(cfg, "vocab_size", where))
    tied = cfg.get("tie_word_embeddings")
    if tied is None:
        tied = mt.startswith("gemma")
    n_experts = cfg.get("num_local_experts") or cfg.get("num_experts")
    k = cfg.get("num_experts_per_tok")
    moe = bool(n_experts and k)

    attn_matrix, attn_small, norms = _attention_params(mt, cfg, h, heads, kv_heads, head_dim)

    dense_matrix, dense_small, expert_matrix, expert_small = _layer_params(
        cfg, where, h, n_layers, n_experts if moe else None, attn_matrix, attn_small + norms)
    dense_small += h  # final norm
    embedding = vocab * h
    head = 0 if tied else vocab * h
    experts = expert_matrix + expert_small
    total = embedding + head + dense_matrix + dense_small + experts
    active = total - experts + (experts * int(k) // int(n_experts) if moe else 0)
    types = layer_types(cfg)
    return {
        "embedding": embedding, "head": head, "tied": bool(tied),
        "dense_matrix": dense_matrix, "dense_small": dense_small, "attention_matrix": attn_matrix * n_layers,
        "expert_matrix": expert_matrix, "expert_small": expert_small,
        "total": total, "active": active,
        "num_experts": int(n_experts) if moe else None, "experts_per_token": int(k) if moe else None,
        "num_layers": n_layers, "num_attention_heads": heads, "num_kv_heads": kv_heads, "head_dim": head_dim,
        "sliding_window": int(cfg["sliding_window"]) if cfg.get("sliding_window") and "sliding_attention" in types else None,
        "sliding_layers": sum(t == "sliding_attention" for t in types),
        "max_context": cfg.get("max_position_embeddings"),
        "model_type": mt,
    }


def card_from_config(name: str, config: dict[str, Any], quant: str = "bf16", expert_quant: str | None = None,
                     kv_bytes_per_element: float = 2.0, source: str = "", where: str = "config") -> ModelCard:
    """A card from Hugging Face config numbers, with weights stored in ``quant``.

    Bytes = matrix params × bits of ``quant`` (experts: ``expert_quant``, default ``quant``)
    / 8 + small tensors × 16 / 8; the embedding and output head use ``quant`` for GGUF formats
    and bf16 otherwise (:data:`GGUF_QUANTS`).  ``dense_bytes`` (read by every step) = head
    (the embedding when tied) + attention + dense MLP + router + norms; the untied input
    embedding is not read by a step (B rows are gathered).  ``kv_bytes_per_element``: 2 for
    a bf16/fp16 KV cache, 1 for fp8.

    Raises:
        BatchmarkError: unknown quantisation or a missing config number.
    """
    quant = normalize_quant(quant)
    expert_quant = normalize_quant(expert_quant) if expert_quant else quant
    pc = param_counts(config, where)
    qb, eb, sb = QUANT_BITS[quant], QUANT_BITS[expert_quant], SMALL_TENSOR_BITS
    emb_bits = qb if quant in GGUF_QUANTS else 16.0
    embedding_bytes = pc["embedding"] * emb_bits / 8
    head_bytes = pc["head"] * emb_bits / 8
    dense_layer_bytes = pc["dense_matrix"] * qb / 8 + pc["dense_small"] * sb / 8
    expert_bytes = pc["expert_matrix"] * eb / 8 + pc["expert_small"] * sb / 8
    read_head = embedding_bytes if pc["tied"] else head_bytes
    weight_bytes = embedding_bytes + head_bytes + dense_layer_bytes + expert_bytes
    label = quant if expert_quant == quant else f"{quant}+experts:{expert_quant}"
    return ModelCard(
        name=name, kind="moe" if pc["num_experts"] else "dense",
        total_params=pc["total"], active_params=pc["active"],
        embedding_params=0 if pc["tied"] else pc["embedding"],
        weight_bytes=int(round(weight_bytes)), dense_bytes=int(round(dense_layer_bytes + read_head)),
        expert_bytes=int(round(expert_bytes)), num_layers=pc["num_layers"],
        num_attention_heads=pc["num_attention_heads"], num_kv_heads=pc["num_kv_heads"], head_dim=pc["head_dim"],
        kv_bytes_per_token=kv_bytes_per_token(pc["num_layers"], pc["num_kv_heads"], pc["head_dim"], kv_bytes_per_element),
        num_experts=pc["num_experts"], experts_per_token=pc["experts_per_token"],
        source=source or f"arithmetic from config numbers ({pc['model_type']})",
        sliding_window=pc["sliding_window"], sliding_layers=pc["sliding_layers"] if pc["sliding_window"] else 0,
        max_context=pc["max_context"], quantization=label,
        extra={"model_type": pc["model_type"], "kv_bytes_per_element": kv_bytes_per_element,
               "expert_params": pc["expert_matrix"] + pc["expert_small"],
               # the parameter groups, so the card can be re-counted in another served format
               # (pipeline.cards.servedformat.card_in_format)
               "params": {k: pc[k] for k in ("embedding", "head", "tied", "dense_matrix", "dense_small",
                                             "attention_matrix", "expert_matrix", "expert_small")}})


def expert_param_count(card: ModelCard) -> int:
    """Parameters of all routed experts of ``card`` (0 for a dense model).

    Derived: active = total − X + X·k/E, so X = (total − active) · E / (E − k).
    """
    if not card.num_experts or not card.experts_per_token or card.num_experts == card.experts_per_token:
        return 0
    if "expert_params" in card.extra:
        return int(card.extra["expert_params"])
    return round((card.total_params - card.active_params) * card.num_experts / (card.num_experts - card.experts_per_token))

