"""Model cards: architecture numbers -> parameters, weight bytes, KV bytes per token.

A :class:`ModelCard` holds byte counts, so any quantisation is already folded in.  Cards come
from a model batchmark instantiated (:func:`card_from_torch_model`, counting the real tensors)
or, for models it never loads, from architecture numbers: a Hugging Face ``config.json``
(:func:`card_from_config_file`) or a card file ``data/models/<name>.yaml`` that holds the
config.json numbers with their source (:func:`load_card`).  A card for an imported run can
be pinned to the size of the weight file that was measured (:func:`card_with_file_size`).

Formulas:
- KV bytes per token = 2 (K and V) × layers × kv_heads × head_dim × bytes per element
  (docs/definitions.md, "bytes per decode step");
- bits per weight of a quantisation, block scales included (:data:`QUANT_BITS`).

What a card costs per decode step (weight and KV bytes read at batch B, expert coverage,
FLOPs) is the analysis's arithmetic: :mod:`pipeline.stepcost`.
"""

from __future__ import annotations

import functools

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, ValidationError

from pipeline.errors import BatchmarkError


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
        kv_bytes_per_token: KV-cache bytes one token occupies over all layers (every layer
            counted, as if no layer had a sliding window; see :func:`pipeline.stepcost.kv_bytes_per_sequence`).
        sliding_window: tokens a sliding-window layer keeps (None: no such layers).
        sliding_layers: how many of ``num_layers`` use the sliding window.
        max_context: the model's maximum context (``max_position_embeddings``), when known.
        quantization: weight format the bytes were counted for (``bf16``, ``q8_0``, …).
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
    sliding_window: int | None = None
    sliding_layers: int = 0
    max_context: int | None = None
    quantization: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str | None = None) -> "ModelCard":
        """Inverse of :meth:`as_dict`; a key this version does not know is left out with a warning naming it.

        Not silently: a card's fields feed the arithmetic (bytes per decode step, KV bytes per
        token), so an unknown key is either a misspelt known one, whose default would then be used
        without a word, or a field of a newer card format, which a newer ``schema_version`` of the
        file announces (refused on load, :mod:`pipeline.schemas`).  Kept, it would change nothing
        computed; the reader must hear of it.  ``source`` (the card's file) is named in the warning.
        """
        import warnings

        known = {f.name for f in fields(cls)}
        unknown = sorted(k for k in data if k not in known)
        if unknown:
            warnings.warn(f"{source or 'model card'}: unknown model card key(s) left out: {', '.join(unknown)}",
                          UserWarning, stacklevel=2)
        return cls(**{k: v for k, v in data.items() if k in known})


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
        dtype=str(dtype).removeprefix("torch."),
        source=f"counted from the instantiated {type(model).__name__} ({text_cfg.model_type})",
        sliding_window=int(window) if window else None,
        sliding_layers=sum(t == "sliding_attention" for t in types) if window else 0,
        max_context=cfg_dict.get("max_position_embeddings"),
        quantization=str(dtype).removeprefix("torch."))


# -- quantisation ---------------------------------------------------------------------------

