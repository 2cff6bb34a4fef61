"""Matching an imported model's name to a model card: name forms, architecture words, weight formats, file sizes.

A source names a model its own way (``ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF``,
``llama3.1:8b-instruct-q4_K_M``) and may state its weight format, file size or parameter
count (:class:`ModelInfo`).  :func:`match_card` finds the card: a card file by name or alias,
one whose name has the same architecture words (:func:`model_key`), or a ``config.json`` in the
Hugging Face cache (:mod:`pipeline.cards.registry`); in the stated format, or pinned to the stated
file size (:func:`card_with_file_size`).  The run keeps the name as given (:func:`model_name_as_given`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pipeline.cards.registry import cached_config, card_files, card_from_config_file, card_names, find_card_file, load_card
from pipeline.core.errors import BatchmarkError
from pipeline.cards.filesize import card_with_file_size  # noqa: F401  (importable from here)
from pipeline.cards.modelcards import ModelCard
from pipeline.cards.weightformats import QUANT_BITS, normalize_quant


@dataclass
class ModelInfo:
    """A model as a source names it, with what the source says about its weights.

    Attributes:
        raw_name: the name in the file (``ggml-org/gpt-oss-20b-GGUF``).
        quant: weight format the source states (``q8_0``, ``mxfp4``), or None.
        file_bytes: size of the weight file the source states (bytes), or None.
        params: parameter count the source states (llama.cpp's ``20.91 B``), or None.
        arch: architecture the source states (llama.cpp's ``general.architecture``), or None.
        kv_cache: KV-cache dtype the source or ``--kv-cache`` states (``fp8``), or None (the card's bf16).
    """

    raw_name: str
    quant: str | None = None
    file_bytes: int | None = None
    params: int | None = None
    arch: str | None = None
    kv_cache: str | None = None


def model_name_as_given(raw: str) -> str:
    """The name an imported run keeps and shows: the source's own, outer whitespace trimmed.

    Never cut at a ``/`` nor stripped of an org or a quantisation suffix (names are
    shown as given; ``<script>…</script>`` once showed as ``script>``, ``org/Model`` lost its
    org).  Only card matching reads a shortened form (:func:`canonical_model_name`,
    :func:`model_key`); file names derived from it go through :func:`pipeline.store.pointfiles.file_stem`.
    """
    return raw.strip() or raw


_QUANT_SUFFIX = re.compile(r"[-_.](q\d_[0-9a-z_]+|mxfp4|nvfp4|fp8|bf16|f16|f32|gguf)$", re.IGNORECASE)


def canonical_model_name(raw: str) -> str:
    """A model name without org prefix, ``-GGUF`` or a quantisation suffix.

    ``ggml-org/Qwen2.5-Coder-7B-Q8_0-GGUF`` → ``Qwen2.5-Coder-7B``;
    ``ggml-org/gpt-oss-20b-GGUF`` → ``gpt-oss-20b``; ``openai/gpt-oss-120b`` → ``gpt-oss-120b``.
    """
    name = raw.strip().rstrip("/").split("/")[-1]
    name = re.sub(r"\.gguf$", "", name, flags=re.IGNORECASE)
    prev = None
    while prev != name:
        prev = name
        name = _QUANT_SUFFIX.sub("", name)
    return name or raw.strip()


def quant_from_text(text: str) -> str | None:
    """The weight format named in a free-text model description (``qwen2 7B Q8_0`` → ``q8_0``; llama.cpp's
    ``file type = Q4_K - Medium`` and ``Q4_K_M`` → ``q4_k_m``)."""
    if re.search(r"\bQ4_K\s*-\s*Medium\b", text, re.IGNORECASE):
        return "q4_k_m"
    for token in re.findall(r"[A-Za-z0-9_]+", text):
        t = token.lower()
        if t in ("q8_0", "q4_0", "q4_k_m", "mxfp4", "nvfp4", "fp8", "bf16", "f16"):
            return normalize_quant(t)
    return None


def gib_from_text(text: str) -> int | None:
    """Bytes of the first ``<x> GiB`` in ``text`` (x × 2^30), or None."""
    m = re.search(r"(\d+(?:\.\d+)?)\s*GiB", text)
    return int(round(float(m.group(1)) * 2**30)) if m else None


#: Words of a model name that name a variant of the same architecture (tuning, packaging, org), not another model.
VARIANT_WORDS = frozenset({
    "instruct", "it", "chat", "base", "pt", "coder", "qat", "gguf", "hf", "meta", "moe", "dense", "thinking",
    "latest", "preview", "awq", "gptq", "bnb", "4bit", "8bit", "dynamic", "unsloth", "ud", "w4a16", "w8a8", "int4",
    "int8", "fp8", "bf16", "f16", "fp16", "f32", "fp32", "mxfp4", "nvfp4", "mlx"})
_QUANT_TOKEN = re.compile(r"^(i?q\d(_[a-z0-9]+)*|w\d+a\d+|int\d|\d+bit|[0-9.]+bpw)$")


def model_key(name: str) -> tuple[str, ...]:
    """The architecture-identifying words of a model name: family, version, size (and MoE active size).

    ``meta-llama/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf``, ``llama3.1:8b-instruct-q4_K_M`` and
    ``Llama-3.1-8B`` all give ``("llama", "3.1", "8b")``; ``Qwen3-30B-A3B-Instruct-2507`` gives
    ``("qwen", "3", "30b", "a3b")``.  Dropped: the org prefix, a ``.gguf`` extension,
    :data:`VARIANT_WORDS`, quantisation tokens (``Q4_K_M``, ``IQ3_XS``, ``W4A16``), release
    dates (``2507``) and version tags (``v0.3``).  Ollama's ``name:tag`` reads as ``name-tag``.
    """
    s = re.sub(r"\.gguf$", "", name.strip().lower().rstrip("/").split("/")[-1])
    out: list[str] = []
    for tok in re.split(r"[-\s:]+", s):
        if not tok or tok in VARIANT_WORDS or _QUANT_TOKEN.match(tok) or re.fullmatch(r"\d{4}|v\d+(\.\d+)*", tok):
            continue
        for part in tok.split("_"):
            if not part or part in VARIANT_WORDS or _QUANT_TOKEN.match(part):
                continue
            m = re.fullmatch(r"([a-z]{3,})(\d+(?:\.\d+)?)", part)
            out.extend([m.group(1), m.group(2)] if m else [part])
    return tuple(out)


def quant_of_name(raw: str) -> str | None:
    """A quantisation token a model name carries (``q4_k_m``, ``awq``, ``fp8``), lower case, or None."""
    s = re.sub(r"\.gguf$", "", raw.strip().lower().split("/")[-1])
    for tok in reversed(re.split(r"[-\s:.]+", s)):
        if _QUANT_TOKEN.match(tok) or tok in ("awq", "gptq", "fp8", "bf16", "f16", "fp16", "mxfp4", "nvfp4"):
            return tok
    return None


@dataclass
class CardMatch:
    """Which card an imported model was given, and how (recorded in ``run.json``), or why none."""

    card: ModelCard | None
    how: str


def _find_variant(raw: str, name: str) -> tuple[Path, dict[str, Any]] | None:
    """The one card file whose name or alias has the same :func:`model_key` as ``raw`` (None when none or several)."""
    want = model_key(raw)
    if len(want) < 2:
        return None
    hits = []
    for path, data in card_files():
        if any(model_key(n) == want for n in card_names(path, data)):
            hits.append((path, data))
    return hits[0] if len(hits) == 1 else None


def match_card(name: str, info: ModelInfo | None) -> CardMatch:
    """The card of an imported model in the format the source states (or its name carries), and how it was found.

    Looked up, in order: a card file of ``data/models/`` by ``name`` or the name as the source
    wrote it (name or alias); a card file whose name has the same architecture words
    (:func:`model_key`: ``…-Instruct``, ``…-Coder-…``, ``-it-qat``, ``-GGUF``, ``Q4_K_M``,
    ``org/``, Ollama ``name:tag`` are variants of one card); a ``config.json`` in the local
    Hugging Face cache.  What the file itself says is checked against the card: a stated
    parameter count more than 15 % off the card's means another architecture (no card).  A
    stated file size replaces the counted bytes (:func:`card_with_file_size`); ``mxfp4`` marks
    MXFP4 experts (the gpt-oss GGUFs), any other known format applies to every weight; a format
    batchmark has no bits-per-weight for (``q5_k_m``, ``iq3_xs``), without a file size, leaves the bytes
    unknown (no card).  Without a card the model's analysis fields (kind, ceiling, MBU) stay null.
    """
    raw = info.raw_name if info else name
    quant = (info.quant or quant_from_text(raw)) if info else quant_from_text(raw)
    named = quant_of_name(raw)
    if quant is None and named is not None and named not in ("fp8", "bf16", "f16", "fp16", "mxfp4", "nvfp4") \
            and not (info and info.file_bytes):
        try:
            quant = normalize_quant(named)
        except BatchmarkError:
            return CardMatch(None, f"weight format {named} of {raw!r}: bits per weight unknown and no file size "
                                   "stated, so the bytes read per step are unknown")
    elif quant is None and named in ("fp8", "mxfp4", "nvfp4"):
        quant = named
    if quant is not None and normalize_quant(quant) not in QUANT_BITS:  # pragma: no cover - normalize_quant raises
        return CardMatch(None, f"weight format {quant} unknown")
    weights, experts = ("bf16", "mxfp4") if quant == "mxfp4" else (quant, None)
    how = None
    found = None
    for cand in dict.fromkeys((canonical_model_name(name), name, raw)):  # the shortened name finds a card first
        found = find_card_file(cand)
        if found is not None:
            how = f"card file {found[0].name} (name or alias {cand!r})"
            break
    if found is None:
        found = _find_variant(raw, name)
        if found is not None:
            how = f"card file {found[0].name}: {raw!r} is a variant of {found[1].get('name', found[0].stem)!r} " \
                  f"(same architecture words {'-'.join(model_key(raw))})"
    if found is not None:
        card = load_card(str(found[1].get("name", found[0].stem)), quant=weights, expert_quant=experts, card_name=name)
    else:
        cfg = cached_config(raw)
        if cfg is None:
            return CardMatch(None, f"no card in data/models/ matches {raw!r} (architecture words "
                                   f"{'-'.join(model_key(raw)) or 'none'}) and no config.json in the Hugging Face cache")
        card = card_from_config_file(cfg, name=name, quant=weights or "bf16", expert_quant=experts)
        how = f"config.json of {raw} in the Hugging Face cache"
    if info and info.params and abs(card.total_params - info.params) > 0.15 * info.params:
        return CardMatch(None, f"{how} has {card.total_params / 1e9:.2f} B params but the source states "
                               f"{info.params / 1e9:.2f} B: another architecture, no card used")
    if info and info.file_bytes:
        card = card_with_file_size(card, info.file_bytes, expert_quant=experts)
        how += f"; bytes from the stated file size ({info.file_bytes} bytes)"
    elif weights:
        how += f"; weights in {weights}" + (f", experts in {experts}" if experts else "")
        card = stated_card(card, f"stated by the imported file or --quant: {quant}")
    if info and info.kv_cache:
        from pipeline.cards.servedformat import with_kv_cache

        card = with_kv_cache(card, info.kv_cache, stated=True)
        how += f"; KV cache in {info.kv_cache}"
    return CardMatch(card, how)


def stated_card(card: ModelCard, source: str) -> ModelCard:
    """``card`` marked as served in its counted format because the source says so (its ceiling is then one value,
    not a range over plausible formats: :func:`pipeline.cards.servedformat.is_stated`)."""
    from pipeline.cards.servedformat import native_format

    fmt = native_format(card).model_copy(update={"stated": True, "source": source})
    return replace(card, extra={**card.extra, "served_format": fmt.model_dump()})
