"""Which output token count to trust for one streamed request, and how its tokens spread over the chunks (pure).

A server can report the count wrongly: per-chunk usage that is a running sum of running totals (197 tokens reported as
19,503), per-chunk usage that counts only that chunk (always 1), a usage that stops rising
while text keeps arriving, a count above the ``max_tokens`` that was asked for, a stream
without usage on a server that otherwise reports it.  Each of these is evidence, and
:func:`decide` weighs it per request.

The sources, in order of preference:

1. ``usage``: the server's usage (``completion_tokens`` of the last usage object of the
   stream, normally the final usage chunk);
2. ``per_chunk_usage``: the ``completion_tokens`` carried by every chunk, read in the first
   of three layouts that fits (:func:`per_chunk_layouts`): ``cumulative`` (vLLM's
   ``continuous_usage_stats``: the running total), ``per_chunk`` (the count of that chunk
   alone) or ``running_sum`` (a running sum of running totals);
3. ``tokenized_text``: the streamed text (visible and reasoning) encoded with the model's
   tokenizer;
4. ``chunk_count``: one token per chunk that carried text.

Rules (derived: a chunk with text carries at least one token; batchmark asks for exactly
``max_tokens``, so no request can hold more):

- a count is *possible* when ``chunks with text + hidden ≤ count ≤ max_tokens``;
- of the possible server counts (usage, per-chunk layouts), the one nearest the text
  evidence wins (the tokenized text plus hidden tokens, else ``max_tokens`` when the server
  accepted ``ignore_eos``/``min_tokens``); ties go to the order above;
- a server count that is off the tokenized text by more than a factor of 2 (after hidden
  tokens) loses to the tokenized text, and so does one that is not ``max_tokens`` when the
  server accepted a fixed length and the tokenized text is exactly ``max_tokens``;
- no possible server count: the tokenized text when possible, else the chunk count;
- a token's text split over two events (a multi-byte character, a detokenizer that flushes
  late) gives more chunks with text than tokens: when the server's usage and the tokenized
  text agree on a count within ``max_tokens``, that count stands (agreeing evidence beats the
  chunk count), and each token is placed in the chunk where its text ends
  (:func:`token_end_counts`);
- usage held back (FastDeploy PR #8113: empty deltas whose running per-chunk usage stops short, the last tokens
  only in the final usage): under a fixed length, a final usage of exactly ``max_tokens`` above the cumulative
  per-chunk count is the count, the rest arriving with the final usage chunk (``held_back``: the caller places
  them there, so E2EL ends at it; flag ``usage_held_back``);
- nothing possible (more chunks with text than ``max_tokens``, and no agreeing usage and
  text): the request fails with an error, so an impossible count never reaches a throughput
  figure; so does more text than ``max_tokens`` tokens can carry
  (:func:`pipeline.loadgen.streamcaps.text_chars_max`), which is never handed to the tokenizer.

Hidden tokens: a reasoning model may generate tokens it never streams and report them only in
``usage.completion_tokens_details.reasoning_tokens``.  When no reasoning text was streamed,
those tokens are *hidden*: they count in ``output_tokens`` (the server generated them inside
the measured window) but not in the chunks, so the decode rate (TPOT, ITL) is measured on
streamed tokens only and is not inflated by spreading hidden tokens over visible chunks.

Every request records its source, a one-line reason, and flags naming each piece of evidence
that was set aside (:data:`FLAG_TEXT`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.loadgen.chunkcounts import per_chunk_layouts, reconcile_counts
from pipeline.loadgen.streamcaps import text_chars_max, text_too_long

SOURCES = ("usage", "per_chunk_usage", "tokenized_text", "chunk_count")
DISAGREE_FACTOR = 2.0  # a server count more than 2× off the tokenized text loses to the text

FLAG_TEXT = {
    "usage_missing": "the stream carried no usage although the server reports usage",
    "usage_above_max_tokens": "the usage count exceeds max_tokens",
    "usage_below_text_chunks": "the usage count is below the number of chunks with text",
    "usage_stopped_rising": "per-chunk usage stopped rising while text kept arriving",
    "usage_disagrees_with_per_chunk": "the final usage and the per-chunk usage disagree",
    "usage_disagrees_with_text": "the server's count disagrees with the tokenized text and max_tokens",
    "per_chunk_usage_impossible": "no reading of the per-chunk usage gives a possible count",
    "count_impossible": "more chunks with text than max_tokens",
    "count_below_max_tokens": "fewer tokens than max_tokens although the server accepted a fixed length",
    "input_tokens_mismatch": "the server counted a different prompt length than the client built",
    "usage_held_back": "per-chunk usage stopped short; the last tokens came only with the final usage",
    "timed_by_intermediary": "the tokens arrived in bursts of many events per read (a buffer between server and client)",
}

#: A served prompt count is a mismatch beyond ``factor × expected + tokens`` or below ``(expected − tokens) / factor``
#: (derived: a BOS/EOS or a short system prefix moves a count by a few tokens; a tokenizer or
#: chat-template mismatch by a factor, as in vLLM PR #42532).
INPUT_TOLERANCE_FACTOR = 1.5
INPUT_TOLERANCE_TOKENS = 4


def length_mismatch(measured: float | None, requested: float, overhead: float | None = None) -> bool:
    """Whether a measured token count is off the requested one beyond the tolerance (see :func:`input_mismatch`)."""
    return input_mismatch(measured, requested, overhead)


def input_mismatch(served: float | None, requested: float, overhead: float | None = None) -> bool:
    """Whether the server's ``prompt_tokens`` (``served``) is off the prompt the client built beyond the tolerance.

    ``expected = requested + overhead``, the overhead being the tokens the model's chat template adds
    on the chat endpoint (0 on completions or when unknown; a BOS fits in the 4 tokens).  A mismatch when ``served > 1.5 × expected + 4`` or
    ``1.5 × served + 4 < expected`` (:data:`INPUT_TOLERANCE_FACTOR`, :data:`INPUT_TOLERANCE_TOKENS`).
    False without a served count.
    """
    if served is None or requested <= 0:
        return False
    expected = requested + max(overhead or 0, 0)
    return (served > INPUT_TOLERANCE_FACTOR * expected + INPUT_TOLERANCE_TOKENS
            or INPUT_TOLERANCE_FACTOR * served + INPUT_TOLERANCE_TOKENS < expected)


def token_end_counts(texts: list[str], tokenizer: Any) -> list[int] | None:
    """Tokens that end in each chunk when the joined text is tokenized (offsets of a fast tokenizer); None without offsets.

    A token whose text is split over two chunks (a multi-byte character, a detokenizer that flushes
    late) counts in the chunk where its text ends, so a chunk holding only the start of a token carries 0.
    """
    joined = "".join(texts)
    try:
        offsets = tokenizer(joined, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    except Exception:  # a slow tokenizer without offsets, or text it cannot encode
        return None
    ends, pos = [], 0
    for t in texts:
        pos += len(t)
        ends.append(pos)
    counts = [0] * len(texts)
    import bisect

    for start, end in offsets:
        at = max(end - 1, start)
        counts[min(bisect.bisect_right(ends, at), len(texts) - 1)] += 1
    return counts


def _as_count(value: Any) -> int | None:
    """``value`` when it is a non-negative int (JSON integer), else None (missing or corrupt)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


