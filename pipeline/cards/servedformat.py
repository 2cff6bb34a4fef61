"""Served formats: what an engine serves per tensor group (embeddings, attention, MLP, experts, LM head) and its
KV-cache dtype (pure).

A checkpoint states one format; an engine may serve another.  vLLM's DGX Spark recipe for gpt-oss loads
the attention and LM head in MXFP4 as well as the experts (``--mxfp4-layers moe,qkv,o,lm_head``), a GGUF
holds its non-expert matrices in Q8_0, an FP8 or NVFP4 checkpoint quantises everything but the head, and a
ModelOpt NVFP4 checkpoint may keep every ``self_attn`` in BF16 (its ignore list) while the MLP is NVFP4.  The
bytes a decode step reads, so the bandwidth ceiling, MBU and every prediction, follow what is served
(:func:`card_in_format`), not what the card file's checkpoint says.

- :class:`ServedFormat`: the format of each group (``attention`` — the attention's q/k/v/o matrices —, ``mlp`` —
  the dense MLP and shared experts; unstated: as ``attention``, which then means every non-expert matrix —,
  ``experts``, ``head`` — the LM head —, ``embeddings`` — the token embedding table; unstated: as ``head`` —),
  ``kv_cache``, a weight file's real size ``file_gib`` where the weights are one file (a GGUF keeps some tensors in
  higher precision than its type's name), with its source; ``stated`` when the config or the imported file says
  so, not when it is a default.
- :func:`default_format`: what an engine loads on a hardware kind (:data:`DEFAULTS`, each with its source).
- :func:`plausible_formats`: where nothing states the format, every format the model is plausibly served
  in (the defaults of every engine, the checkpoint, and the published quantisations); the bandwidth
  ceiling is then a range over them (:func:`bytes_at_b1_range`) and only a single stream above every one of
  them is impossible.

Bytes of a group = matrix parameters × bits of its format / 8 (:mod:`pipeline.cards.weightformats`); small
tensors (norms, biases, router, sinks) stay 16-bit whatever the format.
"""

from __future__ import annotations

from dataclasses import replace
from fnmatch import fnmatchcase
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pipeline.cards.modelcards import ModelCard
from pipeline.core.errors import BatchmarkError
from pipeline.cards.weightformats import QUANT_BITS, SMALL_TENSOR_BITS, normalize_quant

#: KV-cache element bytes per dtype (vLLM ``--kv-cache-dtype``: ``auto`` is the model's bf16, ``fp8`` one byte;
#: llama.cpp ``--cache-type-k/-v``: ``q8_0`` blocks of 32 int8 + an fp16 scale, 34 / 32 bytes; ``q4_0`` and ``iq4_nl``
#: blocks of 32 4-bit + an fp16 scale, 18 / 32 bytes: ggml ``block_q8_0``, ``block_q4_0``, ``block_iq4_nl``).
KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp32": 4.0, "fp8": 1.0, "q8_0": 34 / 32, "q4_0": 18 / 32, "iq4_nl": 18 / 32}

#: The weight groups of a :class:`ServedFormat`, in the order its label names them.
GROUPS = ("embeddings", "attention", "mlp", "experts", "head")


