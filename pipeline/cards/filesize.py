"""A model card pinned to the size of its weight file (a GGUF): the bytes a file holds, not those counted (pure).

A GGUF's type name does not give its bytes: Q4_K_M and Q4_0 files keep some tensors (the output head, some
attention or MLP matrices) in higher precision, and Unsloth's dynamic quantisations choose per model.  Where the
file's size is known (an imported file states it, or the config's ``served.file_gib``), it is the weight bytes.
"""

from __future__ import annotations

from dataclasses import replace

from pipeline.cards.modelarch import expert_param_count
from pipeline.cards.modelcards import ModelCard
from pipeline.cards.weightformats import QUANT_BITS, normalize_quant
from pipeline.core.errors import BatchmarkError


def card_with_file_size(card: ModelCard, file_bytes: int, expert_quant: str | None = None,
                        source: str = "") -> ModelCard:
    """The card of a model as stored in a weight file of ``file_bytes`` bytes (e.g. a GGUF).

    The file size replaces the counted weight bytes, and every byte of the file that is not a
    routed expert counts as read per decode step (``dense_bytes``) — the convention of the
    ceiling check of the llama.cpp DGX Spark file (7.54 GiB read per token for Qwen2.5-Coder-7B Q8_0).  It overstates
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
