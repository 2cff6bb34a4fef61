"""A streaming request's events and its record: what the hot loop keeps of one stream (:class:`RawStream`),
the parsing of each SSE event, the token accounting that turns a stream into a
:class:`~pipeline.core.records.RequestRecord` (:func:`finalize`), and the optional request fields a server accepts
(:class:`Features`).  Pure: no network (the HTTP client that fills a stream is :mod:`pipeline.loadgen.client`).

How many tokens a chunk carries (k).  ITL is per token (docs/definitions.md), so k matters.  The
hot loop never tokenizes (nor parses: it keeps each read's bytes and arrival, :func:`fold_reads` reads them
after the stream); a stream keeps each chunk's arrival, text, kind (visible content or
reasoning) and whatever ``completion_tokens`` it carried, plus the last usage of the stream.
After the repeat, :func:`finalize` hands that evidence to
:func:`pipeline.loadgen.tokencount.decide`, which chooses per request which count to trust
(server usage, per-chunk usage in one of its layouts, tokenized text, chunk count), spreads
the tokens over the chunks, and records the source, the reason and any flags; a request
whose every count is impossible (more chunks with text than ``max_tokens``) fails.

TTFT runs to the first streamed token of either kind (reasoning or visible content, a tool call's
fragments being visible output); the first visible token's arrival is kept apart (``first_content_s``).
Tokens a server held back until its final usage chunk are placed at that chunk's arrival
(``tokencount``'s "usage held back"), and a request whose events arrived in bursts of many per read
is flagged ``timed_by_intermediary`` (:func:`arrived_in_bursts`).  Reasoning tokens that
the server generated but never streamed are ``hidden_tokens``: counted in the output, kept
out of the decode rate.

A stream that ends without ``[DONE]``, a ``finish_reason`` or a final usage chunk (usage
outside any choice) was cut short
and is a failed request; so is a malformed event (bad JSON, an object of the wrong shape), a finish the server
gave up on (:data:`FAILED_FINISH`), a server error outside ``data:`` (:func:`pipeline.loadgen.sse.error_field`) and
an event longer than the request can need (:func:`pipeline.loadgen.streamcaps.event_bytes_max`).
Failed requests (HTTP status, error event, connection loss, timeout) are recorded with
``error`` set; metrics count them and keep them out of latency percentiles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from pipeline.core import scrub
from pipeline.loadgen import tokencount
from pipeline.loadgen.deltatext import delta_text
from pipeline.loadgen.sse import error_field, split_reads
from pipeline.loadgen.streamcaps import event_bytes_max, event_too_long
from pipeline.core.records import RequestRecord


@dataclass
class Features:
    """Optional request fields the server accepts (see :func:`detect_features`)."""

    ignore_eos: bool = True
    min_tokens: bool = True
    stream_options: bool = True
    continuous_usage_stats: bool = True
    dropped: list[str] = field(default_factory=list)
    usage_seen: bool | None = None
    per_chunk_usage_seen: bool | None = None
    prompt_overhead: int | None = None  # tokens the server's chat template adds to a prompt (set by the engine)

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON form for the point's meta."""
        return {"ignore_eos": self.ignore_eos, "min_tokens": self.min_tokens,
                "stream_options": self.stream_options, "continuous_usage_stats": self.continuous_usage_stats,
                "dropped": list(self.dropped), "usage_seen": self.usage_seen,
                "per_chunk_usage_seen": self.per_chunk_usage_seen, "prompt_overhead": self.prompt_overhead}


# --------------------------------------------------------------------------------------------
# one streaming request