class ServedFormat(BaseModel):
    """The served format of each tensor group and of the KV cache (names of :mod:`pipeline.cards.weightformats`).

    ``attention``: the attention matrices (q/k/v/o) of the layers, and every other non-expert matrix where ``mlp`` is
    unstated; ``mlp``: the dense MLP and shared experts; ``experts``: routed experts (None for a dense model or: as
    ``mlp``); ``head``: the LM head; ``embeddings``: the token embedding table (None: as ``head``); ``kv_cache``:
    a :data:`KV_BYTES` dtype; ``file_gib``: the weight file's size in GiB (2^30 bytes) where the weights are one
    file, which then gives the bytes (:func:`pipeline.cards.filesize.card_with_file_size`); ``source``: where the
    format comes from; ``stated``: the run's config or file states it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    attention: str = Field(description="attention q/k/v/o matrices (and every non-expert one where mlp is unstated)")
    head: str = Field(description="the LM head (and the embedding table where embeddings is unstated)")
    experts: str | None = Field(default=None, description="routed experts (unstated: as mlp)")
    mlp: str | None = Field(default=None, description="dense MLP and shared experts (unstated: as attention)")
    embeddings: str | None = Field(default=None, description="token embedding table (unstated: as head)")
    kv_cache: str = Field(default="bf16", description="KV-cache dtype: bf16, fp16, fp32, fp8, q8_0, q4_0, iq4_nl")
    file_gib: float | None = Field(default=None, gt=0, le=100_000, allow_inf_nan=False,
                                   description="the weight file's size in GiB (a GGUF): it gives the weight bytes")
    source: str = Field(default="", description="where the format comes from")
    stated: bool = Field(default=False, description="the config or the imported file states it")

    @field_validator("attention", "head", "experts", "mlp", "embeddings")
    @classmethod
    def _known(cls, v: str | None) -> str | None:
        try:
            return None if v is None else normalize_quant(v)
        except BatchmarkError as exc:  # a ValueError, so the config's loader names the field
            raise ValueError(str(exc).removeprefix("quantization: ")) from None

    @field_validator("kv_cache")
    @classmethod
    def _kv(cls, v: str) -> str:
        return kv_dtype(v)

    def of(self, group: str) -> str:
        """The format of ``group`` (one of :data:`GROUPS`), an unstated one as its stand-in (class docstring)."""
        if group == "embeddings":
            return self.embeddings or self.head
        if group == "mlp":
            return self.mlp or self.attention
        if group == "experts":
            return self.experts or self.of("mlp")
        return getattr(self, group)

    def label(self) -> str:
        """``attention:bf16,mlp:nvfp4,head:bf16,kv:fp8`` — the groups that are stated, or one name when all agree."""
        stated = [g for g in ("attention", "mlp", "head", "experts", "embeddings") if getattr(self, g) is not None]
        names = {self.of(g) for g in stated}
        w = next(iter(names)) if len(names) == 1 else ",".join(f"{g}:{getattr(self, g)}" for g in stated)
        w += f",file:{self.file_gib:g}GiB" if self.file_gib else ""
        return w + ("" if self.kv_cache in ("bf16", "fp16") else f",kv:{self.kv_cache}")


def kv_dtype(v: str) -> str:
    """The canonical KV-cache dtype of ``v`` (``auto`` → ``bf16``, ``fp8_e4m3`` → ``fp8``, ``Q4_0`` → ``q4_0``).

    Raises:
        ValueError: an unknown dtype (the known ones named; the config's loader and ``--kv-cache`` name the field).
    """
    key = str(v).strip().lower()
    key = {"auto": "bf16", "bfloat16": "bf16", "float16": "fp16", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}.get(key, key)
    if key not in KV_BYTES:
        raise ValueError(f"kv_cache: unknown dtype {v!r} (known: {', '.join(sorted(KV_BYTES))})")
    return key


def uniform(quant: str, kv_cache: str = "bf16", source: str = "") -> ServedFormat:
    """Every group in ``quant``; a checkpoint format (fp8, nvfp4, mxfp4) keeps the head in bf16, a GGUF quantises it
    (llama.cpp's ``llama-quantize``; NVIDIA ModelOpt FP8/NVFP4 checkpoints leave ``lm_head`` unquantised)."""
    from pipeline.cards.weightformats import GGUF_QUANTS

    q = normalize_quant(quant)
    return ServedFormat(attention=q, head=q if q in GGUF_QUANTS or q in ("bf16", "fp16", "fp32") else "bf16",
                        experts=q, kv_cache=kv_cache, source=source or f"every matrix in {q}")


_VLLM_SPARK_GPT_OSS = ("vLLM's DGX Spark recipe for gpt-oss (spark-vllm-docker openai-gpt-oss-120b.yaml, flags "
                       "--mxfp4-layers moe,qkv,o,lm_head --kv-cache-dtype fp8, as published with its runs: "
                       "https://kubis.ai/blog/dgx_series/benchmarks/gpt-oss-120b-topology-benchmark)")
_GPT_OSS_CHECKPOINT = ("openai/gpt-oss config.json quantization_config: MXFP4 routed experts, attention, router, "
                       "embeddings and LM head left in bf16 (modules_to_not_convert); vLLM loads it so by default")
_GGUF_GPT_OSS = ("ggml-org/gpt-oss-20b-GGUF and -120b-GGUF: MXFP4 experts, the other matrices Q8_0 (the files' "
                 "11.27 GiB and 59.02 GiB leave 8.6-8.9 bits per non-expert parameter after the MXFP4 experts)")

#: (engine, hardware, model_type) glob patterns → the format that engine serves, first match wins.
DEFAULTS: list[tuple[str, str, str, ServedFormat]] = [
    ("vllm", "dgx-spark", "gpt_oss", ServedFormat(attention="mxfp4", head="mxfp4", experts="mxfp4", kv_cache="fp8",
                                                 source=_VLLM_SPARK_GPT_OSS)),
    ("llama.cpp", "*", "gpt_oss", ServedFormat(attention="q8_0", head="q8_0", experts="mxfp4", source=_GGUF_GPT_OSS)),
    ("*", "*", "gpt_oss", ServedFormat(attention="bf16", head="bf16", experts="mxfp4", source=_GPT_OSS_CHECKPOINT)),
]

#: Formats a model is published and served in besides its checkpoint and the engines' defaults (the plausible
#: range of an unstated format): bf16, FP8 and NVFP4 checkpoints (vLLM, SGLang, TensorRT-LLM), GGUF Q8_0, Q4_K_M
#: and Q4_0 (llama.cpp, Ollama).
PUBLISHED_QUANTS = ("bf16", "fp8", "nvfp4", "q8_0", "q4_k_m", "q4_0")


def native_format(card: ModelCard) -> ServedFormat:
    """The card's own counted format as a :class:`ServedFormat` (its ``extra["served_format"]``, else its label)."""
    if card.extra.get("served_format"):
        return ServedFormat.model_validate(card.extra["served_format"])
    label = card.quantization or "bf16"
    w, _, e = label.partition("+experts:")
    try:
        w = normalize_quant(w)
    except Exception:  # a torch dtype label (float32): counted from the tensors, one format
        w = "bf16"
    from pipeline.cards.weightformats import GGUF_QUANTS

    return ServedFormat(attention=w, head=w if w in GGUF_QUANTS else "bf16", experts=e or None,
                        source=f"the card's counted format {label}")


def default_format(engine: str | None, hardware: str | None, model_type: str | None) -> ServedFormat | None:
    """What ``engine`` serves of a ``model_type`` on ``hardware`` (:data:`DEFAULTS`), None when no default is known
    (the checkpoint's own format then stands)."""
    for eng, hw, mt, fmt in DEFAULTS:
        if fnmatchcase(engine or "", eng) and fnmatchcase(hardware or "", hw) and fnmatchcase(model_type or "", mt):
            return fmt
    return None


def plausible_formats(card: ModelCard) -> list[ServedFormat]:
    """Every format ``card``'s model is plausibly served in: its own, the engines' defaults for its model type (any
    engine, any hardware) and :data:`PUBLISHED_QUANTS` applied to every matrix, with a bf16 and an fp8 KV cache."""
    mt = (card.extra or {}).get("model_type")
    out = [native_format(card)]
    out += [f for _, _, pat, f in DEFAULTS if fnmatchcase(mt or "", pat)]
    for q in PUBLISHED_QUANTS:
        out += [uniform(q, kv) for kv in ("bf16", "fp8")]
    return out


def group_bytes(params: dict[str, Any], fmt: ServedFormat) -> dict[str, float]:
    """Bytes per group of a model whose parameter counts are ``params`` (:func:`pipeline.cards.modelarch.param_counts`)
    served in ``fmt``: ``embedding``, ``head``, ``layers`` (attention + MLP matrices + small tensors), ``experts``.
    Counts without an attention share (cards counted before it was kept) take every non-expert matrix as attention."""
    bits = QUANT_BITS
    sb = SMALL_TENSOR_BITS
    attn = params.get("attention_matrix", params["dense_matrix"])
    mlp = params["dense_matrix"] - attn
    return {"embedding": params["embedding"] * bits[fmt.of("embeddings")] / 8,
            "head": params["head"] * bits[fmt.head] / 8,
            "layers": attn * bits[fmt.attention] / 8 + mlp * bits[fmt.of("mlp")] / 8 + params["dense_small"] * sb / 8,
            "experts": params["expert_matrix"] * bits[fmt.of("experts")] / 8 + params["expert_small"] * sb / 8}


def card_in_format(card: ModelCard, fmt: ServedFormat) -> ModelCard:
    """``card`` re-counted as served in ``fmt`` (bytes of every group, KV bytes per token, the label), its format kept in
    ``extra["served_format"]``; with ``fmt.file_gib`` the file's size gives the bytes (experts in their format).
    A card without parameter counts (counted from tensors, pinned to a file) is returned unchanged: its bytes are
    what was measured or stated."""
    from pipeline.cards.filesize import card_with_file_size

    params = (card.extra or {}).get("params")
    if not params or card.extra.get("bytes_basis") == "file size":
        return card
    g = group_bytes(params, fmt)
    read_head = g["embedding"] if params["tied"] else g["head"]
    kv_elem = KV_BYTES[fmt.kv_cache]
    old_elem = float(card.extra.get("kv_bytes_per_element", 2.0))
    out = replace(card, weight_bytes=int(round(g["embedding"] + g["head"] + g["layers"] + g["experts"])),
                  dense_bytes=int(round(g["layers"] + read_head)), expert_bytes=int(round(g["experts"])),
                  kv_bytes_per_token=int(round(card.kv_bytes_per_token * kv_elem / old_elem)),
                  quantization=fmt.label(),
                  extra={**card.extra, "kv_bytes_per_element": kv_elem, "served_format": fmt.model_dump()})
    if fmt.file_gib:
        out = card_with_file_size(out, int(round(fmt.file_gib * 2**30)),
                                  expert_quant=fmt.of("experts") if card.expert_bytes else None)
    return out


def with_kv_cache(card: ModelCard, kv_cache: str, stated: bool = False) -> ModelCard:
    """``card`` with its KV cache in ``kv_cache`` (a :data:`KV_BYTES` name; vLLM's ``--kv-cache-dtype fp8``): KV bytes
    per token scaled by the element bytes, new / old (fp8 from bf16: 1 / 2, half), the weights unchanged; ``stated``
    (the imported file or ``--kv-cache`` says so): the plausible range of an unstated weight format keeps this KV
    dtype (:func:`bytes_at_b1_range`).

    KV bytes per token = 2 (K and V) × layers × KV heads × head_dim × element bytes (docs/definitions.md, "KV cache"),
    linear in the element bytes."""
    kv_cache = kv_dtype(kv_cache)
    old = float((card.extra or {}).get("kv_bytes_per_element", 2.0))
    new = KV_BYTES[kv_cache]
    extra = {**(card.extra or {}), "kv_bytes_per_element": new}
    if stated:
        extra["kv_cache_stated"] = kv_cache
    if isinstance(extra.get("served_format"), dict):
        extra["served_format"] = {**extra["served_format"], "kv_cache": kv_cache}
    if new == old and not stated:
        return card
    return replace(card, kv_bytes_per_token=int(round(card.kv_bytes_per_token * new / old)), extra=extra)


#: vLLM's ``--dtype`` values that cast every weight to one float format (https://docs.vllm.ai/en/latest/configuration/
#: engine_args.html, ``--dtype``), by the format names of :data:`pipeline.cards.weightformats.QUANT_BITS`.
SERVED_FLOATS = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}


def in_served_dtype(card: ModelCard, dtype: str | None) -> ModelCard:
    """``card`` as a server casting its weights to ``dtype`` (vLLM's ``--dtype``) reads it: a card in one plain float
    format (``bf16``, ``fp16``, ``fp32``) has its weight, dense, expert and KV bytes scaled by the element bytes, new /
    old (bfloat16 served as float32: 4 / 2, twice; vLLM's ``--kv-cache-dtype auto`` is the model's dtype), its label
    the served dtype's.  Unchanged for ``auto``/None, a quantised card, or the dtype it already has."""
    to = SERVED_FLOATS.get(dtype or "")
    try:
        have = normalize_quant(card.quantization or "bf16")
    except BatchmarkError:
        return card
    if to is None or have not in ("bf16", "fp16", "fp32") or to == have:
        return card
    f = QUANT_BITS[to] / QUANT_BITS[have]
    extra = {**(card.extra or {}), "kv_bytes_per_element": KV_BYTES[to], "served_dtype": dtype}
    return replace(card, weight_bytes=int(round(card.weight_bytes * f)), dense_bytes=int(round(card.dense_bytes * f)),
                   expert_bytes=int(round(card.expert_bytes * f)),
                   kv_bytes_per_token=int(round(card.kv_bytes_per_token * f)), quantization=to, extra=extra)


def is_stated(card: ModelCard) -> bool:
    """Whether ``card``'s format is known: stated by the config or the imported file, pinned to a file size, or
    counted from the model's tensors (no parameter groups to re-count)."""
    extra = card.extra or {}
    fmt = extra.get("served_format") or {}
    return bool(fmt.get("stated")) or extra.get("bytes_basis") == "file size" or not extra.get("params")


def bytes_at_b1_range(card: ModelCard, bytes_of, formats: list[ServedFormat] | None = None) -> tuple[float, float]:
    """(fewest, most) of ``bytes_of(card)`` over ``card`` served in each plausible format (:func:`plausible_formats`);
    ``(b, b)`` when its format is stated (:func:`is_stated`).  ``bytes_of``: a card → bytes (e.g. one step at B = 1)."""
    if is_stated(card):
        b = float(bytes_of(card))
        return b, b
    kv = (card.extra or {}).get("kv_cache_stated")
    formats = [f.model_copy(update={"kv_cache": kv}) if kv else f for f in (formats or plausible_formats(card))]
    vals = [float(bytes_of(card_in_format(card, f))) for f in formats]
    vals.append(float(bytes_of(card)))
    return min(vals), max(vals)


def served_card(card: ModelCard, stated: ServedFormat | None = None, engine: str | None = None,
                hardware: str | None = None) -> ModelCard:
    """``card`` as served: in the ``stated`` format (the config's ``served:``, marked stated), else in ``engine``'s
    default on ``hardware`` (:func:`default_format`, not stated: the ceiling stays a range), else unchanged."""
    if stated is not None:
        return card_in_format(card, stated.model_copy(update={"stated": True,
                                                               "source": stated.source or "stated by the config"}))
    fmt = default_format(engine, hardware, (card.extra or {}).get("model_type"))
    return card_in_format(card, fmt) if fmt is not None else card