#: Bits stored per weight, block scales included.  Sources:
#: - ``bf16``/``fp16``: 16 bits, no scales.  ``fp32``: 32.
#: - ``fp8`` (E4M3, per-tensor or per-channel scale as vLLM's FP8 checkpoints store it): 8 bits;
#:   one scale per row or tensor adds < 0.01 bit and is ignored.
#: - ``nvfp4``: 4-bit E2M1 values + one FP8 (E4M3) scale per block of 16 values:
#:   4 + 8/16 = 4.5 (NVIDIA, "Introducing NVFP4", 2025; the per-tensor FP32 scale is ignored).
#: - ``mxfp4``: 4-bit E2M1 values + one E8M0 scale per block of 32: 4 + 8/32 = 4.25
#:   (OCP Microscaling Formats (MX) v1.0 specification).
#: - GGUF ``q8_0``: blocks of 32 int8 + one fp16 scale: (32 × 8 + 16) / 32 = 8.5 (ggml
#:   ``block_q8_0``).  ``q4_0``: blocks of 32 4-bit + one fp16 scale: (32 × 4 + 16) / 32 = 4.5
#:   (ggml ``block_q4_0``).
#: - GGUF ``q4_k_m``: a mixture (Q4_K, 4.5 bits, for most matrices; Q6_K for some), so no one block
#:   size; taken as the file average llama.cpp states in ``tools/quantize/quantize.cpp``
#:   (``QUANT_OPTIONS``: "Q4_K_M 4.58G @ Llama-3-8B", G = GiB, as its "Q8_0 7.96G" shows:
#:   7.96 × 2^30 × 8 / 8.03e9 params = 8.52 ≈ 8.5): 4.58 × 2^30 × 8 / 8.03e9 = 4.90.
QUANT_BITS: dict[str, float] = {
    "fp32": 32.0, "bf16": 16.0, "fp16": 16.0, "fp8": 8.0, "nvfp4": 4.5, "mxfp4": 4.25,
    "q8_0": 8.5, "q4_0": 4.5, "q4_k_m": 4.9,
}

#: GGUF formats quantise the token embedding and output head as well (llama.cpp's
#: ``llama-quantize``); checkpoint formats (fp8, nvfp4, mxfp4) keep them in bf16.
GGUF_QUANTS = frozenset({"q8_0", "q4_0", "q4_k_m"})

_QUANT_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "f16": "fp16", "float32": "fp32", "f32": "fp32",
                  "fp8_e4m3": "fp8", "e4m3": "fp8", "q8": "q8_0", "q4": "q4_0", "mxfp4_moe": "mxfp4",
                  "q4_k": "q4_k_m"}  # llama.cpp's "Q4_K" is an alias of Q4_K_M

#: Bits of the small tensors (norms, biases, router, attention sinks) whatever the format.
SMALL_TENSOR_BITS = 16.0


def normalize_quant(name: str) -> str:
    """Canonical quantisation name (``BF16`` → ``bf16``, ``Q8_0`` → ``q8_0``).

    Raises:
        BatchmarkError: an unknown name (the message lists the known ones).
    """
    key = str(name).strip().lower().replace("-", "_")
    key = _QUANT_ALIASES.get(key, key)
    if key not in QUANT_BITS:
        raise BatchmarkError(f"quantization: unknown format {name!r} (known: {', '.join(sorted(QUANT_BITS))})")
    return key


def bits_per_weight(name: str) -> float:
    """Bits stored per weight of a quantisation, block scales included (see :data:`QUANT_BITS`)."""
    return QUANT_BITS[normalize_quant(name)]


# -- architecture numbers -> parameter counts -----------------------------------------------