@dataclass
class RawStream:
    """What the hot loop keeps of one request; :func:`finalize` turns it into a record.

    ``times``, ``texts``, ``visible`` and ``cum_usage`` have one entry per chunk that carried
    text or usage inside a choice: arrival (s since the point start), the text (content and
    reasoning together), whether it carried visible content, and the ``completion_tokens``
    the chunk reported (None when it reported none).  ``completion_tokens`` is the last
    usage of the stream; ``reasoning_tokens`` its ``completion_tokens_details.reasoning_tokens``.
    ``scheduled_s`` / ``lag_s``: open loop only, set by the scheduler (see ``RequestRecord``).

    ``read_s`` / ``reads``: what the client's hot loop keeps, one entry per socket read: its arrival (s since the
    point start, taken once when the read returned) and its bytes, unparsed; :func:`fold_reads` turns them into the
    per-chunk lists above (each event stamped with the arrival of the read that completed it) and empties them.
    """

    request_id: int
    warmup: bool
    queued_s: float
    sent_s: float
    times: list[float] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    cum_usage: list[int | None] = field(default_factory=list)
    visible: list[bool] = field(default_factory=list)
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    reasoning_tokens: int | None = None
    reasoning_seen: bool = False
    finish_reason: str | None = None
    done_seen: bool = False
    final_usage_seen: bool = False
    final_usage_s: float | None = None
    error: str | None = None
    scheduled_s: float | None = None
    lag_s: float | None = None
    read_s: list[float] = field(default_factory=list)
    reads: list[bytes] = field(default_factory=list)


#: Past this a server's count cannot be stored (Parquet's int64 columns) nor be a count of tokens: not a count.
MAX_COUNT = 2**63 - 1


