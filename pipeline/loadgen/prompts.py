"""Prompts of an exact length in tokens, one per request, reproducible from a seed.

Prompts have an exact length in tokens: random token ids drawn with a per-point seed from
the model's tokenizer (special tokens excluded), decoded, re-encoded and corrected until the
round trip gives exactly ``input_len`` ids (:func:`make_prompts`).  Every request gets its
own prompt, so prefix caching cannot help and a rerun sends the same prompts.
"""

from __future__ import annotations

import random
import weakref
from typing import Any

# Keyed by the tokenizer object itself (weakly): an ``id()`` is reused once its object is freed,
# so a later tokenizer could be handed another model's vocabulary.
_VOCAB_CACHE: "weakref.WeakKeyDictionary[Any, list[int]]" = weakref.WeakKeyDictionary()


def prompt_vocab(tokenizer: Any) -> list[int]:
    """Token ids prompts are drawn from: ids that survive a decode → encode round trip on their own.

    Special tokens and whitespace-only tokens are excluded.  When enough of them (≥ 256) begin
    with a word boundary (a space, or SentencePiece's ``▁``), only those are kept: tokens that
    start a word do not merge with their neighbour on re-encoding, so random sequences of them
    round-trip exactly with byte-level BPE and SentencePiece tokenizers.
    """
    try:
        cached = _VOCAB_CACHE.get(tokenizer)
    except TypeError:  # not weakly referenceable (or unhashable): no cache
        cached = None
    if cached is not None:
        return cached
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    ids = [i for i in range(len(tokenizer)) if i not in special]
    texts = tokenizer.batch_decode([[i] for i in ids], skip_special_tokens=True, clean_up_tokenization_spaces=False)
    pieces = tokenizer.convert_ids_to_tokens(ids)
    enc = tokenizer(texts, add_special_tokens=False)["input_ids"]
    alone = [(i, piece) for i, t, e, piece in zip(ids, texts, enc, pieces) if t.strip() and e == [i]]
    starts = [i for i, piece in alone if isinstance(piece, str) and piece[:1] in ("Ġ", "▁", " ")]
    chosen = starts if len(starts) >= 256 else [i for i, _ in alone]
    if not chosen:
        chosen = ids
    try:
        _VOCAB_CACHE[tokenizer] = chosen
    except TypeError:
        pass
    return chosen


def make_prompts(tokenizer: Any, n: int, input_len: int, seed: int) -> tuple[list[str], int]:
    """``n`` prompts of exactly ``input_len`` tokens (no special tokens) from seeded random ids.

    Returns (prompts, how many could not be made exact — 0 for every tokenizer we know).
    Ids come from :func:`prompt_vocab`; a round trip decode → encode that still merges or
    splits tokens is corrected (re-encoded ids cut or topped up with fresh random ids, up to
    20 rounds).
    """
    return make_prompts_of(tokenizer, [input_len] * n, seed)


def make_prompts_of(tokenizer: Any, lengths: Any, seed: int, prefix_len: int = 0) -> tuple[list[str], int]:
    """One prompt per entry of ``lengths`` (tokens each, the shared prefix included), as :func:`make_prompts`.

    ``prefix_len`` > 0: the first ``prefix_len`` ids are drawn once and begin every prompt (a shared prefix, vLLM's
    ``--random-prefix-len``), the rest drawn per prompt.  With no prefix the ids are drawn as :func:`make_prompts`
    draws them (the same seed gives the same prompts).
    """
    rng = random.Random(seed)
    allowed = prompt_vocab(tokenizer)
    prefix = rng.choices(allowed, k=prefix_len) if prefix_len else []
    prompts, inexact = [], 0
    for input_len in (int(x) for x in lengths):
        ids = prefix[:input_len] + rng.choices(allowed, k=max(input_len - len(prefix), 0))
        for _round in range(20):
            text = tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
            back = tokenizer.encode(text, add_special_tokens=False)
            if len(back) == input_len:
                break
            ids = back[:input_len] if len(back) > input_len else back + rng.choices(allowed, k=input_len - len(back))
        else:
            inexact += 1
        prompts.append(text)
    return prompts, inexact