def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The language-model part of a config (multimodal configs nest it under ``text_config``)."""
    cfg = dict(config)
    if isinstance(cfg.get("text_config"), dict):
        inner = dict(cfg["text_config"])
        inner.setdefault("model_type", cfg.get("model_type"))
        inner.setdefault("tie_word_embeddings", cfg.get("tie_word_embeddings"))
        cfg = inner
    return cfg


#: Upper bounds of architecture numbers, each far above any model (issue 18: a 400-digit ``hidden_size`` ended
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


def _validation_message(where: str, err: ValidationError, prefix: str = "") -> str:
    """One line naming the file, the first bad field and its value."""
    first = err.errors()[0]
    loc = ".".join(str(x) for x in first["loc"]) or "(top level)"
    msg = first["msg"].removeprefix("Value error, ")
    got = "" if first["type"] == "missing" else f" (got {first.get('input')!r})"
    return " ".join(f"{where}: {prefix}{loc}: {msg}{got}".split())[:400]


def check_arch_numbers(cfg: dict[str, Any], where: str) -> None:
    """Refuse architecture numbers the arithmetic cannot use (0 heads, negative layers, a string count).

    Raises:
        BatchmarkError: ``<where>: <field>: Input should be greater than or equal to 1 (got 0)``.
    """
    try:
        ArchNumbers.model_validate(cfg)
    except ValidationError as err:
        raise BatchmarkError(_validation_message(where, err)) from None
    experts = cfg.get("num_local_experts") or cfg.get("num_experts")
    k = cfg.get("num_experts_per_tok")
    if experts and k and k > experts:
        raise BatchmarkError(f"{where}: num_experts_per_tok: {k} is more than the {experts} experts")


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
    cfg = _text_config(config)
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
        (read by every step: attention, dense MLP, router, norms, biases), ``expert_matrix``
        and ``expert_small`` (routed experts of all layers), ``total``, ``active``,
        ``num_experts``, ``experts_per_token`` and the attention shape.

    Raises:
        BatchmarkError: a number the count needs is missing (names the field and ``where``).
    """
    cfg = _text_config(config)
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

    dense_matrix = dense_small = expert_matrix = expert_small = 0
    sparse_step = int(cfg.get("decoder_sparse_step") or 1)
    mlp_only = set(cfg.get("mlp_only_layers") or [])
    for i in range(n_layers):
        dense_matrix += attn_matrix
        dense_small += attn_small + norms
        layer_moe = moe and i not in mlp_only and (i + 1) % sparse_step == 0
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
    dense_small += h  # final norm
    embedding = vocab * h
    head = 0 if tied else vocab * h
    experts = expert_matrix + expert_small
    total = embedding + head + dense_matrix + dense_small + experts
    active = total - experts + (experts * int(k) // int(n_experts) if moe else 0)
    types = layer_types(cfg)
    return {
        "embedding": embedding, "head": head, "tied": bool(tied),
        "dense_matrix": dense_matrix, "dense_small": dense_small,
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
        num_experts=pc["num_experts"], experts_per_token=pc["experts_per_token"], dtype=label,
        source=source or f"arithmetic from config numbers ({pc['model_type']})",
        sliding_window=pc["sliding_window"], sliding_layers=pc["sliding_layers"] if pc["sliding_window"] else 0,
        max_context=pc["max_context"], quantization=label,
        extra={"model_type": pc["model_type"], "kv_bytes_per_element": kv_bytes_per_element,
               "expert_params": pc["expert_matrix"] + pc["expert_small"]})


def card_from_config_file(path: str | Path, name: str | None = None, quant: str = "bf16",
                          expert_quant: str | None = None, kv_bytes_per_element: float = 2.0) -> ModelCard:
    """A card from a local Hugging Face ``config.json`` (a file, or a folder holding one).

    Raises:
        BatchmarkError: missing or corrupt file, missing config numbers.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    from pipeline.textfiles import MAX_TEXT_BYTES, read_limited

    try:  # bounded: a config.json is a few kB (issue 18, item 7)
        config = json.loads(read_limited(path, MAX_TEXT_BYTES, "Hugging Face config.json").decode("utf-8"))
    except FileNotFoundError:
        raise BatchmarkError(f"{path}: file not found") from None
    except UnicodeDecodeError as exc:
        raise BatchmarkError(f"{path}: not a UTF-8 text file (byte {exc.start})") from None
    except OSError as exc:
        raise BatchmarkError(f"{path}: cannot read ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise BatchmarkError(f"{path}: corrupt JSON at line {exc.lineno} ({exc.msg})") from None
    except RecursionError:
        raise BatchmarkError(f"{path}: JSON nested too deeply") from None
    except ValueError as exc:  # an integer of more than 4,300 digits (Python's int_max_str_digits)
        raise BatchmarkError(f"{path}: corrupt JSON ({' '.join(str(exc).split())[:120]})") from None
    if not isinstance(config, dict):
        raise BatchmarkError(f"{path}: not a config object")
    return card_from_config(name or path.parent.name, config, quant, expert_quant, kv_bytes_per_element,
                            source=f"arithmetic from {path}", where=str(path))


# -- card files in data/models/ ------------------------------------------------------------

def _models_dir() -> Path:
    from pipeline import paths

    return paths.models_dir()


class CardFile(BaseModel):
    """A card file of ``data/models/``: its keys and their types (``config`` is checked by :class:`ArchNumbers`)."""

    model_config = ConfigDict(extra="allow")

    name: StrictStr | None = None
    aliases: list[StrictStr] = Field(default_factory=list)
    source: StrictStr = Field(min_length=1)
    native_quant: StrictStr | dict[StrictStr, StrictStr] | None = None
    published: dict[StrictStr, Any] | None = None
    kv_bytes_per_element: StrictInt | StrictFloat | None = Field(default=None, gt=0, le=8)
    config: dict[StrictStr, Any]


def _read_card_file(path: Path) -> dict[str, Any]:
    """A card file, parsed and checked (one line naming the file and field on any fault).

    Parsed once per file version (path, modification time, size): a site of 50 models looks
    cards up hundreds of times, and each lookup read every card file (issue 13, "A site for a
    lab").  The caller gets its own copy.
    """
    import copy

    try:
        st = path.stat()
    except OSError:
        st = None  # unreadable: the read below says so in one line
    if st is None:
        return _read_card_file_cached.__wrapped__(str(path), 0, 0)
    return copy.deepcopy(_read_card_file_cached(str(path), st.st_mtime_ns, st.st_size))


@functools.lru_cache(maxsize=512)
def _read_card_file_cached(path_text: str, mtime_ns: int, size: int) -> dict[str, Any]:
    """:func:`_read_card_file` of one version of a file (the cache key); see there."""
    from pipeline.textfiles import load_yaml_text, read_text_file

    path = Path(path_text)

    data = load_yaml_text(path, read_text_file(path, "model card"))
    if not isinstance(data, dict):
        raise BatchmarkError(f"{path}: a card file needs name, source and config")
    try:
        CardFile.model_validate(data)
    except ValidationError as err:
        raise BatchmarkError(_validation_message(str(path), err)) from None
    check_arch_numbers(_text_config(data["config"]), f"{path}: config")
    return data


def _norm_name(name: str) -> str:
    return name.strip().lower().split("/")[-1]


def list_card_files(folder: Path | None = None) -> dict[str, Path]:
    """Card files by model name (``data/models/*.yaml``)."""
    folder = folder or _models_dir()
    out = {}
    for p in sorted(folder.glob("*.yaml")):
        out[_read_card_file(p).get("name", p.stem)] = p
    return out


def find_card_file(name: str, folder: Path | None = None) -> tuple[Path, dict[str, Any]] | None:
    """The card file whose ``name`` or one of whose ``aliases`` is ``name`` (case-insensitive, org prefix ignored)."""
    folder = folder or _models_dir()
    want = _norm_name(name)
    for p in sorted(folder.glob("*.yaml")):
        data = _read_card_file(p)
        names = [data.get("name", p.stem), p.stem, *(data.get("aliases") or [])]
        if want in {_norm_name(str(n)) for n in names}:
            return p, data
    return None


def load_card(name: str, quant: str | None = None, expert_quant: str | None = None,
              kv_bytes_per_element: float | None = None, folder: Path | None = None,
              card_name: str | None = None) -> ModelCard:
    """A card from ``data/models/`` by model name or alias, in ``quant`` (default: the file's native format).

    A card file holds ``name``, ``aliases``, ``source`` (where the numbers come from),
    ``config`` (config.json numbers), ``native_quant`` (``bf16`` or ``{weights, experts}``)
    and ``published`` params for a check.  ``quant`` given without ``expert_quant`` applies to
    every weight.

    Raises:
        BatchmarkError: no card of that name (lists the known ones), a bad card file.
    """
    folder = folder or _models_dir()
    found = find_card_file(name, folder)
    if found is None:
        known = ", ".join(sorted(list_card_files(folder))) or "none"
        raise BatchmarkError(f"model: no card for {name!r} in {folder} (known: {known})")
    path, data = found
    native = data.get("native_quant") or "bf16"
    if isinstance(native, dict):
        native_w, native_e = native.get("weights", "bf16"), native.get("experts")
    else:
        native_w, native_e = native, None
    if quant is None:
        quant, expert_quant = native_w, expert_quant or native_e
    kv_elem = kv_bytes_per_element if kv_bytes_per_element is not None else float(data.get("kv_bytes_per_element", 2))
    card = card_from_config(card_name or data.get("name", path.stem), data["config"], quant, expert_quant, kv_elem,
                            source=f"{data['source']} (card file {path.name})", where=str(path))
    return replace(card, extra={**card.extra, "card_file": path.name, "published": data.get("published") or {}})


def expert_param_count(card: ModelCard) -> int:
    """Parameters of all routed experts of ``card`` (0 for a dense model).

    Derived: active = total − X + X·k/E, so X = (total − active) · E / (E − k).
    """
    if not card.num_experts or not card.experts_per_token or card.num_experts == card.experts_per_token:
        return 0
    if "expert_params" in card.extra:
        return int(card.extra["expert_params"])
    return round((card.total_params - card.active_params) * card.num_experts / (card.num_experts - card.experts_per_token))


def card_with_file_size(card: ModelCard, file_bytes: int, expert_quant: str | None = None,
                        source: str = "") -> ModelCard:
    """The card of a model as stored in a weight file of ``file_bytes`` bytes (e.g. a GGUF).

    The file size replaces the counted weight bytes, and every byte of the file that is not a
    routed expert counts as read per decode step (``dense_bytes``) — the convention of the
    issue-5 ceiling check (7.54 GiB read per token for Qwen2.5-Coder-7B Q8_0).  It overstates
    the bytes read by the input-embedding table, of which a step gathers only B rows (about
    0.5 GiB, 7 % of that file).  For an MoE the expert bytes are counted in ``expert_quant``
    (``mxfp4`` for gpt-oss GGUFs) when given, else in proportion to the parameters.

    Raises:
        BatchmarkError: a file smaller than its expert bytes, or an unknown quantisation.
    """
    if card.expert_bytes and card.num_experts:
        expert_params = expert_param_count(card)
        if expert_quant:
            expert_bytes = expert_params * QUANT_BITS[normalize_quant(expert_quant)] / 8
        else:
            expert_bytes = file_bytes * expert_params / card.total_params
    else:
        expert_bytes = 0.0
    if expert_bytes >= file_bytes:
        raise BatchmarkError(f"file size {file_bytes} bytes is smaller than the expert weights of {card.name}")
    return replace(card, weight_bytes=int(file_bytes), dense_bytes=int(round(file_bytes - expert_bytes)),
                   expert_bytes=int(round(expert_bytes)),
                   source=(source or card.source) + f"; bytes from the weight file size ({file_bytes} bytes)",
                   extra={**card.extra, "file_bytes": int(file_bytes), "bytes_basis": "file size"})



def cached_config(repo_id: str) -> Path | None:
    """``config.json`` of ``repo_id`` in the local Hugging Face cache (``HF_HOME``/``HF_HUB_CACHE``), or None; never downloads."""
    if "/" not in repo_id:
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover - transformers depends on it
        return None
    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except ValueError:  # not a valid repo id
        return None
    return Path(found) if isinstance(found, str) else None


def resolve_card(name: str, quant: str | None = None, expert_quant: str | None = None) -> ModelCard:
    """A card for ``name``: a card file of ``data/models/`` (name or alias), else a local
    ``config.json`` (file or folder), else ``config.json`` of that repo id in the Hugging Face cache.

    Raises:
        BatchmarkError: none of the three knows the model (the message lists the card names).
    """
    if find_card_file(name) is not None:
        return load_card(name, quant=quant, expert_quant=expert_quant)
    if Path(name).exists():
        return card_from_config_file(name, quant=quant or "bf16", expert_quant=expert_quant)
    cfg = cached_config(name)
    if cfg is not None:
        card = card_from_config_file(cfg, name=name.split("/")[-1], quant=quant or "bf16", expert_quant=expert_quant)
        return replace(card, source=f"arithmetic from {name} config.json in the Hugging Face cache ({cfg})")
    return load_card(name)  # raises, naming the known cards