@dataclass
class Evidence:
    """What one stream says about its token count.

    Attributes:
        texts: text of each chunk (visible content and reasoning together; "" when none).
        per_chunk: ``completion_tokens`` each chunk carried (None when it carried none).
        usage: the last usage ``completion_tokens`` of the stream (None when none).
        reasoning_tokens: ``usage.completion_tokens_details.reasoning_tokens`` (None when absent).
        reasoning_streamed: whether any reasoning text was streamed.
        max_tokens: the ``max_tokens`` asked for (None when unknown).
        fixed_length: the server accepted ``ignore_eos``/``min_tokens`` (the count should be ``max_tokens``).
        usage_expected: the server reported usage on the feature probe.
        final_usage_timed: the stream's final usage chunk (usage outside any choice) arrived, at a known time.
    """

    texts: list[str]
    per_chunk: list[int | None]
    usage: int | None
    reasoning_tokens: int | None = None
    reasoning_streamed: bool = False
    max_tokens: int | None = None
    fixed_length: bool = False
    usage_expected: bool = False
    final_usage_timed: bool = False


@dataclass
class Decision:
    """The count of one request.

    Attributes:
        output_tokens: tokens generated (streamed + hidden); 0 when ``error`` is set.
        counts: tokens carried by each chunk (same length as the evidence's ``texts``);
            they sum to ``output_tokens − hidden_tokens − held_back``.
        hidden_tokens: generated but never streamed (reasoning reported only in usage).
        source: one of :data:`SOURCES` (None when no count was possible).
        reason: one line: why this source.
        flags: keys of :data:`FLAG_TEXT` for the evidence set aside.
        error: set when no possible count exists.
        held_back: tokens that arrived only with the final usage chunk (the caller places them at its arrival).
    """

    output_tokens: int
    counts: list[int]
    hidden_tokens: int = 0
    source: str | None = None
    reason: str = ""
    flags: list[str] = field(default_factory=list)
    error: str | None = None
    held_back: int = 0


