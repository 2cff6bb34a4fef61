"""The model card: architecture numbers of one model, in parameters and bytes.

A :class:`ModelCard` holds byte counts, so any quantisation is already folded in.  Cards are
counted from a model batchmark instantiated (:func:`pipeline.backends.torchcard.card_from_torch_model`,
its real tensors) or, for models it never loads, from architecture numbers
(:func:`pipeline.cards.modelarch.card_from_config`: parameter counts, bytes in a weight format of
:mod:`pipeline.cards.weightformats`), found by name in the card files of ``data/models/``, a local
``config.json`` or the Hugging Face cache (:mod:`pipeline.cards.registry`).  An imported run's card
can be pinned to the size of the weight file measured (:func:`pipeline.importers.cardmatch.card_with_file_size`).

What a card costs per decode step (weight and KV bytes read at batch B, expert coverage,
FLOPs) is the analysis's arithmetic: :mod:`pipeline.cards.stepcost`.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, field, fields
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
        kv_bytes_per_token: KV-cache bytes one token occupies over all layers (every layer
            counted, as if no layer had a sliding window; see :func:`pipeline.cards.stepcost.kv_bytes_per_sequence`).
        sliding_window: tokens a sliding-window layer keeps (None: no such layers).
        sliding_layers: how many of ``num_layers`` use the sliding window.
        max_context: the model's maximum context (``max_position_embeddings``), when known.
        quantization: the weights' one label: the format their bytes were counted in (``bf16``,
            ``q8_0``, ``bf16+experts:mxfp4``; :mod:`pipeline.cards.weightformats`), or for a card counted
            from an instantiated model its torch dtype (``float32``, ``bfloat16``), the dtype it ran in
            (which the MFU check compares with the probe's, :func:`pipeline.analysis.quality.implausible_mfu`);
            None when unknown.  Card files of runs before version 2 stored it twice, also as ``dtype``
            (:class:`pipeline.store.schemas.ModelCardFile` drops that copy on reading).
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
        file announces (refused on load, :mod:`pipeline.store.schemas`).  Kept, it would change nothing
        computed; the reader must hear of it.  ``source`` (the card's file) is named in the warning.
        """
        known = {f.name for f in fields(cls)}
        unknown = sorted(k for k in data if k not in known)
        if unknown:
            warnings.warn(f"{source or 'model card'}: unknown model card key(s) left out: {', '.join(unknown)}",
                          UserWarning, stacklevel=2)
        return cls(**{k: v for k, v in data.items() if k in known})