def _count(value: Any) -> int | None:
    """A server's token count, or None when it is none: not an integer, negative, or beyond :data:`MAX_COUNT`
    (``usage.prompt_tokens`` = 2^64 − 1 was an OverflowError at the point's write, losing the point)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT else None


#: Finish reasons that end a request the server did not complete: vLLM's ``abort`` and ``error``
#: (``vllm/v1/engine/__init__.py``, ``FinishReason``), SGLang's ``{"type": "abort", "message": …}``.
FAILED_FINISH = ("abort", "error")


def _finish(raw: RawStream, reason: Any) -> None:
    """Keep a choice's ``finish_reason`` (a string, or SGLang's object with a ``type``); one of :data:`FAILED_FINISH`
    fails the request, its message quoted (scrubbed by the caller)."""
    said = reason.get("message") if isinstance(reason, dict) else None
    kind = reason.get("type") if isinstance(reason, dict) else reason
    raw.finish_reason = str(kind)[:80]
    if raw.finish_reason in FAILED_FINISH:
        raw.error = f'server ended the request with finish_reason "{raw.finish_reason}"' + (
            f": {str(said)[:200]}" if said else "")


def parse_event(raw: RawStream, obj: Any, now: float) -> None:
    """Fold one parsed SSE ``data:`` object into ``raw`` (sets ``raw.error`` for an error event or a malformed one)."""
    if not isinstance(obj, dict):
        raw.error = f"malformed stream event: expected a JSON object, got {type(obj).__name__}"
        return
    if "error" in obj and not obj.get("choices"):
        err = obj["error"]
        raw.error = "server error event: " + str(err.get("message", err) if isinstance(err, dict) else err)  # cut in stream_one
        return
    usage = obj.get("usage")
    choices = obj.get("choices")
    if choices is not None and not isinstance(choices, list):
        raw.error = "malformed stream event: choices is not a list"
        return
    choice = choices[0] if choices else None
    if choice is not None and not isinstance(choice, dict):
        raw.error = "malformed stream event: a choice is not an object"
        return
    visible, reasoning = delta_text(choice) if choice else ("", "")
    if choice and choice.get("finish_reason"):
        _finish(raw, choice["finish_reason"])
    ct = None
    if isinstance(usage, dict):
        ct = _count(usage.get("completion_tokens"))
        if ct is not None:
            raw.completion_tokens = ct
            if not choices:
                raw.final_usage_seen = True
                raw.final_usage_s = now
        pt = _count(usage.get("prompt_tokens"))
        if pt is not None:
            raw.prompt_tokens = pt
        details = usage.get("completion_tokens_details")
        if isinstance(details, dict) and _count(details.get("reasoning_tokens")) is not None:
            raw.reasoning_tokens = details["reasoning_tokens"]
    if reasoning:
        raw.reasoning_seen = True
    text = visible + reasoning
    if text or (choice and ct is not None):
        raw.times.append(now)
        raw.texts.append(text)
        raw.visible.append(bool(visible))
        raw.cum_usage.append(ct)


def fold_reads(raw: RawStream, secrets: tuple[str, ...] = (), max_tokens: int | None = None) -> None:
    """Parse the reads the hot loop kept (``raw.reads``, ``raw.read_s``) into ``raw``, then drop them.

    Each event's data (:func:`pipeline.loadgen.sse.split_reads`) is read with orjson and folded by
    :func:`parse_event` at the arrival of the read that completed it, the time the event was in the client's hands;
    ``[DONE]`` sets ``done_seen`` and ends the stream (later events are not read); an event that is not JSON or of
    the wrong shape, an error event, a server error sent outside ``data:`` (llama.cpp's ``error:`` field, an event
    of type ``error``: :func:`pipeline.loadgen.sse.error_field`), a failed finish (:data:`FAILED_FINISH`) or an event
    longer than ``max_tokens`` can need (:func:`pipeline.loadgen.streamcaps.event_bytes_max`) sets ``raw.error`` (the
    quoted text scrubbed of ``secrets`` and of any key-shaped token before it is cut,
    :func:`pipeline.core.scrub.scrub`) and ends it too.  A stream that already failed (a timeout, a lost connection)
    keeps its events up to the failure and its error, unless one of those events was itself an error, which came
    first.  A stream without reads is left as it is: folding twice changes nothing.
    """
    reads, times = raw.reads, raw.read_s
    if not reads:
        return
    raw.reads, raw.read_s = [], []
    prior, raw.error = raw.error, None
    _fold_events(raw, split_reads(reads), times, secrets, max_tokens)
    if raw.error is None:
        said = error_field(reads)
        if said is not None:
            raw.error = "server error event: " + _error_text(said)
    if raw.error is None:
        raw.error = prior
    else:
        raw.error = scrub.scrub(raw.error, secrets) or ""


def _error_text(said: bytes) -> str:
    """One line of a server's error: the ``message`` of its JSON (``{"error": {"message"}}`` or ``{"message"}``), else
    its text."""
    try:
        obj = orjson.loads(said)
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, dict):
        inner = obj.get("error", obj)
        obj = inner.get("message", inner) if isinstance(inner, dict) else inner
    text = said.decode("utf-8", "replace") if obj is None else str(obj)
    return (text or "(no text)")[:400].replace("\n", " ").replace("\r", " ")


def _fold_events(raw: RawStream, events: list[tuple[bytes, int]], times: list[float], secrets: tuple[str, ...],
                 max_tokens: int | None) -> None:
    loads, event_max = orjson.loads, event_bytes_max(max_tokens)
    for data, i in events:
        payload = data.strip()
        if payload == b"[DONE]":
            raw.done_seen = True
            return
        if len(payload) > event_max:  # never handed to the JSON reader (nor its text to a tokenizer)
            raw.error = event_too_long(len(payload), max_tokens)
            return
        try:
            obj = loads(payload)
        except orjson.JSONDecodeError:
            said = scrub.scrub(payload.decode("utf-8", "replace"), secrets) or ""
            raw.error = f"malformed stream event: not JSON ({said[:80]!r})"
            return
        parse_event(raw, obj, times[i])
        if raw.error is not None:
            return


# --------------------------------------------------------------------------------------------
# timing hidden by buffering

#: A request needs this many events carrying tokens before its reads are judged (fewer cannot tell a burst).
BURST_MIN_EVENTS = 8
#: Mean events per socket read at or above which a stream's tokens were released in bursts by a buffer.
BURST_EVENTS_PER_READ = 8.0


def arrived_in_bursts(times: list[float]) -> bool:
    """Whether a stream's token events arrived in bursts: at least :data:`BURST_MIN_EVENTS` events and at least
    :data:`BURST_EVENTS_PER_READ` of them per socket read on average.

    The client stamps every event of one read with that read's arrival, so equal times are one read.  A server
    writes one event per decode step (or per ``stream_interval`` steps, one event either way; a speculating
    server that writes one event per accepted token, at most its draft length + 1 per step), so a healthy stream
    reads about one event at a time; a whole response written at the end, or a proxy's buffer released in clumps
    (kekzl/imp #754, dstack #4269, c8s #140), gives many events per read, TTFT = E2EL or an ITL p50 of 0 — the
    intermediary's timing, not the server's.  Derived threshold: 8 events per read is more than one step of any
    server releases unless it speculates 7 tokens ahead.
    """
    if len(times) < BURST_MIN_EVENTS:
        return False
    return len(times) / len(set(times)) >= BURST_EVENTS_PER_READ


# --------------------------------------------------------------------------------------------
# token counts

def evidence(raw: RawStream, max_tokens: int | None = None, fixed_length: bool = False,
             usage_expected: bool = False) -> tokencount.Evidence:
    """What ``raw`` says about its token count, for :func:`pipeline.loadgen.tokencount.decide`."""
    return tokencount.Evidence(texts=raw.texts, per_chunk=raw.cum_usage, usage=raw.completion_tokens,
                               reasoning_tokens=raw.reasoning_tokens, reasoning_streamed=raw.reasoning_seen,
                               max_tokens=max_tokens, fixed_length=fixed_length, usage_expected=usage_expected,
                               final_usage_timed=raw.final_usage_s is not None)


def per_chunk_usage(raw: RawStream) -> bool:
    """True when every text chunk of the stream carried a ``completion_tokens`` (at least two chunks)."""
    with_text = [c for c, t in zip(raw.cum_usage, raw.texts) if t]
    return bool(with_text) and all(c is not None for c in with_text) and len(raw.cum_usage) >= 2


def chunk_counts(raw: RawStream, tokenizer: Any | None = None, max_tokens: int | None = None) -> list[int]:
    """Tokens carried by each chunk of ``raw`` (same length as ``raw.times``), per :mod:`pipeline.loadgen.tokencount`."""
    return tokencount.decide(evidence(raw, max_tokens), tokenizer).counts


def finalize(raw: RawStream, input_len: int, tokenizer: Any | None = None, max_tokens: int | None = None,
             features: Features | None = None) -> RequestRecord:
    """Turn one :class:`RawStream` into a :class:`RequestRecord`.

    The output count, its source and flags come from :func:`pipeline.loadgen.tokencount.decide`
    (``max_tokens``: what was asked for; ``features``: whether the server accepted a fixed
    length and reports usage).  A request that already failed keeps its error.
    """
    fixed = bool(features and (features.ignore_eos or features.min_tokens))
    expected = bool(features and features.usage_seen)
    usage_reported = raw.completion_tokens is not None
    dec = tokencount.decide(evidence(raw, max_tokens, fixed, expected), tokenizer)
    chunks = [[t, k] for t, k in zip(raw.times, dec.counts) if k > 0]
    if dec.held_back and raw.final_usage_s is not None:  # tokens that came only with the final usage chunk
        chunks.append([raw.final_usage_s, dec.held_back])
    first_content = next((t for t, k, v in zip(raw.times, dec.counts, raw.visible) if v and k > 0), None)
    error = raw.error
    if error is not None:  # a failed request's partial count is no evidence about the server's accounting
        dec.flags, dec.source, dec.reason = [], None, ""
    elif dec.error is not None:
        error = dec.error
    if error is None and tokencount.input_mismatch(raw.prompt_tokens, input_len,
                                                   features.prompt_overhead if features else None):
        dec.flags.append("input_tokens_mismatch")
        dec.reason += f"; the server counted {raw.prompt_tokens} prompt tokens for {input_len} built"
    if error is None and not chunks:
        error = "no tokens received"
    if error is None and arrived_in_bursts([t for t, _ in chunks]):
        dec.flags.append("timed_by_intermediary")
        dec.reason += (f"; {len(chunks)} events arrived in {len(set(t for t, _ in chunks))} reads: timed by a buffer "
                       "between server and client, not the server's TTFT, TPOT or ITL")
    return RequestRecord(
        request_id=raw.request_id, queued_s=raw.queued_s, sent_s=raw.sent_s,
        first_token_s=chunks[0][0] if chunks else None, done_s=chunks[-1][0] if chunks else None,
        chunks=chunks, input_tokens=raw.prompt_tokens if raw.prompt_tokens is not None else input_len,
        output_tokens=int(dec.output_tokens or 0), usage_reported=usage_reported, error=error, warmup=raw.warmup,
        first_content_s=first_content, hidden_tokens=dec.hidden_tokens, token_count_source=dec.source,
        token_count_reason=dec.reason or None, token_count_flags=list(dec.flags),
        scheduled_s=raw.scheduled_s, lag_s=raw.lag_s)