def _stopped_rising(values: list[int | None], texts: list[str]) -> bool:
    """True when per-chunk usage rose, then stayed flat over a later chunk with text."""
    seen = [(v, t) for v, t in zip(values, texts) if v is not None]
    rose = False
    for (p, _), (v, t) in zip(seen, seen[1:]):
        if v > p:
            rose = True
        elif rose and t and v == p:
            return True
    return False


def _held_back(ev: Evidence, layouts: dict[str, list[int]], usage: int | None, hidden: int) -> list[int] | None:
    """The cumulative per-chunk counts of a stream whose last tokens were held back (module docstring), else None."""
    cum = layouts.get("cumulative")
    if (not ev.fixed_length or not ev.final_usage_timed or hidden or cum is None or usage is None
            or usage != ev.max_tokens or sum(cum) >= usage):
        return None
    if any(k < 1 for k, t in zip(cum, ev.texts) if t):
        return None
    return cum


def decide(ev: Evidence, tokenizer: Any | None = None) -> Decision:
    """Choose the output token count of one request and its per-chunk spread, per the module docstring's rules."""
    texts = ev.texts
    n_chunks = len(texts)
    k_text = sum(1 for t in texts if t)
    m = ev.max_tokens
    flags: list[str] = []
    hidden = 0
    chars, most = sum(map(len, texts)), text_chars_max(m)
    if most is not None and chars > most:  # more text than m tokens can carry: never handed to a tokenizer
        return Decision(0, [0] * n_chunks, 0, None, "no possible count", ["count_impossible"], text_too_long(chars, m))
    rt = _as_count(ev.reasoning_tokens)
    if rt and not ev.reasoning_streamed and (m is None or k_text + rt <= m):
        hidden = rt
    tokenized = _tokenized(texts, tokenizer) if k_text else None
    ref = tokenized + hidden if tokenized is not None else (m if ev.fixed_length else None)
    usage = _as_count(ev.usage)
    # A token's text split over two events: more chunks with text than tokens.  When the server's usage and
    # the re-tokenized text agree (and fit max_tokens), that agreement beats the chunk count.
    split = (usage is not None and tokenized is not None and 0 < tokenized < k_text and usage == tokenized + hidden
             and (m is None or usage <= m))
    lo = (tokenized if split else k_text) + hidden

    def possible(n: int | None) -> bool:
        return n is not None and n >= max(lo, 1) and (m is None or n <= m)

    layouts = per_chunk_layouts(ev.per_chunk, texts)
    if usage is None and ev.usage_expected:
        flags.append("usage_missing")
    if usage is not None and m is not None and usage > m:
        flags.append("usage_above_max_tokens")
    if usage is not None and usage < lo:
        flags.append("usage_stopped_rising" if _stopped_rising(ev.per_chunk, texts) else "usage_below_text_chunks")
    held = _held_back(ev, layouts, usage, hidden)
    if held is not None:
        n_held = usage - sum(held)
        why = (f"the server's final usage, max_tokens under a fixed length ({FLAG_TEXT['usage_held_back']}: "
               f"per-chunk usage ended at {sum(held)}, {n_held} tokens came with the final usage chunk)")
        return Decision(usage, held, 0, "usage", why, flags + ["usage_held_back"], held_back=n_held)

    server = _server_candidates(usage, layouts, texts, hidden, possible, flags)
    chosen = _server_count(server, ref, ev, tokenized, hidden, flags)
    if chosen is None and possible(tokenized + hidden if tokenized is not None else None):
        chosen = ("tokenized_text", tokenized + hidden, None, "the streamed text, tokenized")
    if chosen is None and possible(k_text + hidden):
        chosen = ("chunk_count", k_text + hidden, None, "one token per chunk with text")
    if chosen is None:
        if k_text == 0:
            return Decision(0, [0] * n_chunks, 0, None, "no text was streamed", flags, "no tokens received")
        flags.append("count_impossible")
        return Decision(0, [0] * n_chunks, 0, None, "no possible count", flags,
                        f"impossible token count: {k_text} chunks with text for max_tokens {m}")

    source, total, counts, why = chosen
    if ev.fixed_length and m is not None and total < m:
        flags.append("count_below_max_tokens")
    streamed_total = total - hidden
    counts = _chunk_counts(texts, counts, layouts, streamed_total, split, tokenizer)
    return Decision(total, counts, hidden, source, _reason(why, flags, k_text if split else None, streamed_total, hidden),
                    flags)


def _tokenized(texts: list[str], tokenizer: Any | None) -> int | None:
    """The tokens of the streamed text re-encoded with ``tokenizer`` (None without one, or when it cannot encode it)."""
    if tokenizer is None:
        return None
    try:
        return len(tokenizer.encode("".join(texts), add_special_tokens=False))
    except Exception:  # a tokenizer that cannot encode odd text is no evidence
        return None


def _server_candidates(usage: int | None, layouts: dict[str, list[int]], texts: list[str], hidden: int,
                       possible: Any, flags: list[str]) -> list[tuple[str, int, list[int] | None, str]]:
    """The server's possible counts (its usage, each per-chunk layout with its hidden tokens outside or inside),
    as (source, total, per-chunk counts, why); ``flags`` gets the evidence that no layout fits or that usage and the
    layouts disagree."""
    server: list[tuple[str, int, list[int] | None, str]] = []
    if possible(usage):
        server.append(("usage", usage, None, "the server's usage"))
    possible_layouts: dict[str, list[int]] = {}
    for name, counts in layouts.items():
        if any(k < 1 for k, t in zip(counts, texts) if t):
            continue  # a chunk with text carries at least one token
        for total in dict.fromkeys((sum(counts) + hidden, sum(counts))):  # hidden tokens outside, or inside, the chunk counts
            if possible(total):
                possible_layouts[name] = counts
                server.append(("per_chunk_usage", total, counts, f"per-chunk usage read as {name.replace('_', ' ')}"))
                break
    if layouts and not possible_layouts:
        flags.append("per_chunk_usage_impossible")
    if usage is not None and possible(usage) and possible_layouts and all(
            sum(c) + hidden != usage and sum(c) != usage for c in possible_layouts.values()):
        flags.append("usage_disagrees_with_per_chunk")
    return server


def _reason(why: str, flags: list[str], split_chunks: int | None, streamed_total: int, hidden: int) -> str:
    """The one-line reason of a count: why its source was chosen, the evidence set aside, a split text
    (``split_chunks`` chunks with text carrying ``streamed_total`` tokens), the hidden reasoning tokens."""
    set_aside = [FLAG_TEXT[f] for f in flags if f != "usage_missing"]
    reason = why + (f" ({'; '.join(set_aside)})" if set_aside else "")
    if "usage_missing" in flags:
        reason += " (this stream carried no usage)"
    if split_chunks is not None:
        reason += f"; {split_chunks} chunks with text carried {streamed_total} tokens (a token's text split over events)"
    if hidden:
        reason += f"; {hidden} reasoning tokens generated but not streamed"
    return reason


def _server_count(server: list[tuple[str, int, list[int] | None, str]], ref: int | None, ev: Evidence,
                  tokenized: int | None, hidden: int, flags: list[str]) -> tuple[str, int, list[int] | None, str] | None:
    """Of the server's possible counts (``(source, total, per-chunk counts, why)``), the one nearest the reference
    ``ref`` (the tokenized text plus hidden tokens, else max_tokens of a fixed-length request; ties by
    :data:`SOURCES`' order), or None when it disagrees with the streamed text (flagged ``usage_disagrees_with_text``)."""
    if not server:
        return None
    m = ev.max_tokens
    order = {s: i for i, s in enumerate(SOURCES)}
    if ref is not None:
        best = min(server, key=lambda c: (abs(c[1] - ref), order[c[0]]))
    else:
        best = server[0]
    if ev.fixed_length and tokenized is not None and tokenized + hidden == m and best[1] != m:
        flags.append("usage_disagrees_with_text")  # what was asked for and what arrived agree; the server does not
        return None
    if tokenized is not None and tokenized > 0:
        streamed = best[1] - hidden
        if streamed > DISAGREE_FACTOR * tokenized or streamed * DISAGREE_FACTOR < tokenized:
            if not (ev.fixed_length and best[1] == m):
                flags.append("usage_disagrees_with_text")
                return None
    return best


def _chunk_counts(texts: list[str], counts: list[int] | None, layouts: dict[str, list[int]], streamed_total: int,
                  split: bool, tokenizer: Any | None) -> list[int]:
    """The tokens each chunk carried, summing to ``streamed_total``: the chosen layout's, another per-chunk layout
    that sums to it, the token ends of a split text, one per chunk with text, else each chunk's own tokens
    reconciled to the total (:func:`reconcile_counts`)."""
    if counts is None or sum(counts) != streamed_total:
        counts = next((c for c in layouts.values() if sum(c) == streamed_total
                       and all(k >= 1 for k, t in zip(c, texts) if t)), None)
    if counts is None and split and tokenizer is not None:
        ends = token_end_counts(texts, tokenizer)
        counts = ends if ends is not None and sum(ends) == streamed_total else None
    if counts is not None:
        return counts
    ones = [1 if t else 0 for t in texts]
    if sum(ones) == streamed_total:
        return ones
    if tokenizer is not None:
        try:
            ones = [len(tokenizer.encode(t, add_special_tokens=False)) if t else 0 for t in texts]
        except Exception:
            pass
    return reconcile_counts(ones, streamed_total)
